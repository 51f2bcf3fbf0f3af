//! `.kpfs/metrics`: the engine's state in Prometheus' text exposition format, with the
//! meaning of Kafka's JMX metrics (`kafka.log:type=Log`, `kafka.cluster:type=Partition`,
//! `LogCleaner`, `LogCleanerManager`)
//! so dashboards and alerts written for Kafka translate name for name.
//!
//! Kafka keeps the cleaner gauges per cleaner thread (the last pass each thread made);
//! kpfs keeps the last pass per topic, so "max over threads" becomes "max over topics".
//! The cleaner gauges are integers truncated the way Kafka's `(int)` casts truncate them.
//! Counters live in memory and start at zero on every mount, which Prometheus' `rate()`
//! and `increase()` treat as a counter reset.

use std::fmt::Write;
use std::sync::atomic::Ordering;

use super::cleaner::cleaner_view;
use super::cleaner_manager::CleanerState;
use super::partition::RefusalReason;
use super::Engine;

/// One metric family: its HELP and TYPE lines, then its samples (also the cluster
/// mount's, which shows the families a cluster can answer).
pub(crate) struct Family {
    name: &'static str,
    help: &'static str,
    kind: &'static str,
    samples: Vec<(String, String)>,
}

impl Family {
    pub(crate) fn new(name: &'static str, kind: &'static str, help: &'static str) -> Family {
        Family {
            name,
            help,
            kind,
            samples: Vec::new(),
        }
    }

    pub(crate) fn add(&mut self, labels: &[(&str, &str)], value: impl ToString) {
        let mut text = String::new();
        if !labels.is_empty() {
            text.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    text.push(',');
                }
                let _ = write!(text, "{k}=\"{}\"", escape_label(v));
            }
            text.push('}');
        }
        self.samples.push((text, value.to_string()));
    }

    pub(crate) fn render(&self, out: &mut String) {
        let _ = writeln!(out, "# HELP {} {}", self.name, self.help);
        let _ = writeln!(out, "# TYPE {} {}", self.name, self.kind);
        for (labels, value) in &self.samples {
            let _ = writeln!(out, "{}{labels} {value}", self.name);
        }
    }
}

/// Topic names cannot hold these characters today; escaping keeps the output parseable
/// should the name rules ever widen.
fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The whole `.kpfs/metrics` text.
pub(crate) fn render(engine: &Engine) -> String {
    let gauge = "gauge";
    let counter = "counter";
    let mut segments = Family::new(
        "kpfs_log_num_log_segments",
        gauge,
        "Segments of the partition, the active one included (kafka.log:type=Log,name=NumLogSegments).",
    );
    let mut size = Family::new(
        "kpfs_log_size_bytes",
        gauge,
        "Sum of the partition's segment .log sizes in bytes (kafka.log:type=Log,name=Size).",
    );
    let mut start = Family::new(
        "kpfs_log_start_offset",
        gauge,
        "First offset still in the log (kafka.log:type=Log,name=LogStartOffset).",
    );
    let mut end = Family::new(
        "kpfs_log_end_offset",
        gauge,
        "Offset the next appended record gets (kafka.log:type=Log,name=LogEndOffset).",
    );
    let mut stable_lag = Family::new(
        "kpfs_partition_last_stable_offset_lag",
        gauge,
        "Log end offset (the high watermark) minus the last stable offset: offsets of the open transactions and what follows them, which read_committed consumers and `log` do not see yet (kafka.cluster:type=Partition,name=LastStableOffsetLag).",
    );
    let mut appended_records = Family::new(
        "kpfs_appended_records_total",
        counter,
        "Records appended since the mount.",
    );
    let mut appended_bytes = Family::new(
        "kpfs_appended_bytes_total",
        counter,
        "Batch bytes appended to segments since the mount.",
    );
    let mut refused = Family::new(
        "kpfs_refused_records_total",
        counter,
        "Records of refused appends since the mount, by reason; keyless_compacted is kafka.server:type=BrokerTopicMetrics,name=NoKeyCompactedTopicRecordsPerSec.",
    );
    let mut deleted = Family::new(
        "kpfs_segments_deleted_total",
        counter,
        "Segments deleted by retention since the mount, by the rule that took them.",
    );
    let mut tombstones = Family::new(
        "kpfs_tombstones_removed_total",
        counter,
        "Tombstones the cleaner dropped since the mount (superseded or past their delete horizon).",
    );
    let mut compacted = Family::new(
        "kpfs_records_removed_by_compaction_total",
        counter,
        "Records the cleaner dropped since the mount, removed tombstones included.",
    );

    let now = engine.clock().now_ms();
    let mut max_clean_ms = 0u64;
    let mut max_utilization = 0f64;
    let mut max_delay_ms = 0i64;
    let (mut read, mut written) = (0u64, 0u64);
    let mut max_dirty = 0f64;
    let mut uncleanable = 0u64;
    let mut uncleanable_bytes = 0u64;

    for name in engine.topic_names() {
        // A topic deleted since the listing is simply not reported.
        let Some(topic) = engine.topic(&name) else {
            continue;
        };
        let config = topic.config();
        for partition in topic.partitions().iter() {
            let index = partition.index().to_string();
            let label = [("topic", name.as_str()), ("partition", index.as_str())];
            let with = |key: &'static str, value: &'static str| [label[0], label[1], (key, value)];
            // Before the snapshot: the last stable offset read then is not above the log
            // end the snapshot shows.
            let lso = partition.log().last_stable_offset();
            let snap = partition.log().snapshot();
            segments.add(&label, snap.segments.len());
            size.add(&label, snap.segments.iter().map(|s| s.size()).sum::<u64>());
            start.add(&label, snap.log_start_offset);
            end.add(&label, snap.active().next_offset());
            stable_lag.add(&label, snap.active().next_offset().saturating_sub(lso));

            let stats = &partition.stats;
            appended_records.add(&label, stats.appended_records.load(Ordering::Relaxed));
            appended_bytes.add(&label, stats.appended_bytes.load(Ordering::Relaxed));
            for reason in RefusalReason::ALL {
                refused.add(
                    &with("reason", reason.label()),
                    stats.refused(reason).load(Ordering::Relaxed),
                );
            }
            for (reason, count) in [
                ("time", &stats.segments_deleted_time),
                ("size", &stats.segments_deleted_size),
                ("log_start_offset", &stats.segments_deleted_log_start),
            ] {
                deleted.add(&with("reason", reason), count.load(Ordering::Relaxed));
            }
            let cleaner = &partition.cleaner;
            tombstones.add(&label, cleaner.tombstones_removed());
            compacted.add(&label, cleaner.records_removed());

            if let Some(p) = cleaner.last_pass() {
                max_clean_ms = max_clean_ms.max(p.elapsed_ms);
                max_utilization = max_utilization.max(p.buffer_utilization);
                max_delay_ms = max_delay_ms.max(p.max_compaction_delay_ms);
                read += p.bytes_read;
                written += p.bytes_written;
            }
            if !config.cleanup_policy.compact {
                continue;
            }
            let view = cleaner_view((&snap, lso), cleaner.checkpoint(), &config, now);
            if matches!(cleaner.state(), CleanerState::Uncleanable(_)) {
                uncleanable += 1;
                uncleanable_bytes += view.cleanable_bytes;
            } else {
                max_dirty = max_dirty.max(view.ratio());
            }
        }
    }

    let mut committed = Family::new(
        "kpfs_consumer_group_committed_offset",
        gauge,
        "Offset a consumer group committed for the partition: the next record its consumers read (kafka-consumer-groups.sh's CURRENT-OFFSET).",
    );
    let mut lag = Family::new(
        "kpfs_consumer_group_lag",
        gauge,
        "Records of the partition the group has not consumed and committed: log end offset minus committed offset (kafka-consumer-groups.sh's LAG; a consumer's records-lag, kafka.consumer:type=consumer-fetch-manager-metrics, counts from its fetch position instead). No sample when the topic is gone.",
    );
    for listing in engine.groups().list_groups() {
        // A group deleted since the listing is simply not reported.
        for p in engine.group_lags(&listing.group_id).unwrap_or_default() {
            let partition = p.partition.to_string();
            let labels = [
                ("group", listing.group_id.as_str()),
                ("topic", p.topic.as_str()),
                ("partition", partition.as_str()),
            ];
            committed.add(&labels, p.committed);
            if let Some(l) = p.lag() {
                lag.add(&labels, l);
            }
        }
    }

    let single = |name: &'static str, help: &'static str, value: String| {
        let mut f = Family::new(name, gauge, help);
        f.add(&[], value);
        f
    };
    let cleaner_families = [
        single(
            "kpfs_log_cleaner_max_clean_time_secs",
            "Longest last cleaning pass over the compacted topics, whole seconds (kafka.log:type=LogCleaner,name=max-clean-time-secs).",
            (max_clean_ms / 1000).to_string(),
        ),
        single(
            "kpfs_log_cleaner_max_buffer_utilization_percent",
            "Highest offset-map utilization of the last passes, percent (kafka.log:type=LogCleaner,name=max-buffer-utilization-percent).",
            ((100.0 * max_utilization) as i64).to_string(),
        ),
        single(
            "kpfs_log_cleaner_recopy_percent",
            "100 * bytes written / bytes read over the last passes (kafka.log:type=LogCleaner,name=cleaner-recopy-percent).",
            ((100.0 * written as f64 / read.max(1) as f64) as i64).to_string(),
        ),
        single(
            "kpfs_log_cleaner_max_compaction_delay_secs",
            "Longest time past max.compaction.lag.ms at the start of the last passes, whole seconds (kafka.log:type=LogCleaner,name=max-compaction-delay-secs).",
            (max_delay_ms / 1000).to_string(),
        ),
        single(
            "kpfs_log_cleaner_manager_max_dirty_percent",
            "Highest dirty ratio (cleanable / (clean + cleanable) bytes) of the cleanable compacted topics now, percent (kafka.log:type=LogCleanerManager,name=max-dirty-percent).",
            ((100.0 * max_dirty) as i64).to_string(),
        ),
        single(
            "kpfs_log_cleaner_manager_uncleanable_partitions_count",
            "Compacted topics the cleaner gave up on after an error, until remount (kafka.log:type=LogCleanerManager,name=uncleanable-partitions-count).",
            uncleanable.to_string(),
        ),
        single(
            "kpfs_log_cleaner_manager_uncleanable_bytes",
            "Cleanable bytes of the uncleanable topics (kafka.log:type=LogCleanerManager,name=uncleanable-bytes).",
            uncleanable_bytes.to_string(),
        ),
        single(
            "kpfs_log_cleaner_dead_thread_count",
            "Cleaner threads that died since the cleaner threads last started (kafka.log:type=LogCleaner,name=DeadThreadCount).",
            engine.dead_cleaner_threads().to_string(),
        ),
    ];

    let mut out = String::new();
    for family in [
        &segments,
        &size,
        &start,
        &end,
        &stable_lag,
        &appended_records,
        &appended_bytes,
        &refused,
        &deleted,
        &tombstones,
        &compacted,
        &committed,
        &lag,
    ]
    .into_iter()
    .chain(cleaner_families.iter())
    {
        family.render(&mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::engine::format::ClientBatch;
    use crate::engine::ManualClock;

    const T0: i64 = 1_764_430_000_000;

    fn engine(dir: &std::path::Path, clock: &Arc<ManualClock>) -> Engine {
        Engine::open_for_test(dir, clock.clone())
    }

    /// The value of the sample whose name and labels are exactly `series`.
    fn value(text: &str, series: &str) -> String {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no sample {series} in\n{text}"))
            .to_string()
    }

    #[test]
    fn every_family_has_help_and_type_once_and_samples_follow_them() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let e = engine(dir.path(), &clock);
        e.create_topic("a", 1).unwrap();
        e.create_topic("b", 1).unwrap();
        let text = render(&e);
        let mut declared = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                assert!(matches!(kind, "gauge" | "counter"), "{line}");
                assert!(!declared.contains(&name.to_string()), "{name} twice");
                declared.push(name.to_string());
            } else if !line.starts_with("# HELP ") {
                let name = line.split(['{', ' ']).next().unwrap();
                assert_eq!(Some(&name.to_string()), declared.last(), "{line}");
                assert!(name.starts_with("kpfs_"), "{line}");
            }
        }
        assert_eq!(
            text.matches("kpfs_refused_records_total{topic=\"b\",partition=\"0\",reason=")
                .count(),
            3
        );
        assert_eq!(value(&text, "kpfs_log_cleaner_dead_thread_count"), "0");
    }

    #[test]
    fn log_gauges_and_counters_follow_appends_retention_and_refusals() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let e = engine(dir.path(), &clock);
        let t = e.create_topic("t", 1).unwrap();
        t.update_config(b"internal.segment.bytes=200\nretention.bytes=300\nmax.message.bytes=100")
            .unwrap();
        for i in 0..20 {
            t.append_lines(format!("record-{i:02}\n").as_bytes())
                .unwrap();
        }
        let before = render(&e);
        let snap = t.partition(0).unwrap().log().snapshot();
        assert!(snap.segments.len() > 2);
        assert_eq!(
            value(
                &before,
                "kpfs_log_num_log_segments{topic=\"t\",partition=\"0\"}"
            ),
            snap.segments.len().to_string()
        );
        assert_eq!(
            value(&before, "kpfs_log_end_offset{topic=\"t\",partition=\"0\"}"),
            "20"
        );
        assert_eq!(
            value(
                &before,
                "kpfs_appended_records_total{topic=\"t\",partition=\"0\"}"
            ),
            "20"
        );
        let deleted = e.run_retention_once();
        assert!(deleted > 0);
        let after = render(&e);
        let snap = t.partition(0).unwrap().log().snapshot();
        assert_eq!(
            value(&after, "kpfs_log_start_offset{topic=\"t\",partition=\"0\"}"),
            snap.log_start_offset.to_string()
        );
        assert_eq!(
            value(&after, "kpfs_log_size_bytes{topic=\"t\",partition=\"0\"}"),
            snap.segments
                .iter()
                .map(|s| s.size())
                .sum::<u64>()
                .to_string()
        );
        assert_eq!(
            value(
                &after,
                "kpfs_segments_deleted_total{topic=\"t\",partition=\"0\",reason=\"size\"}"
            ),
            deleted.to_string()
        );
        assert!(t.append_lines(&[b'x'; 150]).is_err());
        t.update_config(b"cleanup.policy=compact").unwrap();
        assert!(t.append_lines(b"one\ntwo\n").is_err());
        let refused = render(&e);
        let series = |reason: &str| {
            format!("kpfs_refused_records_total{{topic=\"t\",partition=\"0\",reason=\"{reason}\"}}")
        };
        assert_eq!(value(&refused, &series("too_large")), "1");
        assert_eq!(value(&refused, &series("keyless_compacted")), "2");
        assert_eq!(value(&refused, &series("invalid")), "0");
        t.update_config(b"cleanup.policy=delete\nparse.key=true")
            .unwrap();
        assert!(t.append_lines(b"no separator\n").is_err());
        assert_eq!(value(&render(&e), &series("invalid")), "1");
    }

    #[test]
    fn the_last_stable_offset_lag_counts_from_the_oldest_open_transaction() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let e = engine(dir.path(), &clock);
        let t = e.create_topic("t", 2).unwrap();
        let lag = |p: u32| {
            let series =
                format!("kpfs_partition_last_stable_offset_lag{{topic=\"t\",partition=\"{p}\"}}");
            value(&render(&e), &series)
        };
        t.append_lines_after(Some(0), b"", b"a\n").unwrap();
        assert_eq!(
            lag(0),
            "0",
            "no transaction: the last stable offset is the log end"
        );
        let txn = ClientBatch {
            transactional: true,
            ..ClientBatch::PLAIN
        };
        t.append_produced_in_txn(0, &txn.of_values((7, 0, 0), T0, &["x", "y"]))
            .unwrap();
        t.append_lines_after(Some(0), b"", b"b\n").unwrap();
        assert_eq!(
            lag(0),
            "3",
            "offsets 1 to 3 wait for the transaction from 1"
        );
        assert_eq!(lag(1), "0");
        let commit = crate::engine::log::TxnMarkerWrite::new((7, 1), true, 0, 2);
        t.append_txn_marker(0, &commit).unwrap();
        assert_eq!(lag(0), "0");
    }

    #[test]
    fn cleaner_gauges_come_from_the_last_pass_and_the_dirty_ratio_now() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let e = engine(dir.path(), &clock);
        let t = e.create_topic("c", 1).unwrap();
        t.update_config(
            b"cleanup.policy=compact\nsegment.ms=3000\nmin.cleanable.dirty.ratio=0.01\nparse.key=true\nkey.separator=:\nnull.marker=NULL\ndelete.retention.ms=0",
        )
        .unwrap();
        let dirty = "kpfs_log_cleaner_manager_max_dirty_percent";
        t.append_lines(b"a:1\nb:1\na:NULL\n").unwrap();
        assert_eq!(
            value(&render(&e), dirty),
            "0",
            "the active segment is never cleanable"
        );
        clock.advance(4000);
        t.append_lines(b"b:2\n").unwrap();
        // Nothing is clean yet and the rolled segment is all dirty.
        assert_eq!(value(&render(&e), dirty), "100");
        let mut map = crate::engine::offset_map::OffsetMap::new(24 * 100, 0.9);
        let (_, first) = e.run_cleaner_once_with(&mut map).unwrap();
        let after = render(&e);
        assert_eq!(
            value(&after, "kpfs_log_cleaner_recopy_percent"),
            ((100.0 * first.bytes_written as f64 / first.bytes_read as f64) as i64).to_string()
        );
        assert!(first.bytes_written < first.bytes_read);
        assert_eq!(
            value(&after, "kpfs_log_cleaner_max_buffer_utilization_percent"),
            ((100.0 * first.buffer_utilization) as i64).to_string()
        );
        assert_ne!(
            value(&after, "kpfs_log_cleaner_max_buffer_utilization_percent"),
            "0"
        );
        // a:1 is superseded by its tombstone, which the first pass keeps.
        assert_eq!(
            value(
                &after,
                "kpfs_records_removed_by_compaction_total{topic=\"c\",partition=\"0\"}"
            ),
            "1"
        );
        assert_eq!(
            value(
                &after,
                "kpfs_tombstones_removed_total{topic=\"c\",partition=\"0\"}"
            ),
            "0"
        );
        assert_eq!(value(&after, dirty), "0", "everything closed is clean now");
        clock.advance(4000);
        t.append_lines(b"c:1\n").unwrap();
        let (_, second) = e.run_cleaner_once_with(&mut map).unwrap();
        assert_eq!((second.records_removed, second.tombstones_removed), (2, 1));
        let after = render(&e);
        assert_eq!(
            value(
                &after,
                "kpfs_records_removed_by_compaction_total{topic=\"c\",partition=\"0\"}"
            ),
            "3"
        );
        assert_eq!(
            value(
                &after,
                "kpfs_tombstones_removed_total{topic=\"c\",partition=\"0\"}"
            ),
            "1"
        );
        assert_eq!(
            value(
                &after,
                "kpfs_log_cleaner_manager_uncleanable_partitions_count"
            ),
            "0"
        );
    }
}
