//! The topic view: a topic's overrides as written, and its effective config
//! (Kafka's `LogConfig`) resolved over the broker's.

use crate::engine::stream_index::StreamShape;
use crate::lines::{LineFormat, NULL_LITERAL};
use std::collections::BTreeMap;

use super::broker::BrokerConfig;
use super::change::ConfigChange;
use super::def::TopicKey;
use super::error::ConfigError;
use super::properties::{read_persisted, write_persisted};
use super::value::{parse_setting, read, Setting, Value};
use crate::engine::codec::{Compression, CompressionCodec};

/// Which cleanup a topic gets. An empty list (allowed since Kafka 4.2) means neither.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub(crate) struct CleanupPolicy {
    pub(crate) compact: bool,
    pub(crate) delete: bool,
}

/// Kafka's `LogConfig.compression`: `compression.type` with the level of its codec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TopicCompression {
    /// `producer`: each batch keeps the codec its producer compressed it with.
    Producer,
    /// `uncompressed` ([`Compression::NONE`]) or a codec at its `compression.*.level`:
    /// every batch is written with it.
    Fixed(Compression),
}

impl TopicCompression {
    /// Kafka's `BrokerCompressionType.targetCompression`: what a batch its producer
    /// compressed with `producer` is written as (the producer's codec at its default level
    /// under `producer`).
    pub(crate) fn target(self, producer: CompressionCodec) -> Compression {
        match self {
            TopicCompression::Producer => Compression::default_level(producer),
            TopicCompression::Fixed(compression) => compression,
        }
    }

    /// What the log writes a FUSE append as: lines are uncompressed producer data.
    pub(crate) fn for_fuse_append(self) -> Compression {
        self.target(CompressionCodec::None)
    }
}

/// Kafka's `TimestampType` as `message.timestamp.type` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TimestampType {
    /// Records keep the timestamps their producer gave them (checked against
    /// `message.timestamp.before.max.ms` and `message.timestamp.after.max.ms`).
    CreateTime,
    /// Every batch is stamped with the broker's clock when it is appended.
    LogAppendTime,
}

/// The effective configuration of one topic (overrides resolved over broker defaults).
#[derive(Clone, Debug, PartialEq)]
pub struct TopicConfig {
    pub(crate) cleanup_policy: CleanupPolicy,
    pub(crate) retention_ms: i64,
    pub(crate) retention_bytes: i64,
    pub(crate) segment_bytes: i32,
    pub(crate) internal_segment_bytes: Option<i32>,
    pub(crate) segment_ms: i64,
    pub(crate) segment_jitter_ms: i64,
    pub(crate) segment_index_bytes: i32,
    pub(crate) index_interval_bytes: i32,
    pub(crate) min_cleanable_dirty_ratio: f64,
    pub(crate) delete_retention_ms: i64,
    pub(crate) min_compaction_lag_ms: i64,
    pub(crate) max_compaction_lag_ms: i64,
    pub(crate) file_delete_delay_ms: i64,
    pub(crate) max_message_bytes: i32,
    pub(crate) flush_messages: i64,
    pub(crate) flush_ms: i64,
    pub(crate) message_timestamp_type: TimestampType,
    pub(crate) message_timestamp_before_max_ms: i64,
    pub(crate) message_timestamp_after_max_ms: i64,
    /// The broker's `producer.id.expiration.ms`, which every partition's producer state
    /// follows (no topic config overrides it).
    pub(crate) producer_id_expiration_ms: i64,
    /// Kafka's `preallocate`: a new segment's `.log` is grown to the segment size at once.
    pub(crate) preallocate: bool,
    pub(crate) compression: TopicCompression,
    pub(crate) parse_key: bool,
    pub(crate) key_separator: Vec<u8>,
    /// `None` when `null.marker` is empty: no value is ever read as a tombstone.
    pub(crate) null_marker: Option<Vec<u8>>,
    /// [`TopicConfig::stream_shape`], computed once: every append and read asks for it.
    pub(super) shape: StreamShape,
}

impl TopicConfig {
    /// Kafka's `segmentSize()`: `internal.segment.bytes` when set, else `segment.bytes`.
    pub(crate) fn segment_size(&self) -> i32 {
        self.internal_segment_bytes.unwrap_or(self.segment_bytes)
    }

    /// How many `log` bytes records take under this config's rendering.
    pub(crate) fn stream_shape(&self) -> StreamShape {
        self.shape
    }

    /// What a null key or value renders as.
    pub(crate) fn null_rendering(&self) -> &[u8] {
        self.line_format().null_rendering()
    }

    /// The topic's line protocol (`parse.key`, `key.separator`, `null.marker`).
    pub(crate) fn line_format(&self) -> LineFormat<'_> {
        LineFormat {
            parse_key: self.parse_key,
            key_separator: &self.key_separator,
            null_marker: self.null_marker.as_deref(),
        }
    }

    /// Kafka's `maxSegmentMs()`: compacted topics roll no later than `max.compaction.lag.ms`.
    pub(crate) fn max_segment_ms(&self) -> i64 {
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
    pub(super) values: BTreeMap<TopicKey, Setting>,
}

impl TopicOverrides {
    /// Applies a whole command (`key=value`, `-key`, comment and blank lines) that
    /// changes the keys it names; the first bad line refuses all of it.
    #[cfg(any(test, feature = "internals"))]
    pub fn apply_command(
        &self,
        text: &str,
        broker: &BrokerConfig,
    ) -> Result<TopicOverrides, ConfigError> {
        self.apply_change(
            &ConfigChange::from_text(super::ConfigScope::Topic, text)?,
            broker,
        )
    }

    /// The overrides after `change` (a topic change): all of it, checked across keys on
    /// the result, or nothing.
    pub(crate) fn apply_change(
        &self,
        change: &ConfigChange,
        broker: &BrokerConfig,
    ) -> Result<TopicOverrides, ConfigError> {
        let next = TopicOverrides {
            values: change.applied_to_topic(&self.values)?,
        };
        // `LogConfig.validateValues` runs on the merged config, so a broker default can
        // conflict with a topic override as well as two overrides with each other.
        let effective = broker.resolve_topic(&next);
        if next
            .values
            .get(&TopicKey::RemoteStorageEnable)
            .is_some_and(|s| s.value == Value::Boolean(true))
        {
            return Err(ConfigError::TieredStorageDisabled);
        }
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
            let key = TopicKey::known(&key)?;
            values.insert(key, parse_setting(key.def(), &raw)?);
        }
        Ok(TopicOverrides { values })
    }

    /// The overrides to persist: `key=value` lines, sorted, values escaped.
    pub fn to_properties(&self) -> String {
        write_persisted(self.values.iter())
    }

    /// The override's text as stored (trimmed, except for literal separators).
    pub(crate) fn get(&self, key: TopicKey) -> Option<&str> {
        self.values.get(&key).map(|s| s.text.as_str())
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

/// Resolution lives with the topic view: it is what makes a [`TopicConfig`].
impl BrokerConfig {
    /// The topic config of a topic without overrides.
    #[cfg(test)]
    pub(crate) fn topic_defaults(&self) -> TopicConfig {
        self.resolve_topic(&TopicOverrides::default())
    }

    /// Topic override > the broker value of the highest-priority synonym that is set >
    /// the topic config's built-in default.
    pub fn resolve_topic(&self, overrides: &TopicOverrides) -> TopicConfig {
        let value = |key: TopicKey| -> Option<Value> {
            match overrides.values.get(&key) {
                Some(setting) => Some(setting.value.clone()),
                None => self.inherited_topic_value(key),
            }
        };
        let long = |key: TopicKey| -> i64 { read(key, value(key)) };
        let int = |key: TopicKey| -> i32 { read(key, value(key)) };
        let boolean = |key: TopicKey| -> bool { read(key, value(key)) };
        let text = |key: TopicKey| -> Vec<u8> { read::<String>(key, value(key)).into_bytes() };
        let policies: Vec<String> = read(TopicKey::CleanupPolicy, value(TopicKey::CleanupPolicy));
        let cleanup_policy = CleanupPolicy {
            compact: policies.iter().any(|p| p == "compact"),
            delete: policies.iter().any(|p| p == "delete"),
        };
        let min_cleanable_dirty_ratio: f64 = read(
            TopicKey::MinCleanableDirtyRatio,
            value(TopicKey::MinCleanableDirtyRatio),
        );
        // Kafka's null default: unset unless configured.
        let internal_segment_bytes = value(TopicKey::InternalSegmentBytes)
            .map(|v| read::<i32>(TopicKey::InternalSegmentBytes, Some(v)));
        let compression =
            match read::<String>(TopicKey::CompressionType, value(TopicKey::CompressionType))
                .as_str()
            {
                "producer" => TopicCompression::Producer,
                "uncompressed" => TopicCompression::Fixed(Compression::NONE),
                name => {
                    let codec = CompressionCodec::from_name(name)
                        .unwrap_or_else(|| panic!("compression.type {name} passed its validator"));
                    let level = match codec {
                        CompressionCodec::Gzip => int(TopicKey::CompressionGzipLevel),
                        CompressionCodec::Lz4 => int(TopicKey::CompressionLz4Level),
                        CompressionCodec::Zstd => int(TopicKey::CompressionZstdLevel),
                        CompressionCodec::None | CompressionCodec::Snappy => 0,
                    };
                    TopicCompression::Fixed(
                        Compression::with_level(codec, level)
                            .unwrap_or_else(|e| panic!("a level that passed its validator: {e}")),
                    )
                }
            };
        let message_timestamp_type = match read::<String>(
            TopicKey::MessageTimestampType,
            value(TopicKey::MessageTimestampType),
        )
        .as_str()
        {
            "CreateTime" => TimestampType::CreateTime,
            "LogAppendTime" => TimestampType::LogAppendTime,
            other => panic!("message.timestamp.type {other} passed its validator"),
        };
        let parse_key = boolean(TopicKey::ParseKey);
        let null_marker = text(TopicKey::NullMarker);
        let key_separator = text(TopicKey::KeySeparator);
        let shape = StreamShape {
            separator_len: parse_key.then_some(key_separator.len() as u32),
            null_len: if null_marker.is_empty() {
                NULL_LITERAL.len()
            } else {
                null_marker.len()
            } as u32,
        };
        TopicConfig {
            cleanup_policy,
            retention_ms: long(TopicKey::RetentionMs),
            retention_bytes: long(TopicKey::RetentionBytes),
            segment_bytes: int(TopicKey::SegmentBytes),
            internal_segment_bytes,
            segment_ms: long(TopicKey::SegmentMs),
            segment_jitter_ms: long(TopicKey::SegmentJitterMs),
            segment_index_bytes: int(TopicKey::SegmentIndexBytes),
            index_interval_bytes: int(TopicKey::IndexIntervalBytes),
            min_cleanable_dirty_ratio,
            delete_retention_ms: long(TopicKey::DeleteRetentionMs),
            min_compaction_lag_ms: long(TopicKey::MinCompactionLagMs),
            max_compaction_lag_ms: long(TopicKey::MaxCompactionLagMs),
            file_delete_delay_ms: long(TopicKey::FileDeleteDelayMs),
            max_message_bytes: int(TopicKey::MaxMessageBytes),
            flush_messages: long(TopicKey::FlushMessages),
            flush_ms: long(TopicKey::FlushMs),
            message_timestamp_type,
            message_timestamp_before_max_ms: long(TopicKey::MessageTimestampBeforeMaxMs),
            message_timestamp_after_max_ms: long(TopicKey::MessageTimestampAfterMaxMs),
            producer_id_expiration_ms: self.producer_id_expiration_ms(),
            preallocate: boolean(TopicKey::Preallocate),
            compression,
            parse_key,
            key_separator,
            null_marker: (!null_marker.is_empty()).then_some(null_marker),
            shape,
        }
    }
}
