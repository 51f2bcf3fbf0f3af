//! Kafka's `LogCleanerManager`, per topic: whether the topic is being cleaned, idle or
//! uncleanable, its checkpointed first dirty offset and the figures of its passes. Every
//! change of that state is one of the operations here (claim, done, aborted,
//! uncleanable, checkpoint), so no caller can leave a topic half-claimed.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use super::cleaner::PassStats;

/// Cleaner state of one topic.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum CleanerState {
    #[default]
    Idle,
    Cleaning,
    Uncleanable(String),
}

/// The cleaner's bookkeeping for one topic, held by the topic.
#[derive(Debug, Default)]
pub struct LogCleaningState {
    /// Next first dirty offset (the checkpoint); `None` until the first pass.
    checkpoint: Mutex<Option<u64>>,
    state: Mutex<CleanerState>,
    last_pass: Mutex<Option<PassStats>>,
    passes: AtomicU64,
    /// Totals over every pass since the mount, for the metrics counters.
    tombstones_removed: AtomicU64,
    records_removed: AtomicU64,
}

impl LogCleaningState {
    pub fn checkpoint(&self) -> Option<u64> {
        *self.checkpoint.lock()
    }

    /// Takes the offset read from `cleaner-offset-checkpoint` at open.
    pub(crate) fn load_checkpoint(&self, offset: u64) {
        *self.checkpoint.lock() = Some(offset);
    }

    /// Kafka's `forceUpdateCheckpoint`: replaces a checkpoint outside the log by the
    /// offset cleaning starts from, unless another thread changed it since it was read as
    /// `seen`. True when it was replaced.
    pub(crate) fn force_update_checkpoint(&self, seen: Option<u64>, first_dirty: u64) -> bool {
        let mut current = self.checkpoint.lock();
        if *current != seen {
            return false;
        }
        *current = Some(first_dirty);
        true
    }

    pub fn state(&self) -> CleanerState {
        self.state.lock().clone()
    }

    pub(crate) fn is_idle(&self) -> bool {
        *self.state.lock() == CleanerState::Idle
    }

    /// Marks an idle topic as being cleaned; false when it is not idle (another cleaner
    /// thread claimed it since it was found idle, or it is uncleanable).
    pub(crate) fn try_claim(&self) -> bool {
        let mut state = self.state.lock();
        if *state != CleanerState::Idle {
            return false;
        }
        *state = CleanerState::Cleaning;
        true
    }

    /// Kafka's `doneCleaning` after a pass: the checkpoint moves to the pass's end and
    /// its figures count.
    pub(crate) fn done_cleaning(&self, stats: &PassStats) {
        *self.checkpoint.lock() = Some(stats.end_offset);
        self.passes.fetch_add(1, Ordering::Relaxed);
        self.tombstones_removed
            .fetch_add(stats.tombstones_removed, Ordering::Relaxed);
        self.records_removed
            .fetch_add(stats.records_removed, Ordering::Relaxed);
        *self.last_pass.lock() = Some(stats.clone());
        *self.state.lock() = CleanerState::Idle;
    }

    /// A pass that gave up without changing anything: the topic is idle again.
    pub(crate) fn aborted(&self) {
        *self.state.lock() = CleanerState::Idle;
    }

    /// Kafka's `markPartitionUncleanable`: no more passes until remount.
    pub(crate) fn mark_uncleanable(&self, reason: String) {
        *self.state.lock() = CleanerState::Uncleanable(reason);
    }

    pub(crate) fn last_pass(&self) -> Option<PassStats> {
        self.last_pass.lock().clone()
    }

    pub(crate) fn passes(&self) -> u64 {
        self.passes.load(Ordering::Relaxed)
    }

    pub(crate) fn tombstones_removed(&self) -> u64 {
        self.tombstones_removed.load(Ordering::Relaxed)
    }

    pub(crate) fn records_removed(&self) -> u64 {
        self.records_removed.load(Ordering::Relaxed)
    }
}
