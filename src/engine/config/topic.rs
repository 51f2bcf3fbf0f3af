//! The topic view: a topic's overrides as written, and its effective config
//! (Kafka's `LogConfig`) resolved over the broker's.

use std::collections::BTreeMap;

use super::broker::expect_long;
use super::broker::BrokerConfig;
use super::change::{ConfigChange, ConfigScope};
use super::def::{known_topic_def, topic_def, INTERNAL_SEGMENT_BYTES, RETENTION_MS};
use super::error::ConfigError;
use super::properties::{read_persisted, write_persisted};
use super::value::{parse_setting, Setting, Value};

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
    /// Kafka's `preallocate`: a new segment's `.log` is grown to the segment size at once.
    pub preallocate: bool,
    pub parse_key: bool,
    pub key_separator: Vec<u8>,
    /// `None` when `null.marker` is empty: no value is ever read as a tombstone.
    pub null_marker: Option<Vec<u8>>,
    /// [`TopicConfig::render_id`], computed once: every append and read asks for it.
    pub(super) rendering: u32,
}

impl TopicConfig {
    /// Kafka's `segmentSize()`: `internal.segment.bytes` when set, else `segment.bytes`.
    pub fn segment_size(&self) -> i32 {
        self.internal_segment_bytes.unwrap_or(self.segment_bytes)
    }

    /// Which rendering of records into `log` lines this config produces.
    pub fn render_id(&self) -> u32 {
        self.rendering
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

/// Per-topic overrides (`key -> value` as the user wrote them, validated).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TopicOverrides {
    pub(super) values: BTreeMap<String, Setting>,
}

impl TopicOverrides {
    /// Applies a whole command (`key=value`, `-key`, comment and blank lines) that
    /// changes the keys it names; the first bad line refuses all of it.
    pub fn apply_command(
        &self,
        text: &str,
        broker: &BrokerConfig,
    ) -> Result<TopicOverrides, ConfigError> {
        self.apply_change(&ConfigChange::from_text(ConfigScope::Topic, text)?, broker)
    }

    /// The overrides after `change` (a topic change): all of it, checked across keys on
    /// the result, or nothing.
    pub fn apply_change(
        &self,
        change: &ConfigChange,
        broker: &BrokerConfig,
    ) -> Result<TopicOverrides, ConfigError> {
        assert_eq!(change.scope, ConfigScope::Topic, "a topic config change");
        let next = TopicOverrides {
            values: change.applied_to(&self.values)?,
        };
        // `LogConfig.validateValues` runs on the merged config, so a broker default can
        // conflict with a topic override as well as two overrides with each other.
        let effective = broker.resolve_topic(&next);
        if effective.min_compaction_lag_ms > effective.max_compaction_lag_ms {
            return Err(ConfigError::CompactionLagConflict {
                min_ms: effective.min_compaction_lag_ms,
                max_ms: effective.max_compaction_lag_ms,
            });
        }
        Ok(next)
    }

    /// Reads the form written by [`TopicOverrides::to_properties`].
    pub fn from_properties(text: &str) -> Result<TopicOverrides, ConfigError> {
        let mut values = BTreeMap::new();
        for (key, raw) in read_persisted(text)? {
            let topic = known_topic_def(&key)?;
            values.insert(topic.def.name.to_string(), parse_setting(&topic.def, &raw)?);
        }
        Ok(TopicOverrides { values })
    }

    /// The overrides to persist: `key=value` lines, sorted, values escaped.
    pub fn to_properties(&self) -> String {
        write_persisted(self.values.iter())
    }

    /// The override's text as stored (trimmed, except for literal separators).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(|s| s.text.as_str())
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

/// Resolution lives with the topic view: it is what makes a [`TopicConfig`].
impl BrokerConfig {
    /// The topic config of a topic without overrides.
    pub fn topic_defaults(&self) -> TopicConfig {
        self.resolve_topic(&TopicOverrides::default())
    }

    /// Topic override > the broker value of the highest-priority synonym that is set >
    /// the topic config's built-in default.
    pub fn resolve_topic(&self, overrides: &TopicOverrides) -> TopicConfig {
        let value = |name: &str| -> Option<Value> {
            match overrides.values.get(name) {
                Some(setting) => Some(setting.value.clone()),
                None => topic_def(name).and_then(|t| self.inherited_topic_value(t)),
            }
        };
        let long = |name: &str| expect_long(name, value(name));
        let int = |name: &str| {
            let n = expect_long(name, value(name));
            i32::try_from(n).unwrap_or_else(|_| panic!("{name} is an INT config, got {n}"))
        };
        let text = |name: &str| match value(name) {
            Some(Value::Text(s)) => s.into_bytes(),
            other => panic!("{name} is a string config, got {other:?}"),
        };
        let cleanup_policy = match value("cleanup.policy") {
            Some(Value::List(items)) => CleanupPolicy {
                compact: items.iter().any(|p| p == "compact"),
                delete: items.iter().any(|p| p == "delete"),
            },
            other => panic!("cleanup.policy is a LIST config, got {other:?}"),
        };
        let min_cleanable_dirty_ratio = match value("min.cleanable.dirty.ratio") {
            Some(Value::Double(x)) => x,
            other => panic!("min.cleanable.dirty.ratio is a DOUBLE config, got {other:?}"),
        };
        let internal_segment_bytes = match value(INTERNAL_SEGMENT_BYTES) {
            None => None,
            Some(Value::Int(n)) => Some(n),
            other => panic!("internal.segment.bytes is an INT config, got {other:?}"),
        };
        let boolean = |name: &str| match value(name) {
            Some(Value::Boolean(b)) => b,
            other => panic!("{name} is a BOOLEAN config, got {other:?}"),
        };
        let parse_key = boolean("parse.key");
        let null_marker = text("null.marker");
        let key_separator = text("key.separator");
        let rendering = crate::engine::format::render_id(parse_key, &key_separator, &null_marker);
        TopicConfig {
            cleanup_policy,
            retention_ms: long(RETENTION_MS),
            retention_bytes: long("retention.bytes"),
            segment_bytes: int("segment.bytes"),
            internal_segment_bytes,
            segment_ms: long("segment.ms"),
            segment_jitter_ms: long("segment.jitter.ms"),
            segment_index_bytes: int("segment.index.bytes"),
            index_interval_bytes: int("index.interval.bytes"),
            min_cleanable_dirty_ratio,
            delete_retention_ms: long("delete.retention.ms"),
            min_compaction_lag_ms: long("min.compaction.lag.ms"),
            max_compaction_lag_ms: long("max.compaction.lag.ms"),
            file_delete_delay_ms: long("file.delete.delay.ms"),
            max_message_bytes: int("max.message.bytes"),
            flush_messages: long("flush.messages"),
            flush_ms: long("flush.ms"),
            preallocate: boolean("preallocate"),
            parse_key,
            key_separator,
            null_marker: (!null_marker.is_empty()).then_some(null_marker),
            rendering,
        }
    }
}
