//! `config` and `.kpfs/config` on a cluster mount: the cluster's DescribeConfigs rendered
//! in the local mount's layout, and a change sent as IncrementalAlterConfigs, first with
//! `validate_only` as each line is written, then for real at close (the local mount's
//! one-change-per-close rule), refused with the cluster's own texts. Both go over
//! [`super::direct`]: librdkafka cannot name the cluster-wide default broker resource, and
//! the `rdkafka` crate has only the legacy AlterConfigs, which sets a resource's whole set
//! of overrides and so races with another writer.

use std::collections::BTreeSet;
use std::fmt::Write;

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{DescribeConfigsRequest, IncrementalAlterConfigsRequest};
use kafka_protocol::protocol::StrBytes;

use super::direct::Connection;
use super::{Cluster, ClusterShared, ClusterTopic, OwnedFormat};
use crate::engine::config::{ConfigChange, OVERRIDES_HEADER, THIS_BROKER_HEADER};
use crate::engine::files::write_atomically;
use crate::engine::{EngineError, Result};

/// Kafka's resource types (`ConfigResource.Type`).
const TOPIC_RESOURCE: i8 = 2;
const BROKER_RESOURCE: i8 = 4;
/// The name of the cluster-wide default broker resource (`--entity-default`).
const CLUSTER_DEFAULT: &str = "";
/// Kafka's config sources (`DescribeConfigsResponse.ConfigSource`) that are overrides.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const DYNAMIC_BROKER_CONFIG: i8 = 2;
const DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;
/// The source of a config no one set.
const DEFAULT_CONFIG: i8 = 5;
/// IncrementalAlterConfigs' operations (`AlterConfigOp.OpType`).
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
/// The line before the configs that are not overrides, as the local mount writes it.
const DEFAULTS_HEADER: &str = "# defaults";

/// One config of a DescribeConfigs answer; `value` is `None` for a secret.
struct Entry {
    name: String,
    value: Option<String>,
    source: i8,
}

/// Kafka's name of a config source.
fn source_name(source: i8) -> &'static str {
    match source {
        DYNAMIC_TOPIC_CONFIG => "DYNAMIC_TOPIC_CONFIG",
        DYNAMIC_BROKER_CONFIG => "DYNAMIC_BROKER_CONFIG",
        DYNAMIC_DEFAULT_BROKER_CONFIG => "DYNAMIC_DEFAULT_BROKER_CONFIG",
        4 => "STATIC_BROKER_CONFIG",
        DEFAULT_CONFIG => "DEFAULT_CONFIG",
        6 => "DYNAMIC_BROKER_LOGGER_CONFIG",
        7 => "CLIENT_METRICS_CONFIG",
        8 => "GROUP_CONFIG",
        _ => "UNKNOWN",
    }
}

/// One level's overrides: each config's value, `None` for a secret.
type Overrides<'a> = Vec<(&'a str, Option<&'a str>)>;

/// A config file's text in the local mount's layout: [`OVERRIDES_HEADER`], each level's
/// overrides as `key=value` lines (a level after the first under its header), then
/// [`DEFAULTS_HEADER`] and every other config as a comment with its value and source.
/// Written back with `>`, it sets exactly these overrides.
fn config_file(levels: &[(Option<&str>, Overrides<'_>)], others: &[&Entry]) -> String {
    let mut out = format!("{OVERRIDES_HEADER}\n");
    for (header, overrides) in levels {
        if let Some(header) = header {
            let _ = writeln!(out, "{header}");
        }
        for (name, value) in overrides {
            match value {
                Some(value) => {
                    let _ = writeln!(out, "{name}={value}");
                }
                None => {
                    let _ = writeln!(out, "# {name} is set (a password, not shown)");
                }
            }
        }
    }
    let _ = writeln!(out, "{DEFAULTS_HEADER}");
    let mut others = others.to_vec();
    others.sort_by(|a, b| a.name.cmp(&b.name));
    for entry in others {
        let from = source_name(entry.source);
        match &entry.value {
            Some(value) => {
                let _ = writeln!(out, "# {}={value} ({from})", entry.name);
            }
            // A secret's value is never sent: one the cluster's default leaves unset is
            // unset, one from elsewhere is set.
            None if entry.source == DEFAULT_CONFIG => {
                let _ = writeln!(out, "# {} is unset ({from})", entry.name);
            }
            None => {
                let _ = writeln!(out, "# {} is set, not shown ({from})", entry.name);
            }
        }
    }
    out
}

fn borrowed(level: &[(String, Option<String>)]) -> Vec<(&str, Option<&str>)> {
    level
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_deref()))
        .collect()
}

/// One resource's edits: each config set (`Some`) or deleted (`None`).
type ResourceEdits = (i8, String, Vec<(String, Option<String>)>);

impl ClusterShared {
    /// DescribeConfigs of `resources` (type, name) on `connection`, a list per resource.
    fn describe_configs(
        &self,
        connection: &mut Connection,
        resources: &[(i8, &str)],
    ) -> Result<Vec<Vec<Entry>>> {
        let request = DescribeConfigsRequest::default()
            .with_include_synonyms(true)
            .with_resources(
                resources
                    .iter()
                    .map(|(kind, name)| {
                        DescribeConfigsResource::default()
                            .with_resource_type(*kind)
                            .with_resource_name(StrBytes::from_string(name.to_string()))
                            .with_configuration_keys(None)
                    })
                    .collect(),
            );
        let answer = connection.call(&request)?;
        let mut lists = Vec::with_capacity(answer.results.len());
        for result in answer.results {
            check_resource(
                connection,
                "describe",
                (result.resource_type, &result.resource_name),
                result.error_code,
                result.error_message.as_ref(),
            )?;
            lists.push(
                result
                    .configs
                    .into_iter()
                    .map(|config| {
                        // An override's value as set, which its synonym at its own level
                        // holds: the value in force differs when the broker could not
                        // apply it (a dynamic change it refused after validation).
                        let configured = config
                            .synonyms
                            .iter()
                            .find(|synonym| synonym.source == config.config_source)
                            .map_or(config.value, |synonym| synonym.value.clone());
                        Entry {
                            name: config.name.to_string(),
                            value: if config.is_sensitive {
                                None
                            } else {
                                configured.map(|v| v.to_string())
                            },
                            source: config.config_source,
                        }
                    })
                    .collect(),
            );
        }
        Ok(lists)
    }

    /// IncrementalAlterConfigs of `resources` on `connection`; the first resource the
    /// cluster refuses is the error, with its text.
    fn alter_configs(
        &self,
        connection: &mut Connection,
        resources: Vec<ResourceEdits>,
        validate_only: bool,
    ) -> Result<()> {
        let resources: Vec<AlterConfigsResource> = resources
            .into_iter()
            .filter(|(_, _, edits)| !edits.is_empty())
            .map(|(kind, name, edits)| {
                AlterConfigsResource::default()
                    .with_resource_type(kind)
                    .with_resource_name(StrBytes::from_string(name))
                    .with_configs(
                        edits
                            .into_iter()
                            .map(|(config, value)| {
                                AlterableConfig::default()
                                    .with_name(StrBytes::from_string(config))
                                    .with_config_operation(if value.is_some() {
                                        OP_SET
                                    } else {
                                        OP_DELETE
                                    })
                                    .with_value(value.map(StrBytes::from_string))
                            })
                            .collect(),
                    )
            })
            .collect();
        if resources.is_empty() {
            return Ok(());
        }
        let request = IncrementalAlterConfigsRequest::default()
            .with_resources(resources)
            .with_validate_only(validate_only);
        let answer = connection.call(&request)?;
        for response in answer.responses {
            check_resource(
                connection,
                "alter",
                (response.resource_type, &response.resource_name),
                response.error_code,
                response.error_message.as_ref(),
            )?;
        }
        Ok(())
    }
}

/// Fails with the cluster's error for one resource of an answer, if it has one: `verb`
/// ("describe", "alter") says what was asked of the resource's configs.
fn check_resource(
    connection: &Connection,
    verb: &str,
    (kind, name): (i8, &str),
    code: i16,
    message: Option<&StrBytes>,
) -> Result<()> {
    let action = format!("{verb} the configs of {}", resource_text(kind, name));
    connection.check(&action, code, message)
}

/// How a resource is named in an error: `topic orders`, `broker 1`, `the cluster-wide
/// default broker config`.
fn resource_text(kind: i8, name: &str) -> String {
    match (kind, name) {
        (BROKER_RESOURCE, CLUSTER_DEFAULT) => "the cluster-wide default broker config".to_string(),
        (BROKER_RESOURCE, id) => format!("broker {id}"),
        (_, topic) => format!("topic {topic}"),
    }
}

/// Edits that make `named` the whole set of overrides where `current` are: the named
/// ones, and a delete of every current one not named.
fn replacing(
    named: &[(&str, Option<&str>)],
    current: impl Iterator<Item = String>,
) -> Vec<(String, Option<String>)> {
    let names: BTreeSet<&str> = named.iter().map(|(name, _)| *name).collect();
    let mut edits = as_owned(named);
    edits.extend(
        current
            .filter(|name| !names.contains(name.as_str()))
            .map(|name| (name, None)),
    );
    edits
}

fn as_owned(edits: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
    edits
        .iter()
        .map(|(name, value)| (name.to_string(), value.map(str::to_string)))
        .collect()
}

impl ClusterTopic {
    /// `config`: the cluster's DescribeConfigs of the topic, and the line format.
    pub(crate) fn config_text(&self) -> String {
        let link = &self.link;
        let own = link.format.read().own_lines();
        let described = link.shared.connect_any().and_then(|mut connection| {
            link.shared
                .describe_configs(&mut connection, &[(TOPIC_RESOURCE, &link.name)])
        });
        match described {
            Ok(lists) => {
                let entries = lists.into_iter().next().unwrap_or_default();
                let mut overrides: Vec<(&str, Option<&str>)> = own
                    .iter()
                    .map(|(name, value)| (name.as_str(), Some(value.as_str())))
                    .collect();
                overrides.extend(
                    entries
                        .iter()
                        .filter(|e| e.source == DYNAMIC_TOPIC_CONFIG)
                        .map(|e| (e.name.as_str(), e.value.as_deref())),
                );
                let others: Vec<&Entry> = entries
                    .iter()
                    .filter(|e| e.source != DYNAMIC_TOPIC_CONFIG)
                    .collect();
                config_file(&[(None, overrides)], &others)
            }
            Err(e) => format!("# the cluster did not answer: {e}\n"),
        }
    }

    pub(crate) fn check_config_change(&self, change: &ConfigChange) -> Result<()> {
        self.alter_config(change, true)
    }

    pub(crate) fn apply_config_change(&self, change: &ConfigChange) -> Result<()> {
        self.alter_config(change, false)
    }

    /// A change to `config`: the line format's configs kept by the mount, the rest sent to
    /// the cluster as IncrementalAlterConfigs of the keys it names (with `>`, also a
    /// delete of every current override it does not name), checked by the cluster alone
    /// when `validate_only`.
    fn alter_config(&self, change: &ConfigChange, validate_only: bool) -> Result<()> {
        let link = &self.link;
        let (replace, edits) = change.topic_edits().map_err(EngineError::Config)?;
        let (own, kafka): (Vec<_>, Vec<_>) = edits
            .into_iter()
            .partition(|(key, _)| OwnedFormat::is_line_config(*key));
        if replace || !kafka.is_empty() {
            let named: Vec<(&str, Option<&str>)> = kafka
                .iter()
                .map(|(key, value)| (key.name(), *value))
                .collect();
            let mut connection = link.shared.connect_any()?;
            let edits = if replace {
                let current = link
                    .shared
                    .describe_configs(&mut connection, &[(TOPIC_RESOURCE, &link.name)])?
                    .into_iter()
                    .flatten()
                    .filter(|e| e.source == DYNAMIC_TOPIC_CONFIG)
                    .map(|e| e.name);
                replacing(&named, current)
            } else {
                as_owned(&named)
            };
            link.shared.alter_configs(
                &mut connection,
                vec![(TOPIC_RESOURCE, link.name.clone(), edits)],
                validate_only,
            )?;
        }
        if !validate_only {
            let format = link.format.read().edited(replace, &own);
            {
                let mut formats = link.shared.formats.lock();
                formats.insert(link.name.clone(), format.clone());
                write_atomically(
                    &link.shared.formats_file,
                    super::save_formats(&formats).as_bytes(),
                )?;
            }
            link.view.set_format(format.clone());
            *link.format.write() = format;
            self.modified_ms.store(
                link.shared.clock.now_ms(),
                std::sync::atomic::Ordering::Relaxed,
            );
        }
        Ok(())
    }
}

impl Cluster {
    /// `.kpfs/config`: the cluster-wide default broker overrides, then (after
    /// [`THIS_BROKER_HEADER`]) those of the broker with the lowest id, which stands for
    /// "this broker", then every other config of that broker as a comment.
    pub(crate) fn broker_config_text(&self) -> String {
        match self.describe_broker_levels() {
            Ok((id, cluster_default, broker)) => {
                let overrides = |entries: &[Entry], source: i8| -> Vec<(String, Option<String>)> {
                    entries
                        .iter()
                        .filter(|e| e.source == source)
                        .map(|e| (e.name.clone(), e.value.clone()))
                        .collect()
                };
                let default_level = overrides(&cluster_default, DYNAMIC_DEFAULT_BROKER_CONFIG);
                let broker_level = overrides(&broker, DYNAMIC_BROKER_CONFIG);

                let others: Vec<&Entry> = broker
                    .iter()
                    .filter(|e| {
                        e.source != DYNAMIC_BROKER_CONFIG
                            && e.source != DYNAMIC_DEFAULT_BROKER_CONFIG
                    })
                    .collect();
                let mut text = config_file(
                    &[
                        (None, borrowed(&default_level)),
                        (Some(THIS_BROKER_HEADER), borrowed(&broker_level)),
                    ],
                    &others,
                );
                let _ = writeln!(
                    text,
                    "# this broker: node {id}, the lowest id of the cluster's brokers"
                );
                text
            }
            Err(e) => format!("# the cluster did not answer: {e}\n"),
        }
    }

    /// The broker shown as "this broker", its cluster-wide default overrides and its own
    /// configs.
    fn describe_broker_levels(&self) -> Result<(i32, Vec<Entry>, Vec<Entry>)> {
        let (id, mut connection) = self.shared.connect_first()?;
        let broker = id.to_string();
        let mut lists = self
            .shared
            .describe_configs(
                &mut connection,
                &[
                    (BROKER_RESOURCE, CLUSTER_DEFAULT),
                    (BROKER_RESOURCE, &broker),
                ],
            )?
            .into_iter();
        let cluster_default = lists.next().unwrap_or_default();
        let own = lists.next().unwrap_or_default();
        Ok((id, cluster_default, own))
    }

    pub(crate) fn check_broker_change(&self, change: &ConfigChange) -> Result<()> {
        self.alter_broker_config(change, true)
    }

    pub(crate) fn apply_broker_change(&self, change: &ConfigChange) -> Result<()> {
        self.alter_broker_config(change, false)
    }

    /// A change to `.kpfs/config`: IncrementalAlterConfigs of the cluster-wide default
    /// broker resource and of the lowest-id broker's, in one request to that broker (with
    /// `>`, also a delete of each level's current overrides the change does not name).
    /// A level the cluster refuses only when it applies it (a broker's own checks of a
    /// dynamic value, after the controller took it) is not undone: the file then shows
    /// the value set and the broker keeps its old one, as `kafka-configs.sh` would leave
    /// it.
    fn alter_broker_config(&self, change: &ConfigChange, validate_only: bool) -> Result<()> {
        let edits = change.broker_edits().map_err(EngineError::Config)?;
        let (id, mut connection) = self.shared.connect_first()?;
        let (default_edits, broker_edits) = if edits.replace {
            let (_, cluster_default, own) = self.describe_broker_levels()?;
            let current = |entries: Vec<Entry>, source: i8| {
                entries
                    .into_iter()
                    .filter(move |e| e.source == source)
                    .map(|e| e.name)
            };
            (
                replacing(
                    &edits.cluster_default,
                    current(cluster_default, DYNAMIC_DEFAULT_BROKER_CONFIG),
                ),
                replacing(&edits.this_broker, current(own, DYNAMIC_BROKER_CONFIG)),
            )
        } else {
            (
                as_owned(&edits.cluster_default),
                as_owned(&edits.this_broker),
            )
        };
        let resources = vec![
            (BROKER_RESOURCE, CLUSTER_DEFAULT.to_string(), default_edits),
            (BROKER_RESOURCE, id.to_string(), broker_edits),
        ];
        // The cluster applies each resource of a request on its own: both are validated
        // first, so a change one level refuses changes neither.
        if !validate_only {
            self.shared
                .alter_configs(&mut connection, resources.clone(), true)?;
        }
        self.shared
            .alter_configs(&mut connection, resources, validate_only)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rewrite_deletes_each_current_override_it_does_not_name() {
        let edits = replacing(
            &[("retention.ms", Some("1000")), ("segment.ms", None)],
            ["retention.ms", "max.message.bytes"]
                .into_iter()
                .map(String::from),
        );
        assert_eq!(
            edits,
            vec![
                ("retention.ms".to_string(), Some("1000".to_string())),
                ("segment.ms".to_string(), None),
                ("max.message.bytes".to_string(), None),
            ]
        );
    }

    #[test]
    fn the_file_has_each_level_then_every_other_config_by_name() {
        let entry = |name: &str, value: Option<&str>, source| Entry {
            name: name.to_string(),
            value: value.map(str::to_string),
            source,
        };
        let others = [
            entry("num.io.threads", Some("8"), 5),
            entry("log.dirs", Some("/var/kafka"), 4),
            entry("ssl.key.password", None, 5),
            entry("ssl.truststore.password", None, 4),
        ];
        let text = config_file(
            &[
                (None, vec![("log.cleaner.threads", Some("2"))]),
                (
                    Some(THIS_BROKER_HEADER),
                    vec![
                        ("log.cleaner.backoff.ms", Some("20000")),
                        ("sasl.secret", None),
                    ],
                ),
            ],
            &others.iter().collect::<Vec<_>>(),
        );
        assert_eq!(
            text,
            "# overrides\n\
             log.cleaner.threads=2\n\
             # per-broker overrides\n\
             log.cleaner.backoff.ms=20000\n\
             # sasl.secret is set (a password, not shown)\n\
             # defaults\n\
             # log.dirs=/var/kafka (STATIC_BROKER_CONFIG)\n\
             # num.io.threads=8 (DEFAULT_CONFIG)\n\
             # ssl.key.password is unset (DEFAULT_CONFIG)\n\
             # ssl.truststore.password is set, not shown (STATIC_BROKER_CONFIG)\n"
        );
    }
}
