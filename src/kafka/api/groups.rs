//! The group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
//! OffsetCommit, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups, OffsetDelete.
//! Each maps its request's fields, version by version, to the engine's
//! `GroupCoordinator` (which knows no versions) and its answer back, as Kafka's
//! `KafkaApis` handlers and the request and response classes around its coordinator do.
//! Only FindCoordinator and DescribeGroups v6 have a message field; every other
//! refusal is its code alone, as in Kafka.

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use crossbeam_channel::RecvTimeoutError;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest,
    DescribeGroupsResponse, FindCoordinatorRequest, FindCoordinatorResponse, GroupId,
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, ListGroupsRequest, ListGroupsResponse, OffsetCommitRequest,
    OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse, OffsetFetchRequest,
    OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse, TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::{str_bytes, topic_name, AclResource, STOP_CHECK};
use crate::deadline::Deadline;
use crate::engine::groups::{
    CommitRequest, FetchedOffset, GroupError, GroupState, JoinRequest, JoinResponse, LeavingMember,
    OffsetToCommit, Pending, SyncRequest, SyncResponse,
};
use crate::engine::TxnOrGroupError;
use crate::kafka::error_code::group_error_code;
use crate::kafka::Shared;

/// Who sent a request, as a group member's description shows it.
pub(crate) struct Caller {
    pub(crate) client_id: String,
    pub(crate) peer: SocketAddr,
}

impl Caller {
    /// The client's address as Kafka shows it: Java's `InetAddress.toString()` of an
    /// address it did not resolve, "/127.0.0.1", and IPv6 with every group written out
    /// ("/0:0:0:0:0:0:0:1") and its scope, as `Inet6Address` prints it.
    fn host(&self) -> String {
        match self.peer.ip().to_canonical() {
            IpAddr::V4(ip) => format!("/{ip}"),
            IpAddr::V6(ip) => {
                let groups: Vec<String> = ip.segments().iter().map(|g| format!("{g:x}")).collect();
                let scope = match self.peer {
                    SocketAddr::V6(a) if a.scope_id() != 0 => format!("%{}", a.scope_id()),
                    _ => String::new(),
                };
                format!("/{}{scope}", groups.join(":"))
            }
        }
    }
}

/// Kafka's `CoordinatorType` ids.
const GROUP_KEY_TYPE: i8 = 0;
pub(crate) const TRANSACTION_KEY_TYPE: i8 = 1;
const SHARE_KEY_TYPE: i8 = 2;

/// The node a FindCoordinator answer names.
pub struct CoordinatorNode {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
}

/// The coordinators FindCoordinator finds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoordinatorKind {
    Group,
    Transaction,
}

/// FindCoordinator: a group's or transactional id's coordinator is this node, once
/// `coordinator` has its internal topic ready (Kafka creates `__consumer_offsets` and
/// `__transaction_state` on the first lookup too), or `COORDINATOR_NOT_AVAILABLE` with
/// its reason, which clients retry. An empty group id gets the coordinator like any
/// other, as Kafka's `getCoordinator` answers it. Share groups (KIP-932) and unknown key
/// types get `INVALID_REQUEST`, as from a Kafka without a share coordinator.
pub fn find_coordinator(
    request: &FindCoordinatorRequest,
    version: i16,
    coordinator: impl FnOnce(CoordinatorKind) -> Result<CoordinatorNode, String>,
) -> FindCoordinatorResponse {
    let found = match request.key_type {
        GROUP_KEY_TYPE | TRANSACTION_KEY_TYPE => {
            let kind = if request.key_type == GROUP_KEY_TYPE {
                CoordinatorKind::Group
            } else {
                CoordinatorKind::Transaction
            };
            coordinator(kind).map_err(|reason| (ResponseError::CoordinatorNotAvailable, reason))
        }
        SHARE_KEY_TYPE => Err((
            ResponseError::InvalidRequest,
            "kpfs does not support share groups (KIP-932)".to_string(),
        )),
        other => Err((
            ResponseError::InvalidRequest,
            format!("Unknown coordinator type received: {other}"),
        )),
    };
    let (node, error) = match found {
        Ok(node) => (node, None),
        Err(refusal) => (
            CoordinatorNode {
                node_id: -1,
                host: String::new(),
                port: -1,
            },
            Some(refusal),
        ),
    };
    let mut response = FindCoordinatorResponse::default();
    if version < 4 {
        response.node_id = BrokerId(node.node_id);
        response.host = str_bytes(&node.host);
        response.port = node.port;
        match error {
            Some((code, message)) => {
                response.error_code = code.code();
                response.error_message = Some(str_bytes(&message));
            }
            // Kafka's v1-3 answer carries `Errors.NONE.message()`, the text "NONE".
            None => response.error_message = Some(str_bytes("NONE")),
        }
    } else {
        response.coordinators = request
            .coordinator_keys
            .iter()
            .map(|key| {
                let mut c = Coordinator::default();
                c.key = key.clone();
                c.node_id = BrokerId(node.node_id);
                c.host = str_bytes(&node.host);
                c.port = node.port;
                if let Some((code, message)) = &error {
                    c.error_code = code.code();
                    c.error_message = Some(str_bytes(message));
                }
                c
            })
            .collect();
    }
    response
}

/// The listener's answer to "where is the group coordinator": this node, as Metadata
/// advertises it, once the offsets topic exists.
pub(crate) fn this_node_once_ready(
    shared: &Shared,
    kind: CoordinatorKind,
) -> Result<CoordinatorNode, String> {
    let ready = match kind {
        CoordinatorKind::Group => shared.engine.ensure_offsets_topic(),
        CoordinatorKind::Transaction => shared.engine.ensure_transaction_state_topic(),
    };
    ready
        .map(|()| CoordinatorNode {
            node_id: shared.config.node_id,
            host: shared.config.advertised_host.clone(),
            port: i32::from(shared.config.advertised_port),
        })
        .map_err(|e| {
            tracing::warn!(error = %e, ?kind, "the coordinator's internal topic is not available");
            e.to_string()
        })
}

fn code(error: Option<&GroupError>) -> i16 {
    error.map_or(0, |e| group_error_code(e).code())
}

fn group_id(id: &GroupId) -> String {
    id.0.to_string()
}

fn opt_string(s: &Option<StrBytes>) -> Option<String> {
    s.as_ref().map(|s| s.to_string())
}

fn opt_str_bytes(s: &Option<String>) -> Option<StrBytes> {
    s.as_deref().map(str_bytes)
}

/// Why a JoinGroup or SyncGroup got no answer from the coordinator.
enum Unanswered {
    /// The listener is stopping: the connection must be free to close.
    Stopping,
    /// The coordinator dropped the request: the member sent a newer one (a client that
    /// gave up waiting and rejoined), which replaces it. Kafka leaves the older one
    /// unanswered.
    Replaced,
    /// No answer within the bound: a bug, which must not hold the connection's thread
    /// forever.
    TimedOut,
}

impl Unanswered {
    /// Kafka answers members still waiting when their coordinator goes away
    /// (`GroupMetadataManager.onUnloaded`) with NOT_COORDINATOR, and a coordinator
    /// operation that timed out with COORDINATOR_NOT_AVAILABLE
    /// (`CoordinatorOperationExceptionHelper`): both retriable by every client, which
    /// looks the coordinator up again and rejoins with the member id it has, so a
    /// member recovers from a lost answer as from a coordinator move.
    fn error(&self) -> ResponseError {
        match self {
            Unanswered::Stopping => ResponseError::NotCoordinator,
            Unanswered::Replaced | Unanswered::TimedOut => ResponseError::CoordinatorNotAvailable,
        }
    }
}

/// Waits for an answer the coordinator completes later, looking at the listener
/// stopping as a parked Fetch does.
fn wait<T>(
    shared: &Shared,
    pending: &Pending<T>,
    within: Duration,
    what: &str,
) -> Result<T, Unanswered> {
    let deadline = Deadline::after(within);
    loop {
        if shared.stopping.load(Ordering::Relaxed) {
            return Err(Unanswered::Stopping);
        }
        match pending.recv_timeout(STOP_CHECK.min(deadline.remaining())) {
            Ok(answer) => return Ok(answer),
            Err(RecvTimeoutError::Timeout) if !deadline.passed() => {}
            Err(RecvTimeoutError::Timeout) => {
                tracing::warn!(request = what, ?within, "the group coordinator did not answer in time: answered COORDINATOR_NOT_AVAILABLE");
                return Err(Unanswered::TimedOut);
            }
            Err(RecvTimeoutError::Disconnected) => {
                tracing::debug!(
                    request = what,
                    "a newer request of the member replaced this one"
                );
                return Err(Unanswered::Replaced);
            }
        }
    }
}

/// The longest a connection waits for the coordinator's answer: `connections.max.idle.ms`,
/// the listener's bound on one request's hold on its thread, on top of the rebalance
/// timeout the request itself asks the coordinator to wait. Kafka has no such bound: a
/// rebalance waits for the group's longest rebalance timeout, and an initial one
/// `group.initial.rebalance.delay.ms` before that, so a member of a group whose others
/// allow very long rebalances may hit it, and then rejoins (see [`Unanswered::error`]).
fn answer_bound(shared: &Shared, rebalance_timeout_ms: i32) -> Duration {
    Duration::from_millis(
        shared.config.connections_max_idle_ms + u64::try_from(rebalance_timeout_ms).unwrap_or(0),
    )
}

/// JoinGroup: every version's fields as the coordinator's one request (v0 has no rebalance
/// timeout: the session timeout is it, as Kafka's `JoinGroupRequest` sets it; v4+ ask new
/// members to get a member id first; v9 lets a static leader skip the assignment). The
/// connection waits for the rebalance to complete.
pub(crate) fn join_group(
    shared: &Shared,
    request: &JoinGroupRequest,
    version: i16,
    caller: &Caller,
) -> JoinGroupResponse {
    let rebalance_timeout_ms = if version == 0 {
        request.session_timeout_ms
    } else {
        request.rebalance_timeout_ms
    };
    let join = JoinRequest {
        group_id: group_id(&request.group_id),
        member_id: request.member_id.to_string(),
        group_instance_id: opt_string(&request.group_instance_id),
        protocol_type: request.protocol_type.to_string(),
        protocols: request
            .protocols
            .iter()
            .map(|p| (p.name.to_string(), p.metadata.to_vec()))
            .collect(),
        session_timeout_ms: request.session_timeout_ms,
        rebalance_timeout_ms,
        client_id: caller.client_id.clone(),
        client_host: caller.host(),
        require_known_member_id: version >= 4,
        supports_skip_assignment: version >= 9,
        reason: opt_string(&request.reason),
    };
    let pending = shared.engine.groups().join_group(join);
    let bound = answer_bound(shared, rebalance_timeout_ms);
    let answer = wait(shared, &pending, bound, "JoinGroup").map_err(|u| u.error());
    join_response(answer, &request.member_id, version)
}

/// The coordinator's answer, or the error the connection answers instead (then the
/// member keeps its id).
fn join_response(
    answer: Result<JoinResponse, ResponseError>,
    member_id: &StrBytes,
    version: i16,
) -> JoinGroupResponse {
    let mut response = JoinGroupResponse::default();
    match answer {
        Ok(answer) => {
            response.error_code = code(answer.error.as_ref());
            response.generation_id = answer.generation_id;
            response.protocol_type = opt_str_bytes(&answer.protocol_type);
            response.protocol_name = opt_str_bytes(&answer.protocol_name);
            response.leader = str_bytes(&answer.leader);
            response.skip_assignment = version >= 9 && answer.skip_assignment;
            response.member_id = str_bytes(&answer.member_id);
            response.members = answer
                .members
                .into_iter()
                .map(|m| {
                    let mut member = JoinGroupResponseMember::default();
                    member.member_id = str_bytes(&m.member_id);
                    member.group_instance_id = opt_str_bytes(&m.group_instance_id);
                    member.metadata = Bytes::from(m.metadata);
                    member
                })
                .collect();
        }
        Err(error) => {
            response.error_code = error.code();
            response.generation_id = -1;
            response.member_id = member_id.clone();
        }
    }
    // The protocol name is nullable from v7 only; Kafka's `JoinGroupResponse` sends ""
    // for none before.
    if version < 7 && response.protocol_name.is_none() {
        response.protocol_name = Some(StrBytes::default());
    }
    response
}

/// SyncGroup: the leader's assignments in, each member's own out once the leader's is
/// stored. v5 must name the protocol type and name (Kafka's
/// `areMandatoryProtocolTypeAndNamePresent`: INCONSISTENT_GROUP_PROTOCOL otherwise).
pub(crate) fn sync_group(
    shared: &Shared,
    request: &SyncGroupRequest,
    version: i16,
) -> SyncGroupResponse {
    let mut response = SyncGroupResponse::default();
    if version >= 5 && (request.protocol_type.is_none() || request.protocol_name.is_none()) {
        response.error_code = ResponseError::InconsistentGroupProtocol.code();
        return response;
    }
    let sync = SyncRequest {
        group_id: group_id(&request.group_id),
        generation_id: request.generation_id,
        member_id: request.member_id.to_string(),
        group_instance_id: opt_string(&request.group_instance_id),
        protocol_type: opt_string(&request.protocol_type),
        protocol_name: opt_string(&request.protocol_name),
        assignments: request
            .assignments
            .iter()
            .map(|a| (a.member_id.to_string(), a.assignment.to_vec()))
            .collect(),
    };
    let pending = shared.engine.groups().sync_group(sync);
    match wait(shared, &pending, answer_bound(shared, 0), "SyncGroup") {
        Ok(SyncResponse {
            error,
            protocol_type,
            protocol_name,
            assignment,
        }) => {
            response.error_code = code(error.as_ref());
            response.protocol_type = opt_str_bytes(&protocol_type);
            response.protocol_name = opt_str_bytes(&protocol_name);
            response.assignment = Bytes::from(assignment);
        }
        Err(unanswered) => response.error_code = unanswered.error().code(),
    }
    response
}

pub(crate) fn heartbeat(shared: &Shared, request: &HeartbeatRequest) -> HeartbeatResponse {
    let outcome = shared.engine.groups().heartbeat(
        &request.group_id.0,
        request.generation_id,
        &request.member_id,
        request.group_instance_id.as_deref(),
    );
    let mut response = HeartbeatResponse::default();
    response.error_code = code(outcome.err().as_ref());
    response
}

/// LeaveGroup: v0-2 name one member by id and get one code; v3+ name several (by id or
/// instance id, v5 with a reason) and get one code each, as Kafka's
/// `LeaveGroupRequest.normalizedData` and `LeaveGroupResponse` shape them.
pub(crate) fn leave_group(
    shared: &Shared,
    request: &LeaveGroupRequest,
    version: i16,
) -> LeaveGroupResponse {
    let members: Vec<LeavingMember> = if version < 3 {
        vec![LeavingMember {
            member_id: request.member_id.to_string(),
            group_instance_id: None,
            reason: None,
        }]
    } else {
        request
            .members
            .iter()
            .map(|m| LeavingMember {
                member_id: m.member_id.to_string(),
                group_instance_id: opt_string(&m.group_instance_id),
                reason: opt_string(&m.reason),
            })
            .collect()
    };
    let outcome = match shared
        .engine
        .groups()
        .leave_group(&group_id(&request.group_id), &members)
    {
        // A group that does not exist: each member is unknown, as Kafka's
        // `GroupCoordinatorService.leaveGroup` answers.
        Err(GroupError::UnknownMemberId) => Ok(members
            .iter()
            .map(|m| (m.member_id.clone(), Some(GroupError::UnknownMemberId)))
            .collect()),
        outcome => outcome,
    };
    let mut response = LeaveGroupResponse::default();
    match outcome {
        Err(e) => response.error_code = group_error_code(&e).code(),
        Ok(outcomes) if version < 3 => {
            response.error_code = code(outcomes.first().and_then(|(_, e)| e.as_ref()));
        }
        Ok(outcomes) => {
            response.members = outcomes
                .into_iter()
                .zip(&members)
                .map(|((member_id, error), asked)| {
                    let mut member = MemberResponse::default();
                    member.member_id = str_bytes(&member_id);
                    member.group_instance_id = opt_str_bytes(&asked.group_instance_id);
                    member.error_code = code(error.as_ref());
                    member
                })
                .collect();
        }
    }
    response
}

/// UNKNOWN_TOPIC_OR_PARTITION unless `partition` of `topic` exists: Kafka's request
/// handlers check it before the coordinator sees a commit or an offset deletion.
fn check_partition(shared: &Shared, topic: &str, partition: i32) -> Option<GroupError> {
    let exists = shared
        .engine
        .topic(topic)
        .is_some_and(|t| u32::try_from(partition).is_ok_and(|p| p < t.partition_count()));
    (!exists).then(|| GroupError::UnknownTopicOrPartition {
        topic: topic.to_string(),
        partition,
    })
}

/// The topics of an OffsetCommit or OffsetDelete answer, each with its (partition, code)s.
type TopicCodes = Vec<(String, Vec<(i32, i16)>)>;

/// The answer to an OffsetCommit or OffsetDelete of `asked` (the request's topics with
/// their partitions, in its order) in Kafka's order, as `KafkaApis` builds it with the
/// response's `Builder`: first the partitions [`check_partition`] refused (in the order
/// met, each under the first entry of its topic), then `merge` of the coordinator's
/// answer for the others (a topic already there gets them after its refused ones, another
/// is added); with none refused, the coordinator's answer as it is, one entry per asked
/// topic with a partition it was asked. `checks` and the coordinator's `outcome` (for the
/// partitions not refused, in order, or its refusal of them all) are as
/// [`partition_codes`] takes them.
fn kafka_answer_order(
    asked: &[(String, Vec<i32>)],
    checks: &[Option<GroupError>],
    outcome: &Result<Vec<Option<GroupError>>, GroupError>,
) -> TopicCodes {
    let codes = partition_codes(checks, outcome);
    let mut refused: TopicCodes = Vec::new();
    let mut coordinated: TopicCodes = Vec::new();
    let mut flat = checks.iter().zip(codes);
    for (name, partitions) in asked {
        let mut valid = Vec::new();
        for (&index, (check, code)) in partitions.iter().zip(flat.by_ref()) {
            if check.is_some() {
                match refused.iter_mut().find(|(n, _)| n == name) {
                    Some((_, list)) => list.push((index, code)),
                    None => refused.push((name.clone(), vec![(index, code)])),
                }
            } else {
                valid.push((index, code));
            }
        }
        if !valid.is_empty() {
            coordinated.push((name.clone(), valid));
        }
    }
    if refused.is_empty() {
        return coordinated;
    }
    for (name, partitions) in coordinated {
        match refused.iter_mut().find(|(n, _)| *n == name) {
            Some((_, list)) => list.extend(partitions),
            None => refused.push((name, partitions)),
        }
    }
    refused
}

/// The response's topics of an OffsetCommit or OffsetDelete from [`kafka_answer_order`]'s.
/// A macro because the two APIs' messages are distinct types with the same fields.
macro_rules! answer_topics {
    ($answer:expr, $topic:ty, $partition:ty) => {
        $answer
            .into_iter()
            .map(|(name, partitions)| {
                let mut topic = <$topic>::default();
                topic.name = topic_name(&name);
                topic.partitions = partitions
                    .into_iter()
                    .map(|(index, code)| {
                        let mut partition = <$partition>::default();
                        partition.partition_index = index;
                        partition.error_code = code;
                        partition
                    })
                    .collect();
                topic
            })
            .collect()
    };
}

/// The codes of partitions, in the request's order: their refusal by
/// [`check_partition`] (those were left out of what the coordinator was asked), else the
/// coordinator's outcome for each of the others in turn, or its refusal of them all.
fn partition_codes(
    checks: &[Option<GroupError>],
    outcome: &Result<Vec<Option<GroupError>>, GroupError>,
) -> Vec<i16> {
    let mut outcomes = outcome.as_deref().unwrap_or_default().iter();
    checks
        .iter()
        .map(|check| match (check, outcome) {
            (Some(refused), _) | (None, Err(refused)) => group_error_code(refused).code(),
            (None, Ok(_)) => code(outcomes.next().and_then(Option::as_ref)),
        })
        .collect()
}

/// The (topic, partitions) a request asks, in its order.
macro_rules! asked_partitions {
    ($request:expr) => {
        $request
            .topics
            .iter()
            .map(|t| {
                (
                    t.name.0.to_string(),
                    t.partitions.iter().map(|p| p.partition_index).collect(),
                )
            })
            .collect::<Vec<(String, Vec<i32>)>>()
    };
}

/// An OffsetCommit's or TxnOffsetCommit's partitions checked (each must exist) and the
/// commit of those that pass, with `generation`: the two requests' partitions have the
/// same fields in types of their own.
macro_rules! checked_commit {
    ($shared:expr, $request:expr, $generation:expr) => {{
        let asked: Vec<(&str, _)> = $request
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |p| (t.name.0.as_str(), p)))
            .collect();
        let checks: Vec<Option<GroupError>> = asked
            .iter()
            .map(|(topic, p)| check_partition($shared, topic, p.partition_index))
            .collect();
        let commit = CommitRequest {
            group_id: group_id(&$request.group_id),
            generation_id: $generation,
            member_id: $request.member_id.to_string(),
            group_instance_id: opt_string(&$request.group_instance_id),
            offsets: asked
                .iter()
                .zip(&checks)
                .filter(|(_, check)| check.is_none())
                .map(|((topic, p), _)| OffsetToCommit {
                    topic: topic.to_string(),
                    partition: p.partition_index,
                    offset: p.committed_offset,
                    leader_epoch: p.committed_leader_epoch,
                    metadata: opt_string(&p.committed_metadata),
                })
                .collect(),
        };
        (checks, commit)
    }};
}

/// OffsetCommit: one code per partition, in Kafka's order ([`kafka_answer_order`]). A
/// group that does not exist is GROUP_ID_NOT_FOUND from v9 and ILLEGAL_GENERATION before,
/// as Kafka's `OffsetMetadataManager.validateOffsetCommit` answers older clients. v2-4's
/// `retention_time_ms` is not kept: `offsets.retention.minutes` applies to every offset.
pub(crate) fn offset_commit(
    shared: &Shared,
    request: &OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    let (checks, commit) = checked_commit!(shared, request, request.generation_id_or_member_epoch);
    // With no partition left Kafka answers without asking the coordinator.
    let outcome = if commit.offsets.is_empty() {
        Ok(Vec::new())
    } else {
        match shared.engine.groups().commit_offsets(&commit) {
            Err(GroupError::GroupIdNotFound { .. }) if version < 9 => {
                Err(GroupError::IllegalGeneration)
            }
            outcome => outcome,
        }
    };
    let answer = kafka_answer_order(&asked_partitions!(request), &checks, &outcome);
    let mut response = OffsetCommitResponse::default();
    response.topics = answer_topics!(
        answer,
        OffsetCommitResponseTopic,
        OffsetCommitResponsePartition
    );
    response
}

/// TxnOffsetCommit: OffsetCommit's checks and answer, the offsets written in the
/// producer's transaction (committed with it). A transaction that does not hold the
/// group's offsets partition (no AddOffsetsToTxn) answers every partition with its code.
pub(crate) fn txn_offset_commit(
    shared: &Shared,
    request: &TxnOffsetCommitRequest,
    version: i16,
) -> TxnOffsetCommitResponse {
    let (checks, commit) = checked_commit!(shared, request, request.generation_id);
    let producer = (request.producer_id.0, request.producer_epoch);
    let outcome = if commit.offsets.is_empty() {
        Ok(Vec::new())
    } else {
        match shared.engine.txn_offset_commit(
            &request.transactional_id.0,
            producer,
            super::txn::client_transaction_version(version, 5),
            &commit,
        ) {
            Ok(outcome) => Ok(outcome),
            Err(TxnOrGroupError::Group(e)) => Err(e),
            Err(TxnOrGroupError::Txn(e)) => {
                let code = super::txn::txn_error_code(&e).code();
                return txn_offset_commit_response(request, code);
            }
        }
    };
    let answer = kafka_answer_order(&asked_partitions!(request), &checks, &outcome);
    let mut response = TxnOffsetCommitResponse::default();
    response.topics = answer_topics!(
        answer,
        TxnOffsetCommitResponseTopic,
        TxnOffsetCommitResponsePartition
    );
    response
}

/// Every asked partition of a TxnOffsetCommit answered with `code`.
fn txn_offset_commit_response(
    request: &TxnOffsetCommitRequest,
    code: i16,
) -> TxnOffsetCommitResponse {
    let answer: TopicCodes = asked_partitions!(request)
        .into_iter()
        .map(|(name, partitions)| (name, partitions.into_iter().map(|p| (p, code)).collect()))
        .collect();
    let mut response = TxnOffsetCommitResponse::default();
    response.topics = answer_topics!(
        answer,
        TxnOffsetCommitResponseTopic,
        TxnOffsetCommitResponsePartition
    );
    response
}

/// The partitions an OffsetFetch asks for by topic, `None` for every committed one.
type AskedOffsets = Option<Vec<(String, Vec<i32>)>>;

/// One group's answer to OffsetFetch, in the shape of v8+ (Kafka builds every version's
/// answer so, then reshapes it for older ones): topics in the order asked, or as
/// committed when every offset is asked for.
fn fetch_group(
    shared: &Shared,
    group: &GroupId,
    asked: AskedOffsets,
    require_stable: bool,
) -> OffsetFetchResponseGroup {
    let partitions: Option<Vec<(String, i32)>> = asked.as_ref().map(|topics| {
        topics
            .iter()
            .flat_map(|(name, indexes)| indexes.iter().map(move |&i| (name.clone(), i)))
            .collect()
    });
    let mut response = OffsetFetchResponseGroup::default();
    response.group_id = group.clone();
    let offsets = shared
        .engine
        .groups()
        .fetch_offsets(&group_id(group), partitions.as_deref());
    let mut by_topic: Vec<(String, Vec<FetchedOffset>)> = Vec::new();
    match asked {
        // One answer per partition asked, in order.
        Some(topics) => {
            let mut offsets = offsets.into_iter();
            for (name, indexes) in topics {
                by_topic.push((name, offsets.by_ref().take(indexes.len()).collect()));
            }
        }
        // Grouped by topic as they come.
        None => {
            for offset in offsets {
                match by_topic.last_mut() {
                    Some((name, list)) if *name == offset.topic => list.push(offset),
                    _ => by_topic.push((offset.topic.clone(), vec![offset])),
                }
            }
        }
    }
    response.topics = by_topic
        .into_iter()
        .map(|(name, offsets)| {
            let mut topic = OffsetFetchResponseTopics::default();
            topic.name = topic_name(&name);
            topic.partitions = offsets
                .into_iter()
                .map(|o| {
                    let mut p = OffsetFetchResponsePartitions::default();
                    p.partition_index = o.partition;
                    if require_stable && o.pending_txn {
                        // KIP-447: a consumer taking the partition over waits for the
                        // transaction of its previous owner to end, rather than start
                        // from an offset that transaction is about to move.
                        p.error_code = ResponseError::UnstableOffsetCommit.code();
                        p.committed_offset = -1;
                        p.committed_leader_epoch = -1;
                        p.metadata = Some(str_bytes(""));
                    } else {
                        p.committed_offset = o.offset;
                        p.committed_leader_epoch = o.leader_epoch;
                        p.metadata = Some(str_bytes(&o.metadata));
                    }
                    p
                })
                .collect();
            topic
        })
        .collect();
    response
}

/// OffsetFetch: v1-7 ask for one group, v8+ for several. Null topics (v2+) ask for every
/// committed offset. A partition without a committed offset is -1 with no error, and an
/// unknown group is such a group, as Kafka answers. With `require_stable` (v7+), a
/// partition with a transaction's offset pending is UNSTABLE_OFFSET_COMMIT (Kafka's
/// `OffsetMetadataManager.fetchOffsets`); without it, the committed offset. v9's member
/// id and epoch are for KIP-848 groups; Kafka's classic groups ignore them, as here.
pub(crate) fn offset_fetch(
    shared: &Shared,
    request: &OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    let mut response = OffsetFetchResponse::default();
    if version >= 8 {
        response.groups = request
            .groups
            .iter()
            .map(|g| {
                let asked = g.topics.as_ref().map(|topics| {
                    topics
                        .iter()
                        .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
                        .collect()
                });
                fetch_group(shared, &g.group_id, asked, request.require_stable)
            })
            .collect();
        return response;
    }
    let asked: AskedOffsets = request.topics.as_ref().map(|topics| {
        topics
            .iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
            .collect()
    });
    // The one group's answer at the top level, as Kafka's `OffsetFetchResponse(groups,
    // version)`. The coordinator has no group-level error to give (every group, the
    // empty id too, is asked as Kafka asks it).
    let topics = fetch_group(shared, &request.group_id, asked, request.require_stable).topics;
    response.topics = topics
        .into_iter()
        .map(|t| {
            let mut topic = OffsetFetchResponseTopic::default();
            topic.name = t.name;
            topic.partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let mut old = OffsetFetchResponsePartition::default();
                    old.partition_index = p.partition_index;
                    old.committed_offset = p.committed_offset;
                    old.committed_leader_epoch = p.committed_leader_epoch;
                    old.metadata = p.metadata;
                    old.error_code = p.error_code;
                    old
                })
                .collect();
            topic
        })
        .collect();
    response
}

/// Every kpfs group is a classic group (Kafka's `Group.GroupType`).
const CLASSIC_GROUP_TYPE: &str = "classic";

/// ListGroups: every group, or those in the states (v4+, any case) and of the types
/// (v5+) asked, as Kafka's `GroupMetadataManager.listGroups` filters them.
pub(crate) fn list_groups(shared: &Shared, request: &ListGroupsRequest) -> ListGroupsResponse {
    let states: Vec<String> = request
        .states_filter
        .iter()
        .map(|s| s.trim().to_lowercase())
        .collect();
    let classic_asked = request.types_filter.is_empty()
        || request
            .types_filter
            .iter()
            .any(|t| t.eq_ignore_ascii_case(CLASSIC_GROUP_TYPE));
    let mut response = ListGroupsResponse::default();
    if !classic_asked {
        return response;
    }
    response.groups = shared
        .engine
        .groups()
        .list_groups()
        .into_iter()
        .filter(|g| states.is_empty() || states.contains(&g.state.name().to_lowercase()))
        .map(|g| {
            let mut listed = ListedGroup::default();
            listed.group_id = GroupId(str_bytes(&g.group_id));
            listed.protocol_type = str_bytes(&g.protocol_type);
            listed.group_state = str_bytes(g.state.name());
            listed.group_type = str_bytes(CLASSIC_GROUP_TYPE);
            listed
        })
        .collect();
    response
}

/// DescribeGroups: each group's state, protocol and members. As Kafka, the protocol and
/// the members' metadata are shown only while the group is Stable, and a group that does
/// not exist is Dead with no members (v0-5), and GROUP_ID_NOT_FOUND too (v6, KIP-1043).
pub(crate) fn describe_groups(
    shared: &Shared,
    request: &DescribeGroupsRequest,
    version: i16,
) -> DescribeGroupsResponse {
    let mut response = DescribeGroupsResponse::default();
    response.groups = request
        .groups
        .iter()
        .map(|id| {
            let description = shared.engine.groups().describe_group(&id.0);
            let mut group = DescribedGroup::default();
            group.group_id = id.clone();
            if description.state == GroupState::Dead && version >= 6 {
                let error = GroupError::GroupIdNotFound {
                    group: id.0.to_string(),
                };
                group.error_code = group_error_code(&error).code();
                group.error_message = Some(str_bytes(&error.to_string()));
                // Kafka names the state too.
                group.group_state = str_bytes(description.state.name());
                return group;
            }
            let stable = description.state == GroupState::Stable;
            group.group_state = str_bytes(description.state.name());
            group.protocol_type = str_bytes(&description.protocol_type);
            if stable {
                group.protocol_data = str_bytes(&description.protocol);
            }
            group.members = description
                .members
                .into_iter()
                .map(|m| {
                    let mut member = DescribedGroupMember::default();
                    member.member_id = str_bytes(&m.member_id);
                    member.group_instance_id = opt_str_bytes(&m.group_instance_id);
                    member.client_id = str_bytes(&m.client_id);
                    member.client_host = str_bytes(&m.client_host);
                    if stable {
                        member.member_metadata = Bytes::from(m.metadata);
                    }
                    member.member_assignment = Bytes::from(m.assignment);
                    member
                })
                .collect();
            if version >= 3 && request.include_authorized_operations {
                group.authorized_operations = AclResource::Group.authorized_operations();
            }
            group
        })
        .collect();
    response
}

/// DeleteGroups: one code per group, each named once (Kafka drops repeats).
pub(crate) fn delete_groups(
    shared: &Shared,
    request: &DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    let mut seen = HashSet::new();
    let ids: Vec<String> = request
        .groups_names
        .iter()
        .filter(|id| seen.insert(id.0.as_str()))
        .map(|id| id.0.to_string())
        .collect();
    let outcomes = shared.engine.groups().delete_groups(&ids);
    let mut response = DeleteGroupsResponse::default();
    response.results = ids
        .iter()
        .zip(outcomes)
        .map(|(id, error)| {
            let mut result = DeletableGroupResult::default();
            result.group_id = GroupId(str_bytes(id));
            result.error_code = code(error.as_ref());
            result
        })
        .collect();
    response
}

/// OffsetDelete: the group's committed offsets of the named partitions, one code each in
/// Kafka's order ([`kafka_answer_order`]); a topic the group consumes is
/// GROUP_SUBSCRIBED_TO_TOPIC.
pub(crate) fn offset_delete(
    shared: &Shared,
    request: &OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    let asked: Vec<(String, i32)> = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.0.to_string(), p.partition_index))
        })
        .collect();
    let checks: Vec<Option<GroupError>> = asked
        .iter()
        .map(|(topic, partition)| check_partition(shared, topic, *partition))
        .collect();
    let known: Vec<(String, i32)> = asked
        .into_iter()
        .zip(&checks)
        .filter_map(|(p, check)| check.is_none().then_some(p))
        .collect();
    let mut response = OffsetDeleteResponse::default();
    let outcome = shared
        .engine
        .groups()
        .delete_offsets(&group_id(&request.group_id), &known);
    if let Err(e) = &outcome {
        response.error_code = group_error_code(e).code();
        return response;
    }
    let answer = kafka_answer_order(&asked_partitions!(request), &checks, &outcome);
    response.topics = answer_topics!(
        answer,
        OffsetDeleteResponseTopic,
        OffsetDeleteResponsePartition
    );
    response
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
    use std::sync::Arc;

    use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
    use kafka_protocol::messages::leave_group_request::MemberIdentity;
    use parking_lot::Mutex;

    use super::*;
    use crate::engine::{Engine, ManualClock};
    use crate::kafka::ListenerConfig;

    fn shared(dir: &std::path::Path) -> Shared {
        let engine = Engine::open_for_test(dir, Arc::new(ManualClock::new(1_000_000)));
        Shared {
            engine: Arc::new(engine),
            config: ListenerConfig {
                bind: "127.0.0.1:0".parse().unwrap(),
                advertised_host: "kpfs.example".into(),
                advertised_port: 9092,
                node_id: 7,
                cluster_id: "c".into(),
                socket_request_max_bytes: 1 << 20,
                max_connections: 10,
                connections_max_idle_ms: 60_000,
                auto_create_topics: true,
                max_request_partition_size_limit: 2000,
                delete_topic_enable: true,
            },
            stopping: AtomicBool::new(false),
            sockets: Mutex::new(HashMap::new()),
            threads: Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
            next_id: AtomicU64::new(0),
            fetch_sessions: Default::default(),
        }
    }

    fn caller(peer: &str) -> Caller {
        Caller {
            client_id: "app".into(),
            peer: peer.parse().unwrap(),
        }
    }

    #[test]
    fn client_hosts_are_written_as_javas_inet_address() {
        assert_eq!(caller("127.0.0.1:5000").host(), "/127.0.0.1");
        assert_eq!(caller("[::1]:5000").host(), "/0:0:0:0:0:0:0:1");
        assert_eq!(caller("[::ffff:10.0.0.2]:5000").host(), "/10.0.0.2");
        assert_eq!(caller("[fe80::1%3]:5000").host(), "/fe80:0:0:0:0:0:0:1%3");
    }

    fn node() -> Result<CoordinatorNode, String> {
        Ok(CoordinatorNode {
            node_id: 7,
            host: "kpfs.example".into(),
            port: 9092,
        })
    }

    fn find(version: i16, key_type: i8) -> FindCoordinatorRequest {
        let mut request = FindCoordinatorRequest::default();
        request.key_type = key_type;
        if version < 4 {
            request.key = str_bytes("g");
        } else {
            request.coordinator_keys = vec![str_bytes("g"), str_bytes("h")];
        }
        request
    }

    #[test]
    fn find_coordinator_names_this_node_in_each_versions_shape() {
        let old = find_coordinator(&find(2, GROUP_KEY_TYPE), 2, |_| node());
        assert_eq!(
            (old.error_code, old.node_id.0, old.host.as_str(), old.port),
            (0, 7, "kpfs.example", 9092)
        );
        assert_eq!(old.error_message.as_deref(), Some("NONE"));
        let batched = find_coordinator(&find(4, GROUP_KEY_TYPE), 4, |_| node());
        let keys: Vec<(&str, i32, i16)> = batched
            .coordinators
            .iter()
            .map(|c| (c.key.as_str(), c.node_id.0, c.error_code))
            .collect();
        assert_eq!(keys, vec![("g", 7, 0), ("h", 7, 0)]);
        // Kafka leaves the message at its default, "".
        assert_eq!(batched.coordinators[0].error_message.as_deref(), Some(""));
    }

    #[test]
    fn find_coordinator_refusals_say_why() {
        let unavailable = |_| Err("disk full".to_string());
        let old = find_coordinator(&find(1, GROUP_KEY_TYPE), 1, unavailable);
        assert_eq!(
            (old.error_code, old.node_id.0, old.port),
            (ResponseError::CoordinatorNotAvailable.code(), -1, -1)
        );
        assert_eq!(old.error_message.as_deref(), Some("disk full"));
        for version in [1, 3, 4, 6] {
            let asked = std::cell::Cell::new(None);
            let found = find_coordinator(&find(version, TRANSACTION_KEY_TYPE), version, |kind| {
                asked.set(Some(kind));
                node()
            });
            assert_eq!(asked.get(), Some(CoordinatorKind::Transaction));
            let code = if version < 4 {
                found.error_code
            } else {
                found.coordinators[0].error_code
            };
            assert_eq!(
                code, 0,
                "v{version}: a transactional id's coordinator is this node"
            );
        }
        let cases = [
            (SHARE_KEY_TYPE, ResponseError::InvalidRequest),
            (9, ResponseError::InvalidRequest),
        ];
        for (key_type, code) in cases {
            let looked_up = std::cell::Cell::new(false);
            let response = find_coordinator(&find(6, key_type), 6, |_| {
                looked_up.set(true);
                node()
            });
            assert!(
                !looked_up.get(),
                "key type {key_type} looked for a group coordinator"
            );
            for c in &response.coordinators {
                assert_eq!((c.error_code, c.node_id.0), (code.code(), -1));
                assert!(c.error_message.is_some());
            }
        }
    }

    #[test]
    fn join_answers_fit_each_version() {
        let answer = JoinResponse {
            error: None,
            generation_id: 3,
            protocol_type: Some("consumer".into()),
            protocol_name: None,
            leader: "l".into(),
            member_id: "m".into(),
            members: Vec::new(),
            skip_assignment: true,
        };
        // Before v7 the protocol name is not nullable; before v9 there is no skip flag.
        let m = str_bytes("m");
        let v6 = join_response(Ok(answer.clone()), &m, 6);
        assert_eq!(v6.protocol_name.as_deref(), Some(""));
        assert!(!v6.skip_assignment);
        let v9 = join_response(Ok(answer), &m, 9);
        assert_eq!(v9.protocol_name, None);
        assert!(v9.skip_assignment);
        let lost = join_response(Err(ResponseError::NotCoordinator), &m, 0);
        assert_eq!(
            (lost.error_code, lost.generation_id, lost.member_id.as_str()),
            (16, -1, "m")
        );
        assert_eq!(lost.protocol_name.as_deref(), Some(""));
    }

    #[test]
    fn answers_put_refused_partitions_first_as_kafkas_response_builder() {
        let unknown = || {
            Some(GroupError::UnknownTopicOrPartition {
                topic: "x".into(),
                partition: 0,
            })
        };
        let asked = vec![
            ("t".to_string(), vec![0]),
            ("x".to_string(), vec![0]),
            ("t".to_string(), vec![1, 2]),
        ];
        let checks = [None, unknown(), unknown(), None];
        let outcome = Ok(vec![None, Some(GroupError::GroupSubscribedToTopic)]);
        assert_eq!(
            kafka_answer_order(&asked, &checks, &outcome),
            vec![
                ("x".to_string(), vec![(0, 3)]),
                ("t".to_string(), vec![(1, 3), (0, 0), (2, 86)]),
            ]
        );
        // None refused: the coordinator's answer, an entry per asked topic.
        let asked = vec![("t".to_string(), vec![0]), ("t".to_string(), vec![1])];
        assert_eq!(
            kafka_answer_order(&asked, &[None, None], &Ok(vec![None, None])),
            vec![
                ("t".to_string(), vec![(0, 0)]),
                ("t".to_string(), vec![(1, 0)]),
            ]
        );
    }

    #[test]
    fn partition_codes_merge_unknown_partitions_with_the_coordinators_outcomes() {
        let unknown = GroupError::UnknownTopicOrPartition {
            topic: "x".into(),
            partition: 0,
        };
        let checks = [None, Some(unknown), None];
        let outcomes = Ok(vec![None, Some(GroupError::GroupSubscribedToTopic)]);
        assert_eq!(partition_codes(&checks, &outcomes), vec![0, 3, 86]);
        let refused = Err(GroupError::RebalanceInProgress);
        assert_eq!(partition_codes(&checks, &refused), vec![27, 3, 27]);
    }

    fn join_request(version: i16) -> JoinGroupRequest {
        let mut protocol = JoinGroupRequestProtocol::default();
        protocol.name = str_bytes("range");
        let mut request = JoinGroupRequest::default();
        request.group_id = GroupId(str_bytes("g"));
        request.session_timeout_ms = 10_000;
        request.rebalance_timeout_ms = if version == 0 { -1 } else { 40_000 };
        request.protocol_type = str_bytes("consumer");
        request.protocols = vec![protocol];
        request
    }

    #[test]
    fn a_join_records_the_caller_and_v0s_rebalance_timeout_is_its_session_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let shared = shared(dir.path());
        shared.engine.ensure_offsets_topic().unwrap();
        // A stopping listener answers a waiting join at once: NOT_COORDINATOR, which
        // sends the client to look for the coordinator and rejoin.
        shared.stopping.store(true, Ordering::SeqCst);
        let v0 = join_group(&shared, &join_request(0), 0, &caller("127.0.0.1:1"));
        assert_eq!(v0.error_code, ResponseError::NotCoordinator.code());
        assert_eq!(v0.protocol_name.as_deref(), Some(""));
        let v3 = join_group(&shared, &join_request(3), 3, &caller("[::1]:2"));
        assert_eq!(v3.error_code, ResponseError::NotCoordinator.code());
        let members = shared.engine.groups().describe_group("g").members;
        let seen: Vec<(i32, &str, &str)> = members
            .iter()
            .map(|m| {
                (
                    m.rebalance_timeout_ms,
                    m.client_id.as_str(),
                    m.client_host.as_str(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            vec![
                (10_000, "app", "/127.0.0.1"),
                (40_000, "app", "/0:0:0:0:0:0:0:1")
            ]
        );
    }

    #[test]
    fn leave_answers_one_code_before_v3_and_one_per_member_after() {
        let dir = tempfile::tempdir().unwrap();
        let shared = shared(dir.path());
        let mut request = LeaveGroupRequest::default();
        request.group_id = GroupId(str_bytes(""));
        request.member_id = str_bytes("m");
        let v0 = leave_group(&shared, &request, 0);
        assert_eq!(v0.error_code, ResponseError::InvalidGroupId.code());
        request.group_id = GroupId(str_bytes("g"));
        let mut member = MemberIdentity::default();
        member.member_id = str_bytes("m");
        member.group_instance_id = Some(str_bytes("i"));
        request.members = vec![member];
        let v3 = leave_group(&shared, &request, 3);
        assert_eq!(v3.error_code, 0);
        let members: Vec<(&str, Option<&str>, i16)> = v3
            .members
            .iter()
            .map(|m| {
                (
                    m.member_id.as_str(),
                    m.group_instance_id.as_deref(),
                    m.error_code,
                )
            })
            .collect();
        assert_eq!(
            members,
            vec![("m", Some("i"), ResponseError::UnknownMemberId.code())]
        );
    }
}
