//! The rendered `config` and `.kpfs/config` files: the overrides as `key=value` lines,
//! then every other config as a comment with its value and where it comes from.

use super::broker::{BrokerConfig, ConfigSource, Inherited};
use super::def::{BrokerKey, TopicKey};
use super::topic::TopicOverrides;

/// Where a described config's value comes from (Kafka's `ConfigSource`, as
/// `DescribeConfigs` reports it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DescribedSource {
    /// The topic's own override (`DYNAMIC_TOPIC_CONFIG`).
    Topic,
    /// Inherited from the broker, or the broker's own value.
    Broker(ConfigSource),
}

/// One config as `config`, `.kpfs/config` and Kafka's `DescribeConfigs` show it.
#[derive(Clone, Debug)]
pub(crate) struct DescribedConfig {
    pub(crate) name: &'static str,
    /// `None`: Kafka's default is null and nothing supplies a value.
    pub(crate) value: Option<String>,
    pub(crate) source: DescribedSource,
    /// A static broker config: only a remount changes it.
    pub(crate) read_only: bool,
    /// The broker config a topic's value is inherited through, and its value.
    pub(crate) synonym: Option<(&'static str, String)>,
    /// Written to this config file (a topic override, a dynamic broker config): a
    /// `key=value` line of the rendered file rather than a comment.
    pub(crate) is_override: bool,
}

impl TopicOverrides {
    /// Every topic config: the overrides first, in the order they were set, then the
    /// inherited ones sorted by name.
    pub(crate) fn describe(&self, broker: &BrokerConfig) -> Vec<DescribedConfig> {
        let mut out: Vec<DescribedConfig> = self
            .values
            .iter()
            .map(|(key, setting)| DescribedConfig {
                name: key.name(),
                value: Some(setting.text.clone()),
                source: DescribedSource::Topic,
                read_only: false,
                synonym: None,
                is_override: true,
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
                    }) => DescribedConfig {
                        name: topic.name(),
                        value: Some(value.render()),
                        source: DescribedSource::Broker(source),
                        read_only: false,
                        synonym,
                        is_override: false,
                    },
                    None => DescribedConfig {
                        name: topic.name(),
                        value: None,
                        source: DescribedSource::Broker(ConfigSource::Default),
                        read_only: false,
                        synonym: None,
                        is_override: false,
                    },
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

impl BrokerConfig {
    /// Every broker config: the dynamic overrides first, then the others sorted by name.
    /// A config whose Kafka default is null shows the value topics inherit through it.
    pub(crate) fn describe(&self) -> Vec<DescribedConfig> {
        let mut keys: Vec<BrokerKey> = BrokerKey::ALL.to_vec();
        keys.sort();
        let mut out: Vec<DescribedConfig> = self
            .dynamic_values
            .iter()
            .map(|(key, setting)| DescribedConfig {
                name: key.name(),
                value: Some(setting.text.clone()),
                source: DescribedSource::Broker(ConfigSource::DynamicDefaultBroker),
                read_only: false,
                synonym: None,
                is_override: true,
            })
            .collect();
        for key in keys {
            if self.dynamic_values.contains_key(&key) {
                continue;
            }
            let read_only = !key.is_dynamic();
            let described = |value: Option<String>, source, synonym| DescribedConfig {
                name: key.name(),
                value,
                source: DescribedSource::Broker(source),
                read_only,
                synonym,
                is_override: false,
            };
            out.push(match (self.static_values.get(&key), key.def().default) {
                (Some(setting), _) => {
                    described(Some(setting.text.clone()), ConfigSource::StaticBroker, None)
                }
                (None, Some(default)) => {
                    described(Some(default.to_string()), ConfigSource::Default, None)
                }
                (None, None) => match TopicKey::ALL
                    .iter()
                    .copied()
                    .find(|t| t.row().synonyms.first().is_some_and(|s| s.key == key))
                    .and_then(|t| self.inherited_topic_source(t))
                {
                    Some(Inherited {
                        value,
                        source,
                        synonym: Some(synonym),
                    }) => described(Some(value.render()), source, Some(synonym)),
                    _ => described(None, ConfigSource::Default, None),
                },
            });
        }
        out
    }

    /// `.kpfs/config`: the dynamic overrides as `key=value` lines, then every other
    /// broker config as a comment with its value and source (`read-only` for the static
    /// ones, which only a remount changes), sorted by name. Written back with `>` it sets
    /// exactly these dynamic overrides.
    pub(crate) fn render(&self) -> String {
        render_described(&self.describe())
    }
}

/// A config file's text: the overrides (topic overrides, dynamic broker configs) as
/// `key=value` lines, then every other config as a comment.
fn render_described(configs: &[DescribedConfig]) -> String {
    let mut out = String::from(OVERRIDES_HEADER);
    for config in configs.iter().filter(|c| c.is_override) {
        let value = config.value.as_deref().unwrap_or_default();
        out.push_str(&format!("{}={value}\n", config.name));
    }
    out.push_str(DEFAULTS_HEADER);
    for config in configs.iter().filter(|c| !c.is_override) {
        let name = config.name;
        let read_only = if config.read_only { ", read-only" } else { "" };
        let from = match (config.source, &config.synonym) {
            (DescribedSource::Broker(source), Some((synonym, value))) => {
                format!("{source}:{synonym}={value}")
            }
            (DescribedSource::Broker(source), None) => source.to_string(),
            (DescribedSource::Topic, _) => "DYNAMIC_TOPIC_CONFIG".to_string(),
        };
        match &config.value {
            Some(value) => out.push_str(&format!("# {name}={value} ({from}{read_only})\n")),
            None if config.read_only => out.push_str(&format!("# {name} is unset (read-only)\n")),
            None => out.push_str(&format!("# {name} is unset\n")),
        }
    }
    out
}

/// The first line of a rendered config file; the values that follow are the overrides.
const OVERRIDES_HEADER: &str = "# overrides\n";
/// After this line, every line is a comment showing a value that is not an override.
const DEFAULTS_HEADER: &str = "# defaults\n";
