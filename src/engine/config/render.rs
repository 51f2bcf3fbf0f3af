//! The rendered `config` and `.kpfs/config` files: the overrides as `key=value` lines,
//! then every other config as a comment with its value and where it comes from.

use super::broker::{BrokerConfig, ConfigSource, Inherited};
use super::def::{BrokerKey, TopicKey};
use super::topic::TopicOverrides;

impl TopicOverrides {
    /// The topic's `config` file: the overrides as `key=value` lines, then every other
    /// topic config as a comment with its value and its source. Written back with `>` it
    /// sets exactly these overrides; the comments change nothing.
    pub(crate) fn render_effective(&self, broker: &BrokerConfig) -> String {
        let mut out = String::from(OVERRIDES_HEADER);
        for (key, setting) in &self.values {
            out.push_str(&format!("{key}={}\n", setting.text));
        }
        out.push_str(DEFAULTS_HEADER);
        let mut inherited: Vec<TopicKey> = TopicKey::ALL
            .iter()
            .copied()
            .filter(|key| !self.values.contains_key(key))
            .collect();
        inherited.sort();
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
                    out.push_str(&format!("# {topic}={} ({from})\n", value.render()));
                }
                None => out.push_str(&format!("# {topic} is unset\n")),
            }
        }
        out
    }
}

impl BrokerConfig {
    /// `.kpfs/config`: the dynamic overrides as `key=value` lines, then every other
    /// broker config as a comment with its value and source (`read-only` for the static
    /// ones, which only a remount changes), sorted by name. Written back with `>` it sets
    /// exactly these dynamic overrides. A config whose Kafka default is null shows the
    /// value topics inherit through it, or that it is unset.
    pub(crate) fn render(&self) -> String {
        let mut keys: Vec<BrokerKey> = BrokerKey::ALL.to_vec();
        keys.sort();
        let mut out = String::from(OVERRIDES_HEADER);
        for (name, setting) in &self.dynamic_values {
            out.push_str(&format!("{name}={}\n", setting.text));
        }
        out.push_str(DEFAULTS_HEADER);
        for key in keys {
            let name = key.name();
            if self.dynamic_values.contains_key(&key) {
                continue;
            }
            let read_only = if key.is_dynamic() { "" } else { ", read-only" };
            let (text, from) = match (self.static_values.get(&key), key.def().default) {
                (Some(setting), _) => {
                    (setting.text.clone(), ConfigSource::StaticBroker.to_string())
                }
                (None, Some(default)) => (default.to_string(), ConfigSource::Default.to_string()),
                (None, None) => match TopicKey::ALL
                    .iter()
                    .copied()
                    .find(|t| t.row().synonyms.first().is_some_and(|s| s.key == key))
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
                        let read_only = if key.is_dynamic() { "" } else { " (read-only)" };
                        out.push_str(&format!("# {name} is unset{read_only}\n"));
                        continue;
                    }
                },
            };
            out.push_str(&format!("# {name}={text} ({from}{read_only})\n"));
        }
        out
    }
}

/// The first line of a rendered config file; the values that follow are the overrides.
const OVERRIDES_HEADER: &str = "# overrides\n";
/// After this line, every line is a comment showing a value that is not an override.
const DEFAULTS_HEADER: &str = "# defaults\n";
