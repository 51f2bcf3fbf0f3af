//! The coordinator driven as the listener drives it, on a manual clock: rebalances,
//! timeouts and offset expiry happen when the test moves time and ticks.

use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::engine::clock::ManualClock;
use crate::engine::config::BrokerConfig;
use crate::engine::{Engine, EngineError, EngineOptions};

const DELAY_MS: i64 = 3_000;

fn open(dir: &Path, clock: &Arc<ManualClock>) -> Engine {
    Engine::open(
        dir,
        BrokerConfig::load(None, &[]).unwrap(),
        clock.clone(),
        EngineOptions::default(),
    )
    .unwrap()
}

fn join_request(member_id: &str, client: &str) -> JoinRequest {
    JoinRequest {
        group_id: "g".into(),
        member_id: member_id.into(),
        group_instance_id: None,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), subscription(&["t"]))],
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        client_id: client.into(),
        client_host: "/127.0.0.1".into(),
        require_known_member_id: true,
        supports_skip_assignment: false,
        reason: None,
    }
}

/// ConsumerProtocolSubscription v0 of `topics`.
fn subscription(topics: &[&str]) -> Vec<u8> {
    let mut b = vec![0, 0];
    b.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for t in topics {
        b.extend_from_slice(&(t.len() as i16).to_be_bytes());
        b.extend_from_slice(t.as_bytes());
    }
    b.extend_from_slice(&(-1i32).to_be_bytes());
    b
}

fn answered<T>(pending: &Pending<T>) -> T {
    pending.try_recv().expect("answered")
}

/// A member id through MEMBER_ID_REQUIRED, and the pending join with it.
fn join(engine: &Engine, client: &str) -> (String, Pending<JoinResponse>) {
    let first = answered(&engine.groups().join_group(join_request("", client)));
    let Some(GroupError::MemberIdRequired { member_id }) = first.error else {
        panic!("expected MEMBER_ID_REQUIRED, got {first:?}");
    };
    let pending = engine.groups().join_group(join_request(&member_id, client));
    (member_id, pending)
}

fn sync(
    engine: &Engine,
    generation: i32,
    member: &str,
    assignments: Vec<(String, Vec<u8>)>,
) -> Pending<SyncResponse> {
    engine.groups().sync_group(SyncRequest {
        group_id: "g".into(),
        generation_id: generation,
        member_id: member.into(),
        group_instance_id: None,
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        assignments,
    })
}

/// Two members through the initial rebalance to Stable; returns (leader, follower,
/// generation).
fn stable_group_of_two(engine: &Engine, clock: &ManualClock) -> (String, String, i32) {
    engine.ensure_offsets_topic().unwrap();
    let (a, join_a) = join(engine, "a");
    let (b, join_b) = join(engine, "b");
    engine.groups().tick();
    assert!(
        join_a.try_recv().is_err(),
        "the initial delay holds the join"
    );
    // b joined during the delay: Kafka waits one more delay for further members.
    clock.advance(DELAY_MS);
    engine.groups().tick();
    assert!(
        join_a.try_recv().is_err(),
        "a member joined during the delay"
    );
    clock.advance(DELAY_MS);
    engine.groups().tick();
    let (ja, jb) = (answered(&join_a), answered(&join_b));
    assert_eq!((ja.error.clone(), jb.error.clone()), (None, None));
    assert_eq!(ja.generation_id, 1);
    assert_eq!(ja.leader, a, "the first member leads");
    assert_eq!(ja.members.len(), 2, "the leader sees every member");
    assert!(jb.members.is_empty(), "a follower sees none");
    assert_eq!(ja.protocol_name.as_deref(), Some("range"));
    let follower = sync(engine, 1, &b, vec![]);
    assert!(
        follower.try_recv().is_err(),
        "the follower waits for the leader"
    );
    let leader = sync(
        engine,
        1,
        &a,
        vec![(a.clone(), vec![1]), (b.clone(), vec![2])],
    );
    assert_eq!(answered(&leader).assignment, vec![1]);
    assert_eq!(answered(&follower).assignment, vec![2]);
    assert_eq!(
        engine.groups().describe_group("g").state,
        GroupState::Stable
    );
    (a, b, 1)
}

#[test]
fn two_members_rebalance_to_stable_and_commit() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_000_000));
    let engine = open(dir.path(), &clock);
    engine.create_topic("t", 1).unwrap();
    let (a, b, generation) = stable_group_of_two(&engine, &clock);
    assert_eq!(engine.groups().heartbeat("g", generation, &b, None), Ok(()));
    assert_eq!(
        engine.groups().heartbeat("g", generation + 1, &b, None),
        Err(GroupError::IllegalGeneration)
    );
    let commit = CommitRequest {
        group_id: "g".into(),
        generation_id: generation,
        member_id: a.clone(),
        group_instance_id: None,
        offsets: vec![OffsetToCommit {
            topic: "t".into(),
            partition: 0,
            offset: 5,
            leader_epoch: -1,
            metadata: None,
        }],
    };
    assert_eq!(engine.groups().commit_offsets(&commit), Ok(vec![None]));
    let fetched = engine
        .groups()
        .fetch_offsets("g", Some(&[("t".into(), 0), ("u".into(), 0)]));
    assert_eq!((fetched[0].offset, fetched[1].offset), (5, -1));
    assert_eq!(
        engine.groups().committed_to_partition("t", 0),
        vec![("g".into(), 5)]
    );
    // A stale generation cannot commit.
    let stale = CommitRequest {
        generation_id: generation - 1,
        ..commit
    };
    assert_eq!(
        engine.groups().commit_offsets(&stale),
        Err(GroupError::IllegalGeneration)
    );
}

#[test]
fn a_silent_member_is_evicted_and_the_other_takes_over() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_000_000));
    let engine = open(dir.path(), &clock);
    let (a, b, generation) = stable_group_of_two(&engine, &clock);
    // b heartbeats, a does not: after the session timeout a is gone.
    clock.advance(6_000);
    engine
        .groups()
        .heartbeat("g", generation, &b, None)
        .unwrap();
    clock.advance(5_000);
    engine.groups().tick();
    assert_eq!(
        engine.groups().heartbeat("g", generation, &b, None),
        Err(GroupError::RebalanceInProgress)
    );
    let rejoin = engine.groups().join_group(join_request(&b, "b"));
    let answer = answered(&rejoin);
    assert_eq!(answer.generation_id, generation + 1);
    assert_eq!(answer.leader, b, "the survivor leads");
    assert_eq!(answer.members.len(), 1);
    assert_eq!(
        engine.groups().heartbeat("g", generation, &a, None),
        Err(GroupError::UnknownMemberId)
    );
}

#[test]
fn a_request_after_the_last_session_ends_sees_the_group_empty_without_a_tick() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_000_000));
    let engine = open(dir.path(), &clock);
    stable_group_of_two(&engine, &clock);
    // Both sessions (10 s) started at the leader's SyncGroup; no tick runs from here.
    clock.advance(9_999);
    assert_eq!(
        engine.groups().delete_groups(&["g".into()]),
        vec![Some(GroupError::NonEmptyGroup { group: "g".into() })]
    );
    clock.advance(1);
    let listed = engine.groups().list_groups();
    assert_eq!(
        listed[0].state,
        GroupState::Empty,
        "expired at the deadline"
    );
    assert!(engine.groups().describe_group("g").members.is_empty());
    assert_eq!(engine.groups().delete_groups(&["g".into()]), vec![None]);
}

#[test]
fn leaving_empties_the_group_and_only_then_may_it_be_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_000_000));
    let engine = open(dir.path(), &clock);
    let (a, b, _) = stable_group_of_two(&engine, &clock);
    assert_eq!(
        engine.groups().delete_groups(&["g".into(), "nope".into()]),
        vec![
            Some(GroupError::NonEmptyGroup { group: "g".into() }),
            Some(GroupError::GroupIdNotFound {
                group: "nope".into()
            })
        ]
    );
    let leaving = |id: &str| LeavingMember {
        member_id: id.into(),
        group_instance_id: None,
        reason: None,
    };
    let left = engine
        .groups()
        .leave_group("g", &[leaving(&a), leaving(&b), leaving("x")])
        .unwrap();
    assert_eq!(
        left.iter().map(|(_, e)| e.clone()).collect::<Vec<_>>(),
        vec![None, None, Some(GroupError::UnknownMemberId)]
    );
    assert_eq!(engine.groups().describe_group("g").state, GroupState::Empty);
    assert_eq!(engine.groups().delete_groups(&["g".into()]), vec![None]);
    assert_eq!(engine.groups().describe_group("g").state, GroupState::Dead);
}

#[test]
fn groups_and_offsets_survive_a_reopen_and_expire_after_retention() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_000_000));
    {
        let engine = open(dir.path(), &clock);
        engine.create_topic("t", 1).unwrap();
        engine.ensure_offsets_topic().unwrap();
        // A simple consumer's commit (no membership) makes a group.
        let commit = CommitRequest {
            group_id: "simple".into(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
            offsets: vec![OffsetToCommit {
                topic: "t".into(),
                partition: 0,
                offset: 7,
                leader_epoch: -1,
                metadata: Some("m".into()),
            }],
        };
        engine.groups().commit_offsets(&commit).unwrap();
        stable_group_of_two(&engine, &clock);
        engine.shutdown().unwrap();
    }
    let engine = open(dir.path(), &clock);
    let fetched = engine.groups().fetch_offsets("simple", None);
    assert_eq!((fetched[0].offset, fetched[0].metadata.as_str()), (7, "m"));
    let g = engine.groups().describe_group("g");
    assert_eq!(
        (g.state, g.generation_id, g.members.len()),
        (GroupState::Stable, 1, 2)
    );
    // Nobody heartbeats after the restart: the members expire, the group empties.
    clock.advance(10_001);
    engine.groups().tick();
    assert_eq!(engine.groups().describe_group("g").state, GroupState::Empty);
    // offsets.retention.minutes (7 days) later the simple group's offset expires and
    // the empty groups go.
    clock.advance(7 * 24 * 3_600_000);
    engine.groups().tick();
    assert!(
        engine.groups().list_groups().is_empty(),
        "{:?}",
        engine.groups().list_groups()
    );
    assert_eq!(engine.groups().fetch_offsets("simple", None), vec![]);
}

#[test]
fn bad_joins_get_kafkas_errors() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_000_000));
    let engine = open(dir.path(), &clock);
    engine.ensure_offsets_topic().unwrap();
    let too_long = JoinRequest {
        session_timeout_ms: 1_800_001,
        ..join_request("", "a")
    };
    assert!(matches!(
        answered(&engine.groups().join_group(too_long)).error,
        Some(GroupError::InvalidSessionTimeout { .. })
    ));
    let no_group = JoinRequest {
        group_id: String::new(),
        ..join_request("", "a")
    };
    assert_eq!(
        answered(&engine.groups().join_group(no_group)).error,
        Some(GroupError::InvalidGroupId)
    );
    let unknown = join_request("made-up", "a");
    assert_eq!(
        answered(&engine.groups().join_group(unknown)).error,
        Some(GroupError::UnknownMemberId)
    );
    // The first join fixed the protocol type: another one is inconsistent.
    let (_, _pending) = join(&engine, "a");
    let other = JoinRequest {
        protocol_type: "connect".into(),
        ..join_request("", "b")
    };
    assert_eq!(
        answered(&engine.groups().join_group(other)).error,
        Some(GroupError::InconsistentGroupProtocol)
    );
}

#[test]
fn the_offsets_topic_is_compacted_and_refuses_other_writers() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_000_000));
    let engine = open(dir.path(), &clock);
    engine.ensure_offsets_topic().unwrap();
    let topic = engine.topic(OFFSETS_TOPIC).unwrap();
    assert!(topic.config().cleanup_policy.compact);
    assert!(matches!(
        topic.append_lines(b"k:v\n"),
        Err(EngineError::InternalTopic { .. })
    ));
    assert_eq!(
        engine.delete_topic(OFFSETS_TOPIC).unwrap_err().to_string(),
        "Cannot delete internal topic __consumer_offsets: it holds the consumer groups and their committed offsets"
    );
}

#[test]
fn concurrent_first_lookups_each_find_the_coordinator_ready() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_000_000));
    let engine = open(dir.path(), &clock);
    engine.create_topic("t", 1).unwrap();
    std::thread::scope(|scope| {
        for i in 0..8 {
            let engine = &engine;
            scope.spawn(move || {
                engine.ensure_offsets_topic().unwrap();
                // A commit right after the lookup has the offsets topic to go to.
                let commit = CommitRequest {
                    group_id: format!("g{i}"),
                    generation_id: -1,
                    member_id: String::new(),
                    group_instance_id: None,
                    offsets: vec![OffsetToCommit {
                        topic: "t".into(),
                        partition: 0,
                        offset: i,
                        leader_epoch: -1,
                        metadata: None,
                    }],
                };
                assert_eq!(engine.groups().commit_offsets(&commit), Ok(vec![None]));
            });
        }
    });
    assert_eq!(engine.groups().list_groups().len(), 8);
}
