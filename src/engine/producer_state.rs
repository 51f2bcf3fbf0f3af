//! Kafka's producer state (`ProducerStateManager`, `ProducerStateEntry`,
//! `ProducerAppendInfo`): per idempotent producer of a partition, its epoch and the
//! metadata of its last five batches, which decide whether a batch is a retry of one
//! already appended (answered with its offsets, not appended again), in sequence, or
//! refused (an older epoch, a gap in sequences); and the `<offset>.snapshot` files that
//! keep it, so a restart reads the latest one and replays only the batches after it.
//!
//! The snapshot files follow Kafka's lifecycle, which `ls segments/` shows and the
//! seed's demos count:
//! - a roll writes one at the new segment's base offset (`UnifiedLog.roll`), not synced
//!   there (`takeSnapshot(false)`) but by the flush of the rolled segments;
//! - a clean close writes one at the log end offset (`UnifiedLog.close`);
//! - only at an offset past the last snapshot (`takeSnapshot`: "If not a new offset, then
//!   it is not worth taking another snapshot"), so a new log's segment 0 has none;
//! - retention and the cleaner rename a removed segment's snapshot `.deleted` with it, and
//!   it goes with its files after `file.delete.delay.ms` (`deleteProducerSnapshots`);
//! - opening a log removes stray snapshots and those outside the log, reads the latest
//!   (a corrupt one is removed and the next tried), the log replays the batches after it
//!   and a snapshot is written at the log end ([`ProducerStateManager::load`]:
//!   `removeStraySnapshots`, `rebuildProducerState`).
//!
//! Transactions (Kafka's `ongoingTxns`): a producer's first transactional batch opens a
//! transaction at its offset, which stays open until the producer's COMMIT or ABORT
//! marker; the oldest open one is the partition's first unstable offset, which bounds
//! what `read_committed` readers see (the last stable offset). An open transaction is
//! kept in snapshots (`CurrentTxnFirstOffset`) and keeps its producer from expiring.
//!
//! The byte layout is Kafka's `ProducerSnapshot` message, version 1 (docs/FORMAT.md).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::error::{EngineError, Result};
use super::files::{io_at, list_names, remove_file};
use super::format::{
    parse_segment_file_name, segment_file_name, sequence_before, BatchHeader, EndTxnMarker,
    DELETED_SUFFIX, NO_PRODUCER_EPOCH, NO_SEQUENCE, SNAPSHOT_CRC_AT, SNAPSHOT_ENTRIES_AT,
    SNAPSHOT_ENTRY_BYTES, SNAPSHOT_SUFFIX, SNAPSHOT_VERSION,
};
use super::txn_index::AbortedTxn;

/// One producer's state (Kafka's `ProducerSnapshot.ProducerEntry`, from its
/// `ProducerStateEntry`); -1 where Kafka writes -1 for "none".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerStateEntry {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub last_sequence: i32,
    pub last_offset: i64,
    pub offset_delta: i32,
    /// The last batch's max timestamp.
    pub timestamp: i64,
    pub coordinator_epoch: i32,
    /// First offset of the producer's open transaction, -1 without one.
    pub current_txn_first_offset: i64,
}

/// Why a snapshot file cannot be read, in Kafka's words (`CorruptSnapshotException`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CorruptSnapshot(String);

impl fmt::Display for CorruptSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The bytes of a snapshot holding `entries` (Kafka's `ProducerStateManager.writeSnapshot`).
pub fn encode_snapshot(entries: &[ProducerStateEntry]) -> Vec<u8> {
    let mut b = Vec::with_capacity(SNAPSHOT_ENTRIES_AT + 4 + entries.len() * SNAPSHOT_ENTRY_BYTES);
    b.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
    b.extend_from_slice(&[0; 4]); // the CRC, filled in below
    let count = i32::try_from(entries.len()).expect("fewer producers than i32::MAX");
    b.extend_from_slice(&count.to_be_bytes());
    for e in entries {
        b.extend_from_slice(&e.producer_id.to_be_bytes());
        b.extend_from_slice(&e.producer_epoch.to_be_bytes());
        b.extend_from_slice(&e.last_sequence.to_be_bytes());
        b.extend_from_slice(&e.last_offset.to_be_bytes());
        b.extend_from_slice(&e.offset_delta.to_be_bytes());
        b.extend_from_slice(&e.timestamp.to_be_bytes());
        b.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
        b.extend_from_slice(&e.current_txn_first_offset.to_be_bytes());
    }
    let crc = crc_fast::crc32_iscsi(&b[SNAPSHOT_ENTRIES_AT..]);
    b[SNAPSHOT_CRC_AT..SNAPSHOT_ENTRIES_AT].copy_from_slice(&crc.to_be_bytes());
    b
}

/// The entries of a snapshot, checked as Kafka's `readSnapshot` checks them: the version,
/// the message's shape, then the CRC32C of everything after it.
pub fn decode_snapshot(
    bytes: &[u8],
) -> std::result::Result<Vec<ProducerStateEntry>, CorruptSnapshot> {
    let mut r = Reader { bytes, at: 0 };
    let version = r
        .take::<2>()
        .map(i16::from_be_bytes)
        .ok_or_else(|| schema_error("the file ends before its version"))?;
    if version != SNAPSHOT_VERSION {
        return Err(CorruptSnapshot(format!(
            "Snapshot contained an unknown file version {version}"
        )));
    }
    let stored_crc = r
        .take::<4>()
        .map(u32::from_be_bytes)
        .ok_or_else(|| schema_error("the file ends before its CRC"))?;
    let count = r
        .take::<4>()
        .map(i32::from_be_bytes)
        .ok_or_else(|| schema_error("the file ends before its entry count"))?;
    if count < 0 {
        return Err(schema_error(
            "non-nullable field producerEntries was serialized as null",
        ));
    }
    let remaining = bytes.len() - r.at;
    if count as usize > remaining {
        return Err(schema_error(&format!(
            "Tried to allocate a collection of size {count}, but there are only {remaining} bytes remaining."
        )));
    }
    let mut entries = Vec::with_capacity(count as usize);
    for _ in 0..count {
        entries.push(
            r.entry()
                .ok_or_else(|| schema_error("the file ends inside an entry"))?,
        );
    }
    let computed = crc_fast::crc32_iscsi(&bytes[SNAPSHOT_ENTRIES_AT..]);
    if computed != stored_crc {
        return Err(CorruptSnapshot(format!(
            "Snapshot is corrupt (CRC is no longer valid). Stored crc: {stored_crc}. Computed crc: {computed}"
        )));
    }
    Ok(entries)
}

fn schema_error(reason: &str) -> CorruptSnapshot {
    CorruptSnapshot(format!("Snapshot failed schema validation: {reason}"))
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let field = self.bytes.get(self.at..self.at + N)?.try_into().ok()?;
        self.at += N;
        Some(field)
    }

    fn entry(&mut self) -> Option<ProducerStateEntry> {
        Some(ProducerStateEntry {
            producer_id: i64::from_be_bytes(self.take()?),
            producer_epoch: i16::from_be_bytes(self.take()?),
            last_sequence: i32::from_be_bytes(self.take()?),
            last_offset: i64::from_be_bytes(self.take()?),
            offset_delta: i32::from_be_bytes(self.take()?),
            timestamp: i64::from_be_bytes(self.take()?),
            coordinator_epoch: i32::from_be_bytes(self.take()?),
            current_txn_first_offset: i64::from_be_bytes(self.take()?),
        })
    }
}

/// Kafka's `TransactionVersion` for a data batch, whose checks do not depend on it.
const TV_UNKNOWN: i16 = -1;

/// Kafka 4.3's `checkProducerEpoch` refusal of a batch or marker at `offset` whose epoch
/// is behind the producer's (`<` its epoch, or `<=` under transaction version 2).
fn older_epoch(
    pid: i64,
    (offset, partition): (u64, &str),
    epoch: i16,
    current: i16,
    transaction_version: i16,
) -> EngineError {
    let relation = if transaction_version >= 2 { "<=" } else { "<" };
    EngineError::InvalidProducerEpoch {
        message: format!(
            "Epoch of producer {pid} at offset {offset} in {partition} is {epoch}, which is {relation} the last seen epoch {current} (TV{transaction_version})"
        ),
    }
}

/// Who appends a produced batch (Kafka's `AppendOrigin`, with its verification guard).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ProducedBy {
    /// A coordinator writes its own records (no duplicate or sequence checks).
    pub(crate) coordinator: bool,
    /// The transaction coordinator vouched that this partition is in the transaction of
    /// the batch's producer, which a transactional batch that opens a transaction here
    /// needs.
    pub(crate) txn_verified: bool,
}

/// Where a producer's end-transaction marker goes: its producer, the epoch it carries,
/// its offset and timestamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TxnMarkerAt {
    pub(crate) producer_id: i64,
    pub(crate) epoch: i16,
    pub(crate) offset: u64,
    pub(crate) timestamp: i64,
}

/// Kafka's `ProducerStateEntry.NUM_BATCHES_TO_RETAIN`: how many of a producer's last
/// batches a retry is recognised among (a producer has at most five in flight).
pub(crate) const BATCHES_TO_RETAIN: usize = 5;

/// One appended batch of a producer (Kafka's `BatchMetadata`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BatchMetadata {
    pub(crate) last_seq: i32,
    pub(crate) last_offset: i64,
    pub(crate) offset_delta: i32,
    /// The batch's max timestamp (the append time under LogAppendTime).
    pub(crate) timestamp: i64,
}

impl BatchMetadata {
    pub(crate) fn first_seq(&self) -> i32 {
        sequence_before(self.last_seq, self.offset_delta)
    }

    pub(crate) fn first_offset(&self) -> i64 {
        self.last_offset - i64::from(self.offset_delta)
    }
}

/// One producer's state in a partition (Kafka's `ProducerStateEntry`).
#[derive(Clone, Debug, PartialEq, Eq)]
struct ProducerEntry {
    epoch: i16,
    coordinator_epoch: i32,
    last_timestamp: i64,
    /// The last [`BATCHES_TO_RETAIN`] batches, oldest first.
    batches: VecDeque<BatchMetadata>,
    /// First offset of the producer's open transaction.
    current_txn_first_offset: Option<u64>,
}

impl ProducerEntry {
    fn empty() -> ProducerEntry {
        ProducerEntry {
            epoch: NO_PRODUCER_EPOCH,
            coordinator_epoch: -1,
            last_timestamp: -1,
            batches: VecDeque::new(),
            current_txn_first_offset: None,
        }
    }

    fn last_seq(&self) -> i32 {
        self.batches.back().map_or(NO_SEQUENCE, |b| b.last_seq)
    }

    /// Kafka's `addBatch`: a new epoch forgets the old epoch's batches.
    fn add_batch(&mut self, epoch: i16, batch: BatchMetadata) {
        self.maybe_update_epoch(epoch);
        if self.batches.len() == BATCHES_TO_RETAIN {
            self.batches.pop_front();
        }
        self.batches.push_back(batch);
        self.last_timestamp = batch.timestamp;
    }

    /// Kafka's `maybeUpdateProducerEpoch`.
    fn maybe_update_epoch(&mut self, epoch: i16) {
        if self.epoch != epoch {
            self.batches.clear();
            self.epoch = epoch;
        }
    }

    fn to_snapshot_entry(&self, producer_id: i64) -> ProducerStateEntry {
        let last = self.batches.back();
        ProducerStateEntry {
            producer_id,
            producer_epoch: self.epoch,
            last_sequence: self.last_seq(),
            last_offset: last.map_or(-1, |b| b.last_offset),
            offset_delta: last.map_or(0, |b| b.offset_delta),
            timestamp: self.last_timestamp,
            coordinator_epoch: self.coordinator_epoch,
            current_txn_first_offset: self.current_txn_first_offset.map_or(-1, |o| o as i64),
        }
    }

    /// Kafka's `readSnapshot`: the entry's last batch, when it names one.
    fn from_snapshot_entry(e: &ProducerStateEntry) -> ProducerEntry {
        let mut batches = VecDeque::new();
        if e.last_offset >= 0 {
            batches.push_back(BatchMetadata {
                last_seq: e.last_sequence,
                last_offset: e.last_offset,
                offset_delta: e.offset_delta,
                timestamp: e.timestamp,
            });
        }
        ProducerEntry {
            epoch: e.producer_epoch,
            coordinator_epoch: e.coordinator_epoch,
            last_timestamp: e.timestamp,
            batches,
            current_txn_first_offset: u64::try_from(e.current_txn_first_offset).ok(),
        }
    }
}

/// A produced batch's producer fields, as the producer-state checks read them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ProducerBatch {
    pub(crate) producer_id: i64,
    pub(crate) epoch: i16,
    pub(crate) first_seq: i32,
    pub(crate) last_seq: i32,
    pub(crate) transactional: bool,
}

impl ProducerBatch {
    /// The producer fields of a batch an idempotent producer wrote (Kafka's
    /// `hasProducerId`: a producer id of 0 or more).
    pub(crate) fn of(header: &BatchHeader) -> Option<ProducerBatch> {
        (header.producer_id >= 0).then(|| ProducerBatch {
            producer_id: header.producer_id,
            epoch: header.producer_epoch,
            first_seq: header.base_sequence,
            last_seq: header.last_sequence(),
            transactional: header.is_transactional(),
        })
    }
}

/// Kafka's `ProducerAppendInfo.inSequence`.
fn in_sequence(last_seq: i32, next_seq: i32) -> bool {
    i64::from(next_seq) == i64::from(last_seq) + 1 || (next_seq == 0 && last_seq == i32::MAX)
}

/// The path of the snapshot at `offset` in `dir` (Kafka's `LogFileUtils.producerSnapshotFile`).
pub(crate) fn snapshot_path(dir: &Path, offset: u64) -> PathBuf {
    dir.join(segment_file_name(offset, SNAPSHOT_SUFFIX))
}

/// A partition's producers and its snapshot files, as Kafka's `ProducerStateManager`
/// tracks them. (`Default`: the placeholder a log holds until [`load`](Self::load)
/// replaces it while the log opens.)
#[derive(Debug, Default)]
pub(crate) struct ProducerStateManager {
    dir: PathBuf,
    /// Producer id -> its state (Kafka's `producers`).
    producers: BTreeMap<i64, ProducerEntry>,
    /// First offset -> producer id of each open transaction (Kafka's `ongoingTxns`).
    ongoing_txns: BTreeMap<u64, i64>,
    /// Kafka's `lastMapOffset`: the producer state reflects the log below it.
    map_end_offset: u64,
    /// Offsets of the snapshot files in the directory (Kafka's `snapshots`).
    offsets: BTreeSet<u64>,
    /// Kafka's `lastSnapOffset`: a snapshot is taken only past it.
    last_snap_offset: u64,
    /// Snapshots written at a roll, synced by the next flush of the rolled segments.
    unsynced: Vec<u64>,
    /// Where a transaction opens whose first batch is being appended: from before the
    /// batch is in its segment until [`Self::record_batch`] opens the transaction. The
    /// log end covers the batch as soon as it is in the segment, and a `read_committed`
    /// reader must not see it there as stable (see [`Self::begin_append`]).
    opening_txn: Option<u64>,
}

impl ProducerStateManager {
    /// Row 13 of the recovery case table, after the segments are loaded: removes stray
    /// snapshots (Kafka's `removeStraySnapshots`), then does what Kafka's
    /// `rebuildProducerState` does: after a clean shutdown with no snapshot at all (a data
    /// directory from before snapshots), writes them at the last two segments' bases and
    /// the log end; otherwise removes those past the log end or at or below the log start
    /// (`truncateAndReload`), reads the latest (a corrupt one is removed and the one
    /// before tried; producers idle past `expiry` are left out), has `replay` bring the
    /// state from there to the log end (the log's batches after the snapshot), and writes
    /// one at the log end. Returns the names it removed.
    ///
    /// `txn_index_from`: recovery cut a transaction index from that offset on, and the
    /// replay must pass its markers again, so it starts from the latest snapshot at or
    /// below it (as Kafka's `recoverSegment` rebuilds the producer state up to the
    /// recovered segment); the replay writes the later ones again.
    pub(crate) fn load(
        dir: &Path,
        segment_bases: &[u64],
        (log_start, log_end): (u64, u64),
        (clean_shutdown, txn_index_from): (bool, Option<u64>),
        expiry: Expiry,
        replay: impl FnOnce(&mut ProducerStateManager) -> Result<()>,
    ) -> Result<(ProducerStateManager, Vec<String>)> {
        let mut removed = Vec::new();
        let mut state = ProducerStateManager {
            dir: dir.to_path_buf(),
            offsets: list_snapshots(dir)?,
            ..ProducerStateManager::default()
        };
        state.remove_strays(segment_bases, &mut removed)?;
        if clean_shutdown && state.offsets.is_empty() {
            let n = segment_bases.len();
            let last_two = segment_bases[n.saturating_sub(2)..].iter().copied();
            for offset in last_two.chain([log_end]) {
                state.take(offset, true)?;
            }
            return Ok((state, removed));
        }
        let out_of_range: Vec<u64> = state
            .offsets
            .iter()
            .copied()
            .filter(|&o| o > log_end || o <= log_start)
            .collect();
        for offset in out_of_range {
            state.remove(offset, &mut removed)?;
        }
        state.read_latest(
            (log_start, txn_index_from.unwrap_or(u64::MAX)),
            expiry,
            &mut removed,
        )?;
        replay(&mut state)?;
        state.take(log_end, true)?;
        Ok((state, removed))
    }

    /// Kafka's `removeStraySnapshots`: a snapshot whose offset is no segment's base goes,
    /// except the largest such one when it is above every base (written at a clean
    /// close, at the log end).
    fn remove_strays(&mut self, bases: &[u64], removed: &mut Vec<String>) -> Result<()> {
        let strays: Vec<u64> = self
            .offsets
            .iter()
            .copied()
            .filter(|o| bases.binary_search(o).is_err())
            .collect();
        let Some((&largest, older)) = strays.split_last() else {
            return Ok(());
        };
        for &offset in older {
            self.remove(offset, removed)?;
        }
        if bases.last().is_some_and(|&max_base| largest < max_base) {
            self.remove(largest, removed)?;
        }
        Ok(())
    }

    /// Kafka's `loadFromSnapshot`: the producers of the latest snapshot that decodes
    /// (corrupt ones are removed on the way), without those expired; without one, the
    /// state is empty as of the log start.
    fn read_latest(
        &mut self,
        (log_start, at_most): (u64, u64),
        expiry: Expiry,
        removed: &mut Vec<String>,
    ) -> Result<()> {
        while let Some(&offset) = self.offsets.range(..=at_most).next_back() {
            let path = snapshot_path(&self.dir, offset);
            let bytes = fs::read(&path).map_err(io_at(&path, "read"))?;
            match decode_snapshot(&bytes) {
                Ok(entries) => {
                    self.producers = entries
                        .iter()
                        .map(|e| (e.producer_id, ProducerEntry::from_snapshot_entry(e)))
                        .filter(|(_, e)| !expiry.expired(e))
                        .collect();
                    self.ongoing_txns = self
                        .producers
                        .iter()
                        .filter_map(|(&pid, e)| Some((e.current_txn_first_offset?, pid)))
                        .collect();
                    self.last_snap_offset = offset;
                    self.map_end_offset = offset;
                    return Ok(());
                }
                Err(e) => {
                    tracing::warn!(file = %path.display(), reason = %e, "Failed to load producer snapshot; deleting it");
                    self.remove(offset, removed)?;
                }
            }
        }
        self.last_snap_offset = log_start;
        self.map_end_offset = log_start;
        Ok(())
    }

    /// Where the producer state stops reflecting the log: the batches from here on are
    /// replayed when a log opens.
    pub(crate) fn map_end_offset(&self) -> u64 {
        self.map_end_offset
    }

    /// Kafka's `loadProducersFromRecords` for one batch at or past
    /// [`map_end_offset`](Self::map_end_offset) (`AppendOrigin.REPLICATION`: no checks,
    /// the log already holds it); `marker` is the batch's end-transaction marker, if it
    /// is a control batch that holds one. Returns the transaction an ABORT marker ended.
    pub(crate) fn replay(
        &mut self,
        header: &BatchHeader,
        marker: Option<EndTxnMarker>,
    ) -> Option<AbortedTxn> {
        let mut aborted = None;
        if let Some(batch) = ProducerBatch::of(header) {
            match (header.is_control(), marker) {
                (false, _) => self.record_batch(batch, header),
                (true, Some(marker)) => {
                    let at = TxnMarkerAt {
                        producer_id: batch.producer_id,
                        epoch: batch.epoch,
                        offset: header.base_offset,
                        timestamp: header.max_timestamp,
                    };
                    aborted = self.apply_marker(&at, marker);
                }
                (true, None) => {}
            }
        }
        self.map_end_offset = self.map_end_offset.max(header.next_offset());
        aborted
    }

    /// The batch a retry of `batch` duplicates: one of the producer's cached batches with
    /// its epoch and exact sequence range (Kafka's `findDuplicateBatch`).
    pub(crate) fn find_duplicate(&self, batch: &ProducerBatch) -> Option<BatchMetadata> {
        let entry = self.producers.get(&batch.producer_id)?;
        if entry.epoch != batch.epoch {
            return None;
        }
        entry
            .batches
            .iter()
            .find(|b| b.first_seq() == batch.first_seq && b.last_seq == batch.last_seq)
            .copied()
    }

    /// Kafka's checks of a client's batch that would start at `first_offset` in
    /// `partition`: `UnifiedLog.analyzeAndValidateProducerState`'s for a transactional
    /// batch outside an open transaction of its epoch (the transaction coordinator must
    /// have `verified` that the partition is in the producer's transaction: Kafka's
    /// verification guard), then `ProducerAppendInfo`'s `checkProducerEpoch`,
    /// `checkSequence` and, for a plain batch of a producer with a transaction open,
    /// `appendDataBatch`'s refusal.
    pub(crate) fn check(
        &self,
        batch: &ProducerBatch,
        (first_offset, partition): (u64, &str),
        origin: ProducedBy,
    ) -> Result<()> {
        let pid = batch.producer_id;
        let empty = ProducerEntry::empty();
        let current = self.producers.get(&pid).unwrap_or(&empty);
        let in_open_txn =
            current.current_txn_first_offset.is_some() && current.epoch == batch.epoch;
        if batch.transactional && !in_open_txn {
            if self.producers.contains_key(&pid) && batch.epoch < current.epoch {
                return Err(EngineError::InvalidProducerEpoch {
                    message: format!(
                        "Epoch of producer {pid} is {}, which is smaller than the last seen epoch {}",
                        batch.epoch, current.epoch
                    ),
                });
            }
            if !origin.txn_verified {
                return Err(EngineError::InvalidTxnState {
                    message: "Record was not part of an ongoing transaction".to_string(),
                });
            }
        }
        if batch.epoch < current.epoch {
            return Err(older_epoch(
                pid,
                (first_offset, partition),
                batch.epoch,
                current.epoch,
                TV_UNKNOWN,
            ));
        }
        if origin.coordinator {
            // Kafka's `checkSequence` is for clients' batches only.
        } else if batch.epoch != current.epoch {
            if batch.first_seq != 0 && current.epoch != NO_PRODUCER_EPOCH {
                // Kafka's text, its missing space ("{pid}at") included.
                return Err(EngineError::OutOfOrderSequence {
                    message: format!(
                        "Invalid sequence number for new epoch of producer {pid}at offset {first_offset} in partition {partition}: {} (request epoch), {} (seq. number), {} (current producer epoch)",
                        batch.epoch, batch.first_seq, current.epoch
                    ),
                });
            }
        } else {
            let last_seq = current.last_seq();
            // A producer whose batches retention removed (no epoch known) may go on at
            // any sequence, as Kafka accepts since KIP-360.
            if current.epoch != NO_PRODUCER_EPOCH && !in_sequence(last_seq, batch.first_seq) {
                return Err(EngineError::OutOfOrderSequence {
                    message: format!(
                        "Out of order sequence number for producer {pid} at offset {first_offset} in partition {partition}: {} (incoming seq. number), {last_seq} (current end sequence number)",
                        batch.first_seq
                    ),
                });
            }
        }
        if current.current_txn_first_offset.is_some() && !batch.transactional {
            // Kafka prints the batch's offset as a `LogOffsetMetadata` that knows only
            // the offset (segment and position -1) for a non-transactional batch.
            return Err(EngineError::InvalidTxnState {
                message: format!(
                    "Expected transactional write from producer {pid} at offset (offset={first_offset}, segment=[-1:-1]) in partition {partition}"
                ),
            });
        }
        Ok(())
    }

    /// A batch that passed [`Self::check`] is about to go into the segment at
    /// `first_offset`: if it opens its producer's transaction, the last stable offset
    /// stops at `first_offset` from now on, before the batch is readable. Kafka's readers
    /// never see a batch its producer state has not recorded (its high watermark passes
    /// a batch only after `UnifiedLog.append` updated the producer state); kpfs's high
    /// watermark is the log end, which covers the batch the moment it is in the
    /// segment, before [`Self::record_batch`]. Without this, a Fetch landing between the
    /// two read a transaction's first batch as committed, and the records of a
    /// transaction that then aborted were consumed (franz-go's TestTxnEtl: "consumed
    /// too much"). Ended by [`Self::record_batch`], or [`Self::abandon_append`] when
    /// the append fails.
    pub(crate) fn begin_append(&mut self, batch: &ProducerBatch, first_offset: u64) {
        let opens_txn = batch.transactional
            && self
                .producers
                .get(&batch.producer_id)
                .is_none_or(|e| e.current_txn_first_offset.is_none());
        if opens_txn {
            self.opening_txn = Some(first_offset);
        }
    }

    /// The append [`Self::begin_append`] announced failed: nothing was added.
    pub(crate) fn abandon_append(&mut self) {
        self.opening_txn = None;
    }

    /// Kafka's `update` after an append: `header` is the batch as appended. A
    /// transactional batch of a producer with no open transaction opens one.
    pub(crate) fn record_batch(&mut self, batch: ProducerBatch, header: &BatchHeader) {
        self.opening_txn = None;
        let entry = self
            .producers
            .entry(batch.producer_id)
            .or_insert_with(ProducerEntry::empty);
        if batch.transactional && entry.current_txn_first_offset.is_none() {
            entry.current_txn_first_offset = Some(header.base_offset);
            self.ongoing_txns
                .insert(header.base_offset, batch.producer_id);
        }
        entry.add_batch(
            batch.epoch,
            BatchMetadata {
                last_seq: batch.last_seq,
                last_offset: header.last_offset() as i64,
                offset_delta: header.last_offset_delta as i32,
                timestamp: header.max_timestamp,
            },
        );
    }

    /// Kafka's `appendEndTxnMarker` checks for a marker that would go at `at.offset`: the
    /// producer's epoch may not go back, nor the coordinator's.
    ///
    /// Under transaction version 2 the coordinator bumps the epoch with every marker, so
    /// the marker's must be above the producer's; the one exception is a retry of the
    /// marker that already ended the transaction (same epoch, none open), which Kafka
    /// writes again.
    pub(crate) fn check_marker(
        &self,
        at: &TxnMarkerAt,
        marker: EndTxnMarker,
        (partition, transaction_version): (&str, i16),
    ) -> Result<()> {
        let Some(current) = self.producers.get(&at.producer_id) else {
            return Ok(());
        };
        let (pid, offset) = (at.producer_id, at.offset);
        let bumps = transaction_version >= 2;
        let stale = if bumps {
            at.epoch <= current.epoch
        } else {
            at.epoch < current.epoch
        };
        let retry = bumps
            && at.epoch == current.epoch
            && (current.current_txn_first_offset.is_none() || at.epoch == i16::MAX);
        if stale && !retry {
            return Err(older_epoch(
                pid,
                (offset, partition),
                at.epoch,
                current.epoch,
                transaction_version,
            ));
        }
        if current.coordinator_epoch > marker.coordinator_epoch {
            return Err(EngineError::TransactionCoordinatorFenced {
                message: format!(
                    "Invalid coordinator epoch for producerId {pid} at offset {offset} in partition {partition}: {} (zombie), {} (current)",
                    marker.coordinator_epoch, current.coordinator_epoch
                ),
            });
        }
        Ok(())
    }

    /// Kafka's `appendEndTxnMarker`, `lastStableOffset(completedTxn)` and `completeTxn`
    /// for a marker appended at `at.offset`: the producer's transaction, if one is open,
    /// ends there. Returns it when the marker aborted it, with the last stable offset
    /// once it ended: the first offset of the oldest transaction still open, else the
    /// offset after the marker.
    pub(crate) fn apply_marker(
        &mut self,
        at: &TxnMarkerAt,
        marker: EndTxnMarker,
    ) -> Option<AbortedTxn> {
        let entry = self
            .producers
            .entry(at.producer_id)
            .or_insert_with(ProducerEntry::empty);
        entry.maybe_update_epoch(at.epoch);
        entry.coordinator_epoch = marker.coordinator_epoch;
        entry.last_timestamp = at.timestamp;
        let first_offset = entry.current_txn_first_offset.take()?;
        self.ongoing_txns.remove(&first_offset);
        let last_stable_offset = self.first_unstable_offset().unwrap_or(at.offset + 1);
        (!marker.commit).then_some(AbortedTxn {
            producer_id: at.producer_id,
            first_offset,
            last_offset: at.offset,
            last_stable_offset,
        })
    }

    /// Kafka's `firstUnstableOffset`: the first offset of the oldest open transaction,
    /// or of the one whose first batch is being appended (at the log end, so after every
    /// open one).
    pub(crate) fn first_unstable_offset(&self) -> Option<u64> {
        self.ongoing_txns
            .keys()
            .next()
            .copied()
            .or(self.opening_txn)
    }

    /// The open transactions, oldest first: (producer id, first offset).
    pub(crate) fn ongoing_txns(&self) -> Vec<(i64, u64)> {
        self.ongoing_txns
            .iter()
            .map(|(&o, &pid)| (pid, o))
            .collect()
    }

    /// Kafka's `removeExpiredProducers`: forgets producers idle for `expiry`'s time.
    pub(crate) fn remove_expired(&mut self, expiry: Expiry) {
        self.producers.retain(|_, e| !expiry.expired(e));
    }

    /// The producers as a snapshot holds them, by producer id.
    pub(crate) fn entries(&self) -> Vec<ProducerStateEntry> {
        self.producers
            .iter()
            .map(|(&pid, e)| e.to_snapshot_entry(pid))
            .collect()
    }

    fn remove(&mut self, offset: u64, removed: &mut Vec<String>) -> Result<()> {
        self.offsets.remove(&offset);
        remove_file(&snapshot_path(&self.dir, offset))?;
        removed.push(segment_file_name(offset, SNAPSHOT_SUFFIX));
        Ok(())
    }

    /// Kafka's `updateMapEndOffset(offset)` then `takeSnapshot(sync)`: writes the producer
    /// state at `offset` unless a snapshot at or past it was already taken. A roll does
    /// not sync it ([`sync_rolled`](Self::sync_rolled) does); a close does.
    pub(crate) fn take(&mut self, offset: u64, sync: bool) -> Result<()> {
        self.map_end_offset = offset;
        if offset <= self.last_snap_offset {
            return Ok(());
        }
        let path = snapshot_path(&self.dir, offset);
        let mut file = File::create(&path).map_err(io_at(&path, "create"))?;
        if let Err(e) = file.write_all(&encode_snapshot(&self.entries())) {
            // Not left torn: the next open would only remove it.
            let _ = std::fs::remove_file(&path);
            return Err(io_at(&path, "write")(e));
        }
        if sync {
            file.sync_all().map_err(io_at(&path, "fsync"))?;
        } else {
            self.unsynced.push(offset);
        }
        self.offsets.insert(offset);
        self.last_snap_offset = offset;
        Ok(())
    }

    /// fsync of the snapshots written at rolls since the last call (Kafka's
    /// `flushProducerStateSnapshot` in the `flush-log` task). One that retention already
    /// renamed or removed needs none.
    pub(crate) fn sync_rolled(&mut self) -> Result<()> {
        for offset in std::mem::take(&mut self.unsynced) {
            if !self.offsets.contains(&offset) {
                continue;
            }
            let path = snapshot_path(&self.dir, offset);
            match File::open(&path).and_then(|f| f.sync_all()) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_at(&path, "fsync")(e)),
            }
        }
        Ok(())
    }

    /// Kafka's `removeAndMarkSnapshotForDeletion`: the snapshot at a removed segment's
    /// base is renamed `.deleted`, to be removed with the segment's files. Returns its
    /// new path, or `None` when the segment had no snapshot.
    pub(crate) fn mark_deleted(&mut self, base_offset: u64) -> Result<Option<PathBuf>> {
        if !self.offsets.remove(&base_offset) {
            return Ok(None);
        }
        let from = snapshot_path(&self.dir, base_offset);
        let to = self
            .dir
            .join(segment_file_name(base_offset, SNAPSHOT_SUFFIX) + DELETED_SUFFIX);
        match fs::rename(&from, &to) {
            Ok(()) => Ok(Some(to)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(EngineError::io(
                format!("rename {} to {}", from.display(), to.display()),
                e,
            )),
        }
    }

    /// Kafka's `onLogStartOffsetIncremented`: the next snapshot is taken past the latest
    /// remaining one, or past the new log start.
    pub(crate) fn log_start_moved(&mut self, log_start: u64) {
        self.map_end_offset = self.map_end_offset.max(log_start);
        self.last_snap_offset = self.offsets.last().copied().unwrap_or(log_start);
    }

    /// Offsets of the snapshot files, ascending.
    #[cfg(test)]
    pub(crate) fn offsets(&self) -> Vec<u64> {
        self.offsets.iter().copied().collect()
    }
}

/// Kafka's `isProducerExpired`: a producer idle for `producer.id.expiration.ms` is
/// forgotten, unless it has a transaction open.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Expiry {
    pub(crate) now_ms: i64,
    pub(crate) expiration_ms: i64,
}

impl Expiry {
    fn expired(&self, entry: &ProducerEntry) -> bool {
        entry.current_txn_first_offset.is_none()
            && self.now_ms.saturating_sub(entry.last_timestamp) >= self.expiration_ms
    }
}

/// Offsets of the `<offset>.snapshot` files of `dir` (Kafka's `listSnapshotFiles`).
fn list_snapshots(dir: &Path) -> Result<BTreeSet<u64>> {
    Ok(list_names(dir)?
        .iter()
        .filter_map(|n| parse_segment_file_name(n))
        .filter(|(_, suffix)| *suffix == SNAPSHOT_SUFFIX)
        .map(|(offset, _)| offset)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_EXPIRY: Expiry = Expiry {
        now_ms: 0,
        expiration_ms: i64::MAX,
    };

    /// Kafka's bytes for an empty producer state: version 1, CRC32C of the four bytes
    /// after it (CRC32C of four zero bytes is 0x48674BC7, computed bit by bit outside
    /// kpfs), entry count 0.
    const EMPTY: [u8; 10] = [0, 1, 0x48, 0x67, 0x4b, 0xc7, 0, 0, 0, 0];

    fn producer() -> ProducerStateEntry {
        ProducerStateEntry {
            producer_id: 1000,
            producer_epoch: 5,
            last_sequence: 41,
            last_offset: 99,
            offset_delta: 4,
            timestamp: 1_700_000_000_000,
            coordinator_epoch: -1,
            current_txn_first_offset: -1,
        }
    }

    /// The same, with one entry: the fields in `ProducerSnapshot.json`'s order, each
    /// big-endian at its width (CRC computed outside kpfs).
    fn one_entry_bytes() -> Vec<u8> {
        let mut b = vec![0, 1, 0x51, 0x7d, 0x3f, 0x31, 0, 0, 0, 1];
        b.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0x03, 0xe8]); // producer id 1000
        b.extend_from_slice(&[0, 5]); // epoch
        b.extend_from_slice(&[0, 0, 0, 41]); // last sequence
        b.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 99]); // last offset
        b.extend_from_slice(&[0, 0, 0, 4]); // offset delta
        b.extend_from_slice(&[0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00]); // timestamp
        b.extend_from_slice(&[0xff; 4]); // coordinator epoch -1
        b.extend_from_slice(&[0xff; 8]); // no open transaction
        b
    }

    #[test]
    fn snapshots_encode_to_kafkas_bytes_and_decode_back() {
        assert_eq!(encode_snapshot(&[]), EMPTY);
        assert_eq!(decode_snapshot(&EMPTY), Ok(vec![]));
        let bytes = one_entry_bytes();
        assert_eq!(bytes.len(), SNAPSHOT_ENTRIES_AT + 4 + SNAPSHOT_ENTRY_BYTES);
        assert_eq!(encode_snapshot(&[producer()]), bytes);
        assert_eq!(decode_snapshot(&bytes), Ok(vec![producer()]));
    }

    #[test]
    fn damaged_snapshots_are_refused_with_kafkas_reasons() {
        let bytes = one_entry_bytes();
        let mut flipped = bytes.clone();
        flipped[20] ^= 1;
        let err = decode_snapshot(&flipped).unwrap_err().to_string();
        assert!(
            err.starts_with("Snapshot is corrupt (CRC is no longer valid)."),
            "{err}"
        );
        let mut version = bytes.clone();
        version[1] = 2;
        assert_eq!(
            decode_snapshot(&version).unwrap_err().to_string(),
            "Snapshot contained an unknown file version 2"
        );
        for cut in [0, 1, 5, 9, 11, bytes.len() - 1] {
            let err = decode_snapshot(&bytes[..cut]).unwrap_err().to_string();
            assert!(
                err.starts_with("Snapshot failed schema validation"),
                "{cut}: {err}"
            );
        }
        let mut extra = bytes.clone();
        extra.push(0);
        assert!(
            decode_snapshot(&extra).is_err(),
            "a trailing byte breaks the CRC"
        );
        let mut null = EMPTY.to_vec();
        null[6..10].copy_from_slice(&(-1i32).to_be_bytes());
        assert!(decode_snapshot(&null)
            .unwrap_err()
            .to_string()
            .contains("null"));
    }

    fn names(dir: &Path) -> Vec<String> {
        list_names(dir).unwrap()
    }

    #[test]
    fn a_snapshot_is_taken_only_past_the_last_one_and_deleted_with_its_segment() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, removed) =
            ProducerStateManager::load(dir.path(), &[0], (0, 0), (true, None), NO_EXPIRY, |_| {
                Ok(())
            })
            .unwrap();
        assert!(removed.is_empty());
        assert!(
            names(dir.path()).is_empty(),
            "a new log's segment 0 has none"
        );
        s.take(5, false).unwrap();
        s.take(5, false).unwrap();
        s.take(10, false).unwrap();
        s.sync_rolled().unwrap();
        assert_eq!(s.offsets(), vec![5, 10]);
        assert_eq!(fs::read(snapshot_path(dir.path(), 5)).unwrap(), EMPTY);
        assert_eq!(s.mark_deleted(0).unwrap(), None);
        let renamed = s.mark_deleted(5).unwrap().unwrap();
        assert_eq!(
            names(dir.path()),
            [
                "00000000000000000005.snapshot.deleted",
                "00000000000000000010.snapshot"
            ]
        );
        assert_eq!(
            renamed,
            dir.path().join("00000000000000000005.snapshot.deleted")
        );
        s.log_start_moved(10);
        s.take(10, true).unwrap();
        assert_eq!(s.offsets(), vec![10]);
    }

    #[test]
    fn loading_keeps_the_clean_close_snapshot_and_removes_strays_and_corrupt_ones() {
        let dir = tempfile::tempdir().unwrap();
        let write = |offset: u64, bytes: &[u8]| {
            fs::write(snapshot_path(dir.path(), offset), bytes).unwrap()
        };
        // Segments 0, 5, 10, log end 12: 0 is at the log start, 3 a stray below the last
        // base, 12 the clean close's (torn here, so it is written again).
        for o in [0, 3, 5, 10] {
            write(o, &EMPTY);
        }
        write(12, &EMPTY[..7]);
        let (s, mut removed) = ProducerStateManager::load(
            dir.path(),
            &[0, 5, 10],
            (0, 12),
            (false, None),
            NO_EXPIRY,
            |_| Ok(()),
        )
        .unwrap();
        removed.sort();
        assert_eq!(
            removed,
            [
                "00000000000000000000.snapshot",
                "00000000000000000003.snapshot",
                "00000000000000000012.snapshot"
            ]
        );
        assert_eq!(s.offsets(), vec![5, 10, 12]);
        assert_eq!(fs::read(snapshot_path(dir.path(), 12)).unwrap(), EMPTY);

        // A later stray than the clean close's (past the log end) replaces it as the one
        // kept, then goes as out of range: the log end gets a new one.
        write(14, &EMPTY);
        let (s, removed) = ProducerStateManager::load(
            dir.path(),
            &[0, 5, 10],
            (0, 12),
            (false, None),
            NO_EXPIRY,
            |_| Ok(()),
        )
        .unwrap();
        assert_eq!(removed.len(), 2, "{removed:?}");
        assert_eq!(s.offsets(), vec![5, 10, 12]);
    }

    #[test]
    fn a_clean_close_without_snapshots_writes_the_last_two_bases_and_the_log_end() {
        let dir = tempfile::tempdir().unwrap();
        let (s, _) = ProducerStateManager::load(
            dir.path(),
            &[0, 5, 10],
            (0, 12),
            (true, None),
            NO_EXPIRY,
            |_| Ok(()),
        )
        .unwrap();
        assert_eq!(s.offsets(), vec![5, 10, 12]);
        let (s, _) = ProducerStateManager::load(
            dir.path(),
            &[0, 5, 10],
            (0, 12),
            (true, None),
            NO_EXPIRY,
            |_| Ok(()),
        )
        .unwrap();
        assert_eq!(s.offsets(), vec![5, 10, 12], "found again, nothing new");
    }
}
