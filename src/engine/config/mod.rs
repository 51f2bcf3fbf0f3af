//! Topic and broker configuration: names, types, defaults, validators, broker synonyms and
//! error texts as in Apache Kafka 4.x (`LogConfig`, `ServerLogConfigs`, `CleanerConfig`,
//! `KafkaConfig`, `DynamicBrokerConfig`), plus kpfs's console-producer-style topic configs
//! (`parse.key`, `key.separator`, `null.marker`).
//!
//! Every value is kept twice: the text the user wrote (so rendered and persisted configs
//! show what was set) and its parsed form (so lookups never parse again and cannot fail).

use std::collections::BTreeMap;
use std::fmt;

use super::error::Excerpt;

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
    rendering: u32,
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
    /// The effective `min.compaction.lag.ms` would exceed `max.compaction.lag.ms`.
    CompactionLagConflict {
        min_ms: i64,
        max_ms: i64,
    },
    UnknownTopicConfig {
        name: String,
    },
    UnknownBrokerConfig {
        name: String,
    },
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
            ConfigError::CompactionLagConflict { min_ms, max_ms } => write!(
                f,
                "conflict topic config setting min.compaction.lag.ms ({min_ms}) > max.compaction.lag.ms ({max_ms})"
            ),
            ConfigError::UnknownTopicConfig { name } => {
                let name = Excerpt::plain(name.as_bytes());
                write!(f, "Unknown topic config name: {name}")
            }
            ConfigError::UnknownBrokerConfig { name } => {
                let name = Excerpt::plain(name.as_bytes());
                write!(f, "Unknown broker config name: {name}")
            }
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
        }
    }
}

impl std::error::Error for ConfigError {}

// ---------------------------------------------------------------------------------------
// Definitions
// ---------------------------------------------------------------------------------------

/// Kafka's `ConfigDef.Type`, restricted to the types these configs use. `Text` is a string
/// taken literally (no trimming), for the console-producer separators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
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
enum Check {
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
const MIN_INDEX_BYTES: i64 = 12;

struct Def {
    name: &'static str,
    kind: Kind,
    /// `None` is Kafka's `null` default: unset unless configured.
    default: Option<&'static str>,
    check: Check,
}

/// A broker config a topic config falls back to, and how many milliseconds one of its
/// units is (1 unless the broker config counts minutes or hours).
struct Synonym {
    name: &'static str,
    ms_per_unit: i64,
}

struct TopicDef {
    def: Def,
    /// Highest priority first (`ServerTopicConfigSynonyms`).
    synonyms: &'static [Synonym],
}

struct BrokerDef {
    def: Def,
    dynamic: bool,
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

const MS_PER_MINUTE: i64 = 60 * 1000;
const MS_PER_HOUR: i64 = 60 * MS_PER_MINUTE;
const LONG_MAX: &str = "9223372036854775807";
const RETENTION_MS: &str = "retention.ms";
const INTERNAL_SEGMENT_BYTES: &str = "internal.segment.bytes";
const CLEANUP_POLICIES: [&str; 2] = ["compact", "delete"];

const TOPIC_DEFS: &[TopicDef] = &[
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
const BROKER_DEFS: &[BrokerDef] = &[
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

fn topic_def(name: &str) -> Option<&'static TopicDef> {
    TOPIC_DEFS.iter().find(|t| t.def.name == name)
}

fn broker_def(name: &str) -> Option<&'static BrokerDef> {
    BROKER_DEFS.iter().find(|b| b.def.name == name)
}

// ---------------------------------------------------------------------------------------
// Values: parsing as `ConfigDef.parseType`, validation as Kafka's validators
// ---------------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq)]
enum Value {
    Int(i32),
    Long(i64),
    Double(f64),
    Boolean(bool),
    List(Vec<String>),
    Text(String),
}

impl Value {
    fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(n) => Some(i64::from(*n)),
            Value::Long(n) => Some(*n),
            _ => None,
        }
    }

    /// Text that parses back to the same value.
    fn render(&self) -> String {
        match self {
            Value::Int(n) => n.to_string(),
            Value::Long(n) => n.to_string(),
            Value::Double(x) => java_double_string(*x),
            Value::Boolean(b) => b.to_string(),
            Value::List(items) => items.join(","),
            Value::Text(s) => s.clone(),
        }
    }
}

/// A configured value: the text as stored and shown, and what it parsed to.
#[derive(Clone, Debug, PartialEq)]
struct Setting {
    text: String,
    value: Value,
}

/// Java's `String.trim()`: strips every char up to and including U+0020.
fn java_trim(s: &str) -> &str {
    s.trim_matches(|c: char| c <= ' ')
}

/// The characters of Java's regex `\s`, which `ConfigDef` uses to split lists.
fn is_java_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\u{0B}' | '\u{0C}' | '\r')
}

/// `Double.parseDouble` on trimmed text: decimal and exponent forms, `NaN`, `Infinity`, an
/// optional `f`/`d` suffix. Rust's own parser also takes `inf` and `nan` in any case,
/// which Java refuses, so those are filtered out first. Hex floats are not supported.
fn parse_java_double(text: &str) -> Option<f64> {
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    if unsigned == "NaN" || unsigned == "Infinity" {
        return text.parse().ok();
    }
    let number = text.strip_suffix(['f', 'F', 'd', 'D']).unwrap_or(text);
    let plain = number
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'));
    if plain {
        number.parse().ok()
    } else {
        None
    }
}

/// Java's `Double.toString`, so error texts and rendered defaults read like Kafka's
/// (`2.0`, `1.7976931348623157E308`).
fn java_double_string(x: f64) -> String {
    if x.is_nan() {
        return "NaN".to_string();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.to_string();
    }
    let magnitude = x.abs();
    if magnitude == 0.0 || (1e-3..1e7).contains(&magnitude) {
        let s = format!("{x}");
        if s.contains('.') {
            s
        } else {
            format!("{s}.0")
        }
    } else {
        let s = format!("{x:e}");
        let (mantissa, exponent) = s.split_once('e').unwrap_or((&s, "0"));
        if mantissa.contains('.') {
            format!("{mantissa}E{exponent}")
        } else {
            format!("{mantissa}.0E{exponent}")
        }
    }
}

fn invalid(name: &str, value: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::InvalidValue {
        name: name.to_string(),
        value: value.into(),
        message: message.into(),
    }
}

/// Parses and validates `raw` as `def`, returning what to store. Numbers, booleans and
/// lists are trimmed before parsing (Kafka does) but errors print the untrimmed text;
/// `Text` values are taken literally so a space or TAB separator survives.
fn parse_setting(def: &Def, raw: &str) -> Result<Setting, ConfigError> {
    let trimmed = java_trim(raw);
    let not_a_number =
        |type_name: &str| invalid(def.name, raw, format!("Not a number of type {type_name}"));
    let value = match def.kind {
        Kind::Int => Value::Int(trimmed.parse().map_err(|_| not_a_number("INT"))?),
        Kind::Long => Value::Long(trimmed.parse().map_err(|_| not_a_number("LONG"))?),
        Kind::Double => {
            Value::Double(parse_java_double(trimmed).ok_or_else(|| not_a_number("DOUBLE"))?)
        }
        Kind::Boolean => {
            if trimmed.eq_ignore_ascii_case("true") {
                Value::Boolean(true)
            } else if trimmed.eq_ignore_ascii_case("false") {
                Value::Boolean(false)
            } else {
                return Err(invalid(
                    def.name,
                    raw,
                    "Expected value to be either true or false",
                ));
            }
        }
        Kind::List if trimmed.is_empty() => Value::List(Vec::new()),
        Kind::List => Value::List(
            trimmed
                .split(',')
                .map(|item| item.trim_matches(is_java_space).to_string())
                .collect(),
        ),
        Kind::Text => Value::Text(raw.to_string()),
    };
    check(def, &value, raw)?;
    let text = match def.kind {
        Kind::Text => raw.to_string(),
        _ => trimmed.to_string(),
    };
    Ok(Setting { text, value })
}

fn check(def: &Def, value: &Value, raw: &str) -> Result<(), ConfigError> {
    let (min, max) = match def.check {
        Check::None => return Ok(()),
        Check::AtLeast(min) => (min, None),
        Check::IndexSize => {
            check(
                &Def {
                    check: Check::AtLeast(4),
                    ..*def
                },
                value,
                raw,
            )?;
            return match value.as_i64() {
                Some(size) if size < MIN_INDEX_BYTES => {
                    Err(ConfigError::InvalidMaxIndexSize { size })
                }
                _ => Ok(()),
            };
        }
        Check::Between(min, max) => (min, Some(max)),
        Check::NonEmpty => {
            return match value {
                Value::Text(s) if s.is_empty() => {
                    Err(invalid(def.name, raw, "String must be non-empty"))
                }
                _ => Ok(()),
            };
        }
        Check::CleanupPolicyList => {
            let Value::List(items) = value else {
                return Ok(());
            };
            for (i, item) in items.iter().enumerate() {
                if items[..i].contains(item) {
                    return Err(ConfigError::DuplicateListValues {
                        name: def.name.to_string(),
                    });
                }
            }
            if let Some(bad) = items
                .iter()
                .find(|item| !CLEANUP_POLICIES.contains(&item.as_str()))
            {
                return Err(invalid(
                    def.name,
                    bad.as_str(),
                    format!("String must be one of: {}", CLEANUP_POLICIES.join(", ")),
                ));
            }
            return Ok(());
        }
    };
    // Java compares as doubles; NaN passes both bounds there, and here too.
    let (below, above) = match value {
        Value::Double(x) => (*x < min as f64, max.is_some_and(|m| *x > m as f64)),
        other => match other.as_i64() {
            Some(n) => (n < min, max.is_some_and(|m| n > m)),
            None => (false, false),
        },
    };
    if below {
        Err(invalid(
            def.name,
            value.render(),
            format!("Value must be at least {min}"),
        ))
    } else if let (true, Some(max)) = (above, max) {
        Err(invalid(
            def.name,
            value.render(),
            format!("Value must be no more than {max}"),
        ))
    } else {
        Ok(())
    }
}

/// A built-in default; the tests check every one parses and passes its own validator.
fn builtin(def: &Def) -> Option<Value> {
    let text = def.default?;
    match parse_setting(def, text) {
        Ok(setting) => Some(setting.value),
        Err(e) => panic!("built-in default of {} is invalid: {e}", def.name),
    }
}

// ---------------------------------------------------------------------------------------
// Line syntax
// ---------------------------------------------------------------------------------------

/// One meaningful line of a command written to a `config` file.
enum Op<'a> {
    Set { key: &'a str, raw: &'a str },
    Remove { key: &'a str },
}

impl Op<'_> {
    fn key(&self) -> &str {
        match self {
            Op::Set { key, .. } | Op::Remove { key } => key,
        }
    }
}

/// Lines of one write: `\n`-separated, a trailing `\r` dropped (the only thing removed
/// from a literal value).
fn lines(text: &str) -> impl Iterator<Item = &str> {
    text.split('\n')
        .map(|line| line.strip_suffix('\r').unwrap_or(line))
}

fn is_ignored(line: &str) -> bool {
    let head = line.trim_start();
    head.is_empty() || head.starts_with('#')
}

/// `key=value` sets, `-key` removes; the value is everything after the first `=`.
fn parse_command_line(line: &str) -> Result<Option<Op<'_>>, ConfigError> {
    if is_ignored(line) {
        return Ok(None);
    }
    if let Some((key, raw)) = line.split_once('=') {
        return Ok(Some(Op::Set {
            key: key.trim(),
            raw,
        }));
    }
    match line.trim_start().strip_prefix('-') {
        Some(key) => Ok(Some(Op::Remove { key: key.trim() })),
        None => Err(ConfigError::CommandSyntax {
            line: line.to_string(),
        }),
    }
}

// ---------------------------------------------------------------------------------------
// Changes: what one open-to-close of a config file writes
// ---------------------------------------------------------------------------------------

/// Which config file a change is written to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigScope {
    /// A topic's `config`: topic config names.
    Topic,
    /// `.kpfs/config`: dynamic broker config names.
    Broker,
}

/// A config name and its new setting; `None` removes the override.
type Edit = (&'static str, Option<Setting>);

/// Longer lines are refused rather than buffered: no config value comes near it.
const MAX_CONFIG_LINE_BYTES: usize = 1 << 20;

/// The lines written to a config file between its open and its close, each checked as
/// it arrives. The change applies as a whole at close, or nothing of it does when any
/// line was refused (docs/SEMANTICS.md). Memory is bounded by the number of config
/// names: a later line for a key replaces the earlier one, as applying them in order
/// would.
#[derive(Clone, Debug)]
pub struct ConfigChange {
    scope: ConfigScope,
    /// The file was emptied first (`>`, O_TRUNC): the lines are the whole set of
    /// overrides. Otherwise (`>>`) they change only the keys they name.
    replace: bool,
    /// `Some` sets, `None` removes the override.
    edits: BTreeMap<&'static str, Option<Setting>>,
    /// The start of a line whose `\n` has not arrived yet.
    fragment: Vec<u8>,
    /// The line being written was refused as too long: its bytes are dropped up to its
    /// `\n`.
    overlong: bool,
    lines: usize,
    refused: usize,
    first_refused: Option<usize>,
}

impl ConfigChange {
    pub fn new(scope: ConfigScope) -> ConfigChange {
        ConfigChange {
            scope,
            replace: false,
            edits: BTreeMap::new(),
            fragment: Vec::new(),
            overlong: false,
            lines: 0,
            refused: 0,
            first_refused: None,
        }
    }

    /// A whole change given as one text that changes the keys it names (`>>`), e.g. the
    /// engine's one-shot updates; the first refused line's reason is the error.
    pub fn from_text(scope: ConfigScope, text: &str) -> Result<ConfigChange, ConfigError> {
        let mut change = ConfigChange::new(scope);
        let mut errors = change.write(text.as_bytes());
        errors.extend(change.end_lines());
        match merge_not_dynamic(errors).into_iter().next() {
            Some(first) => Err(first),
            None => Ok(change),
        }
    }

    /// The file was truncated to zero bytes: what was written before is gone, and what
    /// follows is the whole set of overrides.
    pub fn truncate(&mut self) {
        *self = ConfigChange {
            replace: true,
            ..ConfigChange::new(self.scope)
        };
    }

    /// Takes the bytes of one write(2) and checks every line it completes at once.
    /// Returns the reasons of the refused lines (none: every line was accepted); static
    /// broker configs named in one write are refused together, as Kafka refuses one
    /// `AlterConfigs` request.
    pub fn write(&mut self, bytes: &[u8]) -> Vec<ConfigError> {
        let mut errors = Vec::new();
        let mut rest = bytes;
        while let Some(nl) = memchr::memchr(b'\n', rest) {
            if self.overlong {
                self.overlong = false;
            } else if self.fragment.is_empty() {
                errors.extend(self.take_line(&rest[..nl]).err());
            } else {
                let mut line = std::mem::take(&mut self.fragment);
                line.extend_from_slice(&rest[..nl]);
                errors.extend(self.take_line(&line).err());
            }
            rest = &rest[nl + 1..];
        }
        if self.overlong {
            // The rest of a refused line: nothing to keep.
        } else if self.fragment.len() + rest.len() > MAX_CONFIG_LINE_BYTES {
            self.fragment.clear();
            self.overlong = true;
            self.lines += 1;
            errors.push(self.refuse_line(ConfigError::CommandSyntax {
                line: format!("({} bytes or more)", MAX_CONFIG_LINE_BYTES + 1),
            }));
        } else {
            self.fragment.extend_from_slice(rest);
        }
        merge_not_dynamic(errors)
    }

    /// The writer closed: an unterminated last line is a line too.
    pub fn end_lines(&mut self) -> Vec<ConfigError> {
        if self.fragment.is_empty() {
            return Vec::new();
        }
        let line = std::mem::take(&mut self.fragment);
        self.take_line(&line).err().into_iter().collect()
    }

    fn take_line(&mut self, line: &[u8]) -> Result<(), ConfigError> {
        self.lines += 1;
        match self.parse_line(line) {
            Ok(None) => Ok(()),
            Ok(Some((name, setting))) => {
                self.edits.insert(name, setting);
                Ok(())
            }
            Err(e) => Err(self.refuse_line(e)),
        }
    }

    /// Counts the line just taken as refused, for `e`.
    fn refuse_line(&mut self, e: ConfigError) -> ConfigError {
        self.refused += 1;
        self.first_refused.get_or_insert(self.lines);
        e
    }

    /// The edit a line makes: the config name and its new setting (`None` removes the
    /// override); `None` for a comment or blank line.
    fn parse_line(&self, line: &[u8]) -> Result<Option<Edit>, ConfigError> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = std::str::from_utf8(line).map_err(|_| ConfigError::NotText)?;
        let Some(op) = parse_command_line(line)? else {
            return Ok(None);
        };
        let def = match self.scope {
            ConfigScope::Topic => &known_topic_def(op.key())?.def,
            ConfigScope::Broker => {
                let broker = known_broker_def(op.key())?;
                // Refused before the value is looked at, as Kafka does.
                if !broker.dynamic {
                    return Err(ConfigError::NotDynamic {
                        names: vec![broker.def.name.to_string()],
                    });
                }
                &broker.def
            }
        };
        let setting = match op {
            Op::Set { raw, .. } => Some(parse_setting(def, raw)?),
            Op::Remove { .. } => None,
        };
        Ok(Some((def.name, setting)))
    }

    /// The accepted edits, or why none of them may apply.
    fn accepted(&self) -> Result<&BTreeMap<&'static str, Option<Setting>>, ConfigError> {
        match self.first_refused {
            None => Ok(&self.edits),
            Some(first_line) => Err(ConfigError::ChangeRefused {
                refused: self.refused,
                lines: self.lines,
                first_line,
            }),
        }
    }

    /// `values` with the accepted edits applied.
    fn applied_to(
        &self,
        values: &BTreeMap<String, Setting>,
    ) -> Result<BTreeMap<String, Setting>, ConfigError> {
        let edits = self.accepted()?;
        let mut next = if self.replace {
            BTreeMap::new()
        } else {
            values.clone()
        };
        for (name, setting) in edits {
            match setting {
                Some(setting) => next.insert(name.to_string(), setting.clone()),
                None => next.remove(*name),
            };
        }
        Ok(next)
    }
}

/// The static broker configs refused in one write, named in one error in the order
/// written, at the place of the first.
fn merge_not_dynamic(errors: Vec<ConfigError>) -> Vec<ConfigError> {
    let mut merged: Vec<ConfigError> = Vec::with_capacity(errors.len());
    let mut at = None;
    for error in errors {
        match (error, at) {
            (ConfigError::NotDynamic { names }, Some(i)) => {
                if let ConfigError::NotDynamic { names: all } = &mut merged[i] {
                    for name in names {
                        if !all.contains(&name) {
                            all.push(name);
                        }
                    }
                }
            }
            (error @ ConfigError::NotDynamic { .. }, None) => {
                at = Some(merged.len());
                merged.push(error);
            }
            (error, _) => merged.push(error),
        }
    }
    merged
}

/// The persisted form escapes what a line cannot hold literally (a `\r` the reader would
/// take for a line ending, a TAB an editor might expand), so every value reads back exactly.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out
}

fn unescape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

fn write_persisted<'a>(settings: impl Iterator<Item = (&'a String, &'a Setting)>) -> String {
    settings
        .map(|(key, setting)| format!("{key}={}\n", escape(&setting.text)))
        .collect()
}

/// `(key, value)` pairs of a persisted file, values unescaped.
fn read_persisted(text: &str) -> Result<Vec<(String, String)>, ConfigError> {
    let mut pairs = Vec::new();
    for line in lines(text) {
        if is_ignored(line) {
            continue;
        }
        let (key, raw) = line
            .split_once('=')
            .ok_or_else(|| ConfigError::CommandSyntax {
                line: line.to_string(),
            })?;
        pairs.push((key.trim().to_string(), unescape(raw)));
    }
    Ok(pairs)
}

/// Java-properties lines: `key=value`, `key: value` or `key value`; `#`/`!` comments.
/// Line continuations and escapes are not supported (no Kafka broker config needs them).
fn parse_properties(text: &str) -> Result<Vec<(&str, &str)>, ConfigError> {
    let mut pairs = Vec::new();
    for line in text.lines() {
        let line = line.trim_start();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        let Some(end) = line.find(['=', ':', ' ', '\t', '\u{0C}']) else {
            return Err(ConfigError::PropertiesSyntax {
                line: line.to_string(),
            });
        };
        let key = &line[..end];
        let rest = line[end..].trim_start_matches([' ', '\t', '\u{0C}']);
        let value = match rest.strip_prefix(['=', ':']) {
            Some(after) => after.trim_start_matches([' ', '\t', '\u{0C}']),
            None => rest,
        };
        pairs.push((key, value));
    }
    Ok(pairs)
}

// ---------------------------------------------------------------------------------------
// Topic overrides
// ---------------------------------------------------------------------------------------

/// Per-topic overrides (`key -> value` as the user wrote them, validated).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TopicOverrides {
    values: BTreeMap<String, Setting>,
}

fn known_topic_def(key: &str) -> Result<&'static TopicDef, ConfigError> {
    topic_def(key).ok_or_else(|| ConfigError::UnknownTopicConfig {
        name: key.to_string(),
    })
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

    /// The topic's `config` file: the overrides as `key=value` lines, then every other
    /// topic config as a comment with its value and its source. Written back with `>` it
    /// sets exactly these overrides; the comments change nothing.
    pub fn render_effective(&self, broker: &BrokerConfig) -> String {
        let mut out = String::from(OVERRIDES_HEADER);
        for (key, setting) in &self.values {
            out.push_str(&format!("{key}={}\n", setting.text));
        }
        out.push_str(DEFAULTS_HEADER);
        let mut inherited: Vec<&TopicDef> = TOPIC_DEFS
            .iter()
            .filter(|t| !self.values.contains_key(t.def.name))
            .collect();
        inherited.sort_by_key(|t| t.def.name);
        for topic in inherited {
            match broker.inherited_topic_source(topic) {
                Some(Inherited {
                    value,
                    source,
                    synonym,
                }) => {
                    let from = match synonym {
                        Some((name, value)) => format!("{source}:{name}={value}"),
                        None => source.to_string(),
                    };
                    out.push_str(&format!(
                        "# {}={} ({from})\n",
                        topic.def.name,
                        value.render()
                    ));
                }
                None => out.push_str(&format!("# {} is unset\n", topic.def.name)),
            }
        }
        out
    }
}

/// The first line of a rendered config file; the values that follow are the overrides.
const OVERRIDES_HEADER: &str = "# overrides\n";
/// After this line, every line is a comment showing a value that is not an override.
const DEFAULTS_HEADER: &str = "# defaults\n";

/// Where a config value that is not an override comes from, named as
/// `kafka-configs.sh --describe --all` names the source of a config entry (a topic's
/// overrides are its `DYNAMIC_TOPIC_CONFIG`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ConfigSource {
    /// A value written to `.kpfs/config` (`kafka-configs.sh --alter --entity-default`).
    DynamicDefaultBroker,
    /// Set at mount: `--config FILE` or `--override`.
    StaticBroker,
    /// Kafka's built-in default.
    Default,
}

impl fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConfigSource::DynamicDefaultBroker => "DYNAMIC_DEFAULT_BROKER_CONFIG",
            ConfigSource::StaticBroker => "STATIC_BROKER_CONFIG",
            ConfigSource::Default => "DEFAULT_CONFIG",
        })
    }
}

/// A topic config's value without an override, where it comes from and, when a broker
/// config supplies it, that config's name and value.
struct Inherited {
    value: Value,
    source: ConfigSource,
    synonym: Option<(&'static str, String)>,
}

// ---------------------------------------------------------------------------------------
// Broker
// ---------------------------------------------------------------------------------------

/// Effective broker configuration: built-in defaults, then the static values given at
/// mount, then dynamic overrides written to `.kpfs/config`.
#[derive(Clone, Debug, PartialEq)]
pub struct BrokerConfig {
    static_values: BTreeMap<String, Setting>,
    dynamic_values: BTreeMap<String, Setting>,
}

fn known_broker_def(key: &str) -> Result<&'static BrokerDef, ConfigError> {
    broker_def(key).ok_or_else(|| ConfigError::UnknownBrokerConfig {
        name: key.to_string(),
    })
}

const ONE_MIB: i64 = 1024 * 1024;

impl BrokerConfig {
    pub fn defaults() -> BrokerConfig {
        BrokerConfig {
            static_values: BTreeMap::new(),
            dynamic_values: BTreeMap::new(),
        }
    }

    /// Mount time: a Kafka server.properties text (optional) then `--override KEY=VALUE`
    /// pairs in order; later values win.
    pub fn load(
        properties: Option<&str>,
        overrides: &[(String, String)],
    ) -> Result<BrokerConfig, ConfigError> {
        let mut config = BrokerConfig::defaults();
        let from_file = match properties {
            Some(text) => parse_properties(text)?,
            None => Vec::new(),
        };
        let given = overrides.iter().map(|(k, v)| (k.trim(), v.as_str()));
        for (key, raw) in from_file.into_iter().chain(given) {
            let broker = known_broker_def(key)?;
            let setting = parse_setting(&broker.def, raw)?;
            config
                .static_values
                .insert(broker.def.name.to_string(), setting);
        }
        config.check_rules()?;
        Ok(config)
    }

    /// A whole command to `.kpfs/config` that changes the keys it names (same line
    /// syntax as topic commands); the first bad line refuses all of it.
    pub fn apply_dynamic(&self, text: &str) -> Result<BrokerConfig, ConfigError> {
        self.apply_change(&ConfigChange::from_text(ConfigScope::Broker, text)?)
    }

    /// The broker config after `change` (a broker change): all of it, checked across
    /// configs on the result, or nothing.
    pub fn apply_change(&self, change: &ConfigChange) -> Result<BrokerConfig, ConfigError> {
        assert_eq!(change.scope, ConfigScope::Broker, "a broker config change");
        let next = BrokerConfig {
            static_values: self.static_values.clone(),
            dynamic_values: change.applied_to(&self.dynamic_values)?,
        };
        next.check_rules()?;
        // `LogCleaner.validateReconfiguration`: threads are restarted, never resized wildly.
        let current = self.cleaner_threads();
        let wanted = next.cleaner_threads();
        if wanted < current / 2 {
            return Err(ConfigError::Broker(BrokerRule::CleanerThreadsHalved {
                current,
            }));
        }
        if wanted > current.saturating_mul(2) {
            return Err(ConfigError::Broker(BrokerRule::CleanerThreadsDoubled {
                current,
            }));
        }
        Ok(next)
    }

    /// The dynamic overrides to persist: `key=value` lines, sorted, values escaped.
    pub fn dynamic_properties(&self) -> String {
        write_persisted(self.dynamic_values.iter())
    }

    /// Mount time: replaces the dynamic overrides with persisted ones.
    pub fn with_dynamic_properties(&self, text: &str) -> Result<BrokerConfig, ConfigError> {
        let mut next = self.clone();
        next.dynamic_values.clear();
        let mut not_dynamic: Vec<String> = Vec::new();
        for (key, raw) in read_persisted(text)? {
            let broker = known_broker_def(&key)?;
            if !broker.dynamic {
                if !not_dynamic.iter().any(|n| n == broker.def.name) {
                    not_dynamic.push(broker.def.name.to_string());
                }
                continue;
            }
            let setting = parse_setting(&broker.def, &raw)?;
            next.dynamic_values
                .insert(broker.def.name.to_string(), setting);
        }
        if !not_dynamic.is_empty() {
            return Err(ConfigError::NotDynamic { names: not_dynamic });
        }
        next.check_rules()?;
        Ok(next)
    }

    /// `.kpfs/config`: the dynamic overrides as `key=value` lines, then every other
    /// broker config as a comment with its value and source (`read-only` for the static
    /// ones, which only a remount changes), sorted by name. Written back with `>` it sets
    /// exactly these dynamic overrides. A config whose Kafka default is null shows the
    /// value topics inherit through it, or that it is unset.
    pub fn render(&self) -> String {
        let mut defs: Vec<&BrokerDef> = BROKER_DEFS.iter().collect();
        defs.sort_by_key(|b| b.def.name);
        let mut out = String::from(OVERRIDES_HEADER);
        for (name, setting) in &self.dynamic_values {
            out.push_str(&format!("{name}={}\n", setting.text));
        }
        out.push_str(DEFAULTS_HEADER);
        for broker in defs {
            let name = broker.def.name;
            if self.dynamic_values.contains_key(name) {
                continue;
            }
            let read_only = if broker.dynamic { "" } else { ", read-only" };
            let (text, from) = match (self.static_values.get(name), broker.def.default) {
                (Some(setting), _) => {
                    (setting.text.clone(), ConfigSource::StaticBroker.to_string())
                }
                (None, Some(default)) => (default.to_string(), ConfigSource::Default.to_string()),
                (None, None) => match TOPIC_DEFS
                    .iter()
                    .find(|t| t.synonyms.first().is_some_and(|s| s.name == name))
                    .and_then(|t| self.inherited_topic_source(t))
                {
                    Some(Inherited {
                        value,
                        source,
                        synonym: Some((synonym, synonym_value)),
                    }) => (
                        value.render(),
                        format!("{source}:{synonym}={synonym_value}"),
                    ),
                    _ => {
                        let read_only = if broker.dynamic { "" } else { " (read-only)" };
                        out.push_str(&format!("# {name} is unset{read_only}\n"));
                        continue;
                    }
                },
            };
            out.push_str(&format!("# {name}={text} ({from}{read_only})\n"));
        }
        out
    }

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
        let rendering = super::format::render_id(parse_key, &key_separator, &null_marker);
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

    /// `log.retention.check.interval.ms` (static). Default 300000.
    pub fn retention_check_interval_ms(&self) -> i64 {
        self.long("log.retention.check.interval.ms")
    }

    /// `log.cleaner.enable` (static). Default true.
    pub fn cleaner_enable(&self) -> bool {
        match self.value("log.cleaner.enable") {
            Some(Value::Boolean(b)) => b,
            other => panic!("log.cleaner.enable is a BOOLEAN config, got {other:?}"),
        }
    }

    /// `log.cleaner.threads`. Default 1. Minimum 1.
    pub fn cleaner_threads(&self) -> i32 {
        let n = self.long("log.cleaner.threads");
        i32::try_from(n).unwrap_or_else(|_| panic!("log.cleaner.threads is an INT, got {n}"))
    }

    /// `log.cleaner.backoff.ms`. Default 15000.
    pub fn cleaner_backoff_ms(&self) -> i64 {
        self.long("log.cleaner.backoff.ms")
    }

    /// `log.cleaner.dedupe.buffer.size`. Default 134217728. Minimum: above 1 MiB per thread.
    pub fn cleaner_dedupe_buffer_size(&self) -> i64 {
        self.long("log.cleaner.dedupe.buffer.size")
    }

    /// `log.cleaner.io.buffer.size`. Default 524288.
    pub fn cleaner_io_buffer_size(&self) -> i32 {
        let n = self.long("log.cleaner.io.buffer.size");
        i32::try_from(n).unwrap_or_else(|_| panic!("log.cleaner.io.buffer.size is an INT, got {n}"))
    }

    /// `log.cleaner.io.buffer.load.factor` (the dedupe map's load factor). Default 0.9.
    pub fn cleaner_io_buffer_load_factor(&self) -> f64 {
        self.double("log.cleaner.io.buffer.load.factor")
    }

    /// `log.cleaner.io.max.bytes.per.second`. Default f64::MAX (unthrottled).
    pub fn cleaner_io_max_bytes_per_second(&self) -> f64 {
        self.double("log.cleaner.io.max.bytes.per.second")
    }

    /// Whether cleaner threads started under `previous` must restart to follow this
    /// config: one of Kafka's `LogCleaner.RECONFIGURABLE_CONFIGS` changed.
    pub fn cleaner_reconfigured_since(&self, previous: &BrokerConfig) -> bool {
        const RECONFIGURABLE: [&str; 7] = [
            "log.cleaner.threads",
            "log.cleaner.dedupe.buffer.size",
            "log.cleaner.io.buffer.load.factor",
            "log.cleaner.io.buffer.size",
            "message.max.bytes",
            "log.cleaner.io.max.bytes.per.second",
            "log.cleaner.backoff.ms",
        ];
        RECONFIGURABLE
            .iter()
            .any(|name| self.value(name) != previous.value(name))
    }

    /// `log.flush.scheduler.interval.ms` (static). Default Long.MAX_VALUE.
    pub fn flush_scheduler_interval_ms(&self) -> i64 {
        self.long("log.flush.scheduler.interval.ms")
    }

    /// `log.flush.offset.checkpoint.interval.ms` (static). Default 60000.
    pub fn flush_offset_checkpoint_interval_ms(&self) -> i64 {
        self.long("log.flush.offset.checkpoint.interval.ms")
    }

    fn setting(&self, name: &str) -> Option<&Setting> {
        self.dynamic_values
            .get(name)
            .or_else(|| self.static_values.get(name))
    }

    /// Dynamic > static > built-in default; `None` only for null-default configs left unset.
    fn value(&self, name: &str) -> Option<Value> {
        match self.setting(name) {
            Some(setting) => Some(setting.value.clone()),
            None => broker_def(name).and_then(|b| builtin(&b.def)),
        }
    }

    fn long(&self, name: &str) -> i64 {
        expect_long(name, self.value(name))
    }

    fn double(&self, name: &str) -> f64 {
        match self.value(name) {
            Some(Value::Double(x)) => x,
            other => panic!("{name} is a DOUBLE config, got {other:?}"),
        }
    }

    /// What a topic without an override gets: the first synonym that has a value, in the
    /// topic config's unit, else the topic config's own default.
    fn inherited_topic_value(&self, topic: &TopicDef) -> Option<Value> {
        self.inherited_topic_source(topic).map(|i| i.value)
    }

    /// [`BrokerConfig::inherited_topic_value`] with where it comes from.
    fn inherited_topic_source(&self, topic: &TopicDef) -> Option<Inherited> {
        for synonym in topic.synonyms {
            let (source, setting_value) = match self
                .dynamic_values
                .get(synonym.name)
                .map(|s| (ConfigSource::DynamicDefaultBroker, s))
                .or_else(|| {
                    self.static_values
                        .get(synonym.name)
                        .map(|s| (ConfigSource::StaticBroker, s))
                }) {
                Some((source, setting)) => (source, setting.value.clone()),
                None => match broker_def(synonym.name).and_then(|b| builtin(&b.def)) {
                    Some(value) => (ConfigSource::Default, value),
                    None => continue,
                },
            };
            let shown = Some((synonym.name, setting_value.render()));
            if topic.def.kind != Kind::Long {
                return Some(Inherited {
                    value: setting_value,
                    source,
                    synonym: shown,
                });
            }
            let n =
                expect_long(synonym.name, Some(setting_value)).saturating_mul(synonym.ms_per_unit);
            // `KafkaConfig.logRetentionTimeMillis`: any negative broker retention is unlimited.
            let n = if topic.def.name == RETENTION_MS && n < 0 {
                -1
            } else {
                n
            };
            return Some(Inherited {
                value: Value::Long(n),
                source,
                synonym: shown,
            });
        }
        builtin(&topic.def).map(|value| Inherited {
            value,
            source: ConfigSource::Default,
            synonym: None,
        })
    }

    fn inherited_long(&self, topic_name: &str) -> i64 {
        let value = topic_def(topic_name).and_then(|t| self.inherited_topic_value(t));
        expect_long(topic_name, value)
    }

    /// `KafkaConfig.validateValues` checks that span several configs.
    fn check_rules(&self) -> Result<(), ConfigError> {
        let retention_ms = self.inherited_long(RETENTION_MS);
        if retention_ms != -1 && retention_ms < 1 {
            return Err(ConfigError::Broker(BrokerRule::RetentionMs));
        }
        if self.inherited_long("segment.ms") < 1 {
            return Err(ConfigError::Broker(BrokerRule::RollMs));
        }
        if self.inherited_long("segment.jitter.ms") < 0 {
            return Err(ConfigError::Broker(BrokerRule::RollJitterMs));
        }
        let threads = self.cleaner_threads();
        if threads < 1 {
            return Err(ConfigError::Broker(BrokerRule::CleanerThreadsAtLeastOne));
        }
        if self.cleaner_dedupe_buffer_size() / i64::from(threads) <= ONE_MIB {
            return Err(ConfigError::Broker(BrokerRule::DedupeBufferPerThread));
        }
        Ok(())
    }
}

fn expect_long(name: &str, value: Option<Value>) -> i64 {
    match value.as_ref().and_then(Value::as_i64) {
        Some(n) => n,
        None => panic!("{name} is a numeric config with a value, got {value:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broker() -> BrokerConfig {
        BrokerConfig::defaults()
    }

    fn apply(text: &str) -> Result<TopicOverrides, ConfigError> {
        TopicOverrides::default().apply_command(text, &broker())
    }

    fn error(text: &str) -> String {
        apply(text).unwrap_err().to_string()
    }

    fn broker_error(text: &str) -> String {
        broker().apply_dynamic(text).unwrap_err().to_string()
    }

    fn load(pairs: &[(&str, &str)]) -> Result<BrokerConfig, ConfigError> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        BrokerConfig::load(None, &pairs)
    }

    #[test]
    fn only_the_cleaners_reconfigurable_configs_restart_it() {
        let base = broker();
        let changed = |text: &str| {
            base.apply_dynamic(text)
                .unwrap()
                .cleaner_reconfigured_since(&base)
        };
        for text in [
            "log.cleaner.threads=2",
            "log.cleaner.dedupe.buffer.size=1048577",
            "log.cleaner.io.buffer.load.factor=0.5",
            "log.cleaner.io.buffer.size=1000",
            "message.max.bytes=1000",
            "log.cleaner.io.max.bytes.per.second=1000",
            "log.cleaner.backoff.ms=1",
        ] {
            assert!(changed(text), "{text}");
        }
        assert!(!changed("log.cleaner.backoff.ms=15000"), "the same value");
        assert!(!changed("log.retention.ms=1000"));
        assert!(!changed("log.cleaner.min.cleanable.ratio=0.1"));
    }

    #[test]
    fn every_builtin_default_parses_and_passes_its_validator() {
        for topic in TOPIC_DEFS {
            if let Some(text) = topic.def.default {
                parse_setting(&topic.def, text).unwrap();
            }
        }
        for broker in BROKER_DEFS {
            if let Some(text) = broker.def.default {
                parse_setting(&broker.def, text).unwrap();
            }
        }
    }

    #[test]
    fn synonyms_are_broker_configs_and_only_the_first_is_dynamic() {
        for topic in TOPIC_DEFS {
            for (i, synonym) in topic.synonyms.iter().enumerate() {
                let broker = broker_def(synonym.name).unwrap();
                assert_eq!(broker.dynamic, i == 0, "{}", synonym.name);
                if synonym.ms_per_unit == 1 {
                    assert_eq!(broker.def.kind, topic.def.kind, "{}", synonym.name);
                }
            }
        }
    }

    #[test]
    fn defaults_match_kafka_4() {
        let t = broker().topic_defaults();
        assert_eq!(
            t.cleanup_policy,
            CleanupPolicy {
                compact: false,
                delete: true
            }
        );
        assert_eq!(t.retention_ms, 604_800_000);
        assert_eq!(t.retention_bytes, -1);
        assert_eq!(t.segment_bytes, 1_073_741_824);
        assert_eq!(t.internal_segment_bytes, None);
        assert_eq!(t.segment_size(), 1_073_741_824);
        assert_eq!(t.segment_ms, 604_800_000);
        assert_eq!(t.segment_jitter_ms, 0);
        assert_eq!(t.segment_index_bytes, 10_485_760);
        assert_eq!(t.index_interval_bytes, 4096);
        assert_eq!(t.min_cleanable_dirty_ratio, 0.5);
        assert_eq!(t.delete_retention_ms, 86_400_000);
        assert_eq!(t.min_compaction_lag_ms, 0);
        assert_eq!(t.max_compaction_lag_ms, i64::MAX);
        assert_eq!(t.file_delete_delay_ms, 60_000);
        assert_eq!(t.max_message_bytes, 1_048_588);
        assert_eq!(t.flush_messages, i64::MAX);
        assert_eq!(t.flush_ms, i64::MAX);
        assert!(!t.parse_key);
        assert_eq!(t.key_separator, b"\t");
        assert_eq!(t.null_marker, None);
    }

    #[test]
    fn broker_getter_defaults() {
        let b = broker();
        assert_eq!(b.retention_check_interval_ms(), 300_000);
        assert!(b.cleaner_enable());
        assert_eq!(b.cleaner_threads(), 1);
        assert_eq!(b.cleaner_backoff_ms(), 15_000);
        assert_eq!(b.cleaner_dedupe_buffer_size(), 134_217_728);
        assert_eq!(b.cleaner_io_buffer_size(), 524_288);
        assert_eq!(b.cleaner_io_buffer_load_factor(), 0.9);
        assert_eq!(b.cleaner_io_max_bytes_per_second(), f64::MAX);
        assert_eq!(b.flush_scheduler_interval_ms(), i64::MAX);
        assert_eq!(b.flush_offset_checkpoint_interval_ms(), 60_000);
    }

    #[test]
    fn range_validators_use_kafka_texts() {
        let cases = [
            (
                "segment.bytes=400",
                "Invalid value 400 for configuration segment.bytes: Value must be at least 1048576",
            ),
            (
                "retention.ms=-2",
                "Invalid value -2 for configuration retention.ms: Value must be at least -1",
            ),
            (
                "segment.ms=0",
                "Invalid value 0 for configuration segment.ms: Value must be at least 1",
            ),
            (
                "segment.jitter.ms=-1",
                "Invalid value -1 for configuration segment.jitter.ms: Value must be at least 0",
            ),
            (
                "segment.index.bytes=3",
                "Invalid value 3 for configuration segment.index.bytes: Value must be at least 4",
            ),
            (
                "index.interval.bytes=-1",
                "Invalid value -1 for configuration index.interval.bytes: Value must be at least 0",
            ),
            (
                "min.cleanable.dirty.ratio=1.2",
                "Invalid value 1.2 for configuration min.cleanable.dirty.ratio: Value must be no more than 1",
            ),
            (
                "min.cleanable.dirty.ratio=-0.1",
                "Invalid value -0.1 for configuration min.cleanable.dirty.ratio: Value must be at least 0",
            ),
            (
                "min.cleanable.dirty.ratio=2",
                "Invalid value 2.0 for configuration min.cleanable.dirty.ratio: Value must be no more than 1",
            ),
            (
                "delete.retention.ms=-1",
                "Invalid value -1 for configuration delete.retention.ms: Value must be at least 0",
            ),
            (
                "min.compaction.lag.ms=-1",
                "Invalid value -1 for configuration min.compaction.lag.ms: Value must be at least 0",
            ),
            (
                "max.compaction.lag.ms=0",
                "Invalid value 0 for configuration max.compaction.lag.ms: Value must be at least 1",
            ),
            (
                "file.delete.delay.ms=-1",
                "Invalid value -1 for configuration file.delete.delay.ms: Value must be at least 0",
            ),
            (
                "max.message.bytes=-1",
                "Invalid value -1 for configuration max.message.bytes: Value must be at least 0",
            ),
            (
                "flush.messages=0",
                "Invalid value 0 for configuration flush.messages: Value must be at least 1",
            ),
            (
                "flush.ms=-1",
                "Invalid value -1 for configuration flush.ms: Value must be at least 0",
            ),
        ];
        for (command, expected) in cases {
            assert_eq!(error(command), expected, "{command}");
        }
    }

    #[test]
    fn bounds_themselves_are_accepted() {
        let o = apply(
            "segment.bytes=1048576\nretention.ms=-1\nsegment.ms=1\nsegment.index.bytes=12\n\
             index.interval.bytes=0\nmin.cleanable.dirty.ratio=0\nmax.compaction.lag.ms=1\n\
             flush.messages=1\nflush.ms=0\nretention.bytes=-5\ninternal.segment.bytes=100",
        )
        .unwrap();
        let t = broker().resolve_topic(&o);
        assert_eq!(t.segment_bytes, 1_048_576);
        assert_eq!(t.retention_ms, -1);
        assert_eq!(t.retention_bytes, -5);
        assert_eq!(t.segment_size(), 100);
        assert_eq!(t.min_cleanable_dirty_ratio, 0.0);
        assert!(apply("min.cleanable.dirty.ratio=1").is_ok());
        assert!(apply("retention.ms=0").is_ok(), "topic-level 0 is allowed");
    }

    #[test]
    fn index_sizes_below_one_entry_fail_as_kafka_fails_creating_the_index() {
        // Kafka's validator is atLeast(4); `AbstractIndex` then refuses a size below its
        // entry size (8 for .index, 12 for .timeindex) when it creates the file.
        assert_eq!(
            error("segment.index.bytes=3"),
            "Invalid value 3 for configuration segment.index.bytes: Value must be at least 4"
        );
        for size in 4..12 {
            assert_eq!(
                error(&format!("segment.index.bytes={size}")),
                format!("Invalid max index size: {size}")
            );
            assert_eq!(
                broker_error(&format!("log.index.size.max.bytes={size}")),
                format!("Invalid max index size: {size}")
            );
            assert_eq!(
                load(&[("log.index.size.max.bytes", &size.to_string())])
                    .unwrap_err()
                    .to_string(),
                format!("Invalid max index size: {size}")
            );
        }
        let smallest = apply("segment.index.bytes=12").unwrap();
        assert_eq!(broker().resolve_topic(&smallest).segment_index_bytes, 12);
    }

    #[test]
    fn preallocate_is_a_topic_config_with_a_dynamic_broker_synonym() {
        assert!(!broker().topic_defaults().preallocate);
        let o = apply("preallocate=true").unwrap();
        assert!(broker().resolve_topic(&o).preallocate);
        let b = broker().apply_dynamic("log.preallocate=true").unwrap();
        assert!(b.topic_defaults().preallocate);
        assert_eq!(
            error("preallocate=yes"),
            "Invalid value yes for configuration preallocate: Expected value to be either true or false"
        );
    }

    #[test]
    fn parse_errors_print_the_untrimmed_value() {
        assert_eq!(
            error("retention.ms=abc"),
            "Invalid value abc for configuration retention.ms: Not a number of type LONG"
        );
        assert_eq!(
            error("segment.bytes=3000000000"),
            "Invalid value 3000000000 for configuration segment.bytes: Not a number of type INT"
        );
        assert_eq!(
            error("min.cleanable.dirty.ratio=half"),
            "Invalid value half for configuration min.cleanable.dirty.ratio: Not a number of type DOUBLE"
        );
        assert_eq!(
            error("parse.key=maybe"),
            "Invalid value maybe for configuration parse.key: Expected value to be either true or false"
        );
        assert_eq!(
            error("retention.ms= 12x "),
            "Invalid value  12x  for configuration retention.ms: Not a number of type LONG"
        );
        assert_eq!(
            error("retention.ms="),
            "Invalid value  for configuration retention.ms: Not a number of type LONG"
        );
    }

    #[test]
    fn numbers_and_booleans_are_trimmed_before_parsing() {
        let o = apply("retention.ms =  1000 \nparse.key= TRUE\r\nmin.cleanable.dirty.ratio=.25")
            .unwrap();
        let t = broker().resolve_topic(&o);
        assert_eq!(t.retention_ms, 1000);
        assert!(t.parse_key);
        assert_eq!(t.min_cleanable_dirty_ratio, 0.25);
        assert_eq!(o.get("retention.ms"), Some("1000"));
    }

    #[test]
    fn java_double_syntax() {
        assert_eq!(parse_java_double("1e-1"), Some(0.1));
        assert_eq!(parse_java_double("0.5d"), Some(0.5));
        assert_eq!(parse_java_double("Infinity"), Some(f64::INFINITY));
        assert!(parse_java_double("NaN").unwrap().is_nan());
        assert_eq!(parse_java_double("inf"), None);
        assert_eq!(parse_java_double("nan"), None);
        assert_eq!(parse_java_double(""), None);
        assert_eq!(java_double_string(2.0), "2.0");
        assert_eq!(java_double_string(0.9), "0.9");
        assert_eq!(java_double_string(f64::MAX), "1.7976931348623157E308");
        assert_eq!(java_double_string(1e-5), "1.0E-5");
    }

    #[test]
    fn cleanup_policy_list() {
        assert_eq!(
            error("cleanup.policy=foobar"),
            "Invalid value foobar for configuration cleanup.policy: String must be one of: compact, delete"
        );
        assert_eq!(
            error("cleanup.policy=Compact"),
            "Invalid value Compact for configuration cleanup.policy: String must be one of: compact, delete"
        );
        assert_eq!(
            error("cleanup.policy=compact,foobar"),
            "Invalid value foobar for configuration cleanup.policy: String must be one of: compact, delete"
        );
        assert_eq!(
            error("cleanup.policy=compact, compact"),
            "Configuration 'cleanup.policy' values must not be duplicated."
        );
        let both = apply("cleanup.policy= compact , delete ").unwrap();
        let policy = broker().resolve_topic(&both).cleanup_policy;
        assert!(policy.compact && policy.delete);
        let none = apply("cleanup.policy=").unwrap();
        assert_eq!(
            broker().resolve_topic(&none).cleanup_policy,
            CleanupPolicy::default()
        );
    }

    #[test]
    fn separators_are_literal() {
        let o = apply("key.separator=\t\nnull.marker= ").unwrap();
        let t = broker().resolve_topic(&o);
        assert_eq!(t.key_separator, b"\t");
        assert_eq!(t.null_marker, Some(b" ".to_vec()));
        let o = apply("key.separator= :: \r\nnull.marker=").unwrap();
        let t = broker().resolve_topic(&o);
        assert_eq!(t.key_separator, b" :: ");
        assert_eq!(t.null_marker, None);
        assert_eq!(
            error("key.separator="),
            "Invalid value  for configuration key.separator: String must be non-empty"
        );
    }

    #[test]
    fn unknown_names_and_syntax() {
        assert_eq!(error("foo=1"), "Unknown topic config name: foo");
        assert_eq!(error("-foo"), "Unknown topic config name: foo");
        assert_eq!(
            error("log.retention.ms=1"),
            "Unknown topic config name: log.retention.ms"
        );
        assert_eq!(
            error("retention.ms"),
            "Invalid config line 'retention.ms': expected key=value to set, -key to remove, or a # comment"
        );
    }

    #[test]
    fn comments_blank_lines_and_last_line_wins() {
        let o =
            apply("# a comment\n\n  \nretention.ms=1\r\n  # indented\nretention.ms=2\n").unwrap();
        assert_eq!(o.get("retention.ms"), Some("2"));
        assert_eq!(apply("").unwrap(), TopicOverrides::default());
    }

    #[test]
    fn remove_falls_back_to_the_broker_value() {
        let b = broker().apply_dynamic("log.retention.ms=5000").unwrap();
        let o = TopicOverrides::default()
            .apply_command("retention.ms=1000\nsegment.ms=99", &b)
            .unwrap();
        assert_eq!(b.resolve_topic(&o).retention_ms, 1000);
        let o = o.apply_command("-retention.ms\n - segment.ms", &b).unwrap();
        assert!(o.is_empty());
        assert_eq!(b.resolve_topic(&o).retention_ms, 5000);
        assert_eq!(b.resolve_topic(&o).segment_ms, 604_800_000);
        let o = o.apply_command("-flush.ms", &b).unwrap();
        assert!(o.is_empty());
    }

    #[test]
    fn a_bad_line_refuses_the_whole_command() {
        let before = apply("retention.ms=1000").unwrap();
        let result =
            before.apply_command("retention.ms=2000\nsegment.bytes=1\nflush.ms=5", &broker());
        assert_eq!(
            result.unwrap_err().to_string(),
            "Invalid value 1 for configuration segment.bytes: Value must be at least 1048576"
        );
        assert_eq!(before.get("retention.ms"), Some("1000"));
        assert_eq!(before.get("flush.ms"), None);
        // The first bad line is reported even when a later one is malformed too.
        assert_eq!(
            before
                .apply_command("bogus=1\nnot a line", &broker())
                .unwrap_err()
                .to_string(),
            "Unknown topic config name: bogus"
        );
    }

    #[test]
    fn compaction_lag_conflict_uses_effective_values() {
        assert_eq!(
            error("min.compaction.lag.ms=100\nmax.compaction.lag.ms=50"),
            "conflict topic config setting min.compaction.lag.ms (100) > max.compaction.lag.ms (50)"
        );
        let b = broker()
            .apply_dynamic("log.cleaner.max.compaction.lag.ms=1000")
            .unwrap();
        let err = TopicOverrides::default()
            .apply_command("min.compaction.lag.ms=2000", &b)
            .unwrap_err();
        assert_eq!(
            err,
            ConfigError::CompactionLagConflict {
                min_ms: 2000,
                max_ms: 1000
            }
        );
        assert!(apply("min.compaction.lag.ms=50\nmax.compaction.lag.ms=50").is_ok());
    }

    #[test]
    fn topic_properties_round_trip() {
        let o = apply(
            "key.separator=\t\nnull.marker=\\N \ncleanup.policy=compact, delete\nretention.ms= 7\n\
             key.separator=\r\r",
        )
        .unwrap();
        assert_eq!(o.get("key.separator"), Some("\r"));
        let text = o.to_properties();
        assert!(!text.contains('\r'));
        let back = TopicOverrides::from_properties(&text).unwrap();
        assert_eq!(back, o);
        assert_eq!(back.get("null.marker"), Some("\\N "));
        assert_eq!(back.get("retention.ms"), Some("7"));
        assert_eq!(TopicOverrides::default().to_properties(), "");
        assert!(TopicOverrides::from_properties("").unwrap().is_empty());
        assert_eq!(
            TopicOverrides::from_properties("foo=1")
                .unwrap_err()
                .to_string(),
            "Unknown topic config name: foo"
        );
        let tab = apply("key.separator=\t").unwrap();
        assert_eq!(tab.to_properties(), "key.separator=\\t\n");
    }

    /// What `config` shows, written back with `>`.
    fn write_back(shown: &str, scope: ConfigScope) -> ConfigChange {
        let mut change = ConfigChange::new(scope);
        change.truncate();
        assert!(change.write(shown.as_bytes()).is_empty(), "{shown}");
        assert!(change.end_lines().is_empty());
        change
    }

    #[test]
    fn rendered_config_round_trips() {
        let b = broker()
            .apply_dynamic("log.cleanup.policy=\nlog.retention.ms=12345")
            .unwrap();
        for command in [
            "",
            "retention.ms=1000\ncleanup.policy=compact",
            "key.separator=\t\nnull.marker=",
            "key.separator= | \nnull.marker=NULL\nparse.key=true",
            "internal.segment.bytes=512\nmin.cleanable.dirty.ratio=0.01",
            "null.marker=# not a comment",
        ] {
            let o = TopicOverrides::default()
                .apply_command(command, &b)
                .unwrap();
            let shown = o.render_effective(&b);
            // Written back over any overrides, it sets exactly the ones shown.
            let other = TopicOverrides::default()
                .apply_command("segment.ms=5\nflush.ms=6", &b)
                .unwrap();
            for base in [TopicOverrides::default(), o.clone(), other] {
                let again = base
                    .apply_change(&write_back(&shown, ConfigScope::Topic), &b)
                    .unwrap();
                assert_eq!(again, o, "{shown}");
            }
        }
    }

    #[test]
    fn a_restored_config_keeps_following_the_broker() {
        let b = broker();
        let o = TopicOverrides::default()
            .apply_command("retention.ms=1000", &b)
            .unwrap();
        let saved = o.render_effective(&b);
        let restored = TopicOverrides::default()
            .apply_change(&write_back(&saved, ConfigScope::Topic), &b)
            .unwrap();
        let b = b.apply_dynamic("log.segment.delete.delay.ms=5").unwrap();
        assert_eq!(b.resolve_topic(&restored).file_delete_delay_ms, 5);
        assert_eq!(b.resolve_topic(&restored).retention_ms, 1000);
    }

    #[test]
    fn rendered_config_layout() {
        let b = load(&[("log.retention.hours", "2")])
            .unwrap()
            .apply_dynamic("log.segment.bytes=2097152")
            .unwrap();
        let o = apply("retention.bytes=1000").unwrap();
        let text = o.render_effective(&b);
        assert!(
            text.starts_with("# overrides\nretention.bytes=1000\n# defaults\n# "),
            "{text}"
        );
        for expected in [
            "\n# key.separator=\t (DEFAULT_CONFIG)\n",
            "\n# null.marker= (DEFAULT_CONFIG)\n",
            "\n# internal.segment.bytes is unset\n",
            "\n# cleanup.policy=delete (DEFAULT_CONFIG:log.cleanup.policy=delete)\n",
            "\n# retention.ms=7200000 (STATIC_BROKER_CONFIG:log.retention.hours=2)\n",
            "\n# segment.bytes=2097152 (DYNAMIC_DEFAULT_BROKER_CONFIG:log.segment.bytes=2097152)\n",
            "\n# segment.ms=604800000 (DEFAULT_CONFIG:log.roll.hours=168)\n",
            "\n# max.compaction.lag.ms=9223372036854775807 (DEFAULT_CONFIG:log.cleaner.max.compaction.lag.ms=9223372036854775807)\n",
            "\n# min.cleanable.dirty.ratio=0.5 (DEFAULT_CONFIG:log.cleaner.min.cleanable.ratio=0.5)\n",
            "\n# preallocate=false (DEFAULT_CONFIG:log.preallocate=false)\n",
        ] {
            assert!(text.contains(expected), "{expected:?} in\n{text}");
        }
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), TOPIC_DEFS.len() + 2);
        for topic in TOPIC_DEFS {
            assert_eq!(
                lines
                    .iter()
                    .filter(|l| l
                        .trim_start_matches("# ")
                        .starts_with(&format!("{} ", topic.def.name))
                        || l.trim_start_matches("# ")
                            .starts_with(&format!("{}=", topic.def.name)))
                    .count(),
                1,
                "{}",
                topic.def.name
            );
        }
    }

    #[test]
    fn a_change_checks_each_line_as_it_arrives_and_applies_whole() {
        let b = broker();
        let before = apply("retention.ms=1000\nflush.ms=5").unwrap();
        let mut change = ConfigChange::new(ConfigScope::Topic);
        // bash's printf: one write per line; the bad one is refused at once.
        assert!(change.write(b"retention.ms=600000\n").is_empty());
        assert!(change.write(b"retention.bytes=300\n").is_empty());
        let refused = change.write(b"segment.bytes=400\n");
        assert_eq!(
            refused.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
            ["Invalid value 400 for configuration segment.bytes: Value must be at least 1048576"]
        );
        assert!(change.write(b"segment.ms=3000\n").is_empty());
        assert_eq!(
            before.apply_change(&change, &b).unwrap_err().to_string(),
            "nothing of this change applied: line 3 of 4 was refused"
        );
        change.write(b"bogus\n");
        assert_eq!(
            before.apply_change(&change, &b).unwrap_err().to_string(),
            "nothing of this change applied: 2 of its 5 lines were refused, the first line 3"
        );
        // Without the bad line, `>>` changes the keys named and keeps the others.
        let mut change = ConfigChange::new(ConfigScope::Topic);
        change.write(b"retention.ms=600000\nretention.bytes=300\n");
        let after = before.apply_change(&change, &b).unwrap();
        assert_eq!(after.get("retention.ms"), Some("600000"));
        assert_eq!(after.get("retention.bytes"), Some("300"));
        assert_eq!(after.get("flush.ms"), Some("5"));
        // `>` makes them the whole set of overrides.
        change.truncate();
        change.write(b"segment.ms=3000\n-retention.ms\n");
        let replaced = before.apply_change(&change, &b).unwrap();
        assert_eq!(replaced.to_properties(), "segment.ms=3000\n");
        // An empty `>` removes every override.
        let mut empty = ConfigChange::new(ConfigScope::Topic);
        empty.truncate();
        assert!(before.apply_change(&empty, &b).unwrap().is_empty());
    }

    #[test]
    fn cross_key_checks_run_on_the_whole_change() {
        let b = broker();
        let mut change = ConfigChange::new(ConfigScope::Topic);
        assert!(change.write(b"min.compaction.lag.ms=5000\n").is_empty());
        assert!(change.write(b"max.compaction.lag.ms=1000\n").is_empty());
        assert_eq!(
            TopicOverrides::default()
                .apply_change(&change, &b)
                .unwrap_err()
                .to_string(),
            "conflict topic config setting min.compaction.lag.ms (5000) > max.compaction.lag.ms (1000)"
        );
        // A prefix that conflicts is fine when the whole change does not.
        let current = apply("min.compaction.lag.ms=5000").unwrap();
        let mut change = ConfigChange::new(ConfigScope::Topic);
        change.write(b"max.compaction.lag.ms=1000\nmin.compaction.lag.ms=500\n");
        let after = current.apply_change(&change, &b).unwrap();
        assert_eq!(b.resolve_topic(&after).min_compaction_lag_ms, 500);
    }

    #[test]
    fn a_line_may_arrive_in_pieces() {
        let value = "x".repeat(20_000);
        let line = format!("null.marker={value}\nparse.key=true");
        let mut change = ConfigChange::new(ConfigScope::Topic);
        for piece in line.as_bytes().chunks(8192) {
            assert!(change.write(piece).is_empty());
        }
        assert!(change.end_lines().is_empty(), "the unterminated last line");
        let o = TopicOverrides::default()
            .apply_change(&change, &broker())
            .unwrap();
        assert_eq!(o.get("null.marker"), Some(value.as_str()));
        assert_eq!(o.get("parse.key"), Some("true"));
        // A multi-byte character split between two writes is still one character.
        let mut change = ConfigChange::new(ConfigScope::Topic);
        let text = "null.marker=\u{00e9}\n".as_bytes();
        assert!(change.write(&text[..13]).is_empty());
        assert!(change.write(&text[13..]).is_empty());
        let o = TopicOverrides::default()
            .apply_change(&change, &broker())
            .unwrap();
        assert_eq!(o.get("null.marker"), Some("\u{00e9}"));
        // A line never ending is refused rather than buffered without bound.
        let mut change = ConfigChange::new(ConfigScope::Topic);
        let chunk = vec![b'x'; 1 << 19];
        assert!(change.write(&chunk).is_empty());
        assert!(change.write(&chunk).is_empty());
        assert_eq!(change.write(b"x").len(), 1);
        assert!(change.fragment.is_empty());
        // The rest of it is dropped up to its newline; the next line counts again.
        assert!(change.write(&chunk).is_empty());
        assert!(change.write(b"xx\nretention.ms=1\n").is_empty());
        assert!(change.fragment.is_empty());
        assert_eq!(change.edits.len(), 1);
    }

    #[test]
    fn invalid_utf8_is_refused() {
        let mut change = ConfigChange::new(ConfigScope::Topic);
        let errors = change.write(b"null.marker=\xff\n");
        assert_eq!(errors[0].to_string(), "config lines must be UTF-8 text");
    }

    #[test]
    fn static_broker_configs_are_refused_dynamically() {
        assert_eq!(
            broker_error("log.retention.check.interval.ms=1000"),
            "Cannot update these configs dynamically: [log.retention.check.interval.ms]"
        );
        assert_eq!(
            broker_error(
                "log.retention.ms=1\nlog.roll.hours=1\nlog.cleaner.enable=false\nlog.roll.hours=2"
            ),
            "Cannot update these configs dynamically: [log.roll.hours, log.cleaner.enable]"
        );
        assert_eq!(
            broker_error("-log.retention.hours"),
            "Cannot update these configs dynamically: [log.retention.hours]"
        );
        // Refused before values are looked at, as Kafka does.
        assert_eq!(
            broker_error("log.flush.scheduler.interval.ms=abc"),
            "Cannot update these configs dynamically: [log.flush.scheduler.interval.ms]"
        );
        assert_eq!(broker_error("foo=1"), "Unknown broker config name: foo");
        assert_eq!(
            broker_error("retention.ms=1"),
            "Unknown broker config name: retention.ms"
        );
        assert_eq!(
            broker_error("log.retention.ms"),
            "Invalid config line 'log.retention.ms': expected key=value to set, -key to remove, or a # comment"
        );
    }

    #[test]
    fn every_dynamic_config_is_accepted() {
        for def in BROKER_DEFS.iter().filter(|b| b.dynamic) {
            let value = def.def.default.unwrap_or("1000");
            let b = broker()
                .apply_dynamic(&format!("{}={value}", def.def.name))
                .unwrap();
            assert!(b.dynamic_properties().starts_with(def.def.name));
        }
    }

    #[test]
    fn dynamic_values_are_inherited_by_topics() {
        let b = broker()
            .apply_dynamic(
                "log.retention.ms=1000\nlog.cleanup.policy=compact\nlog.segment.bytes=2097152\n\
                 log.roll.ms=77\nlog.roll.jitter.ms=5\nmessage.max.bytes=10\n\
                 log.segment.delete.delay.ms=0\nlog.flush.interval.ms=9\n\
                 log.cleaner.min.cleanable.ratio=0.1\nlog.cleaner.backoff.ms=1",
            )
            .unwrap();
        let t = b.topic_defaults();
        assert_eq!(t.retention_ms, 1000);
        assert!(t.cleanup_policy.compact && !t.cleanup_policy.delete);
        assert_eq!(t.segment_bytes, 2_097_152);
        assert_eq!(t.segment_ms, 77);
        assert_eq!(t.segment_jitter_ms, 5);
        assert_eq!(t.max_message_bytes, 10);
        assert_eq!(t.file_delete_delay_ms, 0);
        assert_eq!(t.flush_ms, 9);
        assert_eq!(t.min_cleanable_dirty_ratio, 0.1);
        assert_eq!(b.cleaner_backoff_ms(), 1);
        // A topic override still wins over the dynamic default.
        let o = TopicOverrides::default()
            .apply_command("retention.ms=5", &b)
            .unwrap();
        assert_eq!(b.resolve_topic(&o).retention_ms, 5);
        // Removing the dynamic value falls back to the static one, then the default.
        let static_b = load(&[("log.retention.ms", "3000")]).unwrap();
        let dyn_b = static_b.apply_dynamic("log.retention.ms=1000").unwrap();
        assert_eq!(dyn_b.topic_defaults().retention_ms, 1000);
        let back = dyn_b.apply_dynamic("-log.retention.ms").unwrap();
        assert_eq!(back.topic_defaults().retention_ms, 3000);
        assert_eq!(
            broker()
                .apply_dynamic("-log.retention.ms")
                .unwrap()
                .topic_defaults()
                .retention_ms,
            604_800_000
        );
    }

    #[test]
    fn dynamic_updates_are_all_or_nothing() {
        let b = broker().apply_dynamic("log.retention.ms=1000").unwrap();
        assert_eq!(
            b.apply_dynamic("log.retention.ms=2000\nlog.segment.bytes=5")
                .unwrap_err()
                .to_string(),
            "Invalid value 5 for configuration log.segment.bytes: Value must be at least 1048576"
        );
        assert_eq!(b.topic_defaults().retention_ms, 1000);
    }

    #[test]
    fn broker_rules() {
        assert_eq!(
            broker_error("log.retention.ms=0"),
            "log.retention.ms must be unlimited (-1) or, greater than or equal to 1"
        );
        assert_eq!(
            load(&[("log.retention.minutes", "0")])
                .unwrap_err()
                .to_string(),
            "log.retention.ms must be unlimited (-1) or, greater than or equal to 1"
        );
        assert_eq!(
            broker_error("log.roll.ms=0"),
            "log.roll.ms must be greater than or equal to 1"
        );
        assert_eq!(
            broker_error("log.roll.jitter.ms=-1"),
            "log.roll.jitter.ms must be greater than or equal to 0"
        );
        assert_eq!(
            broker_error("log.cleaner.threads=0"),
            "Log cleaner threads should be at least 1"
        );
        assert_eq!(
            broker_error("log.cleaner.threads=-1"),
            "Invalid value -1 for configuration log.cleaner.threads: Value must be at least 0"
        );
        assert_eq!(
            broker_error("log.cleaner.dedupe.buffer.size=1048576"),
            "log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread."
        );
        assert_eq!(
            broker_error("log.cleaner.threads=2\nlog.cleaner.dedupe.buffer.size=2097152"),
            "log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread."
        );
        assert!(broker()
            .apply_dynamic("log.cleaner.dedupe.buffer.size=1048577")
            .is_ok());
        assert_eq!(
            broker_error("log.cleaner.threads=3"),
            "Log cleaner threads cannot be increased to more than double the current value 1"
        );
        let four = load(&[("log.cleaner.threads", "4")]).unwrap();
        assert_eq!(
            four.apply_dynamic("log.cleaner.threads=1")
                .unwrap_err()
                .to_string(),
            "Log cleaner threads cannot be reduced to less than half the current value 4"
        );
        assert_eq!(
            four.apply_dynamic("log.cleaner.threads=2")
                .unwrap()
                .cleaner_threads(),
            2
        );
        assert!(load(&[("log.cleaner.threads", "0")]).is_err());
    }

    #[test]
    fn retention_synonym_precedence() {
        let hours = load(&[("log.retention.hours", "2")]).unwrap();
        assert_eq!(hours.topic_defaults().retention_ms, 2 * MS_PER_HOUR);
        let minutes =
            load(&[("log.retention.hours", "2"), ("log.retention.minutes", "3")]).unwrap();
        assert_eq!(minutes.topic_defaults().retention_ms, 3 * MS_PER_MINUTE);
        let ms = load(&[
            ("log.retention.ms", "42"),
            ("log.retention.hours", "2"),
            ("log.retention.minutes", "3"),
        ])
        .unwrap();
        assert_eq!(ms.topic_defaults().retention_ms, 42);
        let negative = load(&[("log.retention.hours", "-5")]).unwrap();
        assert_eq!(negative.topic_defaults().retention_ms, -1);
        let negative_ms = load(&[("log.retention.ms", "-7")]).unwrap();
        assert_eq!(negative_ms.topic_defaults().retention_ms, -1);
        // The dynamic log.retention.ms beats a static log.retention.minutes.
        let dynamic = minutes.apply_dynamic("log.retention.ms=9").unwrap();
        assert_eq!(dynamic.topic_defaults().retention_ms, 9);
    }

    #[test]
    fn roll_and_flush_synonym_precedence() {
        let b = load(&[("log.roll.hours", "1"), ("log.roll.jitter.hours", "2")]).unwrap();
        let t = b.topic_defaults();
        assert_eq!(t.segment_ms, MS_PER_HOUR);
        assert_eq!(t.segment_jitter_ms, 2 * MS_PER_HOUR);
        let b = load(&[
            ("log.roll.hours", "1"),
            ("log.roll.ms", "500"),
            ("log.roll.jitter.hours", "2"),
            ("log.roll.jitter.ms", "50"),
        ])
        .unwrap();
        assert_eq!(b.topic_defaults().segment_ms, 500);
        assert_eq!(b.topic_defaults().segment_jitter_ms, 50);
        let b = load(&[("log.flush.scheduler.interval.ms", "3000")]).unwrap();
        assert_eq!(b.topic_defaults().flush_ms, 3000);
        assert_eq!(b.flush_scheduler_interval_ms(), 3000);
        let b = b.apply_dynamic("log.flush.interval.ms=10").unwrap();
        assert_eq!(b.topic_defaults().flush_ms, 10);
        assert_eq!(b.flush_scheduler_interval_ms(), 3000);
    }

    #[test]
    fn load_parses_server_properties() {
        let text = "# Kafka server.properties\n! another comment\n\n\
                    log.retention.check.interval.ms=1000\n\
                    log.cleaner.enable : false\r\n\
                    log.segment.bytes   2097152\n\
                    log.cleaner.backoff.ms=  250  \n\
                    log.retention.hours=1\n";
        let overrides = vec![
            ("log.retention.hours".to_string(), "3".to_string()),
            ("log.cleaner.threads".to_string(), "2".to_string()),
        ];
        let b = BrokerConfig::load(Some(text), &overrides).unwrap();
        assert_eq!(b.retention_check_interval_ms(), 1000);
        assert!(!b.cleaner_enable());
        assert_eq!(b.cleaner_backoff_ms(), 250);
        assert_eq!(b.cleaner_threads(), 2);
        assert_eq!(b.topic_defaults().segment_bytes, 2_097_152);
        assert_eq!(b.topic_defaults().retention_ms, 3 * MS_PER_HOUR);
        assert_eq!(
            BrokerConfig::load(Some("broker.id=1"), &[])
                .unwrap_err()
                .to_string(),
            "Unknown broker config name: broker.id"
        );
        assert_eq!(
            BrokerConfig::load(Some("log.cleaner.enable"), &[])
                .unwrap_err()
                .to_string(),
            "Invalid properties line 'log.cleaner.enable': expected key=value or key: value"
        );
        assert_eq!(
            load(&[("log.segment.bytes", "400")])
                .unwrap_err()
                .to_string(),
            "Invalid value 400 for configuration log.segment.bytes: Value must be at least 1048576"
        );
        assert_eq!(
            load(&[("log.retention.check.interval.ms", "x")])
                .unwrap_err()
                .to_string(),
            "Invalid value x for configuration log.retention.check.interval.ms: Not a number of type LONG"
        );
        assert_eq!(
            load(&[("log.cleaner.enable", "yes")]).unwrap_err().to_string(),
            "Invalid value yes for configuration log.cleaner.enable: Expected value to be either true or false"
        );
        assert_eq!(
            load(&[("log.cleanup.policy", "compact,compact")])
                .unwrap_err()
                .to_string(),
            "Configuration 'log.cleanup.policy' values must not be duplicated."
        );
        assert_eq!(
            load(&[("log.cleaner.io.buffer.load.factor", "x")])
                .unwrap_err()
                .to_string(),
            "Invalid value x for configuration log.cleaner.io.buffer.load.factor: Not a number of type DOUBLE"
        );
    }

    #[test]
    fn dynamic_properties_round_trip() {
        let b = load(&[("log.retention.check.interval.ms", "1000")]).unwrap();
        assert_eq!(b.dynamic_properties(), "");
        let changed = b
            .apply_dynamic("log.retention.ms=1000\nlog.cleanup.policy=compact, delete\nlog.cleaner.io.max.bytes.per.second=1e6")
            .unwrap();
        let text = changed.dynamic_properties();
        assert_eq!(
            text,
            "log.cleaner.io.max.bytes.per.second=1e6\nlog.cleanup.policy=compact, delete\nlog.retention.ms=1000\n"
        );
        let remounted = b.with_dynamic_properties(&text).unwrap();
        assert_eq!(remounted, changed);
        assert_eq!(remounted.cleaner_io_max_bytes_per_second(), 1e6);
        assert_eq!(remounted.retention_check_interval_ms(), 1000);
        assert_eq!(
            b.with_dynamic_properties("log.cleaner.enable=false")
                .unwrap_err()
                .to_string(),
            "Cannot update these configs dynamically: [log.cleaner.enable]"
        );
        assert_eq!(
            b.with_dynamic_properties("nope=1").unwrap_err().to_string(),
            "Unknown broker config name: nope"
        );
    }

    #[test]
    fn broker_render_lists_every_config_sorted() {
        let b = load(&[
            ("log.retention.hours", "2"),
            ("log.cleaner.enable", "false"),
        ])
        .unwrap()
        .apply_dynamic("log.segment.delete.delay.ms=5\nlog.cleanup.policy=compact")
        .unwrap();
        let text = b.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), BROKER_DEFS.len() + 2);
        assert_eq!(
            lines[..4],
            [
                "# overrides",
                "log.cleanup.policy=compact",
                "log.segment.delete.delay.ms=5",
                "# defaults"
            ]
        );
        let defaults = &lines[4..];
        let mut sorted = defaults.to_vec();
        sorted.sort();
        assert_eq!(defaults, sorted);
        for expected in [
            "# log.retention.check.interval.ms=300000 (DEFAULT_CONFIG, read-only)",
            "# log.retention.hours=2 (STATIC_BROKER_CONFIG, read-only)",
            "# log.cleaner.enable=false (STATIC_BROKER_CONFIG, read-only)",
            "# log.retention.ms=7200000 (STATIC_BROKER_CONFIG:log.retention.hours=2)",
            "# log.retention.minutes is unset (read-only)",
            "# log.roll.ms=604800000 (DEFAULT_CONFIG:log.roll.hours=168)",
            "# log.roll.jitter.ms=0 (DEFAULT_CONFIG:log.roll.jitter.hours=0)",
            "# log.flush.interval.ms=9223372036854775807 (DEFAULT_CONFIG:log.flush.scheduler.interval.ms=9223372036854775807)",
            "# log.cleaner.io.max.bytes.per.second=1.7976931348623157E308 (DEFAULT_CONFIG)",
            "# log.cleaner.io.buffer.load.factor=0.9 (DEFAULT_CONFIG)",
            "# log.preallocate=false (DEFAULT_CONFIG)",
        ] {
            assert!(lines.contains(&expected), "{expected} in\n{text}");
        }
        // Written back with `>`, it sets exactly the dynamic overrides it showed.
        let other = b
            .apply_dynamic("-log.cleanup.policy\nlog.retention.ms=9")
            .unwrap();
        let again = other
            .apply_change(&write_back(&text, ConfigScope::Broker))
            .unwrap();
        assert_eq!(again, b);
    }

    #[test]
    fn static_broker_configs_in_one_write_are_refused_together() {
        let mut change = ConfigChange::new(ConfigScope::Broker);
        let errors =
            change.write(b"log.roll.hours=1\nlog.retention.ms=5\nlog.cleaner.enable=false\n");
        assert_eq!(
            errors.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
            ["Cannot update these configs dynamically: [log.roll.hours, log.cleaner.enable]"]
        );
        let errors = change.write(b"log.retention.hours=1\n");
        assert_eq!(
            errors[0].to_string(),
            "Cannot update these configs dynamically: [log.retention.hours]"
        );
        assert!(broker().apply_change(&change).is_err());
    }
}
