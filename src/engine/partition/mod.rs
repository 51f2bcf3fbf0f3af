//! One partition of a topic (Kafka's `UnifiedLog`): its log and the appends of its
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
pub(crate) mod protocol;
mod reader;
mod renderings;
mod retention;
mod status;
mod visibility;

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::clock::format_time_ms;
use super::config::TopicConfig;
use super::error::{BatchSize, EngineError, InternalTopicAction, Result};
use super::format::{decode_header, BatchBuilder};
use super::log::{
    AppendInfo, BuiltBatch, Durability, Log, OpenReport, ProducedBy, TxnMarkerWrite, WriteBytes,
    WriteRecords,
};
use super::metadata_files::{adopt_topic_id, Uuid};
use super::produce::{validate_produced, ProduceOutcome};
use super::topic_core::TopicCore;
use super::topic_partition::TopicPartition;
use protocol::count_lines;
pub(crate) use renderings::validate_renderings;
pub(crate) use renderings::LineRendering;
use renderings::PastRenderings;

pub use capture::LogCapture;
#[cfg(any(test, feature = "internals"))]
pub use capture::CAPTURE_GRACE_MS;
#[cfg(feature = "internals")]
pub use fetch::FetchOutcome;
pub use fetch::{FetchedRange, Isolation, OffsetQuery};
pub use reader::LogCursor;
pub(crate) use reader::Replay;

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
pub(crate) struct PartitionStats {
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
            | EngineError::InvalidTxnState { .. }
            | EngineError::InvalidProducerIdMapping { .. }
            | EngineError::ConcurrentTransactions { .. }
            | EngineError::TransactionCoordinatorFenced { .. } => Some(RefusalReason::Invalid),
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

impl PartitionStats {
    pub(crate) fn refused(&self, reason: RefusalReason) -> &AtomicU64 {
        match reason {
            RefusalReason::KeylessCompacted => &self.refused_keyless_compacted,
            RefusalReason::TooLarge => &self.refused_too_large,
            RefusalReason::Invalid => &self.refused_invalid,
        }
    }
}

/// One partition of a topic: its log, its rendering timeline and counters. What the
/// partitions of a topic share (name, config, rendering gate, events) is its
/// [`TopicCore`].
pub struct Partition {
    topic: Arc<TopicCore>,
    log: Log,
    /// The bytes of the renderings `log` lines were appended under before `config`'s.
    past_renderings: RwLock<Arc<PastRenderings>>,
    /// Why the rendering timeline is not yet in `renderings` (the disk was full when a
    /// change recorded it); saved as soon as there is space, like the overrides.
    unsaved_renderings: Mutex<Option<String>>,
    modified_ms: AtomicI64,
    /// The first segment seen holding future timestamps (for `status`), or -1.
    future_timestamp_segment: AtomicI64,
    pub(crate) stats: PartitionStats,
    pub cleaner: super::cleaner_manager::LogCleaningState,
    /// The capture `.kpfs/snapshot/TOPIC/log` shows now, if any.
    capture: capture::CaptureSlot,
    /// What recovery cut when this mount opened the partition, for `status`.
    last_recovery: Option<String>,
}

impl std::fmt::Debug for Partition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Partition")
            .field("partition", &self.log.partition())
            .finish()
    }
}

impl Partition {
    /// Opens (or creates) partition `index` of `topic` in `dir` (`DATA_DIR/TOPIC-N`),
    /// starting its log where the topic's log-start checkpoint says, if above its first
    /// segment. A new partition takes `topic_id`, the id its topic's others carry.
    pub(crate) fn open(
        topic: Arc<TopicCore>,
        index: u32,
        dir: &Path,
        durability: Durability,
        topic_id: Option<Uuid>,
    ) -> Result<(Partition, OpenReport)> {
        let tp = TopicPartition::new(&topic.name, index);
        if let Some(id) = topic_id {
            std::fs::create_dir_all(dir)
                .map_err(|e| EngineError::io(format!("create {}", dir.display()), e))?;
            adopt_topic_id(dir, id)?;
        }
        let config = topic.config();
        let mut past_renderings = PastRenderings::load(dir);
        let (log, report) = Log::open(dir, &tp, &config, topic.clock.clone(), durability)?;
        let unsaved_renderings = Mutex::new(None);
        if past_renderings.end_at(log.log_end_offset()) {
            // Offsets past the recovered log end will be appended under the config now.
            if let Err(e) = past_renderings.save(&unsaved_renderings) {
                tracing::warn!(partition = %tp, error = %e, "cannot shorten the renderings file to the recovered log end");
            }
        }
        if let Some(log_start) = topic.log_starts.get(&tp) {
            log.restore_log_start_offset(log_start)?;
        }
        let modified = log
            .snapshot()
            .active()
            .modified()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or_else(|| topic.clock.now_ms(), |d| d.as_millis() as i64);
        let now = topic.clock.now_ms();
        let mut last_recovery = None;
        for cut in &report.truncated {
            let what = format!("{} {}", cut.file, cut.describe());
            topic.events.record(now, log.partition(), "recovery", &what);
            last_recovery = Some(format!("at {}: {what}", format_time_ms(now)));
        }
        Ok((
            Partition {
                topic,
                log,
                past_renderings: RwLock::new(Arc::new(past_renderings)),
                unsaved_renderings,
                modified_ms: AtomicI64::new(modified),
                future_timestamp_segment: AtomicI64::new(-1),
                stats: PartitionStats::default(),
                cleaner: Default::default(),
                capture: Default::default(),
                last_recovery,
            },
            report,
        ))
    }

    /// The topic's name.
    pub(crate) fn name(&self) -> &str {
        &self.topic.name
    }

    /// The partition's number within its topic.
    pub fn index(&self) -> u32 {
        self.log.index()
    }

    pub(crate) fn topic_partition(&self) -> TopicPartition {
        TopicPartition::new(&self.topic.name, self.index())
    }

    pub fn log(&self) -> &Log {
        &self.log
    }

    pub fn dir(&self) -> &Path {
        self.log.dir()
    }

    /// The topic's effective configuration now.
    pub fn config(&self) -> Arc<TopicConfig> {
        self.topic.config()
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
    pub(crate) fn note_refused_append(&self, error: &EngineError, records: u64) {
        self.record_event("refused-append", &error.to_string());
        if let Some(reason) = RefusalReason::of(error) {
            self.stats
                .refused(reason)
                .fetch_add(records, Ordering::Relaxed);
        }
    }

    /// Appends the records of a write that its topic validated, under the topic's
    /// rendering gate, and counts them; a refusal is counted too.
    pub(crate) fn append_records(
        &self,
        data: WriteBytes<'_>,
        records: WriteRecords<'_>,
        config: &TopicConfig,
    ) -> Result<AppendInfo> {
        let appended = self.log.append(data, records, config);
        self.note_append(appended, config, || match records {
            WriteRecords::Parsed(parsed) => parsed.len() as u64,
            WriteRecords::Plain => count_lines(data.head) + count_lines(data.body),
        })
    }

    /// [`Partition::append_records`] of batches built ahead, stamped `now`: a keyed
    /// write's part for this partition (see [`Log::append_built`]).
    pub(crate) fn append_built(
        &self,
        batches: &mut [BuiltBatch],
        config: &TopicConfig,
        now: i64,
    ) -> Result<AppendInfo> {
        let appended = self.log.append_built(batches, config, now);
        self.note_append(appended, config, || {
            batches
                .iter()
                .map(|b| u64::from(b.builder.record_count()))
                .sum()
        })
    }

    /// Counts an append, or a refused one of `records()` records.
    fn note_append(
        &self,
        appended: Result<AppendInfo>,
        config: &TopicConfig,
        records: impl FnOnce() -> u64,
    ) -> Result<AppendInfo> {
        match appended {
            Ok(info) => {
                self.note_appended(&info, config);
                Ok(info)
            }
            Err(e) => {
                self.note_refused_append(&e, records());
                Err(e)
            }
        }
    }

    /// Counts an append and records its rolls in `events`.
    fn note_appended(&self, info: &AppendInfo, config: &TopicConfig) {
        if info.records == 0 {
            return;
        }
        self.topic.append_signal.appended();
        self.stats
            .appended_records
            .fetch_add(info.records, Ordering::Relaxed);
        self.stats
            .appended_bytes
            .fetch_add(info.bytes, Ordering::Relaxed);
        self.modified_ms
            .store(info.appended_at_ms, Ordering::Relaxed);
        for (offset, reason) in &info.rolls {
            tracing::info!(partition = self.log.partition(), base_offset = offset, %reason, "rolled segment");
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
            self.record_event(
                "roll",
                &format!("new segment at offset {offset}: reason={reason}: {why}"),
            );
        }
    }

    /// Refuses `action` on an internal topic, as Kafka's `InvalidTopicException`.
    pub(crate) fn refuse_internal(&self, action: InternalTopicAction) -> Result<()> {
        self.topic.refuse_internal(action)
    }

    /// Adds a line naming this partition to the topic's `events`.
    pub(crate) fn record_event(&self, kind: &str, detail: &str) {
        self.topic.events.record(
            self.topic.clock.now_ms(),
            self.log.partition(),
            kind,
            detail,
        );
    }

    /// A coordinator's records of its internal topic (`__consumer_offsets`,
    /// `__transaction_state`: one partition each, which keeps no order across
    /// partitions). `in_txn`: a transactional batch whose partition is in its producer's
    /// transaction (TxnOffsetCommit's).
    pub(crate) fn append_internal(&self, records: &[u8], in_txn: bool) -> Result<ProduceOutcome> {
        let _rendering = self.topic.rendering_gate.read();
        let origin = ProducedBy {
            coordinator: true,
            txn_verified: in_txn,
        };
        self.append_produced_gated(records, origin)
    }

    /// Kafka's Produce for this partition: `records` is the partition's records field,
    /// one RecordBatch v2 from a client. Validated as Kafka's `LogValidator` does (every
    /// refusal named after Kafka's error, nothing appended), given offsets at the log
    /// end, stored in the topic's `compression.type`, and its records take their places
    /// in the `log` stream, so `cat log` shows them at once. A retry of one of its
    /// producer's last five batches gets the original offsets and is not appended again.
    /// The caller holds the topic's rendering gate. `origin`: see
    /// [`Log::append_produced`].
    pub(crate) fn append_produced_gated(
        &self,
        records: &[u8],
        origin: ProducedBy,
    ) -> Result<ProduceOutcome> {
        let config = self.config();
        let partition = self.log.partition();
        let result = validate_produced(records, &config, partition, self.topic.clock.now_ms())
            .and_then(|batch| self.log.append_produced(batch, &config, origin));
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

    /// Writes a transaction coordinator's COMMIT or ABORT marker here
    /// ([`Log::append_txn_marker`]). Readers are woken: the records of the transaction
    /// it ends become visible to `read_committed` readers and the `log` file.
    pub(crate) fn append_txn_marker(&self, marker: &TxnMarkerWrite) -> Result<u64> {
        let config = self.config();
        match self.log.append_txn_marker(marker, &config) {
            Ok(offset) => {
                self.topic.append_signal.appended();
                self.modified_ms
                    .store(self.topic.clock.now_ms(), Ordering::Relaxed);
                self.record_event(
                    "txn-marker",
                    &format!(
                        "{} of producer {} (epoch {}) at offset {offset}",
                        if marker.marker.commit {
                            "COMMIT"
                        } else {
                            "ABORT"
                        },
                        marker.producer_id,
                        marker.producer_epoch
                    ),
                );
                Ok(offset)
            }
            Err(e) => {
                self.note_refused_append(&e, 1);
                Err(e)
            }
        }
    }

    /// Forgets the producers idle for `producer.id.expiration.ms`.
    pub(crate) fn remove_expired_producers(&self) {
        self.log.remove_expired_producers(&self.config());
    }

    /// The size of `log`: the logical end of the rendered stream a reader sees (up to
    /// the records of an open transaction). Never decreases.
    pub fn stream_len(&self) -> u64 {
        self.log.visible_stream_end()
    }

    /// Wall-clock ms of the last append (mtime of `log`).
    pub(crate) fn modified_ms(&self) -> i64 {
        self.modified_ms.load(Ordering::Relaxed)
    }

    /// Records in the partition's rendering timeline that `replaced` rendered its
    /// records up to the log end, made durable first. The caller holds the topic's
    /// rendering gate exclusively, so no append runs.
    pub(crate) fn remember_rendering(&self, replaced: LineRendering) -> Result<()> {
        self.log.flush()?;
        let mut past = PastRenderings::clone(&self.past_renderings.read());
        let (start, end) = (self.log.log_start_offset(), self.log.log_end_offset());
        if past.remember(replaced, start, end) || self.unsaved_renderings.lock().is_some() {
            past.save(&self.unsaved_renderings)?;
        }
        *self.past_renderings.write() = Arc::new(past);
        Ok(())
    }

    /// Saves what a full disk kept in memory only: the rendering timeline and the
    /// partition's leader-epoch checkpoint. Called on the scheduler's tick and at close;
    /// a failure leaves it for the next call.
    pub(crate) fn save_unsaved(&self) {
        if self.unsaved_renderings.lock().is_some() {
            let _no_appends = self.topic.rendering_gate.write();
            if let Err(e) = self.past_renderings.read().save(&self.unsaved_renderings) {
                tracing::error!(partition = self.log.partition(), error = %e, "writing the renderings file failed");
            }
        }
        if let Err(e) = self.log.save_unsaved_partition_files() {
            tracing::error!(partition = self.log.partition(), error = %e, "writing the leader-epoch checkpoint failed");
        }
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
