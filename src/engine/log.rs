//! A partition's log: its ordered segments, the active segment, offsets and the stream
//! positions of the `log` file. Appends, rolls, retention deletions and the cleaner's
//! segment replacement all go through here.
//!
//! Locking: `writer` serialises every mutation (append, roll, delete, replace). The
//! segment map sits in a `RwLock` that writers hold only to swap entries; readers clone
//! an `Arc` snapshot of it and read files without holding any lock.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::clock::Clock;
use super::config::{TimestampType, TopicConfig};
use super::error::{EngineError, Result};
use super::files::io_at;
pub use super::files::remove_files;
pub(crate) use super::files::sync_dir;
use super::format::kpfs_topic_dir;
use super::format::{
    decode_header, parse_segment_file_name, set_base_offset, BatchBuilder, BatchEnd, BatchIdentity,
    EndTxnMarker, DELETED_SUFFIX, MAX_RELATIVE_OFFSET, MAX_SEGMENT_FILE_BYTES, SWAP_SUFFIX,
};
use super::limits::{MAX_APPEND_BATCH_BYTES, PRODUCER_REPLAY_READ_BYTES};
pub use super::log_loader::Durability;
use super::log_loader::LogLoader;
pub(crate) use super::log_loader::OpenReport;
use super::metadata_files::{load_topic_id, LeaderEpochCheckpoint, Uuid};
use super::produce::{ProduceOutcome, ValidatedBatch};
pub(crate) use super::producer_state::ProducedBy;
use super::producer_state::{Expiry, ProducerStateEntry, ProducerStateManager, TxnMarkerAt};
use super::segment::{RollReason, Segment, SegmentSpec};
use super::stream_index::{BatchStream, StreamMark, StreamShape};
use super::topic_partition::TopicPartition;
use super::txn_index::AbortedTxn;

/// One record to append, located in the written bytes; the line protocol already split
/// the line into key and value. Positions rather than slices, so a write's records go
/// into a reused buffer and an append allocates nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PendingRecord {
    /// Where the line starts in the written bytes, and its length without the newline;
    /// the record takes `line_len + 1` stream bytes.
    pub(crate) line_start: usize,
    pub(crate) line_len: usize,
    /// Key and value lengths, -1 for null (the batch format's convention).
    pub(crate) key_len: i64,
    pub(crate) value_len: i64,
}

impl PendingRecord {
    fn line<'a>(&self, data: &WriteBytes<'a>) -> &'a [u8] {
        data.slice(self.line_start, self.line_start + self.line_len)
    }
}

/// The bytes of one write as the log appends them: `head`, complete lines that an earlier
/// write began (its unterminated last line, finished by this write), then `body`.
/// [`PendingRecord`] positions count from the start of `head`. Two pieces, so finishing a
/// line does not mean copying the whole write behind it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WriteBytes<'a> {
    pub(crate) head: &'a [u8],
    pub(crate) body: &'a [u8],
}

impl<'a> WriteBytes<'a> {
    #[cfg(any(test, feature = "internals"))]
    pub(crate) fn new(body: &'a [u8]) -> Self {
        WriteBytes { head: &[], body }
    }

    pub(crate) fn len(&self) -> usize {
        self.head.len() + self.body.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes `start..end`, which lie in one piece (`head` ends with a newline, and no
    /// line spans the two).
    pub(crate) fn slice(&self, start: usize, end: usize) -> &'a [u8] {
        let h = self.head.len();
        if end <= h {
            &self.head[start..end]
        } else {
            &self.body[start - h..end - h]
        }
    }

    /// Bytes `start..end` as the piece of `head` and the piece of `body` they cover.
    fn pieces(&self, start: usize, end: usize) -> [&'a [u8]; 2] {
        let h = self.head.len();
        [
            &self.head[start.min(h)..end.min(h)],
            &self.body[start.max(h) - h..end.max(h) - h],
        ]
    }

    /// The length (newline excluded) of the first line longer than `limit`, if any.
    pub(crate) fn first_line_longer_than(&self, limit: usize) -> Option<usize> {
        // `head` holds whole lines, so no line spans the two pieces.
        [self.head, self.body]
            .into_iter()
            .find_map(|piece| first_line_longer_than(piece, limit))
    }

    /// Position of the first newline at or after `start`.
    fn first_newline_from(&self, start: usize) -> Option<usize> {
        let [head, body] = self.pieces(start, self.len());
        memchr::memchr(b'\n', head)
            .map(|i| start + i)
            .or_else(|| memchr::memchr(b'\n', body).map(|i| self.len() - body.len() + i))
    }
}

/// [`WriteBytes::first_line_longer_than`] in one piece, in steps of `limit` bytes rather
/// than one per line: the last newline of a window of `limit + 1` bytes ends every line
/// that starts in the window and fits the limit, so the search goes on from there; a
/// window without a newline starts a line that does not fit.
fn first_line_longer_than(piece: &[u8], limit: usize) -> Option<usize> {
    let mut start = 0;
    while piece.len() - start > limit {
        match memchr::memrchr(b'\n', &piece[start..=start + limit]) {
            Some(newline) => start += newline + 1,
            None => {
                let rest = &piece[start..];
                return Some(memchr::memchr(b'\n', rest).unwrap_or(rest.len()));
            }
        }
    }
    None
}

/// The records of one write, as the line protocol found them.
#[derive(Clone, Copy, Debug)]
pub(crate) enum WriteRecords<'a> {
    /// Records located in the write, with their keys and values.
    Parsed(&'a [PendingRecord]),
    /// Every line of the write is one keyless record whose value is the line (a topic
    /// that does not parse keys): written as plain batches, with no per-record metadata.
    Plain,
}

/// The size of the batch the first record whose batch alone is over `limit` would need.
/// Kafka checks every batch against `max.message.bytes` and the segment size; a record
/// over either in a batch of its own can never be appended.
pub(crate) fn first_oversized_record(
    data: WriteBytes<'_>,
    records: WriteRecords<'_>,
    limit: u64,
) -> Option<u64> {
    match records {
        WriteRecords::Parsed(parsed) => {
            // A record's batch grows with its key and with its value (-1, null, is no
            // larger than empty): when the longest key and the longest value fit
            // together, every record fits, and the exact search is skipped.
            let (key, value) = parsed
                .iter()
                .fold((-1, -1), |(k, v), r| (r.key_len.max(k), r.value_len.max(v)));
            if BatchBuilder::single_record_batch_size(key, value) as u64 <= limit {
                return None;
            }
            parsed
                .iter()
                .map(|r| BatchBuilder::single_record_batch_size(r.key_len, r.value_len) as u64)
                .find(|&single| single > limit)
        }
        WriteRecords::Plain => {
            let line = match longest_keyless_value(limit) {
                Some(longest_fitting) => data.first_line_longer_than(longest_fitting),
                // Not even an empty line fits: the write's first line is refused.
                None => Some(data.first_newline_from(0).unwrap_or(data.len())),
            };
            line.map(|line| BatchBuilder::single_record_batch_size(-1, line as i64) as u64)
        }
    }
}

/// The longest value a keyless record may have for its batch alone to fit `limit`.
fn longest_keyless_value(limit: u64) -> Option<usize> {
    let fits = |len: usize| BatchBuilder::single_record_batch_size(-1, len as i64) as u64 <= limit;
    if !fits(0) {
        return None;
    }
    // The record's overhead grows by a byte at most twice per varint: start from the
    // limit less the smallest overhead and step down.
    let mut len = usize::try_from(limit).unwrap_or(usize::MAX)
        - BatchBuilder::single_record_batch_size(-1, 0);
    while !fits(len) {
        len -= 1;
    }
    Some(len)
}

/// What the next batch of a write gets: its first offset and stream position, the
/// append's time and rendering, and its size limit.
struct BatchStart {
    offset: u64,
    stream_pos: u64,
    timestamp: i64,
    shape: StreamShape,
    /// Batches are at most this big, unless one record alone is bigger.
    limit: usize,
}

/// The records of the batch a `next_*_batch` filled: how many, and where in the stream
/// they end.
struct FilledBatch {
    records: u64,
    stream_end: u64,
}

/// The batches of one append going into the log, under its writer lock: each at the
/// log end, after a roll when Kafka would roll, its records at the stream positions after
/// the previous batch's.
struct BatchesInto<'l> {
    log: &'l Log,
    config: &'l TopicConfig,
    segment_size: u64,
    /// Where the next batch goes.
    start: BatchStart,
    end: BatchEnd,
    first_offset: u64,
    info: AppendInfo,
}

impl<'l> BatchesInto<'l> {
    /// An append at the log end of `log`, at time `now`.
    fn new(log: &'l Log, config: &'l TopicConfig, now: i64) -> Self {
        let (first_offset, first_stream_pos) = {
            let info = log.snapshot().active().info();
            (info.next_offset, info.stream_end)
        };
        BatchesInto {
            log,
            config,
            segment_size: segment_size_of(config),
            start: BatchStart {
                offset: first_offset,
                stream_pos: first_stream_pos,
                timestamp: now,
                shape: config.stream_shape(),
                limit: append_batch_limit(config),
            },
            // Lines are uncompressed producer data: `compression.type` says what they
            // become. The records are stamped with the append time either way; under
            // LogAppendTime the batch says so, as Kafka's would.
            end: BatchEnd {
                compression: config.compression.for_fuse_append(),
                log_append_time_ms: (config.message_timestamp_type == TimestampType::LogAppendTime)
                    .then_some(now),
                ..BatchEnd::PLAIN
            },
            first_offset,
            info: AppendInfo {
                first_offset,
                appended_at_ms: now,
                ..AppendInfo::default()
            },
        }
    }

    /// Finishes the batch in `builder` (`batch` says what it holds) and writes it.
    fn write(&mut self, builder: &mut BatchBuilder, batch: FilledBatch) -> Result<()> {
        let log = self.log;
        let parts = builder.finish_parts(&self.end).map_err(|e| {
            let what = format!("compress a batch of {}", log.partition);
            EngineError::io(what, std::io::Error::other(e))
        })?;
        let size = parts.len() as u64;
        let now = self.start.timestamp;
        let active = log.maybe_roll(size, now, self.segment_size, self.config, &mut self.info)?;
        let first = StreamMark {
            offset: self.start.offset,
            stream_pos: self.start.stream_pos,
            shape: self.start.shape,
        };
        let stream = BatchStream {
            marks: &[first],
            stream_end: batch.stream_end,
        };
        active.append_parts(
            &parts.slices(),
            stream,
            self.config.index_interval_bytes.max(0) as u64,
        )?;
        self.info.bytes += size;
        self.info.records += batch.records;
        self.start.offset += batch.records;
        self.start.stream_pos = batch.stream_end;
        Ok(())
    }

    /// The append's end: checks where the log ends and counts the records towards a
    /// flush.
    fn finish(mut self, writer: &mut WriterState) -> Result<AppendInfo> {
        let start = &self.start;
        self.info.last_offset = start.offset.saturating_sub(1);
        // Invariants 1 and 7 across the write: its records took the offsets and stream
        // positions after the log end, one after another, and nothing else did (the
        // writer lock is held). O(1): the active segment's in-memory end.
        let end = self.log.snapshot().active().info();
        assert_eq!(
            (end.next_offset, end.stream_end),
            (start.offset, start.stream_pos),
            "the log ends where the append's last batch ends"
        );
        assert_eq!(
            start.offset - self.first_offset,
            self.info.records,
            "one offset per record"
        );
        self.log
            .count_unflushed(writer, self.info.records, start.timestamp, self.config)?;
        Ok(self.info)
    }
}

/// Fills `builder` with the next batch of a write of parsed records: records while the
/// batch stays within `start.limit` (a first record always goes in).
fn next_parsed_batch(
    builder: &mut BatchBuilder,
    data: WriteBytes<'_>,
    records: &[PendingRecord],
    next_record: &mut usize,
    start: &BatchStart,
) -> Option<FilledBatch> {
    let rest = &records[*next_record..];
    if rest.is_empty() {
        return None;
    }
    builder.reset(start.offset, Some(start.timestamp));
    let mut stream_end = start.stream_pos;
    let mut count = 0;
    for r in rest {
        let offset = start.offset + count;
        if !push_parsed(builder, data, r, offset, start.timestamp, start.limit) {
            break;
        }
        stream_end += r.line_len as u64 + 1;
        count += 1;
    }
    *next_record += count as usize;
    Some(FilledBatch {
        records: count,
        stream_end,
    })
}

/// Adds record `r` of `data` to `builder` at `offset`, stamped `timestamp`, unless the
/// batch would grow past `limit` (a first record always goes in); says whether it did.
pub(crate) fn push_parsed(
    builder: &mut BatchBuilder,
    data: WriteBytes<'_>,
    r: &PendingRecord,
    offset: u64,
    timestamp: i64,
    limit: usize,
) -> bool {
    let add = builder.next_record_size(offset, timestamp, r.key_len, r.value_len);
    if builder.record_count() > 0 && builder.encoded_len() + add > limit {
        return false;
    }
    let line = r.line(&data);
    let key = (r.key_len >= 0).then(|| &line[..r.key_len as usize]);
    let value = (r.value_len >= 0).then(|| &line[line.len() - r.value_len as usize..]);
    builder.push(offset, timestamp, key, value);
    true
}

/// The segment size `config` asks for, as far as a segment file can hold.
fn segment_size_of(config: &TopicConfig) -> u64 {
    (config.segment_size().max(0) as u64).min(MAX_SEGMENT_FILE_BYTES)
}

/// How big the batches an append of lines makes may grow (a batch of one record may be
/// bigger): the read path holds one batch in memory, a batch never needs a segment of
/// its own beyond the configured size, and Kafka refuses a batch over
/// `max.message.bytes`; the write's records are split into batches that fit it, as a
/// producer splits them (each record alone fits: the topic checked).
pub(crate) fn append_batch_limit(config: &TopicConfig) -> usize {
    segment_size_of(config)
        .min(MAX_APPEND_BATCH_BYTES)
        .min(config.max_message_bytes.max(0) as u64) as usize
}

/// A batch of a write's records built before its partition's writer lock is taken (a
/// keyed write's, [`KeyedBatches`](super::keyed_batches::KeyedBatches)): its offsets
/// count from 0 until [`Log::append_built`] moves it to the log end, and its records
/// carry the append's time.
#[derive(Debug)]
pub(crate) struct BuiltBatch {
    pub(crate) builder: BatchBuilder,
    /// Bytes of the `log` stream its records take: each its line and a newline.
    pub(crate) stream_len: u64,
}

/// Fills `builder` with the next batch of a write of plain records: as many whole lines
/// as fit the limit, each a keyless record whose value is the line.
fn next_plain_batch(
    builder: &mut BatchBuilder,
    data: WriteBytes<'_>,
    next_byte: &mut usize,
    start: &BatchStart,
) -> Option<FilledBatch> {
    if *next_byte == data.len() {
        return None;
    }
    builder.reset(start.offset, Some(start.timestamp));
    let (mut records, mut stream_end) = (0, start.stream_pos);
    // `head` ends with a newline, so no line spans the two pieces.
    for piece in data.pieces(*next_byte, data.len()) {
        let taken = builder.push_keyless_lines(start.timestamp, piece, start.limit);
        *next_byte += taken.bytes;
        records += taken.records;
        stream_end += taken.stream_bytes;
        if taken.bytes < piece.len() {
            break;
        }
    }
    Some(FilledBatch {
        records,
        stream_end,
    })
}

/// What an append did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AppendInfo {
    pub first_offset: u64,
    pub(crate) last_offset: u64,
    pub(crate) records: u64,
    pub(crate) bytes: u64,
    pub(crate) rolls: Vec<(u64, RollReason)>,
    /// The clock when the records were appended: their timestamp.
    pub(crate) appended_at_ms: i64,
}

impl AppendInfo {
    /// Adds what a later append of the same write did (to another partition).
    pub(crate) fn absorb(&mut self, later: AppendInfo) {
        if self.records == 0 {
            self.first_offset = later.first_offset;
        }
        self.last_offset = later.last_offset;
        self.records += later.records;
        self.bytes += later.bytes;
        self.rolls.extend(later.rolls);
        self.appended_at_ms = self.appended_at_ms.max(later.appended_at_ms);
    }
}

/// A segment removed from the log and renamed `.deleted`, waiting for physical removal.
#[derive(Debug)]
pub struct DeletedSegment {
    pub(crate) segment: Arc<Segment>,
    pub files: Vec<PathBuf>,
}

/// A consistent view of the log for readers.
#[derive(Clone, Debug)]
pub struct LogSnapshot {
    pub segments: Arc<Vec<Arc<Segment>>>,
    pub log_start_offset: u64,
}

impl LogSnapshot {
    pub fn active(&self) -> &Arc<Segment> {
        self.segments
            .last()
            .expect("a log always has an active segment")
    }

    /// Index of the segment that holds `offset` (greatest base offset <= offset).
    pub(crate) fn segment_for(&self, offset: u64) -> Option<usize> {
        let n = self.segments.partition_point(|s| s.base_offset() <= offset);
        n.checked_sub(1)
    }

    /// Kafka's `LocalLog.collectAbortedTransactions`: the aborted transactions that end
    /// at or after `from` and start before `upper_bound`, from the transaction indexes of
    /// segment `first` (the one holding `from`) on, until one's last stable offset shows
    /// that no later abort can reach back into the range.
    pub(crate) fn collect_aborted(
        &self,
        first: usize,
        (from, upper_bound): (u64, u64),
    ) -> Vec<AbortedTxn> {
        let mut aborted = Vec::new();
        if upper_bound <= from {
            return aborted;
        }
        for segment in &self.segments[first..] {
            let found = segment.collect_aborted(from, upper_bound);
            aborted.extend(found.aborted);
            if found.complete {
                break;
            }
        }
        aborted
    }
}

#[derive(Debug)]
struct Shared {
    segments: Arc<Vec<Arc<Segment>>>,
    log_start_offset: u64,
}

#[derive(Debug)]
pub struct Log {
    dir: PathBuf,
    /// The topic's kpfs folder: the segments' stream indexes.
    stream_dir: PathBuf,
    /// The topic's name, as errors name it. Never derived from `partition`: a topic may
    /// itself be named like a partition (`x-0`).
    topic: String,
    /// `TOPIC-N`, for Kafka-worded messages.
    partition: String,
    /// `N`.
    index: u32,
    clock: Arc<dyn Clock>,
    writer: Mutex<WriterState>,
    shared: RwLock<Shared>,
    /// Set after an I/O failure on the write path: every later write is refused.
    poisoned: Mutex<Option<String>>,
    jitter_seed: AtomicU64,
    /// Kafka's recovery point: every record below it is on stable storage with its index
    /// entries. Advanced only after an fsync; checkpointed by the engine, so recovery
    /// after a crash validates what follows it and trusts what precedes it.
    recovery_point: AtomicU64,
    /// The partition's idempotent producers and their snapshots in the partition
    /// directory (Kafka's `ProducerStateManager`), taken at rolls and the close, removed
    /// with their segment. Locked inside the writer lock.
    producer_state: Mutex<ProducerStateManager>,
    /// `leader-epoch-checkpoint`, which follows the log start.
    leader_epochs: Mutex<LeaderEpochCheckpoint>,
    /// The topic id of `partition.metadata`.
    topic_id: Uuid,
    /// [`Log::unstable_from`]'s last answer.
    unstable_position: Mutex<Option<(u64, u64)>>,
    /// The topic was deleted. Set under the writer lock, so no append is acknowledged
    /// after the deletion returns; read without it by readers, who hold the topic
    /// through descriptors opened before and must not read a deleted topic's records.
    deleted: AtomicBool,
    /// Tests' step inside [`Log::append_produced`], between a produced batch's append
    /// and its producer's state update, where a concurrent reader may land.
    #[cfg(test)]
    pub(crate) after_append: TestStep,
    /// Tests' step inside a read (a Fetch, a read of `log`), between its reads of the
    /// last stable offset and of the segments, where a concurrent writer may land.
    #[cfg(test)]
    pub(crate) between_stable_and_segments: TestStep,
}

/// A test's one-shot step, run where another thread may act (a reader inside an append,
/// a writer inside a read), so that the interleaving is deterministic.
#[cfg(test)]
#[derive(Default)]
pub(crate) struct TestStep(Mutex<Option<Box<dyn FnOnce() + Send>>>);

#[cfg(test)]
impl TestStep {
    pub(crate) fn set(&self, step: impl FnOnce() + Send + 'static) {
        *self.0.lock() = Some(Box::new(step));
    }

    pub(crate) fn run(&self) {
        // Taken out first: the step may use the log, and runs once.
        let step = self.0.lock().take();
        if let Some(step) = step {
            step();
        }
    }
}

#[cfg(test)]
impl std::fmt::Debug for TestStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TestStep")
    }
}

#[derive(Debug)]
struct WriterState {
    unflushed_records: u64,
    last_flush_ms: i64,
    /// Reused for every batch, so appends do not allocate.
    builder: BatchBuilder,
}

impl Log {
    /// Opens the partition directory of `tp`, creating it if missing, and brings it to
    /// a consistent state ([`log_loader`](super::log_loader): the recovery case table in
    /// docs/ARCHITECTURE.md).
    pub fn open(
        dir: &Path,
        tp: &TopicPartition,
        config: &TopicConfig,
        clock: Arc<dyn Clock>,
        durability: Durability,
    ) -> Result<(Log, OpenReport)> {
        fs::create_dir_all(dir).map_err(io_at(dir, "create"))?;
        let now = clock.now_ms();
        let stream_dir = kpfs_topic_dir(dir);
        fs::create_dir_all(&stream_dir).map_err(io_at(&stream_dir, "create"))?;
        let log = Log {
            dir: dir.to_path_buf(),
            stream_dir,
            topic: tp.topic.clone(),
            partition: tp.to_string(),
            index: tp.partition,
            clock: clock.clone(),
            writer: Mutex::new(WriterState {
                unflushed_records: 0,
                last_flush_ms: now,
                builder: BatchBuilder::new(0),
            }),
            shared: RwLock::new(Shared {
                segments: Arc::new(Vec::new()),
                log_start_offset: 0,
            }),
            poisoned: Mutex::new(None),
            jitter_seed: AtomicU64::new(jitter_seed(dir, now)),
            recovery_point: AtomicU64::new(0),
            producer_state: Mutex::new(ProducerStateManager::default()),
            leader_epochs: Mutex::new(LeaderEpochCheckpoint::default()),
            topic_id: load_topic_id(dir)?,
            unstable_position: Mutex::new(None),
            #[cfg(test)]
            after_append: TestStep::default(),
            #[cfg(test)]
            between_stable_and_segments: TestStep::default(),
            deleted: AtomicBool::new(false),
        };
        let loader = LogLoader {
            dir,
            stream_dir: &log.stream_dir,
            partition: &log.partition,
            config,
            now_ms: now,
            durability,
            next_jitter: &|| log.next_jitter(config),
        };
        let (mut segments, mut report) = loader.load()?;
        if segments.is_empty() {
            segments.push(Arc::new(new_active_segment(
                dir,
                &log.stream_dir,
                0,
                0,
                config,
                now,
                log.next_jitter(config),
            )?));
            sync_dir(dir)?;
            sync_dir(&log.stream_dir)?;
        }
        for s in &segments[..segments.len() - 1] {
            s.seal()?;
        }
        let active = segments.last().expect("non-empty");
        active.make_active()?;
        let recovery_point = loader.recovery_point(active.next_offset());
        log.recovery_point.store(recovery_point, Ordering::Relaxed);
        {
            let mut sh = log.shared.write();
            sh.log_start_offset = segments[0].base_offset();
            sh.segments = Arc::new(segments);
        }
        log.check_invariants();
        log.load_partition_files(durability, config, &mut report)?;
        Ok((log, report))
    }

    /// Row 13 of the recovery case table: the producer state (its latest snapshot and
    /// the batches after it) and the leader epoch checkpoint brought in line with the
    /// loaded segments.
    fn load_partition_files(
        &self,
        durability: Durability,
        config: &TopicConfig,
        report: &mut OpenReport,
    ) -> Result<()> {
        let snap = self.snapshot();
        let bases: Vec<u64> = snap.segments.iter().map(|s| s.base_offset()).collect();
        let log_end = snap.active().next_offset();
        let clean = durability == Durability::CleanShutdown;
        let expiry = Expiry {
            now_ms: self.clock.now_ms(),
            expiration_ms: config.producer_id_expiration_ms,
        };
        let (state, removed) = ProducerStateManager::load(
            &self.dir,
            &bases,
            (snap.log_start_offset, log_end),
            (clean, report.txn_index_from),
            expiry,
            |state| replay_producers(&snap, state, report.txn_index_from),
        )?;
        report.removed_files.extend(removed);
        *self.producer_state.lock() = state;
        *self.leader_epochs.lock() =
            LeaderEpochCheckpoint::load(&self.dir, snap.log_start_offset, log_end)?;
        Ok(())
    }

    /// Kafka's `removeExpiredProducers`, run every `producer.id.expiration.check.interval.ms`.
    pub(crate) fn remove_expired_producers(&self, config: &TopicConfig) {
        self.producer_state.lock().remove_expired(Expiry {
            now_ms: self.clock.now_ms(),
            expiration_ms: config.producer_id_expiration_ms,
        });
    }

    /// The topic id (`partition.metadata`), made when the topic was created.
    pub fn topic_id(&self) -> Uuid {
        self.topic_id
    }

    fn next_jitter(&self, config: &TopicConfig) -> i64 {
        let bound = config.segment_jitter_ms.min(config.segment_ms);
        if bound <= 0 {
            return 0;
        }
        // xorshift64: a segment's jitter only has to differ between segments.
        let mut x = self.jitter_seed.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.jitter_seed.store(x, Ordering::Relaxed);
        (x % bound as u64) as i64
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes what a full disk kept from the partition's own files.
    pub(crate) fn save_unsaved_partition_files(&self) -> Result<()> {
        self.leader_epochs.lock().save_unsaved()
    }

    pub(crate) fn stream_dir(&self) -> &Path {
        &self.stream_dir
    }

    /// fsync of the partition directory and the topic's kpfs folder, after segment files
    /// were created or renamed in both.
    fn sync_dirs(&self) -> Result<()> {
        sync_dir(&self.stream_dir)?;
        sync_dir(&self.dir)
    }

    pub(crate) fn partition(&self) -> &str {
        &self.partition
    }

    /// The partition's number within its topic.
    pub fn index(&self) -> u32 {
        self.index
    }

    pub fn snapshot(&self) -> LogSnapshot {
        let sh = self.shared.read();
        LogSnapshot {
            segments: sh.segments.clone(),
            log_start_offset: sh.log_start_offset,
        }
    }

    pub fn log_start_offset(&self) -> u64 {
        self.shared.read().log_start_offset
    }

    pub fn log_end_offset(&self) -> u64 {
        self.snapshot().active().next_offset()
    }

    /// End of the rendered stream: where the next record appended goes.
    pub(crate) fn stream_end(&self) -> u64 {
        self.snapshot().active().info().stream_end
    }

    /// End of the stream a reader of `log` sees: the stream position of the first record
    /// of the oldest open transaction, or the stream end without one.
    pub(crate) fn visible_stream_end(&self) -> u64 {
        self.unstable_from()
            .map_or_else(|| self.stream_end(), |(_, pos)| pos)
    }

    /// The last stable offset and its stream position, while it is below the log end (a
    /// transaction is open). A record keeps its position, so the answer is kept until
    /// the last stable offset moves.
    pub(crate) fn unstable_from(&self) -> Option<(u64, u64)> {
        let lso = self.last_stable_offset();
        if lso >= self.log_end_offset() {
            return None;
        }
        let mut cached = self.unstable_position.lock();
        if let Some((offset, pos)) = *cached {
            if offset == lso {
                return Some((offset, pos));
            }
        }
        let snap = self.snapshot();
        let seg = &snap.segments[snap.segment_for(lso)?];
        let pos = match seg.stream_position_of(lso) {
            Ok(pos) => pos,
            Err(e) => {
                // Not cached: the next look tries again. The segment's stream start is
                // at or before the record, so nothing unstable is shown meanwhile.
                tracing::warn!(partition = %self.partition, error = %e, "cannot find where the open transaction starts in the stream");
                return Some((lso, seg.info().stream_start));
            }
        };
        *cached = Some((lso, pos));
        Some((lso, pos))
    }

    /// The producers whose state the partition keeps (Kafka's `UnifiedLog.activeProducers`:
    /// those not yet expired by `producer.id.expiration.ms`), by producer id.
    pub fn active_producers(&self) -> Vec<ProducerStateEntry> {
        let mut producers = self.producer_state.lock().entries();
        producers.sort_by_key(|p| p.producer_id);
        producers
    }

    #[cfg(feature = "internals")]
    pub fn size_bytes(&self) -> u64 {
        self.snapshot().segments.iter().map(|s| s.size()).sum()
    }

    pub fn poison_reason(&self) -> Option<String> {
        self.poisoned.lock().clone()
    }

    fn check_not_poisoned(&self) -> Result<()> {
        match &*self.poisoned.lock() {
            Some(reason) => Err(EngineError::Poisoned {
                topic: self.topic.clone(),
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Refuses a write to a log that a failed write poisoned or whose topic was deleted.
    pub(crate) fn check_takes_writes(&self) -> Result<()> {
        self.check_not_poisoned()?;
        self.check_not_deleted()
    }

    /// Marks the log failed after an I/O error on the write path, so no later write can
    /// land after a hole.
    fn poison(&self, e: &EngineError) {
        let mut p = self.poisoned.lock();
        if p.is_none() {
            tracing::error!(partition = %self.partition, error = %e, "write failed; refusing writes until remount");
            *p = Some(e.to_string());
        }
    }

    /// Appends records as one or more batches (split so each fits a segment), rolling
    /// first when Kafka would. All records get the same timestamp (CreateTime = now).
    /// The records' lines are in `data`, the written bytes; lines that sit there back to
    /// back with their newlines are written from `data` without a copy.
    pub(crate) fn append(
        &self,
        data: WriteBytes<'_>,
        records: WriteRecords<'_>,
        config: &TopicConfig,
    ) -> Result<AppendInfo> {
        self.with_writer(|writer| self.append_locked(writer, data, records, config))
    }

    /// Runs `append` under the writer lock, on a log that takes writes: an I/O failure
    /// that may have left part of it stored poisons the log.
    fn with_writer<T>(&self, append: impl FnOnce(&mut WriterState) -> Result<T>) -> Result<T> {
        let mut writer = self.writer.lock();
        // Under the writer lock: a close or a failure that got it first is seen here.
        self.check_takes_writes()?;
        let end_before = (self.log_end_offset(), self.stream_end());
        let result = append(&mut writer);
        if let Err(e @ EngineError::Io { .. }) = &result {
            // A full disk that failed the write's first batch, which was cut back (else
            // the error is not this one), leaves the log as it was: no hole for a later
            // write to land after, so the next write may simply try again. Anything
            // else (a later batch of the write already stored, a failed roll, a failed
            // fsync) cannot be undone or trusted: the log is poisoned.
            let undone = e.is_out_of_space()
                && (self.log_end_offset(), self.stream_end()) == end_before
                && self.snapshot().active().is_active();
            if undone {
                tracing::warn!(partition = %self.partition, error = %e, "append refused for lack of space; nothing of it was stored");
            } else {
                self.poison(e);
            }
        }
        result
    }

    /// Kafka's `UnifiedLog.append` on the leader for a batch a client produced, checked
    /// already ([`validate_produced`](super::produce::validate_produced)): a retry of one
    /// of its producer's last batches is answered with that batch's offsets and not
    /// appended again; otherwise the producer-state checks, then the batch goes at the
    /// log end (rolling first when Kafka would) and its records take their places in the
    /// `log` stream, under the rendering of `config` (the one it was validated with).
    /// `origin` says who appends it: a coordinator's own batches get no duplicate or
    /// sequence checks, as Kafka's `AppendOrigin.COORDINATOR`.
    pub(crate) fn append_produced(
        &self,
        mut batch: ValidatedBatch<'_>,
        config: &TopicConfig,
        origin: ProducedBy,
    ) -> Result<(ProduceOutcome, AppendInfo)> {
        assert_eq!(
            batch.shape,
            config.stream_shape(),
            "a batch is placed under the rendering it was validated with"
        );
        self.with_writer(|writer| {
            let segment_size = segment_size_of(config);
            let size = batch.size() as u64;
            if size > segment_size {
                return Err(EngineError::BatchOverSegmentSize {
                    partition: self.partition.clone(),
                    size,
                    segment_size: config.segment_size(),
                });
            }
            let (first_offset, stream_pos) = {
                let info = self.snapshot().active().info();
                (info.next_offset, info.stream_end)
            };
            let mut producers = self.producer_state.lock();
            if let Some(producer) = &batch.producer {
                let duplicate = (!origin.coordinator)
                    .then(|| producers.find_duplicate(producer))
                    .flatten();
                if let Some(original) = duplicate {
                    let outcome = ProduceOutcome {
                        base_offset: original.first_offset() as u64,
                        log_append_time_ms: original.timestamp,
                        log_start_offset: self.log_start_offset(),
                    };
                    return Ok((outcome, AppendInfo::default()));
                }
                producers.check(producer, (first_offset, &self.partition), origin)?;
                producers.begin_append(producer, first_offset);
            }
            drop(producers);
            set_base_offset(&mut batch.header, first_offset);
            let header = batch.decoded_header();
            let now = self.clock.now_ms();
            let mut info = AppendInfo {
                first_offset,
                last_offset: header.last_offset(),
                records: u64::from(header.record_count),
                bytes: size,
                appended_at_ms: now,
                rolls: Vec::new(),
            };
            let incoming_max_timestamp = header.max_timestamp;
            let stream_end = stream_pos + batch.stream_len;
            let mark = StreamMark {
                offset: first_offset,
                stream_pos,
                shape: batch.shape,
            };
            let appended = self
                .maybe_roll(
                    size,
                    incoming_max_timestamp,
                    segment_size,
                    config,
                    &mut info,
                )
                .and_then(|active| {
                    active.append_parts(
                        &[&batch.header, &batch.records],
                        BatchStream {
                            marks: &[mark],
                            stream_end,
                        },
                        config.index_interval_bytes.max(0) as u64,
                    )
                });
            if let Err(e) = appended {
                self.producer_state.lock().abandon_append();
                return Err(e);
            }
            let end = self.snapshot().active().info();
            assert_eq!(
                (end.next_offset, end.stream_end),
                (header.next_offset(), stream_end),
                "the log ends where the produced batch ends"
            );
            // Readers see the batch from here on (the log end covers it); its producer's
            // state is recorded next ([`ProducerStateManager::begin_append`]).
            #[cfg(test)]
            self.after_append.run();
            if let Some(producer) = batch.producer {
                self.producer_state.lock().record_batch(producer, &header);
            }
            self.count_unflushed(writer, info.records, now, config)?;
            let outcome = ProduceOutcome {
                base_offset: first_offset,
                log_append_time_ms: batch.log_append_time_ms,
                log_start_offset: self.log_start_offset(),
            };
            Ok((outcome, info))
        })
    }

    /// Kafka's append of an end-transaction marker (`WriteTxnMarkers`, origin
    /// COORDINATOR): a control batch of one COMMIT or ABORT record from `marker`'s
    /// producer at the log end, which ends the producer's open transaction here, if it
    /// has one. An abort goes into the active segment's transaction index with the last
    /// stable offset after it (`updateTxnIndex`, then `completeTxn`). A marker takes an
    /// offset but no place in the `log` stream. Returns its offset.
    pub(crate) fn append_txn_marker(
        &self,
        marker: &TxnMarkerWrite,
        config: &TopicConfig,
    ) -> Result<u64> {
        self.with_writer(|writer| {
            let segment_size = segment_size_of(config);
            let (offset, stream_end) = {
                let info = self.snapshot().active().info();
                (info.next_offset, info.stream_end)
            };
            let now = self.clock.now_ms();
            let at = TxnMarkerAt {
                producer_id: marker.producer_id,
                epoch: marker.producer_epoch,
                offset,
                timestamp: now,
            };
            self.producer_state.lock().check_marker(
                &at,
                marker.marker,
                (&self.partition, marker.transaction_version),
            )?;
            let builder = &mut writer.builder;
            builder.reset(offset, Some(now));
            builder.push(
                offset,
                now,
                Some(&marker.marker.key()),
                Some(&marker.marker.value()),
            );
            let parts = builder
                .finish_parts(&BatchEnd {
                    identity: BatchIdentity {
                        producer_id: marker.producer_id,
                        producer_epoch: marker.producer_epoch,
                        transactional: true,
                        control: true,
                        ..BatchIdentity::PLAIN
                    },
                    log_append_time_ms: (config.message_timestamp_type
                        == TimestampType::LogAppendTime)
                        .then_some(now),
                    ..BatchEnd::PLAIN
                })
                .expect("an uncompressed batch always builds");
            let size = parts.len() as u64;
            let mut info = AppendInfo {
                first_offset: offset,
                last_offset: offset,
                appended_at_ms: now,
                ..AppendInfo::default()
            };
            let active = self.maybe_roll(size, now, segment_size, config, &mut info)?;
            active.append_parts(
                &parts.slices(),
                BatchStream {
                    marks: &[],
                    stream_end,
                },
                config.index_interval_bytes.max(0) as u64,
            )?;
            // The index entry lands under the producer-state lock, before anyone can see
            // the new last stable offset: a reader that sees the transaction decided
            // finds its abort.
            let mut producers = self.producer_state.lock();
            if let Some(aborted) = producers.apply_marker(&at, marker.marker) {
                active.append_aborted(aborted)?;
            }
            drop(producers);
            let end = self.snapshot().active().info();
            assert_eq!(
                (end.next_offset, end.stream_end),
                (offset + 1, stream_end),
                "a marker takes one offset and no stream bytes"
            );
            self.count_unflushed(writer, 1, now, config)?;
            Ok(offset)
        })
    }

    /// Kafka's `lastStableOffset` (the high watermark is the log end here, every append
    /// being acknowledged by the only replica): the first offset of the oldest open
    /// transaction, not below the log start, else the log end. `read_committed` readers
    /// see the records below it.
    pub fn last_stable_offset(&self) -> u64 {
        let log_end = self.log_end_offset();
        self.producer_state
            .lock()
            .first_unstable_offset()
            .map_or(log_end, |first| {
                first.max(self.log_start_offset()).min(log_end)
            })
    }

    /// The open transactions, oldest first: (producer id, first offset).
    pub fn ongoing_txns(&self) -> Vec<(i64, u64)> {
        self.producer_state.lock().ongoing_txns()
    }

    /// Kafka's flush after an append: when `flush.messages` records are unflushed, or
    /// `flush.ms` passed since the last flush.
    fn count_unflushed(
        &self,
        writer: &mut WriterState,
        records: u64,
        now: i64,
        config: &TopicConfig,
    ) -> Result<()> {
        writer.unflushed_records += records;
        let due_by_count = writer.unflushed_records >= config.flush_messages.max(1) as u64;
        let due_by_time = now - writer.last_flush_ms >= config.flush_ms;
        if due_by_count || due_by_time {
            self.sync_unsynced()?;
            writer.unflushed_records = 0;
            writer.last_flush_ms = now;
        }
        Ok(())
    }

    /// Refuses records of which one alone would not fit an empty segment (Kafka's
    /// `RecordBatchTooLargeException` of `LogSegment`'s size).
    pub(crate) fn check_fits_segment(
        &self,
        data: WriteBytes<'_>,
        records: WriteRecords<'_>,
        config: &TopicConfig,
    ) -> Result<()> {
        let segment_size = segment_size_of(config);
        match first_oversized_record(data, records, segment_size) {
            Some(single) => Err(EngineError::BatchOverSegmentSize {
                partition: self.partition.clone(),
                size: single,
                segment_size: config.segment_size(),
            }),
            None => Ok(()),
        }
    }

    fn append_locked(
        &self,
        writer: &mut WriterState,
        data: WriteBytes<'_>,
        records: WriteRecords<'_>,
        config: &TopicConfig,
    ) -> Result<AppendInfo> {
        // Whole-append checks first, so a refused write changes nothing.
        self.check_fits_segment(data, records, config)?;
        let mut into = BatchesInto::new(self, config, self.clock.now_ms());
        // Where the next batch starts in the write: a record index for parsed records, a
        // byte position for plain ones.
        let (mut next_record, mut next_byte) = (0, 0);
        loop {
            let builder = &mut writer.builder;
            let batch = match records {
                WriteRecords::Parsed(parsed) => {
                    next_parsed_batch(builder, data, parsed, &mut next_record, &into.start)
                }
                WriteRecords::Plain => next_plain_batch(builder, data, &mut next_byte, &into.start),
            };
            let Some(batch) = batch else { break };
            into.write(&mut writer.builder, batch)?;
        }
        into.finish(writer)
    }

    /// Appends the batches of one write that were built before the writer lock was taken
    /// (a keyed write's part for this partition), stamped `now`, at the log end, one
    /// after another: all of them, or none when one holds a record too big for a segment
    /// (checked first, as [`Log::check_built_fit_segment`] checks).
    pub(crate) fn append_built(
        &self,
        batches: &mut [BuiltBatch],
        config: &TopicConfig,
        now: i64,
    ) -> Result<AppendInfo> {
        self.with_writer(|writer| {
            self.check_built_fit_segment(batches, config)?;
            let mut into = BatchesInto::new(self, config, now);
            for built in batches.iter_mut() {
                // A batch's records hold offset deltas only: the header takes the base.
                built.builder.move_to(into.start.offset);
                let batch = FilledBatch {
                    records: u64::from(built.builder.record_count()),
                    stream_end: into.start.stream_pos + built.stream_len,
                };
                into.write(&mut built.builder, batch)?;
            }
            into.finish(writer)
        })
    }

    /// [`Log::check_fits_segment`] for built batches: a record too big for a segment is
    /// alone in its batch (a batch of several stays within [`append_batch_limit`]), and a
    /// batch of one record is exactly the size the check computes.
    pub(crate) fn check_built_fit_segment(
        &self,
        batches: &[BuiltBatch],
        config: &TopicConfig,
    ) -> Result<()> {
        let segment_size = segment_size_of(config);
        match batches
            .iter()
            .map(|b| b.builder.encoded_len() as u64)
            .find(|&size| size > segment_size)
        {
            Some(single) => Err(EngineError::BatchOverSegmentSize {
                partition: self.partition.clone(),
                size: single,
                segment_size: config.segment_size(),
            }),
            None => Ok(()),
        }
    }

    /// Rolls first when Kafka would; returns the active segment the batch goes to
    /// (`incoming_max_timestamp`: the batch's max timestamp, which a segment's age counts
    /// to).
    fn maybe_roll(
        &self,
        incoming_bytes: u64,
        incoming_max_timestamp: i64,
        segment_size: u64,
        config: &TopicConfig,
        info: &mut AppendInfo,
    ) -> Result<Arc<Segment>> {
        let active = self.snapshot().active().clone();
        let next = active.next_offset();
        let overflow = next - active.base_offset() > MAX_RELATIVE_OFFSET;
        let reason = if overflow && !active.is_empty() {
            Some(RollReason::IndexFull)
        } else {
            active.roll_reason(
                incoming_bytes,
                incoming_max_timestamp,
                segment_size,
                config.max_segment_ms(),
                self.clock.now_ms(),
            )
        };
        match reason {
            Some(reason) if !active.is_empty() => {
                let rolled = self.roll_locked(config, reason)?;
                info.rolls.push((next, reason));
                Ok(rolled)
            }
            _ => Ok(active),
        }
    }

    /// Seals the active segment and starts a new one at the log end offset. Caller holds
    /// the writer lock.
    fn roll_locked(&self, config: &TopicConfig, reason: RollReason) -> Result<Arc<Segment>> {
        let snap = self.snapshot();
        let old = snap.active().clone();
        let info = old.info();
        // Not synced here (Kafka flushes rolled segments in the background too): an fsync
        // of `log` syncs every segment no fsync has covered, and recovery cuts the log at
        // a segment that lost its tail, so a power cut never leaves a hole.
        old.seal()?;
        let new = Arc::new(new_active_segment(
            &self.dir,
            &self.stream_dir,
            info.next_offset,
            info.stream_end,
            config,
            self.clock.now_ms(),
            self.next_jitter(config),
        )?);
        // Kafka's `roll`: the producer state at the new base, synced by the flush of the
        // rolled segments (`takeSnapshot(false)`).
        // On a full disk the roll goes on without it (retention's roll is how space comes
        // back): an open replays the producer state from the previous snapshot over the
        // log instead (row 13), so nothing is lost but time.
        let taken = self.producer_state.lock().take(info.next_offset, false);
        match taken {
            Err(e) if e.is_out_of_space() => {
                tracing::warn!(partition = %self.partition, error = %e, "rolled without a producer snapshot for lack of space");
            }
            other => other?,
        }
        self.sync_dirs()?;
        let mut sh = self.shared.write();
        let mut segs: Vec<Arc<Segment>> = sh.segments.as_ref().clone();
        segs.push(new.clone());
        sh.segments = Arc::new(segs);
        drop(sh);
        self.check_invariants();
        tracing::debug!(partition = %self.partition, base_offset = info.next_offset, %reason, "rolled new segment");
        Ok(new)
    }

    /// Rolls now (tests and retention).
    #[cfg(any(test, feature = "internals"))]
    pub fn roll(&self, config: &TopicConfig, reason: RollReason) -> Result<()> {
        let _w = self.writer.lock();
        if !self.snapshot().active().is_empty() {
            self.roll_locked(config, reason)?;
        }
        Ok(())
    }

    /// Removes the oldest segments up to and including `last_base`, renaming their files
    /// `.deleted`. If that would remove every segment, a new empty active segment is rolled
    /// first. Moves the log start offset to the first remaining segment.
    pub fn delete_segments_through(
        &self,
        last_base: u64,
        config: &TopicConfig,
    ) -> Result<Vec<DeletedSegment>> {
        let _w = self.writer.lock();
        let snap = self.snapshot();
        if snap.active().base_offset() <= last_base {
            assert!(
                !snap.active().is_empty(),
                "an empty active segment is never deleted"
            );
            self.roll_locked(config, RollReason::Retention)?;
        }
        let victims: Vec<Arc<Segment>>;
        let log_start;
        {
            let mut sh = self.shared.write();
            let (gone, kept): (Vec<_>, Vec<_>) = sh
                .segments
                .iter()
                .cloned()
                .partition(|s| s.base_offset() <= last_base);
            assert!(
                !kept.is_empty(),
                "the active segment always survives deletion"
            );
            sh.log_start_offset = sh.log_start_offset.max(kept[0].base_offset());
            log_start = sh.log_start_offset;
            sh.segments = Arc::new(kept);
            victims = gone;
        }
        let mut deleted = Vec::new();
        for seg in victims {
            seg.rename_suffix(DELETED_SUFFIX)?;
            deleted.push(self.deleted_with_snapshot(seg)?);
        }
        self.producer_state.lock().log_start_moved(log_start);
        self.leader_epochs.lock().log_start_moved(log_start)?;
        self.sync_dirs()?;
        self.check_invariants();
        Ok(deleted)
    }

    /// Kafka's `maybeIncrementLogStartOffset`: moves the log start offset up to
    /// `offset` (at most the log end; never down), and the producer snapshots and the
    /// leader-epoch checkpoint with it. Returns the new start if it moved. The segments
    /// wholly below it stay until retention's log-start rule deletes them; readers skip
    /// their records.
    pub(crate) fn increment_log_start_offset(&self, offset: u64) -> Result<Option<u64>> {
        let _w = self.writer.lock();
        let log_end = self.log_end_offset();
        assert!(offset <= log_end, "the log start never passes the log end");
        {
            let mut sh = self.shared.write();
            if offset <= sh.log_start_offset {
                return Ok(None);
            }
            sh.log_start_offset = offset;
        }
        self.producer_state.lock().log_start_moved(offset);
        self.leader_epochs.lock().log_start_moved(offset)?;
        self.check_invariants();
        Ok(Some(offset))
    }

    /// At open: the log start of `log-start-offset-checkpoint`, if above the first
    /// segment's base. A checkpoint past the log end (its records lost after it was
    /// written, or files removed by hand) is held to the log end, with a warning.
    pub(crate) fn restore_log_start_offset(&self, checkpointed: u64) -> Result<()> {
        let log_end = self.log_end_offset();
        if checkpointed > log_end {
            tracing::warn!(partition = %self.partition, checkpointed, log_end, "the checkpointed log start offset is past the log end; the log starts at its end");
        }
        self.increment_log_start_offset(checkpointed.min(log_end))
            .map(|_| ())
    }

    /// Replaces the segments with the given base offsets (a contiguous run, never the
    /// active one) by `new_segments`, which are complete `.cleaned` segments: the
    /// crash-safe swap of docs/ARCHITECTURE.md (.cleaned -> .swap, old -> .deleted,
    /// .swap -> final).
    pub(crate) fn replace_segments(
        &self,
        old_bases: &[u64],
        new_segments: Vec<Segment>,
    ) -> Result<Vec<DeletedSegment>> {
        let _w = self.writer.lock();
        let snap = self.snapshot();
        let active_base = snap.active().base_offset();
        assert!(
            old_bases.iter().all(|&b| b < active_base),
            "the active segment is never cleaned"
        );
        let old: Vec<Arc<Segment>> = snap
            .segments
            .iter()
            .filter(|s| old_bases.contains(&s.base_offset()))
            .cloned()
            .collect();
        if old.len() != old_bases.len() {
            // Retention removed some of them while the cleaner copied: drop the copy.
            return Err(EngineError::CleanAborted {
                reason: "segments were deleted while they were being cleaned".into(),
            });
        }
        for seg in new_segments.iter().rev() {
            seg.rename_suffix(SWAP_SUFFIX)?;
        }
        self.sync_dirs()?;
        let mut deleted = Vec::new();
        let new_bases: Vec<u64> = new_segments.iter().map(|s| s.base_offset()).collect();
        for seg in &old {
            seg.rename_suffix(DELETED_SUFFIX)?;
            if new_bases.contains(&seg.base_offset()) {
                deleted.push(DeletedSegment {
                    files: seg.file_paths(),
                    segment: seg.clone(),
                });
            } else {
                // Kafka's `replaceSegments` deletes the snapshots of the segments no new
                // one replaces (`deletedNotReplaced`).
                deleted.push(self.deleted_with_snapshot(seg.clone())?);
            }
        }
        let new_arcs: Vec<Arc<Segment>> = new_segments.into_iter().map(Arc::new).collect();
        for seg in &new_arcs {
            seg.rename_suffix("")?;
        }
        self.sync_dirs()?;
        {
            let mut sh = self.shared.write();
            let mut segs: Vec<Arc<Segment>> = sh
                .segments
                .iter()
                .filter(|s| !old_bases.contains(&s.base_offset()))
                .cloned()
                .collect();
            segs.extend(new_arcs);
            segs.sort_by_key(|s| s.base_offset());
            sh.segments = Arc::new(segs);
        }
        self.check_invariants();
        Ok(deleted)
    }

    /// A segment renamed `.deleted`, with its producer-state snapshot renamed too (Kafka's
    /// `deleteProducerSnapshots`), so both go after `file.delete.delay.ms`.
    fn deleted_with_snapshot(&self, segment: Arc<Segment>) -> Result<DeletedSegment> {
        let mut files = segment.file_paths();
        if let Some(snapshot) = self
            .producer_state
            .lock()
            .mark_deleted(segment.base_offset())?
        {
            files.push(snapshot);
        }
        Ok(DeletedSegment { segment, files })
    }

    /// Moves the partition directory to `to` (the topic is being deleted) and, once it
    /// moved, refuses every later append. Under the writer lock, so no append or roll
    /// runs during the rename and none is acknowledged after this returns; if the rename
    /// fails, the log is exactly as it was.
    ///
    /// The topic's kpfs folder follows under the same name in `kpfs-topics/`; returns
    /// the directories to remove. When that second rename fails, the folder is an orphan
    /// the next open removes (recovery row 12).
    pub(crate) fn retire_dir(&self, to: &Path) -> Result<Vec<PathBuf>> {
        let _writer = self.writer.lock();
        fs::rename(&self.dir, to).map_err(io_at(&self.dir, "rename"))?;
        self.deleted.store(true, Ordering::Release);
        let kpfs_to = kpfs_topic_dir(to);
        match fs::rename(&self.stream_dir, &kpfs_to) {
            Ok(()) => Ok(vec![to.to_path_buf(), kpfs_to]),
            Err(e) => {
                tracing::warn!(dir = %self.stream_dir.display(), error = %e, "cannot retire the topic's kpfs folder; the next open removes it");
                Ok(vec![to.to_path_buf()])
            }
        }
    }

    /// Refuses anything done to a deleted topic through a handle taken before: the
    /// name may already belong to a new topic, and these files are about to go.
    pub(crate) fn check_not_deleted(&self) -> Result<()> {
        if self.deleted.load(Ordering::Acquire) {
            return Err(EngineError::UnknownTopic {
                name: self.topic.clone(),
            });
        }
        Ok(())
    }

    /// fsync of everything appended so far.
    pub(crate) fn flush(&self) -> Result<()> {
        let mut writer = self.writer.lock();
        let result = self.sync_unsynced();
        if let Err(e) = &result {
            self.poison(e);
        } else {
            writer.unflushed_records = 0;
            writer.last_flush_ms = self.clock.now_ms();
        }
        result
    }

    /// fsync of every segment holding bytes no fsync has covered yet: segments that
    /// rolled since the last flush and segments recovered after a crash, not only the
    /// active one, or an fsync after a roll would return with records still in the page
    /// cache. Indexes are synced too, then the recovery point moves to the log end.
    /// Caller holds the writer lock.
    fn sync_unsynced(&self) -> Result<()> {
        let snap = self.snapshot();
        let active = snap.active();
        let log_end = active.next_offset();
        self.flush_sealed(&snap)?;
        active.flush()?;
        self.recovery_point.fetch_max(log_end, Ordering::Relaxed);
        Ok(())
    }

    /// Flushes sealed segments no fsync has covered yet. A segment retention or the
    /// cleaner took out of the log meanwhile (and whose files may be gone) needs none.
    fn flush_sealed(&self, snap: &LogSnapshot) -> Result<()> {
        let (_, sealed) = snap.segments.split_last().expect("a log has a segment");
        for s in sealed {
            if s.synced_size() < s.size() {
                if let Err(e) = s.flush() {
                    if self.holds(s) {
                        return Err(e);
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether `segment` is still one of the log's segments.
    fn holds(&self, segment: &Segment) -> bool {
        self.snapshot()
            .segments
            .iter()
            .any(|s| s.id() == segment.id())
    }

    /// Kafka's `flush-log` task after a roll: flushes the segments below the active one
    /// and moves the recovery point to the active segment's base. Runs without the
    /// writer lock, so appends go on meanwhile: sealed segments no longer change, and the
    /// cleaner's replacements are flushed before they are swapped in.
    pub(crate) fn flush_rolled_segments(&self) -> Result<()> {
        let snap = self.snapshot();
        let active_base = snap.active().base_offset();
        if self.recovery_point.load(Ordering::Relaxed) >= active_base {
            return Ok(());
        }
        let result = self
            .flush_sealed(&snap)
            .and_then(|()| self.producer_state.lock().sync_rolled());
        match &result {
            Ok(()) => {
                self.recovery_point
                    .fetch_max(active_base, Ordering::Relaxed);
            }
            Err(e) => self.poison(e),
        }
        result
    }

    /// See the `recovery_point` field.
    pub fn recovery_point(&self) -> u64 {
        self.recovery_point.load(Ordering::Relaxed)
    }

    /// Flushes when `flush.ms` has passed since the last flush with records pending.
    pub(crate) fn maybe_flush_by_time(&self, config: &TopicConfig) -> Result<()> {
        let due = {
            let w = self.writer.lock();
            w.unflushed_records > 0 && self.clock.now_ms() - w.last_flush_ms >= config.flush_ms
        };
        if due {
            self.flush()?;
        }
        Ok(())
    }

    /// Clean close: flush every segment and trim the active segment's indexes. Later
    /// appends are refused (a FUSE request that outlived the session's drain).
    pub(crate) fn close(&self) -> Result<()> {
        let _w = self.writer.lock();
        self.poisoned
            .lock()
            .get_or_insert_with(|| "the data directory was closed".to_string());
        let snap = self.snapshot();
        // Sealed first: its final time-index entry and trimmed files are flushed too.
        snap.active().seal()?;
        for s in snap.segments.iter() {
            s.flush()?;
        }
        // Kafka's `close`: a snapshot at the log end, so a restart need not scan the log.
        self.producer_state
            .lock()
            .take(snap.active().next_offset(), true)?;
        self.recovery_point
            .fetch_max(snap.active().next_offset(), Ordering::Relaxed);
        Ok(())
    }

    /// What invariants 1, 2, 3 and 5 of docs/ARCHITECTURE.md say about the segment list,
    /// asserted after every roll, deletion, swap and open. In every build: it looks
    /// at each segment's in-memory facts, its file name and last index entry, never at
    /// the data, so it costs O(segments) on operations that already rename files and
    /// fsync a directory.
    pub(crate) fn check_invariants(&self) {
        let snap = self.snapshot();
        assert!(
            !snap.segments.is_empty(),
            "a log always has an active segment"
        );
        let mut prev_next: Option<u64> = None;
        for s in snap.segments.iter() {
            let info = s.info();
            assert!(
                info.next_offset >= info.base_offset,
                "segment next offset below its base"
            );
            if let Some(p) = prev_next {
                assert!(
                    info.base_offset >= p,
                    "segments overlap: base {} below previous end {p}",
                    info.base_offset
                );
            }
            prev_next = Some(info.next_offset);
            let name = s.log_path();
            let file_name = name
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            let (base, _) = parse_segment_file_name(file_name).expect("segment file names parse");
            assert_eq!(
                base, info.base_offset,
                "segment base offset matches its file name"
            );
            if let Some((_, pos)) = s.last_index_entry() {
                assert!(
                    u64::from(pos) < info.size,
                    "index entries never point past the data"
                );
            }
        }
        assert!(
            snap.log_start_offset >= snap.segments[0].base_offset(),
            "log start offset below the first segment"
        );
        assert!(
            snap.log_start_offset <= snap.active().next_offset(),
            "log start offset past the log end"
        );
    }
}

/// An end-transaction marker for one partition, as the transaction coordinator writes it
/// (an entry of Kafka's `WriteTxnMarkersRequest`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnMarkerWrite {
    pub producer_id: i64,
    /// The epoch the marker carries: under transaction version 2, the producer's bumped one.
    pub producer_epoch: i16,
    pub(crate) marker: EndTxnMarker,
    /// Kafka's `TransactionVersion` of the transaction (2 for Kafka 4 clients).
    pub transaction_version: i16,
}

impl TxnMarkerWrite {
    pub fn new(
        (producer_id, producer_epoch): (i64, i16),
        commit: bool,
        coordinator_epoch: i32,
        transaction_version: i16,
    ) -> TxnMarkerWrite {
        TxnMarkerWrite {
            producer_id,
            producer_epoch,
            marker: EndTxnMarker {
                commit,
                coordinator_epoch,
            },
            transaction_version,
        }
    }
}

/// Kafka's `loadProducersFromRecords` over the batches from the producer state's map end
/// to the log end (the headers, and the marker of a control batch), putting back the
/// entries of aborted transactions that a recovered segment's transaction index lost.
/// Past `recovered_from` (where recovery cut a transaction index), a snapshot is taken at
/// each segment base crossed, as Kafka's `recoverSegment` takes one at the end of each
/// segment it recovers.
fn replay_producers(
    snap: &LogSnapshot,
    state: &mut ProducerStateManager,
    recovered_from: Option<u64>,
) -> Result<()> {
    let from = state.map_end_offset().max(snap.log_start_offset);
    for segment in snap.segments.iter().filter(|s| s.next_offset() > from) {
        let base = segment.base_offset();
        if base > from && recovered_from.is_some_and(|r| base > r) {
            state.take(base, true)?;
        }
        let mut pos = if segment.base_offset() < from {
            segment.lookup_position(from)?
        } else {
            0
        };
        loop {
            let batches = segment.mapped_batches(pos, PRODUCER_REPLAY_READ_BYTES)?;
            if batches.is_empty() {
                break;
            }
            let mut at = 0;
            while at < batches.len() {
                let header = decode_header(&batches[at..]).expect("mapped batches decode");
                if header.last_offset() >= from {
                    let marker = EndTxnMarker::of_batch(&header, &batches[at..at + header.size]);
                    if let Some(aborted) = state.replay(&header, marker) {
                        segment.ensure_aborted(aborted)?;
                    }
                }
                at += header.size;
            }
            pos += batches.len() as u64;
        }
    }
    Ok(())
}

/// A new active segment at `base_offset` and `stream_pos`, its `.log` preallocated to the
/// segment size when the topic has `preallocate` (Kafka's `initFileSize`).
fn new_active_segment(
    dir: &Path,
    stream_dir: &Path,
    base_offset: u64,
    stream_pos: u64,
    config: &TopicConfig,
    now_ms: i64,
    roll_jitter_ms: i64,
) -> Result<Segment> {
    let segment = Segment::create(&SegmentSpec {
        dir,
        stream_dir,
        shape: config.stream_shape(),
        base_offset,
        suffix: "",
        stream_pos,
        max_index_bytes: config.segment_index_bytes.max(0) as usize,
        now_ms,
        roll_jitter_ms,
    })?;
    if config.preallocate && config.segment_size() > 0 {
        segment.preallocate(config.segment_size() as u64)?;
    }
    Ok(segment)
}

/// A log's own seed for its segments' roll jitter. Kafka draws each jitter from
/// `ThreadLocalRandom`; a seed of the clock alone would give the partitions of a topic
/// opened in one millisecond the same jitters, and they would roll together, which is
/// what the jitter is for avoiding.
fn jitter_seed(dir: &Path, now: i64) -> u64 {
    use std::hash::{BuildHasher, Hash, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    dir.hash(&mut hasher);
    now.hash(&mut hasher);
    // xorshift stays at 0 forever.
    hasher.finish() | 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_opened_in_one_millisecond_draw_different_jitters() {
        let dir = tempfile::tempdir().unwrap();
        let clock: Arc<dyn Clock> = Arc::new(crate::engine::ManualClock::new(1_764_430_000_000));
        let mut config = crate::engine::BrokerConfig::load(None, &[])
            .unwrap()
            .resolve_topic(&Default::default());
        config.segment_jitter_ms = 3_600_000;
        let jitters = |partition: u32| {
            let tp = TopicPartition::new("t", partition);
            let (log, _) = Log::open(
                &dir.path().join(tp.dir_name()),
                &tp,
                &config,
                clock.clone(),
                Durability::CleanShutdown,
            )
            .unwrap();
            (0..4).map(|_| log.next_jitter(&config)).collect::<Vec<_>>()
        };
        let (zero, one) = (jitters(0), jitters(1));
        assert_ne!(zero, one);
        assert!(zero.iter().chain(&one).all(|j| (0..3_600_000).contains(j)));
    }

    proptest::proptest! {
        /// The windowed search finds the line a line-by-line search finds.
        #[test]
        fn the_first_overlong_line_is_found_as_a_line_by_line_search_finds_it(
            line_lens in proptest::collection::vec(0usize..40, 0..30),
            terminated in proptest::bool::ANY,
            limit in 0usize..50,
        ) {
            let mut piece = Vec::new();
            for (i, len) in line_lens.iter().enumerate() {
                piece.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, *len));
                piece.push(b'\n');
            }
            if !terminated {
                piece.extend_from_slice(b"tail");
            }
            let naive = piece
                .split(|&b| b == b'\n')
                .map(<[u8]>::len)
                .find(|&len| len > limit);
            proptest::prop_assert_eq!(first_line_longer_than(&piece, limit), naive);
        }

        /// The bound on the longest key and value skips only searches that find nothing.
        #[test]
        fn the_first_oversized_record_is_the_first_a_record_by_record_search_finds(
            lens in proptest::collection::vec((-1i64..300, -1i64..300), 0..20),
            limit in 60u64..700,
        ) {
            let records: Vec<PendingRecord> = lens
                .iter()
                .map(|&(key_len, value_len)| PendingRecord {
                    line_start: 0,
                    line_len: 0,
                    key_len,
                    value_len,
                })
                .collect();
            let naive = lens
                .iter()
                .map(|&(k, v)| BatchBuilder::single_record_batch_size(k, v) as u64)
                .find(|&single| single > limit);
            let data = WriteBytes::new(b"");
            proptest::prop_assert_eq!(
                first_oversized_record(data, WriteRecords::Parsed(&records), limit),
                naive
            );
        }
    }
}
