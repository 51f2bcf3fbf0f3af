//! What the partitions of a topic share ([`TopicCore`]): its name, configuration,
//! rendering gate, `events`, the log-start checkpoint and the append signal. A
//! [`Partition`](super::partition::Partition) holds the core of its topic; the
//! [`Topic`](super::topic::Topic) holds the core and its partitions.

use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock, RwLockReadGuard};

use super::append_watch::AppendSignal;
use super::clock::Clock;
use super::config::{BrokerConfig, TopicConfig, TopicOverrides};
use super::error::{EngineError, InternalTopicAction, Result};
use super::events::EventLog;
use super::format::{OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC};
use super::log_start_checkpoint::LogStartCheckpoint;

/// What the partitions of a topic share.
pub(crate) struct TopicCore {
    pub(crate) name: String,
    pub(crate) broker: Arc<RwLock<BrokerConfig>>,
    pub(crate) overrides: RwLock<TopicOverrides>,
    /// Why the overrides in force are not yet in `topic.properties` (the disk was full
    /// when they changed); saved as soon as there is space.
    pub(crate) unsaved_overrides: Mutex<Option<String>>,
    pub(crate) config: RwLock<Arc<TopicConfig>>,
    /// Held shared by each append from the config it reads until its records are in
    /// their log, and exclusively by a change of rendering (see
    /// [`Topic::apply_config_change`]), so the log end offset of every partition divides
    /// the records of the two renderings exactly.
    pub(crate) rendering_gate: RwLock<()>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) events: EventLog,
    /// The data directory's `log-start-offset-checkpoint`, which DeleteRecords writes.
    pub(crate) log_starts: Arc<LogStartCheckpoint>,
    /// Wakes long-poll fetches and followers of `log` waiting for this topic's appends.
    pub(crate) append_signal: AppendSignal,
    /// `topic.properties`, in partition 0's kpfs folder (where a topic of one partition
    /// has always kept it).
    pub(crate) config_path: PathBuf,
}

impl TopicCore {
    pub(crate) fn config(&self) -> Arc<TopicConfig> {
        self.config.read().clone()
    }

    pub(crate) fn is_internal(&self) -> bool {
        self.name == OFFSETS_TOPIC || self.name == TRANSACTION_STATE_TOPIC
    }

    pub(crate) fn overrides(&self) -> RwLockReadGuard<'_, TopicOverrides> {
        self.overrides.read()
    }

    /// Why the overrides in force are not saved yet, if they are not.
    pub(crate) fn unsaved_overrides(&self) -> Option<String> {
        self.unsaved_overrides.lock().clone()
    }

    pub(crate) fn broker(&self) -> &RwLock<BrokerConfig> {
        &self.broker
    }

    /// Refuses `action` on an internal topic, as Kafka's `InvalidTopicException`.
    pub(crate) fn refuse_internal(&self, action: InternalTopicAction) -> Result<()> {
        if self.is_internal() {
            return Err(EngineError::InternalTopic {
                name: self.name.clone(),
                action,
            });
        }
        Ok(())
    }

    /// Adds a line about the whole topic to its `events`.
    pub(crate) fn record_event(&self, kind: &str, detail: &str) {
        self.events
            .record(self.clock.now_ms(), &self.name, kind, detail);
    }
}
