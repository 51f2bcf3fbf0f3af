//! One segment: a `.log` file of batches plus its `.index` and `.timeindex`, and its
//! stream index in the topic's kpfs folder.
//!
//! Thread-safety: the mutable state sits behind one mutex. Only the owning log's writer
//! (under the log's append lock) appends, rolls or renames; readers take the mutex briefly
//! to learn the committed size or look up an index entry, then read the file with `pread`
//! without any lock. Bytes below the committed size never change while the segment is
//! live, so such reads need no further coordination.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use std::sync::Arc;

use memmap2::{Mmap, MmapOptions};
use parking_lot::Mutex;

use super::batch_validation::{BatchWalker, Step};
use super::error::{EngineError, Result};
use super::format::{
    decode_header, records_section, segment_file_name, verify_batch, BatchHeader, DecodeError,
    RecordIter, BATCH_HEADER_BYTES, INDEX_SUFFIX, LOG_SUFFIX, MAX_SEGMENT_FILE_BYTES,
    STREAM_INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX,
};
use super::index::{IndexEntries, IndexLifecycle, OffsetIndex, TimeIndex};
use super::limits::{PAGE_BYTES, READ_MAP_STEP_BYTES, READ_MIN_BYTES};
use super::stream_index::{
    BatchStream, StreamEntry, StreamIndex, StreamShape, StreamWalker, STREAM_INDEX_INTERVAL_BYTES,
};
use super::txn_index::{AbortedTxn, TxnIndex, TxnSearch};

static NEXT_SEGMENT_ID: AtomicU64 = AtomicU64::new(1);

#[derive(Debug)]
struct State {
    /// Committed bytes of `.log`: readers never look past this.
    size: u64,
    /// What the batches so far add up to; a failed append puts it back as it was.
    tally: Tally,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    stream_index: StreamIndex,
    txn_index: TxnIndex,
    /// Suffix currently appended to every file name ("" or ".deleted").
    suffix: String,
}

/// A segment's running facts, each batch's bookkeeping (`note_batch`) moves them on.
#[derive(Clone, Copy, Debug)]
struct Tally {
    /// Offset after the last batch (the base offset while empty).
    next_offset: u64,
    /// Largest record timestamp so far, -1 when none.
    max_timestamp: i64,
    offset_of_max_timestamp: u64,
    /// Timestamp of the first batch: the time-based roll measures from here.
    first_batch_timestamp: Option<i64>,
    /// Where the segment's last record's rendering ends in the `log` stream, and the
    /// rendering it was appended under.
    stream_end: u64,
    shape: StreamShape,
    bytes_since_index_entry: u64,
    bytes_since_stream_entry: u64,
}

impl Tally {
    /// No batch yet: the stream stands at `stream_pos`.
    fn empty(base_offset: u64, stream_pos: u64, shape: StreamShape) -> Tally {
        Tally {
            next_offset: base_offset,
            max_timestamp: -1,
            offset_of_max_timestamp: base_offset,
            first_batch_timestamp: None,
            stream_end: stream_pos,
            shape,
            bytes_since_index_entry: 0,
            bytes_since_stream_entry: 0,
        }
    }
}

#[derive(Debug)]
pub struct Segment {
    /// Unique per segment object, so cursors can tell a rewritten segment from the one they saw.
    id: u64,
    base_offset: u64,
    dir: PathBuf,
    /// The topic's kpfs folder (stream index).
    stream_dir: PathBuf,
    log: Mutex<LogFile>,
    /// Wall-clock ms when this object was created or loaded (Kafka's `created`).
    created_ms: i64,
    /// This segment's share of `segment.jitter.ms`.
    roll_jitter_ms: i64,
    /// Set when loading found bytes that do not decode.
    needs_recovery: std::sync::atomic::AtomicBool,
    /// The `.txnindex` was refused at open: recovery rebuilds it from the segment's
    /// first batch, whatever the recovery point vouches for.
    txn_index_lost: std::sync::atomic::AtomicBool,
    /// Bytes from the start whose batches passed a CRC check in this process (or were
    /// written by it): reads verify each batch once, not on every read.
    verified_to: AtomicU64,
    /// Bytes of `.log` known to be on stable storage: `size` as of the last successful
    /// fsync. A segment loaded from disk starts at 0, since a crashed predecessor may
    /// have left page-cache-only data in it.
    synced_size: AtomicU64,
    /// Read-only mapping of `.log` for the read path, grown in [`READ_MAP_STEP_BYTES`]s as the
    /// segment grows; readers hold an `Arc` of the one they use. Kept only while the
    /// segment is active: a sealed segment is mapped per read, so a mount of 100,000
    /// segments that were all read once holds no 100,000 mappings (vm.max_map_count).
    read_map: Mutex<Option<Arc<Mmap>>>,
    /// Between `make_active` and `seal`.
    active: std::sync::atomic::AtomicBool,
    /// The `.log` was grown past its data by [`Segment::preallocate`]; `seal` trims it.
    preallocated: std::sync::atomic::AtomicBool,
    state: Mutex<State>,
}

/// A segment's `.log`: its current path and, while the segment is active or being
/// loaded, an open descriptor. A sealed segment opens the file per use, so descriptors
/// follow topics, not segments: 1,000 topics of 100 segments would need 100,000, and the
/// limit here is 20,000 (raising it needs CAP_SYS_RESOURCE).
#[derive(Debug)]
struct LogFile {
    path: PathBuf,
    file: Option<Arc<File>>,
}

/// Whole batches of a segment's `.log` for a fetch ([`Segment::fetch_span`]).
#[derive(Debug)]
pub(crate) struct FetchSpan {
    pub(crate) file: File,
    pub(crate) position: u64,
    pub(crate) len: u64,
    /// The batches reach the end of what the caller may read: a fetch goes on in the
    /// next segment.
    pub(crate) to_end: bool,
}

/// What [`Segment::first_record_from`] looks for: the batches to open, the record to
/// take (by offset and timestamp), and whether only the first batch opened counts.
struct BatchSearch<'a> {
    batch: &'a dyn Fn(&BatchHeader) -> bool,
    record: &'a dyn Fn(u64, i64) -> bool,
    first_batch_only: bool,
}

/// Whole, verified batches borrowed from a segment's read mapping.
#[derive(Debug)]
pub(crate) struct MappedBatches {
    map: Option<Arc<Mmap>>,
    start: usize,
    end: usize,
}

impl MappedBatches {
    fn none() -> MappedBatches {
        MappedBatches {
            map: None,
            start: 0,
            end: 0,
        }
    }
}

/// A segment's committed bytes as of one moment ([`Segment::pin`]), and where its records
/// ended then in offsets and in the `log` stream.
#[derive(Debug)]
pub(crate) struct PinnedLog {
    map: Option<Arc<Mmap>>,
    pub(crate) size: u64,
    pub(crate) next_offset: u64,
    pub(crate) stream_end: u64,
}

impl Drop for MappedBatches {
    /// Unmaps the pages just read from this process (they stay in the page cache), so a
    /// daemon that streams gigabytes does not report them all as its own memory.
    fn drop(&mut self) {
        let Some(map) = &self.map else { return };
        let from = self.start / PAGE_BYTES * PAGE_BYTES;
        let to = self.end / PAGE_BYTES * PAGE_BYTES;
        if to > from {
            // SAFETY: MADV_DONTNEED on a read-only shared file mapping only drops this
            // process's page-table entries; a later access to the range faults the same
            // file bytes back in, so concurrent readers of the mapping see no change.
            let _ = unsafe {
                map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, from, to - from)
            };
        }
    }
}

impl std::ops::Deref for MappedBatches {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.map.as_ref().map_or(&[], |m| &m[self.start..self.end])
    }
}

/// Facts about a segment at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentInfo {
    pub(crate) id: u64,
    pub base_offset: u64,
    pub size: u64,
    pub next_offset: u64,
    pub max_timestamp: i64,
    /// Where the segment's stream starts: the stream end of the log before it.
    pub stream_start: u64,
    pub stream_end: u64,
    pub first_batch_timestamp: Option<i64>,
    pub(crate) offset_index_entries: usize,
    pub(crate) time_index_entries: usize,
}

/// What recovering a segment did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecoveryOutcome {
    /// Bytes whose batches were validated (the whole file, or the tail after the
    /// recovery point).
    pub(crate) bytes_checked: u64,
    /// Bytes cut after the last valid batch.
    pub(crate) bytes_cut: u64,
    /// Why the first byte cut is not a valid batch, when anything was cut.
    pub(crate) invalid: Option<String>,
    /// The transaction index lost its entries for markers from this offset on: the
    /// producer-state replay puts them back ([`Segment::ensure_aborted`]).
    pub(crate) txn_index_from: u64,
}

/// Where a recovery may resume: a batch with an index entry below the recovery point.
#[derive(Debug)]
struct Resume {
    position: u64,
    at: BatchHeader,
    first: BatchHeader,
}

fn stream_index_path(dir: &Path, base: u64, suffix: &str) -> PathBuf {
    file_path(dir, base, STREAM_INDEX_SUFFIX, suffix)
}

/// What a scan of a `.log` found.
#[derive(Debug)]
struct ScanOutcome {
    /// Bytes of valid batches from the start.
    valid_bytes: u64,
    /// Why scanning stopped before the end of the file, if it did.
    invalid: Option<String>,
}

fn file_path(dir: &Path, base: u64, suffix: &str, extra: &str) -> PathBuf {
    dir.join(format!("{}{extra}", segment_file_name(base, suffix)))
}

/// What a segment is opened or created with, besides its files' contents.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SegmentSpec<'a> {
    /// The partition directory.
    pub(crate) dir: &'a Path,
    /// The topic's kpfs folder, where the stream index lives.
    pub(crate) stream_dir: &'a Path,
    /// The topic's rendering now: a stream index rebuilt from nothing assumes it.
    pub(crate) shape: StreamShape,
    pub(crate) base_offset: u64,
    /// Appended to every file name: "" for a segment of the log, ".cleaned" or ".swap"
    /// for the cleaner's outputs.
    pub(crate) suffix: &'a str,
    /// Where the segment's stream starts (the stream end of the log before it), for a
    /// new segment, or an old one whose stream index is lost.
    pub(crate) stream_pos: u64,
    /// Size the indexes are preallocated to while the segment is active
    /// (`segment.index.bytes`).
    pub(crate) max_index_bytes: usize,
    /// When the segment was created or opened: its age for time-based rolls while it
    /// holds no batch.
    pub(crate) now_ms: i64,
    /// Subtracted from `segment.ms` when deciding a time-based roll.
    pub(crate) roll_jitter_ms: i64,
}

impl Segment {
    /// Creates a new, empty segment. A stale file of the same name is replaced.
    pub(crate) fn create(spec: &SegmentSpec<'_>) -> Result<Segment> {
        for kind in [
            LOG_SUFFIX,
            INDEX_SUFFIX,
            TIME_INDEX_SUFFIX,
            TXN_INDEX_SUFFIX,
        ] {
            let p = file_path(spec.dir, spec.base_offset, kind, spec.suffix);
            if p.exists() {
                tracing::warn!(path = %p.display(), "replacing stale file while creating a segment");
                fs::remove_file(&p)
                    .map_err(|e| EngineError::io(format!("remove {}", p.display()), e))?;
            }
        }
        let segment = Self::from_parts(spec, true)?;
        segment.make_active()?;
        Ok(segment)
    }

    /// Opens (or with `create`, creates) the three files of a segment and builds it with
    /// `spec.stream_pos` as the stream end of an empty segment.
    fn from_parts(spec: &SegmentSpec<'_>, create: bool) -> Result<Segment> {
        let &SegmentSpec {
            dir,
            stream_dir,
            shape,
            base_offset,
            suffix,
            stream_pos,
            max_index_bytes,
            now_ms,
            roll_jitter_ms,
        } = spec;
        let log_path = file_path(dir, base_offset, LOG_SUFFIX, suffix);
        let log = Self::open_log(&log_path, create).map_err(|e| {
            let what = if create { "create" } else { "open" };
            EngineError::io(format!("{what} {}", log_path.display()), e)
        })?;
        let idx_path = file_path(dir, base_offset, INDEX_SUFFIX, suffix);
        let tidx_path = file_path(dir, base_offset, TIME_INDEX_SUFFIX, suffix);
        let offset_index = OffsetIndex::open(&idx_path, base_offset, max_index_bytes)
            .map_err(|e| EngineError::io(format!("open {}", idx_path.display()), e))?;
        let time_index = TimeIndex::open(&tidx_path, base_offset, max_index_bytes)
            .map_err(|e| EngineError::io(format!("open {}", tidx_path.display()), e))?;
        let sidx_path = stream_index_path(stream_dir, base_offset, suffix);
        let stream_index = if create {
            StreamIndex::create(&sidx_path, base_offset, stream_pos)
        } else {
            let log_size = log.metadata().map(|m| m.len()).unwrap_or(0);
            match StreamIndex::load(&sidx_path, base_offset, log_size) {
                Ok(Some(index)) => Ok(index),
                Ok(None) => {
                    tracing::warn!(path = %sidx_path.display(), "stream index missing or unreadable; rebuilding it from the log");
                    StreamIndex::create(&sidx_path, base_offset, stream_pos)
                }
                Err(e) => Err(e),
            }
        }
        .map_err(|e| EngineError::io(format!("open {}", sidx_path.display()), e))?;
        let txn_path = file_path(dir, base_offset, TXN_INDEX_SUFFIX, suffix);
        let (txn_index, txn_index_corrupt) = if create {
            (TxnIndex::empty(txn_path), false)
        } else {
            match TxnIndex::load(txn_path.clone(), base_offset)
                .map_err(|e| EngineError::io(format!("read {}", txn_path.display()), e))?
            {
                Ok(index) => (index, false),
                Err(reason) => {
                    tracing::warn!(file = %log_path.display(), reason = %reason, "Found a corrupted index file corresponding to log file, recovering segment and rebuilding index files");
                    (TxnIndex::empty(txn_path), true)
                }
            }
        };
        Ok(Segment {
            id: NEXT_SEGMENT_ID.fetch_add(1, Ordering::Relaxed),
            base_offset,
            dir: dir.to_path_buf(),
            stream_dir: stream_dir.to_path_buf(),
            log: Mutex::new(LogFile {
                path: log_path,
                file: Some(Arc::new(log)),
            }),
            created_ms: now_ms,
            roll_jitter_ms,
            needs_recovery: txn_index_corrupt.into(),
            txn_index_lost: txn_index_corrupt.into(),
            synced_size: AtomicU64::new(0),
            verified_to: AtomicU64::new(0),
            read_map: Mutex::new(None),
            active: Default::default(),
            preallocated: Default::default(),
            state: Mutex::new(State {
                size: 0,
                tally: Tally::empty(base_offset, stream_index.stream_start(), shape),
                offset_index,
                time_index,
                stream_index,
                txn_index,
                suffix: suffix.to_string(),
            }),
        })
    }

    /// Opens an existing segment. Trusts the `.log` up to its length and the indexes'
    /// valid prefixes; loads the tail facts by reading batch headers after the last index
    /// entry.
    pub(crate) fn open(spec: &SegmentSpec<'_>) -> Result<Segment> {
        let seg = Self::from_parts(spec, false)?;
        let len = seg
            .log_file()?
            .metadata()
            .map_err(|e| seg.io_err("stat", e))?
            .len();
        seg.state.lock().size = len;
        if let Err(e) = seg.load_tail_facts() {
            match e {
                // A torn or corrupt tail: the caller recovers the segment.
                EngineError::Corrupt { .. } => {
                    tracing::warn!(error = %e, "segment tail does not decode; it needs recovery");
                    seg.needs_recovery.store(true, Ordering::Relaxed);
                }
                other => return Err(other),
            }
        }
        Ok(seg)
    }

    /// Reads batch headers to learn next offset, max timestamp and stream range. Starts
    /// at the last offset-index entry, so the cost is bounded by `index.interval.bytes`
    /// plus one batch, except that the first batch is always read for its timestamps.
    fn load_tail_facts(&self) -> Result<()> {
        let mut st = self.state.lock();
        if st.size == 0 {
            if st.offset_index.entries() > 0 || st.time_index.entries() > 0 {
                // An empty log with index entries: the log lost its bytes.
                return Err(self.corrupt(
                    0,
                    DecodeError::BadRecord("index entries for an empty log".into()),
                ));
            }
            return Ok(());
        }
        let first = self.read_header_at(0, st.size)?;
        st.tally.first_batch_timestamp = Some(first.base_timestamp);
        let (mut max_ts, mut offset_of_max) =
            st.time_index.last().unwrap_or((-1, self.base_offset));
        let mut pos = u64::from(st.offset_index.last().map_or(0, |(_, p)| p));
        // Indexes are not checksummed: the last entry must name a batch that ends at
        // its offset, or the tail facts would come from nowhere.
        if let Some((offset, at)) = st.offset_index.last() {
            let h = self.read_header_at(u64::from(at), st.size.max(u64::from(at)))?;
            if h.last_offset() != offset {
                return Err(self.corrupt(
                    u64::from(at),
                    DecodeError::BadRecord(format!(
                        "index entry for offset {offset} points at a batch ending at {}",
                        h.last_offset()
                    )),
                ));
            }
        }
        let mut last: Option<BatchHeader> = None;
        while pos < st.size {
            let h = self.read_header_at(pos, st.size)?;
            if h.max_timestamp > max_ts {
                max_ts = h.max_timestamp;
                offset_of_max = h.last_offset();
            }
            pos += h.size as u64;
            last = Some(h);
        }
        if first.max_timestamp > max_ts {
            max_ts = first.max_timestamp;
            offset_of_max = first.last_offset();
        }
        if let Some(h) = last {
            st.tally.next_offset = h.next_offset();
        }
        st.tally.max_timestamp = max_ts;
        st.tally.offset_of_max_timestamp = offset_of_max;
        self.settle_stream(&mut st)
    }

    /// Derives where the segment's stream ends from its last stream-index entry and the
    /// records after it, giving the records an entry if the index has none (it was
    /// rebuilt: the segment's stream then starts where the caller said, under the
    /// topic's rendering now).
    fn settle_stream(&self, st: &mut State) -> Result<()> {
        let last = st.stream_index.entries().len().checked_sub(1);
        let from = last.map_or(0, |i| u64::from(st.stream_index.entries()[i].file_pos));
        let mut walker = StreamWalker::new(
            st.stream_index.entries(),
            last.unwrap_or(0),
            st.stream_index.stream_start(),
            st.tally.shape,
        );
        let log = self.log_file()?;
        let mut first_record: Option<(u64, u64)> = None;
        let (mut pos, mut batch, mut scratch) = (from, Vec::new(), Vec::new());
        while pos < st.size {
            let h = self.read_header_at(pos, st.size)?;
            batch.resize(h.size, 0);
            log.read_exact_at(&mut batch, pos)
                .map_err(|e| self.io_err("read", e))?;
            if !h.in_log_stream() {
                pos += h.size as u64;
                continue;
            }
            let section =
                records_section(&h, &batch, &mut scratch).map_err(|e| self.corrupt(pos, e))?;
            for rec in RecordIter::new(&h, section) {
                let rec = rec.map_err(|e| self.corrupt(pos, e))?;
                first_record.get_or_insert((rec.offset, pos));
                walker.position(rec.offset, rec.key, rec.value);
            }
            pos += h.size as u64;
        }
        (st.tally.stream_end, st.tally.shape) = walker.end();
        st.tally.bytes_since_stream_entry = st.size - from;
        if let (None, Some((offset, file_pos))) = (last, first_record) {
            let entry = StreamEntry {
                offset,
                file_pos: u32::try_from(file_pos).expect("segment positions fit u32"),
                stream_pos: st.stream_index.stream_start(),
                shape: st.tally.shape,
            };
            st.stream_index
                .append(entry, false)
                .map_err(|e| self.io_err("rebuild the stream index of", e))?;
        }
        Ok(())
    }

    fn read_header_at(&self, pos: u64, size: u64) -> Result<BatchHeader> {
        let mut buf = [0u8; BATCH_HEADER_BYTES];
        let n = (size - pos).min(BATCH_HEADER_BYTES as u64) as usize;
        self.log_file()?
            .read_exact_at(&mut buf[..n], pos)
            .map_err(|e| self.io_err("read batch header", e))?;
        let h = decode_header(&buf[..n]).map_err(|e| self.corrupt(pos, e))?;
        if pos + h.size as u64 > size {
            return Err(self.corrupt(
                pos,
                DecodeError::Truncated {
                    needed: h.size,
                    available: (size - pos) as usize,
                },
            ));
        }
        Ok(h)
    }

    /// Recovery of a segment whose records below `durable_offset` were fsynced (with
    /// their index entries) before that offset was checkpointed as the recovery point:
    /// validation resumes at the last offset-index entry below it, so the cost follows
    /// the unsynced tail instead of the segment's size. Without a usable entry every
    /// batch is validated from the start. Both indexes are rebuilt from where validation
    /// starts, and the file is truncated after the last valid batch.
    pub(crate) fn recover_after(
        &self,
        durable_offset: u64,
        index_interval_bytes: u64,
    ) -> Result<RecoveryOutcome> {
        let resume = if self.txn_index_lost.swap(false, Ordering::Relaxed) {
            None
        } else {
            self.resume_point(durable_offset)
        };
        self.recover_from(resume, index_interval_bytes)
    }

    /// The batch at the last offset-index entry wholly below `durable_offset`, if the
    /// entry names a batch that really ends at its offset and passes its CRC (bit rot
    /// below the point must not leave an entry behind the cut), with the segment's first
    /// batch.
    fn resume_point(&self, durable_offset: u64) -> Option<Resume> {
        if durable_offset <= self.base_offset {
            return None;
        }
        let st = self.state.lock();
        let (offset, position) = st.offset_index.lookup(durable_offset - 1).ok()?;
        if position == 0 {
            return None;
        }
        let position = u64::from(position);
        let size = st.size;
        drop(st);
        if position >= size {
            return None;
        }
        let at = self.read_header_at(position, size).ok()?;
        let first = self.read_header_at(0, position).ok()?;
        let mut batch = vec![0u8; at.size];
        self.log_file()
            .ok()?
            .read_exact_at(&mut batch, position)
            .ok()?;
        verify_batch(&batch).ok()?;
        (at.last_offset() == offset && at.next_offset() <= durable_offset).then_some(Resume {
            position,
            at,
            first,
        })
    }

    /// Recovery from `resume` (a trusted prefix ending at a batch that has an index
    /// entry) or from the start.
    fn recover_from(
        &self,
        resume: Option<Resume>,
        index_interval_bytes: u64,
    ) -> Result<RecoveryOutcome> {
        let (start, floor) = resume
            .as_ref()
            .map_or((0, self.base_offset), |r| (r.position, r.at.base_offset));
        let scan = self.scan_from(start, floor)?;
        let mut st = self.state.lock();
        let file_len = st.size;
        match &resume {
            Some(Resume {
                position,
                at: h,
                first,
            }) => {
                // The prefix keeps its index entries up to and including the resume
                // batch's. A time entry is considered with every offset entry, after the
                // batch's own timestamp counted, so the last kept one is the maximum up
                // to and including the resume batch.
                let position = u32::try_from(*position).expect("segment positions fit u32");
                st.offset_index
                    .truncate_to_position(position + 1)
                    .and_then(|()| st.time_index.truncate_to_offset(h.next_offset()))
                    .and_then(|()| st.txn_index.truncate_to(h.next_offset()))
                    .map_err(|e| self.io_err("truncate the indexes of", e))?;
                let (max_timestamp, offset_of_max_timestamp) =
                    st.time_index.last().unwrap_or((-1, self.base_offset));
                st.tally = Tally {
                    next_offset: h.base_offset,
                    max_timestamp,
                    offset_of_max_timestamp,
                    first_batch_timestamp: Some(first.base_timestamp),
                    // Derived again below, once the valid end is known.
                    stream_end: st.tally.stream_end,
                    shape: st.tally.shape,
                    // The resume batch already has its entry: none again for it.
                    bytes_since_index_entry: 0,
                    bytes_since_stream_entry: 0,
                };
            }
            None => {
                st.offset_index
                    .clear()
                    .and_then(|()| st.time_index.clear())
                    .and_then(|()| st.txn_index.reset())
                    .map_err(|e| self.io_err("clear the indexes of", e))?;
                st.tally = Tally::empty(
                    self.base_offset,
                    st.stream_index.stream_start(),
                    st.tally.shape,
                );
            }
        }
        st.size = start;
        let mut pos = start;
        while pos < scan.valid_bytes {
            let h = self.read_header_at(pos, scan.valid_bytes)?;
            Self::note_batch(&mut st, &h, pos, index_interval_bytes)
                .map_err(|e| self.io_err("rebuild index", e))?;
            pos += h.size as u64;
        }
        st.size = scan.valid_bytes;
        if start == 0 {
            self.verified_to.store(scan.valid_bytes, Ordering::Release);
        } else {
            // The checked batches do not start at 0: reads check the prefix themselves.
            self.verified_to.store(0, Ordering::Release);
            // The prefix was fsynced before the checkpoint; the rest is page cache only.
            self.synced_size.fetch_max(start, Ordering::Relaxed);
        }
        // Appends will reuse the cut positions; they are not covered by any fsync.
        self.synced_size
            .fetch_min(scan.valid_bytes, Ordering::Relaxed);
        self.needs_recovery.store(false, Ordering::Relaxed);
        if let Some(why) = &scan.invalid {
            tracing::warn!(
                file = %self.log_path_locked(&st).display(),
                position = scan.valid_bytes,
                bytes_cut = file_len - scan.valid_bytes,
                reason = %why,
                "truncating segment at the first invalid batch"
            );
            *self.read_map.lock() = None;
            self.log_file()?
                .set_len(scan.valid_bytes)
                .map_err(|e| self.io_err("truncate", e))?;
        }
        st.stream_index
            .truncate_to_position(scan.valid_bytes)
            .map_err(|e| self.io_err("truncate the stream index of", e))?;
        self.settle_stream(&mut st)?;
        Ok(RecoveryOutcome {
            bytes_checked: scan.valid_bytes - start,
            bytes_cut: file_len - scan.valid_bytes,
            invalid: scan.invalid,
            txn_index_from: resume.map_or(self.base_offset, |r| r.at.next_offset()),
        })
    }

    /// Finds the valid batches from `start` on, the first of them at or above offset
    /// `floor` (the rule of [`BatchWalker`], which `kpfs check` applies too).
    fn scan_from(&self, start: u64, floor: u64) -> Result<ScanOutcome> {
        let log = self.log_file()?;
        let size = log.metadata().map_err(|e| self.io_err("stat", e))?.len();
        let mut walker =
            BatchWalker::starting_at(&log, (start, size), (self.base_offset, floor), true);
        loop {
            match walker.next_step().map_err(|e| self.io_err("scan", e))? {
                Step::Batch { .. } => {}
                Step::End => {
                    return Ok(ScanOutcome {
                        valid_bytes: walker.position(),
                        invalid: None,
                    })
                }
                Step::Invalid { pos, reason } => {
                    return Ok(ScanOutcome {
                        valid_bytes: pos,
                        invalid: Some(reason),
                    })
                }
            }
        }
    }

    /// Bookkeeping for one batch placed at `pos`: offsets, timestamps, stream range and
    /// sparse index entries (Kafka's rule: an entry only when more than
    /// `index.interval.bytes` were appended since the last one, checked before adding).
    fn note_batch(
        st: &mut State,
        h: &BatchHeader,
        pos: u64,
        index_interval_bytes: u64,
    ) -> io::Result<()> {
        if h.max_timestamp > st.tally.max_timestamp {
            st.tally.max_timestamp = h.max_timestamp;
            st.tally.offset_of_max_timestamp = h.last_offset();
        }
        if st.tally.first_batch_timestamp.is_none() {
            st.tally.first_batch_timestamp = Some(h.base_timestamp);
        }
        if st.tally.bytes_since_index_entry > index_interval_bytes {
            let position = u32::try_from(pos).expect("segment positions fit u32");
            st.offset_index.append(h.last_offset(), position)?;
            let (ts, off) = (st.tally.max_timestamp, st.tally.offset_of_max_timestamp);
            st.time_index.maybe_append(ts, off)?;
            st.tally.bytes_since_index_entry = 0;
        }
        st.tally.bytes_since_index_entry += h.size as u64;
        st.tally.next_offset = h.next_offset();
        Ok(())
    }

    /// Stream-index bookkeeping for one batch placed at `pos`: an entry for its first
    /// record when its position does not follow the segment's stream end, its rendering
    /// changed, the segment has no entry yet or a lookup entry is due; one for every
    /// later mark (a break the writer found). True when an entry starts a shape other
    /// than the one before it in the segment.
    fn note_stream(
        st: &mut State,
        pos: u64,
        size: usize,
        stream: &BatchStream<'_>,
    ) -> io::Result<bool> {
        let file_pos = u32::try_from(pos).expect("segment positions fit u32");
        let mut new_shape = false;
        for (i, mark) in stream.marks.iter().enumerate() {
            let reshaped = st.stream_index.last().is_some() && mark.shape != st.tally.shape;
            // A segment's second entry comes after 64 KiB of appends (or a change of
            // rendering): it is being written, and its entries will keep coming, one per
            // append of that size or more (each append of a keyed write to a topic of 12
            // partitions).
            let written_to = st.stream_index.last().is_some();
            let needed = i > 0
                || !written_to
                || mark.stream_pos != st.tally.stream_end
                || reshaped
                || st.tally.bytes_since_stream_entry >= STREAM_INDEX_INTERVAL_BYTES;
            new_shape |= reshaped;
            if needed {
                st.stream_index.append(
                    StreamEntry {
                        offset: mark.offset,
                        file_pos,
                        stream_pos: mark.stream_pos,
                        shape: mark.shape,
                    },
                    written_to,
                )?;
                st.tally.bytes_since_stream_entry = 0;
            }
            st.tally.shape = mark.shape;
        }
        st.tally.bytes_since_stream_entry += size as u64;
        st.tally.stream_end = stream.stream_end;
        Ok(new_shape)
    }

    /// Appends one batch given as consecutive parts (the first holds at least the header),
    /// with one vectored write. The caller (the log, under its append lock) guarantees
    /// offsets continue from `next_offset` and checked the size limits.
    pub(crate) fn append_parts(
        &self,
        parts: &[&[u8]],
        stream: BatchStream<'_>,
        index_interval_bytes: u64,
    ) -> Result<()> {
        let h = decode_header(parts[0]).map_err(|e| self.corrupt(0, e))?;
        self.append_batch_run(parts, &[(h, stream)], index_interval_bytes)
    }

    /// Appends consecutive whole batches with one write (the cleaner's write buffer),
    /// `streams` giving each batch's stream positions.
    pub(crate) fn append_batches(
        &self,
        batches: &[u8],
        streams: &[BatchStream<'_>],
        index_interval_bytes: u64,
    ) -> Result<()> {
        let mut headers = Vec::new();
        let mut at = 0;
        for stream in streams {
            let h = decode_header(&batches[at..]).map_err(|e| self.corrupt(at as u64, e))?;
            at += h.size;
            headers.push((h, *stream));
        }
        assert_eq!(at, batches.len(), "one stream per batch");
        self.append_batch_run(&[batches], &headers, index_interval_bytes)
    }

    /// Writes `parts`, which hold exactly the batches of `headers` in order, at the end,
    /// then does each batch's bookkeeping; a failure undoes the whole run.
    fn append_batch_run(
        &self,
        parts: &[&[u8]],
        headers: &[(BatchHeader, BatchStream<'_>)],
        index_interval_bytes: u64,
    ) -> Result<()> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        assert_eq!(
            len,
            headers.iter().map(|(h, _)| h.size).sum::<usize>(),
            "the parts hold exactly the batches"
        );
        let mut st = self.state.lock();
        let (mut next_offset, mut stream_end) = (st.tally.next_offset, st.tally.stream_end);
        for (h, stream) in headers {
            assert!(
                h.base_offset >= next_offset,
                "offsets must strictly increase: batch base {} below segment next offset {}",
                h.base_offset,
                next_offset
            );
            for mark in stream.marks {
                assert!(
                    mark.stream_pos >= stream_end && mark.offset >= h.base_offset,
                    "stream positions never go back: record {} at {} below stream end {}",
                    mark.offset,
                    mark.stream_pos,
                    stream_end
                );
                stream_end = mark.stream_pos;
            }
            assert!(
                stream.stream_end >= stream_end,
                "a batch's stream ends after its records start"
            );
            (next_offset, stream_end) = (h.next_offset(), stream.stream_end);
        }
        let pos = st.size;
        assert!(
            pos + len as u64 <= MAX_SEGMENT_FILE_BYTES,
            "segment would exceed 4 GiB"
        );
        // What note_batch may change before it fails, to undo a failed append whole.
        let before = st.tally;
        let Some(log) = self.log.lock().file.clone() else {
            return Err(self.io_err(
                "append",
                io::Error::other("the segment is sealed and holds no descriptor"),
            ));
        };
        // The stream entries go first: one that starts a new rendering's shape is fsynced
        // before the batch is written, so no crash keeps the batch without it (recovery
        // would derive the records' positions under the old shape). Readers wait on the
        // state lock, so they see neither before the size moves.
        let noted = headers
            .iter()
            .try_fold((pos, false), |(at, new_shape), (h, stream)| {
                let reshaped = Self::note_stream(&mut st, at, h.size, stream)?;
                io::Result::Ok((at + h.size as u64, new_shape | reshaped))
            })
            .and_then(|(_, new_shape)| {
                if new_shape {
                    st.stream_index.sync()?;
                }
                Ok(())
            })
            .map_err(|e| self.io_err("stream index append", e));
        // Written before the size moves, so readers never see a partial batch.
        let written = noted
            .and_then(|()| {
                write_all_vectored_at(&log, parts, pos).map_err(|e| self.io_err("append", e))
            })
            .and_then(|()| {
                let mut at = pos;
                for (h, _) in headers {
                    Self::note_batch(&mut st, h, at, index_interval_bytes)
                        .map_err(|e| self.io_err("index append", e))?;
                    at += h.size as u64;
                }
                Ok(())
            });
        if let Err(e) = written {
            // Otherwise the final time-index entry written at close would name an offset
            // that does not exist.
            st.tally = before;
            let position = u32::try_from(pos).expect("segment positions fit u32");
            let undone = st
                .offset_index
                .truncate_to_position(position)
                .and_then(|()| st.time_index.truncate_to_offset(headers[0].0.base_offset))
                .and_then(|()| st.stream_index.truncate_to_position(pos));
            if let Err(undo) = undone {
                tracing::error!(error = %undo, "cannot drop the index entries of a failed append from {}", self.log_path_locked(&st).display());
                return Err(self.io_err(&format!("undo a failed append ({e}) in"), undo));
            }
            // The writer is told this batch failed, so it must not come back: a complete
            // batch left past the committed size would be loaded by the next open. (This
            // also ends a preallocation: the file is its data again.)
            self.preallocated.store(false, Ordering::Relaxed);
            if let Err(cut) = log.set_len(pos) {
                tracing::error!(error = %cut, "cannot cut a failed append from {}", self.log_path_locked(&st).display());
                return Err(self.io_err(&format!("cut a failed append ({e}) from"), cut));
            }
            return Err(e);
        }
        st.size = pos + len as u64;
        // This process built the batch and its CRC: no read needs to check it again.
        let _ =
            self.verified_to
                .compare_exchange(pos, st.size, Ordering::AcqRel, Ordering::Acquire);
        Ok(())
    }

    /// Kafka's `shouldRoll`, minus the offset-overflow case the caller checks.
    pub(crate) fn roll_reason(
        &self,
        incoming_bytes: u64,
        incoming_max_timestamp: i64,
        segment_size: u64,
        max_segment_ms: i64,
        now_ms: i64,
    ) -> Option<RollReason> {
        let st = self.state.lock();
        if st.size > segment_size.saturating_sub(incoming_bytes) {
            return Some(RollReason::Size);
        }
        if st.size > 0 {
            let waited = match st.tally.first_batch_timestamp {
                Some(first) if first >= 0 => incoming_max_timestamp - first,
                _ => now_ms - self.created_ms,
            };
            if waited > max_segment_ms - self.roll_jitter_ms {
                return Some(RollReason::Time);
            }
        }
        if st.offset_index.is_full() || st.time_index.is_full() {
            return Some(RollReason::IndexFull);
        }
        None
    }

    /// Kafka's `onBecomeInactiveSegment`: final time-index entry, indexes trimmed, and a
    /// preallocated `.log` trimmed to its data.
    pub(crate) fn seal(&self) -> Result<()> {
        let mut st = self.state.lock();
        let (ts, off) = (st.tally.max_timestamp, st.tally.offset_of_max_timestamp);
        if ts >= 0 {
            st.time_index
                .maybe_append(ts, off)
                .map_err(|e| self.io_err("final time index entry", e))?;
        }
        if self.preallocated.load(Ordering::Relaxed) {
            self.log_file()?
                .set_len(st.size)
                .map_err(|e| self.io_err("trim the preallocated", e))?;
            self.preallocated.store(false, Ordering::Relaxed);
            // The file's length changed: the next flush must fsync it.
            self.synced_size.store(0, Ordering::Relaxed);
        }
        st.stream_index.release();
        drop(st);
        self.active.store(false, Ordering::Release);
        *self.read_map.lock() = None;
        self.log.lock().file = None;
        self.each_index("trim", |i| i.trim())
    }

    /// Kafka's `preallocate`: grows the `.log` of a new, empty active segment to `bytes`
    /// (`RandomAccessFile.setLength`, so sparse where the filesystem allows) for a
    /// filesystem that lays a file out better when it knows its size. Appends go on at
    /// the data's end and reads stop there; `seal` (roll, close) trims the file back, and
    /// after a crash recovery cuts the zeros as an invalid tail.
    pub(crate) fn preallocate(&self, bytes: u64) -> Result<()> {
        let st = self.state.lock();
        assert_eq!(st.size, 0, "only a new segment is preallocated");
        let Some(log) = self.log.lock().file.clone() else {
            return Err(self.io_err(
                "preallocate",
                io::Error::other("the segment is sealed and holds no descriptor"),
            ));
        };
        log.set_len(bytes.min(MAX_SEGMENT_FILE_BYTES))
            .map_err(|e| self.io_err("preallocate", e))?;
        self.preallocated.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Between creation (or reactivation) and `seal`: holds its `.log` open for appends.
    pub(crate) fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// Re-expands the indexes of a segment that becomes (again) the active one.
    pub(crate) fn make_active(&self) -> Result<()> {
        let file = self.log_file()?;
        self.log.lock().file = Some(file);
        self.active.store(true, Ordering::Release);
        self.each_index("preallocate", |i| i.preallocate())
    }

    /// Applies one lifecycle step to both indexes, naming the file that failed.
    fn each_index(
        &self,
        what: &str,
        step: impl Fn(&mut dyn IndexLifecycle) -> io::Result<()>,
    ) -> Result<()> {
        let mut st = self.state.lock();
        let State {
            offset_index,
            time_index,
            ..
        } = &mut *st;
        step(offset_index).map_err(|e| self.io_err(&format!("{what} .index"), e))?;
        step(time_index).map_err(|e| self.io_err(&format!("{what} .timeindex"), e))
    }

    /// Renames every file of the segment from its current suffix to `suffix`
    /// (e.g. to `.deleted`). Missing index files are tolerated, as in Kafka.
    pub(crate) fn rename_suffix(&self, suffix: &str) -> Result<()> {
        let mut st = self.state.lock();
        // The stream index moves first: a crash between the two leaves the `.log` one
        // step behind, and the `.log`'s name decides what recovery does (a `.swap` whose
        // stream index is already live is still finished with it).
        let from = stream_index_path(&self.stream_dir, self.base_offset, &st.suffix);
        let to = stream_index_path(&self.stream_dir, self.base_offset, suffix);
        match fs::rename(&from, &to) {
            Ok(()) => st.stream_index.renamed(&to),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(EngineError::io(
                    format!("rename {} to {}", from.display(), to.display()),
                    e,
                ))
            }
        }
        for kind in [
            LOG_SUFFIX,
            INDEX_SUFFIX,
            TIME_INDEX_SUFFIX,
            TXN_INDEX_SUFFIX,
        ] {
            let from = file_path(&self.dir, self.base_offset, kind, &st.suffix);
            let to = file_path(&self.dir, self.base_offset, kind, suffix);
            match kind {
                INDEX_SUFFIX => st.offset_index.renamed(&to),
                TIME_INDEX_SUFFIX => st.time_index.renamed(&to),
                TXN_INDEX_SUFFIX => st.txn_index.renamed(&to),
                _ => {}
            }
            // The path changes with the file, so a sealed segment's next open finds it.
            let mut log = (kind == LOG_SUFFIX).then(|| self.log.lock());
            match fs::rename(&from, &to) {
                Ok(()) => {
                    if let Some(log) = log.as_mut() {
                        log.path = to.clone();
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound && kind != LOG_SUFFIX => {}
                Err(e) => {
                    return Err(EngineError::io(
                        format!("rename {} to {}", from.display(), to.display()),
                        e,
                    ))
                }
            }
        }
        st.suffix = suffix.to_string();
        Ok(())
    }

    /// Paths of the segment's files under their current suffix.
    pub(crate) fn file_paths(&self) -> Vec<PathBuf> {
        let st = self.state.lock();
        let mut paths: Vec<PathBuf> = [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX]
            .iter()
            .map(|kind| file_path(&self.dir, self.base_offset, kind, &st.suffix))
            .collect();
        if st.txn_index.has_file() {
            paths.push(st.txn_index.path().to_path_buf());
        }
        paths.push(st.stream_index.path().to_path_buf());
        paths
    }

    /// Kafka's `updateTxnIndex` for an aborted transaction whose marker this segment holds.
    pub(crate) fn append_aborted(&self, txn: AbortedTxn) -> Result<()> {
        self.state
            .lock()
            .txn_index
            .append(txn)
            .map_err(|e| self.io_err("append to the transaction index of", e))
    }

    /// The producer-state replay of an ABORT marker of this segment: its entry goes
    /// back into an index that recovery cut ([`RecoveryOutcome::txn_index_from`]); an
    /// index that has it already is left alone.
    pub(crate) fn ensure_aborted(&self, txn: AbortedTxn) -> Result<()> {
        let present = self
            .state
            .lock()
            .txn_index
            .entries()
            .last()
            .is_some_and(|last| last.last_offset >= txn.last_offset);
        if present {
            return Ok(());
        }
        self.append_aborted(txn)
    }

    /// Kafka's `collectAbortedTxns` over this segment's transaction index.
    pub(crate) fn collect_aborted(&self, fetch_offset: u64, upper_bound: u64) -> TxnSearch {
        self.state
            .lock()
            .txn_index
            .collect(fetch_offset, upper_bound)
    }

    /// Where the segment's stream starts, and the entries of its stream index.
    pub(crate) fn stream_entries(&self) -> (u64, Vec<StreamEntry>) {
        let st = self.state.lock();
        (
            st.stream_index.stream_start(),
            st.stream_index.entries().to_vec(),
        )
    }

    /// Every record's offset and stream position, in order (tests and `kpfs check`'s
    /// view of what readers derive).
    #[cfg(feature = "internals")]
    pub fn record_stream_positions(&self) -> Result<Vec<(u64, u64)>> {
        let (start, entries) = self.stream_entries();
        let mut walker = StreamWalker::new(&entries, 0, start, self.stream_shape());
        let bytes = self.read_at(0, self.size() as usize)?;
        let (mut at, mut scratch, mut out) = (0, Vec::new(), Vec::new());
        while at < bytes.len() {
            let h = verify_batch(&bytes[at..]).map_err(|e| self.corrupt(at as u64, e))?;
            if !h.in_log_stream() {
                at += h.size;
                continue;
            }
            let section = records_section(&h, &bytes[at..at + h.size], &mut scratch)
                .map_err(|e| self.corrupt(at as u64, e))?;
            for rec in RecordIter::new(&h, section) {
                let rec = rec.map_err(|e| self.corrupt(at as u64, e))?;
                out.push((rec.offset, walker.position(rec.offset, rec.key, rec.value)));
            }
            at += h.size;
        }
        Ok(out)
    }

    /// The rendering the segment's last record was appended under (or, while empty, the
    /// topic's when the segment was made).
    pub(crate) fn stream_shape(&self) -> StreamShape {
        self.state.lock().tally.shape
    }

    /// The rendering the record at `offset` was appended under, and the offset from which
    /// later records may have another (`u64::MAX`: none in this segment yet).
    pub(crate) fn shape_run(&self, offset: u64) -> (StreamShape, u64) {
        let st = self.state.lock();
        st.stream_index.shape_run(offset, st.tally.shape)
    }

    fn log_path_locked(&self, st: &State) -> PathBuf {
        file_path(&self.dir, self.base_offset, LOG_SUFFIX, &st.suffix)
    }

    pub fn log_path(&self) -> PathBuf {
        self.log_path_locked(&self.state.lock())
    }

    /// fsync of the data and the indexes.
    pub(crate) fn flush(&self) -> Result<()> {
        self.sync_data()?;
        self.each_index("fsync", |i| i.flush())
    }

    /// fsync of the data and its stream index (the other indexes are rebuildable).
    pub(crate) fn sync_data(&self) -> Result<()> {
        // Read before the fsync: only what was written before it is covered.
        let size = self.size();
        // Nothing an fsync has not covered: a close of 10,000 idle topics then costs no
        // fsync of their unchanged `.log`s (a trim at `seal` forgets what was synced).
        if self.synced_size() < size {
            self.log_file()?
                .sync_data()
                .map_err(|e| self.io_err("fsync", e))?;
        }
        {
            let mut st = self.state.lock();
            st.stream_index
                .sync()
                .map_err(|e| self.io_err("fsync the stream index of", e))?;
            // Rebuilt only by a replay from before its markers, which a trusted segment
            // never gets: the recovery point vouches for it as for the records.
            st.txn_index
                .flush()
                .map_err(|e| self.io_err("fsync the transaction index of", e))?;
        }
        self.synced_size.fetch_max(size, Ordering::Relaxed);
        Ok(())
    }

    /// Bytes of `.log` that an fsync has covered (see the field).
    pub fn synced_size(&self) -> u64 {
        self.synced_size.load(Ordering::Relaxed)
    }

    /// Records that the whole file is on stable storage (loaded after a clean shutdown,
    /// which flushed every segment).
    pub(crate) fn mark_synced(&self) {
        self.synced_size.fetch_max(self.size(), Ordering::Relaxed);
    }

    pub(crate) fn needs_recovery(&self) -> bool {
        self.needs_recovery.load(Ordering::Relaxed)
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub fn base_offset(&self) -> u64 {
        self.base_offset
    }

    pub fn size(&self) -> u64 {
        self.state.lock().size
    }

    pub fn next_offset(&self) -> u64 {
        self.state.lock().tally.next_offset
    }

    pub fn is_empty(&self) -> bool {
        self.state.lock().size == 0
    }

    /// What retention decides on: the size and Kafka's `largestTimestamp()`, read under
    /// one lock so they agree.
    pub(crate) fn size_and_largest_timestamp(&self) -> (u64, i64) {
        let (size, max_timestamp) = {
            let st = self.state.lock();
            (st.size, st.tally.max_timestamp)
        };
        (size, self.largest_timestamp_given(max_timestamp))
    }

    /// Kafka's `largestTimestamp()`: the largest record timestamp, else the file's mtime.
    pub(crate) fn largest_timestamp(&self) -> i64 {
        self.largest_timestamp_given(self.state.lock().tally.max_timestamp)
    }

    fn largest_timestamp_given(&self, max_timestamp: i64) -> i64 {
        if max_timestamp >= 0 {
            return max_timestamp;
        }
        self.modified()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as i64)
    }

    pub fn info(&self) -> SegmentInfo {
        let st = self.state.lock();
        SegmentInfo {
            id: self.id,
            base_offset: self.base_offset,
            size: st.size,
            next_offset: st.tally.next_offset,
            max_timestamp: st.tally.max_timestamp,
            stream_start: st.stream_index.stream_start(),
            stream_end: st.tally.stream_end,
            first_batch_timestamp: st.tally.first_batch_timestamp,
            offset_index_entries: st.offset_index.entries(),
            time_index_entries: st.time_index.entries(),
        }
    }

    /// Where the record at `offset`, or the first record after it, starts in the `log`
    /// stream (the segment's stream end when none follows): a walk of the records from
    /// the stream-index entry at or before it.
    pub(crate) fn stream_position_of(&self, offset: u64) -> Result<u64> {
        let (stream_start, entries) = self.stream_entries();
        let from = entries
            .partition_point(|e| e.offset <= offset)
            .checked_sub(1);
        let mut file_pos = from.map_or(0, |i| u64::from(entries[i].file_pos));
        let mut walker = StreamWalker::new(
            &entries,
            from.unwrap_or(0),
            stream_start,
            self.stream_shape(),
        );
        let mut scratch = Vec::new();
        loop {
            let bytes = self.mapped_batches(file_pos, READ_MIN_BYTES)?;
            if bytes.is_empty() {
                return Ok(self.info().stream_end);
            }
            let mut at = 0;
            while at < bytes.len() {
                let bad = |e| self.corrupt(file_pos + at as u64, e);
                let h = decode_header(&bytes[at..]).map_err(bad)?;
                if h.in_log_stream() {
                    let section =
                        records_section(&h, &bytes[at..at + h.size], &mut scratch).map_err(bad)?;
                    for rec in RecordIter::new(&h, section) {
                        let rec = rec.map_err(bad)?;
                        let pos = walker.position(rec.offset, rec.key, rec.value);
                        if rec.offset >= offset {
                            return Ok(pos);
                        }
                    }
                }
                at += h.size;
            }
            file_pos += bytes.len() as u64;
        }
    }

    /// Position of the batch holding `offset`, or earlier (index lookup).
    pub(crate) fn lookup_position(&self, offset: u64) -> Result<u64> {
        let st = self.state.lock();
        let (_, position) = st
            .offset_index
            .lookup(offset)
            .map_err(|e| self.index_err(&st, e))?;
        Ok(u64::from(position))
    }

    /// Kafka's `LogSegment.fetchUpperBoundOffset`: the offset of the first offset-index
    /// entry at or past `position` (where a fetch's bytes end), if the index has one.
    pub(crate) fn fetch_upper_bound_offset(&self, position: u64) -> Result<Option<u64>> {
        let st = self.state.lock();
        let entry = st
            .offset_index
            .first_at_or_past_position(position)
            .map_err(|e| self.index_err(&st, e))?;
        Ok(entry.map(|(offset, _)| offset))
    }

    #[cfg(feature = "internals")]
    /// Offset-index entries as (offset, position), for searches by other keys.
    pub fn index_entries(&self) -> Result<Vec<(u64, u32)>> {
        let st = self.state.lock();
        st.offset_index.all().map_err(|e| self.index_err(&st, e))
    }

    /// The last offset-index entry, known without reading the file.
    pub fn last_index_entry(&self) -> Option<(u64, u32)> {
        self.state.lock().offset_index.last()
    }

    #[cfg(feature = "internals")]
    pub fn time_index_entries(&self) -> Result<Vec<(i64, u64)>> {
        let st = self.state.lock();
        st.time_index.all().map_err(|e| self.index_err(&st, e))
    }

    fn index_err(&self, st: &State, e: io::Error) -> EngineError {
        EngineError::io(
            format!("read the index of {}", self.log_path_locked(st).display()),
            e,
        )
    }

    #[cfg(feature = "internals")]
    /// Reads raw bytes of the `.log` (never past the committed size).
    pub fn read_at(&self, pos: u64, len: usize) -> Result<Vec<u8>> {
        let size = self.size();
        let end = size.min(pos.saturating_add(len as u64));
        if pos >= end {
            return Ok(Vec::new());
        }
        let mut buf = vec![0u8; (end - pos) as usize];
        self.log_file()?
            .read_exact_at(&mut buf, pos)
            .map_err(|e| self.io_err("read", e))?;
        Ok(buf)
    }

    /// Whole batches starting at `pos`, about `want` bytes of them (at least one batch if
    /// any), each verified, without copying them out of the page cache.
    pub(crate) fn mapped_batches(&self, pos: u64, want: usize) -> Result<MappedBatches> {
        let size = self.size();
        if pos >= size {
            return Ok(MappedBatches::none());
        }
        self.batches_in(self.read_mapping(size)?, size, pos, want)
    }

    /// [`Segment::mapped_batches`] from what [`Segment::pin`] pinned: the bytes the segment
    /// had then, readable after retention or the cleaner removed its files.
    pub(crate) fn pinned_batches(
        &self,
        pinned: &PinnedLog,
        pos: u64,
        want: usize,
    ) -> Result<MappedBatches> {
        match &pinned.map {
            Some(map) if pos < pinned.size => self.batches_in(map.clone(), pinned.size, pos, want),
            _ => Ok(MappedBatches::none()),
        }
    }

    /// The committed bytes now, with the facts that describe exactly them, and a mapping
    /// that keeps them readable for as long as it is held: a mapping keeps its file's
    /// inode, so neither a rename to `.deleted` nor the removal of the file affects it.
    pub(crate) fn pin(&self) -> Result<PinnedLog> {
        let (size, next_offset, stream_end) = {
            let st = self.state.lock();
            (st.size, st.tally.next_offset, st.tally.stream_end)
        };
        let map = if size == 0 {
            None
        } else {
            Some(self.read_mapping(size)?)
        };
        Ok(PinnedLog {
            map,
            size,
            next_offset,
            stream_end,
        })
    }

    /// The position of the batch holding `offset`, or an earlier one, from the stream
    /// index, which is in memory: a sealed segment's offset index is read from its file,
    /// which may be gone while a capture still reads the segment.
    pub(crate) fn stream_lookup(&self, offset: u64) -> u64 {
        let st = self.state.lock();
        let entries = st.stream_index.entries();
        entries
            .partition_point(|e| e.offset <= offset)
            .checked_sub(1)
            .map_or(0, |i| u64::from(entries[i].file_pos))
    }

    /// Whole, verified batches from `pos`, about `want` bytes, of the first `size` bytes
    /// of `map`.
    fn batches_in(
        &self,
        map: Arc<Mmap>,
        size: u64,
        pos: u64,
        want: usize,
    ) -> Result<MappedBatches> {
        let (start, limit) = (pos as usize, size as usize);
        let mut end = start;
        while end < limit && end - start < want.max(1) {
            let h = decode_header(&map[end..limit]).map_err(|e| self.corrupt(end as u64, e))?;
            if end + h.size > limit {
                return Err(self.corrupt(
                    end as u64,
                    DecodeError::Truncated {
                        needed: h.size,
                        available: limit - end,
                    },
                ));
            }
            let verified = self.verified_to.load(Ordering::Acquire);
            if (end + h.size) as u64 > verified {
                verify_batch(&map[end..end + h.size]).map_err(|e| self.corrupt(end as u64, e))?;
                if end as u64 == verified {
                    self.verified_to
                        .fetch_max((end + h.size) as u64, Ordering::AcqRel);
                }
            }
            end += h.size;
        }
        Ok(MappedBatches {
            map: Some(map),
            start,
            end,
        })
    }

    /// Kafka's `LogSegment.read` for a fetch: the whole batches from the first one whose
    /// last offset is at or above `offset` (`translateOffset`: the offset index, then a
    /// walk of batch headers) that fit `max_bytes` from its start, at least that first
    /// one when `min_one` (Kafka's `minOneMessage`), never past `max_position` (the
    /// committed size the caller's high watermark stands at) nor into a batch at or past
    /// `end_offset` (a `read_committed` fetch's last stable offset). `None` when no batch
    /// below both reaches `offset`. The descriptor returned is the one walked, so the
    /// bytes stay readable after retention or the cleaner removes the file.
    pub(crate) fn fetch_span(
        &self,
        offset: u64,
        max_bytes: u64,
        (max_position, end_offset): (u64, u64),
        min_one: bool,
    ) -> Result<Option<FetchSpan>> {
        let size = max_position.min(self.size());
        if size == 0 {
            return Ok(None);
        }
        let file = self.read_descriptor()?;
        let map = self.read_mapping_of(size, Some(&file))?;
        let limit = size as usize;
        let header_at = |at: usize| -> Result<BatchHeader> {
            let h = decode_header(&map[at..limit]).map_err(|e| self.corrupt(at as u64, e))?;
            if at + h.size > limit {
                let truncated = DecodeError::Truncated {
                    needed: h.size,
                    available: limit - at,
                };
                return Err(self.corrupt(at as u64, truncated));
            }
            Ok(h)
        };
        let indexed = self.lookup_position(offset)? as usize;
        // An entry past what the caller may read cannot hold `offset`: walk from the start.
        let mut start = if indexed < limit { indexed } else { 0 };
        let first = loop {
            if start >= limit {
                return Ok(None);
            }
            let h = header_at(start)?;
            if h.base_offset >= end_offset {
                return Ok(None);
            }
            if h.last_offset() >= offset {
                break h;
            }
            start += h.size;
        };
        if !min_one && first.size as u64 > max_bytes {
            return Ok(Some(FetchSpan {
                file,
                position: start as u64,
                len: 0,
                to_end: false,
            }));
        }
        let mut end = start + first.size;
        let mut stopped = false;
        while end < limit {
            let h = header_at(end)?;
            if h.base_offset >= end_offset {
                stopped = true;
                break;
            }
            if (end + h.size - start) as u64 > max_bytes {
                break;
            }
            end += h.size;
        }
        Ok(Some(FetchSpan {
            file,
            position: start as u64,
            len: (end - start) as u64,
            to_end: end == limit && !stopped,
        }))
    }

    /// Kafka's `LogSegment.findOffsetByTimestamp`: from the time index entry at or below
    /// `timestamp` (and not below `starting_offset`), the first record whose timestamp
    /// is at or above `timestamp` and whose offset is at or above `starting_offset`
    /// (`FileRecords.searchForTimestamp`), as (offset, timestamp).
    pub(crate) fn find_offset_by_timestamp(
        &self,
        timestamp: i64,
        starting_offset: u64,
    ) -> Result<Option<(u64, i64)>> {
        let indexed_offset = {
            let st = self.state.lock();
            st.time_index
                .lookup(timestamp)
                .map_err(|e| self.index_err(&st, e))?
                .1
        };
        let position = self.lookup_position(indexed_offset.max(starting_offset))?;
        let search = BatchSearch {
            batch: &|h| h.max_timestamp >= timestamp,
            record: &|offset, ts| ts >= timestamp && offset >= starting_offset,
            first_batch_only: false,
        };
        self.first_record_from(position, &search)
    }

    /// Kafka's `MAX_TIMESTAMP` lookup in the segment holding the largest timestamp: the
    /// first batch at or after the index entry of its offset whose max timestamp is that
    /// timestamp, and in it the first record carrying it (`offsetOfMaxTimestamp`); `None`
    /// when the segment has no timestamp or that batch no record (the cleaner emptied it).
    pub(crate) fn max_timestamp_record(&self) -> Result<Option<(u64, i64)>> {
        let (max_timestamp, offset) = {
            let st = self.state.lock();
            (st.tally.max_timestamp, st.tally.offset_of_max_timestamp)
        };
        if max_timestamp < 0 {
            return Ok(None);
        }
        let position = self.lookup_position(offset)?;
        let search = BatchSearch {
            batch: &|h| h.max_timestamp == max_timestamp,
            record: &|_, ts| ts == max_timestamp,
            first_batch_only: true,
        };
        self.first_record_from(position, &search)
    }

    /// The first record from `position` on that `search` accepts, as (offset,
    /// timestamp); a batch stamped with `LogAppendTime` gives each record its max
    /// timestamp, as Kafka's `Record.timestamp()`.
    fn first_record_from(
        &self,
        mut position: u64,
        search: &BatchSearch<'_>,
    ) -> Result<Option<(u64, i64)>> {
        let mut scratch = Vec::new();
        loop {
            let bytes = self.mapped_batches(position, READ_MIN_BYTES)?;
            if bytes.is_empty() {
                return Ok(None);
            }
            let mut at = 0;
            while at < bytes.len() {
                let bad = |e| self.corrupt(position + at as u64, e);
                let h = decode_header(&bytes[at..]).map_err(bad)?;
                if (search.batch)(&h) {
                    let section =
                        records_section(&h, &bytes[at..at + h.size], &mut scratch).map_err(bad)?;
                    for rec in RecordIter::new(&h, section) {
                        let rec = rec.map_err(bad)?;
                        let timestamp = if h.is_log_append_time() {
                            h.max_timestamp
                        } else {
                            rec.timestamp
                        };
                        if (search.record)(rec.offset, timestamp) {
                            return Ok(Some((rec.offset, timestamp)));
                        }
                    }
                    if search.first_batch_only {
                        return Ok(None);
                    }
                }
                at += h.size;
            }
            position += bytes.len() as u64;
        }
    }

    /// A descriptor of the `.log` for reading: a duplicate of the active segment's, or
    /// the file opened by its current name (`.deleted` after a deletion).
    fn read_descriptor(&self) -> Result<File> {
        let log = self.log.lock();
        match &log.file {
            Some(file) => file.try_clone(),
            None => File::open(&log.path),
        }
        .map_err(|e| EngineError::io(format!("open {}", log.path.display()), e))
    }

    /// A read-only mapping covering at least `size` committed bytes.
    fn read_mapping(&self, size: u64) -> Result<Arc<Mmap>> {
        self.read_mapping_of(size, None)
    }

    /// [`Segment::read_mapping`] of `file`, the `.log` the caller opened, if given.
    fn read_mapping_of(&self, size: u64, file: Option<&File>) -> Result<Arc<Mmap>> {
        let mut slot = self.read_map.lock();
        if let Some(map) = slot.as_ref().filter(|m| m.len() as u64 >= size) {
            return Ok(map.clone());
        }
        let active = self.active.load(Ordering::Acquire);
        // A sealed segment no longer grows: its mapping covers exactly the file.
        let len = if active {
            size.div_ceil(READ_MAP_STEP_BYTES) * READ_MAP_STEP_BYTES
        } else {
            size
        };
        let opened;
        let log = match file {
            Some(file) => file,
            None => {
                opened = self.log_file()?;
                &*opened
            }
        };
        // SAFETY: the mapping may extend past the end of the file, but readers only touch
        // bytes below the committed size, which the file always holds: kpfs holds the
        // data directory lock, appends only grow the file, and the only truncations
        // (recovery at open) happen before a segment is shared or drop this
        // mapping first. A renamed or unlinked file stays mapped.
        let map = unsafe { MmapOptions::new().len(len as usize).map(log) }
            .map_err(|e| self.io_err("map", e))?;
        let map = Arc::new(map);
        if active {
            *slot = Some(map.clone());
        }
        Ok(map)
    }

    /// Sets the mtime of the `.log` (the cleaner keeps the source segment's time).
    pub(crate) fn set_modified(&self, time: std::time::SystemTime) -> Result<()> {
        self.log_file()?
            .set_modified(time)
            .map_err(|e| self.io_err("set mtime", e))
    }

    pub(crate) fn modified(&self) -> Option<std::time::SystemTime> {
        fs::metadata(self.log.lock().path.as_path())
            .and_then(|m| m.modified())
            .ok()
    }

    fn open_log(path: &Path, create: bool) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(create)
            .open(path)
    }

    /// The `.log` descriptor: the one held, or the file opened by its current path.
    fn log_file(&self) -> Result<Arc<File>> {
        let log = self.log.lock();
        match &log.file {
            Some(file) => Ok(file.clone()),
            None => Self::open_log(&log.path, false)
                .map(Arc::new)
                .map_err(|e| EngineError::io(format!("open {}", log.path.display()), e)),
        }
    }

    fn io_err(&self, what: &str, e: io::Error) -> EngineError {
        EngineError::io(
            format!(
                "{what} {}",
                file_path(&self.dir, self.base_offset, LOG_SUFFIX, "").display()
            ),
            e,
        )
    }

    fn corrupt(&self, position: u64, e: DecodeError) -> EngineError {
        EngineError::Corrupt {
            path: file_path(&self.dir, self.base_offset, LOG_SUFFIX, ""),
            position,
            reason: e.to_string(),
        }
    }
}

/// `pwritev` until every part is written (a short write continues where it stopped).
fn write_all_vectored_at(file: &File, parts: &[&[u8]], mut pos: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let mut parts: Vec<&[u8]> = parts.iter().copied().filter(|p| !p.is_empty()).collect();
    while !parts.is_empty() {
        let iov: Vec<libc::iovec> = parts
            .iter()
            .map(|p| libc::iovec {
                iov_base: p.as_ptr() as *mut libc::c_void,
                iov_len: p.len(),
            })
            .collect();
        // SAFETY: every iovec points into a live borrowed slice of its stated length, and
        // pwritev only reads from them.
        let n = unsafe {
            libc::pwritev(
                file.as_raw_fd(),
                iov.as_ptr(),
                iov.len() as libc::c_int,
                pos as libc::off_t,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "pwritev wrote nothing",
            ));
        }
        pos += n as u64;
        let mut done = n as usize;
        while done > 0 {
            if done >= parts[0].len() {
                done -= parts[0].len();
                parts.remove(0);
            } else {
                parts[0] = &parts[0][done..];
                done = 0;
            }
        }
    }
    Ok(())
}

/// Why a segment rolled (for the event log and status).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RollReason {
    Size,
    Time,
    IndexFull,
    /// Retention expired every segment, so a fresh empty one is rolled first.
    Retention,
}

impl std::fmt::Display for RollReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RollReason::Size => "size",
            RollReason::Time => "time",
            RollReason::IndexFull => "index full",
            RollReason::Retention => "retention",
        })
    }
}
