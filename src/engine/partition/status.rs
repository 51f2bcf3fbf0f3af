//! The `status` file: where the log stands, why retention does (not) delete and why
//! compaction is (not) due, from the numbers those rules use, and configs that do not
//! do what they seem.

use std::sync::atomic::Ordering;

use crate::engine::cleaner;
use crate::engine::cleaner_manager::CleanerState;
use crate::engine::config::{TopicConfig, TopicKey};
use crate::engine::log::LogSnapshot;

use super::Partition;
use crate::engine::topic_core::TopicCore;

/// Why nothing the cleaner threads do happens: they never start.
const CLEANER_OFF: &str = "log.cleaner.enable=false, so no cleaner thread runs";

impl Partition {
    /// The `status` file: `name: value` lines (the mount shows
    /// `Engine::topic_status_text`, which adds the consumer groups).
    #[cfg(feature = "internals")]
    pub fn status_text(&self) -> String {
        self.status_text_with(|_| Vec::new())
    }

    /// The `status` file with lines the engine adds from what the topic does not know
    /// (the consumer groups' lag): `more` gets the log end offset the file shows, so
    /// its lines agree with it.
    pub(crate) fn status_text_with(
        &self,
        more: impl FnOnce(u64) -> Vec<(&'static str, String)>,
    ) -> String {
        // Before the snapshot: the last stable offset read then is not above the log end
        // the snapshot shows.
        let last_stable_offset = self.log.last_stable_offset();
        let open_transactions = self.open_transactions();
        let snap = self.log.snapshot();
        let config = self.config();
        let active = snap.active().info();
        let size: u64 = snap.segments.iter().map(|s| s.size()).sum();
        let policy = match (config.cleanup_policy.compact, config.cleanup_policy.delete) {
            (true, true) => "compact,delete",
            (true, false) => "compact",
            (false, true) => "delete",
            (false, false) => "",
        };
        let mut out = String::new();
        let mut line = |k: &str, v: String| {
            out.push_str(k);
            out.push_str(": ");
            out.push_str(&v);
            out.push('\n');
        };
        line("topic", self.name().to_string());
        line("log_start_offset", snap.log_start_offset.to_string());
        line("log_end_offset", active.next_offset.to_string());
        // Kafka's last stable offset: `log` and read_committed consumers see the records
        // below it; the open transactions hold it where the oldest of them starts.
        line("last_stable_offset", last_stable_offset.to_string());
        for txn in open_transactions {
            line("open_transaction", txn);
        }
        // Kafka's recovery point: everything below it is on stable storage; a crash makes
        // the next mount validate what lies above it.
        line("recovery_point", self.log.recovery_point().to_string());
        line("size_bytes", size.to_string());
        line("segment_count", snap.segments.len().to_string());
        line("active_segment_base_offset", active.base_offset.to_string());
        line("cleanup_policy", policy.to_string());
        line("stream_bytes", active.stream_end.to_string());
        line(
            "appended_records",
            self.stats
                .appended_records
                .load(Ordering::Relaxed)
                .to_string(),
        );
        line(
            "reader_skips",
            self.stats.reader_skips.load(Ordering::Relaxed).to_string(),
        );
        line(
            "segments_deleted_time",
            self.stats
                .segments_deleted_time
                .load(Ordering::Relaxed)
                .to_string(),
        );
        line(
            "segments_deleted_size",
            self.stats
                .segments_deleted_size
                .load(Ordering::Relaxed)
                .to_string(),
        );
        line(
            "segments_deleted_log_start",
            self.stats
                .segments_deleted_log_start
                .load(Ordering::Relaxed)
                .to_string(),
        );
        let future = self.future_timestamp_segment.load(Ordering::Relaxed);
        if future >= 0 {
            line(
                "future_timestamp_segment",
                format!("{future} (contains future timestamp(s), making it ineligible to be deleted by retention.ms)"),
            );
        }
        if let Some(reason) = self.log.poison_reason() {
            line(
                "write_state",
                format!("refusing writes until remount: {reason}"),
            );
        } else {
            line("write_state", "ok".into());
        }
        if let Some(cut) = &self.last_recovery {
            line("last_recovery", cut.clone());
        }
        for warning in self.config_warnings() {
            line("config_warning", warning);
        }
        let now = self.topic.clock.now_ms();
        for (k, v) in self.retention_diagnostics(&snap, &config, now) {
            line(k, v);
        }
        if config.cleanup_policy.compact {
            for (k, v) in self.cleaner_diagnostics(&snap, &config, now) {
                line(k, v);
            }
        }
        for (k, v) in more(active.next_offset) {
            line(k, v);
        }
        out
    }

    /// The partition's line in its topic's `status`: where its log stands and what
    /// retention makes of its oldest segment, from the numbers of its own `status`.
    pub(crate) fn status_summary(&self) -> String {
        // Before the snapshot, as in `status_text_with`.
        let last_stable_offset = self.log.last_stable_offset();
        let snap = self.log.snapshot();
        let config = self.config();
        let size: u64 = snap.segments.iter().map(|s| s.size()).sum();
        let mut out = format!(
            "{} log_start_offset={} log_end_offset={} last_stable_offset={last_stable_offset} \
             size_bytes={} segment_count={}",
            self.index(),
            snap.log_start_offset,
            snap.active().info().next_offset,
            size,
            snap.segments.len()
        );
        let now = self.topic.clock.now_ms();
        let verdict = self
            .retention_diagnostics(&snap, &config, now)
            .into_iter()
            .find(|(k, _)| *k == "retention_oldest_segment" || *k == "retention");
        if let Some((key, why)) = verdict {
            out.push_str(&format!(" {key}: {why}"));
        }
        out
    }

    /// The open transactions, oldest first, as `status` shows them: what keeps the last
    /// stable offset below the log end.
    pub(crate) fn open_transactions(&self) -> Vec<String> {
        self.log
            .ongoing_txns()
            .into_iter()
            .map(|(producer_id, first_offset)| {
                format!("producer_id={producer_id} first_offset={first_offset}")
            })
            .collect()
    }

    /// Configs that do not do what they seem, each with why: shown in `status` and
    /// reported in `.kpfs/errors` when a config write sets them.
    pub(crate) fn config_warnings(&self) -> Vec<String> {
        let mut out = self.topic.config_warnings();
        if let Some(reason) = self.unsaved_renderings.lock().as_ref() {
            out.push(format!(
                "the renderings of earlier lines are not saved yet ({reason}): kpfs saves them as soon as there is space; until then a crash leaves those lines their lengths but not always their separator and null marker"
            ));
        }
        out
    }
}

impl TopicCore {
    /// The topic's configs that do not do what they seem, each with why.
    pub(crate) fn config_warnings(&self) -> Vec<String> {
        let overrides = self.overrides();
        let config = self.config();
        let set = |key: TopicKey| overrides.get(key).is_some();
        let mut out = Vec::new();
        if let Some(reason) = self.unsaved_overrides().as_ref() {
            out.push(format!(
                "the overrides in force are not saved yet ({reason}): kpfs saves them as soon as there is space; until then a crash or an unmount loses them"
            ));
        }
        let policy = &config.cleanup_policy;
        if policy.compact && !policy.delete {
            for key in [TopicKey::RetentionMs, TopicKey::RetentionBytes] {
                if set(key) {
                    out.push(format!(
                        "{key} has no effect: cleanup.policy=compact deletes nothing by time or size (use compact,delete)"
                    ));
                }
            }
        }
        if policy.delete
            && config.retention_bytes >= 0
            && config.retention_bytes < i64::from(config.segment_size())
        {
            out.push(format!(
                "retention.bytes {} is below the segment size {}: retention deletes whole segments only, so the partition keeps up to one segment more than retention.bytes",
                config.retention_bytes,
                config.segment_size()
            ));
        }
        if policy.delete
            && config.retention_ms >= 0
            && config.max_segment_ms() > config.retention_ms
        {
            out.push(format!(
                "segment.ms {} is above retention.ms {}: segments roll only on an append after segment.ms, so on a quiet topic records outlive retention.ms until the next append rolls the segment",
                config.max_segment_ms(),
                config.retention_ms
            ));
        }
        if policy.compact && !config.parse_key {
            out.push("cleanup.policy has compact but parse.key=false: lines have no key, so every append is refused (set parse.key=true)".to_string());
        }
        if policy.compact && config.delete_retention_ms == 0 {
            out.push("delete.retention.ms=0: tombstones can be removed by the next cleaning pass, before slow readers see the delete".to_string());
        }
        out
    }
}

impl Partition {
    /// Why the oldest segment is (not yet) deletable, answering "why is my data not
    /// deleted" from the numbers retention uses.
    fn retention_diagnostics(
        &self,
        snap: &LogSnapshot,
        config: &TopicConfig,
        now: i64,
    ) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if config.cleanup_policy.compact && !self.topic.broker().read().cleaner_enable() {
            out.push((
                "retention",
                format!("never: {CLEANER_OFF}, and a topic with compact gets retention from those threads (as in Kafka)"),
            ));
            return out;
        }
        if !config.cleanup_policy.delete {
            out.push((
                "retention",
                "cleanup.policy has no delete: retention.ms and retention.bytes have no effect (only log-start-offset deletion applies)".to_string(),
            ));
            return out;
        }
        let oldest = &snap.segments[0];
        let only_active = snap.segments.len() == 1;
        if oldest.is_empty() {
            out.push((
                "retention_oldest_segment",
                "the log is empty: nothing to delete".to_string(),
            ));
            return out;
        }
        let time = if config.retention_ms < 0 {
            "never by time (retention.ms=-1)".to_string()
        } else {
            let ts = oldest.largest_timestamp();
            if ts > now {
                format!(
                    "never by time while its largest timestamp {ts} ({}) is in the future",
                    crate::engine::clock::format_time_ms(ts)
                )
            } else {
                let at = ts.saturating_add(config.retention_ms).saturating_add(1);
                format!(
                    "by time once its largest timestamp {} ({}) is older than retention.ms {}: at {} or the first retention check after",
                    ts,
                    crate::engine::clock::format_time_ms(ts),
                    config.retention_ms,
                    crate::engine::clock::format_time_ms(at)
                )
            }
        };
        out.push((
            "retention_oldest_segment",
            format!("segment {}: {time}", oldest.base_offset()),
        ));
        let size: u64 = snap.segments.iter().map(|s| s.size()).sum();
        let by_size = if config.retention_bytes < 0 {
            "off (retention.bytes=-1)".to_string()
        } else {
            format!(
                "partition {size} bytes vs retention.bytes {}: the oldest segment ({} bytes) goes when the excess {} reaches its size",
                config.retention_bytes,
                oldest.size(),
                size as i128 - i128::from(config.retention_bytes)
            )
        };
        out.push(("retention_size", by_size));
        if only_active {
            out.push((
                "retention_note",
                "all records are in the active segment: it is deleted only when it expires as a whole (then a new empty one is rolled first); it rolls on the next append after segment.ms or at segment.bytes".to_string(),
            ));
        }
        out
    }

    /// Why compaction is (not) due, the cleaner's state and its last pass.
    fn cleaner_diagnostics(
        &self,
        snap: &LogSnapshot,
        config: &TopicConfig,
        now: i64,
    ) -> Vec<(&'static str, String)> {
        let lso = self.log.last_stable_offset();
        let view = cleaner::cleaner_view((snap, lso), self.cleaner.checkpoint(), config, now);
        let mut out = vec![
            ("dirty_ratio", format!("{:.4}", view.ratio())),
            (
                "min_cleanable_dirty_ratio",
                config.min_cleanable_dirty_ratio.to_string(),
            ),
            ("first_dirty_offset", view.first_dirty_offset.to_string()),
            (
                "first_uncleanable_offset",
                view.first_uncleanable_offset.to_string(),
            ),
            ("clean_bytes", view.clean_bytes.to_string()),
            ("cleanable_bytes", view.cleanable_bytes.to_string()),
        ];
        let state = match self.cleaner.state() {
            CleanerState::Idle => "idle".to_string(),
            CleanerState::Cleaning => "cleaning".to_string(),
            CleanerState::Uncleanable(why) => format!("uncleanable: {why}"),
        };
        out.push(("cleaner_state", state));
        let due = match view.why_not_due(config) {
            None if view.max_compaction_delay_ms > 0 => format!(
                "yes: max.compaction.lag.ms {} passed {} ms ago",
                config.max_compaction_lag_ms, view.max_compaction_delay_ms
            ),
            None => format!(
                "yes: dirty ratio {:.4} > {}",
                view.ratio(),
                config.min_cleanable_dirty_ratio
            ),
            Some(why) => format!("no: {why}"),
        };
        let due = if self.topic.broker().read().cleaner_enable() {
            due
        } else {
            format!("no: {CLEANER_OFF} (with it on: {due})")
        };
        out.push(("compaction_due", due));
        out.push(("cleaner_passes", self.cleaner.passes().to_string()));
        if let Some(p) = self.cleaner.last_pass() {
            out.push((
                "last_clean",
                format!(
                    "at {} offsets [{}, {}){} took {} ms: read {} bytes, wrote {} bytes, removed {} records ({} tombstones), kept {} tombstones, map utilization {:.1}%",
                    crate::engine::clock::format_time_ms(p.started_ms),
                    p.first_dirty_offset,
                    p.end_offset,
                    if p.partial { " partial" } else { "" },
                    p.elapsed_ms,
                    p.bytes_read,
                    p.bytes_written,
                    p.records_removed,
                    p.tombstones_removed,
                    p.tombstones_retained,
                    p.buffer_utilization * 100.0
                ),
            ));
        }
        out
    }
}
