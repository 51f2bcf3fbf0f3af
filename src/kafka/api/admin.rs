//! The admin APIs: CreateTopics, DeleteTopics, DescribeConfigs, AlterConfigs,
//! IncrementalAlterConfigs. Config changes go through the engine's `ConfigChange`, the
//! same lines, validators and texts as writes to a topic's `config` or `.kpfs/config`.

use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{
    alter_configs_response, incremental_alter_configs_response, AlterConfigsRequest,
    AlterConfigsResponse, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest,
    DeleteTopicsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::{engine_error, str_bytes, topic_by_id, topic_uuid};
use crate::engine::config::{
    BrokerLevel, ConfigSource, DescribedConfig, DescribedSource, DescribedType,
};
use crate::engine::{validate_topic_name, ConfigChange, ConfigScope, EngineError};
use crate::kafka::Shared;

/// Kafka's `ConfigResource.Type` ids.
const TOPIC_RESOURCE: i8 = 2;
const BROKER_RESOURCE: i8 = 4;
const GROUP_RESOURCE: i8 = 32;

type Refusal = (i16, Option<StrBytes>);

fn refusal(code: ResponseError, message: impl AsRef<str>) -> Refusal {
    (code.code(), Some(str_bytes(message.as_ref())))
}

/// CreateTopics: each topic created with its configs, or refused whole. kpfs topics have
/// one partition and one replica.
pub(crate) fn create_topics(
    shared: &Shared,
    request: &CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    let mut response = CreateTopicsResponse::default();
    for asked in &request.topics {
        let name = asked.name.0.to_string();
        let mut result = CreatableTopicResult::default();
        result.name = asked.name.clone();
        result.num_partitions = -1;
        result.replication_factor = -1;
        let partitions = if asked.num_partitions == -1 {
            shared.config.num_partitions
        } else {
            asked.num_partitions
        };
        let lines = asked
            .configs
            .iter()
            .filter_map(|c| Some(config_line(&c.name, c.value.as_deref()?)))
            .collect::<Result<Vec<_>, _>>();
        let checked = if partitions != 1 || asked.assignments.len() > 1 {
            Err(refusal(
                ResponseError::InvalidPartitions,
                format!(
                    "kpfs topics have one partition: num_partitions must be 1 (or -1), not {}",
                    if asked.assignments.len() > 1 {
                        asked.assignments.len() as i32
                    } else {
                        partitions
                    }
                ),
            ))
        } else if !matches!(asked.replication_factor, -1 | 1) {
            Err(refusal(
                ResponseError::InvalidReplicationFactor,
                format!(
                    "Unable to replicate the partition {0} time(s): The target replication factor of {0} cannot be reached because only 1 broker(s) are registered.",
                    asked.replication_factor
                ),
            ))
        } else {
            lines.and_then(|lines| {
                let change = scoped_change(ConfigScope::Topic, &lines, false)?;
                validate_topic_name(&name).map_err(|e| engine_error(&e))?;
                if shared.engine.topic(&name).is_some() {
                    return Err(engine_error(&EngineError::TopicExists {
                        name: name.clone(),
                    }));
                }
                Ok(change)
            })
        };
        let created = checked.and_then(|change| {
            if request.validate_only {
                return Ok(None);
            }
            let topic = shared.engine.create_topic(&name).map_err(|e| engine_error(&e))?;
            if let Err(e) = topic.apply_config_change(&change) {
                // All or nothing, as Kafka's controller: the topic goes with its refusal.
                if let Err(undo) = shared.engine.delete_topic(&name) {
                    tracing::warn!(topic = name, error = %undo, "removing a topic whose configs were refused failed");
                }
                return Err(engine_error(&e));
            }
            Ok(Some(topic))
        });
        match created {
            Ok(topic) => {
                result.num_partitions = 1;
                result.replication_factor = 1;
                if let Some(topic) = topic {
                    result.topic_id = topic_uuid(&topic);
                    if version >= 5 {
                        result.configs = Some(
                            topic
                                .describe_config()
                                .iter()
                                .filter(|c| !c.kpfs_own)
                                .map(|c| {
                                    let mut out = CreatableTopicConfigs::default();
                                    out.name = str_bytes(c.name);
                                    out.value = c.value.as_deref().map(str_bytes);
                                    out.read_only = c.read_only;
                                    out.config_source = source_id(c.kafka_source());
                                    out
                                })
                                .collect(),
                        );
                    }
                }
            }
            Err((code, message)) => {
                result.error_code = code;
                result.error_message = message;
            }
        }
        response.topics.push(result);
    }
    response
}

/// DeleteTopics: by name, or by id (v6+); refused whole when `delete.topic.enable` is off.
pub(crate) fn delete_topics(
    shared: &Shared,
    request: &DeleteTopicsRequest,
) -> DeleteTopicsResponse {
    let asked: Vec<(Option<String>, uuid::Uuid)> = request
        .topic_names
        .iter()
        .map(|n| (Some(n.0.to_string()), uuid::Uuid::nil()))
        .chain(
            request
                .topics
                .iter()
                .map(|t| (t.name.as_ref().map(|n| n.0.to_string()), t.topic_id)),
        )
        .collect();
    let mut response = DeleteTopicsResponse::default();
    for (name, id) in asked {
        let mut result = DeletableTopicResult::default();
        result.name = name.as_deref().map(super::topic_name);
        result.topic_id = id;
        let found = match &name {
            Some(name) => Ok(name.clone()),
            None => topic_by_id(&shared.engine, id)
                .map(|t| t.name().to_string())
                .ok_or(ResponseError::UnknownTopicId.code()),
        };
        let deleted = if !shared.config.delete_topic_enable {
            Err(refusal(
                ResponseError::TopicDeletionDisabled,
                "Topic deletion is disabled (delete.topic.enable=false).",
            ))
        } else {
            found.map_err(|code| (code, None)).and_then(|name| {
                result.name = Some(super::topic_name(&name));
                shared
                    .engine
                    .delete_topic(&name)
                    .map_err(|e| engine_error(&e))
            })
        };
        if let Err((code, message)) = deleted {
            result.error_code = code;
            result.error_message = message;
        }
        response.responses.push(result);
    }
    response
}

/// Kafka's `DescribeConfigsResponse.ConfigType` ids.
fn type_id(kind: DescribedType) -> i8 {
    match kind {
        DescribedType::Boolean => 1,
        DescribedType::String => 2,
        DescribedType::Int => 3,
        DescribedType::Short => 4,
        DescribedType::Long => 5,
        DescribedType::Double => 6,
        DescribedType::List => 7,
        DescribedType::Class => 8,
        DescribedType::Password => 9,
    }
}

/// Kafka's `DescribeConfigsResponse.ConfigSource` id of a value's source.
fn source_id(source: DescribedSource) -> i8 {
    match source {
        DescribedSource::Topic => 1,
        DescribedSource::Group => 8,
        DescribedSource::Broker(ConfigSource::DynamicBroker) => 2,
        DescribedSource::Broker(ConfigSource::DynamicDefaultBroker) => 3,
        DescribedSource::Broker(ConfigSource::StaticBroker) => 4,
        DescribedSource::Broker(ConfigSource::Default) => 5,
    }
}

/// The level a broker resource names: `""` the cluster-wide default, this node's id its
/// own overrides (both in `.kpfs/config`); another id is refused in Kafka's words.
fn broker_level(shared: &Shared, name: &str) -> Result<BrokerLevel, Refusal> {
    let node_id = shared.config.node_id;
    if name.is_empty() {
        Ok(BrokerLevel::ClusterDefault)
    } else if name == node_id.to_string() {
        Ok(BrokerLevel::ThisBroker)
    } else {
        Err(refusal(
            ResponseError::InvalidRequest,
            format!(
                "Unexpected broker id, expected {node_id} or empty string, but received {name}"
            ),
        ))
    }
}

/// DescribeConfigs: every config (or the asked ones) of a topic or the broker, with value,
/// source, read-only flag and, on request, synonyms.
pub(crate) fn describe_configs(
    shared: &Shared,
    request: &DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let mut response = DescribeConfigsResponse::default();
    for resource in &request.resources {
        let mut result = DescribeConfigsResult::default();
        result.resource_type = resource.resource_type;
        result.resource_name = resource.resource_name.clone();
        let described = described(shared, resource.resource_type, &resource.resource_name);
        match described {
            Ok(mut configs) => {
                kafka_answer_order(&mut configs);
                result.configs = configs
                    .iter()
                    .filter(|c| match &resource.configuration_keys {
                        Some(keys) => keys.iter().any(|k| k.as_str() == c.name),
                        None => !c.kpfs_own,
                    })
                    .map(|c| describe_entry(c, request.include_synonyms))
                    .collect();
            }
            Err((code, message)) => {
                result.error_code = code;
                result.error_message = message;
            }
        }
        response.results.push(result);
    }
    response
}

fn described(shared: &Shared, kind: i8, name: &str) -> Result<Vec<DescribedConfig>, Refusal> {
    match kind {
        TOPIC_RESOURCE => shared
            .engine
            .topic(name)
            .map(|t| t.describe_config())
            .ok_or_else(|| engine_error(&EngineError::UnknownTopic { name: name.into() })),
        BROKER_RESOURCE => Ok(shared
            .engine
            .describe_broker_config(broker_level(shared, name)?)),
        // Kafka's `ConfigHelper`: any group id but the empty one, existing or not.
        GROUP_RESOURCE if name.is_empty() => Err(refusal(
            ResponseError::InvalidRequest,
            "Group name must not be empty",
        )),
        GROUP_RESOURCE => Ok(shared.engine.describe_group_config(name)),
        other => Err(refusal(
            ResponseError::InvalidRequest,
            format!(
                "kpfs describes topic (2), broker (4) and group (32) configs, not resource type {other}"
            ),
        )),
    }
}

/// Puts `configs` in the order Kafka's `ConfigHelper` answers: the iteration order of the
/// Scala `mutable.HashMap` it builds of every config (by bucket of the spread Java
/// `String.hashCode`, then by that hash within a bucket). Clients keep it where it shows:
/// `kafka-topics.sh --describe` prints a topic's `Configs:` in the order of a Java
/// `HashMap` of the answer, which, with as many buckets, differs only in keeping the
/// answer's order within a bucket (`segment.bytes` before `retention.ms`).
fn kafka_answer_order(configs: &mut [DescribedConfig]) {
    let mut buckets: usize = 16;
    while configs.len() * 4 > buckets * 3 {
        buckets *= 2;
    }
    let mask = i32::try_from(buckets - 1).unwrap_or(i32::MAX);
    configs.sort_by_key(|c| {
        let hash = c.name.encode_utf16().fold(0i32, |h, unit| {
            h.wrapping_mul(31).wrapping_add(i32::from(unit))
        });
        let spread = hash ^ ((hash as u32) >> 16) as i32;
        (spread & mask, spread)
    });
}

fn describe_entry(c: &DescribedConfig, include_synonyms: bool) -> DescribeConfigsResourceResult {
    let mut out = DescribeConfigsResourceResult::default();
    out.name = str_bytes(c.name);
    out.value = c.value.as_deref().map(str_bytes);
    out.read_only = c.read_only;
    out.is_sensitive = c.sensitive;
    out.config_source = source_id(c.kafka_source());
    out.config_type = type_id(c.kind);
    if include_synonyms {
        out.synonyms = c
            .synonyms
            .iter()
            .map(|s| {
                let mut synonym = DescribeConfigsSynonym::default();
                synonym.name = str_bytes(s.name);
                synonym.value = s.value.as_deref().map(str_bytes);
                synonym.source = source_id(s.source);
                synonym
            })
            .collect();
    }
    out
}

/// One line of a config file for a name and value; a line break in either would make
/// it two lines, so it is refused.
fn config_line(name: &str, value: &str) -> Result<String, Refusal> {
    if name.contains(['\n', '=']) || value.contains('\n') {
        return Err(refusal(
            ResponseError::InvalidConfig,
            format!(
                "Invalid config {name:?}: a name holds no '=' or line break, a value no line break"
            ),
        ));
    }
    Ok(format!("{name}={value}"))
}

/// The change the lines make to `change` (a new change of its resource): `replace` sets
/// exactly these overrides (AlterConfigs, `>`), otherwise they change the keys they name
/// (`>>`).
fn written(mut change: ConfigChange, lines: &[String]) -> Result<ConfigChange, Refusal> {
    let mut text = lines.join("\n");
    text.push('\n');
    let mut errors = change.write(text.as_bytes());
    errors.extend(change.end_lines());
    match errors.into_iter().next() {
        Some(e) => Err(engine_error(&EngineError::Config(e))),
        None => Ok(change),
    }
}

/// A topic or group change of the lines ([`written`]).
fn scoped_change(
    scope: ConfigScope,
    lines: &[String],
    replace: bool,
) -> Result<ConfigChange, Refusal> {
    let mut change = ConfigChange::new(scope);
    if replace {
        change.truncate();
    }
    written(change, lines)
}

/// Applies the lines to the resource, or with `validate_only` checks them only.
fn alter(
    shared: &Shared,
    kind: i8,
    name: &str,
    lines: &[String],
    replace: bool,
    validate_only: bool,
) -> Result<(), Refusal> {
    match kind {
        TOPIC_RESOURCE => {
            let topic = shared
                .engine
                .topic(name)
                .ok_or_else(|| engine_error(&EngineError::UnknownTopic { name: name.into() }))?;
            let change = scoped_change(ConfigScope::Topic, lines, replace)?;
            if validate_only {
                return Ok(());
            }
            topic
                .apply_config_change(&change)
                .map_err(|e| engine_error(&e))
        }
        BROKER_RESOURCE => {
            let level = broker_level(shared, name)?;
            let change = written(ConfigChange::broker_level(level, replace), lines)?;
            if validate_only {
                return Ok(());
            }
            shared
                .engine
                .apply_broker_change(&change)
                .map_err(|e| engine_error(&e))
        }
        // Kafka's `ControllerConfigurationValidator`: the empty id is the default group
        // resource, which it refuses.
        GROUP_RESOURCE if name.is_empty() => Err(refusal(
            ResponseError::InvalidRequest,
            "Default group resources are not allowed.",
        )),
        GROUP_RESOURCE => {
            let change = scoped_change(ConfigScope::Group, lines, replace)?;
            shared
                .engine
                .apply_group_change(name, &change, validate_only)
                .map_err(|e| engine_error(&e))
        }
        other => described(shared, other, name).map(|_| ()),
    }
}

/// AlterConfigs: the resource's overrides become exactly the given ones.
pub(crate) fn alter_configs(
    shared: &Shared,
    request: &AlterConfigsRequest,
) -> AlterConfigsResponse {
    let mut response = AlterConfigsResponse::default();
    for resource in &request.resources {
        let lines = resource
            .configs
            .iter()
            .filter_map(|c| Some(config_line(&c.name, c.value.as_deref()?)))
            .collect::<Result<Vec<_>, _>>();
        let outcome = lines.and_then(|lines| {
            alter(
                shared,
                resource.resource_type,
                &resource.resource_name,
                &lines,
                true,
                request.validate_only,
            )
        });
        let mut result = alter_configs_response::AlterConfigsResourceResponse::default();
        result.resource_type = resource.resource_type;
        result.resource_name = resource.resource_name.clone();
        if let Err((code, message)) = outcome {
            result.error_code = code;
            result.error_message = message;
        }
        response.responses.push(result);
    }
    response
}

/// IncrementalAlterConfigs: SET (0), DELETE (1), APPEND (2) and SUBTRACT (3) of list
/// values, as `kafka-configs.sh --alter --add-config / --delete-config`.
pub(crate) fn incremental_alter_configs(
    shared: &Shared,
    request: &IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut response = IncrementalAlterConfigsResponse::default();
    for resource in &request.resources {
        // The values APPEND and SUBTRACT start from; a group id is checked by `alter`, as
        // Kafka's controller checks it (its words differ from DescribeConfigs').
        let current = match resource.resource_type {
            GROUP_RESOURCE => Ok(shared.engine.describe_group_config(&resource.resource_name)),
            kind => described(shared, kind, &resource.resource_name),
        };
        let outcome = current
            .and_then(|current| {
                resource
                    .configs
                    .iter()
                    .map(|c| {
                        incremental_line(&current, &c.name, c.config_operation, c.value.as_deref())
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .and_then(|lines| {
                alter(
                    shared,
                    resource.resource_type,
                    &resource.resource_name,
                    &lines,
                    false,
                    request.validate_only,
                )
            });
        let mut result =
            incremental_alter_configs_response::AlterConfigsResourceResponse::default();
        result.resource_type = resource.resource_type;
        result.resource_name = resource.resource_name.clone();
        if let Err((code, message)) = outcome {
            result.error_code = code;
            result.error_message = message;
        }
        response.responses.push(result);
    }
    response
}

/// The config-file line of one incremental operation.
fn incremental_line(
    current: &[DescribedConfig],
    name: &str,
    operation: i8,
    value: Option<&str>,
) -> Result<String, Refusal> {
    let list = |value: Option<&str>| -> Vec<String> {
        value
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect()
    };
    let existing = || {
        list(
            current
                .iter()
                .find(|c| c.name == name)
                .and_then(|c| c.value.as_deref()),
        )
    };
    match operation {
        0 => config_line(name, value.unwrap_or_default()),
        1 => config_line(name, "").map(|_| format!("-{name}")),
        2 => {
            let mut items = existing();
            for item in list(value) {
                if !items.contains(&item) {
                    items.push(item);
                }
            }
            config_line(name, &items.join(","))
        }
        3 => {
            let remove = list(value);
            let items: Vec<String> = existing()
                .into_iter()
                .filter(|i| !remove.contains(i))
                .collect();
            config_line(name, &items.join(","))
        }
        other => Err(refusal(
            ResponseError::InvalidRequest,
            format!("Unknown config operation {other} for {name}"),
        )),
    }
}
