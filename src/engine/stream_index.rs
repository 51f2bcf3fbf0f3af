//! A segment's stream index: where each record's rendering sits in the topic's `log`
//! file. Kafka's RecordBatch v2 has no field for it, so it lives beside the segment, in
//! kpfs's own folder of the data directory (`kpfs-topics/TOPIC-0/<base>.stream`), not in
//! the partition directory, which holds only what Kafka's does.
//!
//! The `log` file is a byte stream that never shrinks: a record keeps the position it got
//! when it was appended, across retention, compaction and restarts, so `tail -f` never
//! repeats or skips. Appends are contiguous, so positions follow from the records
//! themselves: a record takes as many stream bytes as its line had under the rendering
//! (`parse.key`, `key.separator`, `null.marker`) it was appended under. The index stores
//! only what does not follow: an entry where a *run* of contiguous records starts (the
//! segment's first record, a record after one the cleaner removed, a change of rendering)
//! plus, for lookups by position, one every [`STREAM_INDEX_INTERVAL_BYTES`] of `.log`.
//! An append-only segment written under one rendering has one entry per 64 KiB.
//!
//! Entries carry a CRC each: a torn or stale tail (a crash between the `.log` and its
//! index reaching the disk) is dropped on load, and the positions after the last good
//! entry are derived again from the records. Losing entries costs lookups, not
//! positions: an entry that starts a new rendering's shape is fsynced before its batch
//! is written (docs/FORMAT.md).

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::format::{
    STREAM_INDEX_ENTRY_BYTES, STREAM_INDEX_HEADER_BYTES, STREAM_INDEX_MAGIC, STREAM_INDEX_VERSION,
};
use super::limits::KEPT_STREAM_INDEX_FILES;
pub(crate) use super::limits::STREAM_INDEX_INTERVAL_BYTES;

/// How many stream bytes records take under one rendering of the `log` file: what the
/// line protocol wrote, key and separator included when keys are parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StreamShape {
    /// `Some(separator length)` when keys are rendered (`parse.key=true`).
    pub(crate) separator_len: Option<u32>,
    /// Length of what a null key or value renders as.
    pub(crate) null_len: u32,
}

impl StreamShape {
    /// The rendered length of a record, newline included.
    pub(crate) fn line_len(&self, key: Option<&[u8]>, value: Option<&[u8]>) -> u64 {
        let field = |f: Option<&[u8]>| f.map_or(u64::from(self.null_len), |f| f.len() as u64);
        let key_part = self
            .separator_len
            .map_or(0, |sep| field(key) + u64::from(sep));
        key_part + field(value) + 1
    }

    fn encode(&self) -> (i32, u32) {
        (self.separator_len.map_or(-1, |s| s as i32), self.null_len)
    }

    fn decode(separator: i32, null_len: u32) -> Option<StreamShape> {
        let separator_len = match separator {
            -1 => None,
            s if s >= 0 => Some(s as u32),
            _ => return None,
        };
        Some(StreamShape {
            separator_len,
            null_len,
        })
    }
}

/// A record whose stream position does not follow from the record before it, or one
/// kept for lookups: the record at `offset`, in the batch at `file_pos` of the `.log`,
/// starts at `stream_pos`; the records after it take their lines' lengths under `shape`
/// until the next entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamEntry {
    pub offset: u64,
    pub file_pos: u32,
    pub stream_pos: u64,
    pub shape: StreamShape,
}

/// A record whose position its writer states (the first of a batch, or one after a
/// record the cleaner dropped).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StreamMark {
    pub(crate) offset: u64,
    pub(crate) stream_pos: u64,
    pub(crate) shape: StreamShape,
}

/// The stream positions of one batch's records as its writer knows them: `marks[0]` is
/// its first record (none for a batch without records); later marks are breaks, where a
/// record does not follow the one before. `stream_end` is where the batch's last record
/// ends.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BatchStream<'a> {
    pub(crate) marks: &'a [StreamMark],
    pub(crate) stream_end: u64,
}

/// Gives every record of a segment its stream position, walking records in offset order
/// from an entry (or the segment's start).
#[derive(Debug)]
pub(crate) struct StreamWalker<'e> {
    entries: &'e [StreamEntry],
    next: usize,
    pos: u64,
    shape: StreamShape,
}

impl<'e> StreamWalker<'e> {
    /// A walk from the segment's start (`stream_start`), with `entries[from..]` ahead.
    /// `shape` applies until the first entry (only records of a damaged index precede it).
    pub(crate) fn new(
        entries: &'e [StreamEntry],
        from: usize,
        stream_start: u64,
        shape: StreamShape,
    ) -> Self {
        StreamWalker {
            entries,
            next: from,
            pos: stream_start,
            shape,
        }
    }

    /// The record's stream position; records must come in increasing offset order.
    pub(crate) fn position(
        &mut self,
        offset: u64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> u64 {
        while let Some(e) = self.entries.get(self.next) {
            if e.offset > offset {
                break;
            }
            self.pos = e.stream_pos;
            self.shape = e.shape;
            self.next += 1;
        }
        let at = self.pos;
        self.pos += self.shape.line_len(key, value);
        at
    }

    /// The rendering the record last given a position was appended under.
    pub(crate) fn shape(&self) -> StreamShape {
        self.shape
    }

    /// Where the records walked so far end, and the rendering they were appended under.
    pub(crate) fn end(&self) -> (u64, StreamShape) {
        (self.pos, self.shape)
    }
}

/// Stream index descriptors held open now ([`KeptFile`]), at most
/// [`KEPT_STREAM_INDEX_FILES`].
static KEPT_FILES: AtomicUsize = AtomicUsize::new(0);

/// A stream index's descriptor kept between entries, counted in [`KEPT_FILES`].
#[derive(Debug)]
struct KeptFile(File);

impl KeptFile {
    /// Keeps `file` if the budget has room; gives it back otherwise.
    fn keep(file: File) -> std::result::Result<KeptFile, File> {
        let counted = KEPT_FILES.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < KEPT_STREAM_INDEX_FILES).then_some(n + 1)
        });
        match counted {
            Ok(_) => Ok(KeptFile(file)),
            Err(_) => Err(file),
        }
    }
}

impl Drop for KeptFile {
    fn drop(&mut self) {
        KEPT_FILES.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The stream index file of one segment and its entries, all kept in memory (one per
/// 64 KiB of log: 450 KB for a 1 GiB segment). It holds no descriptor while its entries
/// are rare (one every 64 KiB of log at most, the file opened per write), so the
/// descriptor budget stays the `.log` of each partition's active segment. A segment
/// being written steadily gets an entry per 64 KiB of appends, and one per append to a
/// partition of a keyed write: its index keeps its descriptor from its second entry until
/// the segment is sealed, within [`KEPT_STREAM_INDEX_FILES`] for the whole process.
#[derive(Debug)]
pub(crate) struct StreamIndex {
    path: PathBuf,
    kept: Option<KeptFile>,
    /// Entries were written since the last fsync.
    dirty: bool,
    /// The header could not be written (a full disk, at the roll retention makes to free
    /// space): written before the first entry or at the next fsync instead.
    header_pending: bool,
    base_offset: u64,
    /// Where the segment's stream starts: the stream end of the log before it.
    stream_start: u64,
    entries: Vec<StreamEntry>,
    /// Indexes of the entries whose rendering differs from the entry before: readers
    /// render each record under its own, and look up where it changes next.
    shape_changes: Vec<usize>,
    /// Entries in the file: a failed append leaves `entries` and the file agreeing.
    written: usize,
}

impl StreamIndex {
    /// Creates the index of a new segment, replacing a stale file.
    pub(crate) fn create(
        path: &Path,
        base_offset: u64,
        stream_start: u64,
    ) -> io::Result<StreamIndex> {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir)?;
        }
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        let header_pending = match file.write_all_at(&encode_header(stream_start), 0) {
            Ok(()) => false,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) => {
                tracing::warn!(path = %path.display(), "stream index header deferred for lack of space");
                true
            }
            Err(e) => return Err(e),
        };
        Ok(StreamIndex {
            path: path.to_path_buf(),
            kept: None,
            dirty: true,
            header_pending,
            base_offset,
            stream_start,
            entries: Vec::new(),
            shape_changes: Vec::new(),
            written: 0,
        })
    }

    /// Loads the index of an existing segment whose `.log` holds `log_size` bytes. A
    /// missing or unreadable file, or one for another stream, gives `None`; the caller
    /// rebuilds it. Entries from the first that fails its CRC, does not follow the one
    /// before, or points past the log on are dropped (and cut from the file).
    pub(crate) fn load(
        path: &Path,
        base_offset: u64,
        log_size: u64,
    ) -> io::Result<Option<StreamIndex>> {
        let bytes = match fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let Some(stream_start) = decode_header(&bytes) else {
            return Ok(None);
        };
        let mut entries: Vec<StreamEntry> = Vec::new();
        for raw in bytes[STREAM_INDEX_HEADER_BYTES..].chunks_exact(STREAM_INDEX_ENTRY_BYTES) {
            let Some(e) = decode_entry(raw, base_offset) else {
                break;
            };
            let follows = entries.last().map_or(e.stream_pos >= stream_start, |p| {
                e.offset > p.offset && e.file_pos >= p.file_pos && e.stream_pos >= p.stream_pos
            });
            if !follows || u64::from(e.file_pos) >= log_size {
                break;
            }
            entries.push(e);
        }
        let index = StreamIndex {
            path: path.to_path_buf(),
            kept: None,
            dirty: false,
            header_pending: false,
            base_offset,
            stream_start,
            written: entries.len(),
            shape_changes: shape_changes(&entries),
            entries,
        };
        let whole = STREAM_INDEX_HEADER_BYTES + index.written * STREAM_INDEX_ENTRY_BYTES;
        if bytes.len() != whole {
            index.cut_file()?;
        }
        Ok(Some(index))
    }

    pub(crate) fn stream_start(&self) -> u64 {
        self.stream_start
    }

    pub(crate) fn entries(&self) -> &[StreamEntry] {
        &self.entries
    }

    pub(crate) fn last(&self) -> Option<&StreamEntry> {
        self.entries.last()
    }

    /// The rendering the record at `offset` was appended under (`before` for records
    /// ahead of the first entry, which only a damaged index has), and the offset from
    /// which later records may have another (`u64::MAX`: none).
    pub(crate) fn shape_run(&self, offset: u64, before: StreamShape) -> (StreamShape, u64) {
        let at = self.entries.partition_point(|e| e.offset <= offset);
        let Some(entry) = at.checked_sub(1).map(|i| &self.entries[i]) else {
            return (before, self.entries.first().map_or(u64::MAX, |e| e.offset));
        };
        let next = self.shape_changes.partition_point(|&i| i < at);
        let until = self
            .shape_changes
            .get(next)
            .map_or(u64::MAX, |&i| self.entries[i].offset);
        (entry.shape, until)
    }

    /// Adds an entry; written to the file at once (synced with the segment).
    /// `keep_open`: more entries will follow soon, so the descriptor is kept.
    pub(crate) fn append(&mut self, entry: StreamEntry, keep_open: bool) -> io::Result<()> {
        debug_assert!(self
            .entries
            .last()
            .is_none_or(|p| entry.offset > p.offset && entry.stream_pos >= p.stream_pos));
        if keep_open && self.kept.is_none() {
            let file = OpenOptions::new().write(true).open(&self.path)?;
            self.kept = KeptFile::keep(file).ok();
        }
        self.write_pending_header()?;
        let bytes = encode_entry(&entry, self.base_offset);
        let at = (STREAM_INDEX_HEADER_BYTES + self.written * STREAM_INDEX_ENTRY_BYTES) as u64;
        match &self.kept {
            Some(kept) => kept.0.write_all_at(&bytes, at)?,
            None => OpenOptions::new()
                .write(true)
                .open(&self.path)?
                .write_all_at(&bytes, at)?,
        }
        if self.entries.last().is_some_and(|p| p.shape != entry.shape) {
            self.shape_changes.push(self.entries.len());
        }
        self.entries.push(entry);
        self.written += 1;
        self.dirty = true;
        Ok(())
    }

    /// Drops the entries of batches at or after `file_pos` (a failed append undone, a
    /// recovery's cut).
    pub(crate) fn truncate_to_position(&mut self, file_pos: u64) -> io::Result<()> {
        let keep = self
            .entries
            .partition_point(|e| u64::from(e.file_pos) < file_pos);
        if keep < self.entries.len() {
            self.entries.truncate(keep);
            self.shape_changes.retain(|&i| i < keep);
            self.written = keep;
            self.cut_file()?;
        }
        Ok(())
    }

    fn cut_file(&self) -> io::Result<()> {
        let len = (STREAM_INDEX_HEADER_BYTES + self.written * STREAM_INDEX_ENTRY_BYTES) as u64;
        OpenOptions::new()
            .write(true)
            .open(&self.path)?
            .set_len(len)
    }

    fn write_pending_header(&mut self) -> io::Result<()> {
        if self.header_pending {
            OpenOptions::new()
                .write(true)
                .open(&self.path)?
                .write_all_at(&encode_header(self.stream_start), 0)?;
            self.header_pending = false;
        }
        Ok(())
    }

    /// fsync, when entries were written since the last one.
    pub(crate) fn sync(&mut self) -> io::Result<()> {
        self.write_pending_header()?;
        if self.dirty {
            match &self.kept {
                Some(kept) => kept.0.sync_data()?,
                None => File::open(&self.path)?.sync_data()?,
            }
            self.dirty = false;
        }
        Ok(())
    }

    /// Closes a kept descriptor: the segment takes no more appends.
    pub(crate) fn release(&mut self) {
        self.kept = None;
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The file moved (a suffix change).
    pub(crate) fn renamed(&mut self, to: &Path) {
        self.path = to.to_path_buf();
    }
}

fn shape_changes(entries: &[StreamEntry]) -> Vec<usize> {
    (1..entries.len())
        .filter(|&i| entries[i].shape != entries[i - 1].shape)
        .collect()
}

fn encode_header(stream_start: u64) -> [u8; STREAM_INDEX_HEADER_BYTES] {
    let mut b = [0u8; STREAM_INDEX_HEADER_BYTES];
    b[0..4].copy_from_slice(STREAM_INDEX_MAGIC);
    b[4..8].copy_from_slice(&STREAM_INDEX_VERSION.to_be_bytes());
    b[8..16].copy_from_slice(&stream_start.to_be_bytes());
    let crc = crc_fast::crc32_iscsi(&b[..16]);
    b[16..20].copy_from_slice(&crc.to_be_bytes());
    b
}

/// The segment's stream start, when the header is whole and valid (magic, version, CRC).
pub(crate) fn decode_header(bytes: &[u8]) -> Option<u64> {
    let b = bytes.get(..STREAM_INDEX_HEADER_BYTES)?;
    let crc = u32::from_be_bytes(b[16..20].try_into().ok()?);
    let valid = &b[0..4] == STREAM_INDEX_MAGIC
        && u32::from_be_bytes(b[4..8].try_into().ok()?) == STREAM_INDEX_VERSION
        && crc_fast::crc32_iscsi(&b[..16]) == crc;
    let start = u64::from_be_bytes(b[8..16].try_into().ok()?);
    (valid && start <= i64::MAX as u64).then_some(start)
}

fn encode_entry(e: &StreamEntry, base_offset: u64) -> [u8; STREAM_INDEX_ENTRY_BYTES] {
    let rel = u32::try_from(e.offset - base_offset).expect("relative offsets fit u32");
    let (separator, null_len) = e.shape.encode();
    let mut b = [0u8; STREAM_INDEX_ENTRY_BYTES];
    b[0..4].copy_from_slice(&rel.to_be_bytes());
    b[4..8].copy_from_slice(&e.file_pos.to_be_bytes());
    b[8..16].copy_from_slice(&e.stream_pos.to_be_bytes());
    b[16..20].copy_from_slice(&separator.to_be_bytes());
    b[20..24].copy_from_slice(&null_len.to_be_bytes());
    let crc = crc_fast::crc32_iscsi(&b[..24]);
    b[24..28].copy_from_slice(&crc.to_be_bytes());
    b
}

/// One entry of a segment whose base offset is `base_offset`; `None` when it fails its CRC
/// or holds an impossible position or rendering.
pub(crate) fn decode_entry(b: &[u8], base_offset: u64) -> Option<StreamEntry> {
    let word = |at: usize| u32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"));
    if crc_fast::crc32_iscsi(&b[..24]) != word(24) {
        return None;
    }
    let stream_pos = u64::from_be_bytes(b[8..16].try_into().expect("8 bytes"));
    if stream_pos > i64::MAX as u64 {
        return None;
    }
    Some(StreamEntry {
        offset: base_offset + u64::from(word(0)),
        file_pos: word(4),
        stream_pos,
        shape: StreamShape::decode(word(16) as i32, word(20))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: StreamShape = StreamShape {
        separator_len: None,
        null_len: 4,
    };
    const KEYED: StreamShape = StreamShape {
        separator_len: Some(1),
        null_len: 4,
    };

    #[test]
    fn line_lengths_follow_the_rendering() {
        assert_eq!(PLAIN.line_len(Some(b"k"), Some(b"value")), 6);
        assert_eq!(PLAIN.line_len(None, None), 5);
        assert_eq!(KEYED.line_len(Some(b"k"), Some(b"value")), 8);
        assert_eq!(KEYED.line_len(None, Some(b"v")), 7);
    }

    #[test]
    fn entries_round_trip_and_a_torn_tail_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t/00000000000000000100.stream");
        let mut index = StreamIndex::create(&path, 100, 500).unwrap();
        let entries = [
            StreamEntry {
                offset: 100,
                file_pos: 0,
                stream_pos: 500,
                shape: PLAIN,
            },
            StreamEntry {
                offset: 140,
                file_pos: 70_000,
                stream_pos: 9_000,
                shape: KEYED,
            },
        ];
        for e in entries {
            index.append(e, true).unwrap();
        }
        let loaded = StreamIndex::load(&path, 100, 80_000).unwrap().unwrap();
        assert_eq!(loaded.entries(), &entries);
        assert_eq!(loaded.stream_start(), 500);
        // A torn last entry is dropped, and cut from the file.
        let len = fs::metadata(&path).unwrap().len();
        OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len - 3)
            .unwrap();
        let torn = StreamIndex::load(&path, 100, 80_000).unwrap().unwrap();
        assert_eq!(torn.entries(), &entries[..1]);
        assert_eq!(
            fs::metadata(&path).unwrap().len(),
            (STREAM_INDEX_HEADER_BYTES + STREAM_INDEX_ENTRY_BYTES) as u64
        );
        // An entry for a batch past the log's end (the log lost its tail) is dropped.
        let mut index = StreamIndex::load(&path, 100, 80_000).unwrap().unwrap();
        index.append(entries[1], false).unwrap();
        let cut = StreamIndex::load(&path, 100, 70_000).unwrap().unwrap();
        assert_eq!(cut.entries(), &entries[..1]);
    }

    #[test]
    fn a_walk_follows_runs_and_breaks() {
        let entries = [
            StreamEntry {
                offset: 0,
                file_pos: 0,
                stream_pos: 10,
                shape: PLAIN,
            },
            StreamEntry {
                offset: 3,
                file_pos: 0,
                stream_pos: 40,
                shape: KEYED,
            },
        ];
        let mut walk = StreamWalker::new(&entries, 0, 10, PLAIN);
        assert_eq!(walk.position(0, None, Some(b"ab")), 10);
        assert_eq!(walk.position(1, None, Some(b"c")), 13);
        assert_eq!(walk.position(3, Some(b"k"), Some(b"v")), 40);
        assert_eq!(walk.position(4, Some(b"k"), None), 44);
        assert_eq!(walk.end(), (51, KEYED));
    }

    #[test]
    fn shape_runs_end_where_the_rendering_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000010.stream");
        let mut index = StreamIndex::create(&path, 10, 0).unwrap();
        let entry = |offset, shape| StreamEntry {
            offset,
            file_pos: offset as u32,
            stream_pos: offset * 100,
            shape,
        };
        assert_eq!(index.shape_run(10, KEYED), (KEYED, u64::MAX));
        for e in [
            entry(12, PLAIN),
            entry(20, PLAIN),
            entry(30, KEYED),
            entry(40, KEYED),
            entry(50, PLAIN),
        ] {
            index.append(e, false).unwrap();
        }
        assert_eq!(index.shape_run(10, KEYED), (KEYED, 12));
        assert_eq!(index.shape_run(12, KEYED), (PLAIN, 30));
        assert_eq!(index.shape_run(29, KEYED), (PLAIN, 30));
        assert_eq!(index.shape_run(30, PLAIN), (KEYED, 50));
        assert_eq!(index.shape_run(45, PLAIN), (KEYED, 50));
        assert_eq!(index.shape_run(99, KEYED), (PLAIN, u64::MAX));
        let loaded = StreamIndex::load(&path, 10, 1000).unwrap().unwrap();
        assert_eq!(loaded.shape_run(45, PLAIN), (KEYED, 50));
        index.truncate_to_position(40).unwrap();
        assert_eq!(index.shape_run(45, PLAIN), (KEYED, u64::MAX));
    }
}
