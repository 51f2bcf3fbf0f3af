//! One topic = one Kafka partition: its log, its configuration and the appends of its
//! `log` file. Around it: the line protocol that turns written bytes into records
//! (`protocol`), the reader that renders records into the `log` stream (`reader`),
//! retention applied step by step (`retention`) and the `status` file (`status`).
//!
//! The `log` stream: every record has a stream position fixed at append time (the sum of
//! the rendered sizes of all records before it). The size of `log` is the end of the
//! stream and never decreases; retention and compaction leave gaps that readers skip.
//! A reader's kernel offset therefore advances by the bytes actually returned, and each
//! open handle keeps a [`LogCursor`] that maps its offset back to a record.

mod capture;
mod fetch;
mod protocol;
mod reader;
mod renderings;
mod retention;
mod status;

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock, RwLockWriteGuard};

use super::append_watch::AppendSignal;
use super::clock::{format_time_ms, Clock};
use super::config::{BrokerConfig, ConfigChange, DescribedConfig, TopicConfig, TopicOverrides};
use super::error::{BatchSize, EngineError, InternalTopicAction, Result};
use super::files::write_or_defer;
pub use super::format::TOPIC_CONFIG_FILE;
use super::format::{decode_header, kpfs_topic_dir, BatchBuilder, OFFSETS_TOPIC};
use super::limits::PARSED_RECORDS_KEPT;
use super::log::{
    first_oversized_record, AppendInfo, Durability, Log, OpenReport, WriteBytes, WriteRecords,
};
use super::log_loader::remove_stale_temporary;
use super::log_start_checkpoint::LogStartCheckpoint;
use super::produce::{validate_produced, ProduceOutcome};
use protocol::{count_lines, parse_lines, PARSED};
pub(crate) use renderings::validate_renderings;
use renderings::{LineRendering, PastRenderings};

pub use capture::LogCapture;
#[cfg(any(test, feature = "internals"))]
pub use capture::CAPTURE_GRACE_MS;
#[cfg(feature = "internals")]
pub use fetch::FetchOutcome;
pub use fetch::{FetchedRange, OffsetQuery};
pub use reader::LogCursor;

/// A file in the partition directory, as `segments/` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackingFile {
    pub name: String,
    pub(crate) size: u64,
    /// `st_blocks` of the file: 512-byte units allocated (less than `size` for a sparse,
    /// preallocated index).
    pub(crate) blocks: u64,
    pub(crate) mtime_ms: i64,
}

/// Counters shown in `status` and `.kpfs/metrics`.
#[derive(Debug, Default)]
pub(crate) struct TopicStats {
    pub(crate) appended_records: AtomicU64,
    pub(crate) appended_bytes: AtomicU64,
    pub(crate) reader_skips: AtomicU64,
    pub(crate) segments_deleted_time: AtomicU64,
    pub(crate) segments_deleted_size: AtomicU64,
    pub(crate) segments_deleted_log_start: AtomicU64,
    /// Records of refused appends, by reason (a refused write refuses all its records).
    pub(crate) refused_keyless_compacted: AtomicU64,
    pub(crate) refused_too_large: AtomicU64,
    pub(crate) refused_invalid: AtomicU64,
}

/// Why an append was refused, as the metrics label it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RefusalReason {
    KeylessCompacted,
    TooLarge,
    Invalid,
}

impl RefusalReason {
    pub(crate) const ALL: [RefusalReason; 3] = [
        RefusalReason::KeylessCompacted,
        RefusalReason::TooLarge,
        RefusalReason::Invalid,
    ];

    /// The refusal an append error counts as; `None` for errors that are not the
    /// records' fault (I/O, a poisoned log).
    pub(crate) fn of(error: &EngineError) -> Option<RefusalReason> {
        match error {
            EngineError::RecordTooLarge { .. }
            | EngineError::BatchOverSegmentSize { .. }
            | EngineError::RecompressedTooLarge { .. } => Some(RefusalReason::TooLarge),
            EngineError::KeylessOnCompacted { .. } => Some(RefusalReason::KeylessCompacted),
            EngineError::MissingKeySeparator { .. }
            | EngineError::InvalidRecord { .. }
            | EngineError::InvalidProducedBatch { .. }
            | EngineError::ProduceRequestRule { .. }
            | EngineError::UnreadableBatch { .. }
            | EngineError::RecordsRejected { .. }
            | EngineError::CorruptMessage { .. }
            | EngineError::InvalidProducerEpoch { .. }
            | EngineError::OutOfOrderSequence { .. }
            | EngineError::InvalidTxnState { .. } => Some(RefusalReason::Invalid),
            _ => None,
        }
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            RefusalReason::KeylessCompacted => "keyless_compacted",
            RefusalReason::TooLarge => "too_large",
            RefusalReason::Invalid => "invalid",
        }
    }
}

impl TopicStats {
    pub(crate) fn refused(&self, reason: RefusalReason) -> &AtomicU64 {
        match reason {
            RefusalReason::KeylessCompacted => &self.refused_keyless_compacted,
            RefusalReason::TooLarge => &self.refused_too_large,
            RefusalReason::Invalid => &self.refused_invalid,
        }
    }
}

pub struct Topic {
    name: String,
    log: Log,
    broker: Arc<RwLock<BrokerConfig>>,
    overrides: RwLock<TopicOverrides>,
    /// Why the overrides in force are not yet in `topic.properties` (the disk was full
    /// when they changed); saved as soon as there is space.
    unsaved_overrides: Mutex<Option<String>>,
    config: RwLock<Arc<TopicConfig>>,
    /// The bytes of the renderings `log` lines were appended under before `config`'s.
    past_renderings: RwLock<Arc<PastRenderings>>,
    /// Why the rendering timeline is not yet in `renderings` (the disk was full when a
    /// change recorded it); saved as soon as there is space, like the overrides.
    unsaved_renderings: Mutex<Option<String>>,
    /// Held shared by each append from the config it reads until its records are in the
    /// log, and exclusively by a change of rendering (see [`Topic::remember_rendering`]).
    rendering_gate: RwLock<()>,
    clock: Arc<dyn Clock>,
    modified_ms: AtomicI64,
    /// The first segment seen holding future timestamps (for `status`), or -1.
    future_timestamp_segment: AtomicI64,
    pub(crate) stats: TopicStats,
    pub cleaner: super::cleaner_manager::LogCleaningState,
    pub(crate) events: super::events::EventLog,
    /// The data directory's `log-start-offset-checkpoint`, which DeleteRecords writes.
    log_starts: Arc<LogStartCheckpoint>,
    /// Wakes long-poll fetches waiting for this topic's appends.
    append_signal: AppendSignal,
    /// The capture `.kpfs/snapshot/TOPIC/log` shows now, if any.
    capture: capture::CaptureSlot,
    /// What recovery cut when this mount opened the topic, for `status`.
    last_recovery: Option<String>,
}

impl std::fmt::Debug for Topic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Topic").field("name", &self.name).finish()
    }
}

impl Topic {
    /// Opens (or creates) the topic stored in `dir` (`DATA_DIR/TOPIC-0`), starting its
    /// log where `log_starts` says, if above its first segment.
    pub(crate) fn open(
        name: &str,
        dir: &Path,
        broker: Arc<RwLock<BrokerConfig>>,
        clock: Arc<dyn Clock>,
        durability: Durability,
        log_starts: Arc<LogStartCheckpoint>,
    ) -> Result<(Topic, OpenReport)> {
        let config_path = kpfs_topic_dir(dir).join(TOPIC_CONFIG_FILE);
        remove_stale_temporary(&config_path);
        let overrides = match std::fs::read_to_string(&config_path) {
            Ok(text) => TopicOverrides::from_properties(&text)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => TopicOverrides::default(),
            Err(e) => {
                return Err(EngineError::io(
                    format!("read {}", config_path.display()),
                    e,
                ))
            }
        };
        let config = broker.read().resolve_topic(&overrides);
        let mut past_renderings = PastRenderings::load(dir);
        let (log, report) = Log::open(dir, name, &config, clock.clone(), durability)?;
        let unsaved_renderings = Mutex::new(None);
        if past_renderings.end_at(log.log_end_offset()) {
            // Offsets past the recovered log end will be appended under the config now.
            if let Err(e) = past_renderings.save(&unsaved_renderings) {
                tracing::warn!(topic = name, error = %e, "cannot shorten the renderings file to the recovered log end");
            }
        }
        if let Some(log_start) = log_starts.get(name) {
            log.restore_log_start_offset(log_start)?;
        }
        let modified = log
            .snapshot()
            .active()
            .modified()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or_else(|| clock.now_ms(), |d| d.as_millis() as i64);
        let events = super::events::EventLog::default();
        let now = clock.now_ms();
        let mut last_recovery = None;
        for cut in &report.truncated {
            let what = format!("{} {}", cut.file, cut.describe());
            events.record(now, "recovery", &what);
            last_recovery = Some(format!("at {}: {what}", format_time_ms(now)));
        }
        Ok((
            Topic {
                name: name.to_string(),
                log,
                broker,
                overrides: RwLock::new(overrides),
                unsaved_overrides: Mutex::new(None),
                config: RwLock::new(Arc::new(config)),
                past_renderings: RwLock::new(Arc::new(past_renderings)),
                unsaved_renderings,
                rendering_gate: RwLock::new(()),
                clock,
                modified_ms: AtomicI64::new(modified),
                future_timestamp_segment: AtomicI64::new(-1),
                stats: TopicStats::default(),
                cleaner: Default::default(),
                events,
                log_starts,
                append_signal: AppendSignal::default(),
                capture: Default::default(),
                last_recovery,
            },
            report,
        ))
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub fn log(&self) -> &Log {
        &self.log
    }

    pub fn dir(&self) -> &Path {
        self.log.dir()
    }

    /// The effective configuration now.
    pub fn config(&self) -> Arc<TopicConfig> {
        self.config.read().clone()
    }

    /// Re-resolves the effective config after a broker config change.
    pub(crate) fn refresh_config(&self) {
        // Overrides before the broker config, the order of a topic config change: the
        // other order can deadlock with it behind a waiting broker config writer.
        let overrides = self.overrides.read();
        let resolved = self.broker.read().resolve_topic(&overrides);
        *self.config.write() = Arc::new(resolved);
    }

    /// Appends records: every `\n` ends one record, and a non-empty remainder after the
    /// last `\n` is one more record. All or nothing: on error nothing is appended.
    /// Returns the number of records appended.
    pub fn append_lines(&self, data: &[u8]) -> Result<u64> {
        Ok(self.append_lines_info(data)?.records)
    }

    pub fn append_lines_info(&self, data: &[u8]) -> Result<AppendInfo> {
        self.append_write(WriteBytes::new(data))
    }

    /// [`Topic::append_lines`] of `head` followed by `body`, as one write: `head` holds
    /// complete lines (an earlier write's unterminated line, finished by this one), so a
    /// writer need not copy `body` behind it.
    pub fn append_lines_after(&self, head: &[u8], body: &[u8]) -> Result<u64> {
        assert!(
            head.is_empty() || head.ends_with(b"\n"),
            "the head of a write holds complete lines"
        );
        Ok(self.append_write(WriteBytes { head, body })?.records)
    }

    fn append_write(&self, data: WriteBytes<'_>) -> Result<AppendInfo> {
        let result = self
            .refuse_internal(InternalTopicAction::Append)
            .and_then(|()| self.append_parsed(data));
        if let Err(e) = &result {
            self.note_refused_append(e, count_lines(data.head) + count_lines(data.body));
        }
        result
    }

    /// Refuses an unterminated line of `len` bytes (its newline has not arrived yet) that
    /// can no longer become a record: even the smallest batch that could hold it, this
    /// line's record alone, is over `max.message.bytes`. Refusing it now keeps a
    /// stream without newlines from growing a writer's buffer without bound. Counted as
    /// one refused record.
    pub(crate) fn check_unterminated_line(&self, len: usize) -> Result<()> {
        let config = self.config();
        let max = config.max_message_bytes.max(0) as u64;
        // The line's smallest possible record: its key separator and two null markers
        // taken out, since they may leave the key and value null.
        let keying = if config.parse_key {
            config.key_separator.len() + 2 * config.null_rendering().len()
        } else {
            0
        };
        let value_len = len.saturating_sub(keying) as i64;
        let smallest = BatchBuilder::single_record_batch_size(-1, value_len) as u64;
        if smallest <= max {
            return Ok(());
        }
        let error = EngineError::RecordTooLarge {
            partition: self.log.partition().to_string(),
            size: BatchSize::AtLeast(smallest),
            max,
        };
        self.note_refused_append(&error, 1);
        Err(error)
    }

    /// Records a refused append of `records` records in `events` and the refusal
    /// counters.
    fn note_refused_append(&self, error: &EngineError, records: u64) {
        self.events
            .record(self.clock.now_ms(), "refused-append", &error.to_string());
        if let Some(reason) = RefusalReason::of(error) {
            self.stats
                .refused(reason)
                .fetch_add(records, Ordering::Relaxed);
        }
    }

    fn append_parsed(&self, data: WriteBytes<'_>) -> Result<AppendInfo> {
        let _rendering = self.rendering_gate.read();
        let config = self.config();
        let info = if config.parse_key || config.cleanup_policy.compact {
            PARSED.with_borrow_mut(|records| {
                records.clear();
                let parsed = parse_lines(data.head, 0, &config, self.log.partition(), records)
                    .and_then(|()| {
                        parse_lines(
                            data.body,
                            data.head.len(),
                            &config,
                            self.log.partition(),
                            records,
                        )
                    });
                let appended = parsed.and_then(|()| {
                    if records.is_empty() {
                        return Ok(AppendInfo::default());
                    }
                    self.log
                        .append(data, WriteRecords::Parsed(records), &config)
                });
                // One write of a million empty lines should not pin 32 MiB for good.
                records.shrink_to(PARSED_RECORDS_KEPT);
                appended
            })
        } else {
            // Without keys every line is a record whose value is the line: nothing to
            // parse but the lengths.
            if data.is_empty() {
                return Ok(AppendInfo::default());
            }
            let max = config.max_message_bytes.max(0) as u64;
            if let Some(batch) = first_oversized_record(data, WriteRecords::Plain, max) {
                return Err(EngineError::RecordTooLarge {
                    partition: self.log.partition().to_string(),
                    size: BatchSize::Exactly(batch),
                    max,
                });
            }
            self.log.append(data, WriteRecords::Plain, &config)
        }?;
        self.note_appended(&info, &config);
        Ok(info)
    }

    /// Counts an append and records its rolls in `events`.
    fn note_appended(&self, info: &AppendInfo, config: &TopicConfig) {
        if info.records == 0 {
            return;
        }
        self.append_signal.appended();
        self.stats
            .appended_records
            .fetch_add(info.records, Ordering::Relaxed);
        self.stats
            .appended_bytes
            .fetch_add(info.bytes, Ordering::Relaxed);
        self.modified_ms
            .store(info.appended_at_ms, Ordering::Relaxed);
        for (offset, reason) in &info.rolls {
            tracing::info!(topic = %self.name, base_offset = offset, %reason, "rolled segment");
            let why = match reason {
                super::segment::RollReason::Size => format!(
                    "the active segment plus the incoming batch would exceed the segment size {}",
                    config.segment_size()
                ),
                super::segment::RollReason::Time => format!(
                    "the segment's first record is older than segment.ms {} minus its jitter",
                    config.max_segment_ms()
                ),
                super::segment::RollReason::IndexFull => {
                    "an index of the active segment is full".to_string()
                }
                super::segment::RollReason::Retention => {
                    "retention expired every segment".to_string()
                }
            };
            self.events.record(
                self.clock.now_ms(),
                "roll",
                &format!("new segment at offset {offset}: reason={reason}: {why}"),
            );
        }
    }

    /// Kafka's Produce for this topic's one partition: `records` is the partition's
    /// records field, one RecordBatch v2 from a client. Validated as Kafka's
    /// `LogValidator` does (every refusal named after Kafka's error, nothing appended),
    /// given offsets at the log end, stored in the topic's `compression.type`, and its
    /// records take their places in the `log` stream, so `cat log` shows them at once.
    /// A retry of one of its producer's last five batches gets the original offsets and
    /// is not appended again.
    // The Kafka listener (src/kafka) calls it; until it is built in, only tests do.
    pub fn append_produced(&self, records: &[u8]) -> Result<ProduceOutcome> {
        if let Err(e) = self.refuse_internal(InternalTopicAction::Append) {
            let count = decode_header(records).map_or(0, |h| u64::from(h.record_count));
            self.note_refused_append(&e, count);
            return Err(e);
        }
        self.append_internal(records)
    }

    /// Whether the topic is Kafka's internal `__consumer_offsets`, written only by the
    /// group coordinator.
    pub fn is_internal(&self) -> bool {
        self.name == OFFSETS_TOPIC
    }

    /// Refuses `action` on an internal topic, as Kafka's `InvalidTopicException`.
    pub(crate) fn refuse_internal(&self, action: InternalTopicAction) -> Result<()> {
        if self.is_internal() {
            return Err(EngineError::InternalTopic {
                name: self.name.clone(),
                action,
            });
        }
        Ok(())
    }

    /// [`Topic::append_produced`] without the internal-topic refusal: the group
    /// coordinator's records of `__consumer_offsets`.
    pub(crate) fn append_internal(&self, records: &[u8]) -> Result<ProduceOutcome> {
        let _rendering = self.rendering_gate.read();
        let config = self.config();
        let partition = self.log.partition();
        let result = validate_produced(records, &config, partition, self.clock.now_ms())
            .and_then(|batch| self.log.append_produced(batch, &config));
        match result {
            Ok((outcome, info)) => {
                self.note_appended(&info, &config);
                Ok(outcome)
            }
            Err(e) => {
                let count = decode_header(records).map_or(0, |h| u64::from(h.record_count));
                self.note_refused_append(&e, count);
                Err(e)
            }
        }
    }

    /// Forgets the producers idle for `producer.id.expiration.ms`.
    pub(crate) fn remove_expired_producers(&self) {
        self.log.remove_expired_producers(&self.config());
    }

    pub(crate) fn append_signal(&self) -> &AppendSignal {
        &self.append_signal
    }

    /// The size of `log`: the logical end of the rendered stream. Never decreases.
    pub fn stream_len(&self) -> u64 {
        self.log.stream_end()
    }

    /// Wall-clock ms of the last append (mtime of `log`).
    pub(crate) fn modified_ms(&self) -> i64 {
        self.modified_ms.load(Ordering::Relaxed)
    }

    /// The `config` file: every effective topic config as `key=value`.
    pub fn config_text(&self) -> String {
        self.overrides.read().render_effective(&self.broker.read())
    }

    /// Every topic config with its value and source, as Kafka's `DescribeConfigs`.
    pub(crate) fn describe_config(&self) -> Vec<DescribedConfig> {
        self.overrides.read().describe(&self.broker.read())
    }

    /// A whole command to `config` (`key=value`, `-key`, blank and `#` lines) that
    /// changes the keys it names; all or nothing.
    #[cfg(any(test, feature = "internals"))]
    pub fn update_config(&self, text: &[u8]) -> Result<()> {
        use super::config::{ConfigError, ConfigScope};
        let text = std::str::from_utf8(text).map_err(|_| ConfigError::NotText)?;
        self.apply_config_change(&ConfigChange::from_text(ConfigScope::Topic, text)?)
    }

    /// Whether `change` would apply now, without applying it: the checks a write to
    /// `config` runs on the lines so far, so the write that makes the config invalid
    /// fails rather than only the close (which shells do not report).
    pub(crate) fn check_config_change(&self, change: &ConfigChange) -> Result<()> {
        self.overrides
            .read()
            .apply_change(change, &self.broker.read())?;
        Ok(())
    }

    /// Applies what one open-to-close of `config` wrote: all of it, or nothing when a
    /// line was refused or a check across keys fails. On a full disk the change applies
    /// in memory and is saved as soon as there is space (a warning says so meanwhile):
    /// lowering retention is how an operator gets space back.
    pub(crate) fn apply_config_change(&self, change: &ConfigChange) -> Result<()> {
        // Through a handle opened before a deletion: the config file it would write is
        // that of whatever topic has the name now.
        self.log.check_not_deleted()?;
        let mut overrides = self.overrides.write();
        let broker = self.broker.read();
        let updated = overrides.apply_change(change, &broker)?;
        let resolved = broker.resolve_topic(&updated);
        let replaced = LineRendering::of(&self.config());
        // A change of rendering waits for the appends under way, so the log end offset
        // divides the records of the two renderings exactly.
        let _no_appends = (LineRendering::of(&resolved) != replaced)
            .then(|| self.remember_rendering(replaced))
            .transpose()?;
        if updated != *overrides || self.unsaved_overrides.lock().is_some() {
            self.save_overrides(&updated)?;
        }
        *overrides = updated;
        *self.config.write() = Arc::new(resolved);
        Ok(())
    }

    /// Records in the topic's rendering timeline that `replaced` rendered the records up
    /// to the log end, made durable first; returns the guard that keeps appends out
    /// until the new config is in force.
    fn remember_rendering(&self, replaced: LineRendering) -> Result<RwLockWriteGuard<'_, ()>> {
        let no_appends = self.rendering_gate.write();
        self.log.flush()?;
        let mut past = PastRenderings::clone(&self.past_renderings.read());
        let (start, end) = (self.log.log_start_offset(), self.log.log_end_offset());
        if past.remember(replaced, start, end) || self.unsaved_renderings.lock().is_some() {
            past.save(&self.unsaved_renderings)?;
        }
        *self.past_renderings.write() = Arc::new(past);
        Ok(no_appends)
    }

    /// Writes `overrides` to the topic's `topic.properties`, or, out of space, remembers why
    /// (see [`write_or_defer`]).
    fn save_overrides(&self, overrides: &TopicOverrides) -> Result<()> {
        let path = self.log.stream_dir().join(TOPIC_CONFIG_FILE);
        let deferred = self.unsaved_overrides.lock().is_some();
        write_or_defer(
            &path,
            overrides.to_properties().as_bytes(),
            &self.unsaved_overrides,
        )?;
        if deferred && self.unsaved_overrides.lock().is_none() {
            self.events.record(
                self.clock.now_ms(),
                "config",
                &format!("saved {TOPIC_CONFIG_FILE}, kept in memory only while the disk was full"),
            );
        }
        Ok(())
    }

    /// Saves what a full disk kept in memory only: the overrides and the partition's
    /// leader-epoch checkpoint. Called on the scheduler's tick and at close; a failure leaves it for the
    /// next call.
    pub(crate) fn save_unsaved(&self) {
        if self.unsaved_renderings.lock().is_some() {
            let _no_appends = self.rendering_gate.write();
            if let Err(e) = self.past_renderings.read().save(&self.unsaved_renderings) {
                tracing::error!(topic = %self.name, error = %e, "writing the renderings file failed");
            }
        }
        if self.unsaved_overrides.lock().is_some() {
            let overrides = self.overrides.write();
            if let Err(e) = self.save_overrides(&overrides) {
                tracing::error!(topic = %self.name, error = %e, "writing the topic config failed");
            }
        }
        if let Err(e) = self.log.save_unsaved_partition_files() {
            tracing::error!(topic = %self.name, error = %e, "writing the leader-epoch checkpoint failed");
        }
    }

    /// The `events` file: recent actions, newest last.
    pub fn events_text(&self) -> String {
        self.events.text()
    }

    /// Every file in the partition directory (segments, indexes, `.deleted`, ...).
    pub fn backing_files(&self) -> Result<Vec<BackingFile>> {
        let dir = self.dir();
        let mut files = Vec::new();
        let entries = std::fs::read_dir(dir)
            .map_err(|e| EngineError::io(format!("list {}", dir.display()), e))?;
        for entry in entries {
            let Ok(entry) = entry else { continue };
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            // A file may vanish between listing and stat (delayed deletion): skip it.
            let Ok(meta) = entry.metadata() else { continue };
            if !meta.is_file() {
                continue;
            }
            let mtime_ms = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_millis() as i64);
            files.push(BackingFile {
                name,
                size: meta.len(),
                blocks: meta.blocks(),
                mtime_ms,
            });
        }
        files.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(files)
    }

    /// Opens a file of the partition directory for reading. Only plain names of files
    /// that exist there are accepted, so no name reaches outside the directory.
    pub(crate) fn open_backing_file(&self, name: &str) -> Result<File> {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(EngineError::InvalidRecord {
                message: format!("not a file of the partition directory: {name}"),
            });
        }
        let path = self.dir().join(name);
        File::open(&path).map_err(|e| EngineError::io(format!("open {}", path.display()), e))
    }

    /// Makes every record appended so far durable (fsync of the active segment).
    pub fn sync(&self) -> Result<()> {
        self.log.flush()
    }

    /// Periodic `flush.ms` check.
    pub(crate) fn maybe_flush_by_time(&self) -> Result<()> {
        self.log.maybe_flush_by_time(&self.config())
    }

    pub(crate) fn close(&self) -> Result<()> {
        self.save_unsaved();
        if let Some(reason) = self.unsaved_overrides.lock().as_ref() {
            tracing::error!(topic = %self.name, %reason, "closing with config overrides that could not be saved; they are lost");
        }
        self.log.close()
    }

    /// See [`Log::flush_rolled_segments`].
    pub fn flush_rolled_segments(&self) -> Result<()> {
        self.log.flush_rolled_segments()
    }

    pub fn recovery_point(&self) -> u64 {
        self.log.recovery_point()
    }

    /// Base offsets of segment `.log` files in the directory (for tests and checks).
    #[cfg(feature = "internals")]
    pub fn segment_log_files(&self) -> Result<Vec<u64>> {
        use super::format::{parse_segment_file_name, LOG_SUFFIX};
        Ok(self
            .backing_files()?
            .iter()
            .filter_map(|f| parse_segment_file_name(&f.name))
            .filter(|(_, s)| *s == LOG_SUFFIX)
            .map(|(b, _)| b)
            .collect())
    }
}
