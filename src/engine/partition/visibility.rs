//! What a reader of a partition's `log` sees of its records: what a `read_committed`
//! Kafka consumer sees. Records of a transaction still open are not shown yet (the
//! stream stops at the last stable offset, so `tail -f` shows them when the COMMIT
//! lands), and the batches of an aborted transaction never are: their stream positions
//! stay reserved, as the gaps retention and the cleaner leave, so no position moves.
//! Control batches (the markers) are never lines at all.
//!
//! A partition without transactions pays nothing: the aborted transactions are looked up
//! only when a read meets a transactional batch.

use crate::engine::format::BatchHeader;
use crate::engine::log::LogSnapshot;
use crate::engine::txn_index::AbortedTxn;

/// The visibility of one read's records: the offset they end before, and the aborted
/// transactions from where the read meets its first transactional batch.
#[derive(Debug)]
pub(crate) struct Visibility {
    end_offset: u64,
    aborted: Option<Vec<AbortedTxn>>,
}

impl Visibility {
    /// Records below `end_offset` (the last stable offset when the read began) are shown,
    /// unless a transaction aborted them.
    pub(crate) fn below(end_offset: u64) -> Visibility {
        Visibility {
            end_offset,
            aborted: None,
        }
    }

    /// The offset the visible records end before.
    pub(crate) fn end_offset(&self) -> u64 {
        self.end_offset
    }

    /// Whether the batch `h` of segment `seg_idx` of `snap` belongs to an aborted
    /// transaction. A producer has one transaction open at a time, so a transactional
    /// batch is aborted exactly when an aborted transaction of its producer spans it.
    pub(crate) fn is_aborted(
        &mut self,
        snap: &LogSnapshot,
        seg_idx: usize,
        h: &BatchHeader,
    ) -> bool {
        if !h.is_transactional() || h.is_control() {
            return false;
        }
        let end = self.end_offset;
        // Every abort that reaches this batch or a later one below the end.
        let aborted = self.aborted.get_or_insert_with(|| {
            snap.collect_aborted(seg_idx, (h.base_offset, end.max(h.next_offset())))
        });
        aborted.iter().any(|a| {
            a.producer_id == h.producer_id
                && a.first_offset <= h.base_offset
                && h.base_offset <= a.last_offset
        })
    }
}
