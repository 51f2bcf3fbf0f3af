//! Topic and broker configuration: names, defaults, validators and error texts as in
//! Apache Kafka 4.x (`LogConfig`, `ServerLogConfigs`, `CleanerConfig`,
//! `DynamicBrokerConfig`). SKELETON: bodies are filled in by the config work item.

use std::collections::BTreeMap;
use std::fmt;

/// Which cleanup a topic gets. An empty list (allowed since Kafka 4.2) means neither.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct CleanupPolicy {
    pub compact: bool,
    pub delete: bool,
}

/// The effective configuration of one topic (overrides resolved over broker defaults).
#[derive(Clone, Debug, PartialEq)]
pub struct TopicConfig {
    pub cleanup_policy: CleanupPolicy,
    pub retention_ms: i64,
    pub retention_bytes: i64,
    pub segment_bytes: i32,
    pub internal_segment_bytes: Option<i32>,
    pub segment_ms: i64,
    pub segment_jitter_ms: i64,
    pub segment_index_bytes: i32,
    pub index_interval_bytes: i32,
    pub min_cleanable_dirty_ratio: f64,
    pub delete_retention_ms: i64,
    pub min_compaction_lag_ms: i64,
    pub max_compaction_lag_ms: i64,
    pub file_delete_delay_ms: i64,
    pub max_message_bytes: i32,
    pub flush_messages: i64,
    pub flush_ms: i64,
    pub parse_key: bool,
    pub key_separator: Vec<u8>,
    /// `None` when `null.marker` is empty: no value is ever read as a tombstone.
    pub null_marker: Option<Vec<u8>>,
}

impl TopicConfig {
    /// Kafka's `segmentSize()`: `internal.segment.bytes` when set, else `segment.bytes`.
    pub fn segment_size(&self) -> i32 {
        self.internal_segment_bytes.unwrap_or(self.segment_bytes)
    }

    /// Kafka's `maxSegmentMs()`: compacted topics roll no later than `max.compaction.lag.ms`.
    pub fn max_segment_ms(&self) -> i64 {
        if self.cleanup_policy.compact && self.max_compaction_lag_ms > 0 {
            self.max_compaction_lag_ms.min(self.segment_ms)
        } else {
            self.segment_ms
        }
    }
}

/// A configuration error, displayed in Kafka's wording.
#[derive(Clone, Debug, PartialEq)]
pub enum ConfigError {
    Placeholder(String),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Placeholder(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Per-topic overrides (`key -> value` as the user wrote them, validated).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TopicOverrides {
    values: BTreeMap<String, String>,
}

impl TopicOverrides {
    pub fn apply_command(&self, _text: &str, _broker: &BrokerConfig) -> Result<TopicOverrides, ConfigError> {
        todo!()
    }
    pub fn from_properties(_text: &str) -> Result<TopicOverrides, ConfigError> {
        todo!()
    }
    pub fn to_properties(&self) -> String {
        todo!()
    }
    pub fn render_effective(&self, _broker: &BrokerConfig) -> String {
        todo!()
    }
}

/// Effective broker configuration.
#[derive(Clone, Debug)]
pub struct BrokerConfig {
    values: BTreeMap<String, String>,
}

impl BrokerConfig {
    pub fn defaults() -> BrokerConfig {
        BrokerConfig {
            values: BTreeMap::new(),
        }
    }
    pub fn topic_defaults(&self) -> TopicConfig {
        todo!()
    }
    pub fn resolve_topic(&self, _overrides: &TopicOverrides) -> TopicConfig {
        todo!()
    }
    pub fn retention_check_interval_ms(&self) -> i64 {
        todo!()
    }
    pub fn load(_p: Option<&str>, _o: &[(String, String)]) -> Result<BrokerConfig, ConfigError> {
        todo!()
    }
    pub fn apply_dynamic(&self, _text: &str) -> Result<BrokerConfig, ConfigError> {
        todo!()
    }
    pub fn dynamic_properties(&self) -> String {
        todo!()
    }
    pub fn with_dynamic_properties(&self, _text: &str) -> Result<BrokerConfig, ConfigError> {
        todo!()
    }
    pub fn render(&self) -> String {
        todo!()
    }
    pub fn cleaner_enable(&self) -> bool {
        todo!()
    }
    pub fn cleaner_threads(&self) -> i32 {
        todo!()
    }
    pub fn cleaner_backoff_ms(&self) -> i64 {
        todo!()
    }
    pub fn cleaner_dedupe_buffer_size(&self) -> i64 {
        todo!()
    }
    pub fn cleaner_io_buffer_load_factor(&self) -> f64 {
        todo!()
    }
    pub fn cleaner_io_max_bytes_per_second(&self) -> f64 {
        todo!()
    }
}
