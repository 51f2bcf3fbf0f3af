//! `ConfigError`: every refusal of a config, displayed in Kafka's wording.

use std::fmt;

use crate::engine::excerpt::Excerpt;
use crate::engine::limits::MAX_PARTITIONS;

/// A configuration error, displayed in Kafka's wording.
#[derive(Clone, Debug, PartialEq)]
pub enum ConfigError {
    /// Kafka's `ConfigException(name, value, message)`: a value that does not parse or fails
    /// its validator. `value` is printed as Kafka prints it (untrimmed text for parse errors,
    /// the parsed number for range errors, the offending element for list errors).
    InvalidValue {
        name: String,
        value: String,
        message: String,
    },
    /// A list config naming one element twice (Kafka 4.2+ `ValidList`).
    DuplicateListValues {
        name: String,
    },
    /// An empty item in a list config (`ValidList`).
    EmptyListValue {
        name: String,
    },
    /// An empty list for a list config that needs an item (`ValidList`); `allowed` empty
    /// when any item is.
    EmptyList {
        name: String,
        allowed: Vec<String>,
    },
    /// The effective `min.compaction.lag.ms` would exceed `max.compaction.lag.ms`.
    CompactionLagConflict {
        min_ms: i64,
        max_ms: i64,
    },
    /// `remote.storage.enable=true`: kpfs has no tiered storage (Kafka's refusal on a
    /// broker whose `remote.log.storage.system.enable` is false).
    TieredStorageDisabled,
    UnknownTopicConfig {
        name: String,
    },
    UnknownBrokerConfig {
        name: String,
    },
    UnknownGroupConfig {
        name: String,
    },
    /// A group config outside the bounds the broker's configs set, or a session timeout
    /// not above its heartbeat interval (`GroupConfig.validateValues`).
    Group(GroupRule),
    /// A dynamic broker update naming static configs, in the order they were written.
    NotDynamic {
        names: Vec<String>,
    },
    /// A rule across broker configs (`KafkaConfig.validateValues`, `LogCleaner`) failed.
    Broker(BrokerRule),
    /// An index size below one entry (`AbstractIndex`: 8 bytes for `.index`, 12 for
    /// `.timeindex`): Kafka accepts the value and then fails creating the index.
    InvalidMaxIndexSize {
        size: i64,
    },
    /// A command line that is neither `key=value`, `-key`, a comment nor blank.
    CommandSyntax {
        line: String,
    },
    /// A config line that is not UTF-8.
    NotText,
    /// A config change (one open-to-close of a config file) with refused lines: none of
    /// it applies. Each refused line's reason was reported when it was written.
    ChangeRefused {
        refused: usize,
        lines: usize,
        first_line: usize,
    },
    /// A broker properties line without a `=` or `:` separator.
    PropertiesSyntax {
        line: String,
    },
    /// A config only a per-broker update may change (`listeners`), set at the
    /// cluster-wide default level.
    PerBrokerOnly {
        names: Vec<String>,
    },
    /// A security config Kafka changes only per listener, under a `listener.name.` prefix.
    ListenerPrefixOnly {
        names: Vec<String>,
    },
    /// A `listeners` or `advertised.listeners` value Kafka refuses, or one kpfs does not
    /// serve.
    Listeners(ListenerRule),
}

/// What is wrong with a listener list: Kafka's `listenerListToEndPoints` and
/// `KafkaConfig.validateValues` texts, and what kpfs does not serve (yet).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListenerRule {
    /// An entry that is not `NAME://host:port` (Kafka's `URI_PARSE_REGEXP`), or a
    /// port that `Integer.parseInt` or a socket address refuses; Kafka wraps these
    /// in "Error creating broker listeners from".
    Unparsable {
        listeners: String,
        reason: String,
    },
    /// A listener name that is not a security protocol (kpfs has no
    /// `listener.security.protocol.map`).
    NoSecurityProtocol {
        listeners: String,
        name: String,
    },
    /// SSL, SASL_PLAINTEXT or SASL_SSL.
    NotPlaintext {
        listeners: String,
        name: String,
    },
    /// Port 0 (a port the system picks): clients would be told port 0.
    PortZero {
        listeners: String,
    },
    DuplicateName {
        listeners: String,
    },
    /// `listeners` set to an empty list.
    NoAdvertisedListener,
    AdvertisedNotSubset {
        found: String,
        valid: String,
    },
    AdvertisedWildcard,
    /// `listeners` changed at this broker's dynamic level: Kafka reconfigures its
    /// listeners, kpfs binds its one at start.
    BoundAtStart,
}

impl fmt::Display for ListenerRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenerRule::Unparsable { listeners, reason } => {
                write!(f, "Error creating broker listeners from '{listeners}': {reason}")
            }
            ListenerRule::NoSecurityProtocol { listeners, name } => write!(
                f,
                "Error creating broker listeners from '{listeners}': No security protocol defined for listener {name}"
            ),
            ListenerRule::NotPlaintext { listeners, name } => write!(
                f,
                "Error creating broker listeners from '{listeners}': kpfs serves PLAINTEXT listeners only, \
                 not {name}: TLS and SASL authentication are out of scope for now"
            ),
            ListenerRule::PortZero { listeners } => write!(
                f,
                "Error creating broker listeners from '{listeners}': port 0 (any free port) is not \
                 supported: kpfs advertises the configured port, so clients would be told port 0"
            ),
            ListenerRule::DuplicateName { listeners } => write!(
                f,
                "Each listener must have a different name, listeners: {listeners}"
            ),
            ListenerRule::NoAdvertisedListener => {
                f.write_str("There must be at least one broker advertised listener.")
            }
            ListenerRule::AdvertisedNotSubset { found, valid } => write!(
                f,
                "advertised.listeners listener names must be equal to or a subset of the ones \
                 defined in listeners. Found {found}. The valid options based on the current \
                 configuration are {valid}"
            ),
            ListenerRule::BoundAtStart => f.write_str(
                "kpfs binds its listener at start and does not change it while it runs: set listeners with --override or --config and remount",
            ),
            ListenerRule::AdvertisedWildcard => f.write_str(
                "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. Use a routable IP address.",
            ),
        }
    }
}

/// A broker-wide rule that involves more than one config or the current state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BrokerRule {
    /// The resolved `log.retention.ms` (after minutes/hours) is 0.
    RetentionMs,
    RollMs,
    RollJitterMs,
    /// `log.cleaner.dedupe.buffer.size / log.cleaner.threads` is not above 1 MiB.
    DedupeBufferPerThread,
    CleanerThreadsAtLeastOne,
    /// A dynamic update may at most halve the running cleaner threads.
    CleanerThreadsHalved {
        current: i32,
    },
    /// A dynamic update may at most double the running cleaner threads.
    CleanerThreadsDoubled {
        current: i32,
    },
    /// `node.id` below 0 (Kafka's default -1 means unset, which KRaft refuses).
    NodeIdMissing,
    /// `num.partitions` above the partitions a kpfs topic may have: every auto-created
    /// topic would fail.
    NumPartitionsAboveMax,
    /// The cluster-wide `min.insync.replicas` is gone from the result: Kafka 4.x keeps it
    /// while eligible leader replicas (ELR, KIP-966) are on, as they are for a new cluster.
    ClusterMinIsrRemoved,
    /// `min.insync.replicas` set or removed for one broker, which ELR forbids.
    BrokerMinIsrAltered,
}

impl fmt::Display for BrokerRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BrokerRule::RetentionMs => f.write_str(
                "log.retention.ms must be unlimited (-1) or, greater than or equal to 1",
            ),
            BrokerRule::RollMs => f.write_str("log.roll.ms must be greater than or equal to 1"),
            BrokerRule::RollJitterMs => {
                f.write_str("log.roll.jitter.ms must be greater than or equal to 0")
            }
            BrokerRule::DedupeBufferPerThread => f.write_str(
                "log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread.",
            ),
            BrokerRule::CleanerThreadsAtLeastOne => {
                f.write_str("Log cleaner threads should be at least 1")
            }
            BrokerRule::CleanerThreadsHalved { current } => write!(
                f,
                "Log cleaner threads cannot be reduced to less than half the current value {current}"
            ),
            BrokerRule::CleanerThreadsDoubled { current } => write!(
                f,
                "Log cleaner threads cannot be increased to more than double the current value {current}"
            ),
            BrokerRule::NodeIdMissing => f.write_str(
                "Missing configuration `node.id` which is required when `process.roles` is \
                 defined (i.e. when running in KRaft mode).",
            ),
            BrokerRule::NumPartitionsAboveMax => write!(
                f,
                "num.partitions must be at most {MAX_PARTITIONS}: a kpfs topic has at most {MAX_PARTITIONS} partitions"
            ),
            BrokerRule::ClusterMinIsrRemoved => f.write_str(
                "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.",
            ),
            BrokerRule::BrokerMinIsrAltered => f.write_str(
                "Broker-level min.insync.replicas cannot be altered while ELR is enabled.",
            ),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::InvalidValue {
                name,
                value,
                message,
            } => write!(
                f,
                "Invalid value {} for configuration {name}: {message}",
                Excerpt::plain(value.as_bytes())
            ),
            ConfigError::DuplicateListValues { name } => {
                write!(f, "Configuration '{name}' values must not be duplicated.")
            }
            ConfigError::EmptyListValue { name } => {
                write!(f, "Configuration '{name}' values must not be empty.")
            }
            ConfigError::EmptyList { name, allowed } if allowed.is_empty() => write!(
                f,
                "Configuration '{name}' must not be empty. Valid values include: any non-empty value"
            ),
            ConfigError::EmptyList { name, allowed } => write!(
                f,
                "Configuration '{name}' must not be empty. Valid values include: [{}]",
                allowed.join(", ")
            ),
            ConfigError::CompactionLagConflict { min_ms, max_ms } => write!(
                f,
                "conflict topic config setting min.compaction.lag.ms ({min_ms}) > max.compaction.lag.ms ({max_ms})"
            ),
            ConfigError::TieredStorageDisabled => f.write_str(
                "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.",
            ),
            ConfigError::UnknownTopicConfig { name } => {
                let name = Excerpt::plain(name.as_bytes());
                write!(f, "Unknown topic config name: {name}")
            }
            ConfigError::UnknownBrokerConfig { name } => {
                let name = Excerpt::plain(name.as_bytes());
                write!(f, "Unknown broker config name: {name}")
            }
            ConfigError::UnknownGroupConfig { name } => {
                let name = Excerpt::plain(name.as_bytes());
                write!(f, "Unknown group config name: {name}")
            }
            ConfigError::Group(rule) => write!(f, "{rule}"),
            ConfigError::NotDynamic { names } => write!(
                f,
                "Cannot update these configs dynamically: [{}]",
                names.join(", ")
            ),
            ConfigError::Broker(rule) => write!(f, "{rule}"),
            ConfigError::InvalidMaxIndexSize { size } => {
                write!(f, "Invalid max index size: {size}")
            }
            ConfigError::CommandSyntax { line } => write!(
                f,
                "Invalid config line {}: expected key=value to set, -key to remove, or a # comment",
                Excerpt::quoted(line.as_bytes())
            ),
            ConfigError::NotText => f.write_str("config lines must be UTF-8 text"),
            ConfigError::ChangeRefused {
                refused: 1,
                lines,
                first_line,
            } => write!(
                f,
                "nothing of this change applied: line {first_line} of {lines} was refused"
            ),
            ConfigError::ChangeRefused {
                refused,
                lines,
                first_line,
            } => write!(
                f,
                "nothing of this change applied: {refused} of its {lines} lines were refused, \
                 the first line {first_line}"
            ),
            ConfigError::PropertiesSyntax { line } => write!(
                f,
                "Invalid properties line {}: expected key=value or key: value",
                Excerpt::quoted(line.as_bytes())
            ),
            ConfigError::PerBrokerOnly { names } => write!(
                f,
                "Cannot update these configs at default cluster level, broker id must be specified: [{}]",
                names.join(", ")
            ),
            ConfigError::ListenerPrefixOnly { names } => write!(
                f,
                "These security configs can be dynamically updated only per-listener using the listener prefix: [{}]",
                names.join(", ")
            ),
            ConfigError::Listeners(rule) => write!(f, "{rule}"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// `GroupConfig.validateValues`'s refusals, in its words.
#[derive(Clone, Debug, PartialEq)]
pub enum GroupRule {
    /// Below the broker config that is its minimum.
    BelowMin {
        name: &'static str,
        min: &'static str,
    },
    /// Above the broker config that is its maximum.
    AboveMax {
        name: &'static str,
        max: &'static str,
    },
    /// A session timeout not above its heartbeat interval.
    SessionNotAboveHeartbeat {
        session: &'static str,
        heartbeat: &'static str,
    },
}

impl fmt::Display for GroupRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GroupRule::BelowMin { name, min } => {
                write!(f, "{name} must be greater than or equal to {min}")
            }
            GroupRule::AboveMax { name, max } => {
                write!(f, "{name} must be less than or equal to {max}")
            }
            GroupRule::SessionNotAboveHeartbeat { session, heartbeat } => {
                write!(f, "{session} must be greater than {heartbeat}")
            }
        }
    }
}
