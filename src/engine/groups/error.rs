//! What the group coordinator refuses, one variant per Kafka error a group API answers
//! with; the texts are the messages of Kafka's exceptions where Kafka gives one.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupError {
    /// COORDINATOR_NOT_AVAILABLE: the offsets topic could not be written or created.
    CoordinatorNotAvailable { reason: String },
    /// INVALID_GROUP_ID: an empty group id where one is needed.
    InvalidGroupId,
    /// GROUP_ID_NOT_FOUND: the group does not exist (DescribeGroups says Dead instead).
    GroupIdNotFound { group: String },
    /// UNKNOWN_MEMBER_ID.
    UnknownMemberId,
    /// MEMBER_ID_REQUIRED: JoinGroup v4+ without a member id; rejoin with `member_id`.
    MemberIdRequired { member_id: String },
    /// ILLEGAL_GENERATION.
    IllegalGeneration,
    /// REBALANCE_IN_PROGRESS.
    RebalanceInProgress,
    /// INCONSISTENT_GROUP_PROTOCOL.
    InconsistentGroupProtocol,
    /// INVALID_SESSION_TIMEOUT: outside `group.min/max.session.timeout.ms`.
    InvalidSessionTimeout {
        timeout_ms: i32,
        min_ms: i32,
        max_ms: i32,
    },
    /// GROUP_MAX_SIZE_REACHED.
    GroupMaxSizeReached { max: i32 },
    /// FENCED_INSTANCE_ID: a static member's instance id now belongs to another member id.
    FencedInstanceId,
    /// NON_EMPTY_GROUP: the group has members.
    NonEmptyGroup { group: String },
    /// GROUP_SUBSCRIBED_TO_TOPIC: OffsetDelete of a topic the group consumes.
    GroupSubscribedToTopic,
    /// OFFSET_METADATA_TOO_LARGE: over `offset.metadata.max.bytes`.
    OffsetMetadataTooLarge { max: i32 },
    /// UNKNOWN_TOPIC_OR_PARTITION: kpfs topics have the one partition 0.
    UnknownTopicOrPartition { topic: String, partition: i32 },
}

impl fmt::Display for GroupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GroupError::CoordinatorNotAvailable { reason } => write!(
                f,
                "The coordinator is not available: {reason}"
            ),
            GroupError::InvalidGroupId => f.write_str("The configured groupId is invalid."),
            GroupError::GroupIdNotFound { group } => {
                write!(f, "Group {group} not found.")
            }
            GroupError::UnknownMemberId => {
                f.write_str("The coordinator is not aware of this member.")
            }
            GroupError::MemberIdRequired { .. } => f.write_str(
                "The group member needs to have a valid member id before actually entering a consumer group.",
            ),
            GroupError::IllegalGeneration => {
                f.write_str("Specified group generation id is not valid.")
            }
            GroupError::RebalanceInProgress => {
                f.write_str("The group is rebalancing, so a rejoin is needed.")
            }
            GroupError::InconsistentGroupProtocol => f.write_str(
                "The group member's supported protocols are incompatible with those of existing members or first group member tried to join with empty protocol type or empty protocol list.",
            ),
            GroupError::InvalidSessionTimeout {
                timeout_ms,
                min_ms,
                max_ms,
            } => write!(
                f,
                "The session timeout is not within the range allowed by the broker (as configured by group.min.session.timeout.ms and group.max.session.timeout.ms): {timeout_ms} is not in [{min_ms}, {max_ms}]"
            ),
            GroupError::GroupMaxSizeReached { max } => write!(
                f,
                "The group has reached its maximum size (group.max.size={max})."
            ),
            GroupError::FencedInstanceId => f.write_str(
                "The broker rejected this static consumer since another consumer with the same group.instance.id has registered with a different member.id.",
            ),
            GroupError::NonEmptyGroup { group } => {
                write!(f, "The group {group} is not empty.")
            }
            GroupError::GroupSubscribedToTopic => f.write_str(
                "The consumer group is actively subscribed to the topic",
            ),
            GroupError::OffsetMetadataTooLarge { max } => write!(
                f,
                "The metadata field of the offset request was too large (offset.metadata.max.bytes={max})."
            ),
            GroupError::UnknownTopicOrPartition { topic, partition } => write!(
                f,
                "This server does not host this topic-partition: {topic}-{partition} (kpfs topics have one partition, 0)"
            ),
        }
    }
}
