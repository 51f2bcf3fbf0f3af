//! One handler per served API: a decoded request in, engine calls, a response out. The
//! handlers return plain values; `connection` encodes and writes them.

mod admin;
mod fetch_session;
mod groups;
mod records;
mod txn;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    ApiVersionsResponse, BrokerId, DescribeClusterRequest, DescribeClusterResponse,
    DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, MetadataRequest,
    MetadataResponse, RequestKind, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::error_code::error_code;
use super::frame::Request;
use super::versions::SERVED;
use super::Shared;
use crate::engine::{validate_topic_name, Engine, EngineError, Topic};

pub(crate) use fetch_session::FetchSessions;
pub use groups::find_coordinator;
pub(crate) use records::FetchReply;

/// How often a request parked for an answer (a long-poll Fetch, a JoinGroup waiting for
/// its rebalance) looks at the listener stopping.
const STOP_CHECK: Duration = Duration::from_millis(100);

/// What a request gets back.
pub(crate) enum Reply {
    Message(ResponseKind),
    /// A Fetch response: its records are file ranges, sent after the message around them.
    Fetch(FetchReply),
    /// Produce with acks=0 that succeeded: Kafka sends nothing back.
    Nothing,
    /// Produce with acks=0 that failed: Kafka closes the connection, the only way it has
    /// to tell such a producer.
    Close(String),
}

/// Calls the request's handler; `peer` is the client's address.
pub(crate) fn handle(shared: &Shared, request: Request, peer: SocketAddr) -> Reply {
    let version = request.version;
    let caller = || groups::Caller {
        client_id: request
            .header
            .client_id
            .as_ref()
            .map(|id| id.to_string())
            .unwrap_or_default(),
        peer,
    };
    let message = match request.body {
        RequestKind::ApiVersions(_) => {
            let mut response = api_versions(0);
            with_features(&mut response, shared.engine.transaction_version());
            ResponseKind::ApiVersions(response)
        }
        RequestKind::Metadata(r) => ResponseKind::Metadata(metadata(shared, &r, version)),
        RequestKind::DescribeCluster(r) => {
            ResponseKind::DescribeCluster(describe_cluster(shared, &r))
        }
        RequestKind::DescribeTopicPartitions(r) => {
            ResponseKind::DescribeTopicPartitions(describe_topic_partitions(shared, &r))
        }
        RequestKind::FindCoordinator(r) => {
            ResponseKind::FindCoordinator(find_coordinator(&r, version, |kind| {
                groups::this_node_once_ready(shared, kind)
            }))
        }
        RequestKind::JoinGroup(r) => {
            ResponseKind::JoinGroup(groups::join_group(shared, &r, version, &caller()))
        }
        RequestKind::SyncGroup(r) => {
            ResponseKind::SyncGroup(groups::sync_group(shared, &r, version))
        }
        RequestKind::Heartbeat(r) => ResponseKind::Heartbeat(groups::heartbeat(shared, &r)),
        RequestKind::LeaveGroup(r) => {
            ResponseKind::LeaveGroup(groups::leave_group(shared, &r, version))
        }
        RequestKind::OffsetCommit(r) => {
            ResponseKind::OffsetCommit(groups::offset_commit(shared, &r, version))
        }
        RequestKind::OffsetFetch(r) => {
            ResponseKind::OffsetFetch(groups::offset_fetch(shared, &r, version))
        }
        RequestKind::ListGroups(r) => ResponseKind::ListGroups(groups::list_groups(shared, &r)),
        RequestKind::DescribeGroups(r) => {
            ResponseKind::DescribeGroups(groups::describe_groups(shared, &r, version))
        }
        RequestKind::DeleteGroups(r) => {
            ResponseKind::DeleteGroups(groups::delete_groups(shared, &r))
        }
        RequestKind::OffsetDelete(r) => {
            ResponseKind::OffsetDelete(groups::offset_delete(shared, &r))
        }
        RequestKind::Produce(r) => return records::produce(shared, r, version),
        RequestKind::Fetch(r) => return Reply::Fetch(records::fetch(shared, &r)),
        RequestKind::ListOffsets(r) => {
            ResponseKind::ListOffsets(records::list_offsets(shared, &r, version))
        }
        RequestKind::DeleteRecords(r) => {
            ResponseKind::DeleteRecords(records::delete_records(shared, &r))
        }
        RequestKind::InitProducerId(r) => {
            ResponseKind::InitProducerId(records::init_producer_id(shared, &r))
        }
        RequestKind::CreateTopics(r) => {
            ResponseKind::CreateTopics(admin::create_topics(shared, &r, version))
        }
        RequestKind::DeleteTopics(r) => {
            ResponseKind::DeleteTopics(admin::delete_topics(shared, &r))
        }
        RequestKind::CreatePartitions(r) => {
            ResponseKind::CreatePartitions(admin::create_partitions(shared, &r))
        }
        RequestKind::DescribeConfigs(r) => {
            ResponseKind::DescribeConfigs(admin::describe_configs(shared, &r))
        }
        RequestKind::AlterConfigs(r) => {
            ResponseKind::AlterConfigs(admin::alter_configs(shared, &r))
        }
        RequestKind::IncrementalAlterConfigs(r) => {
            ResponseKind::IncrementalAlterConfigs(admin::incremental_alter_configs(shared, &r))
        }
        RequestKind::DescribeProducers(r) => {
            ResponseKind::DescribeProducers(records::describe_producers(shared, &r))
        }
        RequestKind::AddPartitionsToTxn(r) => {
            ResponseKind::AddPartitionsToTxn(txn::add_partitions_to_txn(shared, &r))
        }
        RequestKind::AddOffsetsToTxn(r) => {
            ResponseKind::AddOffsetsToTxn(txn::add_offsets_to_txn(shared, &r))
        }
        RequestKind::EndTxn(r) => ResponseKind::EndTxn(txn::end_txn(shared, &r, version)),
        RequestKind::TxnOffsetCommit(r) => {
            ResponseKind::TxnOffsetCommit(groups::txn_offset_commit(shared, &r, version))
        }
        RequestKind::ListTransactions(r) => {
            ResponseKind::ListTransactions(txn::list_transactions(shared, &r))
        }
        RequestKind::DescribeTransactions(r) => {
            ResponseKind::DescribeTransactions(txn::describe_transactions(shared, &r))
        }
        RequestKind::DescribeAcls(r) => return admin::describe_acls(&r),
        RequestKind::CreateAcls(r) => return admin::create_acls(&r),
        RequestKind::DeleteAcls(r) => return admin::delete_acls(&r),
        // decode_request lets through only the APIs of versions::SERVED, all matched above.
        other => unreachable!("request of an API kpfs does not serve: {other:?}"),
    };
    Reply::Message(message)
}

/// ApiVersions: every served API with its range (also the body of the `UNSUPPORTED_VERSION`
/// answer to a version kpfs does not know, KIP-511).
pub fn api_versions(error_code: i16) -> ApiVersionsResponse {
    let mut response = ApiVersionsResponse::default();
    response.error_code = error_code;
    response.api_keys = SERVED
        .iter()
        .map(|&(key, min, max)| {
            let mut v = ApiVersion::default();
            v.api_key = key as i16;
            v.min_version = min;
            v.max_version = max;
            v
        })
        .collect();
    response
}

/// ApiVersions v3+'s features (KIP-584): `transaction.version`, the one feature kpfs
/// levels, supported 0 to 2 and finalized at `level` (a level of 0 is listed as not
/// finalized, as Kafka lists a feature at 0). Kafka's epoch is its metadata log's offset;
/// kpfs's level is fixed while it runs, at epoch 0.
fn with_features(response: &mut ApiVersionsResponse, level: i16) {
    const NAME: &str = "transaction.version";
    let mut supported = SupportedFeatureKey::default();
    supported.name = str_bytes(NAME);
    supported.min_version = 0;
    supported.max_version = crate::engine::transactions::DEFAULT_TRANSACTION_VERSION;
    response.supported_features = vec![supported];
    response.finalized_features_epoch = 0;
    if level > 0 {
        let mut finalized = FinalizedFeatureKey::default();
        finalized.name = str_bytes(NAME);
        finalized.min_version_level = level;
        finalized.max_version_level = level;
        response.finalized_features = vec![finalized];
    }
}

pub(crate) fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

pub(crate) fn topic_name(s: &str) -> TopicName {
    TopicName(str_bytes(s))
}

/// kafka-protocol's Uuid of a topic.
pub(crate) fn topic_uuid(topic: &Topic) -> uuid::Uuid {
    uuid::Uuid::from_bytes(topic.id().to_bytes())
}

/// The topic whose id is `id`.
pub(crate) fn topic_by_id(engine: &Engine, id: uuid::Uuid) -> Option<Arc<Topic>> {
    engine
        .topic_names()
        .into_iter()
        .filter_map(|name| engine.topic(&name))
        .find(|t| topic_uuid(t) == id)
}

/// Kafka's error code and message for an engine error.
pub(crate) fn engine_error(error: &EngineError) -> (i16, Option<StrBytes>) {
    (
        error_code(error).code(),
        Some(str_bytes(&error.to_string())),
    )
}

/// A resource type whose operations a request may ask for (Kafka's `ResourceType`).
#[derive(Clone, Copy)]
pub(crate) enum AclResource {
    Topic,
    Group,
    Cluster,
}

impl AclResource {
    /// What Kafka answers for an `include_*_authorized_operations` without an authorizer:
    /// every operation the resource type supports (`AuthHelper.authorizedOperations` over
    /// `AclEntry.supportedOperations`), one bit per `AclOperation` code.
    pub(crate) fn authorized_operations(self) -> i32 {
        const READ: u8 = 3;
        const WRITE: u8 = 4;
        const CREATE: u8 = 5;
        const DELETE: u8 = 6;
        const ALTER: u8 = 7;
        const DESCRIBE: u8 = 8;
        const CLUSTER_ACTION: u8 = 9;
        const DESCRIBE_CONFIGS: u8 = 10;
        const ALTER_CONFIGS: u8 = 11;
        const IDEMPOTENT_WRITE: u8 = 12;
        let operations: &[u8] = match self {
            AclResource::Topic => &[
                READ,
                WRITE,
                CREATE,
                DESCRIBE,
                DELETE,
                ALTER,
                DESCRIBE_CONFIGS,
                ALTER_CONFIGS,
            ],
            AclResource::Group => &[READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS],
            AclResource::Cluster => &[
                CREATE,
                CLUSTER_ACTION,
                DESCRIBE_CONFIGS,
                ALTER_CONFIGS,
                IDEMPOTENT_WRITE,
                ALTER,
                DESCRIBE,
            ],
        };
        operations.iter().fold(0, |bits, op| bits | 1 << op)
    }
}

/// Metadata: the one broker, and each asked-for topic with every partition, each led by
/// that broker, its only replica and ISR. Missing topics are created when the client
/// allows it and `auto.create.topics.enable` is on, as Kafka's
/// `KafkaApis.handleTopicMetadataRequest`.
fn metadata(shared: &Shared, request: &MetadataRequest, version: i16) -> MetadataResponse {
    let config = &shared.config;
    let engine = &shared.engine;
    let mut response = MetadataResponse::default();
    let mut broker = MetadataResponseBroker::default();
    broker.node_id = BrokerId(config.node_id);
    broker.host = str_bytes(&config.advertised_host);
    broker.port = i32::from(config.advertised_port);
    response.brokers = vec![broker];
    response.cluster_id = Some(str_bytes(&config.cluster_id));
    response.controller_id = BrokerId(config.node_id);
    // v0 asks for every topic with an empty list; v1+ with null.
    let every_topic = match &request.topics {
        None => true,
        Some(topics) => version == 0 && topics.is_empty(),
    };
    // Before v4 the request has no flag, and Kafka allows creation.
    let allow_create = version < 4 || request.allow_auto_topic_creation;
    let requested: Vec<(Option<String>, uuid::Uuid)> = if every_topic {
        engine
            .topic_names()
            .into_iter()
            .map(|n| (Some(n), uuid::Uuid::nil()))
            .collect()
    } else {
        request
            .topics
            .iter()
            .flatten()
            .map(|t| (t.name.as_ref().map(|n| n.0.to_string()), t.topic_id))
            .collect()
    };
    response.topics = requested
        .into_iter()
        .map(|(name, id)| {
            let found = match &name {
                Some(name) => match engine.topic(name) {
                    Some(topic) => Ok(topic),
                    None if allow_create && config.auto_create_topics => auto_create(engine, name),
                    None => Err(ResponseError::UnknownTopicOrPartition),
                },
                None => topic_by_id(engine, id).ok_or(ResponseError::UnknownTopicId),
            };
            metadata_topic(shared, name, id, found)
        })
        .collect();
    // v8+; the cluster's operations only until v10 (v11 moved them to DescribeCluster).
    if version >= 8 {
        if request.include_topic_authorized_operations {
            // As Kafka, every topic named in the answer, found or not; an unknown topic
            // id has no name to authorize.
            for topic in response.topics.iter_mut().filter(|t| t.name.is_some()) {
                topic.topic_authorized_operations = AclResource::Topic.authorized_operations();
            }
        }
        if version <= 10 && request.include_cluster_authorized_operations {
            response.cluster_authorized_operations = AclResource::Cluster.authorized_operations();
        }
    }
    response
}

/// Kafka's auto-creation, with `num.partitions` partitions: an invalid name is
/// `INVALID_TOPIC_EXCEPTION`; a topic another request created meanwhile is simply there.
fn auto_create(engine: &Engine, name: &str) -> Result<Arc<Topic>, ResponseError> {
    match engine.create_topic(name, engine.default_partitions()) {
        Ok(topic) => {
            tracing::info!(
                topic = name,
                "auto-created topic (auto.create.topics.enable)"
            );
            Ok(topic)
        }
        Err(EngineError::TopicExists { .. }) => engine
            .topic(name)
            .ok_or(ResponseError::UnknownTopicOrPartition),
        Err(e) => {
            tracing::warn!(topic = name, error = %e, "auto-creating a topic failed");
            Err(error_code(&e))
        }
    }
}

fn metadata_topic(
    shared: &Shared,
    name: Option<String>,
    id: uuid::Uuid,
    found: Result<Arc<Topic>, ResponseError>,
) -> MetadataResponseTopic {
    let mut out = MetadataResponseTopic::default();
    out.name = name.as_deref().map(topic_name);
    out.topic_id = id;
    match found {
        Ok(topic) => {
            out.name = Some(topic_name(topic.name()));
            out.topic_id = topic_uuid(&topic);
            // Kafka's clients leave internal topics out of pattern subscriptions and its
            // tools refuse to delete them.
            out.is_internal = topic.is_internal();
            let node = BrokerId(shared.config.node_id);
            out.partitions = (0..topic.partition_count() as i32)
                .map(|index| {
                    let mut partition = MetadataResponsePartition::default();
                    partition.partition_index = index;
                    partition.leader_id = node;
                    partition.leader_epoch = 0;
                    partition.replica_nodes = vec![node];
                    partition.isr_nodes = vec![node];
                    partition
                })
                .collect();
        }
        Err(code) => out.error_code = code.code(),
    }
    out
}

/// DescribeTopicPartitions (KIP-966), what `kafka-topics.sh --describe` asks since Kafka
/// 3.8: the asked topics (every topic when none is named) from the cursor's on, sorted by
/// name, a page of at most `response_partition_limit` and `max.request.partition.size.limit`
/// partitions, and the cursor of the next page, as Kafka's
/// `DescribeTopicPartitionsRequestHandler` and `KRaftMetadataCache` answer it: a topic
/// longer than the page left is cut there, and the cursor names its next partition. A
/// kpfs partition has its one replica in sync, so its eligible leader replicas (ELR)
/// and last known ELR are empty.
fn describe_topic_partitions(
    shared: &Shared,
    request: &DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let engine = &shared.engine;
    let every_topic = request.topics.is_empty();
    let cursor = request
        .cursor
        .as_ref()
        .map(|c| (c.topic_name.0.to_string(), c.partition_index));
    let from = cursor.as_ref().map_or("", |(name, _)| name.as_str());
    let mut names: Vec<String> = if every_topic {
        engine.topic_names()
    } else {
        request
            .topics
            .iter()
            .map(|t| t.name.0.to_string())
            .collect()
    };
    names.retain(|name| name.as_str() >= from);
    names.sort();
    names.dedup();
    let mut response = DescribeTopicPartitionsResponse::default();
    let cursor_outside = cursor
        .as_ref()
        .filter(|_| !every_topic)
        .is_some_and(|(name, _)| names.binary_search(name).is_err());
    let cursor_negative = cursor.as_ref().is_some_and(|&(_, index)| index < 0);
    if cursor_outside || cursor_negative {
        // Kafka throws InvalidRequestException ("DescribeTopicPartitionsRequest topic
        // list should contain the cursor topic", "... cursor partition must be
        // valid"); its error response carries the code on every asked topic, without
        // the message.
        response.topics = request
            .topics
            .iter()
            .map(|t| {
                let mut out = DescribeTopicPartitionsResponseTopic::default();
                out.name = Some(t.name.clone());
                out.error_code = ResponseError::InvalidRequest.code();
                out
            })
            .collect();
        return response;
    }
    let first_partition = |name: &str| match &cursor {
        Some((cursor_name, index)) if cursor_name == name => *index,
        _ => 0,
    };
    let mut remaining = shared
        .config
        .max_request_partition_size_limit
        .min(request.response_partition_limit);
    for name in names {
        if remaining == 0 {
            // The page is full: the next one starts at this topic's first partition.
            let mut next = Cursor::default();
            next.topic_name = topic_name(&name);
            next.partition_index = 0;
            response.next_cursor = Some(next);
            break;
        }
        // A negative limit lists nothing, and no cursor either, as Kafka's loop.
        if remaining < 0 {
            continue;
        }
        let mut out = DescribeTopicPartitionsResponseTopic::default();
        out.name = Some(topic_name(&name));
        match engine.topic(&name) {
            Some(topic) => {
                out.topic_id = topic_uuid(&topic);
                out.is_internal = topic.is_internal();
                // From the cursor's partition, as many as the page has room for; a topic
                // cut short ends the page with a cursor at its first partition left out
                // (Kafka's `getPartitionMetadataForDescribeTopicResponse`).
                let count = topic.partition_count() as i32;
                let start = first_partition(&name);
                let end = count.min(start.saturating_add(remaining));
                out.partitions = (start.max(0)..end)
                    .map(|index| described_partition(shared.config.node_id, index))
                    .collect();
                out.topic_authorized_operations = AclResource::Topic.authorized_operations();
                response.topics.push(out);
                if end < count {
                    let mut next = Cursor::default();
                    next.topic_name = topic_name(&name);
                    next.partition_index = end;
                    response.next_cursor = Some(next);
                    break;
                }
                remaining -= (end - start).max(0);
                continue;
            }
            // Named topics only: of every topic, none can be missing.
            None if every_topic => continue,
            None => {
                out.error_code = match validate_topic_name(&name) {
                    Ok(()) => ResponseError::UnknownTopicOrPartition,
                    Err(_) => ResponseError::InvalidTopicException,
                }
                .code();
                out.is_internal = KAFKA_INTERNAL_TOPICS.contains(&name.as_str());
            }
        }
        out.topic_authorized_operations = AclResource::Topic.authorized_operations();
        response.topics.push(out);
    }
    response
}

/// Kafka's `Topic.INTERNAL_TOPICS`: what a missing topic's `is_internal` is judged by.
const KAFKA_INTERNAL_TOPICS: &[&str] = &[
    "__consumer_offsets",
    "__transaction_state",
    "__share_group_state",
];

/// A kpfs topic's partition as DescribeTopicPartitions lists it: led by this node, its
/// one replica, in sync; no ELR, none offline.
fn described_partition(node_id: i32, index: i32) -> DescribeTopicPartitionsResponsePartition {
    let node = BrokerId(node_id);
    let mut partition = DescribeTopicPartitionsResponsePartition::default();
    partition.partition_index = index;
    partition.leader_id = node;
    partition.leader_epoch = 0;
    partition.replica_nodes = vec![node];
    partition.isr_nodes = vec![node];
    partition.eligible_leader_replicas = Some(Vec::new());
    partition.last_known_elr = Some(Vec::new());
    partition
}

/// DescribeCluster: one node, broker and controller at once.
fn describe_cluster(shared: &Shared, request: &DescribeClusterRequest) -> DescribeClusterResponse {
    let config = &shared.config;
    let mut broker = DescribeClusterBroker::default();
    broker.broker_id = BrokerId(config.node_id);
    broker.host = str_bytes(&config.advertised_host);
    broker.port = i32::from(config.advertised_port);
    let mut response = DescribeClusterResponse::default();
    response.endpoint_type = request.endpoint_type;
    response.cluster_id = str_bytes(&config.cluster_id);
    response.controller_id = BrokerId(config.node_id);
    response.brokers = vec![broker];
    if request.include_cluster_authorized_operations {
        response.cluster_authorized_operations = AclResource::Cluster.authorized_operations();
    }
    response
}
