//! The rendered `config` and `.kpfs/config` files: the overrides as `key=value` lines,
//! then every other config as a comment with its value and where it comes from.

use super::broker::{BrokerConfig, ConfigSource, Inherited};
use super::change::{OVERRIDES_HEADER, THIS_BROKER_HEADER};
use super::def::{BrokerLevel, BrokerName, GroupName, Kind, Synonym, TopicKey};
use super::group::GroupConfigs;
use super::topic::TopicOverrides;

/// Where a described config's value comes from (Kafka's `ConfigSource`, as
/// `DescribeConfigs` reports it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DescribedSource {
    /// The topic's own override (`DYNAMIC_TOPIC_CONFIG`).
    Topic,
    /// The group's own override (`GROUP_CONFIG`).
    Group,
    /// Inherited from the broker, or the broker's own value.
    Broker(ConfigSource),
}

/// One config as `config`, `.kpfs/config` and Kafka's `DescribeConfigs` show it.
#[derive(Clone, Debug)]
pub(crate) struct DescribedConfig {
    pub(crate) name: &'static str,
    /// `None`: Kafka's default is null and nothing supplies a value, or the value is a
    /// secret (`sensitive`).
    pub(crate) value: Option<String>,
    /// Where kpfs's value comes from (its `config` files say so); Kafka's DescribeConfigs
    /// reports [`DescribedConfig::kafka_source`].
    pub(crate) source: DescribedSource,
    pub(crate) kind: DescribedType,
    /// A static broker config: only a remount changes it.
    pub(crate) read_only: bool,
    /// A password: its value is never shown (Kafka's `isSensitive`).
    pub(crate) sensitive: bool,
    /// The broker config a topic's value is inherited through, and its value.
    pub(crate) synonym: Option<(&'static str, String)>,
    /// Every value that could supply this config, highest priority first, the one in force
    /// first (Kafka's `DescribeConfigs` synonyms).
    pub(crate) synonyms: Vec<DescribedSynonym>,
    /// Written to this config file (a topic override, a dynamic broker config): a
    /// `key=value` line of the rendered file rather than a comment.
    pub(crate) is_override: bool,
    /// A Kafka config kpfs keeps and shows but does not act on.
    pub(crate) no_effect: bool,
    /// One of kpfs's own topic configs ([`TopicKey::is_kpfs_own`]): described only when
    /// named.
    pub(crate) kpfs_own: bool,
}

impl DescribedConfig {
    /// The source Kafka's `ConfigHelper` reports: its first synonym's, else
    /// `DEFAULT_CONFIG`, even where the value comes from a broker config that is no synonym
    /// (`segment.ms` from a configured `log.roll.hours` while `log.roll.ms` is unset).
    pub(crate) fn kafka_source(&self) -> DescribedSource {
        self.synonyms
            .first()
            .map_or(DescribedSource::Broker(ConfigSource::Default), |s| s.source)
    }
}

/// A config's type as DescribeConfigs reports it (Kafka's `ConfigDef.Type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DescribedType {
    Boolean,
    String,
    Int,
    Short,
    Long,
    Double,
    List,
    Class,
    Password,
}

impl Kind {
    fn described(self) -> DescribedType {
        match self {
            Kind::Boolean => DescribedType::Boolean,
            // kpfs's literal separators are strings to a client.
            Kind::String | Kind::Text => DescribedType::String,
            Kind::Int => DescribedType::Int,
            Kind::Short => DescribedType::Short,
            Kind::Long => DescribedType::Long,
            Kind::Double => DescribedType::Double,
            Kind::List => DescribedType::List,
            Kind::Class => DescribedType::Class,
            Kind::Password => DescribedType::Password,
        }
    }
}

/// One of a described config's synonyms.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct DescribedSynonym {
    pub(crate) name: &'static str,
    pub(crate) value: Option<String>,
    pub(crate) source: DescribedSource,
}

impl TopicOverrides {
    /// Every topic config: the overrides first, in the order they were set, then the
    /// inherited ones sorted by name.
    pub(crate) fn describe(&self, broker: &BrokerConfig) -> Vec<DescribedConfig> {
        let mut out: Vec<DescribedConfig> = self
            .values
            .iter()
            .map(|(&key, setting)| {
                topic_entry(
                    key,
                    Some(setting.text.clone()),
                    DescribedSource::Topic,
                    None,
                    broker,
                )
            })
            .collect();
        let mut inherited: Vec<TopicKey> = TopicKey::ALL
            .iter()
            .copied()
            .filter(|key| !self.values.contains_key(key))
            .collect();
        inherited.sort();
        out.extend(
            inherited
                .into_iter()
                .map(|topic| match broker.inherited_topic_source(topic) {
                    Some(Inherited {
                        value,
                        source,
                        synonym,
                    }) => topic_entry(
                        topic,
                        Some(value.render()),
                        DescribedSource::Broker(source),
                        synonym,
                        broker,
                    ),
                    None => topic_entry(
                        topic,
                        None,
                        DescribedSource::Broker(ConfigSource::Default),
                        None,
                        broker,
                    ),
                }),
        );
        out
    }

    /// The topic's `config` file: the overrides as `key=value` lines, then every other
    /// topic config as a comment with its value and its source. Written back with `>` it
    /// sets exactly these overrides; the comments change nothing.
    pub(crate) fn render_effective(&self, broker: &BrokerConfig) -> String {
        render_described(&self.describe(broker))
    }
}

/// A topic config's entry, as Kafka's `ConfigHelper.createTopicConfigEntry` makes it: the
/// synonyms are the topic's override, if it has one, then the values of its first broker
/// synonym (`ServerTopicConfigSynonyms`) and of the broker configs that stand for that one,
/// from the first synonym's own first value on. So `retention.ms` shows no broker synonym
/// while `log.retention.ms` is unset, although its value comes from `log.retention.hours`.
fn topic_entry(
    key: TopicKey,
    value: Option<String>,
    source: DescribedSource,
    synonym: Option<(&'static str, String)>,
    broker: &BrokerConfig,
) -> DescribedConfig {
    let is_override = source == DescribedSource::Topic;
    let own = is_override.then(|| DescribedSynonym {
        name: key.name(),
        value: value.clone(),
        source,
    });
    let inherited = key
        .row()
        .synonyms
        .first()
        .map(|first| broker.broker_synonyms(first.broker(), false))
        .unwrap_or_default();
    DescribedConfig {
        name: key.name(),
        value,
        source,
        kind: key.def().kind.described(),
        read_only: false,
        sensitive: false,
        synonym,
        synonyms: own.into_iter().chain(inherited).collect(),
        is_override,
        no_effect: !key.has_effect(),
        kpfs_own: key.is_kpfs_own(),
    }
}

impl GroupConfigs {
    /// Every group config of `group`, sorted by name, as Kafka's `ConfigHelper` describes a
    /// group resource (for any name: a group without overrides has the broker's values):
    /// the group's override first among the synonyms, then the broker config it stands
    /// for at each level that sets it, or else the group config's own default. None has an
    /// effect in kpfs, which serves classic groups only.
    pub(crate) fn describe(&self, group: &str, broker: &BrokerConfig) -> Vec<DescribedConfig> {
        let empty = Default::default();
        let overrides = self.overrides(group).unwrap_or(&empty);
        GroupName::all()
            .map(|name| {
                let own = overrides.get(&name).map(|setting| DescribedSynonym {
                    name: name.name(),
                    value: Some(setting.text.clone()),
                    source: DescribedSource::Group,
                });
                let inherited = match name.broker_synonym() {
                    Some(synonym) => broker.broker_synonyms(synonym, false),
                    None => vec![DescribedSynonym {
                        name: name.name(),
                        value: name.def().default.map(str::to_string),
                        source: DescribedSource::Broker(ConfigSource::Default),
                    }],
                };
                let synonyms: Vec<DescribedSynonym> = own.into_iter().chain(inherited).collect();
                DescribedConfig {
                    name: name.name(),
                    // The value in force is the first synonym's, as Kafka lists them.
                    value: synonyms.first().and_then(|s| s.value.clone()),
                    source: synonyms
                        .first()
                        .map_or(DescribedSource::Broker(ConfigSource::Default), |s| s.source),
                    kind: name.def().kind.described(),
                    read_only: false,
                    sensitive: false,
                    synonym: None,
                    synonyms,
                    is_override: overrides.contains_key(&name),
                    no_effect: true,
                    kpfs_own: false,
                }
            })
            .collect()
    }
}

impl BrokerConfig {
    /// The broker resource of `level`, as Kafka's `DescribeConfigs` answers it: for this
    /// broker every config Kafka lists, with the value in force; for the cluster-wide
    /// default only the configs set there.
    pub(crate) fn describe(&self, level: BrokerLevel) -> Vec<DescribedConfig> {
        match level {
            BrokerLevel::ThisBroker => BrokerName::all()
                .into_iter()
                .filter(|&name| name.row().listed_unset || self.configured(name).is_some())
                .map(|name| self.entry(name))
                .collect(),
            BrokerLevel::ClusterDefault => self
                .cluster_default
                .iter()
                .map(|(&name, setting)| {
                    let mut entry = self.entry(name);
                    // `ConfigHelper.createBrokerConfigEntry` of the default resource: its
                    // synonyms are the cluster-wide default's only.
                    entry.synonyms.retain(|s| {
                        s.source == DescribedSource::Broker(ConfigSource::DynamicDefaultBroker)
                    });
                    entry.value = (!entry.sensitive).then(|| setting.text.clone());
                    entry.source = DescribedSource::Broker(ConfigSource::DynamicDefaultBroker);
                    entry
                })
                .collect(),
        }
    }

    /// One broker config with the value in force, `None` for a null default left unset.
    fn entry(&self, name: BrokerName) -> DescribedConfig {
        let sensitive = name.def().kind == Kind::Password;
        let (value, source) = match (self.configured(name), name.def().default) {
            (Some((setting, source)), _) => (Some(setting.text.clone()), source),
            (None, default) => (default.map(str::to_string), ConfigSource::Default),
        };
        DescribedConfig {
            name: name.name(),
            value: value.filter(|_| !sensitive),
            source: DescribedSource::Broker(source),
            kind: name.def().kind.described(),
            read_only: !name.is_dynamic() || name.is_bound_at_start(),
            sensitive,
            synonym: None,
            synonyms: self.broker_synonyms(name, sensitive),
            is_override: false,
            no_effect: !name.has_effect(),
            kpfs_own: false,
        }
    }

    /// [`BrokerConfig::entry`] as `.kpfs/config` comments on it: a null-default log config
    /// of kpfs's own shows what it means, the value topics get and the broker config it
    /// comes from (`log.retention.ms` unset: the `log.retention.hours` in force).
    fn file_entry(&self, name: BrokerName) -> DescribedConfig {
        let mut entry = self.entry(name);
        if entry.value.is_some() || !name.has_effect() {
            return entry;
        }
        let meaning = TopicKey::ALL
            .iter()
            .copied()
            .find(|t| t.row().synonyms.first().is_some_and(|s| s.broker() == name))
            .and_then(|t| self.inherited_topic_source(t));
        if let Some(Inherited {
            value,
            source,
            synonym: Some(synonym),
        }) = meaning
        {
            entry.value = Some(value.render());
            entry.source = DescribedSource::Broker(source);
            entry.synonym = Some(synonym);
        }
        entry
    }

    /// Kafka's `ConfigHelper.configSynonyms`: the values of the config and of the broker
    /// configs it stands for (`log.retention.ms`, `.minutes`, `.hours`), level by level
    /// from this broker's to the built-in defaults, from the config's own first value on.
    fn broker_synonyms(&self, name: BrokerName, sensitive: bool) -> Vec<DescribedSynonym> {
        let group: Vec<BrokerName> = TopicKey::ALL
            .iter()
            .map(|t| t.row().synonyms)
            .find(|synonyms| synonyms.len() > 1 && synonyms.iter().any(|s| s.broker() == name))
            .map(|synonyms| synonyms.iter().map(Synonym::broker).collect())
            .unwrap_or_else(|| vec![name]);
        let mut out = Vec::new();
        for level in [
            ConfigSource::DynamicBroker,
            ConfigSource::DynamicDefaultBroker,
            ConfigSource::StaticBroker,
            ConfigSource::Default,
        ] {
            for &synonym in &group {
                let value = match level {
                    ConfigSource::DynamicBroker => {
                        self.this_broker.get(&synonym).map(|s| s.text.clone())
                    }
                    ConfigSource::DynamicDefaultBroker => {
                        self.cluster_default.get(&synonym).map(|s| s.text.clone())
                    }
                    ConfigSource::StaticBroker => {
                        self.static_values.get(&synonym).map(|s| s.text.clone())
                    }
                    ConfigSource::Default => synonym.def().default.map(str::to_string),
                };
                if let Some(value) = value {
                    out.push(DescribedSynonym {
                        name: synonym.name(),
                        value: value.into(),
                        source: DescribedSource::Broker(level),
                    });
                }
            }
        }
        let own = out
            .iter()
            .position(|s| s.name == name.name())
            .unwrap_or(out.len());
        out.drain(..own);
        if sensitive {
            for s in &mut out {
                s.value = None;
            }
        }
        out
    }

    /// `.kpfs/config`: the cluster-wide overrides as `key=value` lines, then this broker's
    /// after [`THIS_BROKER_HEADER`], then every other broker config as a comment with its
    /// value and source (`read-only` for the static ones, which only a remount changes;
    /// `no effect in kpfs` for Kafka's configs kpfs only keeps), sorted by name. Written
    /// back with `>` it sets exactly these overrides.
    pub(crate) fn render(&self) -> String {
        let mut out = format!("{OVERRIDES_HEADER}\n");
        for (level, header) in [
            (BrokerLevel::ClusterDefault, None),
            (BrokerLevel::ThisBroker, Some(THIS_BROKER_HEADER)),
        ] {
            if let Some(header) = header {
                out.push_str(header);
                out.push('\n');
            }
            for (name, setting) in self.level(level) {
                if name.def().kind == Kind::Password {
                    // A secret is not shown; rewriting the file with `>` drops it.
                    out.push_str(&format!("# {name} is set (a password, not shown)\n"));
                    continue;
                }
                out.push_str(&format!("{name}={}\n", setting.text));
                if !name.has_effect() {
                    out.push_str(&format!("# {name} has no effect in kpfs\n"));
                }
            }
        }
        let others: Vec<DescribedConfig> = BrokerName::all()
            .into_iter()
            .filter(|name| {
                !self.cluster_default.contains_key(name) && !self.this_broker.contains_key(name)
            })
            .filter(|&name| name.row().listed_unset || self.configured(name).is_some())
            .map(|name| self.file_entry(name))
            .collect();
        out.push_str(DEFAULTS_HEADER);
        push_comments(&mut out, &others);
        out
    }
}

/// A config file's text: the overrides (topic overrides, dynamic broker configs) as
/// `key=value` lines, then every other config as a comment.
fn render_described(configs: &[DescribedConfig]) -> String {
    let mut out = format!("{OVERRIDES_HEADER}\n");
    for config in configs.iter().filter(|c| c.is_override) {
        let value = config.value.as_deref().unwrap_or_default();
        out.push_str(&format!("{}={value}\n", config.name));
        if config.no_effect {
            out.push_str(&format!("# {} has no effect in kpfs\n", config.name));
        }
    }
    out.push_str(DEFAULTS_HEADER);
    let defaults: Vec<DescribedConfig> =
        configs.iter().filter(|c| !c.is_override).cloned().collect();
    push_comments(&mut out, &defaults);
    out
}

/// The comment lines of configs that are not overrides: value, source and how it may
/// change.
fn push_comments(out: &mut String, configs: &[DescribedConfig]) {
    for config in configs {
        let name = config.name;
        let mut notes = String::new();
        if config.read_only {
            notes.push_str(", read-only");
        }
        if config.no_effect {
            notes.push_str(", no effect in kpfs");
        }
        let from = match (config.source, &config.synonym) {
            (DescribedSource::Broker(source), Some((synonym, value))) => {
                format!("{source}:{synonym}={value}")
            }
            (DescribedSource::Broker(source), None) => source.to_string(),
            (DescribedSource::Topic, _) => "DYNAMIC_TOPIC_CONFIG".to_string(),
            (DescribedSource::Group, _) => "GROUP_CONFIG".to_string(),
        };
        match &config.value {
            Some(value) => out.push_str(&format!("# {name}={value} ({from}{notes})\n")),
            None if config.sensitive
                && config.source != DescribedSource::Broker(ConfigSource::Default) =>
            {
                out.push_str(&format!("# {name} is set, not shown ({from}{notes})\n"))
            }
            None if notes.is_empty() => out.push_str(&format!("# {name} is unset\n")),
            None => out.push_str(&format!("# {name} is unset ({})\n", &notes[2..])),
        }
    }
}

/// After this line, every line is a comment showing a value that is not an override.
const DEFAULTS_HEADER: &str = "# defaults\n";
