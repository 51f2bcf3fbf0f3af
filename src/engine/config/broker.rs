//! The broker view (Kafka's `KafkaConfig` and `DynamicBrokerConfig`): built-in
//! defaults, static values given at mount, dynamic overrides from `.kpfs/config`, the rules
//! across configs, and what topics inherit through synonyms.

use std::collections::BTreeMap;
use std::fmt;

use super::change::{ConfigChange, Settings, THIS_BROKER_HEADER};
use super::def::{BrokerKey, BrokerLevel, BrokerName, Kind, TopicKey};
use super::error::{BrokerRule, ConfigError, ListenerRule};
use super::listeners::{parse_listeners, Endpoint};
use super::properties::{parse_properties, read_persisted, write_persisted};
use super::value::{builtin, parse_setting, read, ConfigType, Setting, Value};
use crate::engine::limits::{MAX_PARTITIONS, MIN_OFFSET_MAP_BYTES};

/// Effective broker configuration: built-in defaults, then the static values given at
/// mount, then the dynamic overrides of `.kpfs/config`: the cluster-wide default level,
/// then this broker's, which wins (Kafka's `DynamicBrokerConfig` precedence).
#[derive(Clone, Debug, PartialEq)]
pub struct BrokerConfig {
    pub(super) static_values: Settings,
    pub(super) cluster_default: Settings,
    pub(super) this_broker: Settings,
}

impl BrokerConfig {
    pub fn defaults() -> BrokerConfig {
        BrokerConfig {
            static_values: BTreeMap::new(),
            cluster_default: BTreeMap::new(),
            this_broker: BTreeMap::new(),
        }
    }

    /// The dynamic overrides of one level.
    pub(super) fn level(&self, level: BrokerLevel) -> &Settings {
        match level {
            BrokerLevel::ClusterDefault => &self.cluster_default,
            BrokerLevel::ThisBroker => &self.this_broker,
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
            let key = BrokerName::known(key)?;
            let setting = parse_setting(key.def(), raw)?;
            config.static_values.insert(key, setting);
        }
        config.check_rules()?;
        Ok(config)
    }

    /// A whole command to `.kpfs/config` that changes the keys it names (same line
    /// syntax as topic commands); the first bad line refuses all of it.
    #[cfg(any(test, feature = "internals"))]
    pub fn apply_dynamic(&self, text: &str) -> Result<BrokerConfig, ConfigError> {
        self.apply_change(&ConfigChange::from_text(super::ConfigScope::Broker, text)?)
    }

    /// The broker config after `change` (a broker change): all of it, checked across
    /// configs on the result, or nothing.
    pub(crate) fn apply_change(&self, change: &ConfigChange) -> Result<BrokerConfig, ConfigError> {
        let (mut cluster_default, this_broker) =
            change.applied_to_broker(&self.cluster_default, &self.this_broker)?;
        // `ConfigurationControlManager`'s ELR rules (Kafka 4.x enables ELR on a new
        // cluster, and kpfs behaves as one). A rewrite of `.kpfs/config` replaces the
        // overrides that may go; the cluster's min.insync.replicas stays unless named
        // (`>` reaches kpfs as a truncation before its lines, which would remove it).
        let min_isr = min_insync_replicas();
        if change.rewrite_leaves_out(min_isr) {
            if let Some(kept) = self.cluster_default.get(&min_isr) {
                cluster_default.insert(min_isr, kept.clone());
            }
        }
        if self.cluster_default.contains_key(&min_isr) && !cluster_default.contains_key(&min_isr) {
            return Err(ConfigError::Broker(BrokerRule::ClusterMinIsrRemoved));
        }
        if self.this_broker.get(&min_isr) != this_broker.get(&min_isr) {
            return Err(ConfigError::Broker(BrokerRule::BrokerMinIsrAltered));
        }
        let next = BrokerConfig {
            static_values: self.static_values.clone(),
            cluster_default,
            this_broker,
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

    /// Kafka's `ConfigurationControlManager.maybeGenerateElrSafetyRecords`: a cluster with
    /// ELR on (every new Kafka 4.x cluster; kpfs always) has a cluster-wide
    /// `min.insync.replicas`, the static one or its default, which its controller writes
    /// when it first starts. Returns whether it had to be added here (then the caller
    /// saves the dynamic config).
    pub(crate) fn ensure_cluster_min_insync_replicas(&mut self) -> bool {
        let min_isr = min_insync_replicas();
        if self.cluster_default.contains_key(&min_isr) {
            return false;
        }
        let text = match self.static_values.get(&min_isr) {
            Some(setting) => setting.text.clone(),
            None => min_isr.def().default.unwrap_or("1").to_string(),
        };
        match parse_setting(min_isr.def(), &text) {
            Ok(setting) => {
                self.cluster_default.insert(min_isr, setting);
                true
            }
            // A static value is checked when loaded, and the default by the tests.
            Err(e) => unreachable!("min.insync.replicas={text} was accepted once: {e}"),
        }
    }

    /// The dynamic overrides to persist: the cluster-wide level's `key=value` lines, then,
    /// after `.kpfs/config`'s per-broker header, this broker's; sorted, values escaped.
    pub(crate) fn dynamic_properties(&self) -> String {
        let mut text = write_persisted(self.cluster_default.iter());
        if !self.this_broker.is_empty() {
            text.push_str(THIS_BROKER_HEADER);
            text.push('\n');
            text.push_str(&write_persisted(self.this_broker.iter()));
        }
        text
    }

    /// Mount time: replaces the dynamic overrides with persisted ones.
    pub fn with_dynamic_properties(&self, text: &str) -> Result<BrokerConfig, ConfigError> {
        let mut next = self.clone();
        let (mut cluster_text, mut broker_text) = (String::new(), String::new());
        let mut part = &mut cluster_text;
        for line in text.split_inclusive('\n') {
            if line.trim_end() == THIS_BROKER_HEADER {
                part = &mut broker_text;
            } else {
                part.push_str(line);
            }
        }
        let mut refused: Vec<ConfigError> = Vec::new();
        for (level, part) in [
            (BrokerLevel::ClusterDefault, &cluster_text),
            (BrokerLevel::ThisBroker, &broker_text),
        ] {
            let mut values = Settings::new();
            for (key, raw) in read_persisted(part)? {
                let key = BrokerName::known(&key)?;
                if let Some(refusal) = key.refusal_at(level, vec![key.name().to_string()]) {
                    refused.push(refusal);
                    continue;
                }
                values.insert(key, parse_setting(key.def(), &raw)?);
            }
            match level {
                BrokerLevel::ClusterDefault => next.cluster_default = values,
                BrokerLevel::ThisBroker => next.this_broker = values,
            }
        }
        if let Some(first) = super::change::merge_refusals(refused).into_iter().next() {
            return Err(first);
        }
        next.check_rules()?;
        Ok(next)
    }

    /// `log.retention.check.interval.ms` (static). Default 300000.
    /// The group coordinator's configs (all static).
    pub(crate) fn group_settings(&self) -> GroupSettings {
        GroupSettings {
            min_session_timeout_ms: self.get(BrokerKey::GroupMinSessionTimeoutMs),
            max_session_timeout_ms: self.get(BrokerKey::GroupMaxSessionTimeoutMs),
            initial_rebalance_delay_ms: self.get(BrokerKey::GroupInitialRebalanceDelayMs),
            max_size: self.get(BrokerKey::GroupMaxSize),
            offsets_retention_ms: i64::from(self.get::<i32>(BrokerKey::OffsetsRetentionMinutes))
                * 60_000,
            offsets_retention_check_interval_ms: self
                .get(BrokerKey::OffsetsRetentionCheckIntervalMs),
            offset_metadata_max_bytes: self.get(BrokerKey::OffsetMetadataMaxBytes),
        }
    }

    /// `offsets.topic.segment.bytes` (static): the segment size `__consumer_offsets` is
    /// created with.
    pub(crate) fn offsets_topic_segment_bytes(&self) -> i32 {
        self.get(BrokerKey::OffsetsTopicSegmentBytes)
    }

    /// The transaction coordinator's settings (all static in Kafka).
    pub(crate) fn transaction_settings(&self) -> TransactionSettings {
        TransactionSettings {
            max_timeout_ms: self.get(BrokerKey::TransactionMaxTimeoutMs),
            id_expiration_ms: i64::from(self.get::<i32>(BrokerKey::TransactionalIdExpirationMs)),
            abort_check_interval_ms: i64::from(
                self.get::<i32>(BrokerKey::TransactionAbortTimedOutCleanupIntervalMs),
            ),
            expiration_check_interval_ms: i64::from(
                self.get::<i32>(BrokerKey::TransactionRemoveExpiredCleanupIntervalMs),
            ),
            log_segment_bytes: self.get(BrokerKey::TransactionStateLogSegmentBytes),
        }
    }

    pub(crate) fn retention_check_interval_ms(&self) -> i64 {
        self.get(BrokerKey::LogRetentionCheckIntervalMs)
    }

    /// `log.cleaner.enable` (static). Default true.
    pub(crate) fn cleaner_enable(&self) -> bool {
        self.get(BrokerKey::LogCleanerEnable)
    }

    /// `log.cleaner.threads`. Default 1. Minimum 1.
    pub(crate) fn cleaner_threads(&self) -> i32 {
        self.get(BrokerKey::LogCleanerThreads)
    }

    /// `log.cleaner.backoff.ms`. Default 15000.
    pub(crate) fn cleaner_backoff_ms(&self) -> i64 {
        self.get(BrokerKey::LogCleanerBackoffMs)
    }

    /// `log.cleaner.dedupe.buffer.size`. Default 134217728. Minimum: above 1 MiB per thread.
    pub fn cleaner_dedupe_buffer_size(&self) -> i64 {
        self.get(BrokerKey::LogCleanerDedupeBufferSize)
    }

    /// `log.cleaner.io.buffer.size`. Default 524288.
    pub(crate) fn cleaner_io_buffer_size(&self) -> i32 {
        self.get(BrokerKey::LogCleanerIoBufferSize)
    }

    /// `log.cleaner.io.buffer.load.factor` (the dedupe map's load factor). Default 0.9.
    pub(crate) fn cleaner_io_buffer_load_factor(&self) -> f64 {
        self.get(BrokerKey::LogCleanerIoBufferLoadFactor)
    }

    /// `log.cleaner.io.max.bytes.per.second`. Default f64::MAX (unthrottled).
    pub(crate) fn cleaner_io_max_bytes_per_second(&self) -> f64 {
        self.get(BrokerKey::LogCleanerIoMaxBytesPerSecond)
    }

    /// Whether cleaner threads started under `previous` must restart to follow this
    /// config: one of Kafka's `LogCleaner.RECONFIGURABLE_CONFIGS` changed.
    pub(crate) fn cleaner_reconfigured_since(&self, previous: &BrokerConfig) -> bool {
        const RECONFIGURABLE: [BrokerKey; 7] = [
            BrokerKey::LogCleanerThreads,
            BrokerKey::LogCleanerDedupeBufferSize,
            BrokerKey::LogCleanerIoBufferLoadFactor,
            BrokerKey::LogCleanerIoBufferSize,
            BrokerKey::MessageMaxBytes,
            BrokerKey::LogCleanerIoMaxBytesPerSecond,
            BrokerKey::LogCleanerBackoffMs,
        ];
        RECONFIGURABLE
            .iter()
            .any(|&key| self.value(key) != previous.value(key))
    }

    /// `log.flush.scheduler.interval.ms` (static). Default Long.MAX_VALUE.
    #[cfg(test)]
    pub(crate) fn flush_scheduler_interval_ms(&self) -> i64 {
        self.get(BrokerKey::LogFlushSchedulerIntervalMs)
    }

    /// `producer.id.expiration.ms`. Default 86400000 (a day).
    pub(crate) fn producer_id_expiration_ms(&self) -> i64 {
        i64::from(self.get::<i32>(BrokerKey::ProducerIdExpirationMs))
    }

    /// `log.flush.offset.checkpoint.interval.ms` (static). Default 60000.
    pub(crate) fn flush_offset_checkpoint_interval_ms(&self) -> i64 {
        self.get(BrokerKey::LogFlushOffsetCheckpointIntervalMs)
    }

    /// The value in force and where it comes from, if something configured it: this
    /// broker's level > the cluster-wide default > static.
    pub(super) fn configured(&self, name: BrokerName) -> Option<(&Setting, ConfigSource)> {
        self.this_broker
            .get(&name)
            .map(|s| (s, ConfigSource::DynamicBroker))
            .or_else(|| {
                self.cluster_default
                    .get(&name)
                    .map(|s| (s, ConfigSource::DynamicDefaultBroker))
            })
            .or_else(|| {
                self.static_values
                    .get(&name)
                    .map(|s| (s, ConfigSource::StaticBroker))
            })
    }

    fn setting(&self, key: BrokerKey) -> Option<&Setting> {
        self.configured(BrokerName::Own(key)).map(|(s, _)| s)
    }

    /// Configured > built-in default; `None` only for null-default configs left unset.
    fn value(&self, key: BrokerKey) -> Option<Value> {
        self.value_of(BrokerName::Own(key))
    }

    /// [`BrokerConfig::value`] of any broker config, kpfs's own or the rest of Kafka's.
    pub(super) fn value_of(&self, name: BrokerName) -> Option<Value> {
        match self.configured(name) {
            Some((setting, _)) => Some(setting.value.clone()),
            None => builtin(name.def()),
        }
    }

    fn get<T: ConfigType>(&self, key: BrokerKey) -> T {
        read(key, self.value(key))
    }

    /// What a topic without an override gets: the first synonym that has a value, in the
    /// topic config's unit, else the topic config's own default.
    pub(super) fn inherited_topic_value(&self, topic: TopicKey) -> Option<Value> {
        self.inherited_topic_source(topic).map(|i| i.value)
    }

    /// [`BrokerConfig::inherited_topic_value`] with where it comes from.
    pub(super) fn inherited_topic_source(&self, topic: TopicKey) -> Option<Inherited> {
        for synonym in topic.row().synonyms {
            let broker = synonym.broker();
            let (source, setting_value) = match self.configured(broker) {
                Some((setting, source)) => (source, setting.value.clone()),
                None => match builtin(broker.def()) {
                    Some(value) => (ConfigSource::Default, value),
                    None => continue,
                },
            };
            let shown = Some((broker.name(), setting_value.render()));
            if topic.def().kind != Kind::Long {
                return Some(Inherited {
                    value: setting_value,
                    source,
                    synonym: shown,
                });
            }
            let n = read::<i64>(broker, Some(setting_value)).saturating_mul(synonym.ms_per_unit);
            // `KafkaConfig.logRetentionTimeMillis`: any negative broker retention is unlimited.
            let n = if topic == TopicKey::RetentionMs && n < 0 {
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
        builtin(topic.def()).map(|value| Inherited {
            value,
            source: ConfigSource::Default,
            synonym: None,
        })
    }

    fn inherited_long(&self, topic: TopicKey) -> i64 {
        read(topic, self.inherited_topic_value(topic))
    }

    /// `KafkaConfig.validateValues` checks that span several configs.
    fn check_rules(&self) -> Result<(), ConfigError> {
        let retention_ms = self.inherited_long(TopicKey::RetentionMs);
        if retention_ms != -1 && retention_ms < 1 {
            return Err(ConfigError::Broker(BrokerRule::RetentionMs));
        }
        if self.inherited_long(TopicKey::SegmentMs) < 1 {
            return Err(ConfigError::Broker(BrokerRule::RollMs));
        }
        if self.inherited_long(TopicKey::SegmentJitterMs) < 0 {
            return Err(ConfigError::Broker(BrokerRule::RollJitterMs));
        }
        let threads = self.cleaner_threads();
        if threads < 1 {
            return Err(ConfigError::Broker(BrokerRule::CleanerThreadsAtLeastOne));
        }
        if self.cleaner_dedupe_buffer_size() / i64::from(threads) <= MIN_OFFSET_MAP_BYTES {
            return Err(ConfigError::Broker(BrokerRule::DedupeBufferPerThread));
        }
        if self.node_id() < 0 {
            return Err(ConfigError::Broker(BrokerRule::NodeIdMissing));
        }
        if self.get::<i32>(BrokerKey::NumPartitions) > MAX_PARTITIONS as i32 {
            return Err(ConfigError::Broker(BrokerRule::NumPartitionsAboveMax));
        }
        self.check_listener_rules()
    }

    /// `KafkaConfig.validateValues`' listener checks, on the effective lists (advertised
    /// defaults to the listeners). Unset `listeners` is kpfs's "no socket": then only an
    /// advertised list is refused, having nothing to advertise.
    fn check_listener_rules(&self) -> Result<(), ConfigError> {
        let listeners = self.endpoints(BrokerKey::Listeners);
        let advertised = self.advertised_endpoints();
        if self.setting(BrokerKey::Listeners).is_some() && advertised.is_empty() {
            return Err(ConfigError::Listeners(ListenerRule::NoAdvertisedListener));
        }
        let names = |endpoints: &[Endpoint]| -> Vec<String> {
            endpoints.iter().map(|e| e.listener_name.clone()).collect()
        };
        let known = names(&listeners);
        if advertised.iter().any(|e| !known.contains(&e.listener_name)) {
            return Err(ConfigError::Listeners(ListenerRule::AdvertisedNotSubset {
                found: names(&advertised).join(","),
                valid: known.join(","),
            }));
        }
        if advertised
            .iter()
            .any(|e| e.host.as_deref() == Some("0.0.0.0"))
        {
            return Err(ConfigError::Listeners(ListenerRule::AdvertisedWildcard));
        }
        Ok(())
    }

    /// The endpoints of a listener list; none when it is unset.
    fn endpoints(&self, key: BrokerKey) -> Vec<Endpoint> {
        match self.setting(key) {
            // Parsed when it was set, so it parses again.
            Some(setting) => parse_listeners(&setting.text)
                .unwrap_or_else(|e| panic!("{key} was validated when set: {e}")),
            None => Vec::new(),
        }
    }

    /// `advertised.listeners`, or `listeners` when it is unset (Kafka's
    /// `effectiveAdvertisedBrokerListeners`).
    fn advertised_endpoints(&self) -> Vec<Endpoint> {
        match self.setting(BrokerKey::AdvertisedListeners) {
            Some(_) => self.endpoints(BrokerKey::AdvertisedListeners),
            None => self.endpoints(BrokerKey::Listeners),
        }
    }

    /// `node.id` (static). Default 1 (Kafka's quickstart value; Kafka's own default -1
    /// is refused).
    /// `num.partitions`: the partitions of a topic created without a count (`mkdir`,
    /// auto-creation, CreateTopics with -1); 1 until the mount and the Kafka listener
    /// serve topics of several partitions (`check_rules`).
    pub(crate) fn num_partitions(&self) -> u32 {
        self.get::<i32>(BrokerKey::NumPartitions).max(1) as u32
    }

    pub(crate) fn node_id(&self) -> i32 {
        self.get(BrokerKey::NodeId)
    }

    /// Sets `listeners` as a static value unless the mount's or the command's
    /// configuration gave one: `kpfs serve`'s default, which a mount does not have.
    pub(crate) fn with_default_listeners(
        &self,
        listeners: &str,
    ) -> Result<BrokerConfig, ConfigError> {
        let mut next = self.clone();
        if self.setting(BrokerKey::Listeners).is_none() {
            let setting = parse_setting(BrokerKey::Listeners.def(), listeners)?;
            next.static_values
                .insert(BrokerName::Own(BrokerKey::Listeners), setting);
        }
        next.check_rules()?;
        Ok(next)
    }

    /// What the Kafka listener runs with, or `None` when `listeners` is unset (no
    /// socket). Read again after a dynamic update to follow `max.connections`.
    pub fn listener_settings(&self) -> Option<ListenerSettings> {
        let listener = self.endpoints(BrokerKey::Listeners).into_iter().next()?;
        let advertised = self
            .advertised_endpoints()
            .into_iter()
            .find(|e| e.listener_name == listener.listener_name)
            .unwrap_or_else(|| listener.clone());
        let idle_ms: i64 = self.get(BrokerKey::ConnectionsMaxIdleMs);
        let count = |key: BrokerKey| usize::try_from(self.get::<i32>(key)).unwrap_or(0);
        Some(ListenerSettings {
            listener,
            advertised,
            node_id: self.node_id(),
            socket_request_max_bytes: count(BrokerKey::SocketRequestMaxBytes),
            max_connections: count(BrokerKey::MaxConnections),
            connections_max_idle_ms: u64::try_from(idle_ms).ok(),
            auto_create_topics: self.get(BrokerKey::AutoCreateTopicsEnable),
            max_request_partition_size_limit: self.get(BrokerKey::MaxRequestPartitionSizeLimit),
            delete_topic_enable: self.get(BrokerKey::DeleteTopicEnable),
        })
    }
}

/// The group coordinator's broker configs (`group.*`, `offsets.*`), read on each use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupSettings {
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub initial_rebalance_delay_ms: i32,
    pub max_size: i32,
    pub offsets_retention_ms: i64,
    pub offsets_retention_check_interval_ms: i64,
    pub offset_metadata_max_bytes: i32,
}

/// The transaction coordinator's broker configs (`transaction.*`, `transactional.*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransactionSettings {
    /// `transaction.max.timeout.ms`: the longest `transaction.timeout.ms` a producer gets.
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`: an id idle this long is forgotten.
    pub id_expiration_ms: i64,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
    pub abort_check_interval_ms: i64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`.
    pub expiration_check_interval_ms: i64,
    /// `transaction.state.log.segment.bytes`: `__transaction_state`'s segment size.
    pub log_segment_bytes: i32,
}

/// The broker configs of the Kafka listener, read (`BrokerConfig::listener_settings`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenerSettings {
    /// What to bind (`listeners`).
    pub listener: Endpoint,
    /// What Metadata responses tell clients to connect to (`advertised.listeners`, by
    /// default the listener itself); a `None` host is the machine's name.
    pub advertised: Endpoint,
    pub node_id: i32,
    pub socket_request_max_bytes: usize,
    pub max_connections: usize,
    /// `None`: idle connections are never closed (a negative `connections.max.idle.ms`,
    /// which Kafka's `Selector` takes as "no idle expiry").
    pub connections_max_idle_ms: Option<u64>,
    pub auto_create_topics: bool,
    /// `max.request.partition.size.limit`: DescribeTopicPartitions' page size at most.
    pub max_request_partition_size_limit: i32,
    pub delete_topic_enable: bool,
}

impl ListenerSettings {
    /// The host clients are told to connect to: the advertised one, or for an empty one
    /// the machine's name (gethostname(2)), as Kafka advertises its canonical host name.
    pub fn advertised_host(&self) -> std::io::Result<String> {
        if let Some(host) = &self.advertised.host {
            return Ok(host.clone());
        }
        let mut buf = [0u8; 256];
        // SAFETY: the buffer is valid for `buf.len()` bytes; gethostname writes at most that.
        let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
    }
}

/// `min.insync.replicas`, a Kafka broker config of the generated table.
fn min_insync_replicas() -> BrokerName {
    BrokerName::known("min.insync.replicas")
        .unwrap_or_else(|_| unreachable!("min.insync.replicas is a Kafka broker config"))
}

/// Where a config value that is not an override comes from, named as
/// `kafka-configs.sh --describe --all` names the source of a config entry (a topic's
/// overrides are its `DYNAMIC_TOPIC_CONFIG`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ConfigSource {
    /// A per-broker override of `.kpfs/config` (`kafka-configs.sh --alter --entity-name
    /// NODE_ID`).
    DynamicBroker,
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
            ConfigSource::DynamicBroker => "DYNAMIC_BROKER_CONFIG",
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
