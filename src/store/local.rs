//! The local engine as a [`Store`]: each method is one engine call (the engine's inherent
//! methods of the same name; `Type::method` paths resolve to them before the trait's).

use std::fs::File;
use std::sync::Arc;

use super::{CaptureStore, PartitionStore, Store, TopicStore};
use crate::engine::groups::GroupError;
use crate::engine::partition::BackingFile;
use crate::engine::{
    metrics, ConfigChange, Engine, LogCursor, Partition, Result, Topic, TopicCapture,
    TopicCaptureCursor, TopicCursor, TopicDeletionHook,
};

impl Store for Engine {
    type Topic = Topic;
    type Partition = Partition;
    const SEGMENT_FILES: bool = true;

    fn topic_names(&self) -> Vec<String> {
        Engine::topic_names(self)
    }

    fn topic(&self, name: &str) -> Option<Arc<Topic>> {
        Engine::topic(self, name)
    }

    fn create_topic(&self, name: &str) -> Result<()> {
        Engine::create_topic(self, name, self.default_partitions()).map(|_| ())
    }

    fn delete_topic(&self, name: &str) -> Result<()> {
        Engine::delete_topic(self, name)
    }

    fn on_topic_deletion(&self, hook: Option<TopicDeletionHook>) {
        Engine::on_topic_deletion(self, hook);
    }

    fn record_rejection(&self, path: &str, reason: &str) {
        Engine::record_rejection(self, path, reason);
    }

    fn rejections_text(&self) -> String {
        Engine::rejections_text(self)
    }

    fn metrics_text(&self) -> String {
        metrics::render(self)
    }

    fn broker_config_text(&self) -> String {
        Engine::broker_config_text(self)
    }

    fn check_broker_change(&self, change: &ConfigChange) -> Result<()> {
        Engine::check_broker_change(self, change)
    }

    fn apply_broker_change(&self, change: &ConfigChange) -> Result<()> {
        Engine::apply_broker_change(self, change)
    }

    fn broker_config_warnings(&self) -> Vec<String> {
        Engine::broker_config_warnings(self)
    }

    fn topic_status_text(&self, topic: &Topic) -> String {
        Engine::topic_status_text(self, topic)
    }

    fn partition_status_text(&self, partition: &Partition) -> String {
        Engine::partition_status_text(self, partition)
    }

    fn group_ids(&self) -> Vec<String> {
        self.groups()
            .list_groups()
            .into_iter()
            .map(|g| g.group_id)
            .collect()
    }

    fn group_state_text(&self, group: &str) -> Option<String> {
        Engine::group_state_text(self, group)
    }

    fn group_members_text(&self, group: &str) -> Option<String> {
        Engine::group_members_text(self, group)
    }

    fn group_offsets_text(&self, group: &str) -> Option<String> {
        Engine::group_offsets_text(self, group)
    }

    fn delete_group(&self, group: &str) -> std::result::Result<(), GroupError> {
        let outcome = self
            .groups()
            .delete_groups(&[group.to_string()])
            .into_iter()
            .next()
            .flatten();
        outcome.map_or(Ok(()), Err)
    }

    fn transactional_ids(&self) -> Vec<String> {
        Engine::transactional_ids(self)
    }

    fn transaction_text(&self, id: &str) -> Option<String> {
        Engine::transaction_text(self, id)
    }
}

impl TopicStore for Topic {
    type Partition = Partition;
    type Cursor = TopicCursor;
    type Capture = TopicCapture;

    fn name(&self) -> &str {
        Topic::name(self)
    }

    fn check_not_deleted(&self) -> Result<()> {
        Topic::check_not_deleted(self)
    }

    fn is_internal(&self) -> bool {
        Topic::is_internal(self)
    }

    fn modified_ms(&self) -> i64 {
        Topic::modified_ms(self)
    }

    fn events_text(&self) -> String {
        Topic::events_text(self)
    }

    fn partition_count(&self) -> u32 {
        Topic::partition_count(self)
    }

    fn partition(&self, index: u32) -> Option<Arc<Partition>> {
        Topic::partition(self, index)
    }

    fn add_partitions(&self, count: u32) -> Result<()> {
        Topic::add_partitions(self, count)
    }

    fn stream_len(&self) -> u64 {
        Topic::stream_len(self)
    }

    fn read_log(&self, cursor: &mut TopicCursor, pos: u64, len: usize) -> Result<Vec<u8>> {
        Topic::read_log(self, cursor, pos, len)
    }

    fn check_unterminated_line(&self, target: Option<u32>, len: usize) -> Result<()> {
        self.partition_for_line(target)?
            .check_unterminated_line(len)
    }

    fn append_lines(&self, target: Option<u32>, head: &[u8], body: &[u8]) -> Result<()> {
        self.append_lines_after(target, head, body).map(|_| ())
    }

    fn sync(&self) -> Result<()> {
        Topic::sync(self)
    }

    fn config_text(&self) -> String {
        Topic::config_text(self)
    }

    fn check_config_change(&self, change: &ConfigChange) -> Result<()> {
        Topic::check_config_change(self, change)
    }

    fn apply_config_change(&self, change: &ConfigChange) -> Result<()> {
        Topic::apply_config_change(self, change)
    }

    fn config_warnings(&self) -> Vec<String> {
        Topic::config_warnings(self)
    }

    fn current_capture(&self, opening: bool) -> Result<TopicCapture> {
        Topic::current_capture(self, opening)
    }
}

impl PartitionStore for Partition {
    type Cursor = LogCursor;

    fn index(&self) -> u32 {
        Partition::index(self)
    }

    fn modified_ms(&self) -> i64 {
        Partition::modified_ms(self)
    }

    fn stream_len(&self) -> u64 {
        Partition::stream_len(self)
    }

    fn read_log(&self, cursor: &mut LogCursor, pos: u64, len: usize) -> Result<Vec<u8>> {
        Partition::read_log(self, cursor, pos, len)
    }

    fn log_start_offset(&self) -> u64 {
        self.log().log_start_offset()
    }

    fn delete_records_before(&self, offset: u64) -> Result<()> {
        Partition::delete_records_before(self, offset).map(|_| ())
    }

    fn segment_files(&self) -> Result<Vec<BackingFile>> {
        self.backing_files()
    }

    fn open_segment_file(&self, name: &str) -> Result<File> {
        self.open_backing_file(name)
    }
}

impl CaptureStore for TopicCapture {
    type Cursor = TopicCaptureCursor;

    fn size(&self) -> u64 {
        TopicCapture::size(self)
    }

    fn modified_ms(&self) -> i64 {
        TopicCapture::modified_ms(self)
    }

    fn read(&self, cursor: &mut TopicCaptureCursor, pos: u64, len: usize) -> Result<Vec<u8>> {
        TopicCapture::read(self, cursor, pos, len)
    }

    fn closed(&self) {
        TopicCapture::closed(self);
    }
}
