//! Kafka's transaction index (`TransactionIndex`, `AbortedTxn`): a segment's
//! `<base>.txnindex` lists the transactions aborted by a marker in that segment, each with
//! the offsets it spans and the last stable offset when it was aborted, so a
//! `read_committed` Fetch can tell a consumer which batches to drop without reading the
//! log before them.
//!
//! As in Kafka, the file exists only once a segment records its first aborted transaction
//! (`.txnindex` "(if any)" in the course notes), entries are appended in the order of their
//! markers (so their last offsets increase), and it is renamed and removed with its
//! segment. The entries sit in memory too: aborts are rare, and every read_committed fetch
//! consults them.
//!
//! Entry (34 bytes, big-endian): version i16 (0), producer id i64, first offset i64, last
//! offset i64, last stable offset i64.

use std::fmt;
use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::format::{be_i64, ABORTED_TXN_BYTES, ABORTED_TXN_VERSION};

/// One aborted transaction of a producer in a partition (Kafka's `AbortedTxn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    /// Offset of the transaction's first batch in the partition.
    pub first_offset: u64,
    /// Offset of its ABORT marker.
    pub last_offset: u64,
    /// The partition's last stable offset once the abort was written: the first offset of
    /// the oldest transaction still open then, or the offset after the marker.
    pub last_stable_offset: u64,
}

impl AbortedTxn {
    pub(crate) fn encode(&self) -> [u8; ABORTED_TXN_BYTES] {
        let mut out = [0u8; ABORTED_TXN_BYTES];
        out[..2].copy_from_slice(&ABORTED_TXN_VERSION.to_be_bytes());
        out[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        out[10..18].copy_from_slice(&(self.first_offset as i64).to_be_bytes());
        out[18..26].copy_from_slice(&(self.last_offset as i64).to_be_bytes());
        out[26..34].copy_from_slice(&(self.last_stable_offset as i64).to_be_bytes());
        out
    }

    /// One entry of a file, or why it is not one (Kafka's `CorruptIndexException` text).
    fn decode(bytes: &[u8], path: &Path) -> Result<AbortedTxn, String> {
        let raw = RawAbortedTxn::read(bytes);
        if let Some(reason) = raw.version_refusal(path) {
            return Err(reason);
        }
        let offset = |v: i64| {
            u64::try_from(v).map_err(|_| {
                format!(
                    "Negative offset {v} in transaction index {}",
                    path.display()
                )
            })
        };
        Ok(AbortedTxn {
            producer_id: raw.producer_id,
            first_offset: offset(raw.first_offset)?,
            last_offset: offset(raw.last_offset)?,
            last_stable_offset: offset(raw.last_stable_offset)?,
        })
    }
}

/// An entry's fields as the file holds them, unchecked: what Kafka's `AbortedTxn` reads
/// from its buffer, and what `kafka-dump-log.sh` prints of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RawAbortedTxn {
    /// Kafka's `AbortedTxn.version()`, which reads the field's first byte only, as a
    /// Java (signed) byte.
    pub(crate) version: i16,
    pub(crate) producer_id: i64,
    pub(crate) first_offset: i64,
    pub(crate) last_offset: i64,
    pub(crate) last_stable_offset: i64,
}

impl RawAbortedTxn {
    /// The entry in the first [`ABORTED_TXN_BYTES`] of `bytes`.
    pub(crate) fn read(bytes: &[u8]) -> RawAbortedTxn {
        RawAbortedTxn {
            version: i16::from(bytes[0] as i8),
            producer_id: be_i64(bytes, 2),
            first_offset: be_i64(bytes, 10),
            last_offset: be_i64(bytes, 18),
            last_stable_offset: be_i64(bytes, 26),
        }
    }

    /// Kafka's refusal of the entry as it reads the index of `path` (a `KafkaException`
    /// from its iterator), if it has one: a version above its own.
    pub(crate) fn version_refusal(&self, path: &Path) -> Option<String> {
        (self.version > ABORTED_TXN_VERSION).then(|| {
            format!(
                "Unexpected aborted transaction version {} in transaction index {}, current version is {ABORTED_TXN_VERSION}",
                self.version,
                path.display()
            )
        })
    }
}

/// Why the engine takes a segment's transaction index for corrupt: the byte position of
/// the first entry it refuses, and why (Kafka's texts where Kafka refuses it too).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct CorruptTxnIndex {
    pub(crate) at: usize,
    pub(crate) reason: String,
}

/// The entries of the index file `path` of a segment starting at `base_offset`, from its
/// bytes, as the engine loads them. A torn last entry is left out (Kafka's reader stops
/// short of a whole entry); an entry of an unknown version, or one that ends before the
/// segment starts (Kafka's `sanityCheck`), makes the index corrupt, and so does one whose
/// marker does not follow the one before (Kafka's `append` refuses such an entry; its
/// reader does not look).
pub(crate) fn decode_entries(
    bytes: &[u8],
    path: &Path,
    base_offset: u64,
) -> Result<Vec<AbortedTxn>, CorruptTxnIndex> {
    let mut entries: Vec<AbortedTxn> = Vec::with_capacity(bytes.len() / ABORTED_TXN_BYTES);
    for (i, chunk) in bytes.chunks_exact(ABORTED_TXN_BYTES).enumerate() {
        let corrupt = |reason| CorruptTxnIndex {
            at: i * ABORTED_TXN_BYTES,
            reason,
        };
        let txn = AbortedTxn::decode(chunk, path).map_err(corrupt)?;
        if txn.last_offset < base_offset {
            return Err(corrupt(format!(
                "Last offset of aborted transaction {txn} in index {} is less than start offset {base_offset}",
                path.display()
            )));
        }
        if let Some(prev) = entries.last().filter(|p| p.last_offset >= txn.last_offset) {
            return Err(corrupt(format!(
                "The last offset of appended transactions must increase sequentially, but {} is not greater than current last offset {} of index {}",
                txn.last_offset,
                prev.last_offset,
                path.display()
            )));
        }
        entries.push(txn);
    }
    Ok(entries)
}

impl fmt::Display for AbortedTxn {
    /// Kafka's `AbortedTxn.toString`, which its errors and `kafka-dump-log.sh` print.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "AbortedTxn(version={ABORTED_TXN_VERSION}, producerId={}, firstOffset={}, lastOffset={}, lastStableOffset={})",
            self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset
        )
    }
}

/// What [`TxnIndex::collect`] found in one segment: the aborted transactions overlapping
/// the range, and whether a later segment can add none (Kafka's `TxnIndexSearchResult`).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct TxnSearch {
    pub(crate) aborted: Vec<AbortedTxn>,
    pub(crate) complete: bool,
}

/// A segment's `.txnindex`, present on disk once it has an entry. Owned by its segment's
/// lock; opens the file per append (aborts are rare) and holds no descriptor.
#[derive(Debug)]
pub(crate) struct TxnIndex {
    path: PathBuf,
    entries: Vec<AbortedTxn>,
    /// Entries appended since the last flush.
    dirty: bool,
}

impl TxnIndex {
    /// A segment's index with no entries; no file is made until one is appended.
    pub(crate) fn empty(path: PathBuf) -> TxnIndex {
        TxnIndex {
            path,
            entries: Vec::new(),
            dirty: false,
        }
    }

    /// Reads the index of a segment starting at `base_offset`, if it has one. `Err` holds
    /// why the index is corrupt ([`decode_entries`]): the segment is recovered then, which
    /// rebuilds it from the markers.
    pub(crate) fn load(path: PathBuf, base_offset: u64) -> io::Result<Result<TxnIndex, String>> {
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Ok(TxnIndex::empty(path))),
            Err(e) => return Err(e),
        };
        Ok(match decode_entries(&bytes, &path, base_offset) {
            Ok(entries) => Ok(TxnIndex {
                path,
                entries,
                dirty: false,
            }),
            Err(corrupt) => Err(corrupt.reason),
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The file exists (it has had an entry since it was last reset).
    pub(crate) fn has_file(&self) -> bool {
        !self.entries.is_empty() || self.path.exists()
    }

    pub(crate) fn entries(&self) -> &[AbortedTxn] {
        &self.entries
    }

    /// Kafka's `append`. The markers of a partition come in offset order, so a last offset
    /// that does not increase is a bug of the caller, not a state of the data.
    pub(crate) fn append(&mut self, txn: AbortedTxn) -> io::Result<()> {
        if let Some(last) = self.entries.last() {
            assert!(
                txn.last_offset > last.last_offset,
                "The last offset of appended transactions must increase sequentially, but {} is not greater than current last offset {} of index {}",
                txn.last_offset,
                last.last_offset,
                self.path.display()
            );
        }
        // After the entries held, which end where the file's whole entries end, and over
        // whatever follows them: a torn last entry (a crash mid-append), or the rest of
        // an index that the open found corrupt and recovery rebuilds.
        let end = (self.entries.len() * ABORTED_TXN_BYTES) as u64;
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .open(&self.path)?;
        file.set_len(end)?;
        file.write_all_at(&txn.encode(), end)?;
        self.entries.push(txn);
        self.dirty = true;
        Ok(())
    }

    /// Kafka's `collectAbortedTxns(fetchOffset, upperBoundOffset)`: the transactions that
    /// end at or after `fetch_offset` and start before `upper_bound`; complete once an
    /// entry's last stable offset reaches `upper_bound` (no later segment's abort can
    /// reach back into the range).
    pub(crate) fn collect(&self, fetch_offset: u64, upper_bound: u64) -> TxnSearch {
        let mut search = TxnSearch::default();
        for txn in &self.entries {
            if txn.last_offset >= fetch_offset && txn.first_offset < upper_bound {
                search.aborted.push(*txn);
            }
            if txn.last_stable_offset >= upper_bound {
                search.complete = true;
                break;
            }
        }
        search
    }

    /// Kafka's `truncateTo`: drops the entries whose marker is at or past `offset`.
    pub(crate) fn truncate_to(&mut self, offset: u64) -> io::Result<()> {
        let keep = self.entries.partition_point(|t| t.last_offset < offset);
        if keep == self.entries.len() {
            return Ok(());
        }
        self.entries.truncate(keep);
        let file = OpenOptions::new().write(true).open(&self.path)?;
        file.set_len((keep * ABORTED_TXN_BYTES) as u64)?;
        self.dirty = true;
        Ok(())
    }

    /// Kafka's `reset`, before recovery rebuilds the index from the segment's markers:
    /// no entries, and no file (a segment without aborts has none).
    pub(crate) fn reset(&mut self) -> io::Result<()> {
        self.entries.clear();
        self.dirty = false;
        match fs::remove_file(&self.path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// The file moved with its segment (a suffix change).
    pub(crate) fn renamed(&mut self, path: &Path) {
        self.path = path.to_path_buf();
    }

    /// fsync of the entries appended since the last flush: the recovery point vouches for
    /// a segment's indexes as much as for its records.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        if !self.dirty {
            return Ok(());
        }
        match OpenOptions::new().write(true).open(&self.path) {
            Ok(f) => f.sync_all()?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        self.dirty = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(pid: i64, first: u64, last: u64, lso: u64) -> AbortedTxn {
        AbortedTxn {
            producer_id: pid,
            first_offset: first,
            last_offset: last,
            last_stable_offset: lso,
        }
    }

    #[test]
    fn entries_are_kafkas_34_bytes_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.txnindex");
        let mut index = TxnIndex::empty(path.clone());
        assert!(!index.has_file(), "no file before the first abort");
        index.append(txn(7, 0, 5, 6)).unwrap();
        index.append(txn(8, 3, 9, 10)).unwrap();
        let bytes = fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 68);
        assert_eq!(
            &bytes[..34],
            &[
                0, 0, // version
                0, 0, 0, 0, 0, 0, 0, 7, // producer id
                0, 0, 0, 0, 0, 0, 0, 0, // first offset
                0, 0, 0, 0, 0, 0, 0, 5, // last offset
                0, 0, 0, 0, 0, 0, 0, 6, // last stable offset
            ]
        );
        let loaded = TxnIndex::load(path, 0).unwrap().unwrap();
        assert_eq!(loaded.entries(), index.entries());
    }

    #[test]
    fn a_torn_last_entry_is_left_out_and_bad_entries_make_it_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000010.txnindex");
        let mut bytes = txn(1, 10, 12, 13).encode().to_vec();
        bytes.extend_from_slice(&txn(1, 14, 15, 16).encode()[..20]);
        fs::write(&path, &bytes).unwrap();
        let loaded = TxnIndex::load(path.clone(), 10).unwrap().unwrap();
        assert_eq!(loaded.entries(), &[txn(1, 10, 12, 13)]);

        let reason = TxnIndex::load(path.clone(), 13).unwrap().unwrap_err();
        assert!(
            reason.starts_with("Last offset of aborted transaction AbortedTxn(version=0, producerId=1, firstOffset=10, lastOffset=12, lastStableOffset=13) in index "),
            "{reason}"
        );
        assert!(
            reason.ends_with(" is less than start offset 13"),
            "{reason}"
        );

        let mut wrong_version = txn(1, 10, 12, 13).encode();
        wrong_version[0] = 1;
        fs::write(&path, wrong_version).unwrap();
        let reason = TxnIndex::load(path, 10).unwrap().unwrap_err();
        assert!(
            reason.starts_with("Unexpected aborted transaction version 1 in transaction index "),
            "{reason}"
        );
    }

    #[test]
    fn an_append_writes_over_a_torn_entry_and_the_rest_of_a_corrupt_index() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.txnindex");
        let mut bytes = txn(1, 0, 2, 3).encode().to_vec();
        bytes.extend_from_slice(&[0xab; 20]);
        fs::write(&path, &bytes).unwrap();
        let mut index = TxnIndex::load(path.clone(), 0).unwrap().unwrap();
        index.append(txn(2, 3, 5, 6)).unwrap();
        let reloaded = TxnIndex::load(path.clone(), 0).unwrap().unwrap();
        assert_eq!(reloaded.entries(), &[txn(1, 0, 2, 3), txn(2, 3, 5, 6)]);
        assert_eq!(fs::metadata(&path).unwrap().len(), 68);

        // An index the open refused is held empty while recovery rebuilds it: its first
        // entry again replaces every byte of the old file.
        let mut rebuilt = TxnIndex::empty(path.clone());
        rebuilt.append(txn(2, 3, 5, 6)).unwrap();
        assert_eq!(fs::read(&path).unwrap(), txn(2, 3, 5, 6).encode());
    }

    #[test]
    fn the_version_is_the_first_byte_signed_and_a_refusal_names_its_entry() {
        let path = Path::new("/d/t-0/00000000000000000010.txnindex");
        let mut entry = txn(1, 10, 12, 13).encode();
        // Kafka reads one byte of the version field, as a Java byte: 0xff is -1, not
        // above its version 0; 0x0001 is version 0.
        entry[0] = 0xff;
        assert_eq!(RawAbortedTxn::read(&entry).version, -1);
        entry[..2].copy_from_slice(&[0, 1]);
        assert_eq!(RawAbortedTxn::read(&entry).version, 0);
        let mut bytes = entry.to_vec();
        bytes.extend_from_slice(&txn(1, 10, 11, 13).encode());
        let corrupt = decode_entries(&bytes, path, 10).unwrap_err();
        assert_eq!(
            corrupt,
            CorruptTxnIndex {
                at: 34,
                reason: "The last offset of appended transactions must increase sequentially, \
                         but 11 is not greater than current last offset 12 of index \
                         /d/t-0/00000000000000000010.txnindex"
                    .to_string(),
            }
        );
        bytes[34] = 2;
        assert_eq!(
            decode_entries(&bytes, path, 10).unwrap_err().reason,
            "Unexpected aborted transaction version 2 in transaction index \
             /d/t-0/00000000000000000010.txnindex, current version is 0"
        );
    }

    #[test]
    fn collect_takes_overlapping_transactions_and_stops_at_the_upper_bound() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = TxnIndex::empty(dir.path().join("x.txnindex"));
        index.append(txn(1, 0, 4, 5)).unwrap();
        index.append(txn(2, 2, 8, 9)).unwrap();
        index.append(txn(3, 10, 12, 20)).unwrap();
        let found = index.collect(5, 9);
        assert_eq!(found.aborted, vec![txn(2, 2, 8, 9)]);
        assert!(
            found.complete,
            "an abort whose LSO reaches the bound ends the search"
        );
        let found = index.collect(0, 100);
        assert_eq!(found.aborted.len(), 3);
        assert!(!found.complete, "a later segment may still hold aborts");
        assert_eq!(index.collect(13, 100).aborted, vec![]);
    }

    #[test]
    fn truncate_and_reset_shorten_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.txnindex");
        let mut index = TxnIndex::empty(path.clone());
        index.append(txn(1, 0, 4, 5)).unwrap();
        index.append(txn(2, 5, 8, 9)).unwrap();
        index.truncate_to(8).unwrap();
        assert_eq!(index.entries(), &[txn(1, 0, 4, 5)]);
        assert_eq!(fs::metadata(&path).unwrap().len(), 34);
        index.flush().unwrap();
        index.reset().unwrap();
        assert!(!index.has_file());
        index.reset().unwrap();
    }

    #[test]
    #[should_panic(expected = "must increase sequentially")]
    fn an_entry_out_of_marker_order_is_a_bug() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = TxnIndex::empty(dir.path().join("x.txnindex"));
        index.append(txn(1, 0, 4, 5)).unwrap();
        let _ = index.append(txn(2, 1, 4, 5));
    }
}
