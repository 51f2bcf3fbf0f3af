//! One topic = one Kafka partition: its log, its configuration, the line protocol that
//! turns written bytes into records, and the rendering of records into the `log` stream.
//!
//! The `log` stream: every record has a stream position fixed at append time (the sum of
//! the rendered sizes of all records before it). The size of `log` is the end of the
//! stream and never decreases; retention and compaction leave gaps that readers skip.
//! A reader's kernel offset therefore advances by the bytes actually returned, and each
//! open handle keeps a [`LogCursor`] that maps its offset back to a record.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::clock::Clock;
use super::config::{
    BrokerConfig, ConfigChange, ConfigError, ConfigScope, TopicConfig, TopicOverrides,
};
use super::error::{EngineError, Excerpt, Result};
use super::files::temporary_path;
use super::format::{
    decode_header, field_len, parse_segment_file_name, plain_batch_size, BatchBuilder, RecordIter,
    RecordRef, LOG_SUFFIX,
};
use super::log::{
    first_oversized_record, sync_dir, AppendInfo, DeletedSegment, Durability, Log, LogSnapshot,
    OpenReport, PendingRecord, WriteBytes, WriteRecords,
};
use super::log_loader::remove_stale_temporary;
use super::retention::{self, DeletionCause, SegmentFacts};
use super::segment::{MappedBatches, Segment};

/// File in the partition directory holding the topic's config overrides.
pub const TOPIC_CONFIG_FILE: &str = "kpfs-topic.properties";

/// A file in the partition directory, as `segments/` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackingFile {
    pub name: String,
    pub size: u64,
    /// `st_blocks` of the file: 512-byte units allocated (less than `size` for a sparse,
    /// preallocated index).
    pub blocks: u64,
    pub mtime_ms: i64,
}

/// Where one open `log` handle is in the stream. Sequential reads continue from here;
/// a read at another position repositions by stream position.
#[derive(Debug, Default)]
pub struct LogCursor {
    positioned: bool,
    /// Kernel offset the next sequential read will ask for.
    next_pos: u64,
    /// Offset of the next record to render.
    next_offset: u64,
    /// Bytes of that record's rendering to drop (set when repositioning mid-record).
    skip: u64,
    /// Rendered bytes not yet returned (the tail of the last batch rendered).
    pending: Vec<u8>,
    pending_at: usize,
    /// Or, when the batch's stored lines were its rendering, the rest of them, still in
    /// the segment's mapping: a batch is as big as a read, so most reads end inside one,
    /// and copying its rest aside doubled the bytes every read copied.
    pending_mapped: Option<MappedBatches>,
    /// (segment id, file position) of the batch after the last one rendered.
    hint: Option<(u64, u64)>,
    /// The bytes the last read returned, when it was small, and the kernel offset they
    /// started at. Tools such as bash's `read` and `head` read a block, then seek back to
    /// just after what they used; once retention or compaction has left gaps, kernel
    /// offsets no longer equal stream positions, so such a re-read is served from what
    /// this handle was given rather than mapped again (which could repeat records).
    replay: Vec<u8>,
    replay_at: u64,
}

/// See [`Topic::retention_view`].
struct RetentionView {
    facts: Vec<SegmentFacts>,
    segments: Arc<Vec<Arc<Segment>>>,
    log_end: u64,
}

/// How often one read starts again on a fresh snapshot after a segment vanished under it.
const STALE_READ_RETRIES: u32 = 3;

/// Reads up to this size are kept for re-reads after a short seek back.
const REPLAY_LIMIT: usize = 64 << 10;

/// Segments deleted by one retention step.
#[derive(Debug)]
pub struct RetentionDeletion {
    pub cause: DeletionCause,
    pub segments: Vec<DeletedSegment>,
}

/// Counters shown in `status` and `.kpfs/metrics`.
#[derive(Debug, Default)]
pub struct TopicStats {
    pub appended_records: AtomicU64,
    pub appended_bytes: AtomicU64,
    pub reader_skips: AtomicU64,
    pub segments_deleted_time: AtomicU64,
    pub segments_deleted_size: AtomicU64,
    pub segments_deleted_log_start: AtomicU64,
    /// Records of refused appends, by reason (a refused write refuses all its records).
    pub refused_keyless_compacted: AtomicU64,
    pub refused_too_large: AtomicU64,
    pub refused_invalid: AtomicU64,
}

/// Why an append was refused, as the metrics label it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusalReason {
    KeylessCompacted,
    TooLarge,
    Invalid,
}

impl RefusalReason {
    pub const ALL: [RefusalReason; 3] = [
        RefusalReason::KeylessCompacted,
        RefusalReason::TooLarge,
        RefusalReason::Invalid,
    ];

    /// The refusal an append error counts as; `None` for errors that are not the
    /// records' fault (I/O, a poisoned log).
    pub fn of(error: &EngineError) -> Option<RefusalReason> {
        match error {
            EngineError::RecordTooLarge { .. } => Some(RefusalReason::TooLarge),
            EngineError::InvalidRecord { message }
                if message.starts_with("Compacted topic cannot accept message without key") =>
            {
                Some(RefusalReason::KeylessCompacted)
            }
            EngineError::InvalidRecord { .. } => Some(RefusalReason::Invalid),
            _ => None,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            RefusalReason::KeylessCompacted => "keyless_compacted",
            RefusalReason::TooLarge => "too_large",
            RefusalReason::Invalid => "invalid",
        }
    }
}

impl TopicStats {
    pub fn refused(&self, reason: RefusalReason) -> &AtomicU64 {
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
    /// Why the overrides in force are not yet in `kpfs-topic.properties` (the disk was
    /// full when they changed); saved as soon as there is space.
    unsaved_overrides: Mutex<Option<String>>,
    config: RwLock<Arc<TopicConfig>>,
    clock: Arc<dyn Clock>,
    modified_ms: AtomicI64,
    /// The first segment seen holding future timestamps (for `status`), or -1.
    future_timestamp_segment: AtomicI64,
    pub stats: TopicStats,
    pub cleaner: super::cleaner::TopicCleaner,
    pub events: super::events::EventLog,
}

impl std::fmt::Debug for Topic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Topic").field("name", &self.name).finish()
    }
}

impl Topic {
    /// Opens (or creates) the topic stored in `dir` (`DATA_DIR/TOPIC-0`).
    pub fn open(
        name: &str,
        dir: &Path,
        broker: Arc<RwLock<BrokerConfig>>,
        clock: Arc<dyn Clock>,
        durability: Durability,
    ) -> Result<(Topic, OpenReport)> {
        let config_path = dir.join(TOPIC_CONFIG_FILE);
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
        let (log, report) = Log::open(dir, name, &config, clock.clone(), durability)?;
        let modified = log
            .snapshot()
            .active()
            .modified()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or_else(|| clock.now_ms(), |d| d.as_millis() as i64);
        Ok((
            Topic {
                name: name.to_string(),
                log,
                broker,
                overrides: RwLock::new(overrides),
                unsaved_overrides: Mutex::new(None),
                config: RwLock::new(Arc::new(config)),
                clock,
                modified_ms: AtomicI64::new(modified),
                future_timestamp_segment: AtomicI64::new(-1),
                stats: TopicStats::default(),
                cleaner: Default::default(),
                events: Default::default(),
            },
            report,
        ))
    }

    pub fn name(&self) -> &str {
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
    pub fn refresh_config(&self) {
        let resolved = self.broker.read().resolve_topic(&self.overrides.read());
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
        let result = self.append_parsed(data);
        if let Err(e) = &result {
            self.note_refused_append(e, count_lines(data.head) + count_lines(data.body));
        }
        result
    }

    /// Refuses an unterminated line of `len` bytes (its newline has not arrived yet) that
    /// can no longer become a record: even the smallest batch that could hold it, a plain
    /// batch of this line alone, is over `max.message.bytes`. Refusing it now keeps a
    /// stream without newlines from growing a writer's buffer without bound. Counted as
    /// one refused record.
    pub fn check_unterminated_line(&self, len: usize) -> Result<()> {
        let max = self.config().max_message_bytes.max(0) as u64;
        let smallest = plain_batch_size(len) as u64;
        if smallest <= max {
            return Ok(());
        }
        let error = record_too_large(&self.name, format_args!("at least {smallest}"), max);
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
        let config = self.config();
        let info = if config.parse_key || config.cleanup_policy.compact {
            PARSED.with_borrow_mut(|records| {
                records.clear();
                let parsed =
                    parse_lines(data.head, 0, &config, &self.name, records).and_then(|()| {
                        parse_lines(data.body, data.head.len(), &config, &self.name, records)
                    });
                let appended = parsed.and_then(|()| {
                    if records.is_empty() {
                        return Ok(AppendInfo::default());
                    }
                    self.log
                        .append(data, WriteRecords::Parsed(records), &config)
                });
                // One write of a million empty lines should not pin 32 MiB for good.
                records.shrink_to(PARSED_KEPT);
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
                return Err(record_too_large(&self.name, batch, max));
            }
            self.log.append(data, WriteRecords::Plain, &config)
        }?;
        if info.records == 0 {
            return Ok(info);
        }
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
        Ok(info)
    }

    /// The size of `log`: the logical end of the rendered stream. Never decreases.
    pub fn stream_len(&self) -> u64 {
        self.log.stream_end()
    }

    /// Wall-clock ms of the last append (mtime of `log`).
    pub fn modified_ms(&self) -> i64 {
        self.modified_ms.load(Ordering::Relaxed)
    }

    /// Reads up to `len` bytes of the rendered stream at kernel offset `pos`. Never blocks;
    /// returns an empty vector at the end.
    pub fn read_log(&self, cursor: &mut LogCursor, pos: u64, len: usize) -> Result<Vec<u8>> {
        self.read_log_in(cursor, pos, len, self.log.snapshot())
    }

    /// [`Topic::read_log`] starting from `snap`, which may already be outdated.
    fn read_log_in(
        &self,
        cursor: &mut LogCursor,
        pos: u64,
        len: usize,
        mut snap: LogSnapshot,
    ) -> Result<Vec<u8>> {
        let config = self.config();
        let render = Render::new(&config);
        let mut out = Vec::with_capacity(len.min(4 << 20));
        // Where in the stream the bytes not served from the replay buffer start.
        let mut from_pos = pos;
        if cursor.positioned && pos != cursor.next_pos {
            let replay_end = cursor.replay_at + cursor.replay.len() as u64;
            if pos >= cursor.replay_at && pos < replay_end && replay_end == cursor.next_pos {
                let from = (pos - cursor.replay_at) as usize;
                let to = (from + len).min(cursor.replay.len());
                if to - from == len {
                    return Ok(cursor.replay[from..to].to_vec());
                }
                // The replayed bytes alone would be a short read in the middle of the
                // file: the rest follows from where the handle stopped, as it would have.
                out.extend_from_slice(&cursor.replay[from..]);
                from_pos = replay_end;
            }
        }
        if !cursor.positioned || from_pos != cursor.next_pos {
            let mut attempts = 0;
            while let Err(e) = self.reposition(cursor, &snap, &render, from_pos) {
                attempts += 1;
                if attempts > STALE_READ_RETRIES || !self.outdated(&snap) {
                    return Err(e);
                }
                snap = self.log.snapshot();
            }
        }
        if let Some(mut rest) = cursor.pending_mapped.take() {
            let take = rest.len().min(len - out.len());
            let later = rest.split_off(take);
            out.extend_from_slice(&rest);
            if !later.is_empty() {
                cursor.pending_mapped = Some(later);
            }
        }
        let buffered = (cursor.pending.len() - cursor.pending_at).min(len - out.len());
        out.extend_from_slice(&cursor.pending[cursor.pending_at..cursor.pending_at + buffered]);
        cursor.pending_at += buffered;
        if cursor.pending_at == cursor.pending.len() {
            cursor.pending.clear();
            cursor.pending_at = 0;
        }
        let mut attempts = 0;
        while out.len() < len && cursor.pending.is_empty() && cursor.pending_mapped.is_none() {
            match self.render_next_batches(cursor, &snap, &render, &mut out, len) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    attempts += 1;
                    if attempts > STALE_READ_RETRIES || !self.outdated(&snap) {
                        return Err(e);
                    }
                    snap = self.log.snapshot();
                }
            }
        }
        cursor.next_pos = pos + out.len() as u64;
        cursor.replay.clear();
        if out.len() <= REPLAY_LIMIT {
            cursor.replay.extend_from_slice(&out);
            cursor.replay_at = pos;
        }
        Ok(out)
    }

    /// Whether `snap` lists a segment the log no longer holds. Sealed segments keep no
    /// descriptor, so once retention or the cleaner removed one its files may be gone and
    /// reading it through an old snapshot fails; such a read retries on a fresh snapshot,
    /// where the cursor moves on to the log start or the cleaned segment.
    fn outdated(&self, snap: &LogSnapshot) -> bool {
        let fresh = self.log.snapshot();
        let mut live: Vec<u64> = fresh.segments.iter().map(|s| s.id()).collect();
        live.sort_unstable();
        snap.segments
            .iter()
            .any(|s| live.binary_search(&s.id()).is_err())
    }

    /// Renders whole batches from the cursor's offset into `out` until it holds `len`
    /// bytes; the rest of the last batch goes to the cursor's pending buffer, so every
    /// batch is read and decoded once however small the reads are. False at the end.
    fn render_next_batches(
        &self,
        cursor: &mut LogCursor,
        snap: &LogSnapshot,
        render: &Render,
        out: &mut Vec<u8>,
        len: usize,
    ) -> Result<bool> {
        if cursor.next_offset < snap.log_start_offset {
            // The records this reader was about to see were deleted: continue at the
            // log start (Kafka's OffsetOutOfRange, resolved as auto.offset.reset=earliest).
            cursor.next_offset = snap.log_start_offset;
            cursor.skip = 0;
            cursor.hint = None;
            self.stats.reader_skips.fetch_add(1, Ordering::Relaxed);
        }
        let Some(mut seg_idx) = snap.segment_for(cursor.next_offset) else {
            return Ok(false);
        };
        loop {
            let seg = &snap.segments[seg_idx];
            if cursor.next_offset < seg.next_offset() {
                break;
            }
            seg_idx += 1;
            let Some(next) = snap.segments.get(seg_idx) else {
                return Ok(false);
            };
            cursor.next_offset = cursor.next_offset.max(next.base_offset());
        }
        let seg = &snap.segments[seg_idx];
        let file_pos = match cursor.hint {
            Some((id, at)) if id == seg.id() => at,
            _ => seg.lookup_position(cursor.next_offset)?,
        };
        let mut bytes = seg.mapped_batches(file_pos, (len - out.len()).clamp(8 << 10, 4 << 20))?;
        self.render_batches(cursor, seg, file_pos, &mut bytes, render, out, len)
    }

    #[allow(clippy::too_many_arguments)]
    fn render_batches(
        &self,
        cursor: &mut LogCursor,
        seg: &Segment,
        file_pos: u64,
        mapped: &mut MappedBatches,
        render: &Render,
        out: &mut Vec<u8>,
        len: usize,
    ) -> Result<bool> {
        let bytes: &[u8] = mapped;
        if bytes.is_empty() {
            return Ok(false);
        }
        out.reserve(bytes.len().min(len - out.len()));
        let mut scratch = Vec::new();
        let mut at = 0;
        // Where the rest of a batch whose stored lines did not fit stays in the mapping.
        let mut rest_at: Option<(usize, usize)> = None;
        while at < bytes.len() && cursor.pending.is_empty() && rest_at.is_none() {
            let h = decode_header(&bytes[at..])
                .map_err(|e| corrupt(seg.log_path(), file_pos + at as u64, e))?;
            if h.last_offset() >= cursor.next_offset && h.render_id == render.id && cursor.skip == 0
            {
                // The stored lines are the rendering: copy them from the first wanted record.
                let batch = &bytes[at..at + h.size];
                let lines = &batch[h.lines_at()..];
                let start = if h.base_offset >= cursor.next_offset {
                    0
                } else {
                    let mut first = lines.len();
                    for rec in RecordIter::new(&h, batch) {
                        let rec =
                            rec.map_err(|e| corrupt(seg.log_path(), file_pos + at as u64, e))?;
                        if rec.offset >= cursor.next_offset {
                            first = rec.line_at;
                            break;
                        }
                    }
                    first
                };
                let wanted = &lines[start..];
                let take = wanted.len().min(len - out.len());
                out.extend_from_slice(&wanted[..take]);
                if take < wanted.len() {
                    rest_at = Some((at + h.lines_at() + start + take, at + h.size));
                }
                cursor.next_offset = h.next_offset();
            } else if h.last_offset() >= cursor.next_offset {
                for rec in RecordIter::new(&h, &bytes[at..at + h.size]) {
                    let rec = rec.map_err(|e| corrupt(seg.log_path(), file_pos + at as u64, e))?;
                    if rec.offset < cursor.next_offset {
                        continue;
                    }
                    let size = render.size(&rec) as usize;
                    if cursor.skip == 0 && cursor.pending.is_empty() && out.len() + size <= len {
                        render.write(&rec, out);
                        continue;
                    }
                    scratch.clear();
                    render.write(&rec, &mut scratch);
                    let from = (cursor.skip as usize).min(scratch.len());
                    cursor.skip = 0;
                    let room = len - out.len();
                    let take = (scratch.len() - from).min(room);
                    out.extend_from_slice(&scratch[from..from + take]);
                    cursor.pending.extend_from_slice(&scratch[from + take..]);
                }
                cursor.next_offset = cursor.next_offset.max(h.next_offset());
            }
            at += h.size;
        }
        if let Some((from, batch_end)) = rest_at {
            let mut rest = mapped.split_off(from);
            drop(rest.split_off(batch_end - from));
            cursor.pending_mapped = Some(rest);
        }
        cursor.hint = Some((seg.id(), file_pos + at as u64));
        Ok(true)
    }

    /// Points the cursor at the record whose rendering covers stream position `pos`.
    fn reposition(
        &self,
        cursor: &mut LogCursor,
        snap: &LogSnapshot,
        render: &Render,
        pos: u64,
    ) -> Result<()> {
        cursor.positioned = true;
        cursor.next_pos = pos;
        cursor.skip = 0;
        cursor.pending.clear();
        cursor.pending_at = 0;
        cursor.pending_mapped = None;
        cursor.hint = None;
        cursor.next_offset = snap.log_start_offset;
        if pos == 0 {
            return Ok(());
        }
        let active = snap.active().info();
        if pos >= active.stream_end {
            cursor.next_offset = active.next_offset;
            return Ok(());
        }
        // The last segment whose first batch starts at or before `pos`.
        let Some(seg) = snap
            .segments
            .iter()
            .rev()
            .find(|s| s.info().stream_start.is_some_and(|start| start <= pos))
        else {
            return Ok(());
        };
        // Binary search the sparse index by the stream position of each entry's batch.
        let entries = seg.index_entries()?;
        let (mut lo, mut hi) = (0usize, entries.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            let header_bytes =
                seg.read_at(u64::from(entries[mid].1), super::format::BATCH_HEADER_BYTES)?;
            let h = decode_header(&header_bytes)
                .map_err(|e| corrupt(seg.log_path(), u64::from(entries[mid].1), e))?;
            if h.base_stream_pos <= pos {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let mut file_pos = if lo == 0 {
            0
        } else {
            u64::from(entries[lo - 1].1)
        };
        cursor.next_offset = seg.base_offset();
        loop {
            let bytes = seg.mapped_batches(file_pos, 256 << 10)?;
            if bytes.is_empty() {
                cursor.next_offset = seg.next_offset();
                return Ok(());
            }
            let mut at = 0;
            while at < bytes.len() {
                let h = decode_header(&bytes[at..])
                    .map_err(|e| corrupt(seg.log_path(), file_pos + at as u64, e))?;
                if h.stream_end() > pos {
                    for rec in RecordIter::new(&h, &bytes[at..at + h.size]) {
                        let rec =
                            rec.map_err(|e| corrupt(seg.log_path(), file_pos + at as u64, e))?;
                        if rec.stream_pos > pos {
                            cursor.next_offset = rec.offset;
                            return Ok(());
                        }
                        let inside = pos - rec.stream_pos;
                        if inside < render.size(&rec) {
                            cursor.next_offset = rec.offset;
                            cursor.skip = inside;
                            return Ok(());
                        }
                    }
                }
                cursor.next_offset = h.next_offset();
                at += h.size;
            }
            file_pos += bytes.len() as u64;
        }
    }

    /// The `config` file: every effective topic config as `key=value`.
    pub fn config_text(&self) -> String {
        self.overrides.read().render_effective(&self.broker.read())
    }

    /// A whole command to `config` (`key=value`, `-key`, blank and `#` lines) that
    /// changes the keys it names; all or nothing.
    pub fn update_config(&self, text: &[u8]) -> Result<()> {
        let text = std::str::from_utf8(text).map_err(|_| ConfigError::NotText)?;
        self.apply_config_change(&ConfigChange::from_text(ConfigScope::Topic, text)?)
    }

    /// Applies what one open-to-close of `config` wrote: all of it, or nothing when a
    /// line was refused or a check across keys fails. On a full disk the change applies
    /// in memory and is saved as soon as there is space (a warning says so meanwhile):
    /// lowering retention is how an operator gets space back.
    pub fn apply_config_change(&self, change: &ConfigChange) -> Result<()> {
        let mut overrides = self.overrides.write();
        let broker = self.broker.read();
        let updated = overrides.apply_change(change, &broker)?;
        if updated != *overrides || self.unsaved_overrides.lock().is_some() {
            self.save_overrides(&updated)?;
        }
        let resolved = broker.resolve_topic(&updated);
        *overrides = updated;
        *self.config.write() = Arc::new(resolved);
        Ok(())
    }

    /// Writes `overrides` to `kpfs-topic.properties`, or, out of space, remembers why
    /// (see [`write_or_defer`]).
    fn save_overrides(&self, overrides: &TopicOverrides) -> Result<()> {
        let path = self.dir().join(TOPIC_CONFIG_FILE);
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

    /// Saves what a full disk kept in memory only: the overrides and the log's stream
    /// start. Called on the scheduler's tick and at close; a failure leaves it for the
    /// next call.
    pub fn save_unsaved(&self) {
        if self.unsaved_overrides.lock().is_some() {
            let overrides = self.overrides.write();
            if let Err(e) = self.save_overrides(&overrides) {
                tracing::error!(topic = %self.name, error = %e, "writing the topic config failed");
            }
        }
        self.log.save_unsaved_stream_start();
    }

    /// Facts of every segment, oldest first, for retention.
    pub fn segment_facts(&self) -> Vec<SegmentFacts> {
        self.log
            .snapshot()
            .segments
            .iter()
            .map(|s| s.retention_facts())
            .collect()
    }

    /// Retention's view of the segments, taken again (see [`Topic::refresh`]) before each
    /// step only if the log changed since.
    fn retention_view(&self) -> RetentionView {
        let snap = self.log.snapshot();
        RetentionView {
            facts: snap.segments.iter().map(|s| s.retention_facts()).collect(),
            log_end: snap.active().next_offset(),
            segments: snap.segments,
        }
    }

    /// A step decides on facts no append, roll, deletion or cleaner swap has overtaken
    /// (all of them change the segment list or the log end), and a pass over 100,000
    /// idle segments reads each segment's facts once, not once per step.
    fn refresh(&self, view: &mut RetentionView) {
        let snap = self.log.snapshot();
        if !Arc::ptr_eq(&snap.segments, &view.segments)
            || snap.active().next_offset() != view.log_end
        {
            *view = self.retention_view();
        }
    }

    /// Kafka's `deleteOldSegments`: log-start breach, then (with `delete` in the policy)
    /// size, then time, each step re-reading the segment list. `with_time_and_size` is
    /// false for callers that must only apply the log-start rule.
    pub fn run_retention(&self) -> Result<Vec<RetentionDeletion>> {
        let config = self.config();
        let mut done = Vec::new();
        let now = self.clock.now_ms();
        let lso = self.log.log_start_offset();
        let mut view = self.retention_view();
        let n = retention::log_start_breach(&view.facts, lso);
        let cause = DeletionCause::LogStartOffset {
            log_start_offset: lso,
        };
        self.apply_deletion(n, cause, &config, &view.facts, &mut done)?;
        if config.cleanup_policy.delete {
            self.refresh(&mut view);
            let total: u64 = view.facts.iter().map(|s| s.size).sum();
            let n = retention::size_breach(&view.facts, config.retention_bytes);
            let cause = DeletionCause::Size {
                total_bytes: total,
                retention_bytes: config.retention_bytes,
            };
            self.apply_deletion(n, cause, &config, &view.facts, &mut done)?;
            self.refresh(&mut view);
            let n = retention::time_breach(&view.facts, config.retention_ms, now);
            let cause = DeletionCause::Time {
                retention_ms: config.retention_ms,
                now_ms: now,
            };
            self.apply_deletion(n, cause, &config, &view.facts, &mut done)?;
            self.refresh(&mut view);
            let future = retention::future_timestamp_segment(&view.facts, now);
            let previous = self
                .future_timestamp_segment
                .swap(future.map_or(-1, |b| b as i64), Ordering::Relaxed);
            if let Some(base) = future {
                if previous != base as i64 && config.retention_ms >= 0 {
                    tracing::warn!(topic = %self.name, base_offset = base,
                        "segment contains future timestamp(s), making it ineligible to be deleted");
                }
            }
        }
        Ok(done)
    }

    fn apply_deletion(
        &self,
        count: usize,
        cause: DeletionCause,
        config: &TopicConfig,
        facts: &[SegmentFacts],
        done: &mut Vec<RetentionDeletion>,
    ) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        let last = facts[count - 1].base_offset;
        let reasons = explain_deletion(facts, count, &cause);
        let rolls_first = count == facts.len();
        let log_end = self.log.log_end_offset();
        let segments = self.log.delete_segments_through(last, config)?;
        let now = self.clock.now_ms();
        if rolls_first {
            self.events.record(
                now,
                "roll",
                &format!("new segment at offset {log_end}: reason=retention: every segment, the active one included, is deletable, so an empty active segment is rolled first"),
            );
        }
        for reason in &reasons {
            self.events.record(
                now,
                "delete",
                &format!(
                    "{reason}; renamed .deleted, removed after file.delete.delay.ms {}",
                    config.file_delete_delay_ms
                ),
            );
        }
        let counter = match cause {
            DeletionCause::LogStartOffset { .. } => &self.stats.segments_deleted_log_start,
            DeletionCause::Size { .. } => &self.stats.segments_deleted_size,
            DeletionCause::Time { .. } => &self.stats.segments_deleted_time,
        };
        counter.fetch_add(segments.len() as u64, Ordering::Relaxed);
        tracing::info!(
            topic = %self.name,
            segments = ?segments.iter().map(|d| d.segment.base_offset()).collect::<Vec<_>>(),
            cause = ?cause,
            log_start_offset = self.log.log_start_offset(),
            "deleting segments (renamed .deleted)"
        );
        done.push(RetentionDeletion { cause, segments });
        Ok(())
    }

    /// The `events` file: recent actions, newest last.
    pub fn events_text(&self) -> String {
        self.events.text()
    }

    /// The `status` file: `name: value` lines.
    pub fn status_text(&self) -> String {
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
        line("topic", self.name.clone());
        line("log_start_offset", snap.log_start_offset.to_string());
        line("log_end_offset", active.next_offset.to_string());
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
        for warning in self.config_warnings() {
            line("config_warning", warning);
        }
        if let Some(reason) = self.log.unsaved_stream_start() {
            line(
                "unsaved",
                format!(
                    "{} ({reason}): retention went on regardless; saved as soon as there is space",
                    super::log::STREAM_START_FILE
                ),
            );
        }
        let now = self.clock.now_ms();
        for (k, v) in self.retention_diagnostics(&snap, &config, now) {
            line(k, v);
        }
        if config.cleanup_policy.compact {
            for (k, v) in self.cleaner_diagnostics(&snap, &config, now) {
                line(k, v);
            }
        }
        out
    }

    /// Configs that do not do what they seem, each with why: shown in `status` and
    /// reported in `.kpfs/errors` when a config write sets them.
    pub fn config_warnings(&self) -> Vec<String> {
        let overrides = self.overrides.read();
        let config = self.config();
        let set = |key: &str| overrides.get(key).is_some();
        let mut out = Vec::new();
        if let Some(reason) = self.unsaved_overrides.lock().as_ref() {
            out.push(format!(
                "the overrides in force are not saved yet ({reason}): kpfs saves them as soon as there is space; until then a crash or an unmount loses them"
            ));
        }
        let policy = &config.cleanup_policy;
        if policy.compact && !policy.delete {
            for key in ["retention.ms", "retention.bytes"] {
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

    /// Why the oldest segment is (not yet) deletable, answering "why is my data not
    /// deleted" from the numbers retention uses.
    fn retention_diagnostics(
        &self,
        snap: &LogSnapshot,
        config: &TopicConfig,
        now: i64,
    ) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
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
                    super::format_time_ms(ts)
                )
            } else {
                let at = ts.saturating_add(config.retention_ms).saturating_add(1);
                format!(
                    "by time once its largest timestamp {} ({}) is older than retention.ms {}: at {} or the first retention check after",
                    ts,
                    super::format_time_ms(ts),
                    config.retention_ms,
                    super::format_time_ms(at)
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
        let view = super::cleaner::cleaner_view(snap, *self.cleaner.checkpoint.lock(), config, now);
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
        let state = match &*self.cleaner.state.lock() {
            super::cleaner::CleanerState::Idle => "idle".to_string(),
            super::cleaner::CleanerState::Cleaning => "cleaning".to_string(),
            super::cleaner::CleanerState::Uncleanable(why) => format!("uncleanable: {why}"),
        };
        out.push(("cleaner_state", state));
        out.push((
            "compaction_due",
            match view.why_not_due(config) {
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
            },
        ));
        out.push((
            "cleaner_passes",
            self.cleaner.passes.load(Ordering::Relaxed).to_string(),
        ));
        if let Some(p) = &*self.cleaner.last_pass.lock() {
            out.push((
                "last_clean",
                format!(
                    "at {} offsets [{}, {}){} took {} ms: read {} bytes, wrote {} bytes, removed {} records ({} tombstones), kept {} tombstones, map utilization {:.1}%",
                    super::format_time_ms(p.started_ms),
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
    pub fn open_backing_file(&self, name: &str) -> Result<File> {
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
    pub fn maybe_flush_by_time(&self) -> Result<()> {
        self.log.maybe_flush_by_time(&self.config())
    }

    pub fn close(&self) -> Result<()> {
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
    pub fn segment_log_files(&self) -> Result<Vec<u64>> {
        Ok(self
            .backing_files()?
            .iter()
            .filter_map(|f| parse_segment_file_name(&f.name))
            .filter(|(_, s)| *s == LOG_SUFFIX)
            .map(|(b, _)| b)
            .collect())
    }
}

fn corrupt(path: PathBuf, position: u64, e: super::format::DecodeError) -> EngineError {
    EngineError::Corrupt {
        path,
        position,
        reason: e.to_string(),
    }
}

/// One line per deleted segment saying which rule took it, with the numbers.
fn explain_deletion(facts: &[SegmentFacts], count: usize, cause: &DeletionCause) -> Vec<String> {
    let mut out = Vec::with_capacity(count);
    match cause {
        DeletionCause::Time {
            retention_ms,
            now_ms,
        } => {
            for f in &facts[..count] {
                out.push(format!(
                    "segment {} cause=time: largest timestamp {} ({}) is {} ms old, more than retention.ms {retention_ms}",
                    f.base_offset,
                    f.largest_timestamp,
                    super::format_time_ms(f.largest_timestamp),
                    now_ms - f.largest_timestamp
                ));
            }
        }
        DeletionCause::Size {
            total_bytes,
            retention_bytes,
        } => {
            let mut diff = *total_bytes as i128 - i128::from(*retention_bytes);
            for f in &facts[..count] {
                out.push(format!(
                    "segment {} cause=size: partition is {diff} bytes over retention.bytes {retention_bytes} (total {total_bytes}) and {diff} - {} segment bytes >= 0",
                    f.base_offset, f.size
                ));
                diff -= f.size as i128;
            }
        }
        DeletionCause::LogStartOffset { log_start_offset } => {
            for (i, f) in facts[..count].iter().enumerate() {
                out.push(format!(
                    "segment {} cause=log_start_offset: the next segment starts at {} <= log start offset {log_start_offset}",
                    f.base_offset,
                    facts.get(i + 1).map_or(0, |n| n.base_offset)
                ));
            }
        }
    }
    out
}

/// Writes a small file so that a crash leaves either the old or the new content.
/// [`write_atomically`], except that out of space (ENOSPC, EDQUOT) it records why in
/// `unsaved` and returns `Ok`: the caller applies its change anyway, since a full disk
/// must not block the way out of it (lowering retention), and calls again later. A
/// successful write clears the reason.
pub fn write_or_defer(path: &Path, bytes: &[u8], unsaved: &Mutex<Option<String>>) -> Result<()> {
    let mut reason = unsaved.lock();
    match write_atomically(path, bytes) {
        Ok(()) => {
            if reason.take().is_some() {
                tracing::info!(file = %path.display(), "saved what was kept in memory while the disk was full");
            }
            Ok(())
        }
        Err(e) if e.is_out_of_space() => {
            if reason.is_none() {
                tracing::warn!(file = %path.display(), error = %e, "kept in memory until there is space");
            }
            *reason = Some(e.to_string());
            Ok(())
        }
        Err(e) => Err(e),
    }
}

pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let tmp = temporary_path(path);
    let io = |what: &str, e| EngineError::io(format!("{what} {}", tmp.display()), e);
    let mut f = File::create(&tmp).map_err(|e| io("create", e))?;
    let written = f
        .write_all(bytes)
        .map_err(|e| io("write", e))
        .and_then(|()| f.sync_all().map_err(|e| io("fsync", e)))
        .and_then(|()| std::fs::rename(&tmp, path).map_err(|e| io("rename", e)));
    if written.is_err() {
        // A full disk fails the write: the half-written file must not stay behind.
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    if let Some(dir) = path.parent() {
        sync_dir(dir)?;
    }
    Ok(())
}

/// What a null key or value renders as when the topic has no `null.marker`: Kafka's
/// console consumer's `null.literal` default, so a keyless record (written before
/// `parse.key` was set) does not read like one with an empty key.
const NULL_LITERAL: &[u8] = b"null";

/// How records are rendered into the `log` stream under a topic config.
struct Render<'a> {
    /// [`TopicConfig::render_id`]: batches written with the same id need no re-rendering.
    id: u32,
    parse_key: bool,
    separator: &'a [u8],
    /// The rendering of a null key or value.
    null_marker: &'a [u8],
}

impl<'a> Render<'a> {
    fn new(config: &'a TopicConfig) -> Self {
        Render {
            id: config.render_id(),
            parse_key: config.parse_key,
            separator: &config.key_separator,
            null_marker: config.null_marker.as_deref().unwrap_or(NULL_LITERAL),
        }
    }

    fn size(&self, rec: &RecordRef<'_>) -> u64 {
        let value = rec.value.map_or(self.null_marker.len(), <[u8]>::len);
        let key = if self.parse_key {
            rec.key.map_or(self.null_marker.len(), <[u8]>::len) + self.separator.len()
        } else {
            0
        };
        (key + value + 1) as u64
    }

    fn write(&self, rec: &RecordRef<'_>, out: &mut Vec<u8>) {
        if self.parse_key {
            out.extend_from_slice(rec.key.unwrap_or(self.null_marker));
            out.extend_from_slice(self.separator);
        }
        out.extend_from_slice(rec.value.unwrap_or(self.null_marker));
        out.push(b'\n');
    }
}

thread_local! {
    /// The parsed records of the write in progress, kept between writes: a 1 MiB write of
    /// 100-byte lines holds 10,000 of them, and growing a fresh vector for every write
    /// was a tenth of the append path's time.
    static PARSED: std::cell::RefCell<Vec<PendingRecord>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Parsed records [`PARSED`] keeps room for between writes (2 MiB).
const PARSED_KEPT: usize = 1 << 16;

/// Kafka's console-producer line protocol (`LineMessageReader`) over a piece of one
/// write that starts at position `base` of it, added to the write's `records`.
fn parse_lines(
    data: &[u8],
    base: usize,
    config: &TopicConfig,
    topic: &str,
    records: &mut Vec<PendingRecord>,
) -> Result<()> {
    let null_marker = config.null_marker.as_deref();
    let max = config.max_message_bytes.max(0) as u64;
    let mut rest = data;
    while !rest.is_empty() {
        let line_number = records.len() + 1;
        let (line, line_end) = match memchr::memchr(b'\n', rest) {
            Some(i) => {
                let line = &rest[..i];
                rest = &rest[i + 1..];
                (line, true)
            }
            None => (std::mem::take(&mut rest), false),
        };
        let line_start = base + data.len() - rest.len() - line.len() - usize::from(line_end);
        let (key, value) = if config.parse_key {
            let sep = &config.key_separator;
            let Some(at) = find(line, sep) else {
                return Err(EngineError::InvalidRecord {
                    message: format!(
                        "No key separator found on line number {line_number}: {}",
                        Excerpt::quoted(line)
                    ),
                });
            };
            let key = &line[..at];
            let value = &line[at + sep.len()..];
            (
                (Some(key) != null_marker).then_some(key),
                (Some(value) != null_marker).then_some(value),
            )
        } else {
            (None, Some(line))
        };
        let (key_len, value_len) = (field_len(key), field_len(value));
        // Kafka checks a record's batch size before its key (analyzeAndValidateRecords,
        // then LogValidator); a missing separator is the console producer's error, before
        // either.
        let batch = BatchBuilder::single_record_batch_size(key_len, value_len, line.len()) as u64;
        if batch > max {
            return Err(record_too_large(topic, batch, max));
        }
        if key.is_none() && config.cleanup_policy.compact {
            return Err(EngineError::InvalidRecord {
                message: format!("Compacted topic cannot accept message without key in topic partition {topic}-0"),
            });
        }
        records.push(PendingRecord {
            line_start,
            line_len: line.len(),
            key_len,
            value_len,
        });
    }
    Ok(())
}

/// Kafka's refusal of a batch above max.message.bytes: `batch` is the size of the
/// batch holding the record alone (a bigger write is split into batches that fit).
fn record_too_large(topic: &str, batch: impl std::fmt::Display, max: u64) -> EngineError {
    EngineError::RecordTooLarge {
        message: format!(
            "The record batch size in the append to {topic}-0 is {batch} bytes which exceeds the maximum configured value of {max}."
        ),
    }
}

/// Records in `data` under the line protocol of [`parse_lines`].
fn count_lines(data: &[u8]) -> u64 {
    let newlines = memchr::memchr_iter(b'\n', data).count() as u64;
    newlines + u64::from(data.last().is_some_and(|&b| b != b'\n'))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    match needle {
        [] => None,
        [byte] => memchr::memchr(*byte, haystack),
        _ => memchr::memmem::find(haystack, needle),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::clock::ManualClock;
    use crate::engine::log::remove_files;
    use crate::engine::segment::RollReason;

    /// Sealed segments hold no descriptor, so once retention removed one its files are
    /// gone: a read through a snapshot taken before starts again on a fresh one, at the
    /// log start, instead of failing.
    #[test]
    fn a_read_through_an_outdated_snapshot_starts_again_at_the_log_start() {
        let dir = tempfile::tempdir().unwrap();
        let broker = Arc::new(RwLock::new(BrokerConfig::defaults()));
        let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(1_764_430_000_000));
        let (topic, _) = Topic::open(
            "t",
            &dir.path().join("t-0"),
            broker,
            clock,
            Durability::CleanShutdown,
        )
        .unwrap();
        let config = topic.config();
        for i in 0..3 {
            topic
                .append_lines(format!("line-{i}\n").as_bytes())
                .unwrap();
            topic.log.roll(&config, RollReason::Size).unwrap();
        }
        let outdated = topic.log.snapshot();
        for d in topic.log.delete_segments_through(1, &config).unwrap() {
            remove_files(&d.files).unwrap();
        }
        let mut cursor = LogCursor::default();
        let bytes = topic.read_log_in(&mut cursor, 0, 100, outdated).unwrap();
        assert_eq!(bytes, b"line-2\n");
        assert_eq!(topic.stats.reader_skips.load(Ordering::Relaxed), 1);
    }
}
