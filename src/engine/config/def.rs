//! The config tables: every topic and broker config kpfs knows, with its type, default,
//! validator, broker synonyms (for topic configs) and whether it is dynamic (for broker
//! configs), as Kafka's `ConfigDef`s in `LogConfig`, `ServerLogConfigs`, `CleanerConfig` and
//! `DynamicBrokerConfig` declare them.

use super::error::ConfigError;

/// Kafka's `ConfigDef.Type`, restricted to the types these configs use. `Text` is a string
/// taken literally (no trimming), for the console-producer separators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Int,
    Long,
    Double,
    Boolean,
    List,
    Text,
}

/// Kafka's validators. Bounds are integers because every Kafka bound here is one, and the
/// message prints them as Java prints an `Integer`/`Long`.
#[derive(Clone, Copy, Debug)]
pub(super) enum Check {
    None,
    AtLeast(i64),
    Between(i64, i64),
    /// `ValidList.in("compact", "delete")`, empty allowed, duplicates refused (4.2+).
    CleanupPolicyList,
    /// `ConfigDef.NonEmptyString`.
    NonEmpty,
    /// `atLeast(4)` as Kafka validates it, then what creating an index requires: room for
    /// one entry of the larger index (`AbstractIndex`'s "Invalid max index size").
    IndexSize,
}

/// The size of a `.timeindex` entry, the larger of the two index entries.
pub(super) const MIN_INDEX_BYTES: i64 = 12;

pub(super) struct Def {
    pub(super) name: &'static str,
    pub(super) kind: Kind,
    /// `None` is Kafka's `null` default: unset unless configured.
    pub(super) default: Option<&'static str>,
    pub(super) check: Check,
}

/// A broker config a topic config falls back to, and how many milliseconds one of its
/// units is (1 unless the broker config counts minutes or hours).
pub(super) struct Synonym {
    pub(super) name: &'static str,
    pub(super) ms_per_unit: i64,
}

pub(super) struct TopicDef {
    pub(super) def: Def,
    /// Highest priority first (`ServerTopicConfigSynonyms`).
    pub(super) synonyms: &'static [Synonym],
}

pub(super) struct BrokerDef {
    pub(super) def: Def,
    pub(super) dynamic: bool,
}

const fn def(name: &'static str, kind: Kind, default: Option<&'static str>, check: Check) -> Def {
    Def {
        name,
        kind,
        default,
        check,
    }
}

const fn same(name: &'static str) -> Synonym {
    Synonym {
        name,
        ms_per_unit: 1,
    }
}

pub(super) const MS_PER_MINUTE: i64 = 60 * 1000;
pub(super) const MS_PER_HOUR: i64 = 60 * MS_PER_MINUTE;
const LONG_MAX: &str = "9223372036854775807";
pub(super) const RETENTION_MS: &str = "retention.ms";
pub(super) const INTERNAL_SEGMENT_BYTES: &str = "internal.segment.bytes";
pub(super) const CLEANUP_POLICIES: [&str; 2] = ["compact", "delete"];

pub(super) const TOPIC_DEFS: &[TopicDef] = &[
    TopicDef {
        def: def(
            "cleanup.policy",
            Kind::List,
            Some("delete"),
            Check::CleanupPolicyList,
        ),
        synonyms: &[same("log.cleanup.policy")],
    },
    TopicDef {
        def: def(
            RETENTION_MS,
            Kind::Long,
            Some("604800000"),
            Check::AtLeast(-1),
        ),
        synonyms: &[
            same("log.retention.ms"),
            Synonym {
                name: "log.retention.minutes",
                ms_per_unit: MS_PER_MINUTE,
            },
            Synonym {
                name: "log.retention.hours",
                ms_per_unit: MS_PER_HOUR,
            },
        ],
    },
    TopicDef {
        def: def("retention.bytes", Kind::Long, Some("-1"), Check::None),
        synonyms: &[same("log.retention.bytes")],
    },
    TopicDef {
        def: def(
            "segment.bytes",
            Kind::Int,
            Some("1073741824"),
            Check::AtLeast(1048576),
        ),
        synonyms: &[same("log.segment.bytes")],
    },
    TopicDef {
        def: def(
            "segment.ms",
            Kind::Long,
            Some("604800000"),
            Check::AtLeast(1),
        ),
        synonyms: &[
            same("log.roll.ms"),
            Synonym {
                name: "log.roll.hours",
                ms_per_unit: MS_PER_HOUR,
            },
        ],
    },
    TopicDef {
        def: def(
            "segment.jitter.ms",
            Kind::Long,
            Some("0"),
            Check::AtLeast(0),
        ),
        synonyms: &[
            same("log.roll.jitter.ms"),
            Synonym {
                name: "log.roll.jitter.hours",
                ms_per_unit: MS_PER_HOUR,
            },
        ],
    },
    TopicDef {
        def: def(
            "segment.index.bytes",
            Kind::Int,
            Some("10485760"),
            Check::IndexSize,
        ),
        synonyms: &[same("log.index.size.max.bytes")],
    },
    TopicDef {
        def: def(
            "index.interval.bytes",
            Kind::Int,
            Some("4096"),
            Check::AtLeast(0),
        ),
        synonyms: &[same("log.index.interval.bytes")],
    },
    TopicDef {
        def: def(
            "min.cleanable.dirty.ratio",
            Kind::Double,
            Some("0.5"),
            Check::Between(0, 1),
        ),
        synonyms: &[same("log.cleaner.min.cleanable.ratio")],
    },
    TopicDef {
        def: def(
            "delete.retention.ms",
            Kind::Long,
            Some("86400000"),
            Check::AtLeast(0),
        ),
        synonyms: &[same("log.cleaner.delete.retention.ms")],
    },
    TopicDef {
        def: def(
            "min.compaction.lag.ms",
            Kind::Long,
            Some("0"),
            Check::AtLeast(0),
        ),
        synonyms: &[same("log.cleaner.min.compaction.lag.ms")],
    },
    TopicDef {
        def: def(
            "max.compaction.lag.ms",
            Kind::Long,
            Some(LONG_MAX),
            Check::AtLeast(1),
        ),
        synonyms: &[same("log.cleaner.max.compaction.lag.ms")],
    },
    TopicDef {
        def: def(
            "file.delete.delay.ms",
            Kind::Long,
            Some("60000"),
            Check::AtLeast(0),
        ),
        synonyms: &[same("log.segment.delete.delay.ms")],
    },
    TopicDef {
        def: def(
            "max.message.bytes",
            Kind::Int,
            Some("1048588"),
            Check::AtLeast(0),
        ),
        synonyms: &[same("message.max.bytes")],
    },
    TopicDef {
        def: def(
            "flush.messages",
            Kind::Long,
            Some(LONG_MAX),
            Check::AtLeast(1),
        ),
        synonyms: &[same("log.flush.interval.messages")],
    },
    TopicDef {
        def: def("flush.ms", Kind::Long, Some(LONG_MAX), Check::AtLeast(0)),
        synonyms: &[
            same("log.flush.interval.ms"),
            same("log.flush.scheduler.interval.ms"),
        ],
    },
    TopicDef {
        def: def("preallocate", Kind::Boolean, Some("false"), Check::None),
        synonyms: &[same("log.preallocate")],
    },
    TopicDef {
        // Kafka's test-only way around the 1 MiB `segment.bytes` floor; deliberately unchecked.
        def: def(INTERNAL_SEGMENT_BYTES, Kind::Int, None, Check::None),
        synonyms: &[],
    },
    TopicDef {
        def: def("parse.key", Kind::Boolean, Some("false"), Check::None),
        synonyms: &[],
    },
    TopicDef {
        def: def("key.separator", Kind::Text, Some("\t"), Check::NonEmpty),
        synonyms: &[],
    },
    TopicDef {
        def: def("null.marker", Kind::Text, Some(""), Check::None),
        synonyms: &[],
    },
];

const fn dynamic(def: Def) -> BrokerDef {
    BrokerDef { def, dynamic: true }
}

const fn fixed(def: Def) -> BrokerDef {
    BrokerDef {
        def,
        dynamic: false,
    }
}

/// Dynamic = the first synonym of every topic config (`DynamicLogConfig`) plus
/// `LogCleaner.RECONFIGURABLE_CONFIGS`; everything else needs a restart (remount).
pub(super) const BROKER_DEFS: &[BrokerDef] = &[
    dynamic(def(
        "log.cleanup.policy",
        Kind::List,
        Some("delete"),
        Check::CleanupPolicyList,
    )),
    dynamic(def("log.retention.ms", Kind::Long, None, Check::None)),
    fixed(def("log.retention.minutes", Kind::Int, None, Check::None)),
    fixed(def(
        "log.retention.hours",
        Kind::Int,
        Some("168"),
        Check::None,
    )),
    dynamic(def(
        "log.retention.bytes",
        Kind::Long,
        Some("-1"),
        Check::None,
    )),
    dynamic(def(
        "log.segment.bytes",
        Kind::Int,
        Some("1073741824"),
        Check::AtLeast(1048576),
    )),
    dynamic(def("log.roll.ms", Kind::Long, None, Check::None)),
    fixed(def(
        "log.roll.hours",
        Kind::Int,
        Some("168"),
        Check::AtLeast(1),
    )),
    dynamic(def("log.roll.jitter.ms", Kind::Long, None, Check::None)),
    fixed(def(
        "log.roll.jitter.hours",
        Kind::Int,
        Some("0"),
        Check::AtLeast(0),
    )),
    dynamic(def(
        "log.index.size.max.bytes",
        Kind::Int,
        Some("10485760"),
        Check::IndexSize,
    )),
    dynamic(def(
        "log.index.interval.bytes",
        Kind::Int,
        Some("4096"),
        Check::AtLeast(0),
    )),
    dynamic(def(
        "log.cleaner.min.cleanable.ratio",
        Kind::Double,
        Some("0.5"),
        Check::Between(0, 1),
    )),
    dynamic(def(
        "log.cleaner.delete.retention.ms",
        Kind::Long,
        Some("86400000"),
        Check::AtLeast(0),
    )),
    dynamic(def(
        "log.cleaner.min.compaction.lag.ms",
        Kind::Long,
        Some("0"),
        Check::AtLeast(0),
    )),
    dynamic(def(
        "log.cleaner.max.compaction.lag.ms",
        Kind::Long,
        Some(LONG_MAX),
        Check::AtLeast(1),
    )),
    dynamic(def(
        "log.segment.delete.delay.ms",
        Kind::Long,
        Some("60000"),
        Check::AtLeast(0),
    )),
    dynamic(def(
        "message.max.bytes",
        Kind::Int,
        Some("1048588"),
        Check::AtLeast(0),
    )),
    dynamic(def(
        "log.preallocate",
        Kind::Boolean,
        Some("false"),
        Check::None,
    )),
    dynamic(def(
        "log.flush.interval.messages",
        Kind::Long,
        Some(LONG_MAX),
        Check::AtLeast(1),
    )),
    dynamic(def("log.flush.interval.ms", Kind::Long, None, Check::None)),
    fixed(def(
        "log.flush.scheduler.interval.ms",
        Kind::Long,
        Some(LONG_MAX),
        Check::None,
    )),
    fixed(def(
        "log.flush.offset.checkpoint.interval.ms",
        Kind::Int,
        Some("60000"),
        Check::AtLeast(0),
    )),
    fixed(def(
        "log.retention.check.interval.ms",
        Kind::Long,
        Some("300000"),
        Check::AtLeast(1),
    )),
    fixed(def(
        "log.cleaner.enable",
        Kind::Boolean,
        Some("true"),
        Check::None,
    )),
    dynamic(def(
        "log.cleaner.threads",
        Kind::Int,
        Some("1"),
        Check::AtLeast(0),
    )),
    dynamic(def(
        "log.cleaner.backoff.ms",
        Kind::Long,
        Some("15000"),
        Check::AtLeast(0),
    )),
    dynamic(def(
        "log.cleaner.dedupe.buffer.size",
        Kind::Long,
        Some("134217728"),
        Check::None,
    )),
    dynamic(def(
        "log.cleaner.io.buffer.size",
        Kind::Int,
        Some("524288"),
        Check::AtLeast(0),
    )),
    dynamic(def(
        "log.cleaner.io.buffer.load.factor",
        Kind::Double,
        Some("0.9"),
        Check::None,
    )),
    dynamic(def(
        "log.cleaner.io.max.bytes.per.second",
        Kind::Double,
        Some("1.7976931348623157E308"),
        Check::None,
    )),
];

pub(super) fn topic_def(name: &str) -> Option<&'static TopicDef> {
    TOPIC_DEFS.iter().find(|t| t.def.name == name)
}

pub(super) fn broker_def(name: &str) -> Option<&'static BrokerDef> {
    BROKER_DEFS.iter().find(|b| b.def.name == name)
}

pub(super) fn known_topic_def(key: &str) -> Result<&'static TopicDef, ConfigError> {
    topic_def(key).ok_or_else(|| ConfigError::UnknownTopicConfig {
        name: key.to_string(),
    })
}

pub(super) fn known_broker_def(key: &str) -> Result<&'static BrokerDef, ConfigError> {
    broker_def(key).ok_or_else(|| ConfigError::UnknownBrokerConfig {
        name: key.to_string(),
    })
}
