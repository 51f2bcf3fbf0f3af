//! The engine's error type. Every variant carries the context a user or operator needs
//! (topic, file, offset); user-facing texts follow Kafka's wording where Kafka has one.

use std::fmt;
use std::io;
use std::path::PathBuf;

use super::config::ConfigError;
use super::limits::MAX_PARTITIONS;

/// What was refused on an internal topic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InternalTopicAction {
    Append,
    DeleteRecords,
    Delete,
    AddPartitions,
}

#[derive(Debug)]
pub enum EngineError {
    /// A topic name that Kafka would refuse; `reason` quotes the name as Kafka's does.
    InvalidTopicName {
        reason: String,
    },
    TopicExists {
        name: String,
    },
    /// A name equal to an existing topic's once '.' and '_' are treated alike (Kafka's
    /// metric names cannot tell them apart).
    TopicCollision {
        name: String,
        existing: String,
    },
    UnknownTopic {
        name: String,
    },
    /// A partition number the topic does not have.
    UnknownPartition {
        topic: String,
        partition: i64,
    },
    /// CreatePartitions asking for fewer partitions than the topic has
    /// (`Topic::add_partitions`; Kafka's `InvalidPartitionsException`: partitions are
    /// only ever added).
    PartitionsDecrease {
        name: String,
        current: u32,
        requested: u32,
    },
    /// CreatePartitions asking for the count the topic has (Kafka's text names no
    /// topic).
    PartitionsUnchanged {
        current: u32,
    },
    /// A partition count below one, or above what a kpfs topic may have.
    InvalidPartitionCount {
        count: u32,
    },
    /// A refused topic or broker configuration change.
    Config(ConfigError),
    /// A record whose batch alone is over `max.message.bytes` (EFBIG).
    RecordTooLarge {
        partition: String,
        size: BatchSize,
        max: u64,
    },
    /// A record whose batch alone is over the segment size (EFBIG).
    BatchOverSegmentSize {
        partition: String,
        size: u64,
        segment_size: i32,
    },
    /// A record without a key written to a compacted topic.
    KeylessOnCompacted {
        partition: String,
    },
    /// A line without the topic's `key.separator` (the console producer's refusal).
    MissingKeySeparator {
        line_number: usize,
        /// The line as the message shows it ([`Excerpt::quoted`]).
        line: String,
    },
    /// Anything else a topic refuses to take or give (a bad backing file name).
    InvalidRecord {
        message: String,
    },
    /// A produced batch refused whole by a rule of Kafka's produce path
    /// (`InvalidRecordException`: the wire's INVALID_RECORD, without record errors).
    InvalidProducedBatch {
        message: String,
    },
    /// A produced request's records broke one of Kafka's request rules
    /// (`ProduceRequest.validateRecords`: INVALID_RECORD, which Kafka answers with the
    /// code alone). Kafka's text says "Produce requests with version N " and `rule`.
    ProduceRequestRule {
        rule: &'static str,
    },
    /// Produced bytes Kafka's batch reader cannot take for a batch (a magic it does not
    /// know, a size under a batch's overhead): its `CorruptRecordException`,
    /// CORRUPT_MESSAGE, which Kafka answers with this text.
    UnreadableBatch {
        message: String,
    },
    /// Records of a produced batch that Kafka's `LogValidator` refused
    /// (`RecordValidationException`): the wire's INVALID_TIMESTAMP when one of them has
    /// an out-of-range timestamp, else INVALID_RECORD; `errors` are its record errors.
    RecordsRejected {
        invalid_timestamp: bool,
        errors: Vec<RecordError>,
    },
    /// A produced batch whose CRC does not match (`CorruptRecordException`:
    /// CORRUPT_MESSAGE).
    CorruptMessage {
        message: String,
    },
    /// A produced batch over `max.message.bytes` once recompressed to the topic's codec
    /// (`RecordTooLargeException`: MESSAGE_TOO_LARGE).
    RecompressedTooLarge {
        partition: String,
        size: u64,
        max: u64,
    },
    /// A batch from an older epoch of its producer (INVALID_PRODUCER_EPOCH).
    InvalidProducerEpoch {
        message: String,
    },
    /// A batch whose sequence does not follow its producer's last one
    /// (OUT_OF_ORDER_SEQUENCE_NUMBER).
    OutOfOrderSequence {
        message: String,
    },
    /// A batch that does not fit its producer's transaction: a plain batch while one is
    /// open (INVALID_TXN_STATE).
    InvalidTxnState {
        message: String,
    },
    /// A transactional batch whose producer id is not its transactional id's
    /// (INVALID_PRODUCER_ID_MAPPING, from Kafka's partition verification).
    InvalidProducerIdMapping {
        message: String,
    },
    /// A transactional batch while its transaction is being ended
    /// (CONCURRENT_TRANSACTIONS, from Kafka's partition verification).
    ConcurrentTransactions {
        message: String,
    },
    /// An end-transaction marker from an older transaction coordinator than the last
    /// one the producer's markers came from (TRANSACTION_COORDINATOR_FENCED).
    TransactionCoordinatorFenced {
        message: String,
    },
    /// The data directory is held by another kpfs process.
    DataDirLocked {
        path: PathBuf,
    },
    /// An earlier I/O failure made the topic refuse writes until remount.
    Poisoned {
        topic: String,
        reason: String,
    },
    /// Bytes on disk that do not decode.
    Corrupt {
        path: PathBuf,
        position: u64,
        reason: String,
    },
    /// A data directory in kpfs's old batch format: `kpfs upgrade` converts it.
    LegacyDataDir {
        data_dir: PathBuf,
    },
    /// A format marker this build does not know (a newer kpfs wrote the directory).
    UnknownDataDirFormat {
        path: PathBuf,
        found: String,
        supported: u32,
    },
    /// Kafka's `OffsetOutOfRangeException`: a fetch outside [log start, log end], or a
    /// log start asked past the high watermark (the log end: one replica).
    OffsetOutOfRange {
        partition: String,
        offset: u64,
        log_start: u64,
        log_end: u64,
        request: OffsetRequest,
    },
    /// Kafka's `PolicyViolationException` of DeleteRecords: the topic's
    /// `cleanup.policy` lacks `delete`.
    RecordDeletionPolicy {
        partition: String,
    },
    /// A write to an internal topic (`__consumer_offsets`) other than the group
    /// coordinator's: Kafka's `InvalidTopicException`.
    InternalTopic {
        name: String,
        action: InternalTopicAction,
    },
    /// The data directory's `meta.properties` names another node than `node.id`.
    NodeIdMismatch {
        stored: i32,
        configured: i32,
        path: PathBuf,
    },
    /// A cleaning pass gave up without changing anything (the log moved under it).
    CleanAborted {
        reason: String,
    },
    /// A cleaning pass panicked: the topic is left uncleanable until remount.
    CleanerPanicked,
    /// A Kafka cluster's answer to a request a remote store made (the cluster mount): the
    /// error's Kafka name and code (negative: the client library's own, e.g. a timeout)
    /// and the broker's message, which is Kafka's wording.
    Broker {
        action: String,
        name: String,
        code: i32,
        message: String,
    },
    /// An operating-system I/O failure.
    Io {
        context: String,
        source: io::Error,
    },
}

/// What asked for an offset outside the log: Kafka's texts differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetRequest {
    /// A fetch (`UnifiedLog.read`).
    Fetch,
    /// A new log start (`maybeIncrementLogStartOffset`, for DeleteRecords).
    DeleteRecords,
}

impl EngineError {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> EngineError {
        EngineError::Io {
            context: context.into(),
            source,
        }
    }

    /// ENOSPC or EDQUOT: the data directory's filesystem or the user's quota is full.
    pub(crate) fn is_out_of_space(&self) -> bool {
        match self {
            EngineError::Io { source, .. } => {
                matches!(source.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
            }
            _ => false,
        }
    }
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EngineError::InvalidTopicName { reason } => {
                write!(f, "Topic name is invalid: {reason}")
            }
            EngineError::TopicExists { name } => write!(f, "Topic '{name}' already exists."),
            EngineError::TopicCollision { name, existing } => {
                write!(f, "Topic '{name}' collides with existing topic: {existing}")
            }
            EngineError::UnknownTopic { name } => {
                write!(
                    f,
                    "This server does not host this topic-partition: {name}-0"
                )
            }
            EngineError::UnknownPartition { topic, partition } => write!(
                f,
                "This server does not host this topic-partition: {topic}-{partition}"
            ),
            // Kafka 4.3.1's `ReplicationControlManager.createPartitions` (asked of a real
            // broker; older releases worded it "which is higher than the requested").
            EngineError::PartitionsDecrease {
                name,
                current,
                requested,
            } => write!(
                f,
                "The topic {name} currently has {current} partition(s); {requested} would not be an increase."
            ),
            EngineError::PartitionsUnchanged { current } => {
                write!(f, "Topic already has {current} partition(s).")
            }
            EngineError::InvalidPartitionCount { count: 0 } => {
                write!(f, "Number of partitions was set to an invalid non-positive value.")
            }
            EngineError::InvalidPartitionCount { count } => write!(
                f,
                "Number of partitions was set to {count}, more than the {MAX_PARTITIONS} partitions a kpfs topic may have."
            ),
            EngineError::Config(e) => write!(f, "{e}"),
            EngineError::RecordTooLarge {
                partition,
                size,
                max,
            } => write!(
                f,
                "The record batch size in the append to {partition} is {size} bytes which exceeds the maximum configured value of {max}."
            ),
            EngineError::BatchOverSegmentSize {
                partition,
                size,
                segment_size,
            } => write!(
                f,
                "Message batch size is {size} bytes in append to partition {partition}, which exceeds the maximum configured segment size of {segment_size}."
            ),
            EngineError::KeylessOnCompacted { partition } => write!(
                f,
                "Compacted topic cannot accept message without key in topic partition {partition}"
            ),
            EngineError::MissingKeySeparator { line_number, line } => {
                write!(f, "No key separator found on line number {line_number}: {line}")
            }
            EngineError::ProduceRequestRule { rule } => write!(f, "Produce requests {rule}"),
            EngineError::InvalidRecord { message }
            | EngineError::UnreadableBatch { message }
            | EngineError::InvalidProducedBatch { message }
            | EngineError::CorruptMessage { message }
            | EngineError::InvalidProducerEpoch { message }
            | EngineError::OutOfOrderSequence { message }
            | EngineError::InvalidTxnState { message }
            | EngineError::InvalidProducerIdMapping { message }
            | EngineError::ConcurrentTransactions { message }
            | EngineError::TransactionCoordinatorFenced { message } => f.write_str(message),
            // Kafka's `LogValidator.processRecordErrors`.
            EngineError::RecordsRejected {
                invalid_timestamp: true,
                ..
            } => f.write_str("One or more records have been rejected due to invalid timestamp"),
            EngineError::RecordsRejected {
                invalid_timestamp: false,
                errors,
            } => {
                let shown: Vec<String> = errors.iter().take(3).map(ToString::to_string).collect();
                write!(
                    f,
                    "One or more records have been rejected due to {} record errors in total, and only showing the first three errors at most: [{}]",
                    errors.len(),
                    shown.join(", ")
                )
            }
            // Kafka's text, its missing space ("topartition") included.
            EngineError::RecompressedTooLarge {
                partition,
                size,
                max,
            } => write!(
                f,
                "Message batch size is {size} bytes in append topartition {partition} which exceeds the maximum configured size of {max}."
            ),
            EngineError::DataDirLocked { path } => write!(
                f,
                "data directory {} is in use by another kpfs process",
                path.display()
            ),
            EngineError::Poisoned { topic, reason } => write!(
                f,
                "topic {topic} refuses writes until remount after an I/O error: {reason}"
            ),
            EngineError::Corrupt {
                path,
                position,
                reason,
            } => write!(f, "{} at byte {position}: {reason}", path.display()),
            EngineError::LegacyDataDir { data_dir } => write!(
                f,
                "{dir} holds segments in kpfs's own batch format (magic 1), which this kpfs no longer reads: back it up, then convert it to Kafka's RecordBatch v2 with `kpfs upgrade {dir}` (one-way)",
                dir = data_dir.display()
            ),
            EngineError::UnknownDataDirFormat {
                path,
                found,
                supported,
            } => write!(
                f,
                "{} names data format version {found:?}; this kpfs reads version {supported}: a newer kpfs wrote this data directory",
                path.display()
            ),
            EngineError::OffsetOutOfRange {
                partition,
                offset,
                log_start,
                log_end,
                request,
            } => match request {
                OffsetRequest::Fetch if offset < log_start => write!(
                    f,
                    "Received request for offset {offset} for partition {partition}, but we only have log segments starting from offset: {log_start}."
                ),
                OffsetRequest::Fetch => write!(
                    f,
                    "Received request for offset {offset} for partition {partition}, but we only have log segments upto {log_end}."
                ),
                OffsetRequest::DeleteRecords => write!(
                    f,
                    "Cannot increment the log start offset to {offset} of partition {partition} since it is larger than the high watermark {log_end}"
                ),
            },
            EngineError::RecordDeletionPolicy { partition } => write!(
                f,
                "Records of partition {partition} can not be deleted due to the configured policy"
            ),
            EngineError::InternalTopic { name, action } => match action {
                InternalTopicAction::Append => write!(f, "Cannot append to internal topic {name}"),
                InternalTopicAction::DeleteRecords => {
                    write!(f, "Cannot delete records of internal topic {name}")
                }
                // Kafka lets an admin delete it, and with it every group's offsets;
                // kpfs keeps its groups.
                InternalTopicAction::Delete => write!(
                    f,
                    "Cannot delete internal topic {name}: it holds the consumer groups and their committed offsets"
                ),
                // Kafka lets an admin add them, which moves groups to other partitions
                // (`partitionFor` hashes over the count); kpfs's coordinator keeps every
                // group in partition 0.
                InternalTopicAction::AddPartitions => write!(
                    f,
                    "Cannot add partitions to internal topic {name}: its one partition holds every consumer group"
                ),
            },
            EngineError::NodeIdMismatch {
                stored,
                configured,
                path,
            } => write!(
                f,
                "Stored node id {stored} doesn't match previous node id {configured} in {}. \
                 If you moved your data, make sure your configured node id matches. If you \
                 intend to create a new node, you should remove all data in your data \
                 directories.",
                path.display()
            ),
            EngineError::CleanAborted { reason } => write!(f, "cleaning aborted: {reason}"),
            EngineError::CleanerPanicked => {
                f.write_str("cleaning aborted: the cleaner panicked (see the log)")
            }
            EngineError::Broker {
                action,
                name,
                message,
                ..
            } => {
                if message.is_empty() {
                    write!(f, "{action}: {name}")
                } else {
                    write!(f, "{action}: {message}")
                }
            }
            EngineError::Io { context, source } => write!(f, "{context}: {source}"),
        }
    }
}

impl std::error::Error for EngineError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            EngineError::Io { source, .. } => Some(source),
            EngineError::Config(e) => Some(e),
            _ => None,
        }
    }
}

impl From<ConfigError> for EngineError {
    fn from(e: ConfigError) -> Self {
        EngineError::Config(e)
    }
}

pub type Result<T, E = EngineError> = std::result::Result<T, E>;

/// One record a produced batch had refused (Kafka's `ProduceResponse.RecordError`): its
/// index in the batch and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordError {
    pub batch_index: i32,
    pub message: String,
}

impl fmt::Display for RecordError {
    /// As Kafka's `RecordError.toString`, which its error message lists.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "RecordError(batchIndex={}, message='{}')",
            self.batch_index, self.message
        )
    }
}

/// The size of a refused record's batch: exact once the record is complete, a lower
/// bound while its line has not ended yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchSize {
    Exactly(u64),
    AtLeast(u64),
}

impl fmt::Display for BatchSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BatchSize::Exactly(size) => write!(f, "{size}"),
            BatchSize::AtLeast(size) => write!(f, "at least {size}"),
        }
    }
}
