//! A Kafka cluster as a [`Store`] (`kpfs mount --bootstrap-server`): each method one call
//! of `crate::cluster`. A cluster keeps its segment files on its brokers, out of reach:
//! `segments/` is absent, and its topics have no events of this mount's.

use std::fs::File;
use std::sync::Arc;

use super::{CaptureStore, PartitionStore, Store, TopicStore};
use crate::cluster::{Cluster, ClusterCapture, ClusterPartition, ClusterTopic, ViewCursor};
use crate::engine::groups::GroupError;
use crate::engine::partition::BackingFile;
use crate::engine::{ConfigChange, EngineError, Result, TopicDeletionHook};

/// What a cluster mount cannot show: the brokers' files.
fn no_files() -> EngineError {
    EngineError::Broker {
        action: "list segment files".to_string(),
        name: "UNSUPPORTED_VERSION".to_string(),
        code: 35,
        message: "a cluster's segment files are on its brokers".to_string(),
    }
}

impl Store for Cluster {
    type Topic = ClusterTopic;
    type Partition = ClusterPartition;
    const SEGMENT_FILES: bool = false;

    fn topic_names(&self) -> Vec<String> {
        Cluster::topic_names(self)
    }

    fn topic(&self, name: &str) -> Option<Arc<ClusterTopic>> {
        Cluster::topic(self, name)
    }

    fn create_topic(&self, name: &str) -> Result<()> {
        Cluster::create_topic(self, name)
    }

    fn delete_topic(&self, name: &str) -> Result<()> {
        Cluster::delete_topic(self, name)
    }

    fn on_topic_deletion(&self, hook: Option<TopicDeletionHook>) {
        Cluster::on_topic_deletion(self, hook);
    }

    fn record_rejection(&self, path: &str, reason: &str) {
        Cluster::record_rejection(self, path, reason);
    }

    fn rejections_text(&self) -> String {
        Cluster::rejections_text(self)
    }

    fn metrics_text(&self) -> String {
        Cluster::metrics_text(self)
    }

    fn broker_config_text(&self) -> String {
        Cluster::broker_config_text(self)
    }

    fn check_broker_change(&self, change: &ConfigChange) -> Result<()> {
        Cluster::check_broker_change(self, change)
    }

    fn apply_broker_change(&self, change: &ConfigChange) -> Result<()> {
        Cluster::apply_broker_change(self, change)
    }

    fn broker_config_warnings(&self) -> Vec<String> {
        Vec::new()
    }

    fn topic_status_text(&self, topic: &ClusterTopic) -> String {
        topic.status_text()
    }

    fn partition_status_text(&self, partition: &ClusterPartition) -> String {
        partition.status_text()
    }

    fn group_ids(&self) -> Vec<String> {
        Cluster::group_ids(self)
    }

    fn group_state_text(&self, group: &str) -> Option<String> {
        Cluster::group_state_text(self, group)
    }

    fn group_members_text(&self, group: &str) -> Option<String> {
        Cluster::group_members_text(self, group)
    }

    fn group_offsets_text(&self, group: &str) -> Option<String> {
        Cluster::group_offsets_text(self, group)
    }

    fn delete_group(&self, group: &str) -> std::result::Result<(), GroupError> {
        Cluster::delete_group(self, group)
    }

    fn transactional_ids(&self) -> Vec<String> {
        Cluster::transactional_ids(self)
    }

    fn transaction_text(&self, id: &str) -> Option<String> {
        Cluster::transaction_text(self, id)
    }
}

impl TopicStore for ClusterTopic {
    type Partition = ClusterPartition;
    type Cursor = ViewCursor;
    type Capture = ClusterCapture;

    fn name(&self) -> &str {
        ClusterTopic::name(self)
    }

    fn check_not_deleted(&self) -> Result<()> {
        ClusterTopic::check_not_deleted(self)
    }

    fn is_internal(&self) -> bool {
        ClusterTopic::is_internal(self)
    }

    fn modified_ms(&self) -> i64 {
        ClusterTopic::modified_ms(self)
    }

    fn events_text(&self) -> String {
        "# a cluster mount has no events: retention, rolls and cleaning happen on the brokers\n"
            .to_string()
    }

    fn partition_count(&self) -> u32 {
        ClusterTopic::partition_count(self)
    }

    fn partition(&self, index: u32) -> Option<Arc<ClusterPartition>> {
        ClusterTopic::partition(self, index)
    }

    fn add_partitions(&self, count: u32) -> Result<()> {
        ClusterTopic::add_partitions(self, count)
    }

    fn stream_len(&self) -> u64 {
        ClusterTopic::stream_len(self)
    }

    fn read_log(&self, cursor: &mut ViewCursor, pos: u64, len: usize) -> Result<Vec<u8>> {
        ClusterTopic::read_log(self, cursor, pos, len)
    }

    fn check_unterminated_line(&self, target: Option<u32>, len: usize) -> Result<()> {
        ClusterTopic::check_unterminated_line(self, target, len)
    }

    fn append_lines(&self, target: Option<u32>, head: &[u8], body: &[u8]) -> Result<()> {
        ClusterTopic::append_lines(self, target, head, body)
    }

    fn sync(&self) -> Result<()> {
        ClusterTopic::sync(self)
    }

    fn config_text(&self) -> String {
        ClusterTopic::config_text(self)
    }

    fn check_config_change(&self, change: &ConfigChange) -> Result<()> {
        ClusterTopic::check_config_change(self, change)
    }

    fn apply_config_change(&self, change: &ConfigChange) -> Result<()> {
        ClusterTopic::apply_config_change(self, change)
    }

    fn config_warnings(&self) -> Vec<String> {
        Vec::new()
    }

    fn current_capture(&self, _opening: bool) -> Result<ClusterCapture> {
        self.check_not_deleted()?;
        Ok(self.capture())
    }
}

impl PartitionStore for ClusterPartition {
    type Cursor = ViewCursor;

    fn index(&self) -> u32 {
        ClusterPartition::index(self)
    }

    fn modified_ms(&self) -> i64 {
        ClusterPartition::modified_ms(self)
    }

    fn stream_len(&self) -> u64 {
        ClusterPartition::stream_len(self)
    }

    fn read_log(&self, cursor: &mut ViewCursor, pos: u64, len: usize) -> Result<Vec<u8>> {
        ClusterPartition::read_log(self, cursor, pos, len)
    }

    fn log_start_offset(&self) -> u64 {
        ClusterPartition::log_start_offset(self)
    }

    fn delete_records_before(&self, offset: u64) -> Result<()> {
        ClusterPartition::delete_records_before(self, offset)
    }

    fn segment_files(&self) -> Result<Vec<BackingFile>> {
        Err(no_files())
    }

    fn open_segment_file(&self, _name: &str) -> Result<File> {
        Err(no_files())
    }
}

impl CaptureStore for ClusterCapture {
    type Cursor = ViewCursor;

    fn size(&self) -> u64 {
        ClusterCapture::size(self)
    }

    fn modified_ms(&self) -> i64 {
        ClusterCapture::modified_ms(self)
    }

    fn read(&self, cursor: &mut ViewCursor, pos: u64, len: usize) -> Result<Vec<u8>> {
        ClusterCapture::read(self, cursor, pos, len)
    }

    /// Holds nothing of the cluster's: nothing to let go.
    fn closed(&self) {}
}
