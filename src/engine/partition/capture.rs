//! Captures of a topic's visible records, for copying: `.kpfs/snapshot/TOPIC/log` in the
//! mount. The live `log` keeps every record at the stream position it was appended at, so
//! its size is the stream end and the gaps retention and the cleaner leave read as nothing;
//! `tar` and `rsync` read `st_size` bytes and fail on such a file. A [`LogCapture`] is the
//! same records with their lines laid end to end: its size is exactly the bytes a read
//! from the start returns.
//!
//! Invariants:
//! - a capture shows the records visible at one moment (log start to log end, as a read
//!   from the start of the live `log` would have returned them then), and nothing else: the
//!   bytes of every segment are pinned as they were ([`Segment::pin`]), so appends,
//!   retention, DeleteRecords and the cleaner's swaps after it change nothing it returns;
//! - its byte `i` is the byte a sequential read of the live `log` from the start would
//!   have returned at position `i` then, and `len` is the count of those bytes;
//! - a read at `pos < len` returns `min(want, len - pos)` bytes, one at `pos >= len` none.
//!
//! A topic keeps one current capture (the one every caller sees, as a file's size must be
//! the same for every caller at one moment, and the kernel's fstat names no handle): it
//! is kept while handles read it, then for [`CAPTURE_GRACE_MS`] after the later of its
//! making and its last close, so `tar`'s stat, open, fstat, read, stat all see one
//! capture. After that the next look makes a new one, and the scheduler drops one
//! nobody looked at, releasing its segments.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::engine::error::Result;
use crate::engine::format::{decode_header, records_section, RecordIter};
use crate::engine::limits::{READ_MAX_BYTES, STALE_READ_RETRIES};
use crate::engine::log::LogSnapshot;
use crate::engine::segment::PinnedLog;
use crate::engine::stream_index::StreamWalker;

use super::reader::{corrupt, Source};
use super::visibility::Visibility;
use super::{LogCursor, Partition};

/// How long a capture outlives its making and its last close, by the engine clock: long
/// enough for a copying tool's stat after its last read, short enough that a file that
/// changed is shown changed at the next look soon after.
pub const CAPTURE_GRACE_MS: i64 = 2_000;

/// The visible records of a topic at one moment, their lines end to end.
#[derive(Debug)]
pub struct LogCapture {
    /// The segments up to the active one at the capture.
    snap: LogSnapshot,
    /// Each segment's bytes as they were, in `snap`'s order.
    pinned: Vec<PinnedLog>,
    /// Where each run of records contiguous in the stream starts, in the capture's bytes
    /// and in the stream, in order; the first starts at 0.
    runs: Vec<(u64, u64)>,
    len: u64,
    modified_ms: i64,
    /// The last stable offset at the capture: the records it shows end before it.
    visible_end: u64,
}

impl LogCapture {
    /// The bytes of the capture: the size of the file that shows it.
    pub fn size(&self) -> u64 {
        self.len
    }

    /// The time of the last append before the capture (its file's mtime).
    pub fn modified_ms(&self) -> i64 {
        self.modified_ms
    }

    pub(super) fn snap(&self) -> &LogSnapshot {
        &self.snap
    }

    pub(super) fn pinned(&self, idx: usize) -> &PinnedLog {
        &self.pinned[idx]
    }

    /// The offset the captured records end before.
    pub(super) fn visible_end(&self) -> u64 {
        self.visible_end
    }

    /// Where the captured records end: the stream position and the offset.
    pub(super) fn end(&self) -> (u64, u64) {
        let last = self
            .pinned
            .last()
            .expect("a log always has an active segment");
        (last.stream_end, last.next_offset)
    }

    /// The stream position of the capture's byte `pos` (below `len`).
    pub(super) fn stream_pos(&self, pos: u64) -> u64 {
        let run = self.runs.partition_point(|&(at, _)| at <= pos) - 1;
        let (at, stream_pos) = self.runs[run];
        stream_pos + (pos - at)
    }
}

/// A topic's current capture and how long it is kept.
#[derive(Debug, Default)]
pub(super) struct CaptureSlot(Mutex<Option<Kept>>);

#[derive(Debug)]
struct Kept {
    capture: Arc<LogCapture>,
    /// Handles reading it.
    open: usize,
    /// When it may go, once no handle reads it.
    until_ms: i64,
}

impl Partition {
    /// The capture a look at the topic's copy sees now: the current one, or a new one
    /// made of the records visible now. `opening` counts a handle that reads it until
    /// [`Partition::capture_closed`].
    pub fn current_capture(&self, opening: bool) -> Result<Arc<LogCapture>> {
        let now = self.topic.clock.now_ms();
        {
            let mut slot = self.capture.0.lock();
            match slot.as_mut() {
                Some(kept) if kept.open > 0 || now < kept.until_ms => {
                    kept.open += usize::from(opening);
                    return Ok(kept.capture.clone());
                }
                _ => *slot = None,
            }
        }
        // Made outside the lock: a large topic takes a while, and other looks at it wait
        // for the slot only, then take the capture that was made first.
        let capture = Arc::new(self.capture()?);
        let mut slot = self.capture.0.lock();
        let kept = slot.get_or_insert(Kept {
            capture,
            open: 0,
            until_ms: now + CAPTURE_GRACE_MS,
        });
        kept.open += usize::from(opening);
        Ok(kept.capture.clone())
    }

    /// A handle reading `capture` was closed.
    pub fn capture_closed(&self, capture: &Arc<LogCapture>) {
        let mut slot = self.capture.0.lock();
        if let Some(kept) = slot
            .as_mut()
            .filter(|kept| Arc::ptr_eq(&kept.capture, capture))
        {
            kept.open -= 1;
            kept.until_ms = self.topic.clock.now_ms() + CAPTURE_GRACE_MS;
        }
    }

    /// Drops the current capture once nobody reads it and its time is up (the scheduler
    /// asks every tick), so its pinned segments do not outlive it.
    pub fn expire_capture(&self) {
        let now = self.topic.clock.now_ms();
        let mut slot = self.capture.0.lock();
        if slot
            .as_ref()
            .is_some_and(|kept| kept.open == 0 && now >= kept.until_ms)
        {
            *slot = None;
        }
    }

    /// Reads up to `want` bytes of `capture` at `pos` through `cursor` (one per handle).
    pub fn read_capture(
        &self,
        capture: &LogCapture,
        cursor: &mut LogCursor,
        pos: u64,
        want: usize,
    ) -> Result<Vec<u8>> {
        let want = want.min(usize::try_from(capture.len.saturating_sub(pos)).unwrap_or(usize::MAX));
        if want == 0 {
            return Ok(Vec::new());
        }
        let bytes = self.read_log_in(cursor, pos, want, Source::Captured(capture))?;
        // Bytes short of `len` would make a copy shorter than the size it announced.
        debug_assert_eq!(bytes.len(), want, "a capture reads as long as it says");
        Ok(bytes)
    }

    /// A new capture of the records visible now.
    fn capture(&self) -> Result<LogCapture> {
        // Read before the snapshot: the capture then holds every append this time covers.
        let modified_ms = self.modified_ms();
        let mut attempts = 0;
        loop {
            // The last stable offset before the segments, as a read of the live log
            // (`Source::live`) takes them.
            let visible = Visibility::below(self.log.last_stable_offset());
            #[cfg(test)]
            self.log.between_stable_and_segments.run();
            let snap = self.log.snapshot();
            match self.capture_of(snap.clone(), visible, modified_ms) {
                Ok(capture) => return Ok(capture),
                // A segment that retention or the cleaner removed before it was pinned:
                // the next snapshot no longer lists it.
                Err(e) if attempts < STALE_READ_RETRIES && self.outdated(&snap) => {
                    attempts += 1;
                    tracing::debug!(partition = self.log.partition(), error = %e, "capture retried");
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The capture of `snap`: its segments pinned, then every visible record walked once
    /// to count its line and note where the stream leaves a gap.
    fn capture_of(
        &self,
        snap: LogSnapshot,
        mut visible: Visibility,
        modified_ms: i64,
    ) -> Result<LogCapture> {
        let pinned = snap
            .segments
            .iter()
            .map(|seg| seg.pin())
            .collect::<Result<Vec<_>>>()?;
        let mut runs = Vec::new();
        let (mut len, mut stream_at) = (0u64, None);
        let mut scratch = Vec::new();
        for (seg_idx, (seg, pin)) in snap.segments.iter().zip(&pinned).enumerate() {
            let (stream_start, entries) = seg.stream_entries();
            let mut walker = StreamWalker::new(&entries, 0, stream_start, seg.stream_shape());
            let mut file_pos = 0;
            loop {
                let bytes = seg.pinned_batches(pin, file_pos, READ_MAX_BYTES)?;
                if bytes.is_empty() {
                    break;
                }
                let mut at = 0;
                while at < bytes.len() {
                    let bad = |e| corrupt(seg.log_path(), file_pos + at as u64, e);
                    let h = decode_header(&bytes[at..]).map_err(bad)?;
                    if !h.in_log_stream() {
                        at += h.size;
                        continue;
                    }
                    let hidden = visible.is_aborted(&snap, seg_idx, &h);
                    let section =
                        records_section(&h, &bytes[at..at + h.size], &mut scratch).map_err(bad)?;
                    for rec in RecordIter::new(&h, section) {
                        let rec = rec.map_err(bad)?;
                        let pos = walker.position(rec.offset, rec.key, rec.value);
                        if rec.offset < snap.log_start_offset
                            || hidden
                            || rec.offset >= visible.end_offset()
                        {
                            continue;
                        }
                        if stream_at != Some(pos) {
                            runs.push((len, pos));
                        }
                        let line = walker.shape().line_len(rec.key, rec.value);
                        len += line;
                        stream_at = Some(pos + line);
                    }
                    at += h.size;
                }
                file_pos += bytes.len() as u64;
            }
        }
        if runs.is_empty() {
            runs.push((0, 0));
        }
        Ok(LogCapture {
            snap,
            pinned,
            runs,
            len,
            modified_ms,
            visible_end: visible.end_offset(),
        })
    }
}
