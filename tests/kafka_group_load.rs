//! The group coordinator under load and abuse through the Kafka listener: a hundred groups
//! of two members in bounded memory, members that stop heartbeating evicted at their
//! session timeout, a JoinGroup storm that never wedges a group, and group requests with
//! malformed contents answered with Kafka's error codes. Memory is the process's anonymous
//! resident set (`RssAnon`), so the tests run one at a time (as tests/kafka_load.rs's).
//! The engine's clock is a manual one: sessions and rebalance delays pass when a test
//! advances it. Run with `--nocapture` to see the figures.
#![expect(
    clippy::disallowed_methods,
    reason = "members, the listener's threads and the storm run in real time: polled against deadlines"
)]

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use common::kafka::{name, Broker, Client};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, FindCoordinatorRequest, GroupId,
    HeartbeatRequest, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, OffsetCommitRequest,
    SyncGroupRequest,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use kpfs::engine::groups::GroupState;

/// The figures are the whole process's: one test at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const FIND_COORDINATOR_VERSION: i16 = 3;
const JOIN_VERSION: i16 = 7;
const SYNC_VERSION: i16 = 5;
const HEARTBEAT_VERSION: i16 = 4;
const LEAVE_VERSION: i16 = 4;
const COMMIT_VERSION: i16 = 8;

// Kafka's error codes the members act on.
const NONE: i16 = 0;
const OFFSET_METADATA_TOO_LARGE: i16 = 12;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const ILLEGAL_GENERATION: i16 = 22;
const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
const INVALID_GROUP_ID: i16 = 24;
const UNKNOWN_MEMBER_ID: i16 = 25;
const INVALID_SESSION_TIMEOUT: i16 = 26;
const REBALANCE_IN_PROGRESS: i16 = 27;
const MEMBER_ID_REQUIRED: i16 = 79;

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("RssAnon:"))
        .expect("RssAnon in /proc/self/status");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A consumer protocol message as the group APIs carry it: its version, then the message.
fn consumer_protocol<M: Encodable>(message: &M) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    message.encode(&mut buf, 0).unwrap();
    buf.freeze()
}

fn subscription(topics: &[&str]) -> Bytes {
    let mut s = ConsumerProtocolSubscription::default();
    s.topics = topics.iter().map(|t| str_bytes(t)).collect();
    consumer_protocol(&s)
}

fn assignment(topics: &[&str]) -> Bytes {
    let mut a = ConsumerProtocolAssignment::default();
    a.assigned_partitions = topics
        .iter()
        .map(|t| {
            let mut tp = TopicPartition::default();
            tp.topic = name(t);
            tp.partitions = vec![0];
            tp
        })
        .collect();
    consumer_protocol(&a)
}

fn broker_with(overrides: &[(&str, &str)]) -> Broker {
    // 200 members, a connection each (the listener's default allows 100).
    Broker::start_configured(overrides, |listener| listener.max_connections = 1000)
}

/// A consumer group member speaking the classic protocol over its own connection, as a
/// Kafka consumer does (dynamic membership, the consumer protocol, topic `load`).
struct Member {
    client: Client,
    group: String,
    member_id: String,
    generation: i32,
    session_ms: i32,
    rebalance_ms: i32,
    protocol: Bytes,
}

impl Member {
    /// A member of `group`, which first looks its coordinator up, as a Kafka consumer
    /// does (the coordinator creates `__consumer_offsets` then).
    fn new(broker: &Broker, group: &str, session_ms: i32, rebalance_ms: i32) -> Member {
        let mut client = broker.client();
        if !group.is_empty() {
            let mut request = FindCoordinatorRequest::default();
            request.key = str_bytes(group);
            let response = client.send(FIND_COORDINATOR_VERSION, &request);
            assert_eq!(response.error_code, NONE, "FindCoordinator of {group}");
        }
        Member {
            client,
            group: group.to_string(),
            member_id: String::new(),
            generation: -1,
            session_ms,
            rebalance_ms,
            protocol: subscription(&["load"]),
        }
    }

    fn join_request(&self) -> JoinGroupRequest {
        let mut protocol = JoinGroupRequestProtocol::default();
        protocol.name = StrBytes::from_static_str("range");
        protocol.metadata = self.protocol.clone();
        let mut request = JoinGroupRequest::default();
        request.group_id = GroupId(str_bytes(&self.group));
        request.session_timeout_ms = self.session_ms;
        request.rebalance_timeout_ms = self.rebalance_ms;
        request.member_id = str_bytes(&self.member_id);
        request.protocol_type = StrBytes::from_static_str("consumer");
        request.protocols = vec![protocol];
        request
    }

    /// JoinGroup, again with the member id a first join without one is given
    /// (MEMBER_ID_REQUIRED); blocks until the rebalance completes.
    fn join(&mut self) -> JoinGroupResponse {
        let mut response = self.client.send(JOIN_VERSION, &self.join_request());
        if response.error_code == MEMBER_ID_REQUIRED {
            self.member_id = response.member_id.to_string();
            response = self.client.send(JOIN_VERSION, &self.join_request());
        }
        if response.error_code == NONE {
            self.member_id = response.member_id.to_string();
            self.generation = response.generation_id;
        }
        response
    }

    /// SyncGroup of the generation `joined` completed; the leader assigns `load` to
    /// itself and nothing to the others. Returns the error code.
    fn sync(&mut self, joined: &JoinGroupResponse) -> i16 {
        let mut request = SyncGroupRequest::default();
        request.group_id = GroupId(str_bytes(&self.group));
        request.generation_id = joined.generation_id;
        request.member_id = str_bytes(&self.member_id);
        request.protocol_type = Some(StrBytes::from_static_str("consumer"));
        request.protocol_name = joined.protocol_name.clone();
        if joined.leader == joined.member_id {
            request.assignments = joined
                .members
                .iter()
                .map(|m| {
                    let mut a = SyncGroupRequestAssignment::default();
                    a.member_id = m.member_id.clone();
                    let topics: &[&str] = if m.member_id == joined.leader {
                        &["load"]
                    } else {
                        &[]
                    };
                    a.assignment = assignment(topics);
                    a
                })
                .collect();
        }
        self.client.send(SYNC_VERSION, &request).error_code
    }

    /// Joins and syncs until a generation completes with this member in it.
    fn join_until_synced(&mut self) -> i32 {
        for _ in 0..50 {
            let joined = self.join();
            match joined.error_code {
                NONE => {}
                UNKNOWN_MEMBER_ID => {
                    self.member_id.clear();
                    continue;
                }
                REBALANCE_IN_PROGRESS => continue,
                code => panic!("{}: JoinGroup answered error code {code}", self.group),
            }
            match self.sync(&joined) {
                NONE => return self.generation,
                REBALANCE_IN_PROGRESS | ILLEGAL_GENERATION => continue,
                UNKNOWN_MEMBER_ID => self.member_id.clear(),
                code => panic!("{}: SyncGroup answered error code {code}", self.group),
            }
        }
        panic!("{}: no generation completed in 50 joins", self.group)
    }

    fn heartbeat(&mut self) -> i16 {
        let mut request = HeartbeatRequest::default();
        request.group_id = GroupId(str_bytes(&self.group));
        request.generation_id = self.generation;
        request.member_id = str_bytes(&self.member_id);
        self.client.send(HEARTBEAT_VERSION, &request).error_code
    }

    fn leave(&mut self) -> i16 {
        let mut identity = MemberIdentity::default();
        identity.member_id = str_bytes(&self.member_id);
        let mut request = LeaveGroupRequest::default();
        request.group_id = GroupId(str_bytes(&self.group));
        request.members = vec![identity];
        let response = self.client.send(LEAVE_VERSION, &request);
        if response.error_code != NONE {
            return response.error_code;
        }
        response.members[0].error_code
    }

    /// OffsetCommit of `topic`'s partition `partition` as this member; the partition's
    /// error code.
    fn commit(&mut self, topic: &str, partition: i32, offset: i64, metadata: &str) -> i16 {
        let mut p = OffsetCommitRequestPartition::default();
        p.partition_index = partition;
        p.committed_offset = offset;
        p.committed_leader_epoch = -1;
        p.committed_metadata = Some(str_bytes(metadata));
        let mut committed = OffsetCommitRequestTopic::default();
        committed.name = name(topic);
        committed.partitions = vec![p];
        let mut request = OffsetCommitRequest::default();
        request.group_id = GroupId(str_bytes(&self.group));
        request.generation_id_or_member_epoch = self.generation;
        request.member_id = str_bytes(&self.member_id);
        request.retention_time_ms = -1;
        request.topics = vec![committed];
        self.client.send(COMMIT_VERSION, &request).topics[0].partitions[0].error_code
    }
}

/// Lets `ms` of the engine's time pass and fires the coordinator's due timers, as the
/// daemon's scheduler does every tick (the test engine runs no background threads).
fn pass(broker: &Broker, ms: i64) {
    broker.clock.advance(ms);
    broker.engine.groups().tick();
}

/// The engine's clock running at 5x real time: `step_ms` every 10 ms, each step a
/// scheduler tick, until dropped.
struct Ticking {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Ticking {
    fn start(broker: &Arc<Broker>, step_ms: i64) -> Ticking {
        let stop = Arc::new(AtomicBool::new(false));
        let (broker, stopped) = (broker.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(10));
                pass(&broker, step_ms);
            }
        });
        Ticking {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Ticking {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
    }
}

fn state_of(broker: &Broker, group: &str) -> (GroupState, usize, i32) {
    let d = broker.engine.groups().describe_group(group);
    (d.state, d.members.len(), d.generation_id)
}

/// Polls until every group of `groups` is in `state` with `members` members.
fn wait_for_groups(broker: &Broker, groups: &[String], state: GroupState, members: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    for group in groups {
        loop {
            let (s, n, _) = state_of(broker, group);
            if s == state && n == members {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{group}: {s:?} with {n} members, expected {state:?} with {members}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

const GROUPS: usize = 100;
const SESSION_MS: i32 = 10_000;

/// One round of the hundred groups: two members each join (both in the first
/// generation: the initial rebalance delay passes once all 200 are waiting), sync and
/// commit, then their connections close; they stay members, as Kafka keeps a member
/// whose connection closed until its session times out, which the clock then makes
/// happen. Returns the anonymous RSS in KiB with every group Stable with two members.
fn hundred_groups_round(broker: &Broker, groups: &[String], round: i64) -> u64 {
    let threads: Vec<_> = groups
        .iter()
        .flat_map(|g| [g.clone(), g.clone()])
        .map(|group| {
            let mut member = Member::new(broker, &group, SESSION_MS, SESSION_MS);
            std::thread::spawn(move || {
                let generation = member.join_until_synced();
                assert_eq!(
                    member.commit("load", 0, round, "load-test"),
                    NONE,
                    "{group}: commit"
                );
                generation
            })
        })
        .collect();
    wait_for_groups(broker, groups, GroupState::PreparingRebalance, 2);
    // Kafka's group.initial.rebalance.delay.ms (3 s) for an empty group's first rebalance,
    // extended while members keep coming (up to the rebalance timeout): the clock moves
    // on until every group has left PreparingRebalance.
    let deadline = Instant::now() + Duration::from_secs(30);
    while groups
        .iter()
        .any(|g| state_of(broker, g).0 == GroupState::PreparingRebalance)
    {
        assert!(
            Instant::now() < deadline,
            "groups still rebalancing after 30 s"
        );
        pass(broker, 500);
        std::thread::sleep(Duration::from_millis(20));
    }
    for thread in threads {
        thread.join().unwrap();
    }
    wait_for_groups(broker, groups, GroupState::Stable, 2);
    let rss = rss_kib();
    // Nobody heartbeats: at the session timeout every member is evicted, and the groups
    // keep their committed offsets.
    pass(broker, i64::from(SESSION_MS) + 1);
    wait_for_groups(broker, groups, GroupState::Empty, 0);
    for group in groups {
        let committed = broker.engine.groups().committed_offsets(group).unwrap();
        assert_eq!(committed.len(), 1, "{group}: {committed:?}");
        assert_eq!(committed[0].offset, round, "{group}");
    }
    rss
}

#[test]
fn a_hundred_groups_of_two_members_hold_bounded_memory_and_are_evicted_at_their_session_timeout() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let broker = broker_with(&[]);
    broker.engine.create_topic("load", 1).unwrap();
    let groups: Vec<String> = (0..GROUPS).map(|i| format!("load-group-{i:03}")).collect();
    // A first round warms the allocator's arenas for the member and listener threads.
    hundred_groups_round(&broker, &groups, 1);
    let before = rss_kib();
    let mut stable = Vec::new();
    for round in 2..=4 {
        stable.push(hundred_groups_round(&broker, &groups, round));
    }
    let after = rss_kib();
    println!(
        "{GROUPS} groups x 2 members: RssAnon {before} KiB before, {stable:?} KiB with every group Stable in rounds 2-4, {after} KiB after the last eviction"
    );
    // The coordinator's share of 200 members and 100 groups is a few hundred bytes each;
    // the rest is the threads' allocator arenas, which the first round grew.
    let growth = stable.iter().max().unwrap().saturating_sub(before);
    assert!(growth < 16 * 1024, "{growth} KiB more with 200 members");
    // Evicted members leave nothing behind: three rounds grow nothing between them.
    assert!(
        after.saturating_sub(before) < 4 * 1024,
        "{} KiB more after three rounds of joins and evictions",
        after.saturating_sub(before)
    );
}

/// The storm's members' timeouts, in the engine's time, which runs 5x real time.
const STORM_SESSION_MS: i32 = 3_000;
const STORM_REBALANCE_MS: i32 = 3_000;

/// A member that stays: heartbeats every 100 ms (real), rejoins whenever told to.
fn steady_member(
    broker: &Broker,
    group: &str,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<(Member, usize)> {
    let mut member = Member::new(broker, group, STORM_SESSION_MS, STORM_REBALANCE_MS);
    std::thread::spawn(move || {
        let mut joins = 1;
        member.join_until_synced();
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(100));
            match member.heartbeat() {
                NONE => {}
                REBALANCE_IN_PROGRESS | ILLEGAL_GENERATION => {
                    member.join_until_synced();
                    joins += 1;
                }
                UNKNOWN_MEMBER_ID => {
                    member.member_id.clear();
                    member.join_until_synced();
                    joins += 1;
                }
                code => panic!("steady member: Heartbeat answered error code {code}"),
            }
        }
        (member, joins)
    })
}

#[test]
fn a_join_group_storm_never_wedges_the_group() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let broker = Arc::new(broker_with(&[
        ("group.initial.rebalance.delay.ms", "300"),
        ("group.min.session.timeout.ms", "1000"),
    ]));
    broker.engine.create_topic("load", 1).unwrap();
    let group = "storm";
    let clock = Ticking::start(&broker, 50);
    let stop_steady = Arc::new(AtomicBool::new(false));
    let steady = steady_member(&broker, group, stop_steady.clone());
    // Four stormers for 4 s, each joining every 100-300 ms and leaving in one of four
    // ways: LeaveGroup, a dropped connection after its sync (it stays until its session
    // times out), a dropped connection with its JoinGroup unanswered, and a LeaveGroup
    // from another connection while its JoinGroup waits.
    let joins = Arc::new(AtomicUsize::new(0));
    let stormers: Vec<_> = (0..4)
        .map(|s| {
            let (broker, joins) = (broker.clone(), joins.clone());
            std::thread::spawn(move || {
                let until = Instant::now() + Duration::from_secs(4);
                let mut i = s;
                while Instant::now() < until {
                    let mut member =
                        Member::new(&broker, group, STORM_SESSION_MS, STORM_REBALANCE_MS);
                    match i % 4 {
                        0 => {
                            member.join_until_synced();
                            assert!(matches!(member.leave(), NONE | UNKNOWN_MEMBER_ID));
                        }
                        1 => {
                            member.join_until_synced();
                        }
                        2 => {
                            let frame = member.client.frame(JOIN_VERSION, &member.join_request());
                            std::io::Write::write_all(&mut member.client.stream, &frame).unwrap();
                        }
                        _ => {
                            let first = member.client.send(JOIN_VERSION, &member.join_request());
                            assert_eq!(first.error_code, MEMBER_ID_REQUIRED);
                            member.member_id = first.member_id.to_string();
                            let frame = member.client.frame(JOIN_VERSION, &member.join_request());
                            std::io::Write::write_all(&mut member.client.stream, &frame).unwrap();
                            let mut other = Member::new(&broker, group, 0, 0);
                            other.member_id = member.member_id.clone();
                            std::thread::sleep(Duration::from_millis(50));
                            assert!(matches!(other.leave(), NONE | UNKNOWN_MEMBER_ID));
                        }
                    }
                    joins.fetch_add(1, Ordering::Relaxed);
                    drop(member);
                    std::thread::sleep(Duration::from_millis(100 + (i as u64 * 37) % 200));
                    i += 1;
                }
            })
        })
        .collect();
    for stormer in stormers {
        stormer.join().unwrap();
    }
    let (_, _, storm_generation) = state_of(&broker, group);
    // A fresh member joins after the storm: within the deadline it and the steady one are
    // the group's only members, Stable, in one generation.
    let stop_fresh = Arc::new(AtomicBool::new(false));
    let fresh = steady_member(&broker, group, stop_fresh.clone());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let d = broker.engine.groups().describe_group(group);
        if d.state == GroupState::Stable && d.members.len() == 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the group is wedged after the storm: {:?} with {} members, generation {}",
            d.state,
            d.members.len(),
            d.generation_id
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    stop_steady.store(true, Ordering::Relaxed);
    stop_fresh.store(true, Ordering::Relaxed);
    let (mut steady, steady_joins) = steady.join().unwrap();
    let (mut fresh, _) = fresh.join().unwrap();
    let d = broker.engine.groups().describe_group(group);
    let mut ids: Vec<&str> = d.members.iter().map(|m| m.member_id.as_str()).collect();
    ids.sort();
    let mut want = vec![steady.member_id.as_str(), fresh.member_id.as_str()];
    want.sort();
    assert_eq!(ids, want, "the members after the storm");
    assert_eq!(steady.leave(), NONE);
    assert_eq!(fresh.leave(), NONE);
    wait_for_groups(&broker, &[group.to_string()], GroupState::Empty, 0);
    drop(clock);
    println!(
        "join storm: {} stormer joins, generation {storm_generation} at its end, the steady member joined {steady_joins} times",
        joins.load(Ordering::Relaxed)
    );
    assert!(
        storm_generation >= 5,
        "only {storm_generation} generations: no storm"
    );
}

#[test]
fn malformed_group_requests_get_kafkas_error_codes() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let broker = Arc::new(broker_with(&[("group.initial.rebalance.delay.ms", "0")]));
    broker.engine.create_topic("load", 1).unwrap();
    // A new group's first rebalance completes at the scheduler's next tick.
    let _clock = Ticking::start(&broker, 50);

    // An empty group id; an empty protocol type; no protocols at all.
    let mut member = Member::new(&broker, "", SESSION_MS, SESSION_MS);
    assert_eq!(member.join().error_code, INVALID_GROUP_ID);
    let mut member = Member::new(&broker, "bad", SESSION_MS, SESSION_MS);
    let mut request = member.join_request();
    request.protocol_type = StrBytes::default();
    assert_eq!(
        member.client.send(JOIN_VERSION, &request).error_code,
        INCONSISTENT_GROUP_PROTOCOL
    );
    request = member.join_request();
    request.protocols.clear();
    assert_eq!(
        member.client.send(JOIN_VERSION, &request).error_code,
        INCONSISTENT_GROUP_PROTOCOL
    );
    // Session timeouts outside group.min/max.session.timeout.ms.
    for session in [0, -1, 5_999, 1_800_001, i32::MAX] {
        let mut member = Member::new(&broker, "bad", session, SESSION_MS);
        assert_eq!(
            member.join().error_code,
            INVALID_SESSION_TIMEOUT,
            "{session}"
        );
    }
    // Heartbeat and commit of a member of a group nobody knows (OffsetCommit before v9
    // says ILLEGAL_GENERATION then).
    let mut stranger = Member::new(&broker, "nowhere", SESSION_MS, SESSION_MS);
    stranger.member_id = "nobody-1".into();
    stranger.generation = 1;
    assert_eq!(stranger.heartbeat(), UNKNOWN_MEMBER_ID);
    assert_eq!(stranger.commit("load", 0, 1, ""), ILLEGAL_GENERATION);

    // Subscription and assignment bytes that are not Kafka's consumer protocol are opaque
    // to the coordinator (Kafka's are too): the group forms, and describing it works.
    let mut odd = Member::new(&broker, "opaque", SESSION_MS, SESSION_MS);
    odd.protocol = Bytes::from_static(b"\xff\xff not a subscription");
    let joined = odd.join();
    assert_eq!(joined.error_code, NONE);
    let mut request = SyncGroupRequest::default();
    request.group_id = GroupId(str_bytes("opaque"));
    request.generation_id = joined.generation_id;
    request.member_id = str_bytes(&odd.member_id);
    request.protocol_type = Some(StrBytes::from_static_str("consumer"));
    request.protocol_name = joined.protocol_name.clone();
    let mut garbage = SyncGroupRequestAssignment::default();
    garbage.member_id = str_bytes(&odd.member_id);
    garbage.assignment = Bytes::from_static(b"\x00\x00\x7f\xff\xff\xff");
    request.assignments = vec![garbage];
    assert_eq!(odd.client.send(SYNC_VERSION, &request).error_code, NONE);
    let d = broker.engine.groups().describe_group("opaque");
    assert_eq!((d.state, d.members.len()), (GroupState::Stable, 1));
    assert_eq!(
        d.members[0].assigned, None,
        "garbage decoded as an assignment"
    );
    // ... and of a group that exists.
    stranger.group = "opaque".into();
    assert_eq!(stranger.heartbeat(), UNKNOWN_MEMBER_ID);
    assert_eq!(stranger.commit("load", 0, 1, ""), UNKNOWN_MEMBER_ID);

    // Commits Kafka refuses: metadata over offset.metadata.max.bytes (4096); a partition
    // kpfs topics lack, and a topic that does not exist (KafkaApis checks both against
    // its metadata before the coordinator sees the commit).
    assert_eq!(
        odd.commit("load", 0, 5, &"m".repeat(4097)),
        OFFSET_METADATA_TOO_LARGE
    );
    assert_eq!(odd.commit("load", 0, 5, &"m".repeat(4096)), NONE);
    assert_eq!(odd.commit("load", 1, 5, ""), UNKNOWN_TOPIC_OR_PARTITION);
    assert_eq!(
        odd.commit("no-such-topic", 0, 5, ""),
        UNKNOWN_TOPIC_OR_PARTITION
    );
    let committed = broker.engine.groups().committed_offsets("opaque").unwrap();
    assert_eq!(committed.len(), 1, "{committed:?}");
    assert_eq!(odd.leave(), NONE);
}
