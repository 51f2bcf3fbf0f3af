//! Kafka's group coordinator for the classic group protocol (JoinGroup, SyncGroup,
//! Heartbeat, LeaveGroup), committed offsets, and the groups' durable record: Kafka's
//! own `__consumer_offsets` records (group metadata and offset commits, keys and
//! values in Kafka's schemas) appended to an internal compacted kpfs topic of that
//! name, and replayed from it at open. Knows nothing of the wire: the Kafka listener
//! and the mount both call it.
//!
//! Requests that Kafka answers later (a JoinGroup waits for the rebalance, a
//! follower's SyncGroup for the leader's assignment) return a [`Pending`] answer that
//! the coordinator completes from another request or from [`GroupCoordinator::tick`],
//! which the engine's scheduler runs (timers read the engine's clock, so tests drive
//! days of session timeouts and offset expiry by advancing it).

mod coordinator;
mod error;
mod group;
mod records;
pub(crate) mod subscription;

pub use crate::engine::config::GroupSettings;
pub(crate) use crate::engine::format::OFFSETS_TOPIC;
pub use coordinator::GroupCoordinator;
pub use error::GroupError;
pub(crate) use records::dump_json as dump_offsets_record;

/// An answer the coordinator completes later; the caller waits on it.
pub type Pending<T> = crossbeam_channel::Receiver<T>;

/// A JoinGroup request, as every version of it means it (v0's rebalance timeout is its
/// session timeout).
#[derive(Clone, Debug)]
pub struct JoinRequest {
    pub group_id: String,
    /// Empty for a member's first join.
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub protocol_type: String,
    /// (name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Vec<u8>)>,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub client_id: String,
    pub client_host: String,
    /// JoinGroup v4+: a new dynamic member gets MEMBER_ID_REQUIRED and a member id first.
    pub require_known_member_id: bool,
    /// JoinGroup v9+ may skip the leader's assignment for an unchanged static leader.
    pub supports_skip_assignment: bool,
    pub reason: Option<String>,
}

/// One member as the leader's JoinGroup answer lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub metadata: Vec<u8>,
}

/// A JoinGroup answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinResponse {
    pub error: Option<GroupError>,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// Every member with its metadata, for the leader only.
    pub members: Vec<JoinedMember>,
    pub skip_assignment: bool,
}

/// A SyncGroup request.
#[derive(Clone, Debug)]
pub struct SyncRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    /// v5+; `None` before.
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    /// The leader's (member id, assignment); empty from followers.
    pub assignments: Vec<(String, Vec<u8>)>,
}

/// A SyncGroup answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncResponse {
    pub error: Option<GroupError>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Vec<u8>,
}

/// A member named in a LeaveGroup request (v3+ names several; before, one by id).
#[derive(Clone, Debug)]
pub struct LeavingMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub reason: Option<String>,
}

/// An OffsetCommit request. `generation_id` -1 with an empty member id is a commit
/// from outside group management (a simple consumer or an admin tool).
#[derive(Clone, Debug)]
pub struct CommitRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub offsets: Vec<OffsetToCommit>,
}

#[derive(Clone, Debug)]
pub struct OffsetToCommit {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// -1: none.
    pub leader_epoch: i32,
    /// `None` is stored as the empty string, as Kafka does.
    pub metadata: Option<String>,
}

/// A committed offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedOffset {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
}

/// What OffsetFetch answers for one partition: the committed offset, or -1 and the
/// empty metadata when nothing is committed (Kafka's answer, not an error).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchedOffset {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    /// A transaction's offset for the partition is pending (TxnOffsetCommit, its marker
    /// not yet written): Kafka's `hasPendingTransactionalOffsets`, for which an
    /// OffsetFetch with `require_stable` is answered UNSTABLE_OFFSET_COMMIT.
    pub pending_txn: bool,
}

/// A group's state, named as Kafka names it (`ClassicGroupState.toString`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

/// ListGroups's line for one group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupListing {
    pub group_id: String,
    /// "consumer" for Kafka consumers; empty for a group that only commits offsets.
    pub protocol_type: String,
    pub state: GroupState,
}

/// One member as DescribeGroups and `.kpfs/groups/GROUP` show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberDescription {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// The metadata of the group's protocol (the consumer's subscription).
    pub metadata: Vec<u8>,
    /// The assignment bytes as the leader sent them.
    pub assignment: Vec<u8>,
    /// The assignment decoded as Kafka's consumer protocol (topic, partitions), when it
    /// is one.
    pub assigned: Option<Vec<(String, Vec<i32>)>>,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
}

/// DescribeGroups's answer for one group; an unknown group is `Dead` with no members.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupDescription {
    pub group_id: String,
    pub state: GroupState,
    pub protocol_type: String,
    /// The selected protocol (the assignor), empty outside Stable/CompletingRebalance.
    pub protocol: String,
    pub generation_id: i32,
    pub leader: Option<String>,
    pub members: Vec<MemberDescription>,
    /// When the group entered its state (engine clock).
    pub state_since_ms: i64,
}

#[cfg(test)]
mod tests;
