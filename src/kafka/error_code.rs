//! The one place that decides which Kafka error code a client sees for an engine error
//! or a group coordinator's refusal (as `fs/errno.rs` decides the errno). The matches
//! are exhaustive on purpose: a new `EngineError` or `GroupError` variant fails to
//! compile here until someone decides what a Kafka client should be told.

use kafka_protocol::ResponseError;

use crate::engine::groups::GroupError;
use crate::engine::{ConfigError, EngineError};

/// Kafka's error code for an engine error.
pub(crate) fn error_code(error: &EngineError) -> ResponseError {
    match error {
        EngineError::InvalidTopicName { .. } | EngineError::TopicCollision { .. } => {
            ResponseError::InvalidTopicException
        }
        EngineError::TopicExists { .. } => ResponseError::TopicAlreadyExists,
        EngineError::UnknownTopic { .. } | EngineError::UnknownPartition { .. } => {
            ResponseError::UnknownTopicOrPartition
        }
        EngineError::PartitionsDecrease { .. }
        | EngineError::PartitionsUnchanged { .. }
        | EngineError::InvalidPartitionCount { .. } => ResponseError::InvalidPartitions,
        // Kafka's ConfigAdminManager answers a change of a static broker config with
        // InvalidRequestException ("Cannot update these configs dynamically: [...]").
        EngineError::Config(ConfigError::NotDynamic { .. }) => ResponseError::InvalidRequest,
        EngineError::Config(_) => ResponseError::InvalidConfig,
        // Kafka's RecordTooLargeException and RecordBatchTooLargeException.
        EngineError::RecordTooLarge { .. } => ResponseError::MessageTooLarge,
        EngineError::BatchOverSegmentSize { .. } => ResponseError::RecordListTooLarge,
        // LogValidator refuses a keyless record on a compacted topic with
        // InvalidRecordException (INVALID_RECORD); a bad batch is CORRUPT_MESSAGE.
        EngineError::KeylessOnCompacted { .. } | EngineError::MissingKeySeparator { .. } => {
            ResponseError::InvalidRecord
        }
        EngineError::InvalidRecord { .. }
        | EngineError::CorruptMessage { .. }
        | EngineError::UnreadableBatch { .. } => ResponseError::CorruptMessage,
        EngineError::InvalidProducedBatch { .. } | EngineError::ProduceRequestRule { .. } => {
            ResponseError::InvalidRecord
        }
        EngineError::RecordsRejected {
            invalid_timestamp: true,
            ..
        } => ResponseError::InvalidTimestamp,
        EngineError::RecordsRejected { .. } => ResponseError::InvalidRecord,
        EngineError::RecompressedTooLarge { .. } => ResponseError::MessageTooLarge,
        EngineError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
        EngineError::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber,
        EngineError::InvalidTxnState { .. } => ResponseError::InvalidTxnState,
        EngineError::InvalidProducerIdMapping { .. } => ResponseError::InvalidProducerIdMapping,
        EngineError::ConcurrentTransactions { .. } => ResponseError::ConcurrentTransactions,
        EngineError::TransactionCoordinatorFenced { .. } => {
            ResponseError::TransactionCoordinatorFenced
        }
        EngineError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        EngineError::RecordDeletionPolicy { .. } => ResponseError::PolicyViolation,
        EngineError::InternalTopic { .. } => ResponseError::InvalidTopicException,
        // A failed disk: Kafka takes the log directory offline and answers
        // KAFKA_STORAGE_ERROR, which clients retry (on another replica, in Kafka).
        EngineError::Poisoned { .. } | EngineError::Corrupt { .. } | EngineError::Io { .. } => {
            ResponseError::KafkaStorageError
        }
        // Refusals at open and the cleaner's own outcomes: never returned by a call the
        // adapter makes; an unexpected server error if one ever is.
        EngineError::DataDirLocked { .. }
        | EngineError::LegacyDataDir { .. }
        | EngineError::UnknownDataDirFormat { .. }
        | EngineError::NodeIdMismatch { .. }
        | EngineError::CleanAborted { .. }
        | EngineError::CleanerPanicked => ResponseError::UnknownServerError,
        // A remote store's answer, which the listener's engine never gives: its own code
        // where it is one of Kafka's.
        EngineError::Broker { code, .. } => i16::try_from(*code)
            .ok()
            .and_then(ResponseError::try_from_code)
            .unwrap_or(ResponseError::UnknownServerError),
    }
}

/// Kafka's error code for a group coordinator's refusal: each variant is one of Kafka's
/// errors.
pub(crate) fn group_error_code(error: &GroupError) -> ResponseError {
    match error {
        GroupError::CoordinatorNotAvailable { .. } => ResponseError::CoordinatorNotAvailable,
        GroupError::InvalidGroupId => ResponseError::InvalidGroupId,
        GroupError::GroupIdNotFound { .. } => ResponseError::GroupIdNotFound,
        GroupError::UnknownMemberId => ResponseError::UnknownMemberId,
        GroupError::MemberIdRequired { .. } => ResponseError::MemberIdRequired,
        GroupError::IllegalGeneration => ResponseError::IllegalGeneration,
        GroupError::RebalanceInProgress => ResponseError::RebalanceInProgress,
        GroupError::InconsistentGroupProtocol => ResponseError::InconsistentGroupProtocol,
        GroupError::InvalidSessionTimeout { .. } => ResponseError::InvalidSessionTimeout,
        GroupError::GroupMaxSizeReached { .. } => ResponseError::GroupMaxSizeReached,
        GroupError::FencedInstanceId => ResponseError::FencedInstanceId,
        GroupError::NonEmptyGroup { .. } => ResponseError::NonEmptyGroup,
        GroupError::GroupSubscribedToTopic => ResponseError::GroupSubscribedToTopic,
        GroupError::OffsetMetadataTooLarge { .. } => ResponseError::OffsetMetadataTooLarge,
        GroupError::UnknownTopicOrPartition { .. } => ResponseError::UnknownTopicOrPartition,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    #[test]
    fn user_errors_map_to_kafkas_codes() {
        let unknown = EngineError::UnknownTopic { name: "t".into() };
        assert_eq!(error_code(&unknown).code(), 3);
        let exists = EngineError::TopicExists { name: "t".into() };
        assert_eq!(error_code(&exists).code(), 36);
        let too_large = EngineError::RecordTooLarge {
            partition: "t-0".into(),
            size: crate::engine::error::BatchSize::Exactly(2),
            max: 1,
        };
        assert_eq!(error_code(&too_large).code(), 10);
        let keyless = EngineError::KeylessOnCompacted {
            partition: "t-0".into(),
        };
        assert_eq!(error_code(&keyless).code(), 87);
    }

    #[test]
    fn disk_failures_are_storage_errors_clients_retry() {
        let full = EngineError::io("append", io::Error::from_raw_os_error(libc::ENOSPC));
        assert_eq!(error_code(&full), ResponseError::KafkaStorageError);
        assert!(error_code(&full).is_retriable());
    }
}
