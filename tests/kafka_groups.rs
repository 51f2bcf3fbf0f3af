//! The group APIs over a real socket on 127.0.0.1, with kafka-protocol's messages as the
//! client: FindCoordinator, a two-member group through join, sync, heartbeat, commit,
//! fetch and leave at the oldest and newest versions served, and Kafka's refusals. The
//! engine's clock is manual and nothing ticks the coordinator but the test: a rebalance
//! completes when the test moves time past `group.initial.rebalance.delay.ms` and ticks.

mod common;

use std::io::Write;
use std::net::SocketAddr;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::kafka::{batch, capture_log, logged_about, name, produce, Broker, Client};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    DeleteGroupsRequest, DeleteTopicsRequest, DescribeGroupsRequest, DescribeGroupsResponse,
    EndTxnRequest, FindCoordinatorRequest, GroupId, HeartbeatRequest, InitProducerIdRequest,
    JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, ListGroupsRequest, MetadataRequest,
    OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest, ProducerId, SyncGroupRequest,
    SyncGroupResponse, TransactionalId, TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::StrBytes;
use kpfs::engine::groups::GroupState;

/// Kafka's default `group.initial.rebalance.delay.ms`.
const DELAY_MS: i64 = 3_000;
const GROUP: &str = "g";
const SESSION_TIMEOUT_MS: i32 = 30_000;

// Kafka's error codes.
const OFFSET_METADATA_TOO_LARGE: i16 = 12;
const INVALID_TOPIC_EXCEPTION: i16 = 17;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const ILLEGAL_GENERATION: i16 = 22;
const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
const INVALID_GROUP_ID: i16 = 24;
const UNKNOWN_MEMBER_ID: i16 = 25;
const INVALID_SESSION_TIMEOUT: i16 = 26;
const REBALANCE_IN_PROGRESS: i16 = 27;
const INVALID_REQUEST: i16 = 42;
const NON_EMPTY_GROUP: i16 = 68;
const GROUP_ID_NOT_FOUND: i16 = 69;
const MEMBER_ID_REQUIRED: i16 = 79;
const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn group_id(s: &str) -> GroupId {
    GroupId(text(s))
}

/// Kafka's ConsumerProtocolSubscription v0 of `topics`.
fn subscription(topics: &[&str]) -> Bytes {
    let mut b = vec![0, 0];
    b.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for t in topics {
        b.extend_from_slice(&(t.len() as i16).to_be_bytes());
        b.extend_from_slice(t.as_bytes());
    }
    b.extend_from_slice(&(-1i32).to_be_bytes());
    Bytes::from(b)
}

/// Kafka's ConsumerProtocolAssignment v0: partition 0 of `topic`.
fn assignment(topic: &str) -> Bytes {
    let mut b = vec![0, 0, 0, 0, 0, 1];
    b.extend_from_slice(&(topic.len() as i16).to_be_bytes());
    b.extend_from_slice(topic.as_bytes());
    b.extend_from_slice(&1i32.to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes());
    Bytes::from(b)
}

/// Polls `done` until it holds or 20 s pass.
#[expect(
    clippy::disallowed_methods,
    reason = "requests reach the coordinator over real sockets, in real time: polled against a deadline"
)]
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The versions of one pass through a group's life.
#[derive(Clone, Copy, Debug)]
struct Versions {
    find: i16,
    join: i16,
    sync: i16,
    heartbeat: i16,
    leave: i16,
    commit: i16,
    fetch: i16,
    describe: i16,
    list: i16,
    delete: i16,
}

const OLDEST: Versions = Versions {
    find: 0,
    join: 0,
    sync: 0,
    heartbeat: 0,
    leave: 0,
    commit: 2,
    fetch: 1,
    describe: 0,
    list: 0,
    delete: 0,
};

const NEWEST: Versions = Versions {
    find: 6,
    join: 9,
    sync: 5,
    heartbeat: 4,
    leave: 5,
    commit: 9,
    fetch: 9,
    describe: 6,
    list: 5,
    delete: 2,
};

fn join_request(version: i16, member_id: &str) -> JoinGroupRequest {
    let mut protocol = JoinGroupRequestProtocol::default();
    protocol.name = text("range");
    protocol.metadata = subscription(&["t"]);
    let mut request = JoinGroupRequest::default();
    request.group_id = group_id(GROUP);
    request.session_timeout_ms = SESSION_TIMEOUT_MS;
    request.rebalance_timeout_ms = 60_000;
    request.member_id = text(member_id);
    request.protocol_type = text("consumer");
    request.protocols = vec![protocol];
    if version >= 8 {
        request.reason = Some(text("a test joins"));
    }
    request
}

/// A JoinGroup on a connection of its own: the answer comes when the rebalance does.
fn join_in_background(
    addr: SocketAddr,
    version: i16,
    member_id: &str,
) -> JoinHandle<JoinGroupResponse> {
    let request = join_request(version, member_id);
    std::thread::spawn(move || Client::connect(addr).send(version, &request))
}

/// A new member's join: from v4 through MEMBER_ID_REQUIRED and the member id it hands
/// out, before that straight in (the member id comes with the answer).
fn new_member(broker: &Broker, client: &mut Client, version: i16) -> JoinHandle<JoinGroupResponse> {
    let member_id = if version >= 4 {
        let first = client.send(version, &join_request(version, ""));
        assert_eq!(first.error_code, MEMBER_ID_REQUIRED, "v{version}");
        assert!(!first.member_id.is_empty());
        first.member_id.to_string()
    } else {
        String::new()
    };
    let members = broker.engine.groups().describe_group(GROUP).members.len();
    let pending = join_in_background(broker.addr(), version, &member_id);
    wait_until("the join to reach the coordinator", || {
        broker.engine.groups().describe_group(GROUP).members.len() > members
    });
    pending
}

/// Moves time past the initial rebalance delay (extended while members join) and ticks
/// until the rebalance under way completes.
fn complete_rebalance(broker: &Broker) {
    for _ in 0..10 {
        if broker.engine.groups().describe_group(GROUP).state != GroupState::PreparingRebalance {
            return;
        }
        broker.clock.advance(DELAY_MS);
        broker.engine.groups().tick();
    }
    panic!("the rebalance did not complete");
}

fn sync_request(
    version: i16,
    generation: i32,
    member_id: &str,
    assignments: &[(&str, Bytes)],
) -> SyncGroupRequest {
    let mut request = SyncGroupRequest::default();
    request.group_id = group_id(GROUP);
    request.generation_id = generation;
    request.member_id = text(member_id);
    if version >= 5 {
        request.protocol_type = Some(text("consumer"));
        request.protocol_name = Some(text("range"));
    }
    request.assignments = assignments
        .iter()
        .map(|(member, bytes)| {
            let mut a = SyncGroupRequestAssignment::default();
            a.member_id = text(member);
            a.assignment = bytes.clone();
            a
        })
        .collect();
    request
}

fn heartbeat(client: &mut Client, version: i16, generation: i32, member_id: &str) -> i16 {
    let mut request = HeartbeatRequest::default();
    request.group_id = group_id(GROUP);
    request.generation_id = generation;
    request.member_id = text(member_id);
    client.send(version, &request).error_code
}

fn commit_request(generation: i32, member_id: &str, offset: i64) -> OffsetCommitRequest {
    let mut p = OffsetCommitRequestPartition::default();
    p.partition_index = 0;
    p.committed_offset = offset;
    p.committed_leader_epoch = 0;
    p.committed_metadata = Some(text("checkpoint"));
    let mut t = OffsetCommitRequestTopic::default();
    t.name = name("t");
    t.partitions = vec![p];
    let mut request = OffsetCommitRequest::default();
    request.group_id = group_id(GROUP);
    request.generation_id_or_member_epoch = generation;
    request.member_id = text(member_id);
    request.topics = vec![t];
    request
}

fn commit(client: &mut Client, version: i16, generation: i32, member_id: &str, offset: i64) -> i16 {
    let response = client.send(version, &commit_request(generation, member_id, offset));
    response.topics[0].partitions[0].error_code
}

/// OffsetFetch of `group`'s `topics` (all partitions 0; `None`: every committed offset):
/// (group error, [(topic, offset, metadata, error)]).
fn fetch_offsets(
    client: &mut Client,
    version: i16,
    group: &str,
    topics: Option<&[&str]>,
) -> (i16, Vec<(String, i64, String, i16)>) {
    let mut request = OffsetFetchRequest::default();
    if version >= 8 {
        let mut g = OffsetFetchRequestGroup::default();
        g.group_id = group_id(group);
        g.topics = topics.map(|topics| {
            topics
                .iter()
                .map(|t| {
                    let mut topic = OffsetFetchRequestTopics::default();
                    topic.name = name(t);
                    topic.partition_indexes = vec![0];
                    topic
                })
                .collect()
        });
        request.groups = vec![g];
        let response = client.send(version, &request);
        let g = &response.groups[0];
        assert_eq!(g.group_id.0.as_str(), group);
        let offsets = g
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| {
                    let metadata = p.metadata.as_deref().unwrap_or_default().to_string();
                    (
                        t.name.0.to_string(),
                        p.committed_offset,
                        metadata,
                        p.error_code,
                    )
                })
            })
            .collect();
        (g.error_code, offsets)
    } else {
        request.group_id = group_id(group);
        request.topics = topics.map(|topics| {
            topics
                .iter()
                .map(|t| {
                    let mut topic = OffsetFetchRequestTopic::default();
                    topic.name = name(t);
                    topic.partition_indexes = vec![0];
                    topic
                })
                .collect()
        });
        let response = client.send(version, &request);
        let offsets = response
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| {
                    let metadata = p.metadata.as_deref().unwrap_or_default().to_string();
                    (
                        t.name.0.to_string(),
                        p.committed_offset,
                        metadata,
                        p.error_code,
                    )
                })
            })
            .collect();
        (response.error_code, offsets)
    }
}

fn leave(client: &mut Client, version: i16, member_id: &str) -> i16 {
    let mut request = LeaveGroupRequest::default();
    request.group_id = group_id(GROUP);
    if version < 3 {
        request.member_id = text(member_id);
        return client.send(version, &request).error_code;
    }
    let mut member = MemberIdentity::default();
    member.member_id = text(member_id);
    if version >= 5 {
        member.reason = Some(text("the test is done with it"));
    }
    request.members = vec![member];
    let response = client.send(version, &request);
    assert_eq!(response.error_code, 0);
    assert_eq!(response.members.len(), 1);
    assert_eq!(response.members[0].member_id.as_str(), member_id);
    response.members[0].error_code
}

fn describe(client: &mut Client, version: i16, group: &str) -> DescribeGroupsResponse {
    let mut request = DescribeGroupsRequest::default();
    request.groups = vec![group_id(group)];
    request.include_authorized_operations = version >= 3;
    client.send(version, &request)
}

fn delete_group(client: &mut Client, version: i16, group: &str) -> i16 {
    let mut request = DeleteGroupsRequest::default();
    request.groups_names = vec![group_id(group), group_id(group)];
    let response = client.send(version, &request);
    assert_eq!(
        response.results.len(),
        1,
        "a group named twice is deleted once"
    );
    response.results[0].error_code
}

fn delete_offsets(client: &mut Client, topics: &[&str]) -> (i16, Vec<i16>) {
    let mut request = OffsetDeleteRequest::default();
    request.group_id = group_id(GROUP);
    request.topics = topics
        .iter()
        .map(|t| {
            let mut topic = OffsetDeleteRequestTopic::default();
            topic.name = name(t);
            topic.partitions = vec![OffsetDeleteRequestPartition::default()];
            topic
        })
        .collect();
    let response = client.send(0, &request);
    let codes = response
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect();
    (response.error_code, codes)
}

fn find_group_coordinator(client: &mut Client, version: i16, key: &str) -> (i16, i32, String, i32) {
    let mut request = FindCoordinatorRequest::default();
    if version < 4 {
        request.key = text(key);
    } else {
        request.coordinator_keys = vec![text(key)];
    }
    let response = client.send(version, &request);
    if version < 4 {
        (
            response.error_code,
            response.node_id.0,
            response.host.to_string(),
            response.port,
        )
    } else {
        let c = &response.coordinators[0];
        assert_eq!(c.key.as_str(), key);
        (c.error_code, c.node_id.0, c.host.to_string(), c.port)
    }
}

/// Two members share the group until one leaves and the other takes over, at `v`'s
/// versions: every answer as Kafka's, and the group's view as `.kpfs/groups` shows it.
fn a_group_of_two(v: Versions) {
    let broker = Broker::start_with(|c| c.advertised_port = 19092);
    broker.engine.create_topic("t", 1).unwrap();
    let mut client = broker.client();

    let (code, node, host, port) = find_group_coordinator(&mut client, v.find, GROUP);
    assert_eq!(
        (code, node, host.as_str(), port),
        (0, 1, "127.0.0.1", 19092)
    );

    let join_a = new_member(&broker, &mut client, v.join);
    let join_b = new_member(&broker, &mut client, v.join);
    complete_rebalance(&broker);
    let (a, b) = (join_a.join().unwrap(), join_b.join().unwrap());
    assert_eq!((a.error_code, b.error_code), (0, 0));
    assert_eq!(a.generation_id, 1);
    assert_eq!(a.protocol_name.as_deref(), Some("range"));
    if v.join >= 7 {
        assert_eq!(a.protocol_type.as_deref(), Some("consumer"));
    }
    assert_eq!(a.leader, a.member_id, "the first member leads");
    assert_eq!(b.leader, a.member_id);
    assert_eq!(a.members.len(), 2, "the leader sees every member");
    assert!(b.members.is_empty());
    assert_eq!(a.members[1].metadata, subscription(&["t"]));
    let (a, b) = (a.member_id.to_string(), b.member_id.to_string());

    // The follower's SyncGroup waits for the leader's assignment.
    let follower = {
        let request = sync_request(v.sync, 1, &b, &[]);
        let addr = broker.addr();
        std::thread::spawn(move || Client::connect(addr).send(v.sync, &request))
    };
    wait_until("the follower's SyncGroup", || {
        broker.engine.groups().describe_group(GROUP).state == GroupState::CompletingRebalance
    });
    let leader: SyncGroupResponse = client.send(
        v.sync,
        &sync_request(
            v.sync,
            1,
            &a,
            &[(&a, assignment("t")), (&b, assignment("u"))],
        ),
    );
    let follower = follower.join().unwrap();
    assert_eq!((leader.error_code, follower.error_code), (0, 0));
    assert_eq!(leader.assignment, assignment("t"));
    assert_eq!(follower.assignment, assignment("u"));
    if v.sync >= 5 {
        assert_eq!(follower.protocol_name.as_deref(), Some("range"));
        assert_eq!(follower.protocol_type.as_deref(), Some("consumer"));
    }
    assert_eq!(heartbeat(&mut client, v.heartbeat, 1, &a), 0);
    assert_eq!(heartbeat(&mut client, v.heartbeat, 1, &b), 0);
    assert_eq!(
        heartbeat(&mut client, v.heartbeat, 2, &b),
        ILLEGAL_GENERATION
    );
    assert_eq!(
        heartbeat(&mut client, v.heartbeat, 1, "stranger"),
        UNKNOWN_MEMBER_ID
    );

    // What the group looks like to kafka-consumer-groups.sh.
    let described = describe(&mut client, v.describe, GROUP);
    let g = &described.groups[0];
    assert_eq!(g.error_code, 0);
    assert_eq!(g.group_state.as_str(), "Stable");
    assert_eq!(g.protocol_type.as_str(), "consumer");
    assert_eq!(g.protocol_data.as_str(), "range");
    assert_eq!(g.members.len(), 2);
    for m in &g.members {
        assert_eq!(m.client_id.as_str(), "kpfs-test");
        assert_eq!(m.client_host.as_str(), "/127.0.0.1");
        assert_eq!(m.member_metadata, subscription(&["t"]));
    }
    let of = |id: &str| {
        g.members
            .iter()
            .find(|m| m.member_id.as_str() == id)
            .unwrap()
    };
    assert_eq!(of(&a).member_assignment, assignment("t"));
    assert_eq!(of(&b).member_assignment, assignment("u"));
    if v.describe >= 3 {
        // Every operation on a group (no authorizer): READ, DELETE, DESCRIBE,
        // DESCRIBE_CONFIGS, ALTER_CONFIGS.
        assert_eq!(g.authorized_operations, 3400);
    }
    let listed = client.send(v.list, &ListGroupsRequest::default());
    assert_eq!(listed.groups.len(), 1);
    assert_eq!(listed.groups[0].group_id.0.as_str(), GROUP);
    assert_eq!(listed.groups[0].protocol_type.as_str(), "consumer");
    if v.list >= 4 {
        assert_eq!(listed.groups[0].group_state.as_str(), "Stable");
    }

    // Commits by the members, and what they fetch back.
    assert_eq!(commit(&mut client, v.commit, 1, &a, 5), 0);
    assert_eq!(commit(&mut client, v.commit, 0, &a, 6), ILLEGAL_GENERATION);
    let (code, offsets) = fetch_offsets(&mut client, v.fetch, GROUP, Some(&["t", "u"]));
    assert_eq!(code, 0);
    assert_eq!(
        offsets,
        vec![
            ("t".into(), 5, "checkpoint".into(), 0),
            ("u".into(), -1, String::new(), 0)
        ]
    );
    if v.fetch >= 2 {
        let (code, every) = fetch_offsets(&mut client, v.fetch, GROUP, None);
        assert_eq!(
            (code, every),
            (0, vec![("t".into(), 5, "checkpoint".into(), 0)])
        );
    }

    // A group with members is not deleted, nor are offsets of a topic it consumes.
    assert_eq!(delete_group(&mut client, v.delete, GROUP), NON_EMPTY_GROUP);
    assert_eq!(
        delete_offsets(&mut client, &["t"]),
        (0, vec![GROUP_SUBSCRIBED_TO_TOPIC])
    );

    // a leaves: b is told to rejoin, rejoins alone and leads.
    assert_eq!(leave(&mut client, v.leave, &a), 0);
    assert_eq!(
        heartbeat(&mut client, v.heartbeat, 1, &b),
        REBALANCE_IN_PROGRESS
    );
    // The last member to rejoin completes the join phase: no timer needed.
    let rejoin = join_in_background(broker.addr(), v.join, &b);
    wait_until("the rejoin", || {
        broker.engine.groups().describe_group(GROUP).state == GroupState::CompletingRebalance
    });
    let rejoined = rejoin.join().unwrap();
    assert_eq!(rejoined.error_code, 0);
    assert_eq!(rejoined.generation_id, 2);
    assert_eq!(rejoined.leader.as_str(), b);
    let synced = client.send(
        v.sync,
        &sync_request(v.sync, 2, &b, &[(&b, assignment("t"))]),
    );
    assert_eq!(synced.error_code, 0);
    assert_eq!(commit(&mut client, v.commit, 2, &b, 7), 0);
    let (_, offsets) = fetch_offsets(&mut client, v.fetch, GROUP, Some(&["t"]));
    assert_eq!(offsets[0].1, 7, "b takes over from a's commits");

    // b leaves: the group is empty, its offsets can go, then the group.
    assert_eq!(leave(&mut client, v.leave, &b), 0);
    let g = &describe(&mut client, v.describe, GROUP).groups[0];
    assert_eq!((g.group_state.as_str(), g.members.len()), ("Empty", 0));
    assert_eq!(delete_offsets(&mut client, &["t"]), (0, vec![0]));
    let (_, offsets) = fetch_offsets(&mut client, v.fetch, GROUP, Some(&["t"]));
    assert_eq!(offsets[0].1, -1);
    assert_eq!(delete_group(&mut client, v.delete, GROUP), 0);
    assert_eq!(
        delete_group(&mut client, v.delete, GROUP),
        GROUP_ID_NOT_FOUND
    );
    let g = &describe(&mut client, v.describe, GROUP).groups[0];
    if v.describe >= 6 {
        assert_eq!(g.error_code, GROUP_ID_NOT_FOUND);
        assert_eq!(g.error_message.as_deref(), Some("Group g not found."));
    } else {
        assert_eq!((g.error_code, g.group_state.as_str()), (0, "Dead"));
    }
}

#[test]
fn a_group_of_two_at_the_oldest_versions() {
    a_group_of_two(OLDEST);
}

#[test]
fn a_group_of_two_at_the_newest_versions() {
    a_group_of_two(NEWEST);
}

#[test]
fn join_refusals_are_kafkas() {
    let broker = Broker::start_configured(&[("group.max.session.timeout.ms", "60000")], |_| {});
    let mut client = broker.client();
    find_group_coordinator(&mut client, 6, GROUP);
    for version in 0..=9 {
        // v4+ hand a new member its id first; older versions let it straight in.
        if version >= 4 {
            let first = client.send(version, &join_request(version, ""));
            assert_eq!(first.error_code, MEMBER_ID_REQUIRED, "v{version}");
            assert!(
                first.member_id.starts_with("kpfs-test-"),
                "{:?}",
                first.member_id
            );
            assert_eq!(first.generation_id, -1);
        }
        for timeout in [5_999, 60_001] {
            let mut request = join_request(version, "");
            request.session_timeout_ms = timeout;
            let response = client.send(version, &request);
            assert_eq!(
                response.error_code, INVALID_SESSION_TIMEOUT,
                "v{version} {timeout}"
            );
        }
        let mut request = join_request(version, "");
        request.group_id = group_id("");
        assert_eq!(
            client.send(version, &request).error_code,
            INVALID_GROUP_ID,
            "v{version}"
        );
        let response = client.send(version, &join_request(version, "no-such-member"));
        assert_eq!(response.error_code, UNKNOWN_MEMBER_ID, "v{version}");
        assert_eq!(response.member_id.as_str(), "no-such-member");
    }
    // An empty group id, as Kafka's GroupCoordinatorService refuses it.
    let mut request = sync_request(3, 1, "m", &[]);
    request.group_id = group_id("");
    assert_eq!(client.send(3, &request).error_code, INVALID_GROUP_ID);
    let mut request = HeartbeatRequest::default();
    request.member_id = text("m");
    assert_eq!(client.send(4, &request).error_code, INVALID_GROUP_ID);
    let mut request = LeaveGroupRequest::default();
    request.member_id = text("m");
    assert_eq!(client.send(2, &request).error_code, INVALID_GROUP_ID);
    let request = OffsetDeleteRequest::default();
    assert_eq!(client.send(0, &request).error_code, INVALID_GROUP_ID);
    // SyncGroup v5 must name the protocol.
    let mut request = sync_request(5, 1, "m", &[]);
    request.protocol_name = None;
    assert_eq!(
        client.send(5, &request).error_code,
        INCONSISTENT_GROUP_PROTOCOL
    );
}

#[test]
fn offsets_of_unknown_groups_and_topics() {
    let broker = Broker::start();
    broker.engine.create_topic("t", 1).unwrap();
    let mut client = broker.client();
    find_group_coordinator(&mut client, 6, GROUP);
    // An unknown group has nothing committed: -1 and no error, as Kafka answers.
    for version in 1..=9 {
        let (code, offsets) = fetch_offsets(&mut client, version, "nobody", Some(&["t", "x"]));
        assert_eq!(code, 0, "v{version}");
        assert_eq!(
            offsets,
            vec![
                ("t".into(), -1, String::new(), 0),
                ("x".into(), -1, String::new(), 0)
            ],
            "v{version}"
        );
        if version >= 2 {
            assert_eq!(
                fetch_offsets(&mut client, version, "nobody", None),
                (0, vec![])
            );
        }
    }
    // An empty group id is a group like any other for OffsetFetch, as in Kafka.
    for version in [1, 3, 9] {
        assert_eq!(
            fetch_offsets(&mut client, version, "", Some(&["t"])),
            (0, vec![("t".into(), -1, String::new(), 0)]),
            "v{version}"
        );
    }

    // A member's commit to a group that does not exist: ILLEGAL_GENERATION before v9,
    // GROUP_ID_NOT_FOUND from v9.
    for version in 2..=9 {
        let expected = if version < 9 {
            ILLEGAL_GENERATION
        } else {
            GROUP_ID_NOT_FOUND
        };
        assert_eq!(
            commit(&mut client, version, 3, "m", 1),
            expected,
            "v{version}"
        );
    }
    // A simple consumer's commit (generation -1, no member) makes the group; an unknown
    // topic or partition is refused per partition, and the rest is committed.
    let mut request = commit_request(-1, "", 4);
    let mut unknown = request.topics[0].clone();
    unknown.name = name("x");
    let mut partition_1 = request.topics[0].clone();
    partition_1.partitions[0].partition_index = 1;
    request.topics.extend([unknown, partition_1]);
    let response = client.send(8, &request);
    // In Kafka's order (its OffsetCommitResponse.Builder): the refused partitions first,
    // each under its topic's first entry, then the coordinator's answer merged in.
    let codes: Vec<(String, Vec<(i32, i16)>)> = response
        .topics
        .iter()
        .map(|t| {
            (
                t.name.0.to_string(),
                t.partitions
                    .iter()
                    .map(|p| (p.partition_index, p.error_code))
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        codes,
        vec![
            ("x".into(), vec![(0, UNKNOWN_TOPIC_OR_PARTITION)]),
            ("t".into(), vec![(1, UNKNOWN_TOPIC_OR_PARTITION), (0, 0)]),
        ]
    );
    let (_, offsets) = fetch_offsets(&mut client, 8, GROUP, Some(&["t"]));
    assert_eq!(offsets[0].1, 4);
    // Only unknown partitions: answered without the coordinator, no group made.
    let mut request = commit_request(-1, "", 4);
    request.group_id = group_id("other");
    request.topics[0].name = name("x");
    let response = client.send(8, &request);
    assert_eq!(
        response.topics[0].partitions[0].error_code,
        UNKNOWN_TOPIC_OR_PARTITION
    );
    let ids: Vec<String> = broker
        .engine
        .groups()
        .list_groups()
        .into_iter()
        .map(|g| g.group_id)
        .collect();
    assert_eq!(ids, vec![GROUP.to_string()]);
    // Metadata over offset.metadata.max.bytes (4096).
    let mut request = commit_request(-1, "", 5);
    request.topics[0].partitions[0].committed_metadata = Some(text(&"m".repeat(4097)));
    let response = client.send(9, &request);
    assert_eq!(
        response.topics[0].partitions[0].error_code,
        OFFSET_METADATA_TOO_LARGE
    );
    // OffsetDelete of an unknown topic; of a group that does not exist.
    assert_eq!(
        delete_offsets(&mut client, &["t", "x"]),
        // Kafka's order: the unknown topic's refusal before the coordinator's answer.
        (0, vec![UNKNOWN_TOPIC_OR_PARTITION, 0])
    );
    broker.engine.groups().delete_groups(&[GROUP.to_string()]);
    assert_eq!(
        delete_offsets(&mut client, &["t"]),
        (GROUP_ID_NOT_FOUND, vec![])
    );
}

#[test]
fn list_groups_filters_by_state_and_type() {
    let broker = Broker::start();
    broker.engine.create_topic("t", 1).unwrap();
    let mut client = broker.client();
    find_group_coordinator(&mut client, 6, GROUP);
    // A simple consumer's group: Empty, no protocol type.
    assert_eq!(commit(&mut client, 8, -1, "", 1), 0);
    let list = |client: &mut Client, version: i16, states: &[&str], types: &[&str]| {
        let mut request = ListGroupsRequest::default();
        request.states_filter = states.iter().map(|s| text(s)).collect();
        request.types_filter = types.iter().map(|s| text(s)).collect();
        let response = client.send(version, &request);
        assert_eq!(response.error_code, 0);
        response
            .groups
            .iter()
            .map(|g| {
                (
                    g.group_id.0.to_string(),
                    g.group_state.to_string(),
                    g.group_type.to_string(),
                )
            })
            .collect::<Vec<_>>()
    };
    let g =
        |state: &str, kind: &str| vec![(GROUP.to_string(), state.to_string(), kind.to_string())];
    assert_eq!(list(&mut client, 3, &[], &[]), g("", ""));
    assert_eq!(list(&mut client, 4, &[" empty "], &[]), g("Empty", ""));
    assert_eq!(list(&mut client, 4, &["Stable"], &[]), vec![]);
    assert_eq!(
        list(&mut client, 5, &[], &["Classic"]),
        g("Empty", "classic")
    );
    assert_eq!(list(&mut client, 5, &[], &["consumer"]), vec![]);
}

#[test]
fn find_coordinator_creates_the_internal_topics_and_refuses_share_groups() {
    let broker = Broker::start();
    let mut client = broker.client();
    let internal = |client: &mut Client| {
        let mut request = MetadataRequest::default();
        request.topics = None;
        let response = client.send(12, &request);
        response
            .topics
            .iter()
            .map(|t| (t.name.as_ref().unwrap().0.to_string(), t.is_internal))
            .collect::<Vec<_>>()
    };
    assert!(internal(&mut client).is_empty());
    for version in 0..=6 {
        let (code, node, host, _) = find_group_coordinator(&mut client, version, GROUP);
        assert_eq!(
            (code, node, host.as_str()),
            (0, 1, "127.0.0.1"),
            "v{version}"
        );
        // The empty group id has a coordinator too, as in Kafka.
        assert_eq!(
            find_group_coordinator(&mut client, version, "").0,
            0,
            "v{version}"
        );
    }
    assert_eq!(
        internal(&mut client),
        vec![("__consumer_offsets".into(), true)]
    );
    let mut t = MetadataRequestTopic::default();
    t.name = Some(name("__consumer_offsets"));
    let mut request = MetadataRequest::default();
    request.topics = Some(vec![t]);
    assert!(client.send(1, &request).topics[0].is_internal);

    for version in [1, 4, 6] {
        let mut request = FindCoordinatorRequest::default();
        request.key_type = 1;
        if version < 4 {
            request.key = text("txn");
        } else {
            request.coordinator_keys = vec![text("txn")];
        }
        let response = client.send(version, &request);
        let (code, message) = if version < 4 {
            (response.error_code, response.error_message)
        } else {
            let c = &response.coordinators[0];
            (c.error_code, c.error_message.clone())
        };
        // A transactional id's coordinator is this node too: `__transaction_state` is made.
        assert_eq!(
            (code, message.as_deref()),
            (0, Some(if version < 4 { "NONE" } else { "" })),
            "v{version}"
        );
    }
    assert!(
        internal(&mut client).contains(&("__transaction_state".into(), true)),
        "the transaction log is an internal topic"
    );
    let mut share = FindCoordinatorRequest::default();
    share.key_type = 2;
    share.coordinator_keys = vec![text("share")];
    assert_eq!(
        client.send(6, &share).coordinators[0].error_code,
        INVALID_REQUEST
    );

    // The offsets topic is the coordinator's: a producer and DeleteTopics are refused.
    let (code, _) = produce(
        &mut client,
        9,
        "__consumer_offsets",
        batch(&[(Some("k"), "v")]),
    );
    assert_eq!(code, INVALID_TOPIC_EXCEPTION);
    let mut request = DeleteTopicsRequest::default();
    request.topic_names = vec![name("__consumer_offsets")];
    let response = client.send(5, &request);
    assert_eq!(response.responses[0].error_code, INVALID_TOPIC_EXCEPTION);
    assert!(broker.engine.topic("__consumer_offsets").is_some());
}

#[test]
fn listener_shutdown_answers_a_waiting_join_with_not_coordinator() {
    let mut broker = Broker::start();
    let mut client = broker.client();
    find_group_coordinator(&mut client, 6, GROUP);
    let pending = new_member(&broker, &mut client, 9);
    broker.stop_listener();
    const NOT_COORDINATOR: i16 = 16;
    assert_eq!(pending.join().unwrap().error_code, NOT_COORDINATOR);
}

#[test]
fn malformed_group_requests_close_the_connection_with_a_log_line() {
    capture_log();
    let broker = Broker::start();
    let mut bystander = broker.client();
    let cut = |mut frame: Vec<u8>| {
        frame.truncate(frame.len() - 1);
        let size = (frame.len() - 4) as i32;
        frame[..4].copy_from_slice(&size.to_be_bytes());
        frame
    };
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            cut(bystander.frame(5, &join_request(5, ""))),
            "malformed JoinGroup v5 request",
        ),
        (
            cut(bystander.frame(3, &sync_request(3, 1, "m", &[("m", assignment("t"))]))),
            "malformed SyncGroup v3 request",
        ),
        (
            cut(bystander.frame(4, &HeartbeatRequest::default())),
            "malformed Heartbeat v4 request",
        ),
        (
            cut(bystander.frame(9, &commit_request(1, "m", 1))),
            "malformed OffsetCommit v9 request",
        ),
        (
            cut(bystander.frame(2, &DeleteGroupsRequest::default())),
            "malformed DeleteGroups v2 request",
        ),
        (
            // JoinGroup v1's protocol count says 2^31-1 in a few bytes.
            {
                let mut frame = bystander.frame(1, &join_request(1, ""));
                let at = frame.len() - subscription(&["t"]).len() - 4 - 5 - 2 - 4;
                frame[at..at + 4].copy_from_slice(&i32::MAX.to_be_bytes());
                frame
            },
            "malformed JoinGroup v1 request",
        ),
        // A group API at a version kpfs does not serve.
        (
            {
                let mut frame = bystander.frame(9, &commit_request(1, "m", 1));
                frame[6..8].copy_from_slice(&1i16.to_be_bytes());
                frame
            },
            "OffsetCommit version 1 is not supported",
        ),
    ];
    for (bytes, reason) in cases {
        let mut client = broker.client();
        let peer = client.stream.local_addr().unwrap();
        client.stream.write_all(&bytes).unwrap();
        assert!(client.is_closed(), "{reason}: the connection stays open");
        let logged = logged_about(peer);
        assert!(
            logged
                .iter()
                .any(|l| l.contains("closing Kafka connection") && l.contains(reason)),
            "no log line saying {reason:?}: {logged:?}"
        );
    }
    assert_eq!(heartbeat(&mut bystander, 4, 1, "m"), UNKNOWN_MEMBER_ID);
}

#[test]
fn every_group_api_version_is_answered() {
    let broker = Broker::start();
    broker.engine.create_topic("t", 1).unwrap();
    let mut client = broker.client();
    find_group_coordinator(&mut client, 6, GROUP);
    // A simple consumer's group, Empty with a committed offset.
    assert_eq!(commit(&mut client, 8, -1, "", 1), 0);
    for version in 0..=5 {
        let response = client.send(version, &sync_request(version, 1, "m", &[]));
        assert_eq!(
            response.error_code, UNKNOWN_MEMBER_ID,
            "SyncGroup v{version}"
        );
    }
    for version in 0..=4 {
        assert_eq!(
            heartbeat(&mut client, version, 1, "m"),
            UNKNOWN_MEMBER_ID,
            "Heartbeat v{version}"
        );
    }
    for version in 0..=5 {
        assert_eq!(
            leave(&mut client, version, "m"),
            UNKNOWN_MEMBER_ID,
            "LeaveGroup v{version}"
        );
    }
    for version in 0..=6 {
        let g = &describe(&mut client, version, GROUP).groups[0];
        assert_eq!(
            (g.error_code, g.group_state.as_str()),
            (0, "Empty"),
            "DescribeGroups v{version}"
        );
        // Operations only when asked (v3+), else Kafka's "not requested".
        let expected = if version >= 3 { 3400 } else { i32::MIN };
        assert_eq!(
            g.authorized_operations, expected,
            "DescribeGroups v{version}"
        );
    }
    for version in 0..=5 {
        let response = client.send(version, &ListGroupsRequest::default());
        assert_eq!(response.groups.len(), 1, "ListGroups v{version}");
    }
    assert_eq!(delete_offsets(&mut client, &["t"]), (0, vec![0]));
    // The first deletes the group, the others find none.
    for version in 0..=2 {
        let expected = if version == 0 { 0 } else { GROUP_ID_NOT_FOUND };
        assert_eq!(
            delete_group(&mut client, version, GROUP),
            expected,
            "DeleteGroups v{version}"
        );
    }
}

/// Kafka's ConsumerProtocolAssignment v0: `partitions` of `topic`.
fn assignment_of(topic: &str, partitions: &[i32]) -> Bytes {
    let mut b = vec![0, 0, 0, 0, 0, 1];
    b.extend_from_slice(&(topic.len() as i16).to_be_bytes());
    b.extend_from_slice(topic.as_bytes());
    b.extend_from_slice(&(partitions.len() as i32).to_be_bytes());
    for p in partitions {
        b.extend_from_slice(&p.to_be_bytes());
    }
    b.extend_from_slice(&(-1i32).to_be_bytes());
    Bytes::from(b)
}

/// A commit of `offsets` ((partition, offset)) of topic `t` by `member`.
fn commit_partitions(
    client: &mut Client,
    generation: i32,
    member: &str,
    offsets: &[(i32, i64)],
) -> Vec<(i32, i16)> {
    let mut request = commit_request(generation, member, 0);
    let template = request.topics[0].partitions[0].clone();
    request.topics[0].partitions = offsets
        .iter()
        .map(|&(index, offset)| {
            let mut p = template.clone();
            p.partition_index = index;
            p.committed_offset = offset;
            p
        })
        .collect();
    let response = client.send(9, &request);
    response.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.error_code))
        .collect()
}

/// Every committed offset of GROUP: (topic, partition, offset).
fn committed(client: &mut Client) -> Vec<(String, i32, i64)> {
    let mut g = OffsetFetchRequestGroup::default();
    g.group_id = group_id(GROUP);
    g.topics = None;
    let mut request = OffsetFetchRequest::default();
    request.groups = vec![g];
    let response = client.send(9, &request);
    response.groups[0]
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.0.to_string(), p.partition_index, p.committed_offset))
        })
        .collect()
}

#[test]
fn a_group_spreads_the_partitions_of_a_topic_as_its_leader_assigns_them() {
    let broker = Broker::start();
    broker.engine.create_topic("t", 3).unwrap();
    let mut client = broker.client();
    find_group_coordinator(&mut client, 6, GROUP);
    let join_a = new_member(&broker, &mut client, 9);
    let join_b = new_member(&broker, &mut client, 9);
    complete_rebalance(&broker);
    let (a, b) = (join_a.join().unwrap(), join_b.join().unwrap());
    assert_eq!((a.error_code, b.error_code), (0, 0));
    let (a, b) = (a.member_id.to_string(), b.member_id.to_string());
    let follower = {
        let request = sync_request(5, 1, &b, &[]);
        let addr = broker.addr();
        std::thread::spawn(move || Client::connect(addr).send(5, &request))
    };
    wait_until("the follower's SyncGroup", || {
        broker.engine.groups().describe_group(GROUP).state == GroupState::CompletingRebalance
    });
    // The leader's assignor (range) gave a partitions 0 and 1, b partition 2.
    let leader: SyncGroupResponse = client.send(
        5,
        &sync_request(
            5,
            1,
            &a,
            &[
                (&a, assignment_of("t", &[0, 1])),
                (&b, assignment_of("t", &[2])),
            ],
        ),
    );
    let follower = follower.join().unwrap();
    assert_eq!((leader.error_code, follower.error_code), (0, 0));
    assert_eq!(leader.assignment, assignment_of("t", &[0, 1]));
    assert_eq!(follower.assignment, assignment_of("t", &[2]));
    let described = describe(&mut client, 5, GROUP);
    let of = |id: &str| {
        described.groups[0]
            .members
            .iter()
            .find(|m| m.member_id.as_str() == id)
            .unwrap()
            .member_assignment
            .clone()
    };
    assert_eq!(of(&a), assignment_of("t", &[0, 1]));
    assert_eq!(of(&b), assignment_of("t", &[2]));

    // Each member commits its partitions; a partition the topic lacks is refused.
    assert_eq!(
        commit_partitions(&mut client, 1, &a, &[(0, 10), (1, 11)]),
        [(0, 0), (1, 0)]
    );
    assert_eq!(
        commit_partitions(&mut client, 1, &b, &[(2, 12), (3, 13), (-1, 1)]),
        // Kafka's order: the partitions refused before the coordinator's answer.
        [
            (3, UNKNOWN_TOPIC_OR_PARTITION),
            (-1, UNKNOWN_TOPIC_OR_PARTITION),
            (2, 0)
        ]
    );
    assert_eq!(
        committed(&mut client),
        [
            ("t".into(), 0, 10),
            ("t".into(), 1, 11),
            ("t".into(), 2, 12)
        ]
    );
    // OffsetFetch of named partitions, one that was never committed among them.
    let (code, offsets) = fetch_offsets(&mut client, 9, GROUP, Some(&["t"]));
    assert_eq!((code, offsets[0].1), (0, 10));

    // The members leave; offsets of partitions are deleted one by one.
    assert_eq!(leave(&mut client, 5, &a), 0);
    assert_eq!(leave(&mut client, 5, &b), 0);
    let mut request = OffsetDeleteRequest::default();
    request.group_id = group_id(GROUP);
    let mut topic = OffsetDeleteRequestTopic::default();
    topic.name = name("t");
    topic.partitions = [1, 3]
        .iter()
        .map(|&index| {
            let mut p = OffsetDeleteRequestPartition::default();
            p.partition_index = index;
            p
        })
        .collect();
    request.topics = vec![topic];
    let response = client.send(0, &request);
    let codes: Vec<(i32, i16)> = response.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.error_code))
        .collect();
    assert_eq!(
        (response.error_code, codes),
        (0, vec![(3, UNKNOWN_TOPIC_OR_PARTITION), (1, 0)])
    );
    assert_eq!(
        committed(&mut client),
        [("t".into(), 0, 10), ("t".into(), 2, 12)]
    );
}

/// OffsetFetch v9 of partitions 0 and 1 of "t" for GROUP, with `require_stable`:
/// [(offset, error)].
fn fetch_stable(client: &mut Client, require_stable: bool) -> Vec<(i64, i16)> {
    let mut topic = OffsetFetchRequestTopics::default();
    topic.name = name("t");
    topic.partition_indexes = vec![0, 1];
    let mut g = OffsetFetchRequestGroup::default();
    g.group_id = group_id(GROUP);
    g.topics = Some(vec![topic]);
    let mut request = OffsetFetchRequest::default();
    request.groups = vec![g];
    request.require_stable = require_stable;
    let response = client.send(9, &request);
    response.groups[0].topics[0]
        .partitions
        .iter()
        .map(|p| (p.committed_offset, p.error_code))
        .collect()
}

/// KIP-447: the offset a transaction sent (TxnOffsetCommit) is pending until its marker,
/// and an OffsetFetch with `require_stable` (which every consumer of a transactional
/// pipeline sends when it takes partitions over) answers its partition
/// UNSTABLE_OFFSET_COMMIT meanwhile, so the new owner waits for the transaction rather
/// than start from an offset it is about to move; without `require_stable`, the committed
/// offset. As Kafka's `OffsetMetadataManager.fetchOffsets`.
#[test]
fn a_transactions_pending_offset_is_unstable_to_a_fetch_requiring_stable_offsets() {
    const UNSTABLE_OFFSET_COMMIT: i16 = 88;
    let broker = Broker::start();
    broker.engine.create_topic("t", 2).unwrap();
    let mut client = broker.client();
    find_group_coordinator(&mut client, 6, GROUP);
    assert_eq!(commit(&mut client, 9, -1, "", 3), 0, "partition 0");

    let mut init = InitProducerIdRequest::default();
    init.transactional_id = Some(TransactionalId(text("tx")));
    init.transaction_timeout_ms = 60_000;
    init.producer_id = ProducerId(-1);
    init.producer_epoch = -1;
    let producer = client.send(5, &init);
    assert_eq!(producer.error_code, 0);
    // TxnOffsetCommit v5: transaction version 2, the offsets partition joins at once.
    let mut p = TxnOffsetCommitRequestPartition::default();
    p.partition_index = 1;
    p.committed_offset = 7;
    p.committed_leader_epoch = -1;
    let mut t = TxnOffsetCommitRequestTopic::default();
    t.name = name("t");
    t.partitions = vec![p];
    let mut request = TxnOffsetCommitRequest::default();
    request.transactional_id = TransactionalId(text("tx"));
    request.group_id = group_id(GROUP);
    request.producer_id = producer.producer_id;
    request.producer_epoch = producer.producer_epoch;
    request.generation_id = -1;
    request.member_id = text("");
    request.topics = vec![t];
    let response = client.send(5, &request);
    assert_eq!(response.topics[0].partitions[0].error_code, 0);

    assert_eq!(
        fetch_stable(&mut client, true),
        [(3, 0), (-1, UNSTABLE_OFFSET_COMMIT)],
        "partition 1's offset waits for the transaction"
    );
    assert_eq!(fetch_stable(&mut client, false), [(3, 0), (-1, 0)]);

    let mut end = EndTxnRequest::default();
    end.transactional_id = TransactionalId(text("tx"));
    end.producer_id = producer.producer_id;
    end.producer_epoch = producer.producer_epoch;
    end.committed = true;
    assert_eq!(client.send(5, &end).error_code, 0);
    assert_eq!(fetch_stable(&mut client, true), [(3, 0), (7, 0)]);
}
