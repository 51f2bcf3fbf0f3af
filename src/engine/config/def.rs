//! The config tables: every topic and broker config kpfs acts on, with its type, default,
//! validator, broker synonyms (for topic configs) and whether it is dynamic (for broker
//! configs), as Kafka's `ConfigDef`s in `LogConfig`, `ServerLogConfigs`, `CleanerConfig` and
//! `DynamicBrokerConfig` declare them. The rest of Kafka's broker configs come from the
//! generated `kafka_broker_configs.rs`: accepted and kept, with no effect in kpfs. Group
//! configs (Kafka's `GroupConfig`) come from the generated `kafka_group_configs.rs`, with
//! the bounds Kafka draws from broker configs ([`GROUP_BOUNDS`]).

use super::error::{ConfigError, ListenerRule};
use super::kafka_broker_configs::KAFKA_BROKER_DEFS;
use super::kafka_group_configs::KAFKA_GROUP_DEFS;
use crate::engine::codec::{GZIP_LEVELS, LZ4_LEVELS, ZSTD_LEVELS};
use crate::engine::limits::MIN_SEGMENT_BYTES;

/// Declares a key enum and its table of definitions from one list, so the n-th key's
/// definition is the n-th row by construction and every key has exactly one.
macro_rules! config_table {
    (
        $(#[$doc:meta])*
        enum $Key:ident, const $TABLE:ident: [$Row:ty] { $($Variant:ident => $row:expr,)* }
    ) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub(crate) enum $Key {
            $($Variant,)*
        }

        pub(super) const $TABLE: &[$Row] = &[$($row,)*];

        impl $Key {
            pub(super) const ALL: &'static [$Key] = &[$($Key::$Variant,)*];

            pub(super) fn row(self) -> &'static $Row {
                &$TABLE[self as usize]
            }

            pub(super) fn def(self) -> &'static Def {
                &self.row().def
            }

            /// The config's name as Kafka spells it.
            pub(crate) fn name(self) -> &'static str {
                self.def().name
            }

            fn from_name(name: &str) -> Option<$Key> {
                $Key::ALL.iter().copied().find(|key| key.name() == name)
            }
        }

        /// Keys sort by name, as Kafka lists configs.
        impl Ord for $Key {
            fn cmp(&self, other: &$Key) -> std::cmp::Ordering {
                self.name().cmp(other.name())
            }
        }

        impl PartialOrd for $Key {
            fn partial_cmp(&self, other: &$Key) -> Option<std::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }

        impl std::fmt::Display for $Key {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

/// Kafka's `ConfigDef.Type`. `Text` is a string taken literally (no trimming), for the
/// console-producer separators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Int,
    Short,
    Long,
    Double,
    Boolean,
    List,
    /// Kafka's `STRING`: trimmed, as numbers are.
    String,
    /// A Java class name. Kafka loads the class to check it; kpfs, which has none to load,
    /// takes the trimmed name.
    Class,
    /// A secret: kept like a `String`, never shown (Kafka's DescribeConfigs sends null).
    Password,
    Text,
}

/// Kafka's validators. Bounds are integers because every Kafka bound here is one, and the
/// message prints them as Java prints an `Integer`/`Long`.
#[derive(Clone, Copy, Debug)]
pub(super) enum Check {
    None,
    AtLeast(i64),
    Between(i64, i64),
    /// `CompressionType.GZIP.levelValidator()`: in the range, or equal to the default (-1).
    BetweenOrEqual {
        min: i64,
        max: i64,
        or: i64,
    },
    /// `ConfigDef.ValidString.in(...)`: exactly one of these (case matters).
    OneOf(&'static [&'static str]),
    /// `ConfigDef.CaseInsensitiveValidString.in(...)`.
    OneOfIgnoreCase(&'static [&'static str]),
    /// `ConfigDef.ValidList` (4.2+): no duplicates, no empty item, each item one of
    /// `allowed` unless it is empty, and the list itself empty only if `empty`.
    List {
        allowed: &'static [&'static str],
        empty: bool,
    },
    /// `ConfigDef.NonEmptyString`.
    NonEmpty,
    /// `ThrottledReplicaListValidator`: `*`, or `PARTITION:BROKER` items (empty ones too).
    ThrottledReplicas,
    /// `atLeast(4)` as Kafka validates it, then what creating an index requires: room for
    /// one entry of the larger index (`AbstractIndex`'s "Invalid max index size").
    IndexSize,
    /// A listener list, parsed as `KafkaConfig` parses `listeners` (Kafka checks it when
    /// the broker's config is built rather than in a `ConfigDef` validator).
    Listeners,
}

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
    pub(super) key: SynonymKey,
    pub(super) ms_per_unit: i64,
}

/// A topic config's broker synonym: one of kpfs's own broker configs, or one of the rest
/// of Kafka's (the generated table's names are not Rust items, so it is named).
#[derive(Clone, Copy, Debug)]
pub(super) enum SynonymKey {
    Own(BrokerKey),
    Kafka(&'static str),
}

impl Synonym {
    pub(super) fn broker(&self) -> BrokerName {
        match self.key {
            SynonymKey::Own(key) => BrokerName::Own(key),
            // The tests check that every named synonym is in the generated table.
            SynonymKey::Kafka(name) => BrokerName::known(name)
                .unwrap_or_else(|_| panic!("{name}, a topic config's synonym, is a broker config")),
        }
    }
}

pub(super) struct TopicDef {
    pub(super) def: Def,
    /// Highest priority first (`ServerTopicConfigSynonyms`).
    pub(super) synonyms: &'static [Synonym],
}

/// How a broker config may change while kpfs runs (`DynamicBrokerConfig`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Update {
    /// Read-only: only a remount (Kafka: a restart) changes it.
    Static,
    /// Dynamic at the cluster-wide default level, which `.kpfs/config` is.
    ClusterWide,
    /// Dynamic only for one broker by id (`DynamicBrokerConfig.PerBrokerConfigs`): the
    /// per-broker overrides of `.kpfs/config`, refused at the cluster-wide level.
    PerBroker,
    /// One of `DynamicBrokerConfig.DYNAMIC_SECURITY_CONFIGS`: dynamic only per listener,
    /// under a `listener.name.NAME.` prefix kpfs has no listener for, so always refused.
    ListenerPrefix,
}

/// The level of a dynamic broker config (Kafka's `ConfigResource` of type BROKER named
/// `""` or by the broker's id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum BrokerLevel {
    /// The cluster-wide default (`kafka-configs.sh --entity-default`):
    /// `DYNAMIC_DEFAULT_BROKER_CONFIG`.
    ClusterDefault,
    /// This broker (`--entity-name NODE_ID`): `DYNAMIC_BROKER_CONFIG`, which wins over the
    /// cluster-wide default.
    ThisBroker,
}

pub(super) struct BrokerDef {
    pub(super) def: Def,
    pub(super) update: Update,
    /// Whether Kafka's DescribeConfigs lists the config while nothing sets it: `KafkaConfig`'s
    /// own configs, not the quota configs only `DynamicConfig.Broker` defines.
    pub(super) listed_unset: bool,
}

/// A row of the generated table of Kafka's broker configs.
pub(super) const fn kafka(
    name: &'static str,
    kind: Kind,
    default: Option<&'static str>,
    check: Check,
    update: Update,
    listed_unset: bool,
) -> BrokerDef {
    BrokerDef {
        def: def(name, kind, default, check),
        update,
        listed_unset,
    }
}

const fn def(name: &'static str, kind: Kind, default: Option<&'static str>, check: Check) -> Def {
    Def {
        name,
        kind,
        default,
        check,
    }
}

const fn same(key: BrokerKey) -> Synonym {
    Synonym {
        key: SynonymKey::Own(key),
        ms_per_unit: 1,
    }
}

/// A synonym from the generated table of Kafka's broker configs (no effect in kpfs).
const fn kafkas(name: &'static str) -> Synonym {
    Synonym {
        key: SynonymKey::Kafka(name),
        ms_per_unit: 1,
    }
}

pub(super) const MS_PER_MINUTE: i64 = 60 * 1000;
pub(super) const MS_PER_HOUR: i64 = 60 * MS_PER_MINUTE;
const LONG_MAX: &str = "9223372036854775807";
pub(super) const CLEANUP_POLICIES: &[&str] = &["compact", "delete"];
/// `message.timestamp.type`'s values (Kafka's `TimestampType` names).
pub(super) const TIMESTAMP_TYPES: &[&str] = &["CreateTime", "LogAppendTime"];
/// `BrokerCompressionType.names()`, in Kafka's order (its error text lists them so).
pub(super) const BROKER_COMPRESSION_TYPES: &[&str] =
    &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];

// The compression configs of a topic and their broker synonyms have the same names,
// types, defaults and validators (Kafka's `ServerConfigs` defines them from `LogConfig`'s).

const fn compression_type() -> Def {
    def(
        "compression.type",
        Kind::String,
        Some("producer"),
        Check::OneOf(BROKER_COMPRESSION_TYPES),
    )
}

const fn gzip_level() -> Def {
    def(
        "compression.gzip.level",
        Kind::Int,
        Some("-1"),
        Check::BetweenOrEqual {
            min: GZIP_LEVELS.min as i64,
            max: GZIP_LEVELS.max as i64,
            or: GZIP_LEVELS.default as i64,
        },
    )
}

const fn lz4_level() -> Def {
    def(
        "compression.lz4.level",
        Kind::Int,
        Some("9"),
        Check::Between(LZ4_LEVELS.min as i64, LZ4_LEVELS.max as i64),
    )
}

const fn zstd_level() -> Def {
    def(
        "compression.zstd.level",
        Kind::Int,
        Some("3"),
        Check::Between(ZSTD_LEVELS.min as i64, ZSTD_LEVELS.max as i64),
    )
}

config_table! {
    /// A topic config (Kafka's `TopicConfig` names): a misspelt one does not compile.
    enum TopicKey, const TOPIC_DEFS: [TopicDef] {
        CleanupPolicy => TopicDef {
            def: def(
                "cleanup.policy",
                Kind::List,
                Some("delete"),
                Check::List {
                    allowed: CLEANUP_POLICIES,
                    empty: true,
                },
            ),
            synonyms: &[same(BrokerKey::LogCleanupPolicy)],
        },
        RetentionMs => TopicDef {
            def: def(
                "retention.ms",
                Kind::Long,
                Some("604800000"),
                Check::AtLeast(-1),
            ),
            synonyms: &[
                same(BrokerKey::LogRetentionMs),
                Synonym {
                    key: SynonymKey::Own(BrokerKey::LogRetentionMinutes),
                    ms_per_unit: MS_PER_MINUTE,
                },
                Synonym {
                    key: SynonymKey::Own(BrokerKey::LogRetentionHours),
                    ms_per_unit: MS_PER_HOUR,
                },
            ],
        },
        RetentionBytes => TopicDef {
            def: def("retention.bytes", Kind::Long, Some("-1"), Check::None),
            synonyms: &[same(BrokerKey::LogRetentionBytes)],
        },
        SegmentBytes => TopicDef {
            def: def(
                "segment.bytes",
                Kind::Int,
                Some("1073741824"),
                Check::AtLeast(MIN_SEGMENT_BYTES),
            ),
            synonyms: &[same(BrokerKey::LogSegmentBytes)],
        },
        SegmentMs => TopicDef {
            def: def(
                "segment.ms",
                Kind::Long,
                Some("604800000"),
                Check::AtLeast(1),
            ),
            synonyms: &[
                same(BrokerKey::LogRollMs),
                Synonym {
                    key: SynonymKey::Own(BrokerKey::LogRollHours),
                    ms_per_unit: MS_PER_HOUR,
                },
            ],
        },
        SegmentJitterMs => TopicDef {
            def: def(
                "segment.jitter.ms",
                Kind::Long,
                Some("0"),
                Check::AtLeast(0),
            ),
            synonyms: &[
                same(BrokerKey::LogRollJitterMs),
                Synonym {
                    key: SynonymKey::Own(BrokerKey::LogRollJitterHours),
                    ms_per_unit: MS_PER_HOUR,
                },
            ],
        },
        SegmentIndexBytes => TopicDef {
            def: def(
                "segment.index.bytes",
                Kind::Int,
                Some("10485760"),
                Check::IndexSize,
            ),
            synonyms: &[same(BrokerKey::LogIndexSizeMaxBytes)],
        },
        IndexIntervalBytes => TopicDef {
            def: def(
                "index.interval.bytes",
                Kind::Int,
                Some("4096"),
                Check::AtLeast(0),
            ),
            synonyms: &[same(BrokerKey::LogIndexIntervalBytes)],
        },
        MinCleanableDirtyRatio => TopicDef {
            def: def(
                "min.cleanable.dirty.ratio",
                Kind::Double,
                Some("0.5"),
                Check::Between(0, 1),
            ),
            synonyms: &[same(BrokerKey::LogCleanerMinCleanableRatio)],
        },
        DeleteRetentionMs => TopicDef {
            def: def(
                "delete.retention.ms",
                Kind::Long,
                Some("86400000"),
                Check::AtLeast(0),
            ),
            synonyms: &[same(BrokerKey::LogCleanerDeleteRetentionMs)],
        },
        MinCompactionLagMs => TopicDef {
            def: def(
                "min.compaction.lag.ms",
                Kind::Long,
                Some("0"),
                Check::AtLeast(0),
            ),
            synonyms: &[same(BrokerKey::LogCleanerMinCompactionLagMs)],
        },
        MaxCompactionLagMs => TopicDef {
            def: def(
                "max.compaction.lag.ms",
                Kind::Long,
                Some(LONG_MAX),
                Check::AtLeast(1),
            ),
            synonyms: &[same(BrokerKey::LogCleanerMaxCompactionLagMs)],
        },
        FileDeleteDelayMs => TopicDef {
            def: def(
                "file.delete.delay.ms",
                Kind::Long,
                Some("60000"),
                Check::AtLeast(0),
            ),
            synonyms: &[same(BrokerKey::LogSegmentDeleteDelayMs)],
        },
        MaxMessageBytes => TopicDef {
            def: def(
                "max.message.bytes",
                Kind::Int,
                Some("1048588"),
                Check::AtLeast(0),
            ),
            synonyms: &[same(BrokerKey::MessageMaxBytes)],
        },
        MessageTimestampType => TopicDef {
            def: def(
                "message.timestamp.type",
                Kind::String,
                Some("CreateTime"),
                Check::OneOf(TIMESTAMP_TYPES),
            ),
            synonyms: &[same(BrokerKey::LogMessageTimestampType)],
        },
        MessageTimestampBeforeMaxMs => TopicDef {
            def: def(
                "message.timestamp.before.max.ms",
                Kind::Long,
                Some(LONG_MAX),
                Check::AtLeast(0),
            ),
            synonyms: &[same(BrokerKey::LogMessageTimestampBeforeMaxMs)],
        },
        MessageTimestampAfterMaxMs => TopicDef {
            // Long.MAX_VALUE until Kafka 4.0 (KAFKA-16368) made it one hour.
            def: def(
                "message.timestamp.after.max.ms",
                Kind::Long,
                Some("3600000"),
                Check::AtLeast(0),
            ),
            synonyms: &[same(BrokerKey::LogMessageTimestampAfterMaxMs)],
        },
        FlushMessages => TopicDef {
            def: def(
                "flush.messages",
                Kind::Long,
                Some(LONG_MAX),
                Check::AtLeast(1),
            ),
            synonyms: &[same(BrokerKey::LogFlushIntervalMessages)],
        },
        FlushMs => TopicDef {
            def: def("flush.ms", Kind::Long, Some(LONG_MAX), Check::AtLeast(0)),
            synonyms: &[
                same(BrokerKey::LogFlushIntervalMs),
                same(BrokerKey::LogFlushSchedulerIntervalMs),
            ],
        },
        Preallocate => TopicDef {
            def: def("preallocate", Kind::Boolean, Some("false"), Check::None),
            synonyms: &[same(BrokerKey::LogPreallocate)],
        },
        CompressionType => TopicDef {
            def: compression_type(),
            synonyms: &[same(BrokerKey::CompressionType)],
        },
        CompressionGzipLevel => TopicDef {
            def: gzip_level(),
            synonyms: &[same(BrokerKey::CompressionGzipLevel)],
        },
        CompressionLz4Level => TopicDef {
            def: lz4_level(),
            synonyms: &[same(BrokerKey::CompressionLz4Level)],
        },
        CompressionZstdLevel => TopicDef {
            def: zstd_level(),
            synonyms: &[same(BrokerKey::CompressionZstdLevel)],
        },
        // Kafka's topic configs kpfs keeps, validates and describes as Kafka does, with no
        // effect: replication (one replica, no throttle, no unclean election) and tiered
        // storage (none) have nothing to act on (SEMANTICS.md).
        FollowerReplicationThrottledReplicas => TopicDef {
            def: def(
                "follower.replication.throttled.replicas",
                Kind::List,
                Some(""),
                Check::ThrottledReplicas,
            ),
            synonyms: &[],
        },
        LeaderReplicationThrottledReplicas => TopicDef {
            def: def(
                "leader.replication.throttled.replicas",
                Kind::List,
                Some(""),
                Check::ThrottledReplicas,
            ),
            synonyms: &[],
        },
        LocalRetentionBytes => TopicDef {
            def: def("local.retention.bytes", Kind::Long, Some("-2"), Check::AtLeast(-2)),
            synonyms: &[kafkas("log.local.retention.bytes")],
        },
        LocalRetentionMs => TopicDef {
            def: def("local.retention.ms", Kind::Long, Some("-2"), Check::AtLeast(-2)),
            synonyms: &[kafkas("log.local.retention.ms")],
        },
        MinInsyncReplicas => TopicDef {
            def: def("min.insync.replicas", Kind::Int, Some("1"), Check::AtLeast(1)),
            synonyms: &[kafkas("min.insync.replicas")],
        },
        RemoteLogCopyDisable => TopicDef {
            def: def("remote.log.copy.disable", Kind::Boolean, Some("false"), Check::None),
            synonyms: &[],
        },
        RemoteLogDeleteOnDisable => TopicDef {
            def: def("remote.log.delete.on.disable", Kind::Boolean, Some("false"), Check::None),
            synonyms: &[],
        },
        RemoteStorageEnable => TopicDef {
            def: def("remote.storage.enable", Kind::Boolean, Some("false"), Check::None),
            synonyms: &[],
        },
        UncleanLeaderElectionEnable => TopicDef {
            def: def("unclean.leader.election.enable", Kind::Boolean, Some("false"), Check::None),
            synonyms: &[kafkas("unclean.leader.election.enable")],
        },
        InternalSegmentBytes => TopicDef {
            // Kafka's test-only way around the 1 MiB `segment.bytes` floor; deliberately unchecked.
            def: def("internal.segment.bytes", Kind::Int, None, Check::None),
            synonyms: &[],
        },
        ParseKey => TopicDef {
            def: def("parse.key", Kind::Boolean, Some("false"), Check::None),
            synonyms: &[],
        },
        KeySeparator => TopicDef {
            def: def("key.separator", Kind::Text, Some("\t"), Check::NonEmpty),
            synonyms: &[],
        },
        NullMarker => TopicDef {
            def: def("null.marker", Kind::Text, Some(""), Check::None),
            synonyms: &[],
        },
    }
}

const fn dynamic(def: Def) -> BrokerDef {
    BrokerDef {
        def,
        update: Update::ClusterWide,
        listed_unset: true,
    }
}

const fn fixed(def: Def) -> BrokerDef {
    BrokerDef {
        def,
        update: Update::Static,
        listed_unset: true,
    }
}

const fn per_broker(def: Def) -> BrokerDef {
    BrokerDef {
        def,
        update: Update::PerBroker,
        listed_unset: true,
    }
}

config_table! {
    /// A broker config (Kafka's `KafkaConfig` names): a misspelt one does not compile.
    /// Dynamic = the first synonym of every topic config (`DynamicLogConfig`) plus
    /// `LogCleaner.RECONFIGURABLE_CONFIGS` plus `max.connections` (a cluster-level
    /// listener config); the listener lists are per-broker (`DynamicListenerConfig`);
    /// everything else needs a restart (remount).
    enum BrokerKey, const BROKER_DEFS: [BrokerDef] {
        LogCleanupPolicy => dynamic(def(
            "log.cleanup.policy",
            Kind::List,
            Some("delete"),
            Check::List {
                allowed: CLEANUP_POLICIES,
                empty: true,
            },
        )),
        LogRetentionMs => dynamic(def("log.retention.ms", Kind::Long, None, Check::None)),
        LogRetentionMinutes => fixed(def("log.retention.minutes", Kind::Int, None, Check::None)),
        LogRetentionHours => fixed(def(
            "log.retention.hours",
            Kind::Int,
            Some("168"),
            Check::None,
        )),
        LogRetentionBytes => dynamic(def(
            "log.retention.bytes",
            Kind::Long,
            Some("-1"),
            Check::None,
        )),
        LogSegmentBytes => dynamic(def(
            "log.segment.bytes",
            Kind::Int,
            Some("1073741824"),
            Check::AtLeast(MIN_SEGMENT_BYTES),
        )),
        LogRollMs => dynamic(def("log.roll.ms", Kind::Long, None, Check::None)),
        LogRollHours => fixed(def(
            "log.roll.hours",
            Kind::Int,
            Some("168"),
            Check::AtLeast(1),
        )),
        LogRollJitterMs => dynamic(def("log.roll.jitter.ms", Kind::Long, None, Check::None)),
        LogRollJitterHours => fixed(def(
            "log.roll.jitter.hours",
            Kind::Int,
            Some("0"),
            Check::AtLeast(0),
        )),
        LogIndexSizeMaxBytes => dynamic(def(
            "log.index.size.max.bytes",
            Kind::Int,
            Some("10485760"),
            Check::IndexSize,
        )),
        LogIndexIntervalBytes => dynamic(def(
            "log.index.interval.bytes",
            Kind::Int,
            Some("4096"),
            Check::AtLeast(0),
        )),
        LogCleanerMinCleanableRatio => dynamic(def(
            "log.cleaner.min.cleanable.ratio",
            Kind::Double,
            Some("0.5"),
            Check::Between(0, 1),
        )),
        LogCleanerDeleteRetentionMs => dynamic(def(
            "log.cleaner.delete.retention.ms",
            Kind::Long,
            Some("86400000"),
            Check::AtLeast(0),
        )),
        LogCleanerMinCompactionLagMs => dynamic(def(
            "log.cleaner.min.compaction.lag.ms",
            Kind::Long,
            Some("0"),
            Check::AtLeast(0),
        )),
        LogCleanerMaxCompactionLagMs => dynamic(def(
            "log.cleaner.max.compaction.lag.ms",
            Kind::Long,
            Some(LONG_MAX),
            Check::AtLeast(1),
        )),
        LogSegmentDeleteDelayMs => dynamic(def(
            "log.segment.delete.delay.ms",
            Kind::Long,
            Some("60000"),
            Check::AtLeast(0),
        )),
        MessageMaxBytes => dynamic(def(
            "message.max.bytes",
            Kind::Int,
            Some("1048588"),
            Check::AtLeast(0),
        )),
        LogMessageTimestampType => dynamic(def(
            "log.message.timestamp.type",
            Kind::String,
            Some("CreateTime"),
            Check::OneOf(TIMESTAMP_TYPES),
        )),
        LogMessageTimestampBeforeMaxMs => dynamic(def(
            "log.message.timestamp.before.max.ms",
            Kind::Long,
            Some(LONG_MAX),
            Check::AtLeast(0),
        )),
        LogMessageTimestampAfterMaxMs => dynamic(def(
            "log.message.timestamp.after.max.ms",
            Kind::Long,
            Some("3600000"),
            Check::AtLeast(0),
        )),
        // Kafka's `TransactionLogConfig`: how long a partition keeps an idle producer's
        // state (dynamic: `DynamicProducerStateManagerConfig`).
        ProducerIdExpirationMs => dynamic(def(
            "producer.id.expiration.ms",
            Kind::Int,
            Some("86400000"),
            Check::AtLeast(1),
        )),
        LogPreallocate => dynamic(def(
            "log.preallocate",
            Kind::Boolean,
            Some("false"),
            Check::None,
        )),
        CompressionType => dynamic(compression_type()),
        CompressionGzipLevel => dynamic(gzip_level()),
        CompressionLz4Level => dynamic(lz4_level()),
        CompressionZstdLevel => dynamic(zstd_level()),
        LogFlushIntervalMessages => dynamic(def(
            "log.flush.interval.messages",
            Kind::Long,
            Some(LONG_MAX),
            Check::AtLeast(1),
        )),
        LogFlushIntervalMs => dynamic(def("log.flush.interval.ms", Kind::Long, None, Check::None)),
        LogFlushSchedulerIntervalMs => fixed(def(
            "log.flush.scheduler.interval.ms",
            Kind::Long,
            Some(LONG_MAX),
            Check::None,
        )),
        LogFlushOffsetCheckpointIntervalMs => fixed(def(
            "log.flush.offset.checkpoint.interval.ms",
            Kind::Int,
            Some("60000"),
            Check::AtLeast(0),
        )),
        LogRetentionCheckIntervalMs => fixed(def(
            "log.retention.check.interval.ms",
            Kind::Long,
            Some("300000"),
            Check::AtLeast(1),
        )),
        LogCleanerEnable => fixed(def(
            "log.cleaner.enable",
            Kind::Boolean,
            Some("true"),
            Check::None,
        )),
        LogCleanerThreads => dynamic(def(
            "log.cleaner.threads",
            Kind::Int,
            Some("1"),
            Check::AtLeast(0),
        )),
        LogCleanerBackoffMs => dynamic(def(
            "log.cleaner.backoff.ms",
            Kind::Long,
            Some("15000"),
            Check::AtLeast(0),
        )),
        LogCleanerDedupeBufferSize => dynamic(def(
            "log.cleaner.dedupe.buffer.size",
            Kind::Long,
            Some("134217728"),
            Check::None,
        )),
        LogCleanerIoBufferSize => dynamic(def(
            "log.cleaner.io.buffer.size",
            Kind::Int,
            Some("524288"),
            Check::AtLeast(0),
        )),
        LogCleanerIoBufferLoadFactor => dynamic(def(
            "log.cleaner.io.buffer.load.factor",
            Kind::Double,
            Some("0.9"),
            Check::None,
        )),
        LogCleanerIoMaxBytesPerSecond => dynamic(def(
            "log.cleaner.io.max.bytes.per.second",
            Kind::Double,
            Some("1.7976931348623157E308"),
            Check::None,
        )),
        // Kafka's default is `PLAINTEXT://:9092`; kpfs's is unset, so a mount opens no
        // port unless asked to (`kpfs serve` sets its own default).
        Listeners => per_broker(def("listeners", Kind::String, None, Check::Listeners)),
        AdvertisedListeners => fixed(def(
            "advertised.listeners",
            Kind::String,
            None,
            Check::Listeners,
        )),
        // Kafka's default is -1, which KRaft refuses; 1 is what Kafka's quickstart
        // `config/server.properties` sets, and kpfs is one broker.
        NodeId => fixed(def("node.id", Kind::Int, Some("1"), Check::None)),
        AutoCreateTopicsEnable => fixed(def(
            "auto.create.topics.enable",
            Kind::Boolean,
            Some("true"),
            Check::None,
        )),
        NumPartitions => fixed(def("num.partitions", Kind::Int, Some("1"), Check::AtLeast(1))),
        // The most partitions one DescribeTopicPartitions answer lists (`KafkaConfig`).
        MaxRequestPartitionSizeLimit => fixed(def(
            "max.request.partition.size.limit",
            Kind::Int,
            Some("2000"),
            Check::AtLeast(1),
        )),
        SocketRequestMaxBytes => fixed(def(
            "socket.request.max.bytes",
            Kind::Int,
            Some("104857600"),
            Check::AtLeast(1),
        )),
        MaxConnections => dynamic(def(
            "max.connections",
            Kind::Int,
            Some("2147483647"),
            Check::AtLeast(0),
        )),
        ConnectionsMaxIdleMs => fixed(def(
            "connections.max.idle.ms",
            Kind::Long,
            Some("600000"),
            Check::None,
        )),
        DeleteTopicEnable => fixed(def(
            "delete.topic.enable",
            Kind::Boolean,
            Some("true"),
            Check::None,
        )),
        // Kafka's `GroupCoordinatorConfig` (classic groups) and `OffsetConfig`.
        GroupMinSessionTimeoutMs => fixed(def(
            "group.min.session.timeout.ms",
            Kind::Int,
            Some("6000"),
            Check::None,
        )),
        GroupMaxSessionTimeoutMs => fixed(def(
            "group.max.session.timeout.ms",
            Kind::Int,
            Some("1800000"),
            Check::None,
        )),
        GroupInitialRebalanceDelayMs => fixed(def(
            "group.initial.rebalance.delay.ms",
            Kind::Int,
            Some("3000"),
            Check::AtLeast(0),
        )),
        GroupMaxSize => fixed(def(
            "group.max.size",
            Kind::Int,
            Some("2147483647"),
            Check::AtLeast(1),
        )),
        OffsetsRetentionMinutes => fixed(def(
            "offsets.retention.minutes",
            Kind::Int,
            Some("10080"),
            Check::AtLeast(1),
        )),
        OffsetsRetentionCheckIntervalMs => fixed(def(
            "offsets.retention.check.interval.ms",
            Kind::Long,
            Some("600000"),
            Check::AtLeast(1),
        )),
        OffsetMetadataMaxBytes => fixed(def(
            "offset.metadata.max.bytes",
            Kind::Int,
            Some("4096"),
            Check::None,
        )),
        OffsetsTopicSegmentBytes => fixed(def(
            "offsets.topic.segment.bytes",
            Kind::Int,
            Some("104857600"),
            Check::AtLeast(1),
        )),
        // Kafka's `TransactionStateManagerConfig` and `TransactionLogConfig`.
        TransactionMaxTimeoutMs => fixed(def(
            "transaction.max.timeout.ms",
            Kind::Int,
            Some("900000"),
            Check::AtLeast(1),
        )),
        TransactionalIdExpirationMs => fixed(def(
            "transactional.id.expiration.ms",
            Kind::Int,
            Some("604800000"),
            Check::AtLeast(1),
        )),
        TransactionAbortTimedOutCleanupIntervalMs => fixed(def(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            Kind::Int,
            Some("10000"),
            Check::AtLeast(1),
        )),
        TransactionRemoveExpiredCleanupIntervalMs => fixed(def(
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            Kind::Int,
            Some("3600000"),
            Check::AtLeast(1),
        )),
        TransactionStateLogSegmentBytes => fixed(def(
            "transaction.state.log.segment.bytes",
            Kind::Int,
            Some("104857600"),
            Check::AtLeast(1),
        )),
    }
}

impl TopicKey {
    /// Whether kpfs acts on the config (the others are kept and shown only).
    pub(super) fn has_effect(self) -> bool {
        !matches!(
            self,
            TopicKey::FollowerReplicationThrottledReplicas
                | TopicKey::LeaderReplicationThrottledReplicas
                | TopicKey::LocalRetentionBytes
                | TopicKey::LocalRetentionMs
                | TopicKey::MinInsyncReplicas
                | TopicKey::RemoteLogCopyDisable
                | TopicKey::RemoteLogDeleteOnDisable
                | TopicKey::RemoteStorageEnable
                | TopicKey::UncleanLeaderElectionEnable
        )
    }

    /// kpfs's own topic configs, for the FUSE `log` file (the console producer's
    /// `parse.key`, `key.separator`, `null.marker`) and Kafka's internal
    /// `internal.segment.bytes`: Kafka's DescribeConfigs does not list them, kpfs's only
    /// when they are named.
    pub(crate) fn is_kpfs_own(self) -> bool {
        matches!(
            self,
            TopicKey::InternalSegmentBytes
                | TopicKey::ParseKey
                | TopicKey::KeySeparator
                | TopicKey::NullMarker
        )
    }

    /// The key named `name`, or Kafka's refusal of an unknown topic config.
    pub(super) fn known(name: &str) -> Result<TopicKey, ConfigError> {
        TopicKey::from_name(name).ok_or_else(|| ConfigError::UnknownTopicConfig {
            name: name.to_string(),
        })
    }
}

/// A broker config: one of kpfs's own ([`BrokerKey`]), which kpfs acts on, or one of the
/// rest of Kafka's (a row of [`KAFKA_BROKER_DEFS`] that names no `BrokerKey`), which kpfs
/// accepts, validates, keeps and describes as Kafka does, with no effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum BrokerName {
    Own(BrokerKey),
    /// An index into [`KAFKA_BROKER_DEFS`].
    Kafka(u16),
}

impl BrokerName {
    /// The config named `name`, or Kafka's refusal of an unknown broker config.
    pub(super) fn known(name: &str) -> Result<BrokerName, ConfigError> {
        if let Some(key) = BrokerKey::from_name(name) {
            return Ok(BrokerName::Own(key));
        }
        KAFKA_BROKER_DEFS
            .binary_search_by(|row| row.def.name.cmp(name))
            .ok()
            .and_then(|i| u16::try_from(i).ok())
            .map(BrokerName::Kafka)
            .ok_or_else(|| ConfigError::UnknownBrokerConfig {
                name: name.to_string(),
            })
    }

    /// Every broker config, kpfs's own and the rest of Kafka's, each once, sorted by name.
    pub(super) fn all() -> Vec<BrokerName> {
        let mut all: Vec<BrokerName> = BrokerKey::ALL
            .iter()
            .copied()
            .map(BrokerName::Own)
            .collect();
        all.extend(
            (0..KAFKA_BROKER_DEFS.len())
                .filter(|&i| BrokerKey::from_name(KAFKA_BROKER_DEFS[i].def.name).is_none())
                .filter_map(|i| u16::try_from(i).ok())
                .map(BrokerName::Kafka),
        );
        all.sort();
        all
    }

    pub(super) fn row(self) -> &'static BrokerDef {
        match self {
            BrokerName::Own(key) => key.row(),
            BrokerName::Kafka(i) => &KAFKA_BROKER_DEFS[usize::from(i)],
        }
    }

    pub(super) fn def(self) -> &'static Def {
        &self.row().def
    }

    pub(crate) fn name(self) -> &'static str {
        self.def().name
    }

    /// Whether kpfs acts on the config (the others are kept and shown only).
    pub(super) fn has_effect(self) -> bool {
        matches!(self, BrokerName::Own(_))
    }

    /// Whether some level of dynamic config may set it (Kafka's `readOnly` is the opposite).
    pub(super) fn is_dynamic(self) -> bool {
        self.row().update != Update::Static
    }

    /// Kafka adds and removes listeners at run time; kpfs binds its one listener at start,
    /// so for kpfs `listeners` is as read-only as a static config.
    pub(super) fn is_bound_at_start(self) -> bool {
        self == BrokerName::Own(BrokerKey::Listeners)
    }

    /// The refusal of a change at `level` of a config named by `names` (this config's kind
    /// of refusal), or `None` when the config may change there. `PerBrokerOnly` comes after
    /// the value was checked, as Kafka checks types before levels.
    pub(super) fn refusal_at(self, level: BrokerLevel, names: Vec<String>) -> Option<ConfigError> {
        match (self.row().update, level) {
            (Update::PerBroker, BrokerLevel::ThisBroker) if self.is_bound_at_start() => {
                Some(ConfigError::Listeners(ListenerRule::BoundAtStart))
            }
            (Update::ClusterWide, _) | (Update::PerBroker, BrokerLevel::ThisBroker) => None,
            (Update::Static, _) => Some(ConfigError::NotDynamic { names }),
            (Update::ListenerPrefix, _) => Some(ConfigError::ListenerPrefixOnly { names }),
            (Update::PerBroker, BrokerLevel::ClusterDefault) => {
                Some(ConfigError::PerBrokerOnly { names })
            }
        }
    }
}

/// Names sort as Kafka lists configs.
impl Ord for BrokerName {
    fn cmp(&self, other: &BrokerName) -> std::cmp::Ordering {
        self.name().cmp(other.name())
    }
}

impl PartialOrd for BrokerName {
    fn partial_cmp(&self, other: &BrokerName) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl std::fmt::Display for BrokerName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A group config (Kafka's `GroupConfig`): a row of the generated table.
pub(super) struct GroupDef {
    pub(super) def: Def,
    /// The broker config a group without an override takes its value from.
    pub(super) synonym: Option<&'static str>,
}

/// A row of the generated table of Kafka's group configs.
pub(super) const fn kafka_group(
    name: &'static str,
    kind: Kind,
    default: Option<&'static str>,
    check: Check,
    synonym: Option<&'static str>,
) -> GroupDef {
    GroupDef {
        def: def(name, kind, default, check),
        synonym,
    }
}

/// A group config: an index into [`KAFKA_GROUP_DEFS`], which is sorted, so the order of
/// names is the order of indexes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct GroupName(u8);

impl GroupName {
    /// The config named `name`, or Kafka's refusal of an unknown group config.
    pub(super) fn known(name: &str) -> Result<GroupName, ConfigError> {
        KAFKA_GROUP_DEFS
            .binary_search_by(|row| row.def.name.cmp(name))
            .ok()
            .and_then(|i| u8::try_from(i).ok())
            .map(GroupName)
            .ok_or_else(|| ConfigError::UnknownGroupConfig {
                name: name.to_string(),
            })
    }

    /// Every group config, sorted by name.
    pub(super) fn all() -> impl Iterator<Item = GroupName> {
        (0..KAFKA_GROUP_DEFS.len())
            .filter_map(|i| u8::try_from(i).ok())
            .map(GroupName)
    }

    pub(super) fn row(self) -> &'static GroupDef {
        &KAFKA_GROUP_DEFS[usize::from(self.0)]
    }

    pub(super) fn def(self) -> &'static Def {
        &self.row().def
    }

    pub(crate) fn name(self) -> &'static str {
        self.def().name
    }

    /// The broker config standing for this one when the group does not override it.
    pub(super) fn broker_synonym(self) -> Option<BrokerName> {
        self.row().synonym.map(|name| {
            BrokerName::known(name).expect("a group config's broker synonym is a broker config")
        })
    }
}

impl std::fmt::Display for GroupName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `GroupConfig.validateValues`: the broker configs bounding a group config (a minimum,
/// if any, then a maximum), in the order Kafka checks them. Kafka's `GroupConfig` has no
/// table of them to generate from; a test checks every name against the tables.
pub(super) const GROUP_BOUNDS: &[(&str, Option<&str>, &str)] = &[
    (
        "consumer.heartbeat.interval.ms",
        Some("group.consumer.min.heartbeat.interval.ms"),
        "group.consumer.max.heartbeat.interval.ms",
    ),
    (
        "consumer.session.timeout.ms",
        Some("group.consumer.min.session.timeout.ms"),
        "group.consumer.max.session.timeout.ms",
    ),
    (
        "consumer.assignment.interval.ms",
        Some("group.consumer.min.assignment.interval.ms"),
        "group.consumer.max.assignment.interval.ms",
    ),
    (
        "share.heartbeat.interval.ms",
        Some("group.share.min.heartbeat.interval.ms"),
        "group.share.max.heartbeat.interval.ms",
    ),
    (
        "share.session.timeout.ms",
        Some("group.share.min.session.timeout.ms"),
        "group.share.max.session.timeout.ms",
    ),
    (
        "share.record.lock.duration.ms",
        Some("group.share.min.record.lock.duration.ms"),
        "group.share.max.record.lock.duration.ms",
    ),
    (
        "share.delivery.count.limit",
        Some("group.share.min.delivery.count.limit"),
        "group.share.max.delivery.count.limit",
    ),
    (
        "share.partition.max.record.locks",
        Some("group.share.min.partition.max.record.locks"),
        "group.share.max.partition.max.record.locks",
    ),
    (
        "share.assignment.interval.ms",
        Some("group.share.min.assignment.interval.ms"),
        "group.share.max.assignment.interval.ms",
    ),
    (
        "streams.heartbeat.interval.ms",
        Some("group.streams.min.heartbeat.interval.ms"),
        "group.streams.max.heartbeat.interval.ms",
    ),
    (
        "streams.session.timeout.ms",
        Some("group.streams.min.session.timeout.ms"),
        "group.streams.max.session.timeout.ms",
    ),
    (
        "streams.num.standby.replicas",
        None,
        "group.streams.max.standby.replicas",
    ),
    (
        "streams.assignment.interval.ms",
        Some("group.streams.min.assignment.interval.ms"),
        "group.streams.max.assignment.interval.ms",
    ),
];

/// `GroupConfig.validateValues`, after the bounds: each session timeout must exceed its
/// heartbeat interval.
pub(super) const GROUP_SESSION_OVER_HEARTBEAT: &[(&str, &str)] = &[
    (
        "consumer.session.timeout.ms",
        "consumer.heartbeat.interval.ms",
    ),
    ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
    (
        "streams.session.timeout.ms",
        "streams.heartbeat.interval.ms",
    ),
];

/// Whether the config `name` of `scope` is of Kafka's `LIST` type (what APPEND and
/// SUBTRACT need); `None` for a name the scope does not know.
pub(crate) fn is_list_config(scope: super::ConfigScope, name: &str) -> Option<bool> {
    use super::ConfigScope;
    let def = match scope {
        ConfigScope::Topic => TopicKey::known(name).ok()?.def(),
        ConfigScope::Broker => BrokerName::known(name).ok()?.def(),
        ConfigScope::Group => GroupName::known(name).ok()?.def(),
    };
    Some(def.kind == Kind::List)
}
