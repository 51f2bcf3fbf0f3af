//! One classic group's membership state, as Kafka's `ClassicGroup` and
//! `ClassicGroupMember` keep it: members in the order they joined (the first is the
//! leader until it leaves), the protocols each supports, who the current rebalance
//! still waits for, and the answers owed to waiting members.

use std::collections::{BTreeMap, BTreeSet};

use crossbeam_channel::Sender;

use super::subscription::{subscribed_topics, CONSUMER_PROTOCOL_TYPE};
use super::{CommittedOffset, GroupState, JoinResponse, JoinedMember, SyncResponse};

pub(super) struct Member {
    pub(super) id: String,
    pub(super) instance_id: Option<String>,
    pub(super) client_id: String,
    pub(super) client_host: String,
    pub(super) rebalance_timeout_ms: i32,
    pub(super) session_timeout_ms: i32,
    pub(super) protocol_type: String,
    /// (name, metadata), in the member's order of preference.
    pub(super) protocols: Vec<(String, Vec<u8>)>,
    pub(super) assignment: Vec<u8>,
    /// The JoinGroup answer owed to the member while it waits for the rebalance.
    pub(super) awaiting_join: Option<Sender<JoinResponse>>,
    /// The SyncGroup answer owed to the member while it waits for the assignment.
    pub(super) awaiting_sync: Option<Sender<SyncResponse>>,
    /// Joined in the rebalance under way: it may be expired even while waiting.
    pub(super) is_new: bool,
    /// When the member is removed unless it heartbeats (or waits in a rebalance) first.
    pub(super) heartbeat_deadline_ms: i64,
}

impl Member {
    /// Kafka's `ClassicGroupMember.matches`: the same protocols, in the same order,
    /// with the same metadata.
    pub(super) fn matches(&self, protocols: &[(String, Vec<u8>)]) -> bool {
        self.protocols == protocols
    }

    fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|(name, _)| name == protocol)
    }

    /// The member's most preferred protocol among `candidates`.
    fn vote(&self, candidates: &BTreeSet<&str>) -> Option<&str> {
        self.protocols
            .iter()
            .map(|(name, _)| name.as_str())
            .find(|name| candidates.contains(name))
    }

    pub(super) fn metadata(&self, protocol: &str) -> &[u8] {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map_or(&[][..], |(_, metadata)| metadata)
    }

    /// Kafka's `hasSatisfiedHeartbeat`: a member waiting in a rebalance needs no
    /// heartbeat, unless it is new in it.
    pub(super) fn has_satisfied_heartbeat(&self) -> bool {
        !self.is_new && (self.awaiting_join.is_some() || self.awaiting_sync.is_some())
    }
}

/// The timer of the join phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum JoinTimer {
    /// `group.initial.rebalance.delay.ms` of an empty group's first rebalance, extended
    /// while members keep arriving, up to the rebalance timeout.
    InitialDelay {
        due_ms: i64,
        delay_ms: i64,
        remaining_ms: i64,
    },
    /// The rebalance timeout: members that have not rejoined by then are removed.
    Rebalance { due_ms: i64 },
}

impl JoinTimer {
    pub(super) fn due_ms(self) -> i64 {
        match self {
            JoinTimer::InitialDelay { due_ms, .. } | JoinTimer::Rebalance { due_ms } => due_ms,
        }
    }
}

pub(super) struct Group {
    pub(super) id: String,
    pub(super) state: GroupState,
    pub(super) previous_state: GroupState,
    pub(super) state_since_ms: i64,
    pub(super) generation: i32,
    /// Set by the first member to join; `None` for a group that only commits offsets.
    pub(super) protocol_type: Option<String>,
    pub(super) protocol_name: Option<String>,
    pub(super) leader: Option<String>,
    /// In join order.
    pub(super) members: Vec<Member>,
    /// Member ids handed out by MEMBER_ID_REQUIRED and not yet used, with when they
    /// expire.
    pub(super) pending_join: BTreeMap<String, i64>,
    /// Members of the current generation whose SyncGroup has not come.
    pub(super) pending_sync: BTreeSet<String>,
    pub(super) new_member_added: bool,
    pub(super) join_timer: Option<JoinTimer>,
    /// When members still missing their SyncGroup are removed, for which generation.
    pub(super) sync_timer: Option<(i64, i32)>,
    pub(super) offsets: BTreeMap<(String, i32), CommittedOffset>,
    /// The topics the members subscribe to, once a consumer generation is formed.
    pub(super) subscribed_topics: Option<BTreeSet<String>>,
}

impl Group {
    pub(super) fn new(id: &str, now_ms: i64) -> Group {
        Group {
            id: id.to_string(),
            state: GroupState::Empty,
            previous_state: GroupState::Empty,
            state_since_ms: now_ms,
            generation: 0,
            protocol_type: None,
            protocol_name: None,
            leader: None,
            members: Vec::new(),
            pending_join: BTreeMap::new(),
            pending_sync: BTreeSet::new(),
            new_member_added: false,
            join_timer: None,
            sync_timer: None,
            offsets: BTreeMap::new(),
            subscribed_topics: None,
        }
    }

    pub(super) fn transition_to(&mut self, state: GroupState, now_ms: i64) {
        self.previous_state = self.state;
        self.state = state;
        self.state_since_ms = now_ms;
    }

    pub(super) fn is(&self, state: GroupState) -> bool {
        self.state == state
    }

    pub(super) fn member(&self, id: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.id == id)
    }

    pub(super) fn member_mut(&mut self, id: &str) -> Option<&mut Member> {
        self.members.iter_mut().find(|m| m.id == id)
    }

    pub(super) fn has_member(&self, id: &str) -> bool {
        self.member(id).is_some()
    }

    pub(super) fn static_member_id(&self, instance_id: &str) -> Option<&str> {
        self.members
            .iter()
            .find(|m| m.instance_id.as_deref() == Some(instance_id))
            .map(|m| m.id.as_str())
    }

    pub(super) fn is_leader(&self, id: &str) -> bool {
        self.leader.as_deref() == Some(id)
    }

    pub(super) fn awaiting_join_count(&self) -> usize {
        self.members
            .iter()
            .filter(|m| m.awaiting_join.is_some())
            .count()
    }

    /// Kafka's `hasAllMembersJoined`.
    pub(super) fn all_members_joined(&self) -> bool {
        self.members.iter().all(|m| m.awaiting_join.is_some()) && self.pending_join.is_empty()
    }

    /// Kafka's `canRebalance`: PreparingRebalance may follow Stable, CompletingRebalance
    /// and Empty.
    pub(super) fn can_rebalance(&self) -> bool {
        matches!(
            self.state,
            GroupState::Stable | GroupState::CompletingRebalance | GroupState::Empty
        )
    }

    /// The largest rebalance timeout of the members.
    pub(super) fn rebalance_timeout_ms(&self) -> i64 {
        self.members
            .iter()
            .map(|m| i64::from(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0)
    }

    /// Kafka's `supportsProtocols`: an empty group takes any non-empty protocol type
    /// and list; otherwise the type must match and one protocol be supported by all.
    pub(super) fn supports_protocols(
        &self,
        protocol_type: &str,
        protocols: &[(String, Vec<u8>)],
    ) -> bool {
        if self.is(GroupState::Empty) {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols
                .iter()
                .any(|(name, _)| self.members.iter().all(|m| m.supports(name)))
    }

    /// Kafka's `selectProtocol`: each member votes for its preferred protocol among
    /// those all support; the most votes win (ties to the first in name order, where
    /// Kafka's hash map order decides).
    pub(super) fn select_protocol(&self) -> Option<String> {
        let first = self.members.first()?;
        let candidates: BTreeSet<&str> = first
            .protocols
            .iter()
            .map(|(name, _)| name.as_str())
            .filter(|name| self.members.iter().all(|m| m.supports(name)))
            .collect();
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for vote in self.members.iter().filter_map(|m| m.vote(&candidates)) {
            *votes.entry(vote).or_default() += 1;
        }
        let best = votes.values().copied().max()?;
        votes
            .into_iter()
            .find(|&(_, count)| count == best)
            .map(|(name, _)| name.to_string())
    }

    /// Adds a member (Kafka's `add`): the first member sets the protocol type and
    /// leads.
    pub(super) fn add(&mut self, member: Member) {
        if self.members.is_empty() {
            self.protocol_type = Some(member.protocol_type.clone());
        }
        self.pending_join.remove(&member.id);
        if self.leader.is_none() {
            self.leader = Some(member.id.clone());
        }
        self.members.push(member);
    }

    /// Removes a member (Kafka's `remove`): a leaving leader hands over to the first
    /// remaining member.
    pub(super) fn remove(&mut self, id: &str) -> Option<Member> {
        let removed = self
            .members
            .iter()
            .position(|m| m.id == id)
            .map(|at| self.members.remove(at));
        if self.is_leader(id) {
            self.leader = self.members.first().map(|m| m.id.clone());
        }
        self.pending_join.remove(id);
        self.pending_sync.remove(id);
        removed
    }

    /// Kafka's `maybeElectNewJoinedLeader`: a leader that did not rejoin hands over to
    /// a member that did; false when none did.
    pub(super) fn elect_joined_leader(&mut self) -> bool {
        let Some(leader) = self.leader.clone() else {
            return false;
        };
        if self
            .member(&leader)
            .is_some_and(|m| m.awaiting_join.is_some())
        {
            return true;
        }
        match self.members.iter().find(|m| m.awaiting_join.is_some()) {
            Some(joined) => {
                self.leader = Some(joined.id.clone());
                true
            }
            None => false,
        }
    }

    /// Kafka's `initNextGeneration`.
    pub(super) fn init_next_generation(&mut self, now_ms: i64) {
        self.generation += 1;
        if self.members.is_empty() {
            self.protocol_name = None;
            self.subscribed_topics = None;
            self.transition_to(GroupState::Empty, now_ms);
        } else {
            self.protocol_name = self.select_protocol();
            self.subscribed_topics = self.compute_subscribed_topics();
            self.transition_to(GroupState::CompletingRebalance, now_ms);
        }
        self.pending_sync.clear();
    }

    /// The union of the members' subscriptions, when the group is a consumer group
    /// whose members' metadata all parse.
    fn compute_subscribed_topics(&self) -> Option<BTreeSet<String>> {
        if self.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL_TYPE) {
            return None;
        }
        let protocol = self.protocol_name.as_deref()?;
        let mut topics = BTreeSet::new();
        for m in &self.members {
            topics.extend(subscribed_topics(m.metadata(protocol))?);
        }
        Some(topics)
    }

    /// Kafka's `isSubscribedToTopic` for the classic protocol.
    pub(super) fn is_subscribed_to(&self, topic: &str) -> bool {
        self.subscribed_topics
            .as_ref()
            .is_some_and(|topics| topics.contains(topic))
    }

    /// The leader's view of the members in a JoinGroup answer.
    pub(super) fn joined_members(&self) -> Vec<JoinedMember> {
        let protocol = self.protocol_name.as_deref().unwrap_or_default();
        self.members
            .iter()
            .map(|m| JoinedMember {
                member_id: m.id.clone(),
                group_instance_id: m.instance_id.clone(),
                metadata: m.metadata(protocol).to_vec(),
            })
            .collect()
    }

    /// The JoinGroup answer of the current generation for `member_id`.
    pub(super) fn join_answer(&self, member_id: &str, skip_assignment: bool) -> JoinResponse {
        JoinResponse {
            error: None,
            generation_id: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            member_id: member_id.to_string(),
            members: if self.is_leader(member_id) {
                self.joined_members()
            } else {
                Vec::new()
            },
            skip_assignment,
        }
    }
}
