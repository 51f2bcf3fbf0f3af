//! The broker view (Kafka's `KafkaConfig` and `DynamicBrokerConfig`): built-in
//! defaults, static values given at mount, dynamic overrides from `.kpfs/config`, the rules
//! across configs, and what topics inherit through synonyms.

use std::collections::BTreeMap;
use std::fmt;

use super::change::{ConfigChange, ConfigScope};
use super::def::{broker_def, known_broker_def, topic_def, Kind, TopicDef, RETENTION_MS};
use super::error::{BrokerRule, ConfigError};
use super::properties::{parse_properties, read_persisted, write_persisted};
use super::value::{builtin, parse_setting, Setting, Value};

/// Effective broker configuration: built-in defaults, then the static values given at
/// mount, then dynamic overrides written to `.kpfs/config`.
#[derive(Clone, Debug, PartialEq)]
pub struct BrokerConfig {
    pub(super) static_values: BTreeMap<String, Setting>,
    pub(super) dynamic_values: BTreeMap<String, Setting>,
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
    pub(super) fn inherited_topic_value(&self, topic: &TopicDef) -> Option<Value> {
        self.inherited_topic_source(topic).map(|i| i.value)
    }

    /// [`BrokerConfig::inherited_topic_value`] with where it comes from.
    pub(super) fn inherited_topic_source(&self, topic: &TopicDef) -> Option<Inherited> {
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

pub(super) fn expect_long(name: &str, value: Option<Value>) -> i64 {
    match value.as_ref().and_then(Value::as_i64) {
        Some(n) => n,
        None => panic!("{name} is a numeric config with a value, got {value:?}"),
    }
}

/// Where a config value that is not an override comes from, named as
/// `kafka-configs.sh --describe --all` names the source of a config entry (a topic's
/// overrides are its `DYNAMIC_TOPIC_CONFIG`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ConfigSource {
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
pub(super) struct Inherited {
    pub(super) value: Value,
    pub(super) source: ConfigSource,
    pub(super) synonym: Option<(&'static str, String)>,
}
