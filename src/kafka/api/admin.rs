//! The admin APIs: CreateTopics, DeleteTopics, DescribeConfigs, AlterConfigs,
//! IncrementalAlterConfigs, and the ACL APIs. Config changes go through the engine's
//! `ConfigChange`, the same lines, validators and texts as writes to a topic's `config` or
//! `.kpfs/config`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{
    alter_configs_response, incremental_alter_configs_response, AlterConfigsRequest,
    AlterConfigsResponse, BrokerId, CreateAclsRequest, CreateAclsResponse, CreatePartitionsRequest,
    CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse, DeleteAclsRequest,
    DeleteAclsResponse, DeleteTopicsRequest, DeleteTopicsResponse, DescribeAclsRequest,
    DescribeAclsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::{engine_error, str_bytes, topic_by_id, topic_uuid, Reply};
use crate::engine::config::{
    is_list_config, BrokerLevel, ConfigSource, DescribedConfig, DescribedSource, DescribedType,
};
use crate::engine::{
    check_partition_count, validate_topic_name, ConfigChange, ConfigScope, EngineError, Topic,
};
use crate::kafka::Shared;

/// Kafka's `ConfigResource.Type` ids.
const TOPIC_RESOURCE: i8 = 2;
const BROKER_RESOURCE: i8 = 4;
const GROUP_RESOURCE: i8 = 32;

type Refusal = (i16, Option<StrBytes>);

fn refusal(code: ResponseError, message: impl AsRef<str>) -> Refusal {
    (code.code(), Some(str_bytes(message.as_ref())))
}

/// CreateTopics: each topic created with its configs, or refused whole, with the checks
/// and texts of Kafka's controller (`ReplicationControlManager.createTopic`). kpfs
/// partitions have one replica, this node.
pub(crate) fn create_topics(
    shared: &Shared,
    request: &CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    let mut response = CreateTopicsResponse::default();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for asked in &request.topics {
        *counts.entry(asked.name.0.as_str()).or_default() += 1;
    }
    let mut answered = HashSet::new();
    for asked in &request.topics {
        let name = asked.name.0.to_string();
        // The controller answers once per name, and refuses a name asked twice.
        if !answered.insert(name.clone()) {
            continue;
        }
        let mut result = CreatableTopicResult::default();
        result.name = asked.name.clone();
        result.num_partitions = -1;
        result.replication_factor = -1;
        let checked = if counts[name.as_str()] > 1 {
            Err(refusal(
                ResponseError::InvalidRequest,
                "Duplicate topic name.",
            ))
        } else {
            creatable(shared, asked, &name)
        };
        let created = checked.and_then(|(change, partitions)| {
            if request.validate_only {
                let configs = shared
                    .engine
                    .describe_new_topic_config(&change)
                    .map_err(|e| engine_error(&e))?;
                let id = crate::engine::metadata_files::Uuid::random()
                    .map_err(|e| engine_error(&e))?;
                return Ok((uuid::Uuid::from_bytes(id.to_bytes()), configs, partitions));
            }
            let topic = shared
                .engine
                .create_topic(&name, partitions)
                .map_err(|e| engine_error(&e))?;
            if let Err(e) = topic.apply_config_change(&change) {
                // All or nothing, as Kafka's controller: the topic goes with its refusal.
                if let Err(undo) = shared.engine.delete_topic(&name) {
                    tracing::warn!(topic = name, error = %undo, "removing a topic whose configs were refused failed");
                }
                return Err(engine_error(&e));
            }
            Ok((
                topic_uuid(&topic),
                topic.describe_config(),
                topic.partition_count(),
            ))
        });
        match created {
            Ok((topic_id, configs, partitions)) => {
                result.error_message = None;
                result.num_partitions = partitions as i32;
                result.replication_factor = 1;
                // Kafka names a topic a validate-only request would create by an id of
                // its own too, one no topic keeps.
                result.topic_id = topic_id;
                if version >= 5 {
                    result.configs = Some(
                        configs
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
            Err((code, message)) => {
                result.error_code = code;
                result.error_message = message;
            }
        }
        response.topics.push(result);
    }
    response
}

/// The config change and partition count that create `asked` as `name`, or its refusal:
/// the name, then the partitions and replicas (manual or not), then the configs, in
/// Kafka's order and words.
fn creatable(
    shared: &Shared,
    asked: &CreatableTopic,
    name: &str,
) -> Result<(ConfigChange, u32), Refusal> {
    validate_topic_name(name).map_err(|e| engine_error(&e))?;
    if shared.engine.topic(name).is_some() {
        return Err(engine_error(&EngineError::TopicExists {
            name: name.into(),
        }));
    }
    let partitions = if asked.assignments.is_empty() {
        if !matches!(asked.replication_factor, -1 | 1..) {
            return Err(refusal(
                ResponseError::InvalidReplicationFactor,
                "Replication factor must be larger than 0, or -1 to use the default value.",
            ));
        }
        if !matches!(asked.num_partitions, -1 | 1..) {
            return Err(refusal(
                ResponseError::InvalidPartitions,
                "Number of partitions was set to an invalid non-positive value.",
            ));
        }
        if asked.replication_factor > 1 {
            return Err(refusal(
                ResponseError::InvalidReplicationFactor,
                format!(
                    "Unable to replicate the partition {0} time(s): The target replication factor of {0} cannot be reached because only 1 broker(s) are registered or some brokers have all their log directories cordoned.",
                    asked.replication_factor
                ),
            ));
        }
        if asked.num_partitions == -1 {
            // num.partitions is at most 10000 (the broker config's check).
            i32::try_from(shared.engine.default_partitions()).unwrap_or(i32::MAX)
        } else {
            asked.num_partitions
        }
    } else {
        manual_assignment(shared, asked)?
    };
    // Kafka has no bound; kpfs's (a topic of at most 10000 partitions) is refused in
    // the engine's words.
    let partitions = partitions as u32;
    check_partition_count(partitions).map_err(|e| engine_error(&e))?;
    let lines = asked
        .configs
        .iter()
        .map(|c| match c.value.as_deref() {
            Some(value) => config_line(&c.name, value),
            None => Err(refusal(
                ResponseError::InvalidConfig,
                format!(
                    "Null value not supported for topic configs: {}",
                    c.name.as_str()
                ),
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((
        scoped_change(ConfigScope::Topic, &lines, false)?,
        partitions,
    ))
}

/// The number of partitions a manual assignment makes, checked as Kafka's controller
/// checks it against the one registered broker, this node.
fn manual_assignment(shared: &Shared, asked: &CreatableTopic) -> Result<i32, Refusal> {
    if asked.replication_factor != -1 {
        return Err(refusal(
            ResponseError::InvalidRequest,
            "A manual partition assignment was specified, but replication factor was not set to -1.",
        ));
    }
    if asked.num_partitions != -1 {
        return Err(refusal(
            ResponseError::InvalidRequest,
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        ));
    }
    let mut indexes = HashSet::new();
    // Each partition's replicas must be as many as the one before it has.
    let mut replication_factor = None;
    for assignment in &asked.assignments {
        if !indexes.insert(assignment.partition_index) {
            return Err(refusal(
                ResponseError::InvalidReplicaAssignment,
                format!(
                    "Found multiple manual partition assignments for partition {}",
                    assignment.partition_index
                ),
            ));
        }
        validate_manual_assignment(shared, &assignment.broker_ids, replication_factor)?;
        replication_factor = Some(assignment.broker_ids.len());
    }
    let count = asked.assignments.len() as i32;
    if (0..count).any(|i| !indexes.contains(&i)) {
        return Err(refusal(
            ResponseError::InvalidReplicaAssignment,
            "partitions should be a consecutive 0-based integer sequence",
        ));
    }
    Ok(count)
}

/// One partition's manual assignment checked as Kafka's controller checks it
/// (`ReplicationControlManager.validateManualPartitionAssignment`) against the one
/// registered broker, this node: in the order of the sorted broker ids, then against the
/// replication factor of the topic's other partitions, when it has some.
fn validate_manual_assignment(
    shared: &Shared,
    brokers: &[BrokerId],
    replication_factor: Option<usize>,
) -> Result<(), Refusal> {
    if brokers.is_empty() {
        return Err(refusal(
            ResponseError::InvalidReplicaAssignment,
            "The manual partition assignment includes an empty replica list.",
        ));
    }
    let mut sorted: Vec<i32> = brokers.iter().map(|b| b.0).collect();
    sorted.sort_unstable();
    let mut previous = None;
    for &broker in &sorted {
        if broker != shared.config.node_id {
            return Err(refusal(
                ResponseError::InvalidReplicaAssignment,
                format!(
                    "The manual partition assignment includes broker {broker}, but no such broker is registered."
                ),
            ));
        }
        if previous == Some(broker) {
            return Err(refusal(
                ResponseError::InvalidReplicaAssignment,
                format!(
                    "The manual partition assignment includes the broker {broker} more than once."
                ),
            ));
        }
        previous = Some(broker);
    }
    match replication_factor {
        Some(factor) if factor != sorted.len() => Err(refusal(
            ResponseError::InvalidReplicaAssignment,
            format!(
                "The manual partition assignment includes a partition with {} replica(s), but this is not consistent with previous partitions, which have {factor} replica(s).",
                sorted.len()
            ),
        )),
        _ => Ok(()),
    }
}

/// CreatePartitions: each topic grown to its asked count (partitions are only ever
/// added), or refused, as Kafka's controller (`ControllerApis.createPartitions`,
/// `ReplicationControlManager.createPartitions`): a name asked twice is `INVALID_REQUEST`
/// "Duplicate topic name."; a topic that does not exist `UNKNOWN_TOPIC_OR_PARTITION`
/// without a message; the count the topic has, or fewer, `INVALID_PARTITIONS`; manual
/// assignments must be one per added partition, each of this node alone. Above kpfs's
/// 10000 partitions a topic, the engine's `INVALID_PARTITIONS`. `validate_only` checks
/// all of it and adds nothing.
pub(crate) fn create_partitions(
    shared: &Shared,
    request: &CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for asked in &request.topics {
        *counts.entry(asked.name.0.as_str()).or_default() += 1;
    }
    let mut answered = HashSet::new();
    let mut response = CreatePartitionsResponse::default();
    for asked in &request.topics {
        let name = asked.name.0.as_str();
        if !answered.insert(name) {
            continue;
        }
        let outcome = if counts[name] > 1 {
            Err(refusal(
                ResponseError::InvalidRequest,
                "Duplicate topic name.",
            ))
        } else {
            grow(shared, asked, request.validate_only)
        };
        let mut result = CreatePartitionsTopicResult::default();
        result.name = asked.name.clone();
        if let Err((code, message)) = outcome {
            result.error_code = code;
            result.error_message = message;
        }
        response.results.push(result);
    }
    response
}

/// One topic of a CreatePartitions: checked, then (unless `validate_only`) grown.
fn grow(
    shared: &Shared,
    asked: &CreatePartitionsTopic,
    validate_only: bool,
) -> Result<(), Refusal> {
    let name = asked.name.0.as_str();
    let Some(topic) = shared.engine.topic(name) else {
        // Kafka's UnknownTopicOrPartitionException(): the code alone.
        return Err((ResponseError::UnknownTopicOrPartition.code(), None));
    };
    let current = match u32::try_from(asked.count) {
        Ok(count) => topic
            .check_add_partitions(count)
            .map_err(|e| engine_error(&e))?,
        // A negative count is never an increase, in Kafka's words of a decrease.
        Err(_) => {
            return Err(refusal(
                ResponseError::InvalidPartitions,
                format!(
                    "The topic {name} currently has {} partition(s); {} would not be an increase.",
                    topic.partition_count(),
                    asked.count
                ),
            ))
        }
    };
    let count = asked.count as u32;
    if let Some(assignments) = &asked.assignments {
        let added = count - current;
        if assignments.len() != added as usize {
            return Err(refusal(
                ResponseError::InvalidReplicaAssignment,
                format!(
                    "Attempted to add {added} additional partition(s), but only {} assignment(s) were specified.",
                    assignments.len()
                ),
            ));
        }
        for assignment in assignments {
            validate_manual_assignment(shared, &assignment.broker_ids, Some(1))?;
        }
    }
    if validate_only {
        return Ok(());
    }
    topic.add_partitions(count).map_err(|e| engine_error(&e))
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
                .ok_or((
                    ResponseError::UnknownTopicId.code(),
                    Some(str_bytes("This server does not host this topic ID.")),
                )),
        };
        let deleted = if !shared.config.delete_topic_enable {
            Err(refusal(
                ResponseError::TopicDeletionDisabled,
                "Topic deletion is disabled (delete.topic.enable=false).",
            ))
        } else {
            found.and_then(|name| {
                result.name = Some(super::topic_name(&name));
                shared.engine.delete_topic(&name).map_err(|e| match e {
                    // Kafka's controller: the error's own text, without the partition.
                    EngineError::UnknownTopic { .. } => refusal(
                        ResponseError::UnknownTopicOrPartition,
                        "This server does not host this topic-partition.",
                    ),
                    e => engine_error(&e),
                })
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

/// Which request names a resource: Kafka's texts for a resource it lacks differ.
#[derive(Clone, Copy, PartialEq)]
enum Asking {
    Describe,
    Alter,
}

/// The level a broker resource names: `""` the cluster-wide default, this node's id its
/// own overrides (both in `.kpfs/config`); another id is refused in Kafka's words
/// (`ConfigHelper` for a describe, `ConfigAdminManager` for an alter).
fn broker_level(shared: &Shared, name: &str, asking: Asking) -> Result<BrokerLevel, Refusal> {
    let node_id = shared.config.node_id;
    if name.is_empty() {
        Ok(BrokerLevel::ClusterDefault)
    } else if name == node_id.to_string() {
        Ok(BrokerLevel::ThisBroker)
    } else {
        let expected = match asking {
            Asking::Describe => format!("{node_id} or empty string"),
            Asking::Alter => node_id.to_string(),
        };
        Err(refusal(
            ResponseError::InvalidRequest,
            format!("Unexpected broker id, expected {expected}, but received {name}"),
        ))
    }
}

/// The topic an alter names, or Kafka's controller's refusal of a topic it lacks.
fn altered_topic(shared: &Shared, name: &str) -> Result<Arc<Topic>, Refusal> {
    shared.engine.topic(name).ok_or_else(|| {
        refusal(
            ResponseError::UnknownTopicOrPartition,
            format!("The topic '{name}' does not exist."),
        )
    })
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
        let described = described(
            shared,
            resource.resource_type,
            &resource.resource_name,
            Asking::Describe,
        );
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

fn described(
    shared: &Shared,
    kind: i8,
    name: &str,
    asking: Asking,
) -> Result<Vec<DescribedConfig>, Refusal> {
    match kind {
        TOPIC_RESOURCE if asking == Asking::Alter => {
            altered_topic(shared, name).map(|t| t.describe_config())
        }
        TOPIC_RESOURCE => shared
            .engine
            .topic(name)
            .map(|t| t.describe_config())
            .ok_or_else(|| engine_error(&EngineError::UnknownTopic { name: name.into() })),
        BROKER_RESOURCE => Ok(shared
            .engine
            .describe_broker_config(broker_level(shared, name, asking)?)),
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

/// The config file a resource type's configs are written to.
fn scope_of(kind: i8) -> Option<ConfigScope> {
    match kind {
        TOPIC_RESOURCE => Some(ConfigScope::Topic),
        BROKER_RESOURCE => Some(ConfigScope::Broker),
        GROUP_RESOURCE => Some(ConfigScope::Group),
        _ => None,
    }
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
            let topic = altered_topic(shared, name)?;
            let change = scoped_change(ConfigScope::Topic, lines, replace)?;
            if validate_only {
                return Ok(());
            }
            topic
                .apply_config_change(&change)
                .map_err(|e| engine_error(&e))
        }
        BROKER_RESOURCE => {
            let level = broker_level(shared, name, Asking::Alter)?;
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
        other => described(shared, other, name, Asking::Alter).map(|_| ()),
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
            kind => described(shared, kind, &resource.resource_name, Asking::Alter),
        };
        let outcome = current
            .and_then(|current| {
                let mut names = HashSet::new();
                if !resource
                    .configs
                    .iter()
                    .all(|c| names.insert(c.name.as_str()))
                {
                    // Kafka's ControllerApis, before anything else of the resource.
                    return Err(refusal(
                        ResponseError::InvalidRequest,
                        "Error due to duplicate config keys",
                    ));
                }
                resource
                    .configs
                    .iter()
                    .map(|c| {
                        incremental_line(
                            &current,
                            resource.resource_type,
                            &c.name,
                            c.config_operation,
                            c.value.as_deref(),
                        )
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
    kind: i8,
    name: &str,
    operation: i8,
    value: Option<&str>,
) -> Result<String, Refusal> {
    if let (2 | 3, Some(scope)) = (operation, scope_of(kind)) {
        // Kafka's ConfigurationControlManager, for a name it does not know too.
        if is_list_config(scope, name) != Some(true) {
            return Err(refusal(
                ResponseError::InvalidConfig,
                format!(
                    "Can't {} to key {name} because its type is not LIST.",
                    if operation == 2 { "APPEND" } else { "SUBTRACT" }
                ),
            ));
        }
    }
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

/// The codes of an ACL's elements (Kafka's `ResourceType`, `PatternType`, `AclOperation`,
/// `AclPermissionType`), in the order a request carries them.
struct AclElements {
    resource_type: i8,
    pattern_type: i8,
    operation: i8,
    permission_type: i8,
}

impl AclElements {
    /// Whether one is UNKNOWN (code 0), which Kafka's request parser refuses in a filter
    /// and in an ACL to create alike. Other codes pass it, those Kafka does not define
    /// (99) and ANY in an ACL to create included: without an authorizer nothing looks
    /// further.
    fn any_unknown(&self) -> bool {
        [
            self.resource_type,
            self.pattern_type,
            self.operation,
            self.permission_type,
        ]
        .contains(&0)
    }
}

/// The ACL APIs answer as Kafka's `AclApis` does without an authorizer (kpfs has none:
/// every client may do everything): SECURITY_DISABLED, in Kafka's words.
const NO_AUTHORIZER: &str = "No Authorizer is configured.";

/// Kafka closes the connection of an ACL request its parser refuses (an
/// `IllegalArgumentException` in the request's constructor makes it an invalid request).
fn unknown_acl_elements(api: &str) -> Reply {
    Reply::Close(format!("{api} request contains UNKNOWN elements"))
}

/// DescribeAcls: no ACLs to describe without an authorizer.
pub(crate) fn describe_acls(request: &DescribeAclsRequest) -> Reply {
    let filter = AclElements {
        resource_type: request.resource_type_filter,
        pattern_type: request.pattern_type_filter,
        operation: request.operation,
        permission_type: request.permission_type,
    };
    if filter.any_unknown() {
        return unknown_acl_elements("DescribeAcls");
    }
    let mut response = DescribeAclsResponse::default();
    response.error_code = ResponseError::SecurityDisabled.code();
    response.error_message = Some(str_bytes("No Authorizer is configured on the broker"));
    Reply::Message(ResponseKind::DescribeAcls(response))
}

/// CreateAcls: each creation refused, nothing to keep ACLs in.
pub(crate) fn create_acls(request: &CreateAclsRequest) -> Reply {
    let unknown = request.creations.iter().any(|c| {
        AclElements {
            resource_type: c.resource_type,
            pattern_type: c.resource_pattern_type,
            operation: c.operation,
            permission_type: c.permission_type,
        }
        .any_unknown()
    });
    if unknown {
        return unknown_acl_elements("CreateAcls");
    }
    let mut response = CreateAclsResponse::default();
    response.results = request
        .creations
        .iter()
        .map(|_| {
            let mut result = AclCreationResult::default();
            result.error_code = ResponseError::SecurityDisabled.code();
            result.error_message = Some(str_bytes(NO_AUTHORIZER));
            result
        })
        .collect();
    Reply::Message(ResponseKind::CreateAcls(response))
}

/// DeleteAcls: each filter refused, matching nothing.
pub(crate) fn delete_acls(request: &DeleteAclsRequest) -> Reply {
    let unknown = request.filters.iter().any(|f| {
        AclElements {
            resource_type: f.resource_type_filter,
            pattern_type: f.pattern_type_filter,
            operation: f.operation,
            permission_type: f.permission_type,
        }
        .any_unknown()
    });
    if unknown {
        return unknown_acl_elements("DeleteAcls");
    }
    let mut response = DeleteAclsResponse::default();
    response.filter_results = request
        .filters
        .iter()
        .map(|_| {
            let mut result = DeleteAclsFilterResult::default();
            result.error_code = ResponseError::SecurityDisabled.code();
            result.error_message = Some(str_bytes(NO_AUTHORIZER));
            result
        })
        .collect();
    Reply::Message(ResponseKind::DeleteAcls(response))
}
