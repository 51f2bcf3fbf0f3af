//! The one place that decides which errno a user sees for an engine error. The matches
//! are exhaustive on purpose: a new `EngineError` or `GroupError` variant fails to compile
//! here until someone decides what `write(2)` or `rmdir(2)` should report for it.

use crate::engine::groups::GroupError;
use crate::engine::EngineError;

/// The errno for an engine error, as a libc constant.
pub(crate) fn errno_of(error: &EngineError) -> i32 {
    match error {
        EngineError::InvalidTopicName { .. } => libc::EINVAL,
        EngineError::TopicExists { .. } => libc::EEXIST,
        // Kafka's InvalidTopicException, as for any other name it refuses.
        EngineError::TopicCollision { .. } => libc::EINVAL,
        EngineError::UnknownTopic { .. } | EngineError::UnknownPartition { .. } => libc::ENOENT,
        // `mkdir TOPIC/partitions/N` with N not the count: no such partition to make.
        EngineError::PartitionsDecrease { .. }
        | EngineError::PartitionsUnchanged { .. }
        | EngineError::InvalidPartitionCount { .. } => libc::EINVAL,
        EngineError::Config(_) => libc::EINVAL,
        // EFBIG is what write(2) reports for "larger than the file may grow", the closest
        // POSIX has to Kafka's RecordTooLargeException, and shells print it legibly.
        EngineError::RecordTooLarge { .. } | EngineError::BatchOverSegmentSize { .. } => {
            libc::EFBIG
        }
        EngineError::KeylessOnCompacted { .. }
        | EngineError::MissingKeySeparator { .. }
        | EngineError::InvalidRecord { .. } => libc::EINVAL,
        // Refusals of the Kafka produce path, which no file operation takes; EINVAL and
        // EFBIG say what they would mean there.
        EngineError::InvalidProducedBatch { .. }
        | EngineError::ProduceRequestRule { .. }
        | EngineError::UnreadableBatch { .. }
        | EngineError::RecordsRejected { .. }
        | EngineError::CorruptMessage { .. }
        | EngineError::InvalidProducerEpoch { .. }
        | EngineError::OutOfOrderSequence { .. }
        | EngineError::InvalidTxnState { .. }
        | EngineError::InvalidProducerIdMapping { .. }
        | EngineError::ConcurrentTransactions { .. }
        | EngineError::TransactionCoordinatorFenced { .. } => libc::EINVAL,
        EngineError::RecompressedTooLarge { .. } => libc::EFBIG,
        // Cannot happen once mounted (the lock is taken before the mount); EBUSY is what a
        // second user of a held resource would expect if it ever did.
        EngineError::DataDirLocked { .. } => libc::EBUSY,
        // A poisoned topic is an earlier I/O failure replayed; EIO tells the writer the
        // data did not land, which is the truth.
        EngineError::Poisoned { .. } => libc::EIO,
        // Corruption is not the caller's fault and not fixable by retrying: plain EIO, as
        // block filesystems report unreadable sectors.
        EngineError::Corrupt { .. } => libc::EIO,
        // A number past the log end written to `log_start_offset`.
        EngineError::OffsetOutOfRange { .. } => libc::ERANGE,
        // `log_start_offset` of a topic whose policy keeps every record.
        EngineError::RecordDeletionPolicy { .. } => libc::EPERM,
        EngineError::InternalTopic { .. } => libc::EPERM,
        // Refusals of a whole data directory at open, before any request is served: the
        // mount fails with their text; the errno only matters if one ever reaches a call.
        EngineError::LegacyDataDir { .. }
        | EngineError::UnknownDataDirFormat { .. }
        | EngineError::NodeIdMismatch { .. } => libc::EINVAL,
        // Internal to the cleaner thread and never returned by a call the adapter makes;
        // EAGAIN says the truth if it ever is: nothing changed, try again.
        EngineError::CleanAborted { .. } | EngineError::CleanerPanicked => libc::EAGAIN,
        EngineError::Broker { code, .. } => broker_errno(*code),
        // ENOSPC, EDQUOT, EROFS ... from the data directory are passed through so the
        // user sees the real cause; errors without an OS code become EIO.
        EngineError::Io { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
    }
}

/// The errno for a Kafka cluster's error code (a cluster mount's): what the same refusal
/// of the local engine gets, and EIO for a failure to reach the cluster or be answered.
fn broker_errno(code: i32) -> i32 {
    match code {
        // UNKNOWN_TOPIC_OR_PARTITION, GROUP_ID_NOT_FOUND
        3 | 69 => libc::ENOENT,
        // TOPIC_ALREADY_EXISTS
        36 => libc::EEXIST,
        // MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE
        10 | 18 => libc::EFBIG,
        // INVALID_TOPIC_EXCEPTION, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR,
        // INVALID_REQUEST, INVALID_CONFIG, INVALID_RECORD, UNKNOWN_TOPIC_ID's kin
        17 | 37 | 38 | 42 | 40 | 87 => libc::EINVAL,
        // TOPIC_AUTHORIZATION_FAILED, GROUP_, CLUSTER_, TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        29..=31 | 53 => libc::EACCES,
        // POLICY_VIOLATION, TOPIC_DELETION_DISABLED
        44 | 73 => libc::EPERM,
        // NON_EMPTY_GROUP
        68 => libc::ENOTEMPTY,
        // REQUEST_TIMED_OUT, the client's own timeouts (-185 _TIMED_OUT, -192 _MSG_TIMED_OUT)
        7 | -185 | -192 => libc::ETIMEDOUT,
        _ => libc::EIO,
    }
}

/// The errno for a group coordinator's refusal. Only `rmdir .kpfs/groups/GROUP`
/// (DeleteGroups) reaches one; the rest say what they would mean there.
pub(crate) fn group_errno(error: &GroupError) -> i32 {
    match error {
        // Kafka's NON_EMPTY_GROUP is rmdir's "directory not empty": the group has members.
        GroupError::NonEmptyGroup { .. } => libc::ENOTEMPTY,
        GroupError::GroupIdNotFound { .. } | GroupError::UnknownTopicOrPartition { .. } => {
            libc::ENOENT
        }
        // Retriable in Kafka (the offsets topic could not be written): try again.
        GroupError::CoordinatorNotAvailable { .. } => libc::EAGAIN,
        // A group busy with a rebalance or a topic it consumes.
        GroupError::RebalanceInProgress | GroupError::GroupSubscribedToTopic => libc::EBUSY,
        GroupError::GroupMaxSizeReached { .. } => libc::EUSERS,
        GroupError::OffsetMetadataTooLarge { .. } => libc::EFBIG,
        GroupError::FencedInstanceId => libc::EPERM,
        GroupError::InvalidGroupId
        | GroupError::UnknownMemberId
        | GroupError::MemberIdRequired { .. }
        | GroupError::IllegalGeneration
        | GroupError::InconsistentGroupProtocol
        | GroupError::InvalidSessionTimeout { .. } => libc::EINVAL,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    #[test]
    fn io_errors_keep_their_os_code_and_others_become_eio() {
        let full = EngineError::io("append", io::Error::from_raw_os_error(libc::ENOSPC));
        assert_eq!(errno_of(&full), libc::ENOSPC);
        let synthetic = EngineError::io("append", io::Error::other("no code"));
        assert_eq!(errno_of(&synthetic), libc::EIO);
    }

    #[test]
    fn user_errors_map_to_their_posix_counterparts() {
        let too_large = EngineError::RecordTooLarge {
            partition: "t-0".into(),
            size: crate::engine::error::BatchSize::Exactly(2),
            max: 1,
        };
        assert_eq!(errno_of(&too_large), libc::EFBIG);
        let exists = EngineError::TopicExists { name: "t".into() };
        assert_eq!(errno_of(&exists), libc::EEXIST);
        let unknown = EngineError::UnknownTopic { name: "t".into() };
        assert_eq!(errno_of(&unknown), libc::ENOENT);
        let poisoned = EngineError::Poisoned {
            topic: "t".into(),
            reason: "fsync".into(),
        };
        assert_eq!(errno_of(&poisoned), libc::EIO);
    }

    #[test]
    fn a_group_with_members_is_a_directory_not_empty() {
        let busy = GroupError::NonEmptyGroup { group: "g".into() };
        assert_eq!(group_errno(&busy), libc::ENOTEMPTY);
        let unknown = GroupError::GroupIdNotFound { group: "g".into() };
        assert_eq!(group_errno(&unknown), libc::ENOENT);
    }
}
