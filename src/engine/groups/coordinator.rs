//! The coordinator's rules, ported from Kafka's `GroupMetadataManager` (classic
//! groups) and `OffsetMetadataManager`: every request and timer takes the one lock,
//! changes the groups and, where Kafka writes a record, appends it to
//! `__consumer_offsets` before the answer goes out, so the log's order is the order of
//! the changes and replaying it rebuilds them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crossbeam_channel::Sender;
use parking_lot::{Mutex, MutexGuard, RwLock};

use super::group::{Group, JoinTimer, Member};
use super::records::{GroupMetadataValue, OffsetCommitValue, OffsetsKey, StoredMember};
use super::subscription::{assigned_partitions, CONSUMER_PROTOCOL_TYPE};
use super::*;
use crate::engine::clock::Clock;
use crate::engine::config::BrokerConfig;
use crate::engine::error::Result;
use crate::engine::format::{BatchBuilder, EndTxnMarker, OFFSETS_TOPIC};
use crate::engine::metadata_files::Uuid;
use crate::engine::partition::Partition;

/// Kafka's `group.consumer.session.timeout`-independent wait for a new member's first
/// rejoin (`GroupCoordinatorConfig.CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS`).
const NEW_MEMBER_JOIN_TIMEOUT_MS: i64 = 5 * 60 * 1000;

/// How much of the offsets topic a replay reads at a time.
const REPLAY_READ_BYTES: u64 = 1 << 20;

/// The one group coordinator of an engine (Kafka runs one per `__consumer_offsets`
/// partition; kpfs has one partition and one broker).
pub struct GroupCoordinator {
    state: Mutex<Coordinator>,
    clock: Arc<dyn Clock>,
    broker: Arc<RwLock<BrokerConfig>>,
}

/// What the lock guards: the groups, and where their records go.
struct Coordinator {
    groups: BTreeMap<String, Group>,
    /// TxnOffsetCommit's offsets by producer id, (group, offset), until the marker of
    /// the producer's transaction in `__consumer_offsets` commits or drops them (Kafka's
    /// `pendingTransactionalOffsetCommits`).
    pending_txn_offsets: BTreeMap<i64, Vec<(String, CommittedOffset)>>,
    offsets_topic: Option<Arc<Partition>>,
    expiry_checked_ms: i64,
    /// The engine clock and the settings as the request holding the lock found them.
    now_ms: i64,
    settings: GroupSettings,
}

/// A record of `__consumer_offsets`: key, and value (`None`: a tombstone).
type OffsetsRecord = (Vec<u8>, Option<Vec<u8>>);

impl GroupCoordinator {
    /// The coordinator of an engine whose offsets topic, if it exists, is `offsets`:
    /// its records are replayed to rebuild the groups and committed offsets.
    pub(crate) fn open(
        offsets: Option<Arc<Partition>>,
        clock: Arc<dyn Clock>,
        broker: Arc<RwLock<BrokerConfig>>,
    ) -> Result<GroupCoordinator> {
        let now_ms = clock.now_ms();
        let settings = GroupSettings::of(&broker.read());
        let mut coordinator = Coordinator {
            groups: BTreeMap::new(),
            pending_txn_offsets: BTreeMap::new(),
            offsets_topic: None,
            expiry_checked_ms: now_ms,
            now_ms,
            settings,
        };
        if let Some(topic) = offsets {
            coordinator.replay(&topic)?;
            coordinator.offsets_topic = Some(topic);
        }
        Ok(GroupCoordinator {
            state: Mutex::new(coordinator),
            clock,
            broker,
        })
    }

    /// The offsets topic, once the engine created it (Kafka's FindCoordinator does).
    pub(crate) fn set_offsets_topic(&self, topic: Arc<Partition>) {
        self.state.lock().offsets_topic = Some(topic);
    }

    /// Whether group records have somewhere to go.
    pub(crate) fn has_offsets_topic(&self) -> bool {
        self.state.lock().offsets_topic.is_some()
    }

    fn lock(&self) -> MutexGuard<'_, Coordinator> {
        let mut state = self.state.lock();
        state.now_ms = self.clock.now_ms();
        state.settings = GroupSettings::of(&self.broker.read());
        state
    }

    /// The state after the due timers of the named groups fired: Kafka's timers fire at
    /// their deadline, before any later request, while the scheduler's tick may come a
    /// tick after it; so a request sees a session that ended as ended (a DeleteGroups
    /// just after the last member's session is not NON_EMPTY_GROUP).
    fn lock_groups(&self, group_ids: &[&str]) -> MutexGuard<'_, Coordinator> {
        let mut state = self.lock();
        for id in group_ids {
            state.fire_due_timers(id);
        }
        state
    }

    /// [`Self::lock_groups`] for a request that reads every group.
    fn lock_every_group(&self) -> MutexGuard<'_, Coordinator> {
        let mut state = self.lock();
        state.fire_every_due_timer();
        state
    }

    /// JoinGroup: the answer comes when the group's rebalance completes (or at once for
    /// an error, MEMBER_ID_REQUIRED, or a member already in the current generation).
    pub fn join_group(&self, request: JoinRequest) -> Pending<JoinResponse> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.lock_groups(&[&request.group_id]).join(request, tx);
        rx
    }

    /// SyncGroup: a follower's answer comes when the leader's assignment is stored.
    pub fn sync_group(&self, request: SyncRequest) -> Pending<SyncResponse> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.lock_groups(&[&request.group_id]).sync(request, tx);
        rx
    }

    /// Heartbeat: `Err(RebalanceInProgress)` tells the member to rejoin.
    pub fn heartbeat(
        &self,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        group_instance_id: Option<&str>,
    ) -> Result<(), GroupError> {
        self.lock_groups(&[group_id]).heartbeat(
            group_id,
            generation_id,
            member_id,
            group_instance_id,
        )
    }

    /// LeaveGroup: (member id, outcome) per member named, in order; `Err` for the whole
    /// request (an unknown group).
    pub fn leave_group(
        &self,
        group_id: &str,
        members: &[LeavingMember],
    ) -> Result<Vec<(String, Option<GroupError>)>, GroupError> {
        self.lock_groups(&[group_id]).leave(group_id, members)
    }

    /// OffsetCommit: one outcome per offset, in order; `Err` refuses them all (Kafka
    /// answers every partition with that error). Durable when it returns: the records
    /// are in `__consumer_offsets`. The caller checks that each topic exists (Kafka's
    /// request handler does, before the coordinator).
    pub fn commit_offsets(
        &self,
        request: &CommitRequest,
    ) -> Result<Vec<Option<GroupError>>, GroupError> {
        self.lock_groups(&[&request.group_id]).commit(request, None)
    }

    /// TxnOffsetCommit (Kafka's `handleTxnCommitOffsets`): checked as an OffsetCommit,
    /// written to `__consumer_offsets` in a transactional batch of `producer` (id,
    /// epoch), whose partition the caller verified is in the producer's transaction, and
    /// kept pending: OffsetFetch sees the offsets once the transaction commits
    /// ([`Self::complete_transaction`]).
    pub fn commit_txn_offsets(
        &self,
        request: &CommitRequest,
        producer: (i64, i16),
    ) -> Result<Vec<Option<GroupError>>, GroupError> {
        self.lock_groups(&[&request.group_id])
            .commit(request, Some(producer))
    }

    /// The marker of `producer_id`'s transaction was written to `__consumer_offsets`: its
    /// pending offsets are committed, or dropped.
    pub(crate) fn complete_transaction(&self, producer_id: i64, commit: bool) {
        self.lock().complete_transaction(producer_id, commit);
    }

    /// OffsetFetch: the named partitions (every committed one when `None`); an unknown
    /// group has nothing committed, which is not an error. A partition with a
    /// transaction's offset pending says so ([`FetchedOffset::pending_txn`]).
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        partitions: Option<&[(String, i32)]>,
    ) -> Vec<FetchedOffset> {
        // An empty group id is a group like any other here, as Kafka keeps it for old
        // clients that commit without one.
        let state = self.lock_groups(&[group_id]);
        let group = state.groups.get(group_id);
        let pending: BTreeSet<(&str, i32)> = state
            .pending_txn_offsets
            .values()
            .flatten()
            .filter(|(g, _)| g == group_id)
            .map(|(_, c)| (c.topic.as_str(), c.partition))
            .collect();
        let fetched = |topic: &str, partition: i32| {
            let committed = group.and_then(|g| g.offsets.get(&(topic.to_string(), partition)));
            FetchedOffset {
                topic: topic.to_string(),
                partition,
                offset: committed.map_or(-1, |c| c.offset),
                leader_epoch: committed.map_or(-1, |c| c.leader_epoch),
                metadata: committed.map(|c| c.metadata.clone()).unwrap_or_default(),
                pending_txn: pending.contains(&(topic, partition)),
            }
        };
        match partitions {
            Some(partitions) => partitions.iter().map(|(t, p)| fetched(t, *p)).collect(),
            None => group
                .map(|g| g.offsets.keys().map(|(t, p)| fetched(t, *p)).collect())
                .unwrap_or_default(),
        }
    }

    /// ListGroups: every group, by id.
    pub fn list_groups(&self) -> Vec<GroupListing> {
        self.lock_every_group()
            .groups
            .values()
            .map(|g| GroupListing {
                group_id: g.id.clone(),
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                state: g.state,
            })
            .collect()
    }

    /// DescribeGroups: an unknown group is Dead with no members, as Kafka answers. As
    /// Kafka's `ClassicGroup.describe`, the protocol and the members' metadata and
    /// assignments are given only while the group is Stable.
    pub fn describe_group(&self, group_id: &str) -> GroupDescription {
        let state = self.lock_groups(&[group_id]);
        let Some(g) = state.groups.get(group_id) else {
            return GroupDescription {
                group_id: group_id.to_string(),
                state: GroupState::Dead,
                protocol_type: String::new(),
                protocol: String::new(),
                generation_id: -1,
                leader: None,
                members: Vec::new(),
                state_since_ms: state.now_ms,
            };
        };
        let stable = g.is(GroupState::Stable);
        let protocol = g.protocol_name.clone().unwrap_or_default();
        GroupDescription {
            group_id: g.id.clone(),
            state: g.state,
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            protocol: if stable {
                protocol.clone()
            } else {
                String::new()
            },
            generation_id: g.generation,
            leader: g.leader.clone(),
            members: g
                .members
                .iter()
                .map(|m| MemberDescription {
                    member_id: m.id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: if stable {
                        m.metadata(&protocol).to_vec()
                    } else {
                        Vec::new()
                    },
                    assignment: if stable {
                        m.assignment.clone()
                    } else {
                        Vec::new()
                    },
                    assigned: if stable
                        && g.protocol_type.as_deref() == Some(CONSUMER_PROTOCOL_TYPE)
                    {
                        assigned_partitions(&m.assignment)
                    } else {
                        None
                    },
                    session_timeout_ms: m.session_timeout_ms,
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                })
                .collect(),
            state_since_ms: g.state_since_ms,
        }
    }

    /// The group's committed offsets by topic and partition; `None` for an unknown group.
    pub fn committed_offsets(&self, group_id: &str) -> Option<Vec<CommittedOffset>> {
        let state = self.lock_groups(&[group_id]);
        let group = state.groups.get(group_id)?;
        Some(group.offsets.values().cloned().collect())
    }

    /// Every group's committed offset of `topic`'s partition 0, by group id.
    pub fn committed_to_partition(&self, topic: &str, partition: i32) -> Vec<(String, i64)> {
        let key = (topic.to_string(), partition);
        self.lock_every_group()
            .groups
            .values()
            .filter_map(|g| g.offsets.get(&key).map(|c| (g.id.clone(), c.offset)))
            .collect()
    }

    /// DeleteGroups: one outcome per group, in order. A group with members is refused
    /// with NON_EMPTY_GROUP; an unknown one with GROUP_ID_NOT_FOUND.
    pub fn delete_groups(&self, group_ids: &[String]) -> Vec<Option<GroupError>> {
        let ids: Vec<&str> = group_ids.iter().map(String::as_str).collect();
        let mut state = self.lock_groups(&ids);
        group_ids
            .iter()
            .map(|id| state.delete_group(id).err())
            .collect()
    }

    /// OffsetDelete: one outcome per partition; `Err` for the whole request.
    pub fn delete_offsets(
        &self,
        group_id: &str,
        partitions: &[(String, i32)],
    ) -> Result<Vec<Option<GroupError>>, GroupError> {
        self.lock_groups(&[group_id])
            .delete_offsets(group_id, partitions)
    }

    /// Fires due timers: initial rebalance delays, rebalance and sync timeouts, session
    /// expiry, and offsets retention. The engine's scheduler calls it every tick, for
    /// the answers that wait on a timer; requests fire the ones they depend on first.
    pub fn tick(&self) {
        self.lock().tick();
    }
}

impl GroupSettings {
    fn of(broker: &BrokerConfig) -> GroupSettings {
        broker.group_settings()
    }
}

fn join_error(member_id: &str, error: GroupError) -> JoinResponse {
    JoinResponse {
        error: Some(error),
        generation_id: -1,
        protocol_type: None,
        protocol_name: None,
        leader: String::new(),
        member_id: member_id.to_string(),
        members: Vec::new(),
        skip_assignment: false,
    }
}

fn sync_error(error: GroupError) -> SyncResponse {
    SyncResponse {
        error: Some(error),
        protocol_type: None,
        protocol_name: None,
        assignment: Vec::new(),
    }
}

/// Kafka's `generateMemberId`: the client id (or a static member's instance id), a
/// dash and a random UUID.
fn new_member_id(request: &JoinRequest) -> String {
    let prefix = request
        .group_instance_id
        .as_deref()
        .unwrap_or(&request.client_id);
    // /dev/urandom failing is a broken machine; a clock-based id still differs per join.
    let bits = Uuid::random().map_or_else(
        |_| (request_counter() as u128).to_be_bytes(),
        |u| u.to_bytes(),
    );
    format!("{prefix}-{}", uuid::Uuid::from_bytes(bits).hyphenated())
}

fn request_counter() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

fn send<T>(waiter: Option<Sender<T>>, answer: T) {
    if let Some(tx) = waiter {
        // The requester may be gone (its connection closed): nobody to tell.
        let _ = tx.send(answer);
    }
}

impl Coordinator {
    fn group_mut(&mut self, id: &str) -> Option<&mut Group> {
        self.groups.get_mut(id)
    }

    /// The group a replayed record is about, made when its first record comes.
    fn loaded_group(&mut self, id: &str) -> &mut Group {
        let now = self.now_ms;
        self.groups
            .entry(id.to_string())
            .or_insert_with(|| Group::new(id, now))
    }

    // ---- JoinGroup ----

    fn join(&mut self, request: JoinRequest, tx: Sender<JoinResponse>) {
        let s = self.settings;
        if request.group_id.is_empty() {
            return send(
                Some(tx),
                join_error(&request.member_id, GroupError::InvalidGroupId),
            );
        }
        if request.session_timeout_ms < s.min_session_timeout_ms
            || request.session_timeout_ms > s.max_session_timeout_ms
        {
            let error = GroupError::InvalidSessionTimeout {
                timeout_ms: request.session_timeout_ms,
                min_ms: s.min_session_timeout_ms,
                max_ms: s.max_session_timeout_ms,
            };
            return send(Some(tx), join_error(&request.member_id, error));
        }
        if let Some(reason) = &request.reason {
            tracing::info!(group = %request.group_id, member = %request.member_id, %reason, "JoinGroup with a reason");
        }
        let unknown_member = request.member_id.is_empty();
        if !self.groups.contains_key(&request.group_id) {
            if !unknown_member {
                return send(
                    Some(tx),
                    join_error(&request.member_id, GroupError::UnknownMemberId),
                );
            }
            // Kafka records a new group at once, so it survives a restart empty.
            let group = Group::new(&request.group_id, self.now_ms);
            if let Err(e) = self.store(&[group_metadata_record(&group)]) {
                return send(Some(tx), join_error("", e));
            }
            self.groups.insert(request.group_id.clone(), group);
        }
        let now = self.now_ms;
        let group = self.groups.get_mut(&request.group_id).expect("present");
        if !accepts_joining_member(group, &request.member_id, s.max_size) {
            group.remove(&request.member_id);
            return send(
                Some(tx),
                join_error("", GroupError::GroupMaxSizeReached { max: s.max_size }),
            );
        }
        let group_id = request.group_id.clone();
        if unknown_member {
            self.join_new_member(&group_id, request, tx, now);
        } else {
            self.join_existing_member(&group_id, request, tx);
        }
    }

    fn join_new_member(
        &mut self,
        group_id: &str,
        request: JoinRequest,
        tx: Sender<JoinResponse>,
        now: i64,
    ) {
        let group = self.group_mut(group_id).expect("present");
        if !group.supports_protocols(&request.protocol_type, &request.protocols) {
            return send(
                Some(tx),
                join_error("", GroupError::InconsistentGroupProtocol),
            );
        }
        let member_id = new_member_id(&request);
        if let Some(instance_id) = request.group_instance_id.clone() {
            match group.static_member_id(&instance_id).map(str::to_string) {
                Some(old_id) => {
                    self.replace_static_member(group_id, &old_id, &member_id, request, tx)
                }
                None => self.add_member_then_rebalance(group_id, &member_id, request, tx),
            }
        } else if request.require_known_member_id {
            group.pending_join.insert(
                member_id.clone(),
                now + i64::from(request.session_timeout_ms),
            );
            send(
                Some(tx),
                join_error(
                    &member_id,
                    GroupError::MemberIdRequired {
                        member_id: member_id.clone(),
                    },
                ),
            );
        } else {
            self.add_member_then_rebalance(group_id, &member_id, request, tx);
        }
    }

    fn join_existing_member(
        &mut self,
        group_id: &str,
        request: JoinRequest,
        tx: Sender<JoinResponse>,
    ) {
        let member_id = request.member_id.clone();
        let group = self.group_mut(group_id).expect("present");
        if !group.supports_protocols(&request.protocol_type, &request.protocols) {
            return send(
                Some(tx),
                join_error(&member_id, GroupError::InconsistentGroupProtocol),
            );
        }
        if group.pending_join.contains_key(&member_id) {
            return self.add_member_then_rebalance(group_id, &member_id, request, tx);
        }
        if let Err(e) = validate_member(group, &member_id, request.group_instance_id.as_deref()) {
            return send(Some(tx), join_error(&member_id, e));
        }
        let matches = group
            .member(&member_id)
            .is_some_and(|m| m.matches(&request.protocols));
        match group.state {
            GroupState::PreparingRebalance => {
                self.update_member_then_rebalance(group_id, request, tx)
            }
            GroupState::CompletingRebalance if matches => {
                // The member lost the answer of this generation: give it again.
                send(Some(tx), group.join_answer(&member_id, false));
            }
            GroupState::CompletingRebalance => {
                self.update_member_then_rebalance(group_id, request, tx)
            }
            GroupState::Stable if group.is_leader(&member_id) || !matches => {
                // A leader's rejoin forces a rebalance: it may have seen the topics
                // change, which member metadata does not show.
                self.update_member_then_rebalance(group_id, request, tx)
            }
            GroupState::Stable => {
                let mut answer = group.join_answer(&member_id, false);
                answer.members.clear();
                send(Some(tx), answer);
            }
            GroupState::Empty | GroupState::Dead => {
                send(
                    Some(tx),
                    join_error(&member_id, GroupError::UnknownMemberId),
                );
            }
        }
    }

    fn add_member_then_rebalance(
        &mut self,
        group_id: &str,
        member_id: &str,
        request: JoinRequest,
        tx: Sender<JoinResponse>,
    ) {
        let now = self.now_ms;
        let group = self.group_mut(group_id).expect("present");
        if group.is(GroupState::PreparingRebalance) && group.previous_state == GroupState::Empty {
            group.new_member_added = true;
        }
        group.add(Member {
            id: member_id.to_string(),
            instance_id: request.group_instance_id,
            client_id: request.client_id,
            client_host: request.client_host,
            rebalance_timeout_ms: request.rebalance_timeout_ms,
            session_timeout_ms: request.session_timeout_ms,
            protocol_type: request.protocol_type,
            protocols: request.protocols,
            assignment: Vec::new(),
            awaiting_join: Some(tx),
            awaiting_sync: None,
            is_new: true,
            heartbeat_deadline_ms: now + NEW_MEMBER_JOIN_TIMEOUT_MS,
        });
        self.maybe_prepare_rebalance_or_complete_join(group_id);
    }

    fn update_member_then_rebalance(
        &mut self,
        group_id: &str,
        request: JoinRequest,
        tx: Sender<JoinResponse>,
    ) {
        let group = self.group_mut(group_id).expect("present");
        let member = group.member_mut(&request.member_id).expect("validated");
        member.protocols = request.protocols;
        member.rebalance_timeout_ms = request.rebalance_timeout_ms;
        member.session_timeout_ms = request.session_timeout_ms;
        member.awaiting_join = Some(tx);
        self.maybe_prepare_rebalance_or_complete_join(group_id);
    }

    /// Kafka's `updateStaticMemberThenRebalanceOrCompleteJoin`: a static member back
    /// with a new member id takes its old place; the old id is fenced.
    fn replace_static_member(
        &mut self,
        group_id: &str,
        old_id: &str,
        new_id: &str,
        request: JoinRequest,
        tx: Sender<JoinResponse>,
    ) {
        let now = self.now_ms;
        let group = self.group_mut(group_id).expect("present");
        let previous_leader = group.leader.clone();
        let at = group
            .members
            .iter()
            .position(|m| m.id == old_id)
            .expect("static member");
        let old = &mut group.members[at];
        send(
            old.awaiting_join.take(),
            join_error(old_id, GroupError::FencedInstanceId),
        );
        send(
            old.awaiting_sync.take(),
            sync_error(GroupError::FencedInstanceId),
        );
        old.id = new_id.to_string();
        old.protocols = request.protocols;
        old.rebalance_timeout_ms = request.rebalance_timeout_ms;
        old.session_timeout_ms = request.session_timeout_ms;
        old.heartbeat_deadline_ms = now + i64::from(request.session_timeout_ms);
        if group.is_leader(old_id) {
            group.leader = Some(new_id.to_string());
        }
        match group.state {
            GroupState::Stable if group.select_protocol() == group.protocol_name => {
                // Same protocol: no rebalance; the new id is recorded with the
                // current assignment, and the member resumes it.
                let stored = self.store(&[group_metadata_record(
                    self.groups.get(group_id).expect("present"),
                )]);
                let group = self.group_mut(group_id).expect("present");
                match stored {
                    Ok(()) => {
                        let is_leader = group.is_leader(new_id);
                        let skip = request.supports_skip_assignment && is_leader;
                        let mut answer = group.join_answer(new_id, skip);
                        if !request.supports_skip_assignment {
                            answer.members.clear();
                            answer.leader = previous_leader.unwrap_or_default();
                        }
                        send(Some(tx), answer);
                    }
                    Err(e) => send(Some(tx), join_error("", e)),
                }
            }
            GroupState::Stable => {
                group.member_mut(new_id).expect("replaced").awaiting_join = Some(tx);
                self.maybe_prepare_rebalance_or_complete_join(group_id);
            }
            GroupState::CompletingRebalance => {
                group.member_mut(new_id).expect("replaced").awaiting_join = Some(tx);
                self.prepare_rebalance(group_id);
            }
            _ => {
                group.member_mut(new_id).expect("replaced").awaiting_join = Some(tx);
                self.maybe_complete_join_phase(group_id);
            }
        }
    }

    fn maybe_prepare_rebalance_or_complete_join(&mut self, group_id: &str) {
        if self.groups[group_id].can_rebalance() {
            self.prepare_rebalance(group_id);
        } else {
            self.maybe_complete_join_phase(group_id);
        }
    }

    fn prepare_rebalance(&mut self, group_id: &str) {
        let now = self.now_ms;
        let initial_delay = i64::from(self.settings.initial_rebalance_delay_ms);
        let group = self.group_mut(group_id).expect("present");
        if group.is(GroupState::CompletingRebalance) {
            reset_and_propagate_assignment(group, GroupError::RebalanceInProgress, now);
        }
        group.pending_sync.clear();
        group.sync_timer = None;
        let initial = group.is(GroupState::Empty);
        if initial {
            group.join_timer = Some(JoinTimer::InitialDelay {
                due_ms: now + initial_delay,
                delay_ms: initial_delay,
                remaining_ms: (group.rebalance_timeout_ms() - initial_delay).max(0),
            });
        }
        group.transition_to(GroupState::PreparingRebalance, now);
        tracing::info!(
            group = group_id,
            generation = group.generation,
            "preparing to rebalance group"
        );
        if !initial {
            if group.all_members_joined() {
                self.complete_join(group_id);
            } else {
                let due_ms = now + group.rebalance_timeout_ms();
                group.join_timer = Some(JoinTimer::Rebalance { due_ms });
            }
        }
    }

    /// Kafka's `maybeCompleteJoinPhase`: not in an initial rebalance (its delay decides).
    fn maybe_complete_join_phase(&mut self, group_id: &str) {
        let group = &self.groups[group_id];
        if group.is(GroupState::PreparingRebalance)
            && group.previous_state != GroupState::Empty
            && group.all_members_joined()
        {
            self.complete_join(group_id);
        }
    }

    fn complete_initial_rebalance_or_wait(
        &mut self,
        group_id: &str,
        delay_ms: i64,
        remaining_ms: i64,
    ) {
        let now = self.now_ms;
        let initial_delay = i64::from(self.settings.initial_rebalance_delay_ms);
        let group = self.group_mut(group_id).expect("present");
        if group.new_member_added && remaining_ms != 0 {
            group.new_member_added = false;
            let next_delay = initial_delay.min(remaining_ms);
            group.join_timer = Some(JoinTimer::InitialDelay {
                due_ms: now + next_delay,
                delay_ms: next_delay,
                remaining_ms: (remaining_ms - delay_ms).max(0),
            });
        } else {
            self.complete_join(group_id);
        }
    }

    /// Kafka's `completeClassicGroupJoin`.
    fn complete_join(&mut self, group_id: &str) {
        let now = self.now_ms;
        let group = self.group_mut(group_id).expect("present");
        group.join_timer = None;
        let gone: Vec<String> = group
            .members
            .iter()
            .filter(|m| m.awaiting_join.is_none() && m.instance_id.is_none())
            .map(|m| m.id.clone())
            .collect();
        for id in &gone {
            tracing::info!(group = group_id, member = %id, "removing member that did not rejoin before the rebalance timeout");
            remove_member(group, id);
        }
        if !group.elect_joined_leader() && !group.members.is_empty() {
            let due_ms = now + group.rebalance_timeout_ms();
            group.join_timer = Some(JoinTimer::Rebalance { due_ms });
            return;
        }
        group.init_next_generation(now);
        if group.is(GroupState::Empty) {
            let record = group_metadata_record(group);
            if let Err(e) = self.store(&[record]) {
                tracing::warn!(group = group_id, error = %e, "could not record the empty group");
            }
            return;
        }
        tracing::info!(
            group = group_id,
            generation = group.generation,
            members = group.members.len(),
            "group formed a new generation"
        );
        let answers: Vec<JoinResponse> = group
            .members
            .iter()
            .map(|m| group.join_answer(&m.id, false))
            .collect();
        let generation = group.generation;
        let mut sync_due = 0;
        for (member, answer) in group.members.iter_mut().zip(answers) {
            send(member.awaiting_join.take(), answer);
            member.heartbeat_deadline_ms = now + i64::from(member.session_timeout_ms);
            member.is_new = false;
            sync_due = sync_due.max(i64::from(member.rebalance_timeout_ms));
        }
        group.pending_sync = group.members.iter().map(|m| m.id.clone()).collect();
        group.sync_timer = Some((now + sync_due, generation));
    }

    /// Kafka's `expirePendingSync`: members of `generation` that never sent their
    /// SyncGroup are removed, and the others rebalance.
    fn expire_pending_sync(&mut self, group_id: &str, generation: i32) {
        let group = self.group_mut(group_id).expect("present");
        group.sync_timer = None;
        if group.generation != generation
            || !matches!(
                group.state,
                GroupState::CompletingRebalance | GroupState::Stable
            )
            || group.pending_sync.is_empty()
        {
            return;
        }
        let missing: Vec<String> = group.pending_sync.iter().cloned().collect();
        for id in &missing {
            tracing::info!(group = group_id, member = %id, "removing member that did not sync before the rebalance timeout");
            remove_member(group, id);
        }
        self.prepare_rebalance(group_id);
    }

    // ---- SyncGroup ----

    fn sync(&mut self, request: SyncRequest, tx: Sender<SyncResponse>) {
        if request.group_id.is_empty() {
            return send(Some(tx), sync_error(GroupError::InvalidGroupId));
        }
        let Some(group) = self.groups.get_mut(&request.group_id) else {
            return send(Some(tx), sync_error(GroupError::UnknownMemberId));
        };
        if group.members.is_empty() {
            return send(Some(tx), sync_error(GroupError::UnknownMemberId));
        }
        if let Err(e) = validate_member(
            group,
            &request.member_id,
            request.group_instance_id.as_deref(),
        ) {
            return send(Some(tx), sync_error(e));
        }
        if request.generation_id != group.generation {
            return send(Some(tx), sync_error(GroupError::IllegalGeneration));
        }
        let inconsistent =
            |asked: &Option<String>, have: &Option<String>| asked.is_some() && asked != have;
        if inconsistent(&request.protocol_type, &group.protocol_type)
            || inconsistent(&request.protocol_name, &group.protocol_name)
        {
            return send(Some(tx), sync_error(GroupError::InconsistentGroupProtocol));
        }
        match group.state {
            GroupState::PreparingRebalance => {
                send(Some(tx), sync_error(GroupError::RebalanceInProgress))
            }
            GroupState::CompletingRebalance => {
                group
                    .member_mut(&request.member_id)
                    .expect("validated")
                    .awaiting_sync = Some(tx);
                remove_pending_sync(group, &request.member_id);
                if group.is_leader(&request.member_id) {
                    self.store_assignment(&request);
                }
            }
            GroupState::Stable => {
                remove_pending_sync(group, &request.member_id);
                let member = group.member(&request.member_id).expect("validated");
                send(
                    Some(tx),
                    SyncResponse {
                        error: None,
                        protocol_type: group.protocol_type.clone(),
                        protocol_name: group.protocol_name.clone(),
                        assignment: member.assignment.clone(),
                    },
                );
            }
            GroupState::Empty | GroupState::Dead => {
                send(Some(tx), sync_error(GroupError::UnknownMemberId))
            }
        }
    }

    /// The leader's SyncGroup: the assignment is recorded, then every member waiting
    /// gets its part and the group is Stable.
    fn store_assignment(&mut self, request: &SyncRequest) {
        let now = self.now_ms;
        let group_id = request.group_id.as_str();
        let group = self.group_mut(group_id).expect("present");
        let given: BTreeMap<&str, &Vec<u8>> = request
            .assignments
            .iter()
            .map(|(id, a)| (id.as_str(), a))
            .collect();
        let previous: Vec<Vec<u8>> = group.members.iter().map(|m| m.assignment.clone()).collect();
        for m in &mut group.members {
            m.assignment = given
                .get(m.id.as_str())
                .map(|a| a.to_vec())
                .unwrap_or_default();
        }
        let record = group_metadata_record(group);
        let stored = self.store(&[record]);
        let group = self.group_mut(group_id).expect("present");
        match stored {
            Ok(()) => {
                propagate_assignment(group, None, now);
                group.transition_to(GroupState::Stable, now);
                tracing::info!(
                    group = group_id,
                    generation = group.generation,
                    "group is stable"
                );
            }
            Err(e) => {
                for (m, a) in group.members.iter_mut().zip(previous) {
                    m.assignment = a;
                }
                reset_and_propagate_assignment(group, e, now);
                self.maybe_prepare_rebalance_or_complete_join(group_id);
            }
        }
    }

    // ---- Heartbeat, LeaveGroup ----

    fn heartbeat(
        &mut self,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), GroupError> {
        if group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        let now = self.now_ms;
        let group = self
            .groups
            .get_mut(group_id)
            .ok_or(GroupError::UnknownMemberId)?;
        validate_member(group, member_id, instance_id)?;
        if generation_id != group.generation {
            return Err(GroupError::IllegalGeneration);
        }
        let state = group.state;
        let member = group.member_mut(member_id).expect("validated");
        match state {
            GroupState::Empty | GroupState::Dead => Err(GroupError::UnknownMemberId),
            GroupState::PreparingRebalance => {
                member.heartbeat_deadline_ms = now + i64::from(member.session_timeout_ms);
                Err(GroupError::RebalanceInProgress)
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                member.heartbeat_deadline_ms = now + i64::from(member.session_timeout_ms);
                Ok(())
            }
        }
    }

    fn leave(
        &mut self,
        group_id: &str,
        leaving: &[LeavingMember],
    ) -> Result<Vec<(String, Option<GroupError>)>, GroupError> {
        if group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        let group = self
            .groups
            .get_mut(group_id)
            .ok_or(GroupError::UnknownMemberId)?;
        let mut outcomes = Vec::with_capacity(leaving.len());
        let mut removed_any = false;
        for m in leaving {
            let outcome = if m.member_id.is_empty() {
                match m
                    .group_instance_id
                    .as_deref()
                    .and_then(|i| group.static_member_id(i))
                    .map(str::to_string)
                {
                    Some(id) => {
                        remove_member(group, &id);
                        Ok(())
                    }
                    None => Err(GroupError::UnknownMemberId),
                }
            } else if group.pending_join.remove(&m.member_id).is_some() {
                Ok(())
            } else {
                validate_member(group, &m.member_id, m.group_instance_id.as_deref()).map(|()| {
                    remove_member(group, &m.member_id);
                })
            };
            if outcome.is_ok() {
                tracing::info!(group = group_id, member = %m.member_id, reason = m.reason.as_deref().unwrap_or("not provided"), "member left the group");
                removed_any = true;
            }
            outcomes.push((m.member_id.clone(), outcome.err()));
        }
        if removed_any {
            match group.state {
                GroupState::Stable | GroupState::CompletingRebalance => {
                    self.maybe_prepare_rebalance_or_complete_join(group_id)
                }
                GroupState::PreparingRebalance => self.maybe_complete_join_phase(group_id),
                GroupState::Empty | GroupState::Dead => {}
            }
        }
        Ok(outcomes)
    }

    /// Kafka's `removeMemberAndUpdateClassicGroup` (session expiry).
    fn expire_member(&mut self, group_id: &str, member_id: &str) {
        let group = self.group_mut(group_id).expect("present");
        tracing::info!(
            group = group_id,
            member = member_id,
            "member's session expired: removing it from the group"
        );
        remove_member(group, member_id);
        match group.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.maybe_prepare_rebalance_or_complete_join(group_id)
            }
            GroupState::PreparingRebalance if group.all_members_joined() => {
                self.complete_join(group_id)
            }
            _ => {}
        }
    }

    // ---- Offsets ----

    fn commit(
        &mut self,
        request: &CommitRequest,
        txn: Option<(i64, i16)>,
    ) -> Result<Vec<Option<GroupError>>, GroupError> {
        let now = self.now_ms;
        let max_metadata = self.settings.offset_metadata_max_bytes;
        // An empty group id commits like any other (Kafka: "for backwards compatibility").
        let created = !self.groups.contains_key(&request.group_id);
        // A member's commit to a group that does not exist: Kafka's OffsetCommit v9+
        // answers GROUP_ID_NOT_FOUND, older versions ILLEGAL_GENERATION (the wire maps).
        // A transactional commit makes the group (Kafka's `handleTxnCommitOffsets`).
        if created && request.generation_id >= 0 && txn.is_none() {
            return Err(GroupError::GroupIdNotFound {
                group: request.group_id.clone(),
            });
        }
        let mut group = self
            .groups
            .remove(&request.group_id)
            .unwrap_or_else(|| Group::new(&request.group_id, now));
        let outcome = self.commit_to(&mut group, request, (now, max_metadata), txn);
        // A group made for a refused commit is not kept; one made for an accepted
        // commit is (a simple consumer's group, Kafka's `getOrMaybeCreateClassicGroup`).
        if !(created && outcome.is_err()) {
            self.groups.insert(request.group_id.clone(), group);
        }
        outcome
    }

    fn commit_to(
        &mut self,
        group: &mut Group,
        request: &CommitRequest,
        (now, max_metadata): (i64, i32),
        txn: Option<(i64, i16)>,
    ) -> Result<Vec<Option<GroupError>>, GroupError> {
        validate_offset_commit(
            group,
            &request.member_id,
            request.group_instance_id.as_deref(),
            request.generation_id,
        )?;
        if matches!(
            group.state,
            GroupState::Stable | GroupState::PreparingRebalance
        ) {
            if let Some(m) = group.member_mut(&request.member_id) {
                m.heartbeat_deadline_ms = now + i64::from(m.session_timeout_ms);
            }
        }
        let mut outcomes = Vec::with_capacity(request.offsets.len());
        let mut records = Vec::new();
        let mut accepted = Vec::new();
        for o in &request.offsets {
            let metadata = o.metadata.clone().unwrap_or_default();
            if metadata.len() > usize::try_from(max_metadata).unwrap_or(0) {
                outcomes.push(Some(GroupError::OffsetMetadataTooLarge {
                    max: max_metadata,
                }));
                continue;
            }
            outcomes.push(None);
            let committed = CommittedOffset {
                topic: o.topic.clone(),
                partition: o.partition,
                offset: o.offset,
                leader_epoch: o.leader_epoch,
                metadata,
                commit_timestamp_ms: now,
            };
            records.push(offset_commit_record(&group.id, &committed));
            accepted.push(committed);
        }
        if !records.is_empty() {
            self.store_as(&records, txn)?;
        }
        match txn {
            None => {
                for c in accepted {
                    group.offsets.insert((c.topic.clone(), c.partition), c);
                }
            }
            Some((producer_id, _)) => self
                .pending_txn_offsets
                .entry(producer_id)
                .or_default()
                .extend(accepted.into_iter().map(|c| (group.id.clone(), c))),
        }
        Ok(outcomes)
    }

    fn complete_transaction(&mut self, producer_id: i64, commit: bool) {
        let Some(pending) = self.pending_txn_offsets.remove(&producer_id) else {
            return;
        };
        if !commit {
            return;
        }
        for (group_id, c) in pending {
            self.loaded_group(&group_id)
                .offsets
                .insert((c.topic.clone(), c.partition), c);
        }
    }

    fn delete_group(&mut self, group_id: &str) -> Result<(), GroupError> {
        let group = self
            .groups
            .get(group_id)
            .ok_or_else(|| GroupError::GroupIdNotFound {
                group: group_id.to_string(),
            })?;
        if !group.is(GroupState::Empty) {
            return Err(GroupError::NonEmptyGroup {
                group: group_id.to_string(),
            });
        }
        let mut records: Vec<OffsetsRecord> = group
            .offsets
            .keys()
            .map(|(topic, partition)| (offset_key(group_id, topic, *partition), None))
            .collect();
        records.push((group_key(group_id), None));
        self.store(&records)?;
        self.groups.remove(group_id);
        tracing::info!(group = group_id, "deleted group");
        Ok(())
    }

    fn delete_offsets(
        &mut self,
        group_id: &str,
        partitions: &[(String, i32)],
    ) -> Result<Vec<Option<GroupError>>, GroupError> {
        if group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        let group = self
            .groups
            .get(group_id)
            .ok_or_else(|| GroupError::GroupIdNotFound {
                group: group_id.to_string(),
            })?;
        let consumer = group.protocol_type.as_deref() == Some(CONSUMER_PROTOCOL_TYPE);
        if !group.is(GroupState::Empty) && !consumer {
            return Err(GroupError::NonEmptyGroup {
                group: group_id.to_string(),
            });
        }
        let mut outcomes = Vec::with_capacity(partitions.len());
        let mut doomed = Vec::new();
        for (topic, partition) in partitions {
            if !group.is(GroupState::Empty) && group.is_subscribed_to(topic) {
                outcomes.push(Some(GroupError::GroupSubscribedToTopic));
                continue;
            }
            outcomes.push(None);
            if group.offsets.contains_key(&(topic.clone(), *partition)) {
                doomed.push((topic.clone(), *partition));
            }
        }
        let records: Vec<OffsetsRecord> = doomed
            .iter()
            .map(|(t, p)| (offset_key(group_id, t, *p), None))
            .collect();
        if !records.is_empty() {
            self.store(&records)?;
        }
        let group = self.group_mut(group_id).expect("present");
        for key in doomed {
            group.offsets.remove(&key);
        }
        Ok(outcomes)
    }

    // ---- Timers ----

    fn tick(&mut self) {
        let now = self.now_ms;
        self.fire_every_due_timer();
        let interval = self.settings.offsets_retention_check_interval_ms;
        if now.saturating_sub(self.expiry_checked_ms) >= interval {
            self.expiry_checked_ms = now;
            let ids: Vec<String> = self.groups.keys().cloned().collect();
            for id in &ids {
                self.expire_offsets(id, now);
            }
        }
    }

    fn fire_every_due_timer(&mut self) {
        let ids: Vec<String> = self.groups.keys().cloned().collect();
        for id in &ids {
            self.fire_due_timers(id);
        }
    }

    /// Every timer of the group due by the request's clock, as Kafka's timer would have
    /// fired it at its deadline; a group that does not exist has none.
    fn fire_due_timers(&mut self, group_id: &str) {
        let now = self.now_ms;
        let Some(group) = self.groups.get(group_id) else {
            return;
        };
        if let Some(timer) = group.join_timer.filter(|t| t.due_ms() <= now) {
            match timer {
                JoinTimer::InitialDelay {
                    delay_ms,
                    remaining_ms,
                    ..
                } => self.complete_initial_rebalance_or_wait(group_id, delay_ms, remaining_ms),
                JoinTimer::Rebalance { .. } => self.complete_join(group_id),
            }
        }
        if let Some((due, generation)) = self.groups[group_id].sync_timer {
            if due <= now {
                self.expire_pending_sync(group_id, generation);
            }
        }
        let group = self.group_mut(group_id).expect("present");
        let expired_pending: Vec<String> = group
            .pending_join
            .iter()
            .filter(|&(_, &due)| due <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &expired_pending {
            group.pending_join.remove(id);
        }
        if !expired_pending.is_empty()
            && group.is(GroupState::PreparingRebalance)
            && group.all_members_joined()
        {
            self.complete_join(group_id);
        }
        loop {
            let group = &self.groups[group_id];
            let Some(expired) = group
                .members
                .iter()
                .find(|m| m.heartbeat_deadline_ms <= now && !m.has_satisfied_heartbeat())
                .map(|m| m.id.clone())
            else {
                break;
            };
            self.expire_member(group_id, &expired);
        }
    }

    /// Kafka's `cleanupExpiredOffsets` and `maybeDeleteGroup`: offsets older than
    /// `offsets.retention.minutes` by the rule of the group's kind go, and an empty
    /// group without offsets goes with them.
    fn expire_offsets(&mut self, group_id: &str, now: i64) {
        let retention = self.settings.offsets_retention_ms;
        let group = &self.groups[group_id];
        // Kafka's `offsetExpirationCondition`: `None` keeps every offset; `Some(None)`
        // counts from each offset's commit, `Some(Some(t))` from when the group emptied.
        let counted_from: Option<Option<i64>> = match (group.protocol_type.as_deref(), group.state)
        {
            (None, _) => Some(None),
            (Some(_), GroupState::Empty) => Some(Some(group.state_since_ms)),
            (Some(CONSUMER_PROTOCOL_TYPE), GroupState::Stable)
                if group.subscribed_topics.is_some() =>
            {
                Some(None)
            }
            _ => None,
        };
        let Some(since_empty) = counted_from else {
            return;
        };
        let base = |c: &CommittedOffset| since_empty.unwrap_or(c.commit_timestamp_ms);
        let stable = group.is(GroupState::Stable);
        let expired: Vec<(String, i32)> = group
            .offsets
            .iter()
            .filter(|(_, c)| now.saturating_sub(base(c)) >= retention)
            .filter(|((topic, _), _)| !(stable && group.is_subscribed_to(topic)))
            .map(|(key, _)| key.clone())
            .collect();
        let remove_group = group.is(GroupState::Empty) && group.offsets.len() == expired.len();
        let mut records: Vec<OffsetsRecord> = expired
            .iter()
            .map(|(t, p)| (offset_key(group_id, t, *p), None))
            .collect();
        if remove_group {
            records.push((group_key(group_id), None));
        }
        if records.is_empty() {
            return;
        }
        if let Err(e) = self.store(&records) {
            tracing::warn!(group = group_id, error = %e, "could not expire offsets");
            return;
        }
        tracing::info!(
            group = group_id,
            expired = expired.len(),
            "expired committed offsets (offsets.retention.minutes)"
        );
        if remove_group {
            self.groups.remove(group_id);
            tracing::info!(group = group_id, "removed empty group without offsets");
        } else {
            let group = self.group_mut(group_id).expect("present");
            for key in expired {
                group.offsets.remove(&key);
            }
        }
    }

    // ---- The offsets topic ----

    /// Appends `records` to `__consumer_offsets` as one batch.
    fn store(&self, records: &[OffsetsRecord]) -> Result<(), GroupError> {
        self.store_as(records, None)
    }

    /// Appends `records` to `__consumer_offsets` as one batch, a transactional one of
    /// producer `txn` (id, epoch) for TxnOffsetCommit.
    fn store_as(
        &self,
        records: &[OffsetsRecord],
        txn: Option<(i64, i16)>,
    ) -> Result<(), GroupError> {
        let topic =
            self.offsets_topic
                .as_ref()
                .ok_or_else(|| GroupError::CoordinatorNotAvailable {
                    reason: format!("the offsets topic {OFFSETS_TOPIC} does not exist yet"),
                })?;
        let mut builder = BatchBuilder::new(0);
        for (delta, (key, value)) in records.iter().enumerate() {
            builder.push(delta as u64, self.now_ms, Some(key), value.as_deref());
        }
        let batch = match txn {
            None => builder.finish(None, None),
            Some((producer_id, producer_epoch)) => {
                builder.finish_transactional(producer_id, producer_epoch)
            }
        };
        topic
            .append_internal(&batch, txn.is_some())
            .map(|_| ())
            .map_err(|e| GroupError::CoordinatorNotAvailable {
                reason: format!("writing {OFFSETS_TOPIC} failed: {e}"),
            })
    }

    /// Rebuilds the groups from the offsets topic, oldest record first. A transactional
    /// batch's records wait for their producer's marker: applied at a COMMIT, dropped at
    /// an ABORT (Kafka's `GroupMetadataManager.loadGroupsAndOffsets`).
    fn replay(&mut self, topic: &Partition) -> Result<()> {
        let mut records = 0u64;
        let mut pending: BTreeMap<i64, Vec<OffsetsRecord>> = BTreeMap::new();
        topic.for_each_record(REPLAY_READ_BYTES, |header, record| {
            if header.is_control() {
                let marker = EndTxnMarker::of(record);
                let done = pending.remove(&header.producer_id);
                if let (Some(marker), Some(done)) = (marker, done) {
                    if marker.commit {
                        for (key, value) in done {
                            self.apply(Some(&key), value.as_deref(), record.offset);
                        }
                    }
                }
                return;
            }
            records += 1;
            if header.is_transactional() {
                pending.entry(header.producer_id).or_default().push((
                    record.key.map(<[u8]>::to_vec).unwrap_or_default(),
                    record.value.map(<[u8]>::to_vec),
                ));
                return;
            }
            self.apply(record.key, record.value, record.offset);
        })?;
        // Transactions still open: their offsets stay pending until the marker comes.
        for (pid, recs) in pending {
            for (key, value) in recs {
                self.pend(pid, &key, value.as_deref());
            }
        }
        tracing::info!(
            groups = self.groups.len(),
            records,
            "loaded consumer groups from {OFFSETS_TOPIC}"
        );
        Ok(())
    }

    /// An offset commit record of an open transaction, found at open.
    fn pend(&mut self, producer_id: i64, key: &[u8], value: Option<&[u8]>) {
        let (
            Ok(Some(OffsetsKey::OffsetCommit {
                group,
                topic,
                partition,
            })),
            Some(Ok(value)),
        ) = (
            OffsetsKey::decode(key),
            value.map(OffsetCommitValue::decode),
        )
        else {
            return;
        };
        self.pending_txn_offsets
            .entry(producer_id)
            .or_default()
            .push((group, value.committed(topic, partition)));
    }

    /// Applies one record of the offsets topic; one it cannot read is skipped with a
    /// warning (Kafka's loader fails the partition; a learner's bad record should not
    /// take every group down).
    fn apply(&mut self, key: Option<&[u8]>, value: Option<&[u8]>, offset: u64) {
        let now = self.now_ms;
        let warn = |why: String| tracing::warn!(offset, %why, "skipping an unreadable record of {OFFSETS_TOPIC}");
        let Some(key) = key else {
            return warn("a record without a key".into());
        };
        let key = match OffsetsKey::decode(key) {
            Ok(Some(key)) => key,
            Ok(None) => return,
            Err(e) => return warn(e.0),
        };
        let group_id = key.group().to_string();
        match (key, value) {
            (
                OffsetsKey::OffsetCommit {
                    topic, partition, ..
                },
                Some(value),
            ) => {
                let value = match OffsetCommitValue::decode(value) {
                    Ok(v) => v,
                    Err(e) => return warn(e.0),
                };
                let group = self.loaded_group(&group_id);
                group.offsets.insert(
                    (topic.clone(), partition),
                    value.committed(topic, partition),
                );
            }
            (
                OffsetsKey::OffsetCommit {
                    topic, partition, ..
                },
                None,
            ) => {
                if let Some(group) = self.groups.get_mut(&group_id) {
                    group.offsets.remove(&(topic, partition));
                }
            }
            (OffsetsKey::GroupMetadata { .. }, Some(value)) => {
                let value = match GroupMetadataValue::decode(value) {
                    Ok(v) => v,
                    Err(e) => return warn(e.0),
                };
                let group = self.loaded_group(&group_id);
                load_group_metadata(group, value, now);
            }
            (OffsetsKey::GroupMetadata { .. }, None) => {
                self.groups.remove(&group_id);
            }
        }
    }
}

/// A group as its last metadata record left it: Stable with its members and their
/// assignments, or Empty. The members keep their place until their session expires
/// without a heartbeat, as in Kafka after a coordinator moves.
fn load_group_metadata(group: &mut Group, value: GroupMetadataValue, now: i64) {
    group.protocol_type = (!value.protocol_type.is_empty()).then_some(value.protocol_type);
    group.generation = value.generation;
    group.protocol_name = value.protocol;
    group.leader = value.leader;
    group.state_since_ms = if value.current_state_timestamp_ms >= 0 {
        value.current_state_timestamp_ms
    } else {
        now
    };
    let protocol = group.protocol_name.clone().unwrap_or_default();
    let protocol_type = group.protocol_type.clone().unwrap_or_default();
    group.members = value
        .members
        .into_iter()
        .map(|m| Member {
            id: m.member_id,
            instance_id: m.group_instance_id,
            client_id: m.client_id,
            client_host: m.client_host,
            rebalance_timeout_ms: m.rebalance_timeout_ms,
            session_timeout_ms: m.session_timeout_ms,
            protocol_type: protocol_type.clone(),
            protocols: vec![(protocol.clone(), m.subscription)],
            assignment: m.assignment,
            awaiting_join: None,
            awaiting_sync: None,
            is_new: false,
            heartbeat_deadline_ms: now + i64::from(m.session_timeout_ms),
        })
        .collect();
    group.state = if group.members.is_empty() {
        GroupState::Empty
    } else {
        GroupState::Stable
    };
    group.previous_state = group.state;
    group.pending_join.clear();
    group.pending_sync.clear();
    group.join_timer = None;
    group.sync_timer = None;
    group.subscribed_topics = None;
}

/// Kafka's `acceptJoiningMember` (`group.max.size`).
fn accepts_joining_member(group: &Group, member_id: &str, max_size: i32) -> bool {
    let max = usize::try_from(max_size).unwrap_or(0);
    match group.state {
        GroupState::Empty | GroupState::Dead => true,
        GroupState::PreparingRebalance => {
            group
                .member(member_id)
                .is_some_and(|m| m.awaiting_join.is_some())
                || group.awaiting_join_count() < max
        }
        GroupState::CompletingRebalance | GroupState::Stable => {
            group.has_member(member_id) || group.members.len() < max
        }
    }
}

/// Kafka's `ClassicGroup.validateMember`.
fn validate_member(
    group: &Group,
    member_id: &str,
    instance_id: Option<&str>,
) -> Result<(), GroupError> {
    if let Some(instance_id) = instance_id {
        match group.static_member_id(instance_id) {
            None => return Err(GroupError::UnknownMemberId),
            Some(existing) if existing != member_id => return Err(GroupError::FencedInstanceId),
            Some(_) => {}
        }
    }
    if group.has_member(member_id) {
        Ok(())
    } else {
        Err(GroupError::UnknownMemberId)
    }
}

/// Kafka's `ClassicGroup.validateOffsetCommit` (not transactional).
fn validate_offset_commit(
    group: &Group,
    member_id: &str,
    instance_id: Option<&str>,
    generation_id: i32,
) -> Result<(), GroupError> {
    if generation_id < 0 && group.is(GroupState::Empty) {
        return Ok(());
    }
    if generation_id >= 0 || !member_id.is_empty() || instance_id.is_some() {
        validate_member(group, member_id, instance_id)?;
        if generation_id != group.generation {
            return Err(GroupError::IllegalGeneration);
        }
    } else if !group.is(GroupState::Empty) {
        return Err(GroupError::UnknownMemberId);
    }
    if group.is(GroupState::CompletingRebalance) {
        return Err(GroupError::RebalanceInProgress);
    }
    Ok(())
}

/// Removes a member, answering what it waits for.
fn remove_member(group: &mut Group, member_id: &str) {
    if let Some(mut member) = group.remove(member_id) {
        send(
            member.awaiting_join.take(),
            join_error("", GroupError::UnknownMemberId),
        );
        send(
            member.awaiting_sync.take(),
            sync_error(GroupError::UnknownMemberId),
        );
    }
}

fn remove_pending_sync(group: &mut Group, member_id: &str) {
    group.pending_sync.remove(member_id);
    if group.pending_sync.is_empty()
        || !matches!(
            group.state,
            GroupState::CompletingRebalance | GroupState::Stable
        )
    {
        group.sync_timer = None;
    }
}

/// Kafka's `propagateAssignment`: every member waiting in SyncGroup gets its answer.
fn propagate_assignment(group: &mut Group, error: Option<GroupError>, now: i64) {
    let (protocol_type, protocol_name) = if error.is_none() {
        (group.protocol_type.clone(), group.protocol_name.clone())
    } else {
        (None, None)
    };
    for m in &mut group.members {
        if let Some(tx) = m.awaiting_sync.take() {
            send(
                Some(tx),
                SyncResponse {
                    error: error.clone(),
                    protocol_type: protocol_type.clone(),
                    protocol_name: protocol_name.clone(),
                    assignment: m.assignment.clone(),
                },
            );
            m.heartbeat_deadline_ms = now + i64::from(m.session_timeout_ms);
        }
    }
}

fn reset_and_propagate_assignment(group: &mut Group, error: GroupError, now: i64) {
    for m in &mut group.members {
        m.assignment.clear();
    }
    propagate_assignment(group, Some(error), now);
}

fn offset_key(group: &str, topic: &str, partition: i32) -> Vec<u8> {
    OffsetsKey::OffsetCommit {
        group: group.to_string(),
        topic: topic.to_string(),
        partition,
    }
    .encode()
}

fn group_key(group: &str) -> Vec<u8> {
    OffsetsKey::GroupMetadata {
        group: group.to_string(),
    }
    .encode()
}

fn offset_commit_record(group: &str, c: &CommittedOffset) -> OffsetsRecord {
    let value = OffsetCommitValue {
        offset: c.offset,
        leader_epoch: c.leader_epoch,
        metadata: c.metadata.clone(),
        commit_timestamp_ms: c.commit_timestamp_ms,
        topic_id: None,
    };
    (
        offset_key(group, &c.topic, c.partition),
        Some(value.encode()),
    )
}

/// The group's metadata record (Kafka's `newGroupMetadataRecord`, or
/// `newEmptyGroupMetadataRecord` for a group without members).
fn group_metadata_record(group: &Group) -> OffsetsRecord {
    let protocol = group.protocol_name.clone().unwrap_or_default();
    let value = GroupMetadataValue {
        protocol_type: group.protocol_type.clone().unwrap_or_default(),
        generation: group.generation,
        protocol: group.protocol_name.clone(),
        leader: group.leader.clone().filter(|_| !group.members.is_empty()),
        current_state_timestamp_ms: group.state_since_ms,
        members: group
            .members
            .iter()
            .map(|m| StoredMember {
                member_id: m.id.clone(),
                group_instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                session_timeout_ms: m.session_timeout_ms,
                subscription: m.metadata(&protocol).to_vec(),
                assignment: m.assignment.clone(),
            })
            .collect(),
    };
    (group_key(&group.id), Some(value.encode()))
}
