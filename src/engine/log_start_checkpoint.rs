//! Kafka's `log-start-offset-checkpoint` (`LogManager.checkpointLogStartOffsetsInDir`):
//! in the data directory, the log start offset of each partition whose start is above
//! its first segment's base, which only DeleteRecords makes so (retention and the
//! cleaner move the start to a segment base, which the segment files already say).
//! Kafka writes it every `log.flush.start.offset.checkpoint.interval.ms` and counts on
//! replicas for what a crash loses meanwhile; kpfs has none, so it writes the file
//! before DeleteRecords returns. Read at open: a log starts at the larger of its entry
//! and its first segment's base.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use super::error::Result;
use super::files::{read_offset_checkpoint, write_offset_checkpoint};
use super::format::LOG_START_CHECKPOINT_FILE;
use super::log_loader::remove_stale_temporary;
use super::topic_partition::TopicPartition;

/// The file and the entries it holds, shared by the engine and its topics.
#[derive(Debug)]
pub(crate) struct LogStartCheckpoint {
    path: PathBuf,
    entries: Mutex<BTreeMap<TopicPartition, u64>>,
}

impl LogStartCheckpoint {
    /// Reads the file of `data_dir` (none, or one that does not parse, holds no entry:
    /// the logs then start at their first segment, as in Kafka).
    pub(crate) fn load(data_dir: &Path) -> LogStartCheckpoint {
        let path = data_dir.join(LOG_START_CHECKPOINT_FILE);
        remove_stale_temporary(&path);
        let entries = Mutex::new(read_offset_checkpoint(&path));
        LogStartCheckpoint { path, entries }
    }

    /// The checkpointed log start of `tp`, if any.
    pub(crate) fn get(&self, tp: &TopicPartition) -> Option<u64> {
        self.entries.lock().get(tp).copied()
    }

    /// Records `tp`'s new log start and rewrites the file (crash-safe). An entry never
    /// moves back, so concurrent DeleteRecords on a partition leave the larger start.
    pub(crate) fn save(&self, tp: &TopicPartition, log_start: u64) -> Result<()> {
        let mut entries = self.entries.lock();
        let mut updated = entries.clone();
        let entry = updated.entry(tp.clone()).or_default();
        *entry = (*entry).max(log_start);
        write_offset_checkpoint(&self.path, &updated)?;
        *entries = updated;
        Ok(())
    }

    /// Drops `topic`'s entry (the topic was deleted: a topic created later under its
    /// name must start at 0).
    pub(crate) fn forget(&self, topic: &str) -> Result<()> {
        let mut entries = self.entries.lock();
        if !entries.keys().any(|tp| tp.topic == topic) {
            return Ok(());
        }
        let mut updated = entries.clone();
        updated.retain(|tp, _| tp.topic != topic);
        write_offset_checkpoint(&self.path, &updated)?;
        *entries = updated;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_written_in_kafkas_format_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let checkpoint = LogStartCheckpoint::load(dir.path());
        let (a0, b0, b2) = (
            TopicPartition::new("a", 0),
            TopicPartition::new("b", 0),
            TopicPartition::new("b", 2),
        );
        assert_eq!(checkpoint.get(&a0), None);
        checkpoint.save(&b2, 9).unwrap();
        checkpoint.save(&b0, 7).unwrap();
        checkpoint.save(&a0, 42).unwrap();
        checkpoint.save(&a0, 41).unwrap();
        let text = std::fs::read_to_string(dir.path().join(LOG_START_CHECKPOINT_FILE)).unwrap();
        assert_eq!(text, "0\n3\na 0 42\nb 0 7\nb 2 9\n");
        checkpoint.forget("b").unwrap();
        let reloaded = LogStartCheckpoint::load(dir.path());
        assert_eq!(
            (reloaded.get(&a0), reloaded.get(&b0), reloaded.get(&b2)),
            (Some(42), None, None)
        );
    }
}
