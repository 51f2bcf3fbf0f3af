//! The one interface through which the mount reaches what it shows: a store of topics
//! (the local engine today, a Kafka cluster next). It holds what the FUSE adapter really
//! asks and nothing more, in terms a remote backend can answer too: names, topics and
//! their partitions as handles, the `log` byte stream read from a position with its
//! length, appends of whole lines with one result per write, config texts with their
//! check and apply, the rendered texts of `status`, `events`, groups, transactions,
//! metrics and refusals. Segment files are a capability a store may lack
//! ([`Store::SEGMENT_FILES`]): a cluster's brokers keep theirs out of reach.
//!
//! The adapter is generic over it (monomorphized: the hot `read`/`write` path calls the
//! engine directly, and a handle keeps its backend's cursor in place, unboxed).
//! Errors are the engine's [`EngineError`]: Kafka's refusals with Kafka's texts, which
//! a remote backend maps its error codes onto, so the errno map stays one match.

mod cluster;
mod local;
#[cfg(test)]
pub(crate) mod mock;

use std::fs::File;
use std::sync::Arc;

use crate::engine::groups::GroupError;
use crate::engine::partition::BackingFile;
use crate::engine::{ConfigChange, Result, TopicDeletionHook};

/// Topics by name, the broker's config, and the texts of `.kpfs/`.
pub(crate) trait Store: Send + Sync + 'static {
    type Topic: TopicStore<Partition = Self::Partition>;
    type Partition: PartitionStore;
    /// Whether partitions have segment files to show in `segments/`.
    const SEGMENT_FILES: bool;

    fn topic_names(&self) -> Vec<String>;
    /// The topic named `name` now; a handle keeps serving this one, never one created
    /// later under its name.
    fn topic(&self, name: &str) -> Option<Arc<Self::Topic>>;
    /// CreateTopics with the broker's default partition count.
    fn create_topic(&self, name: &str) -> Result<()>;
    fn delete_topic(&self, name: &str) -> Result<()>;
    /// `hook` is told the name of each topic deleted, by whoever deleted it.
    fn on_topic_deletion(&self, hook: Option<TopicDeletionHook>);

    /// A refusal's reason, for `.kpfs/errors`.
    fn record_rejection(&self, path: &str, reason: &str);
    fn rejections_text(&self) -> String;
    fn metrics_text(&self) -> String;

    fn broker_config_text(&self) -> String;
    fn check_broker_change(&self, change: &ConfigChange) -> Result<()>;
    fn apply_broker_change(&self, change: &ConfigChange) -> Result<()>;
    fn broker_config_warnings(&self) -> Vec<String>;

    fn topic_status_text(&self, topic: &Self::Topic) -> String;
    fn partition_status_text(&self, partition: &Self::Partition) -> String;

    fn group_ids(&self) -> Vec<String>;
    /// `kafka-consumer-groups.sh --describe --state`'s text; `None`: no such group.
    fn group_state_text(&self, group: &str) -> Option<String>;
    fn group_members_text(&self, group: &str) -> Option<String>;
    fn group_offsets_text(&self, group: &str) -> Option<String>;
    /// DeleteGroups of one group.
    fn delete_group(&self, group: &str) -> std::result::Result<(), GroupError>;

    fn transactional_ids(&self) -> Vec<String>;
    /// `kafka-transactions.sh describe`'s text; `None`: no such transactional id.
    fn transaction_text(&self, id: &str) -> Option<String>;
}

/// One topic, as of the lookup that gave it.
pub(crate) trait TopicStore: Send + Sync + 'static {
    type Partition: PartitionStore;
    /// Where one handle reads the topic's `log` stream.
    type Cursor: Default + Send + 'static;
    /// A copy of the whole topic for `.kpfs/snapshot/TOPIC/log`.
    type Capture: CaptureStore;

    fn name(&self) -> &str;
    /// Whether the topic is gone (deleted, or deleted and created again): a handle
    /// opened before reads nothing of it.
    fn check_not_deleted(&self) -> Result<()>;
    fn is_internal(&self) -> bool;
    fn modified_ms(&self) -> i64;
    fn events_text(&self) -> String;

    fn partition_count(&self) -> u32;
    fn partition(&self, index: u32) -> Option<Arc<Self::Partition>>;
    /// CreatePartitions to `count`.
    fn add_partitions(&self, count: u32) -> Result<()>;

    /// The length of the `log` stream: its size, past its last readable byte when
    /// records were deleted.
    fn stream_len(&self) -> u64;
    /// Up to `len` bytes of the `log` stream from `pos`; empty at its end.
    fn read_log(&self, cursor: &mut Self::Cursor, pos: u64, len: usize) -> Result<Vec<u8>>;
    /// Whether a line of `len` bytes without its newline yet could still become a
    /// record of partition `target` (or of the one the partitioner picks).
    fn check_unterminated_line(&self, target: Option<u32>, len: usize) -> Result<()>;
    /// Appends the lines of `head` then `body` (each ends with `\n`) to partition `target`,
    /// or where the partitioner sends them: all of them, or none and the reason.
    fn append_lines(&self, target: Option<u32>, head: &[u8], body: &[u8]) -> Result<()>;
    /// Makes what was appended durable.
    fn sync(&self) -> Result<()>;

    fn config_text(&self) -> String;
    fn check_config_change(&self, change: &ConfigChange) -> Result<()>;
    fn apply_config_change(&self, change: &ConfigChange) -> Result<()>;
    fn config_warnings(&self) -> Vec<String>;

    /// The topic's current capture; `opening` holds it until [`CaptureStore::closed`].
    fn current_capture(&self, opening: bool) -> Result<Self::Capture>;
}

/// One partition of a topic.
pub(crate) trait PartitionStore: Send + Sync + 'static {
    /// Where one handle reads the partition's `log` stream.
    type Cursor: Default + Send + 'static;

    fn index(&self) -> u32;
    fn modified_ms(&self) -> i64;
    fn stream_len(&self) -> u64;
    fn read_log(&self, cursor: &mut Self::Cursor, pos: u64, len: usize) -> Result<Vec<u8>>;
    fn log_start_offset(&self) -> u64;
    /// DeleteRecords before `offset`.
    fn delete_records_before(&self, offset: u64) -> Result<()>;
    /// The files of the partition's directory (asked only of a store with
    /// [`Store::SEGMENT_FILES`]).
    fn segment_files(&self) -> Result<Vec<BackingFile>>;
    fn open_segment_file(&self, name: &str) -> Result<File>;
}

/// A topic's capture: fixed bytes, read through a handle's own cursor.
pub(crate) trait CaptureStore: Send + Sync + 'static {
    type Cursor: Default + Send + 'static;

    fn size(&self) -> u64;
    fn modified_ms(&self) -> i64;
    fn read(&self, cursor: &mut Self::Cursor, pos: u64, len: usize) -> Result<Vec<u8>>;
    /// The handle that opened it is gone.
    fn closed(&self);
}
