//! Reading the `log` stream: a [`LogCursor`] per open handle maps the kernel's offset to
//! a record, and records are rendered into `log` bytes, each under the rendering
//! (`parse.key`, `key.separator`, `null.marker`) it was appended under.

use std::path::PathBuf;
use std::sync::atomic::Ordering;

use crate::engine::error::{EngineError, Result};
use crate::engine::format::{
    decode_header, records_section, RecordIter, RecordsProgress, COPY_BLOCK_BYTES,
};
use crate::engine::limits::{
    READ_MAX_BYTES, READ_MIN_BYTES, REPLAY_LIMIT_BYTES, REPOSITION_SCAN_BYTES, STALE_READ_RETRIES,
};
use crate::engine::log::LogSnapshot;
use crate::engine::segment::MappedBatches;
use crate::engine::stream_index::StreamWalker;

use super::capture::LogCapture;
use super::renderings::Renderer;
use super::visibility::Visibility;
use super::Partition;

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
    /// (segment id, file position) of the next batch to render: the one after the last
    /// one rendered, or the one the last read stopped inside.
    hint: Option<(u64, u64)>,
    /// Where the records of the batch at `hint` go on, when the last read stopped inside
    /// it: the rest of an uncompressed batch stays in the segment for the next read rather
    /// than being rendered aside and copied again.
    resume: Option<RecordsProgress>,
    replay: Replay,
    /// The offset this cursor's records end before (a run of a topic's `log`, which
    /// shows a partition's records up to where another partition's follow), if any.
    pub(crate) limit: Option<u64>,
}

/// The bytes the last read of a handle returned, when it was small, and the kernel
/// offset they started at. Tools such as bash's `read` and `head` read a block, then seek
/// back to just after what they used; once retention or compaction has left gaps, kernel
/// offsets no longer equal stream positions, so such a re-read is served from what the
/// handle was given rather than mapped again (which could repeat records).
#[derive(Debug, Default)]
pub(crate) struct Replay {
    bytes: Vec<u8>,
    at: u64,
}

impl LogCursor {
    /// The offset the next read's records end before: the run's end, if the cursor reads
    /// a run of a topic's stream, and never past what `visible` shows.
    fn limit_within(&self, visible: &Visibility) -> u64 {
        self.limit
            .map_or(visible.end_offset(), |l| l.min(visible.end_offset()))
    }

    /// The offset of the next record the cursor renders.
    pub(crate) fn next_offset(&self) -> u64 {
        self.next_offset
    }

    /// Drops the bytes kept for a re-read: a topic's reader, which parks the cursor
    /// between its partition's runs, reads on through it but never re-reads.
    pub(crate) fn park(&mut self) {
        self.replay = Replay::default();
    }
}

impl Replay {
    /// Serves what it can of a read of `len` bytes at `pos` by a handle whose next
    /// sequential read is at `next_pos`, into `out`: `Some(true)` when `out` holds all of
    /// it, `Some(false)` when it holds the replayed part and the rest follows from
    /// `next_pos`, `None` when the read is not a re-read of these bytes.
    pub(crate) fn serve(
        &self,
        pos: u64,
        len: usize,
        next_pos: u64,
        out: &mut Vec<u8>,
    ) -> Option<bool> {
        let end = self.at + self.bytes.len() as u64;
        if pos == next_pos || pos < self.at || pos >= end || end != next_pos {
            return None;
        }
        let from = (pos - self.at) as usize;
        let to = (from + len).min(self.bytes.len());
        out.extend_from_slice(&self.bytes[from..to]);
        Some(to - from == len)
    }

    /// Keeps the bytes a read at `pos` returned, if few.
    pub(crate) fn remember(&mut self, pos: u64, bytes: &[u8]) {
        self.bytes.clear();
        if bytes.len() <= REPLAY_LIMIT_BYTES {
            self.bytes.extend_from_slice(bytes);
            self.at = pos;
        }
    }
}

impl LogCursor {
    /// Whether the cursor has read: its kernel offsets then follow what it returned.
    pub(crate) fn is_positioned(&self) -> bool {
        self.positioned
    }
}

impl Partition {
    /// The offset of the first record whose line covers or follows stream position `pos`
    /// (at least the log start).
    pub(crate) fn offset_at_stream_pos(&self, pos: u64) -> Result<u64> {
        let mut cursor = LogCursor::default();
        let source = Source::live(self);
        let mut visible = source.visibility();
        self.reposition(&mut cursor, &source, pos, &mut visible)?;
        Ok(cursor.next_offset.max(self.log.log_start_offset()))
    }

    /// Reads up to `len` bytes of the rendered stream at kernel offset `pos`. Never blocks;
    /// returns an empty vector at the end.
    pub fn read_log(&self, cursor: &mut LogCursor, pos: u64, len: usize) -> Result<Vec<u8>> {
        self.read_log_in(cursor, pos, len, Source::live(self))
    }

    /// [`Partition::read_log`] from `source`: the live log from a snapshot, which may already
    /// be outdated, or a capture, where `pos` counts the capture's bytes.
    pub(super) fn read_log_in(
        &self,
        cursor: &mut LogCursor,
        pos: u64,
        len: usize,
        mut source: Source<'_>,
    ) -> Result<Vec<u8>> {
        let mut visible = source.visibility();
        // Room for a block copy to run past the last record (see `extend_by_blocks`).
        let mut out = Vec::with_capacity(len.min(READ_MAX_BYTES) + COPY_BLOCK_BYTES);
        // Where in the stream the bytes not served from the replay buffer start.
        let mut from_pos = pos;
        if cursor.positioned {
            match cursor.replay.serve(pos, len, cursor.next_pos, &mut out) {
                Some(true) => return Ok(out),
                // The replayed bytes alone would be a short read in the middle of the
                // file: the rest follows from where the handle stopped, as it would have.
                Some(false) => from_pos = cursor.next_pos,
                None => {}
            }
        }
        if !cursor.positioned || from_pos != cursor.next_pos {
            let mut attempts = 0;
            while let Err(e) = self.reposition(cursor, &source, from_pos, &mut visible) {
                attempts += 1;
                if attempts > STALE_READ_RETRIES || !source.refresh(self) {
                    return Err(e);
                }
            }
            if cursor.next_offset < source.snap().log_start_offset {
                // The position falls on a record below the log start (DeleteRecords
                // leaves them in the segment): the stream goes on at the log start.
                cursor.next_offset = source.snap().log_start_offset;
                cursor.skip = 0;
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
        while out.len() < len && cursor.pending.is_empty() {
            match self.render_next_batches(cursor, &source, &mut visible, (&mut out, len)) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    attempts += 1;
                    if attempts > STALE_READ_RETRIES || !source.refresh(self) {
                        return Err(e);
                    }
                }
            }
        }
        cursor.next_pos = pos + out.len() as u64;
        cursor.replay.remember(pos, &out);
        Ok(out)
    }

    /// Whether `snap` lists a segment the log no longer holds. Sealed segments keep no
    /// descriptor, so once retention or the cleaner removed one its files may be gone and
    /// reading it through an old snapshot fails; such a read retries on a fresh snapshot,
    /// where the cursor moves on to the log start or the cleaned segment.
    pub(super) fn outdated(&self, snap: &LogSnapshot) -> bool {
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
        source: &Source<'_>,
        visible: &mut Visibility,
        (out, len): (&mut Vec<u8>, usize),
    ) -> Result<bool> {
        let snap = source.snap();
        if cursor.next_offset < snap.log_start_offset {
            // The records this reader was about to see were deleted: continue at the
            // log start (Kafka's OffsetOutOfRange, resolved as auto.offset.reset=earliest).
            cursor.next_offset = snap.log_start_offset;
            cursor.skip = 0;
            cursor.hint = None;
            cursor.resume = None;
            self.stats.reader_skips.fetch_add(1, Ordering::Relaxed);
        }
        if cursor.next_offset >= cursor.limit_within(visible) {
            return Ok(false);
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
        let resume = cursor.resume.take();
        let (file_pos, resume) = match cursor.hint {
            Some((id, at)) if id == seg.id() => (at, resume),
            _ => (source.position(seg_idx, cursor.next_offset)?, None),
        };
        let bytes = source.batches(
            seg_idx,
            file_pos,
            (len - out.len()).clamp(READ_MIN_BYTES, READ_MAX_BYTES),
        )?;
        // The renderings are read after the batches are mapped, the config before the
        // timeline: a change of rendering records the timeline, then swaps the config,
        // then lets appends in, so both are at least as new as every record mapped.
        let config = self.config();
        let past = self.past_renderings.read().clone();
        let renderer = Renderer {
            current: &config,
            past: past.list(),
        };
        let batches = MappedAt {
            snap,
            seg_idx,
            file_pos,
            bytes: &bytes,
            resume,
        };
        self.render_batches(RenderJob {
            cursor,
            batches,
            renderer,
            visible,
            out,
            len,
        })
    }

    /// Renders the records of the job's batches from the cursor's offset into `out` until
    /// it holds `len` bytes; the rest of the record that filled it goes to the cursor's
    /// pending buffer, and so does the rest of its batch if that is compressed (else the
    /// next read goes on inside the batch). On a CPU with AVX2 the loop runs as compiled
    /// for it: its block copies take 32 bytes at a time.
    fn render_batches(&self, job: RenderJob<'_, '_>) -> Result<bool> {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            return unsafe { self.render_batches_avx2(job) };
        }
        self.render_batches_with(job)
    }

    /// # Safety
    /// The CPU must have AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn render_batches_avx2(&self, job: RenderJob<'_, '_>) -> Result<bool> {
        self.render_batches_with(job)
    }

    #[inline(always)]
    fn render_batches_with(&self, job: RenderJob<'_, '_>) -> Result<bool> {
        let RenderJob {
            cursor,
            batches,
            renderer,
            visible,
            out,
            len,
        } = job;
        let MappedAt {
            snap,
            seg_idx,
            file_pos,
            bytes,
            mut resume,
        } = batches;
        let seg = &snap.segments[seg_idx];
        let limit = cursor.limit_within(visible);
        if bytes.is_empty() {
            return Ok(false);
        }
        out.reserve(bytes.len().min(len - out.len()) + COPY_BLOCK_BYTES);
        let (mut scratch, mut line) = (Vec::new(), Vec::new());
        // Each record renders under the rendering it was appended under; `render_until`
        // is where that may change next.
        let (mut render, mut render_until) = renderer.render_at(seg, cursor.next_offset);
        let mut at = 0;
        while at < bytes.len() && cursor.pending.is_empty() {
            let bad = |e| corrupt(seg.log_path(), file_pos + at as u64, e);
            let h = decode_header(&bytes[at..]).map_err(bad)?;
            // Only the first batch is the one the last read stopped inside.
            let from = resume.take();
            if h.base_offset >= limit {
                // Nothing between the cursor and the limit: the next read starts there.
                cursor.next_offset = cursor.next_offset.max(limit);
                break;
            }
            if h.last_offset() >= cursor.next_offset
                && (!h.in_log_stream() || visible.is_aborted(snap, seg_idx, &h))
            {
                cursor.next_offset = h.next_offset();
            } else if h.last_offset() >= cursor.next_offset {
                let section =
                    records_section(&h, &bytes[at..at + h.size], &mut scratch).map_err(bad)?;
                let mut records = match from {
                    Some(from) => RecordIter::resume(&h, section, from),
                    None => RecordIter::new(&h, section),
                };
                loop {
                    let rec = match records.next_common() {
                        Some(rec) => rec,
                        None => match records.next() {
                            Some(rec) => rec.map_err(bad)?,
                            None => break,
                        },
                    };
                    if rec.offset < cursor.next_offset {
                        continue;
                    }
                    if rec.offset >= limit {
                        // The next records are another run's: the next read of this
                        // cursor finds the batch again and skips to this record.
                        cursor.next_offset = rec.offset;
                        cursor.hint = Some((seg.id(), file_pos + at as u64));
                        return Ok(true);
                    }
                    if rec.offset >= render_until {
                        (render, render_until) = renderer.render_at(seg, rec.offset);
                    }
                    let size = render.size(&rec) as usize;
                    if cursor.skip == 0 && cursor.pending.is_empty() && out.len() + size <= len {
                        render.write(&rec, section, out);
                        continue;
                    }
                    line.clear();
                    render.write(&rec, section, &mut line);
                    let from = (cursor.skip as usize).min(line.len());
                    cursor.skip = 0;
                    let room = len - out.len().min(len);
                    let take = (line.len() - from).min(room);
                    out.extend_from_slice(&line[from..from + take]);
                    cursor.pending.extend_from_slice(&line[from + take..]);
                    if !cursor.pending.is_empty() && !h.is_compressed() {
                        cursor.next_offset = rec.offset + 1;
                        cursor.hint = Some((seg.id(), file_pos + at as u64));
                        cursor.resume = Some(records.progress());
                        return Ok(true);
                    }
                }
                cursor.next_offset = cursor.next_offset.max(h.next_offset());
            }
            at += h.size;
        }
        cursor.hint = Some((seg.id(), file_pos + at as u64));
        Ok(true)
    }

    /// Points the cursor at the record whose rendering covers the byte at `pos` of the
    /// source (a stream position in the live log).
    fn reposition(
        &self,
        cursor: &mut LogCursor,
        source: &Source<'_>,
        pos: u64,
        visible: &mut Visibility,
    ) -> Result<()> {
        let snap = source.snap();
        cursor.positioned = true;
        cursor.next_pos = pos;
        let pos = source.stream_pos(pos);
        cursor.skip = 0;
        cursor.pending.clear();
        cursor.pending_at = 0;
        cursor.hint = None;
        cursor.resume = None;
        cursor.next_offset = snap.log_start_offset;
        if pos == 0 {
            return Ok(());
        }
        let (stream_end, end_offset) = source.end();
        if pos >= stream_end {
            cursor.next_offset = end_offset;
            return Ok(());
        }
        // The last segment whose stream starts at or before `pos`.
        let Some(seg_idx) = snap
            .segments
            .iter()
            .rposition(|s| s.info().stream_start <= pos)
        else {
            return Ok(());
        };
        let seg = &snap.segments[seg_idx];
        // From the last stream-index entry at or before `pos`: its batch, its record.
        let (stream_start, entries) = seg.stream_entries();
        let from = entries
            .partition_point(|e| e.stream_pos <= pos)
            .checked_sub(1);
        let (mut file_pos, first_offset) = from.map_or((0, seg.base_offset()), |i| {
            (u64::from(entries[i].file_pos), entries[i].offset)
        });
        let mut walker = StreamWalker::new(
            &entries,
            from.unwrap_or(0),
            stream_start,
            seg.stream_shape(),
        );
        let mut scratch = Vec::new();
        cursor.next_offset = seg.base_offset();
        loop {
            let bytes = source.batches(seg_idx, file_pos, REPOSITION_SCAN_BYTES)?;
            if bytes.is_empty() {
                cursor.next_offset = seg.next_offset();
                return Ok(());
            }
            let mut at = 0;
            while at < bytes.len() {
                let bad = |e| corrupt(seg.log_path(), file_pos + at as u64, e);
                let h = decode_header(&bytes[at..]).map_err(bad)?;
                if !h.in_log_stream() {
                    cursor.next_offset = h.next_offset();
                    at += h.size;
                    continue;
                }
                // An aborted record keeps its place but shows nothing: a position inside
                // it reads on from the next record shown.
                let hidden = visible.is_aborted(snap, seg_idx, &h);
                let section =
                    records_section(&h, &bytes[at..at + h.size], &mut scratch).map_err(bad)?;
                for rec in RecordIter::new(&h, section) {
                    let rec = rec.map_err(bad)?;
                    if rec.offset < first_offset {
                        continue;
                    }
                    let rec_pos = walker.position(rec.offset, rec.key, rec.value);
                    if rec_pos > pos {
                        cursor.next_offset = rec.offset;
                        return Ok(());
                    }
                    let inside = pos - rec_pos;
                    if !hidden && inside < walker.shape().line_len(rec.key, rec.value) {
                        cursor.next_offset = rec.offset;
                        cursor.skip = inside;
                        return Ok(());
                    }
                }
                cursor.next_offset = h.next_offset();
                at += h.size;
            }
            file_pos += bytes.len() as u64;
        }
    }
}

/// What a read renders from.
pub(super) enum Source<'a> {
    /// The live log, through a snapshot that a read replaces when retention or the
    /// cleaner removed one of its segments, and its last stable offset, read before the
    /// first snapshot ([`Source::live`]).
    Live(LogSnapshot, u64),
    /// A capture: its segments' bytes as they were, whatever happened to them since.
    Captured(&'a LogCapture),
}

impl Source<'_> {
    /// The live log of `partition`: its last stable offset, then its segments. In that
    /// order (Kafka's `UnifiedLog.read` too), the segments hold every record below the
    /// offset and every abort decided below it in a `.txnindex`; the other way round,
    /// an ABORT landing in between that rolled a new segment put its abort in a segment
    /// the read did not have, and showed the aborted records.
    pub(super) fn live(partition: &Partition) -> Source<'static> {
        let stable = partition.log.last_stable_offset();
        #[cfg(test)]
        partition.log.between_stable_and_segments.run();
        Source::Live(partition.log.snapshot(), stable)
    }

    /// What a read of the source shows: up to the last stable offset of the live log
    /// when the read began, or of the log when it was captured.
    fn visibility(&self) -> Visibility {
        match self {
            Source::Live(_, stable) => Visibility::below(*stable),
            Source::Captured(capture) => Visibility::below(capture.visible_end()),
        }
    }

    pub(super) fn snap(&self) -> &LogSnapshot {
        match self {
            Source::Live(snap, _) => snap,
            Source::Captured(capture) => capture.snap(),
        }
    }

    /// Takes a fresh snapshot if the one read from is outdated; whether it did (a capture
    /// is never outdated).
    fn refresh(&mut self, topic: &Partition) -> bool {
        match self {
            Source::Live(snap, _) if topic.outdated(snap) => {
                *snap = topic.log.snapshot();
                true
            }
            Source::Live(..) | Source::Captured(_) => false,
        }
    }

    /// Whole batches of segment `idx` from file position `pos`.
    fn batches(&self, idx: usize, pos: u64, want: usize) -> Result<MappedBatches> {
        let seg = &self.snap().segments[idx];
        match self {
            Source::Live(..) => seg.mapped_batches(pos, want),
            Source::Captured(capture) => seg.pinned_batches(capture.pinned(idx), pos, want),
        }
    }

    /// The file position in segment `idx` of the batch holding `offset`, or an earlier one.
    fn position(&self, idx: usize, offset: u64) -> Result<u64> {
        let seg = &self.snap().segments[idx];
        match self {
            Source::Live(..) => seg.lookup_position(offset),
            Source::Captured(_) => Ok(seg.stream_lookup(offset)),
        }
    }

    /// Where the records end: the stream position and the offset.
    fn end(&self) -> (u64, u64) {
        match self {
            Source::Live(snap, _) => {
                let active = snap.active().info();
                (active.stream_end, active.next_offset)
            }
            Source::Captured(capture) => capture.end(),
        }
    }

    /// The stream position of the byte at `pos` of the source.
    fn stream_pos(&self, pos: u64) -> u64 {
        match self {
            Source::Live(..) => pos,
            Source::Captured(capture) => capture.stream_pos(pos),
        }
    }
}

/// What [`Partition::render_batches`] is given: the cursor, the batches, the renderings, and
/// the output with the length it may reach.
struct RenderJob<'c, 'm> {
    cursor: &'c mut LogCursor,
    batches: MappedAt<'m>,
    renderer: Renderer<'c>,
    visible: &'c mut Visibility,
    out: &'c mut Vec<u8>,
    len: usize,
}

/// Whole batches mapped at `file_pos` of `seg`, and where the records of the first go on
/// when the last read stopped inside it.
struct MappedAt<'a> {
    snap: &'a LogSnapshot,
    seg_idx: usize,
    file_pos: u64,
    bytes: &'a [u8],
    resume: Option<RecordsProgress>,
}

pub(super) fn corrupt(
    path: PathBuf,
    position: u64,
    e: crate::engine::format::DecodeError,
) -> EngineError {
    EngineError::Corrupt {
        path,
        position,
        reason: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::clock::ManualClock;
    use crate::engine::config::BrokerConfig;
    use crate::engine::log::remove_files;
    use crate::engine::log::Durability;
    use crate::engine::log_start_checkpoint::LogStartCheckpoint;
    use crate::engine::segment::RollReason;
    use crate::engine::topic::{Topic, TopicPlace};
    use parking_lot::RwLock;
    use std::sync::Arc;

    /// Topic `t` of one partition in `dir`, with the broker's defaults and a manual
    /// clock, and its partition.
    fn open_topic(dir: &std::path::Path) -> (Topic, Arc<Partition>) {
        let place = TopicPlace {
            data_dir: dir,
            broker: Arc::new(RwLock::new(BrokerConfig::defaults())),
            clock: Arc::new(ManualClock::new(1_764_430_000_000)),
            log_starts: Arc::new(LogStartCheckpoint::load(dir)),
        };
        let (topic, _) = Topic::open("t", 1, place, |_| Durability::CleanShutdown).unwrap();
        let partition = topic.partition(0).unwrap();
        (topic, partition)
    }

    /// Reads of any size render each batch once and in order: a read that ends inside an
    /// uncompressed batch leaves the rest of it for the next read to go on with, one that
    /// ends inside a compressed batch keeps the rest of it rendered aside.
    #[test]
    fn reads_that_end_inside_batches_go_on_where_they_stopped() {
        for compression in ["uncompressed", "gzip"] {
            let dir = tempfile::tempdir().unwrap();
            let (topic, partition) = open_topic(dir.path());
            topic
                .update_config(format!("compression.type={compression}").as_bytes())
                .unwrap();
            let mut expected = Vec::new();
            for write in 0..3 {
                let lines: String = (0..200).map(|i| format!("w{write}-line-{i}\n")).collect();
                topic.append_lines(lines.as_bytes()).unwrap();
                expected.extend_from_slice(lines.as_bytes());
            }
            for len in [1, 7, 100, 4096, 1 << 20] {
                let (mut cursor, mut got) = (LogCursor::default(), Vec::new());
                loop {
                    let bytes = partition
                        .read_log(&mut cursor, got.len() as u64, len)
                        .unwrap();
                    if bytes.is_empty() {
                        break;
                    }
                    assert!(bytes.len() <= len);
                    got.extend_from_slice(&bytes);
                }
                assert_eq!(got, expected, "{compression}, reads of {len} bytes");
            }
        }
    }

    /// Sealed segments hold no descriptor, so once retention removed one its files are
    /// gone: a read through a snapshot taken before starts again on a fresh one, at the
    /// log start, instead of failing.
    #[test]
    fn a_read_through_an_outdated_snapshot_starts_again_at_the_log_start() {
        let dir = tempfile::tempdir().unwrap();
        let (topic, partition) = open_topic(dir.path());
        let config = topic.config();
        for i in 0..3 {
            topic
                .append_lines(format!("line-{i}\n").as_bytes())
                .unwrap();
            partition.log.roll(&config, RollReason::Size).unwrap();
        }
        let topic = partition;
        let outdated = topic.log.snapshot();
        for d in topic.log.delete_segments_through(1, &config).unwrap() {
            remove_files(&d.files).unwrap();
        }
        let mut cursor = LogCursor::default();
        let bytes = topic
            .read_log_in(
                &mut cursor,
                0,
                100,
                Source::Live(outdated, topic.log.last_stable_offset()),
            )
            .unwrap();
        assert_eq!(bytes, b"line-2\n");
        assert_eq!(topic.stats.reader_skips.load(Ordering::Relaxed), 1);
    }
}
