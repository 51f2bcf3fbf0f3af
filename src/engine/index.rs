//! Kafka's sparse, memory-mapped segment indexes.
//!
//! An index file is preallocated to `segment.index.bytes` (rounded down to whole entries)
//! while its segment is active, so appending an entry is a store into the map, and trimmed
//! to its entries when the segment rolls or closes. Entries are sparse: one per
//! `index.interval.bytes` of log data. Lookups find the greatest entry at or below the
//! target. Indexes are never checksummed: they are rebuilt from the log whenever they are
//! missing or recovery scans their segment.
//!
//! `.index` entry (8 bytes): relative offset u32 BE + position of a batch in `.log` u32 BE.
//! `.timeindex` entry (12 bytes): timestamp i64 BE + relative offset u32 BE.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use memmap2::{Advice, MmapMut};

use super::format::{
    be_i64, be_u32, OFFSET_INDEX_ENTRY_BYTES, OFFSET_INDEX_POSITION_AT, TIME_INDEX_ENTRY_BYTES,
    TIME_INDEX_OFFSET_AT,
};
use super::limits::PAGE_BYTES;

/// Bytes of the largest entry (`.timeindex`).
const MAX_ENTRY_BYTES: usize = TIME_INDEX_ENTRY_BYTES;

/// One index file: preallocated and mapped while its segment is active, read with
/// `pread` once sealed. Not thread-safe: owned by its segment's lock.
#[derive(Debug)]
pub(crate) struct IndexFile {
    path: PathBuf,
    /// Open only while the file changes size or gets blocks reserved (the map stays valid
    /// without it), so a segment holds one descriptor (its `.log`), not three, and a mount
    /// of thousands of topics fits the descriptor limit; reopened by path when needed.
    file: Option<File>,
    /// Only the active segment's indexes stay mapped (appends store into the map). A
    /// sealed index is read with `pread` on the rare lookup, so 100,000 sealed segments
    /// need no mappings: Linux allows 65,530 per process by default (vm.max_map_count).
    map: Option<MmapMut>,
    /// Length of the file.
    len: usize,
    entry_bytes: usize,
    entries: usize,
    max_entries: usize,
    /// The last entry, so a sealed index answers `last` (every open and roll asks)
    /// without reading the file.
    last: [u8; MAX_ENTRY_BYTES],
    /// Bytes from the start known to have disk blocks behind them. The preallocated
    /// file is sparse; storing into a hole of the map when the disk is full raises
    /// SIGBUS and kills the daemon, so blocks are reserved before an entry lands there.
    backed: usize,
    /// Entries or length changed since the last flush. Every fsync of a log flushes its
    /// indexes too (the recovery point trusts them), and most fsyncs add no entry, so a
    /// clean index costs nothing.
    dirty: bool,
}

/// Where a lookup reads entries from: the active index's map, or the sealed file.
enum EntrySource<'a> {
    Map(&'a [u8]),
    File(File),
}

impl EntrySource<'_> {
    fn get(&self, i: usize, entry_bytes: usize) -> io::Result<[u8; MAX_ENTRY_BYTES]> {
        let mut e = [0u8; MAX_ENTRY_BYTES];
        let at = i * entry_bytes;
        match self {
            EntrySource::Map(bytes) => {
                e[..entry_bytes].copy_from_slice(&bytes[at..at + entry_bytes])
            }
            EntrySource::File(file) => file.read_exact_at(&mut e[..entry_bytes], at as u64)?,
        }
        Ok(e)
    }
}

impl IndexFile {
    /// Opens or creates the file. `valid_entries` decides how many leading entries of an
    /// existing file are real (the rest is preallocated zeroes). The file is read through
    /// a map that is dropped again: the index starts out sealed.
    fn open(
        path: &Path,
        entry_bytes: usize,
        max_index_bytes: usize,
        valid_entries: impl Fn(&[u8]) -> usize,
    ) -> io::Result<IndexFile> {
        let file = Self::open_file(path)?;
        let len = file.metadata()?.len() as usize;
        let mut index = IndexFile {
            path: path.to_path_buf(),
            file: Some(file),
            map: None,
            len,
            entry_bytes,
            entries: 0,
            max_entries: max_index_bytes / entry_bytes,
            last: [0; MAX_ENTRY_BYTES],
            backed: 0,
            dirty: false,
        };
        let whole = len / entry_bytes * entry_bytes;
        if whole > 0 {
            index.map_file()?;
            let bytes = index.map.as_deref().expect("mapped a non-empty file");
            index.entries = valid_entries(&bytes[..whole]);
            index.remember_last()?;
            index.map = None;
        }
        index.release_handle();
        Ok(index)
    }

    fn open_file(path: &Path) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
    }

    fn file(&mut self) -> io::Result<&File> {
        if self.file.is_none() {
            self.file = Some(Self::open_file(&self.path)?);
        }
        Ok(self.file.as_ref().expect("just opened"))
    }

    fn map_file(&mut self) -> io::Result<()> {
        self.map = None;
        if self.len > 0 {
            let file = self.file()?;
            // SAFETY: kpfs holds the data directory lock, so no other process maps or
            // resizes this file; within kpfs the file is only resized through this struct,
            // which drops the map first (see `set_len`), so the map never outlives bytes
            // of the file and no access can fault.
            let map = unsafe { MmapMut::map_mut(file)? };
            // The file is mostly holes (preallocated to `segment.index.bytes`, 10 MiB by
            // default) and its entries are a few KiB: the kernel's read-around on a fault
            // would zero-fill up to the whole file in the page cache (3 ms a file here, 24
            // files for a topic of 12 partitions). Entries are stored in order and looked
            // up by binary search; neither gains from read-ahead.
            map.advise(Advice::Random)?;
            self.map = Some(map);
            // The map stays valid without the descriptor.
            self.release_handle();
        }
        Ok(())
    }

    fn ensure_mapped(&mut self) -> io::Result<()> {
        if self.map.is_none() {
            self.map_file()?;
        }
        Ok(())
    }

    fn source(&self) -> io::Result<EntrySource<'_>> {
        match &self.map {
            Some(map) => Ok(EntrySource::Map(map)),
            None => Ok(EntrySource::File(File::open(&self.path)?)),
        }
    }

    fn entry(&self, i: usize) -> io::Result<[u8; MAX_ENTRY_BYTES]> {
        assert!(i < self.entries, "index entry {i} of {}", self.entries);
        self.source()?.get(i, self.entry_bytes)
    }

    fn last(&self) -> Option<[u8; MAX_ENTRY_BYTES]> {
        (self.entries > 0).then_some(self.last)
    }

    fn remember_last(&mut self) -> io::Result<()> {
        self.last = match self.entries.checked_sub(1) {
            Some(i) => self.entry(i)?,
            None => [0; MAX_ENTRY_BYTES],
        };
        Ok(())
    }

    /// How many leading entries satisfy `pred`, which must hold for a prefix of them:
    /// a binary search, reading a sealed file once per probe.
    fn count_prefix(&self, pred: impl Fn(&[u8]) -> bool) -> io::Result<usize> {
        if self.entries == 0 {
            return Ok(0);
        }
        let source = self.source()?;
        let (mut lo, mut hi) = (0, self.entries);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if pred(&source.get(mid, self.entry_bytes)?) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }

    #[cfg(any(test, feature = "internals"))]
    /// Every entry, in order (inspection and tests).
    fn all_entries(&self) -> io::Result<Vec<[u8; MAX_ENTRY_BYTES]>> {
        let source = self.source()?;
        (0..self.entries)
            .map(|i| source.get(i, self.entry_bytes))
            .collect()
    }

    /// Resizes the file; the map goes with it (callers that append map it again).
    fn set_len(&mut self, bytes: usize) -> io::Result<()> {
        self.resize(bytes)?;
        self.release_handle();
        Ok(())
    }

    /// [`Self::set_len`], keeping the descriptor for a map made next.
    fn resize(&mut self, bytes: usize) -> io::Result<()> {
        self.dirty = true;
        self.map = None;
        self.backed = self.backed.min(bytes);
        self.file()?.set_len(bytes as u64)?;
        self.len = bytes;
        Ok(())
    }

    fn release_handle(&mut self) {
        self.file = None;
    }

    /// Grows the file to its preallocated size and maps it, so appends are stores. What
    /// follows the entries is cut first, so the rest is zeroes: loading counts only a
    /// valid prefix, and bytes after it (a torn or hand-made tail, the entries of a log
    /// that recovery cut) would otherwise stay for dump-log to print and appends to land
    /// among (Kafka's recovery: `trimToValidSize`).
    fn preallocate(&mut self) -> io::Result<()> {
        // One descriptor for the resizes and the map: every partition's active segment
        // does this at mount.
        let used = self.entries * self.entry_bytes;
        if self.len > used {
            self.resize(used)?;
        }
        let want = self.max_entries * self.entry_bytes;
        if self.len < want {
            self.resize(want)?;
        }
        let mapped = self.ensure_mapped();
        self.release_handle();
        mapped
    }

    /// Shrinks the file to its entries and unmaps it (on roll and close).
    fn trim(&mut self) -> io::Result<()> {
        let want = self.entries * self.entry_bytes;
        if self.len != want {
            self.set_len(want)?;
        }
        self.map = None;
        Ok(())
    }

    fn is_full(&self) -> bool {
        self.entries >= self.max_entries
    }

    fn push(&mut self, entry: &[u8]) -> io::Result<()> {
        debug_assert_eq!(entry.len(), self.entry_bytes);
        let at = self.entries * self.entry_bytes;
        if at + self.entry_bytes > self.len {
            // Not preallocated (a sealed segment being rebuilt): grow one entry at a time.
            self.set_len(at + self.entry_bytes)?;
        }
        self.ensure_mapped()?;
        self.reserve_blocks(at + self.entry_bytes)?;
        let map = self.map.as_mut().expect("mapped after growing");
        map[at..at + self.entry_bytes].copy_from_slice(entry);
        self.entries += 1;
        self.last[..self.entry_bytes].copy_from_slice(entry);
        self.dirty = true;
        Ok(())
    }

    /// Makes sure bytes up to `end` have disk blocks, a page at a time, so a full disk
    /// shows up as ENOSPC here instead of SIGBUS on the store into the map.
    fn reserve_blocks(&mut self, end: usize) -> io::Result<()> {
        if end <= self.backed {
            return Ok(());
        }
        let from = self.backed / PAGE_BYTES * PAGE_BYTES;
        let to = end
            .div_ceil(PAGE_BYTES)
            .saturating_mul(PAGE_BYTES)
            .min(self.len);
        let (Ok(offset), Ok(len)) = (
            libc::off_t::try_from(from),
            libc::off_t::try_from(to.saturating_sub(from)),
        ) else {
            return Err(io::Error::other("index file offset out of range"));
        };
        let fd = self.file()?.as_raw_fd();
        // SAFETY: posix_fallocate only reads its integer arguments and acts on `fd`, which
        // `self.file` owns and keeps open for the duration of the call.
        let rc = unsafe { libc::posix_fallocate(fd, offset, len) };
        self.release_handle();
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        self.backed = to;
        Ok(())
    }

    /// Keeps the first `entries` entries; the rest become zeroes, which a later open
    /// does not count.
    fn truncate_entries(&mut self, entries: usize) -> io::Result<()> {
        if entries < self.entries {
            let from = entries * self.entry_bytes;
            let to = self.entries * self.entry_bytes;
            self.ensure_mapped()?;
            if let Some(map) = self.map.as_mut() {
                map[from..to].fill(0);
            }
            self.entries = entries;
            self.dirty = true;
            self.remember_last()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.dirty {
            return Ok(());
        }
        if let Some(map) = &self.map {
            map.flush()?;
        }
        // The length may have changed (preallocated or trimmed): fsync the file itself.
        self.file()?.sync_all()?;
        self.release_handle();
        self.dirty = false;
        Ok(())
    }
}

/// The file lifecycle both indexes share: preallocate while active, trim on roll,
/// follow renames, flush.
pub(crate) trait IndexLifecycle {
    fn file(&self) -> &IndexFile;
    fn file_mut(&mut self) -> &mut IndexFile;

    fn clear(&mut self) -> io::Result<()> {
        self.file_mut().truncate_entries(0)
    }

    fn preallocate(&mut self) -> io::Result<()> {
        self.file_mut().preallocate()
    }

    /// Shrinks the file to its entries and lets go of its map and descriptor (on roll).
    fn trim(&mut self) -> io::Result<()> {
        // No fsync here: the flush that moves the recovery point past this segment syncs
        // it; until then recovery rebuilds it from the log.
        let f = self.file_mut();
        f.trim()?;
        f.release_handle();
        Ok(())
    }

    /// The file was renamed (suffix change); later reopens use the new name.
    fn renamed(&mut self, path: &Path) {
        self.file_mut().path = path.to_path_buf();
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file_mut().flush()
    }

    #[cfg(test)]
    fn file_len(&self) -> usize {
        self.file().len
    }

    #[cfg(test)]
    fn is_mapped(&self) -> bool {
        self.file().map.is_some()
    }
}

/// An index's entries, decoded.
pub(crate) trait IndexEntries: IndexLifecycle {
    type Entry;

    fn decode(&self, raw: &[u8]) -> Self::Entry;

    fn entry(&self, i: usize) -> io::Result<Self::Entry> {
        Ok(self.decode(&self.file().entry(i)?))
    }

    /// Known without reading the file.
    fn last(&self) -> Option<Self::Entry> {
        self.file().last().map(|e| self.decode(&e))
    }

    #[cfg(any(test, feature = "internals"))]
    fn all(&self) -> io::Result<Vec<Self::Entry>> {
        Ok(self
            .file()
            .all_entries()?
            .iter()
            .map(|e| self.decode(e))
            .collect())
    }
}

impl IndexEntries for OffsetIndex {
    /// (offset, position in `.log`)
    type Entry = (u64, u32);

    fn decode(&self, e: &[u8]) -> (u64, u32) {
        (
            self.base_offset + u64::from(be_u32(e, 0)),
            be_u32(e, OFFSET_INDEX_POSITION_AT),
        )
    }
}

impl IndexEntries for TimeIndex {
    /// (timestamp, offset)
    type Entry = (i64, u64);

    fn decode(&self, e: &[u8]) -> (i64, u64) {
        let ts = be_i64(e, 0);
        (
            ts,
            self.base_offset + u64::from(be_u32(e, TIME_INDEX_OFFSET_AT)),
        )
    }
}

impl IndexLifecycle for OffsetIndex {
    fn file(&self) -> &IndexFile {
        &self.inner
    }
    fn file_mut(&mut self) -> &mut IndexFile {
        &mut self.inner
    }
}

impl IndexLifecycle for TimeIndex {
    fn file(&self) -> &IndexFile {
        &self.inner
    }
    fn file_mut(&mut self) -> &mut IndexFile {
        &mut self.inner
    }
}

/// `.index`: relative offset -> batch position.
#[derive(Debug)]
pub(crate) struct OffsetIndex {
    base_offset: u64,
    inner: IndexFile,
}

impl OffsetIndex {
    pub(crate) fn open(path: &Path, base_offset: u64, max_index_bytes: usize) -> io::Result<Self> {
        // A real entry never has position 0 (the first batch of a segment gets no entry),
        // and offsets and positions strictly increase (appends assert both); preallocated
        // zeroes or a damaged entry end the valid prefix.
        let valid = |bytes: &[u8]| {
            let mut n = 0;
            let mut last: Option<(u32, u32)> = None;
            for e in bytes.chunks_exact(OFFSET_INDEX_ENTRY_BYTES) {
                let (rel, pos) = (be_u32(e, 0), be_u32(e, OFFSET_INDEX_POSITION_AT));
                if pos == 0 || last.is_some_and(|(l, p)| rel <= l || pos <= p) {
                    break;
                }
                last = Some((rel, pos));
                n += 1;
            }
            n
        };
        Ok(OffsetIndex {
            base_offset,
            inner: IndexFile::open(path, OFFSET_INDEX_ENTRY_BYTES, max_index_bytes, valid)?,
        })
    }

    pub(crate) fn entries(&self) -> usize {
        self.inner.entries
    }

    pub(crate) fn is_full(&self) -> bool {
        self.inner.is_full()
    }

    /// Appends (offset, position). Offsets must strictly increase.
    pub(crate) fn append(&mut self, offset: u64, position: u32) -> io::Result<()> {
        assert!(offset >= self.base_offset, "index offset below base");
        if let Some((last, last_pos)) = self.last() {
            assert!(offset > last, "offset index entries must strictly increase");
            assert!(
                position > last_pos,
                "offset index positions must strictly increase"
            );
        }
        let rel = u32::try_from(offset - self.base_offset).expect("relative offset fits u32");
        let mut e = [0u8; OFFSET_INDEX_ENTRY_BYTES];
        e[..OFFSET_INDEX_POSITION_AT].copy_from_slice(&rel.to_be_bytes());
        e[OFFSET_INDEX_POSITION_AT..].copy_from_slice(&position.to_be_bytes());
        self.inner.push(&e)
    }

    /// Greatest entry whose offset is <= `target`, else (base offset, 0).
    pub(crate) fn lookup(&self, target: u64) -> io::Result<(u64, u32)> {
        let n = self.inner.count_prefix(|e| self.decode(e).0 <= target)?;
        match n.checked_sub(1) {
            Some(i) => self.entry(i),
            None => Ok((self.base_offset, 0)),
        }
    }

    /// Kafka's `OffsetIndex.fetchUpperBoundOffset`: the first entry whose position is at
    /// or past `position`, if any.
    pub(crate) fn first_at_or_past_position(
        &self,
        position: u64,
    ) -> io::Result<Option<(u64, u32)>> {
        let before = self
            .inner
            .count_prefix(|e| u64::from(be_u32(e, OFFSET_INDEX_POSITION_AT)) < position)?;
        if before < self.inner.entries {
            self.entry(before).map(Some)
        } else {
            Ok(None)
        }
    }

    /// Drops entries pointing at or past `position` (truncation of the log).
    pub(crate) fn truncate_to_position(&mut self, position: u32) -> io::Result<()> {
        let keep = self
            .inner
            .count_prefix(|e| be_u32(e, OFFSET_INDEX_POSITION_AT) < position)?;
        self.inner.truncate_entries(keep)
    }
}

/// `.timeindex`: timestamp -> relative offset. Entries only for increasing timestamps.
#[derive(Debug)]
pub(crate) struct TimeIndex {
    base_offset: u64,
    inner: IndexFile,
}

impl TimeIndex {
    pub(crate) fn open(path: &Path, base_offset: u64, max_index_bytes: usize) -> io::Result<Self> {
        let valid = |bytes: &[u8]| {
            let mut n = 0;
            let mut last: Option<(i64, u32)> = None;
            for e in bytes.chunks_exact(TIME_INDEX_ENTRY_BYTES) {
                let ts = be_i64(e, 0);
                let rel = be_u32(e, TIME_INDEX_OFFSET_AT);
                let zero = ts == 0 && rel == 0;
                if zero || last.is_some_and(|(lt, lr)| ts <= lt || rel < lr) {
                    break;
                }
                last = Some((ts, rel));
                n += 1;
            }
            n
        };
        Ok(TimeIndex {
            base_offset,
            inner: IndexFile::open(path, TIME_INDEX_ENTRY_BYTES, max_index_bytes, valid)?,
        })
    }

    pub(crate) fn entries(&self) -> usize {
        self.inner.entries
    }

    /// Kafka keeps one slot free for the entry written when the segment becomes inactive.
    pub(crate) fn is_full(&self) -> bool {
        self.inner.entries + 1 >= self.inner.max_entries
    }

    /// Appends unless `timestamp` is not greater than the last entry's (as Kafka).
    pub(crate) fn maybe_append(&mut self, timestamp: i64, offset: u64) -> io::Result<()> {
        if self.last().is_some_and(|(ts, _)| timestamp <= ts) {
            return Ok(());
        }
        let rel = u32::try_from(offset - self.base_offset).expect("relative offset fits u32");
        let mut e = [0u8; TIME_INDEX_ENTRY_BYTES];
        e[..TIME_INDEX_OFFSET_AT].copy_from_slice(&timestamp.to_be_bytes());
        e[TIME_INDEX_OFFSET_AT..].copy_from_slice(&rel.to_be_bytes());
        self.inner.push(&e)
    }

    /// Kafka's `TimeIndex.lookup`: the greatest entry whose timestamp is at or below
    /// `target`, else (-1, base offset).
    pub(crate) fn lookup(&self, target: i64) -> io::Result<(i64, u64)> {
        let n = self.inner.count_prefix(|e| self.decode(e).0 <= target)?;
        match n.checked_sub(1) {
            Some(i) => self.entry(i),
            None => Ok((-1, self.base_offset)),
        }
    }

    /// Drops entries for offsets at or past `offset`.
    pub(crate) fn truncate_to_offset(&mut self, offset: u64) -> io::Result<()> {
        let keep = self.inner.count_prefix(|e| self.decode(e).1 < offset)?;
        self.inner.truncate_entries(keep)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_index_lookup_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000100.index");
        let mut idx = OffsetIndex::open(&path, 100, 80).unwrap();
        assert_eq!(idx.lookup(150).unwrap(), (100, 0));
        idx.preallocate().unwrap();
        assert_eq!(idx.file_len(), 80);
        assert!(idx.is_mapped(), "an active index appends into its map");
        idx.append(104, 4100).unwrap();
        idx.append(110, 8300).unwrap();
        let lookups =
            |idx: &OffsetIndex| [103, 104, 109, 1000].map(|target| idx.lookup(target).unwrap());
        let expected = [(100, 0), (104, 4100), (104, 4100), (110, 8300)];
        assert_eq!(lookups(&idx), expected);
        drop(idx);
        // Preallocated zeroes after the entries are not mistaken for entries.
        let mut idx = OffsetIndex::open(&path, 100, 80).unwrap();
        assert_eq!(idx.entries(), 2);
        assert_eq!(idx.last(), Some((110, 8300)));
        idx.trim().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 16);
        // Sealed: no map, the same answers read from the file.
        assert!(!idx.is_mapped());
        assert_eq!(lookups(&idx), expected);
        assert_eq!(idx.all().unwrap(), vec![(104, 4100), (110, 8300)]);
        idx.truncate_to_position(8300).unwrap();
        assert_eq!(idx.entries(), 1);
        assert_eq!(idx.last(), Some((104, 4100)));
        assert_eq!(idx.lookup(1000).unwrap(), (104, 4100));
    }

    #[test]
    fn preallocating_cuts_what_follows_the_entries() {
        // Loading stops at an entry out of order; it and what follows are not the
        // index's, in a trimmed file (a sealed segment's, or after a clean close) as in
        // a preallocated one (after a crash).
        for trimmed in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("00000000000000000000.index");
            let mut idx = OffsetIndex::open(&path, 0, 80).unwrap();
            idx.preallocate().unwrap();
            idx.append(3, 100).unwrap();
            idx.append(5, 200).unwrap();
            if trimmed {
                idx.trim().unwrap();
            }
            drop(idx);
            let stray = [0, 0, 0, 9, 0, 0, 0, 150, 0, 0, 0, 10, 0, 0, 1, 0];
            File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .write_all_at(&stray, 16)
                .unwrap();
            let mut idx = OffsetIndex::open(&path, 0, 80).unwrap();
            assert_eq!(idx.entries(), 2);
            idx.preallocate().unwrap();
            let bytes = std::fs::read(&path).unwrap();
            assert_eq!(bytes.len(), 80);
            assert!(bytes[16..].iter().all(|&b| b == 0), "trimmed={trimmed}");
            idx.append(9, 300).unwrap();
            drop(idx);
            let idx = OffsetIndex::open(&path, 0, 80).unwrap();
            assert_eq!(idx.all().unwrap(), [(3, 100), (5, 200), (9, 300)]);
        }
    }

    #[test]
    fn time_index_only_grows_in_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.timeindex");
        let mut idx = TimeIndex::open(&path, 0, 36).unwrap();
        idx.preallocate().unwrap();
        idx.maybe_append(1000, 3).unwrap();
        idx.maybe_append(999, 5).unwrap();
        idx.maybe_append(1000, 6).unwrap();
        assert_eq!(idx.entries(), 1);
        idx.maybe_append(1001, 7).unwrap();
        assert_eq!(idx.last(), Some((1001, 7)));
        assert!(idx.is_full(), "3 slots, one reserved");
        drop(idx);
        let idx = TimeIndex::open(&path, 0, 36).unwrap();
        assert_eq!(idx.entries(), 2);
    }
}
