//! The storage engine: topics, logs, segments, indexes, retention, the cleaner and
//! recovery. It knows nothing of FUSE; the `fs` layer maps paths and handles onto it.

pub mod clock;
pub mod config;
pub mod error;
pub mod topic;

use std::path::Path;
use std::sync::Arc;

pub use clock::{Clock, ManualClock, SystemClock};
pub use config::{BrokerConfig, ConfigError, TopicConfig};
pub use config::{BrokerRule, CleanupPolicy, TopicOverrides};
pub use error::{EngineError, Result};
pub use topic::{BackingFile, LogCursor, Topic};

/// Options that are not Kafka configs.
#[derive(Clone, Debug, Default)]
pub struct EngineOptions {
    /// Start the retention, cleaner and deletion threads (the daemon does; most tests drive
    /// `run_retention_once` / `run_cleaner_once` themselves).
    pub background_threads: bool,
}

/// An open data directory.
pub struct Engine {
    _private: (),
}

impl Engine {
    /// Opens (creating if missing) a data directory, takes its lock, recovers every topic.
    pub fn open(
        _data_dir: &Path,
        _broker: BrokerConfig,
        _clock: Arc<dyn Clock>,
        _options: EngineOptions,
    ) -> Result<Engine> {
        todo!()
    }

    /// Stops background threads, flushes and closes every topic and marks the data
    /// directory cleanly closed. Idempotent.
    pub fn shutdown(&self) -> Result<()> {
        todo!()
    }

    /// Topic names, sorted.
    pub fn topic_names(&self) -> Vec<String> {
        todo!()
    }

    pub fn topic(&self, _name: &str) -> Option<Arc<Topic>> {
        todo!()
    }

    pub fn create_topic(&self, _name: &str) -> Result<Arc<Topic>> {
        todo!()
    }

    /// Deletes a topic and its data. Open readers keep their file handles.
    pub fn delete_topic(&self, _name: &str) -> Result<()> {
        todo!()
    }

    /// `.kpfs/config`: every broker config with its effective value, `key=value` lines.
    pub fn broker_config_text(&self) -> String {
        todo!()
    }

    /// A write to `.kpfs/config`: `key=value` lines of dynamic broker configs.
    pub fn update_broker_config(&self, _text: &[u8]) -> Result<()> {
        todo!()
    }

    /// Remembers a refused operation for `.kpfs/errors`.
    pub fn record_rejection(&self, _path: &str, _reason: &str) {
        todo!()
    }

    /// `.kpfs/errors`: recent refused operations, newest last, one per line.
    pub fn rejections_text(&self) -> String {
        todo!()
    }
}
