//! A store in memory, for driving the FUSE adapter without the engine: topics of one
//! partition whose `log` stream is the lines appended, as written; no segment files,
//! groups or transactions. A test injects a refusal into appends and a failure into
//! reads, to see what the adapter makes of a backend's errors.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{CaptureStore, PartitionStore, Store, TopicStore};
use crate::engine::groups::GroupError;
use crate::engine::partition::BackingFile;
use crate::engine::{ConfigChange, EngineError, Result, TopicDeletionHook};

/// An error to inject: a new one at each call, `EngineError` being no `Clone`.
pub(crate) type Fault = fn() -> EngineError;

/// What the store's topics fail with, set by the test at any time.
#[derive(Default)]
pub(crate) struct Faults {
    pub(crate) append: Mutex<Option<Fault>>,
    pub(crate) read: Mutex<Option<Fault>>,
}

#[derive(Default)]
pub(crate) struct MockStore {
    topics: Mutex<BTreeMap<String, Arc<MockTopic>>>,
    rejections: Mutex<String>,
    pub(crate) faults: Arc<Faults>,
}

impl MockStore {
    /// Every append the store took, each as one write's lines.
    pub(crate) fn appends(&self, topic: &str) -> Vec<String> {
        self.topics.lock()[topic].partition.appends.lock().clone()
    }
}

pub(crate) struct MockTopic {
    name: String,
    deleted: AtomicBool,
    partition: Arc<MockPartition>,
}

pub(crate) struct MockPartition {
    log: Mutex<Vec<u8>>,
    appends: Mutex<Vec<String>>,
    faults: Arc<Faults>,
}

pub(crate) struct MockCapture(Vec<u8>);

fn fail(fault: &Mutex<Option<Fault>>) -> Result<()> {
    fault.lock().map_or(Ok(()), |make| Err(make()))
}

fn slice(bytes: &[u8], pos: u64, len: usize) -> Vec<u8> {
    let start = usize::try_from(pos).unwrap_or(usize::MAX).min(bytes.len());
    bytes[start..start.saturating_add(len).min(bytes.len())].to_vec()
}

impl Store for MockStore {
    type Topic = MockTopic;
    type Partition = MockPartition;
    const SEGMENT_FILES: bool = false;

    fn topic_names(&self) -> Vec<String> {
        self.topics.lock().keys().cloned().collect()
    }

    fn topic(&self, name: &str) -> Option<Arc<MockTopic>> {
        self.topics.lock().get(name).cloned()
    }

    fn create_topic(&self, name: &str) -> Result<()> {
        let mut topics = self.topics.lock();
        if topics.contains_key(name) {
            return Err(EngineError::TopicExists { name: name.into() });
        }
        let partition = Arc::new(MockPartition {
            log: Mutex::new(Vec::new()),
            appends: Mutex::new(Vec::new()),
            faults: Arc::clone(&self.faults),
        });
        let topic = MockTopic {
            name: name.into(),
            deleted: AtomicBool::new(false),
            partition,
        };
        topics.insert(name.into(), Arc::new(topic));
        Ok(())
    }

    fn delete_topic(&self, name: &str) -> Result<()> {
        let topic = self.topics.lock().remove(name);
        let topic = topic.ok_or_else(|| EngineError::UnknownTopic { name: name.into() })?;
        topic.deleted.store(true, Ordering::Release);
        Ok(())
    }

    /// Topics go only through the mount's own `rmdir`: there is nobody else to tell.
    fn on_topic_deletion(&self, _hook: Option<TopicDeletionHook>) {}

    fn record_rejection(&self, path: &str, reason: &str) {
        self.rejections
            .lock()
            .push_str(&format!("{path}: {reason}\n"));
    }

    fn rejections_text(&self) -> String {
        self.rejections.lock().clone()
    }

    fn metrics_text(&self) -> String {
        String::new()
    }

    fn broker_config_text(&self) -> String {
        String::new()
    }

    fn check_broker_change(&self, _change: &ConfigChange) -> Result<()> {
        Ok(())
    }

    fn apply_broker_change(&self, _change: &ConfigChange) -> Result<()> {
        Ok(())
    }

    fn broker_config_warnings(&self) -> Vec<String> {
        Vec::new()
    }

    fn topic_status_text(&self, topic: &MockTopic) -> String {
        self.partition_status_text(&topic.partition)
    }

    fn partition_status_text(&self, partition: &MockPartition) -> String {
        format!("stream_len {}\n", partition.stream_len())
    }

    fn group_ids(&self) -> Vec<String> {
        Vec::new()
    }

    fn group_state_text(&self, _group: &str) -> Option<String> {
        None
    }

    fn group_members_text(&self, _group: &str) -> Option<String> {
        None
    }

    fn group_offsets_text(&self, _group: &str) -> Option<String> {
        None
    }

    fn delete_group(&self, group: &str) -> std::result::Result<(), GroupError> {
        Err(GroupError::GroupIdNotFound {
            group: group.into(),
        })
    }

    fn transactional_ids(&self) -> Vec<String> {
        Vec::new()
    }

    fn transaction_text(&self, _id: &str) -> Option<String> {
        None
    }
}

impl TopicStore for MockTopic {
    type Partition = MockPartition;
    type Cursor = ();
    type Capture = MockCapture;

    fn name(&self) -> &str {
        &self.name
    }

    fn check_not_deleted(&self) -> Result<()> {
        if self.deleted.load(Ordering::Acquire) {
            return Err(EngineError::UnknownTopic {
                name: self.name.clone(),
            });
        }
        Ok(())
    }

    fn is_internal(&self) -> bool {
        false
    }

    fn modified_ms(&self) -> i64 {
        0
    }

    fn events_text(&self) -> String {
        String::new()
    }

    fn partition_count(&self) -> u32 {
        1
    }

    fn partition(&self, index: u32) -> Option<Arc<MockPartition>> {
        (index == 0).then(|| Arc::clone(&self.partition))
    }

    /// The store keeps one partition per topic.
    fn add_partitions(&self, count: u32) -> Result<()> {
        Err(EngineError::InvalidPartitionCount { count })
    }

    fn stream_len(&self) -> u64 {
        self.partition.stream_len()
    }

    fn read_log(&self, cursor: &mut (), pos: u64, len: usize) -> Result<Vec<u8>> {
        self.partition.read_log(cursor, pos, len)
    }

    fn check_unterminated_line(&self, _target: Option<u32>, _len: usize) -> Result<()> {
        Ok(())
    }

    fn append_lines(&self, _target: Option<u32>, head: &[u8], body: &[u8]) -> Result<()> {
        fail(&self.partition.faults.append)?;
        let mut log = self.partition.log.lock();
        log.extend_from_slice(head);
        log.extend_from_slice(body);
        let lines = [head, body].concat();
        self.partition
            .appends
            .lock()
            .push(String::from_utf8_lossy(&lines).into_owned());
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }

    fn config_text(&self) -> String {
        String::new()
    }

    fn check_config_change(&self, _change: &ConfigChange) -> Result<()> {
        Ok(())
    }

    fn apply_config_change(&self, _change: &ConfigChange) -> Result<()> {
        Ok(())
    }

    fn config_warnings(&self) -> Vec<String> {
        Vec::new()
    }

    fn current_capture(&self, _opening: bool) -> Result<MockCapture> {
        Ok(MockCapture(self.partition.log.lock().clone()))
    }
}

impl PartitionStore for MockPartition {
    type Cursor = ();

    fn index(&self) -> u32 {
        0
    }

    fn modified_ms(&self) -> i64 {
        0
    }

    fn stream_len(&self) -> u64 {
        self.log.lock().len() as u64
    }

    fn read_log(&self, _cursor: &mut (), pos: u64, len: usize) -> Result<Vec<u8>> {
        fail(&self.faults.read)?;
        Ok(slice(&self.log.lock(), pos, len))
    }

    fn log_start_offset(&self) -> u64 {
        0
    }

    fn delete_records_before(&self, offset: u64) -> Result<()> {
        Err(EngineError::io(
            format!("delete records before {offset}"),
            io::Error::from(io::ErrorKind::Unsupported),
        ))
    }

    fn segment_files(&self) -> Result<Vec<BackingFile>> {
        Ok(Vec::new())
    }

    fn open_segment_file(&self, name: &str) -> Result<File> {
        Err(EngineError::io(
            format!("open segment file {name}"),
            io::Error::from(io::ErrorKind::NotFound),
        ))
    }
}

impl CaptureStore for MockCapture {
    type Cursor = ();

    fn size(&self) -> u64 {
        self.0.len() as u64
    }

    fn modified_ms(&self) -> i64 {
        0
    }

    fn read(&self, _cursor: &mut (), pos: u64, len: usize) -> Result<Vec<u8>> {
        Ok(slice(&self.0, pos, len))
    }

    fn closed(&self) {}
}
