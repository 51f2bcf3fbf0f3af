//! Kafka's `CleanedTransactionMetadata`: what the cleaner knows of the transactions it
//! walks through, batch by batch in offset order. It decides which data batches belong to
//! an aborted transaction (the cleaner drops them whatever their keys) and which markers
//! end a transaction with no data left (dropped once their delete horizon passes), and
//! puts back into the cleaned segment's `.txnindex` every abort whose data it still met.
//!
//! The aborted transactions come from the transaction indexes of the range walked
//! (`addAbortedTransactions`); they are reached by first offset. A producer has one
//! transaction open at a time, so a transactional batch of a producer whose reached
//! abort has not met its marker yet is part of that abort.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap, HashSet};

use super::error::Result;
use super::format::{BatchHeader, EndTxnMarker};
use super::segment::Segment;
use super::txn_index::AbortedTxn;

/// The transactions a walk of the log has reached (Kafka's `CleanedTransactionMetadata`).
/// One pass shares one across its groups, so a transaction that a group boundary cuts is
/// still seen whole; building the offset map takes one of its own.
#[derive(Debug, Default)]
pub(crate) struct CleanedTxns {
    /// Producers whose transactional data was met outside an abort (Kafka's
    /// `ongoingCommittedTxns`): their COMMIT marker still ends data.
    ongoing_committed: HashSet<i64>,
    /// Aborts reached and not yet ended by their marker, by producer (Kafka's
    /// `ongoingAbortedTxns`).
    ongoing_aborted: HashMap<i64, OngoingAbort>,
    /// Aborts not reached yet, the lowest first offset on top (Kafka's min-heap
    /// `abortedTransactions`).
    pending: BinaryHeap<Reverse<ByFirstOffset>>,
}

/// Kafka's `AbortedTransactionMetadata`.
#[derive(Debug)]
struct OngoingAbort {
    txn: AbortedTxn,
    /// The last offset of the transaction's last data batch met (Kafka's
    /// `lastObservedBatchOffset`): while there is one, the marker stays.
    last_observed_batch_offset: Option<u64>,
}

/// An abort in the order the walk reaches it: by first offset (the other fields only
/// make the order total).
#[derive(Debug, PartialEq, Eq)]
struct ByFirstOffset(AbortedTxn);

impl ByFirstOffset {
    fn key(&self) -> (u64, i64, u64, u64) {
        let t = &self.0;
        (
            t.first_offset,
            t.producer_id,
            t.last_offset,
            t.last_stable_offset,
        )
    }
}

impl Ord for ByFirstOffset {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

impl PartialOrd for ByFirstOffset {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl CleanedTxns {
    /// Kafka's `addAbortedTransactions`: aborts found in the transaction indexes for the
    /// range about to be walked. One found again for a later range (it spans both) is
    /// reached once: its producer's entry is kept.
    pub(crate) fn add_aborted(&mut self, aborted: Vec<AbortedTxn>) {
        self.pending
            .extend(aborted.into_iter().map(|t| Reverse(ByFirstOffset(t))));
    }

    /// Kafka's `onBatchRead` for a data batch: whether it belongs to an aborted
    /// transaction, and so may go whatever its records' keys.
    pub(crate) fn on_batch_read(&mut self, batch: &BatchHeader) -> bool {
        self.consume_aborted_up_to(batch.last_offset());
        if !batch.is_transactional() {
            return false;
        }
        match self.ongoing_aborted.get_mut(&batch.producer_id) {
            Some(abort) => {
                abort.last_observed_batch_offset = Some(batch.last_offset());
                true
            }
            None => {
                self.ongoing_committed.insert(batch.producer_id);
                false
            }
        }
    }

    /// Kafka's `onControlBatchRead`: whether the control batch may go, its transaction
    /// having no data left. `control_type` is its first record's (Kafka's
    /// `ControlRecordType`), `None` for a batch a previous clean emptied. An ABORT whose
    /// data was met stays, and its abort is appended to `cleaned`'s transaction index
    /// (`cleanedIndex`): the cleaned segment holds its marker, and readers still need to
    /// skip the data. Other control types stay.
    pub(crate) fn on_control_batch_read(
        &mut self,
        batch: &BatchHeader,
        control_type: Option<i16>,
        cleaned: Option<&Segment>,
    ) -> Result<bool> {
        self.consume_aborted_up_to(batch.last_offset());
        let Some(control_type) = control_type else {
            return Ok(true);
        };
        let pid = batch.producer_id;
        Ok(match control_type {
            EndTxnMarker::ABORT_TYPE => match self.ongoing_aborted.remove(&pid) {
                Some(OngoingAbort {
                    txn,
                    last_observed_batch_offset: Some(_),
                }) => {
                    if let Some(cleaned) = cleaned {
                        cleaned.append_aborted(txn)?;
                    }
                    false
                }
                _ => true,
            },
            EndTxnMarker::COMMIT_TYPE => !self.ongoing_committed.remove(&pid),
            _ => false,
        })
    }

    /// Kafka's `consumeAbortedTxnsUpTo`: the aborts starting at or before `offset` are
    /// reached.
    fn consume_aborted_up_to(&mut self, offset: u64) {
        while let Some(Reverse(next)) = self.pending.peek() {
            if next.0.first_offset > offset {
                break;
            }
            let Some(Reverse(ByFirstOffset(txn))) = self.pending.pop() else {
                break;
            };
            self.ongoing_aborted
                .entry(txn.producer_id)
                .or_insert(OngoingAbort {
                    txn,
                    last_observed_batch_offset: None,
                });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::format::{decode_header, BatchBuilder, BatchEnd, BatchIdentity};

    fn header(
        base: u64,
        count: u64,
        pid: i64,
        (transactional, control): (bool, bool),
    ) -> BatchHeader {
        let mut b = BatchBuilder::new(base);
        for o in base..base + count {
            b.push(o, 1, None, Some(b"v"));
        }
        let bytes = b
            .finish_parts(&BatchEnd {
                identity: BatchIdentity {
                    producer_id: pid,
                    producer_epoch: 0,
                    transactional,
                    control,
                    ..BatchIdentity::PLAIN
                },
                ..BatchEnd::PLAIN
            })
            .unwrap()
            .to_vec();
        decode_header(&bytes).unwrap()
    }

    fn data(base: u64, count: u64, pid: i64) -> BatchHeader {
        header(base, count, pid, (true, false))
    }

    fn marker(offset: u64, pid: i64) -> BatchHeader {
        header(offset, 1, pid, (true, true))
    }

    fn abort(pid: i64, first: u64, last: u64) -> AbortedTxn {
        AbortedTxn {
            producer_id: pid,
            first_offset: first,
            last_offset: last,
            last_stable_offset: last + 1,
        }
    }

    const ABORT: Option<i16> = Some(EndTxnMarker::ABORT_TYPE);
    const COMMIT: Option<i16> = Some(EndTxnMarker::COMMIT_TYPE);

    #[test]
    fn aborted_data_goes_and_its_marker_stays_while_data_was_met() {
        let mut txns = CleanedTxns::default();
        txns.add_aborted(vec![abort(1, 0, 3)]);
        assert!(txns.on_batch_read(&data(0, 2, 1)), "aborted data may go");
        assert!(
            !txns.on_batch_read(&data(2, 1, 2)),
            "another producer's data is committed"
        );
        assert!(!txns
            .on_control_batch_read(&marker(3, 1), ABORT, None)
            .unwrap());
        assert!(!txns
            .on_control_batch_read(&marker(4, 2), COMMIT, None)
            .unwrap());

        // A later walk that meets none of the data: both markers may go.
        let mut txns = CleanedTxns::default();
        txns.add_aborted(vec![abort(1, 0, 3)]);
        assert!(txns
            .on_control_batch_read(&marker(3, 1), ABORT, None)
            .unwrap());
        assert!(txns
            .on_control_batch_read(&marker(4, 2), COMMIT, None)
            .unwrap());
    }

    #[test]
    fn an_abort_is_reached_by_its_first_offset_and_once() {
        let mut txns = CleanedTxns::default();
        // Found for two ranges it spans, out of first-offset order.
        txns.add_aborted(vec![abort(2, 10, 12), abort(1, 5, 20)]);
        txns.add_aborted(vec![abort(1, 5, 20)]);
        assert!(
            !txns.on_batch_read(&data(0, 2, 1)),
            "before its abort starts, a producer's transaction is another one"
        );
        assert!(!txns
            .on_control_batch_read(&marker(2, 1), COMMIT, None)
            .unwrap());
        assert!(txns.on_batch_read(&data(5, 1, 1)));
        assert!(txns.on_batch_read(&data(10, 2, 2)));
        assert!(!txns
            .on_control_batch_read(&marker(12, 2), ABORT, None)
            .unwrap());
        assert!(!txns
            .on_control_batch_read(&marker(20, 1), ABORT, None)
            .unwrap());
        assert!(txns.ongoing_aborted.is_empty() && txns.pending.is_empty());
    }

    #[test]
    fn emptied_and_other_control_batches() {
        let mut txns = CleanedTxns::default();
        assert!(txns
            .on_control_batch_read(&marker(0, 1), None, None)
            .unwrap());
        assert!(!txns
            .on_control_batch_read(&marker(1, 1), Some(2), None)
            .unwrap());
        assert!(
            !txns.on_batch_read(&header(2, 1, 1, (false, false))),
            "a plain batch is no transaction's"
        );
        assert!(
            txns.on_control_batch_read(&marker(3, 1), COMMIT, None)
                .unwrap(),
            "a plain batch makes no COMMIT needed"
        );
    }
}
