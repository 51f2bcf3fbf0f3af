//! Every on-disk constant and byte layout of kpfs in one place: the names of the files in
//! the data directory, in a partition directory and in kpfs's own per-topic folder, the
//! record batch framing inside `.log` files (Kafka's RecordBatch v2), the index entry
//! layouts, and the bounds those layouts impose (the largest segment file, the largest
//! relative offset). `docs/FORMAT.md` describes the same bytes for humans; keep the two in
//! step. Bounds the engine chooses, not the format, are in [`limits`](super::limits).
//!
//! All integers are big-endian, as in Kafka. Batches are checksummed with CRC32C
//! (Castagnoli) over everything from their attributes on, as Kafka's are, so recovery can
//! tell a torn or corrupt tail from valid data; the base offset is not covered, so
//! recovery also checks that offsets increase from batch to batch.

use std::fmt;

use super::codec::{compress, decompress, CodecError, Compression, CompressionCodec};
#[cfg(target_arch = "x86_64")]
use super::newlines::{Avx2, Avx512};
use super::newlines::{Baseline, BlockScan, Newlines};

/// Suffixes of the files of one segment.
pub(crate) const LOG_SUFFIX: &str = ".log";
pub(crate) const INDEX_SUFFIX: &str = ".index";
pub(crate) const TIME_INDEX_SUFFIX: &str = ".timeindex";
/// The segment's aborted transactions ([`txn_index`](super::txn_index)), made by its first.
pub(crate) const TXN_INDEX_SUFFIX: &str = ".txnindex";
/// `.txnindex` entry (Kafka's `AbortedTxn`): version i16, producer id i64, first offset
/// i64, last offset i64, last stable offset i64.
pub(crate) const ABORTED_TXN_BYTES: usize = 34;
pub(crate) const ABORTED_TXN_VERSION: i16 = 0;
/// Temporary suffixes appended after the normal one (`...log.deleted`).
pub(crate) const DELETED_SUFFIX: &str = ".deleted";
pub(crate) const CLEANED_SUFFIX: &str = ".cleaned";
pub(crate) const SWAP_SUFFIX: &str = ".swap";

/// Width of the zero-padded base offset in file names (Kafka's `filenamePrefixFromOffset`).
pub(crate) const OFFSET_DIGITS: usize = 20;

/// Suffix of a topic directory being deleted (Kafka's `LocalLog.logDeleteDirName`).
pub(crate) const DELETING_SUFFIX: &str = "-delete";
/// Suffix of `files::write_atomically`'s temporary files, renamed over the target.
pub(crate) const TMP_SUFFIX: &str = ".tmp";

// Files of the data directory.
/// Marker left by a clean shutdown (Kafka's `.kafka_cleanshutdown`).
pub const CLEAN_SHUTDOWN_FILE: &str = ".kpfs_cleanshutdown";
/// Lock file holding the daemon's pid; `flock`ed while a kpfs owns the data directory.
pub(crate) const LOCK_FILE: &str = "kpfs.lock";
/// The daemon's own log (written by the CLI, named here so `kpfs check` knows it).
pub(crate) const DAEMON_LOG_FILE: &str = "kpfs.log";
/// Kafka's `meta.properties` (KRaft, version 1): the cluster id, node id and directory id.
pub(crate) const META_PROPERTIES_FILE: &str = "meta.properties";
/// Dynamic broker config overrides written through `.kpfs/config`.
pub const DYNAMIC_BROKER_CONFIG_FILE: &str = "kpfs-dynamic-broker.properties";
/// Group config overrides (Kafka's `GroupConfig`, set by Alter/IncrementalAlterConfigs):
/// kept beside the broker's, as Kafka keeps both in its metadata log.
pub const GROUP_CONFIG_FILE: &str = "kpfs-group-configs.properties";
/// Kafka's cleaner checkpoint file: first dirty offset per partition.
pub const CLEANER_CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";
/// Kafka's recovery-point checkpoint file: per partition, the offset below which every
/// record was fsynced, so recovery after a crash validates only what follows.
pub const RECOVERY_CHECKPOINT_FILE: &str = "recovery-point-offset-checkpoint";
/// Kafka's log-start checkpoint file: per partition whose log start offset is above its
/// first segment's base (DeleteRecords moved it), that offset.
pub const LOG_START_CHECKPOINT_FILE: &str = "log-start-offset-checkpoint";

/// The start of the next block of producer ids (`producer_ids`): text, the version `0`,
/// then the id, each on its own line.
pub(crate) const PRODUCER_ID_BLOCK_FILE: &str = "kpfs-producer-id-block";

/// kpfs's own per-topic files live in `KPFS_TOPICS_DIR/TOPIC-0/`, outside the partition
/// directory, which holds only what a Kafka partition directory holds.
pub const KPFS_TOPICS_DIR: &str = "kpfs-topics";
/// The topic's config overrides, in its kpfs folder.
pub const TOPIC_CONFIG_FILE: &str = "topic.properties";
/// The renderings of `log` a topic used before its current config (see
/// `topic/renderings.rs`), in its kpfs folder.
pub(crate) const RENDERINGS_FILE: &str = "renderings";
/// A segment's stream index ([`stream_index`](super::stream_index)), in the topic's kpfs
/// folder: `<base offset>.stream`, with the segment's temporary suffixes after it.
pub(crate) const STREAM_INDEX_SUFFIX: &str = ".stream";
/// Stream index file: magic, version u32, the segment's stream start u64, CRC32C u32 of
/// the 16 bytes before it.
pub(crate) const STREAM_INDEX_MAGIC: &[u8; 4] = b"KPSI";
pub(crate) const STREAM_INDEX_VERSION: u32 = 1;
pub(crate) const STREAM_INDEX_HEADER_BYTES: usize = 20;
/// Stream index entry: relative offset u32, `.log` position u32, stream position u64,
/// separator length i32 (-1: keys not rendered), null rendering length u32, CRC32C u32 of
/// the 24 bytes before it.
pub(crate) const STREAM_INDEX_ENTRY_BYTES: usize = 28;

/// The order of a topic's records across its partitions in its `log` file
/// (`stream_order`), in partition 0's kpfs folder; only for a topic of several partitions.
pub(crate) const STREAM_ORDER_FILE: &str = "stream-order";
/// Stream order file: magic, version u32, CRC32C u32 of the 8 bytes before it.
pub(crate) const STREAM_ORDER_MAGIC: &[u8; 4] = b"KPSO";
pub(crate) const STREAM_ORDER_VERSION: u32 = 1;
pub(crate) const STREAM_ORDER_HEADER_BYTES: usize = 12;
/// Stream order entry (a run): partition u32, first offset u64, topic stream position
/// u64, partition stream position u64, CRC32C u32 of the 28 bytes before it.
pub(crate) const STREAM_ORDER_ENTRY_BYTES: usize = 32;

// Kafka's partition-directory files besides the segments.
/// A producer-state snapshot ([`producer_state`](super::producer_state)):
/// `<offset>.snapshot`, the producer state at that offset (Kafka's `ProducerStateManager`).
pub(crate) const SNAPSHOT_SUFFIX: &str = ".snapshot";
/// Snapshot file (Kafka's `ProducerSnapshot` message, version 1): version i16, CRC32C u32
/// of every byte after it, entry count i32, then the entries.
pub(crate) const SNAPSHOT_VERSION: i16 = 1;
/// Where the CRC32C starts, and where the bytes it covers start.
pub(crate) const SNAPSHOT_CRC_AT: usize = 2;
pub(crate) const SNAPSHOT_ENTRIES_AT: usize = 6;
/// Snapshot entry: producer id i64, epoch i16, last sequence i32, last offset i64, offset
/// delta i32, timestamp i64, coordinator epoch i32, current transaction's first offset i64.
pub(crate) const SNAPSHOT_ENTRY_BYTES: usize = 46;
/// The partition's leader epochs and their start offsets (Kafka's
/// `LeaderEpochCheckpointFile`): text, `0`, the entry count, `epoch startOffset` lines.
pub(crate) const LEADER_EPOCH_CHECKPOINT_FILE: &str = "leader-epoch-checkpoint";
/// The partition's topic id (Kafka's `PartitionMetadataFile`): text, `version: 0` and
/// `topic_id: <id>` without a final newline.
pub(crate) const PARTITION_METADATA_FILE: &str = "partition.metadata";

/// `.index` entry: relative offset u32 + file position u32.
pub(crate) const OFFSET_INDEX_ENTRY_BYTES: usize = 8;
/// Where the file position starts in an `.index` entry (after the relative offset).
pub(crate) const OFFSET_INDEX_POSITION_AT: usize = 4;
/// `.timeindex` entry: timestamp i64 + relative offset u32.
pub(crate) const TIME_INDEX_ENTRY_BYTES: usize = 12;
/// Where the relative offset starts in a `.timeindex` entry (after the timestamp).
pub(crate) const TIME_INDEX_OFFSET_AT: usize = 8;
const _: () = assert!(OFFSET_INDEX_POSITION_AT + 4 == OFFSET_INDEX_ENTRY_BYTES);
const _: () = assert!(TIME_INDEX_OFFSET_AT + 4 == TIME_INDEX_ENTRY_BYTES);

/// The largest `.log` kpfs writes: positions in `.index` are u32.
pub(crate) const MAX_SEGMENT_FILE_BYTES: u64 = u32::MAX as u64;
/// The largest offset distance from a segment's base offset: relative offsets in both
/// indexes are u32, and Kafka keeps them to `Int.MaxValue`
/// (`LogSegment.canConvertToRelativeOffset`), so a segment rolls before exceeding it.
pub(crate) const MAX_RELATIVE_OFFSET: u64 = i32::MAX as u64;

/// Kafka's internal topic of group metadata and committed offsets, whose records only
/// the group coordinator writes.
pub(crate) const OFFSETS_TOPIC: &str = "__consumer_offsets";
/// The transaction coordinator's internal topic.
pub(crate) const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// The kpfs folder of the topic whose partition directory is `partition_dir`
/// (`DATA_DIR/TOPIC-0` -> `DATA_DIR/kpfs-topics/TOPIC-0`).
pub(crate) fn kpfs_topic_dir(partition_dir: &std::path::Path) -> std::path::PathBuf {
    let name = partition_dir.file_name().unwrap_or_default();
    partition_dir
        .parent()
        .unwrap_or(std::path::Path::new(""))
        .join(KPFS_TOPICS_DIR)
        .join(name)
}

pub fn segment_file_name(base_offset: u64, suffix: &str) -> String {
    format!("{base_offset:0width$}{suffix}", width = OFFSET_DIGITS)
}

/// Parses `00000000000000000042.log` (or `.index`, ...) into (42, ".log"). Temporary
/// suffixes stay in the returned suffix (`.log.deleted`).
pub(crate) fn parse_segment_file_name(name: &str) -> Option<(u64, &str)> {
    if name.len() < OFFSET_DIGITS || !name.is_char_boundary(OFFSET_DIGITS) {
        return None;
    }
    let (digits, suffix) = name.split_at(OFFSET_DIGITS);
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let base = digits.parse::<u64>().ok()?;
    Some((base, suffix))
}

/// The batch format kpfs writes and reads: Kafka's RecordBatch v2 (`DefaultRecordBatch`).
pub(crate) const BATCH_MAGIC: u8 = 2;

/// Byte positions inside a batch header (Kafka's `DefaultRecordBatch` constants).
const BASE_OFFSET_AT: usize = 0;
const BATCH_LENGTH_AT: usize = 8;
const PARTITION_LEADER_EPOCH_AT: usize = 12;
const MAGIC_AT: usize = 16;
const CRC_AT: usize = 17;
/// The CRC32C covers everything from the attributes to the end of the batch: not the
/// base offset, the length or the leader epoch, which a broker rewrites in place.
const CRC_COVERS_FROM: usize = 21;
const ATTRIBUTES_AT: usize = 21;
const LAST_OFFSET_DELTA_AT: usize = 23;
const BASE_TIMESTAMP_AT: usize = 27;
const MAX_TIMESTAMP_AT: usize = 35;
const PRODUCER_ID_AT: usize = 43;
const PRODUCER_EPOCH_AT: usize = 51;
const BASE_SEQUENCE_AT: usize = 53;
const RECORD_COUNT_AT: usize = 57;
/// Size of the fixed batch header (Kafka's `RECORD_BATCH_OVERHEAD`); the records follow.
pub const BATCH_HEADER_BYTES: usize = 61;
/// `batch_length` counts the bytes after the length field itself.
const LENGTH_FIELD_END: usize = 12;

/// Attribute bits 0-2: the compression codec of the records section.
pub(crate) const ATTR_COMPRESSION_MASK: u16 = 0x07;
/// Attribute bit 3: timestamps are the broker's append time (LogAppendTime).
const ATTR_LOG_APPEND_TIME: u16 = 0x08;
const ATTR_TRANSACTIONAL: u16 = 0x10;
const ATTR_CONTROL: u16 = 0x20;
/// Attribute bit 6 (KIP-534): `base_timestamp` holds the delete horizon of the batch's
/// tombstones.
const ATTR_DELETE_HORIZON: u16 = 0x40;
const KNOWN_ATTRIBUTES: u16 = ATTR_COMPRESSION_MASK
    | ATTR_LOG_APPEND_TIME
    | ATTR_TRANSACTIONAL
    | ATTR_CONTROL
    | ATTR_DELETE_HORIZON;

/// `producerId`, `producerEpoch` and `baseSequence` of a batch that no idempotent
/// producer wrote (Kafka's `RecordBatch.NO_PRODUCER_ID` and friends).
pub(crate) const NO_PRODUCER_ID: i64 = -1;
pub(crate) const NO_PRODUCER_EPOCH: i16 = -1;
pub(crate) const NO_SEQUENCE: i32 = -1;
/// The leader epoch kpfs stamps on its batches: one broker that has always led.
pub(crate) const LEADER_EPOCH: i32 = 0;

/// The largest batch kpfs will decode. Guards allocations against corrupt length fields;
/// larger than any batch kpfs writes (one write is at most one segment).
pub(crate) const MAX_BATCH_BYTES: usize = i32::MAX as usize;

/// Smallest encoded record: length, attributes, timestamp delta, offset delta, key
/// length, value length and header count, one byte each.
const MIN_RECORD_BYTES: usize = 7;
/// A null key's or value's length, -1, as its one-byte zig-zag varint.
const NULL_FIELD_LENGTH: u8 = 1;
const _: () = assert!(zigzag(-1) == NULL_FIELD_LENGTH as u64);
/// Upper bound of a record's bytes besides its key, value and headers: the length
/// (5-byte varint), attributes, a timestamp delta (10), an offset delta (5), two field
/// lengths (5 each) and a header count (5).
const MAX_RECORD_OVERHEAD_BYTES: usize = 36;

/// One record as the engine sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg(any(test, feature = "internals"))]
pub struct Record {
    pub offset: u64,
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    /// `None` is a tombstone.
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

/// The fixed part of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: u64,
    /// Total bytes of the batch, header included.
    pub size: usize,
    pub(crate) partition_leader_epoch: i32,
    pub(crate) crc: u32,
    pub(crate) attributes: u16,
    pub(crate) last_offset_delta: u32,
    /// The first record's timestamp, or with a delete horizon, the horizon (KIP-534).
    pub(crate) base_timestamp: i64,
    pub max_timestamp: i64,
    pub(crate) producer_id: i64,
    pub(crate) producer_epoch: i16,
    pub(crate) base_sequence: i32,
    pub record_count: u32,
}

impl BatchHeader {
    pub fn last_offset(&self) -> u64 {
        self.base_offset + u64::from(self.last_offset_delta)
    }

    pub(crate) fn next_offset(&self) -> u64 {
        self.last_offset() + 1
    }

    /// KIP-534: when the cleaner first kept this batch's tombstones, the time after
    /// which a later cleaning may drop them.
    pub fn delete_horizon_ms(&self) -> Option<i64> {
        (self.attributes & ATTR_DELETE_HORIZON != 0).then_some(self.base_timestamp)
    }

    /// Whether the records section is stored compressed, rather than as the records.
    pub(crate) fn is_compressed(&self) -> bool {
        self.attributes & ATTR_COMPRESSION_MASK != 0
    }

    /// The codec of the records section (an unknown one is refused when the records
    /// are read).
    pub fn codec(&self) -> Result<CompressionCodec, CodecError> {
        CompressionCodec::from_attribute_bits(self.attributes)
    }

    pub(crate) fn is_transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }

    /// Kafka's `hasProducerId`: an idempotent or transactional producer wrote the batch.
    pub(crate) fn has_producer_id(&self) -> bool {
        self.producer_id > NO_PRODUCER_ID
    }

    pub(crate) fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }

    /// Whether the batch's records are lines of the `log` stream: a control batch's
    /// record (a transaction marker) is none, and takes no stream position.
    pub(crate) fn in_log_stream(&self) -> bool {
        !self.is_control()
    }

    /// Kafka's `TimestampType` of the batch: with `LogAppendTime` every record's
    /// timestamp is the batch's max timestamp, not its own delta.
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & ATTR_LOG_APPEND_TIME != 0
    }

    /// Kafka's `DefaultRecordBatch.lastSequence`: the sequence of the batch's last offset,
    /// wrapping past `i32::MAX` to 0 as producers do.
    pub(crate) fn last_sequence(&self) -> i32 {
        sequence_at(self.base_sequence, self.last_offset_delta)
    }

    /// What a copy of this batch keeps of its producer (the cleaner keeps it, as
    /// Kafka's does, so an idempotent producer's sequence survives compaction).
    pub(crate) fn identity(&self) -> BatchIdentity {
        BatchIdentity {
            partition_leader_epoch: self.partition_leader_epoch,
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            base_sequence: self.base_sequence,
            transactional: self.is_transactional(),
            control: self.is_control(),
        }
    }
}

/// The fixed header of a batch, to be rewritten in place before it is appended (Kafka's
/// `DefaultRecordBatch` setters): `batch` holds at least [`BATCH_HEADER_BYTES`].
pub(crate) fn header_bytes(batch: &[u8]) -> [u8; BATCH_HEADER_BYTES] {
    batch[..BATCH_HEADER_BYTES]
        .try_into()
        .expect("a batch holds its header")
}

/// Kafka's `setLastOffset` for a batch whose offset span is fixed: moves its base offset
/// (not covered by the CRC).
pub(crate) fn set_base_offset(header: &mut [u8; BATCH_HEADER_BYTES], base_offset: u64) {
    header[BASE_OFFSET_AT..BASE_OFFSET_AT + 8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Kafka's `setPartitionLeaderEpoch` (not covered by the CRC).
pub(crate) fn set_partition_leader_epoch(header: &mut [u8; BATCH_HEADER_BYTES], epoch: i32) {
    header[PARTITION_LEADER_EPOCH_AT..PARTITION_LEADER_EPOCH_AT + 4]
        .copy_from_slice(&epoch.to_be_bytes());
}

/// Kafka's `setMaxTimestamp(timestampType, maxTimestamp)`: the timestamp type bit and the
/// max timestamp, with the CRC computed again over the header and `records` (the batch's
/// records section) when either changed.
pub(crate) fn set_max_timestamp(
    header: &mut [u8; BATCH_HEADER_BYTES],
    records: &[u8],
    log_append_time: bool,
    max_timestamp: i64,
) {
    let attributes = be_u16(header, ATTRIBUTES_AT);
    let wanted = if log_append_time {
        attributes | ATTR_LOG_APPEND_TIME
    } else {
        attributes & !ATTR_LOG_APPEND_TIME
    };
    if wanted == attributes && be_i64(header, MAX_TIMESTAMP_AT) == max_timestamp {
        return;
    }
    header[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&wanted.to_be_bytes());
    header[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&max_timestamp.to_be_bytes());
    let crc = crc32c_of_parts(&header[CRC_COVERS_FROM..], records);
    header[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Kafka's `DefaultRecordBatch.decrementSequence`: the sequence `delta` offsets before
/// `sequence`, wrapping below 0 to `i32::MAX` as producers do.
pub(crate) fn sequence_before(sequence: i32, delta: i32) -> i32 {
    if sequence < delta {
        i32::MAX - (delta - sequence) + 1
    } else {
        sequence - delta
    }
}

/// Kafka's `DefaultRecordBatch.incrementSequence`: the sequence `delta` offsets after
/// `base_sequence` (no sequence stays none).
pub(crate) fn sequence_at(base_sequence: i32, delta: u32) -> i32 {
    if base_sequence == NO_SEQUENCE {
        return NO_SEQUENCE;
    }
    let delta = delta as i32;
    if base_sequence > i32::MAX - delta {
        delta - (i32::MAX - base_sequence) - 1
    } else {
        base_sequence + delta
    }
}

/// The fields of a batch that name who wrote it rather than what it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BatchIdentity {
    pub(crate) partition_leader_epoch: i32,
    pub(crate) producer_id: i64,
    pub(crate) producer_epoch: i16,
    pub(crate) base_sequence: i32,
    pub(crate) transactional: bool,
    pub(crate) control: bool,
}

impl BatchIdentity {
    /// A batch appended through the mount: no idempotent producer.
    pub(crate) const PLAIN: BatchIdentity = BatchIdentity {
        partition_leader_epoch: LEADER_EPOCH,
        producer_id: NO_PRODUCER_ID,
        producer_epoch: NO_PRODUCER_EPOCH,
        base_sequence: NO_SEQUENCE,
        transactional: false,
        control: false,
    };
}

/// Why bytes do not decode as a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer bytes than the header or the length field announce (a torn tail).
    Truncated {
        needed: usize,
        available: usize,
    },
    BadMagic(u8),
    BadLength(u64),
    CrcMismatch {
        stored: u32,
        computed: u32,
    },
    BadRecord(String),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated { needed, available } => {
                write!(
                    f,
                    "truncated batch: needs {needed} bytes, {available} present"
                )
            }
            DecodeError::BadMagic(m) => write!(f, "unknown batch magic {m}"),
            DecodeError::BadLength(l) => write!(f, "impossible batch length {l}"),
            DecodeError::CrcMismatch { stored, computed } => {
                write!(f, "CRC mismatch: stored {stored}, computed {computed}")
            }
            DecodeError::BadRecord(why) => write!(f, "malformed record: {why}"),
        }
    }
}

/// The big-endian `u16` at `at` (batch attributes).
pub(crate) fn be_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
/// The big-endian `u32` at `at` (batch headers, index entries).
pub(crate) fn be_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
/// The big-endian `u64` at `at` (base offsets).
pub(crate) fn be_u64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
/// The big-endian `i64` at `at` (batch timestamps, `.timeindex` entries).
pub(crate) fn be_i64(b: &[u8], at: usize) -> i64 {
    be_u64(b, at) as i64
}

/// CRC32C (Castagnoli) of a whole batch's covered bytes: Kafka's batch checksum.
pub(crate) fn batch_crc(batch: &[u8]) -> u32 {
    crc_fast::crc32_iscsi(&batch[CRC_COVERS_FROM..])
}

/// CRC32C of `head` followed by `rest`: the checksum of a batch whose header and records
/// sit apart (they are written with one `pwritev`, never joined in memory).
fn crc32c_of_parts(head: &[u8], rest: &[u8]) -> u32 {
    let mut digest = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
    digest.update(head);
    digest.update(rest);
    digest.finalize() as u32
}

/// Decodes the header at the start of `bytes` without checking the CRC. Needs only
/// [`BATCH_HEADER_BYTES`] bytes; `size` tells how many the whole batch has.
pub fn decode_header(bytes: &[u8]) -> Result<BatchHeader, DecodeError> {
    if bytes.len() < BATCH_HEADER_BYTES {
        return Err(DecodeError::Truncated {
            needed: BATCH_HEADER_BYTES,
            available: bytes.len(),
        });
    }
    let length = u64::from(be_u32(bytes, BATCH_LENGTH_AT));
    let size = length as usize + LENGTH_FIELD_END;
    if !(BATCH_HEADER_BYTES..=MAX_BATCH_BYTES).contains(&size) {
        return Err(DecodeError::BadLength(length));
    }
    let magic = bytes[MAGIC_AT];
    if magic != BATCH_MAGIC {
        return Err(DecodeError::BadMagic(magic));
    }
    // Offsets are Kafka longs: anything past i64::MAX (or a range that would overflow)
    // is corruption, and refusing it here keeps every later offset sum in range. The
    // CRC does not cover the base offset: recovery also checks that offsets increase
    // from batch to batch.
    let base_offset = be_u64(bytes, BASE_OFFSET_AT);
    let last_offset_delta = be_u32(bytes, LAST_OFFSET_DELTA_AT);
    let last_offset = base_offset.checked_add(u64::from(last_offset_delta));
    if base_offset > i64::MAX as u64
        || last_offset_delta > i32::MAX as u32
        || last_offset.is_none_or(|l| l >= i64::MAX as u64)
    {
        return Err(DecodeError::BadRecord(format!(
            "batch offset {base_offset} out of range"
        )));
    }
    let attributes = be_u16(bytes, ATTRIBUTES_AT);
    if attributes & !KNOWN_ATTRIBUTES != 0 {
        return Err(DecodeError::BadRecord(format!(
            "unknown batch attributes {attributes:#06x}"
        )));
    }
    let record_count = be_u32(bytes, RECORD_COUNT_AT);
    // Every record takes at least MIN_RECORD_BYTES, which bounds what a reader of the
    // count may allocate (compressed sections are bounded when decompressed).
    let section = size - BATCH_HEADER_BYTES;
    let uncompressed = attributes & ATTR_COMPRESSION_MASK == 0;
    if record_count > i32::MAX as u32
        || (uncompressed && record_count as usize > section / MIN_RECORD_BYTES)
    {
        return Err(DecodeError::BadRecord(format!(
            "record count {record_count} in a {section}-byte records section"
        )));
    }
    Ok(BatchHeader {
        base_offset,
        size,
        partition_leader_epoch: be_u32(bytes, PARTITION_LEADER_EPOCH_AT) as i32,
        crc: be_u32(bytes, CRC_AT),
        attributes,
        last_offset_delta,
        base_timestamp: be_i64(bytes, BASE_TIMESTAMP_AT),
        max_timestamp: be_i64(bytes, MAX_TIMESTAMP_AT),
        producer_id: be_i64(bytes, PRODUCER_ID_AT),
        producer_epoch: be_u16(bytes, PRODUCER_EPOCH_AT) as i16,
        base_sequence: be_u32(bytes, BASE_SEQUENCE_AT) as i32,
        record_count,
    })
}

/// Decodes and verifies a whole batch at the start of `bytes`, copying its records.
#[cfg(any(test, feature = "internals"))]
pub fn decode_batch(bytes: &[u8]) -> Result<(BatchHeader, Vec<Record>), DecodeError> {
    let header = verify_batch(bytes)?;
    let mut scratch = Vec::new();
    let section = records_section(&header, &bytes[..header.size], &mut scratch)?;
    let records = RecordIter::new(&header, section)
        .map(|r| r.map(|r| r.to_record()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((header, records))
}

/// Decodes the header and checks the CRC of the whole batch at the start of `bytes`.
pub fn verify_batch(bytes: &[u8]) -> Result<BatchHeader, DecodeError> {
    let header = decode_header(bytes)?;
    check_whole_batch(bytes, header.size, header.crc, batch_crc)?;
    Ok(header)
}

/// Checks that `bytes` hold the whole batch of `size` bytes at their start and that its
/// checksum, computed by `crc`, is the `stored` one.
pub(crate) fn check_whole_batch(
    bytes: &[u8],
    size: usize,
    stored: u32,
    crc: fn(&[u8]) -> u32,
) -> Result<(), DecodeError> {
    if bytes.len() < size {
        return Err(DecodeError::Truncated {
            needed: size,
            available: bytes.len(),
        });
    }
    let computed = crc(&bytes[..size]);
    if computed != stored {
        return Err(DecodeError::CrcMismatch { stored, computed });
    }
    Ok(())
}

/// The records section of a whole batch, decompressed into `scratch` when the batch is
/// compressed (never more than [`MAX_BATCH_BYTES`]).
pub(crate) fn records_section<'a>(
    header: &BatchHeader,
    batch: &'a [u8],
    scratch: &'a mut Vec<u8>,
) -> Result<&'a [u8], DecodeError> {
    let stored = &batch[BATCH_HEADER_BYTES..header.size];
    let bad = |e: CodecError| DecodeError::BadRecord(e.to_string());
    match header.codec().map_err(bad)? {
        CompressionCodec::None => Ok(stored),
        codec => {
            scratch.clear();
            decompress(codec, stored, MAX_BATCH_BYTES, scratch).map_err(bad)?;
            Ok(scratch)
        }
    }
}

/// Kafka's `EndTransactionMarker`: the one record of a COMMIT or ABORT control batch.
/// Key: version i16 (0), type i16 (0 ABORT, 1 COMMIT); value: version i16 (0),
/// coordinator epoch i32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EndTxnMarker {
    pub(crate) commit: bool,
    pub(crate) coordinator_epoch: i32,
}

impl EndTxnMarker {
    /// Kafka's `ControlRecordType.ABORT` and `COMMIT` ids, as a control record's key
    /// names them.
    pub(crate) const ABORT_TYPE: i16 = 0;
    pub(crate) const COMMIT_TYPE: i16 = 1;
    const VERSION: i16 = 0;

    pub(crate) fn key(&self) -> [u8; 4] {
        let kind = if self.commit {
            Self::COMMIT_TYPE
        } else {
            Self::ABORT_TYPE
        };
        let mut k = [0u8; 4];
        k[..2].copy_from_slice(&Self::VERSION.to_be_bytes());
        k[2..].copy_from_slice(&kind.to_be_bytes());
        k
    }

    pub(crate) fn value(&self) -> [u8; 6] {
        let mut v = [0u8; 6];
        v[..2].copy_from_slice(&Self::VERSION.to_be_bytes());
        v[2..].copy_from_slice(&self.coordinator_epoch.to_be_bytes());
        v
    }

    /// The control type a control record's key names (Kafka's `ControlRecordType.parse`),
    /// if the key holds one.
    pub(crate) fn control_type(record: &RecordRef<'_>) -> Option<i16> {
        let k = record.key?.get(2..4)?;
        Some(i16::from_be_bytes([k[0], k[1]]))
    }

    /// The marker a control record holds, if it is a COMMIT or ABORT one with a value.
    pub(crate) fn of(record: &RecordRef<'_>) -> Option<EndTxnMarker> {
        let commit = match Self::control_type(record)? {
            Self::ABORT_TYPE => false,
            Self::COMMIT_TYPE => true,
            _ => return None,
        };
        let e = record.value?.get(2..6)?;
        Some(EndTxnMarker {
            commit,
            coordinator_epoch: i32::from_be_bytes([e[0], e[1], e[2], e[3]]),
        })
    }

    /// The marker of a control batch's bytes (header and records), if it holds one.
    pub(crate) fn of_batch(header: &BatchHeader, batch: &[u8]) -> Option<EndTxnMarker> {
        if !header.is_control() {
            return None;
        }
        let mut scratch = Vec::new();
        let section = records_section(header, batch, &mut scratch).ok()?;
        let record = RecordIter::new(header, section).next()?.ok()?;
        Self::of(&record)
    }
}

/// A record borrowed from a batch's records section (the read path renders without
/// copying).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordRef<'a> {
    pub offset: u64,
    pub(crate) timestamp: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    /// The record's headers as encoded: their count, then each key and value.
    pub(crate) headers: &'a [u8],
}

impl RecordRef<'_> {
    #[cfg(any(test, feature = "internals"))]
    pub(crate) fn to_record(self) -> Record {
        Record {
            offset: self.offset,
            timestamp: self.timestamp,
            key: self.key.map(<[u8]>::to_vec),
            value: self.value.map(<[u8]>::to_vec),
            headers: self
                .header_fields()
                .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
                .collect(),
        }
    }
}

impl<'a> RecordRef<'a> {
    /// The record's headers as (key, value) pairs; a null value is `None`. [`RecordIter`]
    /// checked their encoding already.
    pub(crate) fn header_fields(&self) -> impl Iterator<Item = (&'a [u8], Option<&'a [u8]>)> {
        let mut rest = self.headers;
        let count = read_varint(&mut rest).map_or(0, unzigzag);
        (0..count).map_while(
            move |_| match (read_field(&mut rest), read_field(&mut rest)) {
                (Ok(Some(k)), Ok(v)) => Some((k, v)),
                _ => None,
            },
        )
    }
}

/// Iterates the records of one verified batch's records section (uncompressed). Checks
/// every length, that offsets increase and stay within the batch, and that nothing
/// trails.
#[derive(Debug)]
pub struct RecordIter<'a> {
    header: BatchHeader,
    rest: &'a [u8],
    section_len: usize,
    remaining: u32,
    previous: Option<u64>,
    failed: bool,
    /// Where in the section the next cache line to prefetch starts.
    prefetched_to: usize,
}

/// How far a [`RecordIter`] went through a records section, so that an iterator over the
/// same section later goes on from there (a read that stopped inside a batch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RecordsProgress {
    consumed: usize,
    remaining: u32,
    previous: Option<u64>,
}

impl<'a> RecordIter<'a> {
    pub fn new(header: &BatchHeader, records: &'a [u8]) -> Self {
        Self::resume(
            header,
            records,
            RecordsProgress {
                consumed: 0,
                remaining: header.record_count,
                previous: None,
            },
        )
    }

    /// Goes on over `records` where an iterator over the same section stood at `from`.
    pub(crate) fn resume(header: &BatchHeader, records: &'a [u8], from: RecordsProgress) -> Self {
        RecordIter {
            header: *header,
            // A section shorter than the progress fails as a truncated record.
            rest: records.get(from.consumed..).unwrap_or_default(),
            section_len: records.len(),
            remaining: from.remaining,
            previous: from.previous,
            failed: false,
            prefetched_to: from.consumed,
        }
    }

    /// Where the iterator stands: before the record the next call decodes.
    pub(crate) fn progress(&self) -> RecordsProgress {
        RecordsProgress {
            consumed: self.section_len - self.rest.len(),
            remaining: self.remaining,
            previous: self.previous,
        }
    }

    /// Asks for every cache line of the section up to [`RECORD_PREFETCH_BYTES`] past the
    /// record about to be decoded. Each record's start follows from the last one's
    /// length, so a walk that waited for each line would pay its misses one after another.
    #[inline(always)]
    fn prefetch_ahead(&mut self) {
        let consumed = self.section_len - self.rest.len();
        let wanted = (consumed + RECORD_PREFETCH_BYTES).min(self.section_len);
        while self.prefetched_to < wanted {
            prefetch(self.rest, self.prefetched_to.saturating_sub(consumed));
            self.prefetched_to += CACHE_LINE_BYTES;
        }
    }

    // Inlined into its callers' loops, so a record's fields go to registers rather than
    // through a returned `Result` on the stack (a stall per record on the read path).
    #[inline(always)]
    fn next_record(&mut self) -> Result<RecordRef<'a>, DecodeError> {
        self.prefetch_ahead();
        let body_len = read_int(&mut self.rest, "record length")?;
        if body_len < 0 || body_len as usize > self.rest.len() {
            return Err(bad_record(format_args!(
                "record length {body_len} with {} bytes left",
                self.rest.len()
            )));
        }
        let (mut body, after) = self.rest.split_at(body_len as usize);
        self.rest = after;
        let Some((_attributes, b)) = body.split_first() else {
            return Err(bad_record(format_args!("empty record")));
        };
        body = b;
        let timestamp_delta = unzigzag(read_varint(&mut body)?);
        let offset_delta = read_int(&mut body, "offset delta")?;
        if offset_delta < 0 || offset_delta as u64 > u64::from(self.header.last_offset_delta) {
            return Err(bad_record(format_args!(
                "offset delta {offset_delta} outside the batch's 0..={}",
                self.header.last_offset_delta
            )));
        }
        let offset = self.header.base_offset + offset_delta as u64;
        if self.previous.is_some_and(|p| offset <= p) {
            return Err(bad_record(format_args!(
                "offset {offset} does not increase"
            )));
        }
        self.previous = Some(offset);
        let key = read_field(&mut body)?;
        let value = read_field(&mut body)?;
        let headers = body;
        let count = read_int(&mut body, "header count")?;
        if count < 0 {
            return Err(bad_record(format_args!("header count {count}")));
        }
        for _ in 0..count {
            if read_field(&mut body)?.is_none() {
                return Err(bad_record(format_args!("null header key")));
            }
            read_field(&mut body)?;
        }
        if !body.is_empty() {
            return Err(bad_record(format_args!(
                "{} bytes after the record's headers",
                body.len()
            )));
        }
        Ok(RecordRef {
            offset,
            // Kafka's `DefaultRecordBatch` gives every record of a LogAppendTime batch the
            // batch's max timestamp, the append time.
            timestamp: if self.header.is_log_append_time() {
                self.header.max_timestamp
            } else {
                self.header.base_timestamp.wrapping_add(timestamp_delta)
            },
            key,
            value,
            headers,
        })
    }
}

impl<'a> RecordIter<'a> {
    /// The next record, when it has the shape nearly every record has: varints of one to
    /// three bytes, a key and a value that may be null, and no headers (what the mount and
    /// most producers write). Otherwise, and at the end of the section, `None` with the
    /// iterator unmoved: [`Iterator::next`] then decodes the record, or says what is wrong
    /// with it. It accepts only records that `next` accepts, and decodes them as `next`
    /// does, in a few compares and no error paths, so the read path's loop stays small.
    #[inline(always)]
    pub(crate) fn next_common(&mut self) -> Option<RecordRef<'a>> {
        if self.remaining == 0 || self.failed {
            return None;
        }
        let rest = self.rest;
        self.prefetch_ahead();
        let (body_len, start) = short_varint(rest, 0)?;
        let end = start.checked_add(usize::try_from(unzigzag(body_len)).ok()?)?;
        let body = rest.get(start..end)?;
        // body[0] is the attributes byte, unused in v2.
        let (timestamp_delta, at) = short_varint(body, 1)?;
        let (offset_delta, at) = short_varint(body, at)?;
        let offset_delta = u64::try_from(unzigzag(offset_delta)).ok()?;
        if offset_delta > u64::from(self.header.last_offset_delta) {
            return None;
        }
        let offset = self.header.base_offset + offset_delta;
        if self.previous.is_some_and(|p| offset <= p) {
            return None;
        }
        let (key, at) = short_field(body, at)?;
        let (value, at) = short_field(body, at)?;
        // A header count of 0 ends the record.
        if body.get(at..) != Some(&[0]) {
            return None;
        }
        self.rest = &rest[end..];
        self.remaining -= 1;
        self.previous = Some(offset);
        Some(RecordRef {
            offset,
            timestamp: if self.header.is_log_append_time() {
                self.header.max_timestamp
            } else {
                self.header
                    .base_timestamp
                    .wrapping_add(unzigzag(timestamp_delta))
            },
            key,
            value,
            headers: &body[at..],
        })
    }
}

/// The varint of one to three bytes at `b[at]`, and where the next field starts. Three
/// bytes hold every offset delta of a batch of up to a million records.
#[inline(always)]
fn short_varint(b: &[u8], at: usize) -> Option<(u64, usize)> {
    let first = *b.get(at)?;
    if first < 0x80 {
        return Some((u64::from(first), at + 1));
    }
    let value = u64::from(first & 0x7f);
    let second = *b.get(at + 1)?;
    if second < 0x80 {
        return Some((value | u64::from(second) << 7, at + 2));
    }
    let value = value | u64::from(second & 0x7f) << 7;
    let third = *b.get(at + 2)?;
    (third < 0x80).then(|| (value | u64::from(third) << 14, at + 3))
}

/// The field (null or bytes) whose short length is at `b[at]`, and where
/// the next field starts.
#[inline(always)]
fn short_field(b: &[u8], at: usize) -> Option<(Option<&[u8]>, usize)> {
    let (len, at) = short_varint(b, at)?;
    match unzigzag(len) {
        -1 => Some((None, at)),
        len => {
            let end = at + usize::try_from(len).ok()?;
            Some((Some(b.get(at..end)?), end))
        }
    }
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<RecordRef<'a>, DecodeError>;

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if self.remaining == 0 {
            if !self.rest.is_empty() {
                self.failed = true;
                return Some(Err(bad_record(format_args!("bytes after the last record"))));
            }
            return None;
        }
        self.remaining -= 1;
        let r = self.next_record();
        self.failed = r.is_err();
        Some(r)
    }
}

/// How far ahead of the record it decodes [`RecordIter`] asks for the section's bytes.
/// Each record's start follows from the last one's length, so without it the walk
/// through a section that is not in the CPU's cache pays its misses one after another.
const RECORD_PREFETCH_BYTES: usize = 2048;

pub(crate) const CACHE_LINE_BYTES: usize = 64;

/// Starts loading `bytes[at]` into the CPU's cache, if there is such a byte.
#[inline(always)]
pub(crate) fn prefetch(bytes: &[u8], at: usize) {
    let Some(byte) = bytes.get(at) else { return };
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that never faults; the pointer is in bounds anyway.
    unsafe {
        std::arch::x86_64::_mm_prefetch(
            std::ptr::from_ref(byte).cast::<i8>(),
            std::arch::x86_64::_MM_HINT_T0,
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = byte;
}

/// A malformed record's error. Out of line, so the decoding functions that may return it
/// stay small enough to inline: they run several times per record on the read path.
#[cold]
fn bad_record(why: fmt::Arguments<'_>) -> DecodeError {
    DecodeError::BadRecord(why.to_string())
}

// The decoding helpers run several times per record on the read path: always inlined (the
// compiler would not), their short fast paths cost a compare and a slice step, no call.
#[inline(always)]
fn read_varint(buf: &mut &[u8]) -> Result<u64, DecodeError> {
    // Most fields are small: one byte or two (a line of 100 bytes has a two-byte length,
    // and so has its record), no loop.
    match **buf {
        [first, ..] if first < 0x80 => {
            *buf = &buf[1..];
            return Ok(u64::from(first));
        }
        [first, second, ..] if second < 0x80 => {
            *buf = &buf[2..];
            return Ok(u64::from(first & 0x7f) | u64::from(second) << 7);
        }
        _ => {}
    }
    let mut value = 0u64;
    for (i, &byte) in buf.iter().enumerate().take(10) {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            *buf = &buf[i + 1..];
            return Ok(value);
        }
    }
    Err(bad_record(format_args!("unterminated varint")))
}

/// A zig-zag varint that Kafka reads as an `int` (`ByteUtils.readVarint`).
#[inline(always)]
fn read_int(buf: &mut &[u8], what: &str) -> Result<i32, DecodeError> {
    let v = unzigzag(read_varint(buf)?);
    i32::try_from(v).map_err(|_| bad_record(format_args!("{what} {v} out of range")))
}

/// A length-prefixed byte field: -1 is null.
#[inline(always)]
fn read_field<'a>(buf: &mut &'a [u8]) -> Result<Option<&'a [u8]>, DecodeError> {
    let len = read_int(buf, "field length")?;
    match len {
        -1 => Ok(None),
        n if n >= 0 && n as usize <= buf.len() => {
            let (field, rest) = buf.split_at(n as usize);
            *buf = rest;
            Ok(Some(field))
        }
        n => Err(bad_record(format_args!(
            "field length {n} with {} bytes left",
            buf.len()
        ))),
    }
}

/// The block [`copy_by_blocks`] copies: most keys, values and lines fit it.
pub(crate) const COPY_BLOCK_BYTES: usize = 128;

/// Copies `src[..len]` to the start of `dst`. Keys and values are mostly short, and a
/// call to `memcpy` for each costs more than the copy itself: when `len` and both slices
/// allow, a whole block of [`COPY_BLOCK_BYTES`] is copied, a fixed-size copy the compiler
/// turns into a few vector moves; the bytes past `len` are the caller's to overwrite.
#[inline(always)]
pub(crate) fn copy_by_blocks(dst: &mut [u8], src: &[u8], len: usize) {
    match (dst.first_chunk_mut(), src.first_chunk()) {
        (Some(block), Some(from)) if len <= COPY_BLOCK_BYTES => {
            let _: &[u8; COPY_BLOCK_BYTES] = from;
            *block = *from;
        }
        _ => copy_exactly(dst, src, len),
    }
}

/// The copy of a field too long for a block, or too near the end of a slice. Out of line:
/// inlined, the compiler would merge it with the block copy into one call to `memcpy` of
/// either size, the call the block copy is there to avoid.
#[inline(never)]
fn copy_exactly(dst: &mut [u8], src: &[u8], len: usize) {
    dst[..len].copy_from_slice(&src[..len]);
}

/// [`copy_by_blocks`] to the end of `out`: the bytes copied past `len` are dropped again
/// (they are left in `out`'s spare capacity).
#[inline(always)]
pub(crate) fn extend_by_blocks(out: &mut Vec<u8>, src: &[u8], len: usize) {
    match src.first_chunk::<COPY_BLOCK_BYTES>() {
        Some(block) if len <= COPY_BLOCK_BYTES => {
            let end = out.len() + len;
            out.extend_from_slice(block);
            out.truncate(end);
        }
        _ => extend_exactly(out, &src[..len]),
    }
}

/// [`copy_exactly`] to the end of `out`.
#[inline(never)]
fn extend_exactly(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(bytes);
}

/// Writes `value` as a varint at the start of `out` (at least 10 bytes); returns its length.
/// Runs several times per record appended: the lengths and deltas of lines take one or two
/// bytes, written without the loop.
#[inline(always)]
fn put_varint(out: &mut [u8], mut value: u64) -> usize {
    if value < 0x80 {
        out[0] = value as u8;
        return 1;
    }
    if value < 0x4000 {
        out[..2].copy_from_slice(&[value as u8 | 0x80, (value >> 7) as u8]);
        return 2;
    }
    let mut n = 0;
    while value >= 0x80 {
        out[n] = (value as u8) | 0x80;
        value >>= 7;
        n += 1;
    }
    out[n] = value as u8;
    n + 1
}

#[inline(always)]
fn varint_len(value: u64) -> usize {
    // Seven bits a byte, and at least one byte.
    (70 - (value | 1).leading_zeros() as usize) / 7
}

/// A key's or value's length as the format stores it: -1 for null.
pub(crate) fn field_len(field: Option<&[u8]>) -> i64 {
    field.map_or(-1, |f| f.len() as i64)
}

const fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Bytes of a record body (after its length) whose deltas take `deltas_len` bytes, with
/// no headers.
fn record_body_len(deltas_len: usize, key_len: i64, value_len: i64) -> usize {
    1 + deltas_len
        + varint_len(zigzag(key_len))
        + key_len.max(0) as usize
        + varint_len(zigzag(value_len))
        + value_len.max(0) as usize
        + 1
}

/// How a batch being finished ends.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BatchEnd {
    /// The batch's last offset, when it is above its last record's (the cleaner keeps a
    /// batch's original last offset, as Kafka's does for producer sequences).
    pub(crate) last_offset: Option<u64>,
    /// KIP-534: the builder's base timestamp is this horizon.
    pub(crate) delete_horizon_ms: Option<i64>,
    /// How the records section is compressed.
    pub(crate) compression: Compression,
    pub(crate) identity: BatchIdentity,
    /// Base and max timestamp of a batch left without records.
    pub(crate) empty_timestamp: i64,
    /// Kafka's `LogAppendTime`: the batch's timestamp type bit is set and its max
    /// timestamp is this append time, which readers give every record.
    pub(crate) log_append_time_ms: Option<i64>,
}

impl BatchEnd {
    /// An uncompressed batch of the records pushed, appended through the mount.
    pub(crate) const PLAIN: BatchEnd = BatchEnd {
        last_offset: None,
        delete_horizon_ms: None,
        compression: Compression::NONE,
        identity: BatchIdentity::PLAIN,
        empty_timestamp: -1,
        log_append_time_ms: None,
    };
}

/// What a client's batch carries besides its records and producer (tests).
#[cfg(any(test, feature = "internals"))]
#[derive(Clone, Copy, Debug)]
pub struct ClientBatch {
    pub compression: Compression,
    pub transactional: bool,
    pub control: bool,
    pub log_append_time_ms: Option<i64>,
}

#[cfg(any(test, feature = "internals"))]
impl ClientBatch {
    /// An uncompressed data batch with CreateTime timestamps.
    pub const PLAIN: ClientBatch = ClientBatch {
        compression: Compression::NONE,
        transactional: false,
        control: false,
        log_append_time_ms: None,
    };

    /// A batch of this kind from `producer` (id, epoch and base sequence) of one keyless
    /// record per value, all at `timestamp`.
    pub fn of_values(self, producer: (i64, i16, i32), timestamp: i64, values: &[&str]) -> Vec<u8> {
        let mut b = BatchBuilder::new(0);
        for (i, v) in values.iter().enumerate() {
            b.push(i as u64, timestamp, None, Some(v.as_bytes()));
        }
        b.finish_client(producer, self)
    }
}

/// The bytes of a batch being encoded, in a buffer kept initialized past them, so an
/// encoder writes records straight into its spare room through a plain slice: no
/// capacity check per field and no `unsafe`. The room is zeroed once, when the buffer
/// grows; a builder is reused for every batch of a log, so that is rare.
#[derive(Debug, Default)]
struct EncodeBuf {
    bytes: Vec<u8>,
    len: usize,
}

impl EncodeBuf {
    fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    fn len(&self) -> usize {
        self.len
    }

    fn clear(&mut self) {
        self.len = 0;
    }

    /// The room after the encoded bytes, at least `n` bytes; what is written there counts
    /// once [`Self::advance`] says so.
    fn room(&mut self, n: usize) -> &mut [u8] {
        if self.bytes.len() < self.len + n {
            let grown = (self.len + n).max(2 * self.bytes.len());
            self.bytes.resize(grown, 0);
        }
        &mut self.bytes[self.len..]
    }

    fn advance(&mut self, n: usize) {
        self.len += n;
    }

    fn extend_from_slice(&mut self, bytes: &[u8]) {
        self.room(bytes.len())[..bytes.len()].copy_from_slice(bytes);
        self.advance(bytes.len());
    }
}

/// What the keyless records of one line length share, encoded once: the fields before
/// the offset delta (length, attributes, timestamp delta) and those after it (a null key
/// and the value's length), each in the low bytes of a word, first byte lowest.
#[derive(Clone, Copy, Debug)]
struct KeylessPrefix {
    line_len: usize,
    head: u128,
    head_len: usize,
    tail: u64,
    tail_len: usize,
    /// Bytes of the whole record.
    record: usize,
}

impl KeylessPrefix {
    fn new(line_len: usize, timestamp_delta: u64, offset_delta_len: usize) -> Self {
        let value_len = zigzag(line_len as i64);
        // Attributes, the two deltas, a null key, the value and a header count of 0.
        let body = 1
            + varint_len(timestamp_delta)
            + offset_delta_len
            + 1
            + varint_len(value_len)
            + line_len
            + 1;
        let length = zigzag(body as i64);
        let mut head = [0u8; 16];
        let mut head_len = put_varint(&mut head, length);
        head_len += 1; // attributes: unused in v2
        head_len += put_varint(&mut head[head_len..], timestamp_delta);
        let mut tail = [0u8; 8];
        tail[0] = NULL_FIELD_LENGTH;
        let tail_len = 1 + put_varint(&mut tail[1..], value_len);
        KeylessPrefix {
            line_len,
            head: u128::from_le_bytes(head),
            head_len,
            tail: u64::from_le_bytes(tail),
            tail_len,
            record: varint_len(length) + body,
        }
    }
}

/// The smallest offset delta above `offset_delta` whose zig-zag varint is a byte longer.
fn wider_offset_delta(offset_delta: u64) -> u64 {
    // A non-negative delta's zig-zag is twice it, so L bytes hold deltas below 2^(7L-1).
    let bits = 7 * varint_len(zigzag(offset_delta as i64)) - 1;
    1u64.checked_shl(bits as u32).unwrap_or(u64::MAX)
}

/// What [`BatchBuilder::push_keyless_lines`] took from a piece of a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LinesTaken {
    /// Bytes of the piece: the records' lines and their newlines (the piece's last line
    /// may lack its newline).
    pub(crate) bytes: usize,
    pub(crate) records: u64,
    /// Bytes of the `log` stream the records take: each its line and a newline.
    pub(crate) stream_bytes: u64,
}

/// Builds one batch in memory. Records must be added in increasing offset order.
#[derive(Debug)]
pub struct BatchBuilder {
    records: EncodeBuf,
    /// The compressed records section, when the batch is compressed.
    compressed: Vec<u8>,
    base_offset: u64,
    /// Set by the first record, unless given up front (a delete horizon).
    base_timestamp: Option<i64>,
    max_timestamp: i64,
    last_offset: Option<u64>,
    record_count: u32,
}

impl BatchBuilder {
    /// A builder whose records' timestamps count from their first record's.
    pub fn new(base_offset: u64) -> Self {
        BatchBuilder {
            records: EncodeBuf::default(),
            compressed: Vec::new(),
            base_offset,
            base_timestamp: None,
            max_timestamp: -1,
            last_offset: None,
            record_count: 0,
        }
    }

    /// Empties the builder for a new batch, keeping its buffers' capacity (the append path
    /// reuses one builder, so its buffers are never allocated or faulted in again).
    /// `base_timestamp` fixes the timestamp deltas count from (a delete horizon);
    /// otherwise the first record's timestamp is the base.
    pub(crate) fn reset(&mut self, base_offset: u64, base_timestamp: Option<i64>) {
        self.records.clear();
        self.compressed.clear();
        self.base_offset = base_offset;
        self.base_timestamp = base_timestamp;
        self.max_timestamp = -1;
        self.last_offset = None;
        self.record_count = 0;
    }

    /// Exact size of an uncompressed batch holding just this record, without headers
    /// (Kafka checks a batch against `max.message.bytes` and the segment size; a record
    /// that cannot fit alone can never be appended). Lengths are -1 for null.
    pub fn single_record_batch_size(key_len: i64, value_len: i64) -> usize {
        // Both deltas of a batch's first record are 0: one byte each.
        let body = record_body_len(2, key_len, value_len);
        BATCH_HEADER_BYTES + varint_len(zigzag(body as i64)) + body
    }

    /// Upper bound of the bytes a record adds to a batch (no headers).
    #[cfg(test)]
    fn record_size_bound(key_len: i64, value_len: i64) -> usize {
        key_len.max(0) as usize + value_len.max(0) as usize + MAX_RECORD_OVERHEAD_BYTES
    }

    /// Exact bytes the next record would add (no headers), so a batch is cut where
    /// Kafka's limit on its size says, not earlier.
    pub(crate) fn next_record_size(
        &self,
        offset: u64,
        timestamp: i64,
        key_len: i64,
        value_len: i64,
    ) -> usize {
        let base_timestamp = self.base_timestamp.unwrap_or(timestamp);
        let deltas = varint_len(zigzag(timestamp.wrapping_sub(base_timestamp)))
            + varint_len(zigzag((offset - self.base_offset) as i64));
        let body = record_body_len(deltas, key_len, value_len);
        varint_len(zigzag(body as i64)) + body
    }

    /// Adds a record without headers.
    pub fn push(&mut self, offset: u64, timestamp: i64, key: Option<&[u8]>, value: Option<&[u8]>) {
        self.push_with_headers(offset, timestamp, key, value, &[0]);
    }

    /// Adds a decoded record unchanged (the cleaner's copy).
    pub(crate) fn push_record(&mut self, rec: &RecordRef<'_>) {
        self.push_with_headers(rec.offset, rec.timestamp, rec.key, rec.value, rec.headers);
    }

    /// Adds a record whose headers are already encoded (their count, then each key and
    /// value).
    pub(crate) fn push_with_headers(
        &mut self,
        offset: u64,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[u8],
    ) {
        assert!(offset >= self.base_offset, "record offset below batch base");
        assert!(
            self.last_offset.is_none_or(|last| offset > last),
            "offsets must strictly increase within a batch"
        );
        let base_timestamp = *self.base_timestamp.get_or_insert(timestamp);
        // The record's fixed fields, encoded on the stack: this runs once per record.
        let mut fixed = [0u8; MAX_RECORD_OVERHEAD_BYTES];
        let mut deltas = [0u8; 15];
        let mut d = put_varint(&mut deltas, zigzag(timestamp.wrapping_sub(base_timestamp)));
        d += put_varint(&mut deltas[d..], zigzag((offset - self.base_offset) as i64));
        let (key_len, value_len) = (field_len(key), field_len(value));
        let body = record_body_len(d, key_len, value_len) - 1 + headers.len();
        let mut n = put_varint(&mut fixed, zigzag(body as i64));
        fixed[n] = 0; // attributes: unused in v2
        n += 1;
        fixed[n..n + d].copy_from_slice(&deltas[..d]);
        n += d;
        n += put_varint(&mut fixed[n..], zigzag(key_len));
        self.records.extend_from_slice(&fixed[..n]);
        if let Some(key) = key {
            self.records.extend_from_slice(key);
        }
        let v = put_varint(&mut fixed, zigzag(value_len));
        self.records.extend_from_slice(&fixed[..v]);
        if let Some(value) = value {
            self.records.extend_from_slice(value);
        }
        self.records.extend_from_slice(headers);
        self.last_offset = Some(offset);
        if timestamp > self.max_timestamp || self.record_count == 0 {
            self.max_timestamp = timestamp;
        }
        self.record_count += 1;
    }

    /// Adds a keyless record for each line of `piece` (its bytes up to a newline, the
    /// last up to the piece's end), at the offsets after the batch's last, while the
    /// batch stays within `limit` bytes: a batch's first record always goes in. Every line
    /// a plain topic is given becomes such a record, so this is the append path's loop:
    /// the records share their timestamp, so only their lengths and offset deltas vary,
    /// and they are encoded straight into the batch's buffer, the values copied in blocks
    /// (see [`copy_by_blocks`]), where [`Self::push`] sizes and encodes any record field
    /// by field. On a CPU with AVX-512BW or AVX2 the loop runs as compiled for it: its
    /// newline search and copies take 64 or 32 bytes at a time.
    pub(crate) fn push_keyless_lines(
        &mut self,
        timestamp: i64,
        piece: &[u8],
        limit: usize,
    ) -> LinesTaken {
        #[cfg(target_arch = "x86_64")]
        if let Some(avx512) = Avx512::detect() {
            // SAFETY: `detect` found AVX-512BW.
            return unsafe { self.push_keyless_lines_avx512(avx512, timestamp, piece, limit) };
        }
        #[cfg(target_arch = "x86_64")]
        if let Some(avx2) = Avx2::detect() {
            // SAFETY: `detect` found AVX2.
            return unsafe { self.push_keyless_lines_avx2(avx2, timestamp, piece, limit) };
        }
        self.push_keyless_lines_with(Baseline, timestamp, piece, limit)
    }

    /// # Safety
    /// The CPU must have AVX-512BW (which an `Avx512` says).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512bw")]
    unsafe fn push_keyless_lines_avx512(
        &mut self,
        avx512: Avx512,
        timestamp: i64,
        piece: &[u8],
        limit: usize,
    ) -> LinesTaken {
        self.push_keyless_lines_with(avx512, timestamp, piece, limit)
    }

    /// # Safety
    /// The CPU must have AVX2 (which an `Avx2` says).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn push_keyless_lines_avx2(
        &mut self,
        avx2: Avx2,
        timestamp: i64,
        piece: &[u8],
        limit: usize,
    ) -> LinesTaken {
        self.push_keyless_lines_with(avx2, timestamp, piece, limit)
    }

    #[inline(always)]
    fn push_keyless_lines_with<S: BlockScan>(
        &mut self,
        scan: S,
        timestamp: i64,
        piece: &[u8],
        limit: usize,
    ) -> LinesTaken {
        // Set by the first record, unless given up front.
        let base_timestamp = self.base_timestamp.unwrap_or(timestamp);
        let timestamp_delta = zigzag(timestamp.wrapping_sub(base_timestamp));
        let mut offset = self.last_offset.map_or(self.base_offset, |last| last + 1);
        let first_count = self.record_count;
        let encoded_before = BATCH_HEADER_BYTES + self.records.len();
        let mut room = self.records.room(0);
        let (mut written, mut taken, mut stream_bytes) = (0, 0, 0);
        let mut newlines = Newlines::new(piece, scan);
        // The prefix of the last line's length; it serves every line of that length until
        // the offset delta's varint grows (at `wider_from`).
        let mut prefix: Option<KeylessPrefix> = None;
        let mut wider_from = 0;
        while taken < piece.len() {
            let line_end = newlines.next().unwrap_or(piece.len());
            let len = line_end - taken;
            let offset_delta = offset - self.base_offset;
            if offset_delta >= wider_from {
                wider_from = wider_offset_delta(offset_delta);
                prefix = None;
            }
            let p = match prefix {
                Some(p) if p.line_len == len => p,
                _ => *prefix.insert(KeylessPrefix::new(
                    len,
                    timestamp_delta,
                    varint_len(zigzag(offset_delta as i64)),
                )),
            };
            if self.record_count > 0 && encoded_before + written + p.record > limit {
                break;
            }
            // Room for the record, and for its value's copy to run a block past its end.
            let wanted = written + p.record + COPY_BLOCK_BYTES;
            if room.len() < wanted {
                room = self.records.room(wanted);
            }
            // The fields before the value: the constant ones as two words stored whole
            // (what they store past their fields, the next field overwrites).
            let out = &mut room[written..];
            out[..16].copy_from_slice(&p.head.to_le_bytes());
            let mut n = p.head_len;
            n += put_varint(&mut out[n..], zigzag(offset_delta as i64));
            out[n..n + 8].copy_from_slice(&p.tail.to_le_bytes());
            n += p.tail_len;
            copy_by_blocks(&mut out[n..], &piece[taken..], len);
            out[n + len] = 0; // no headers
            written += p.record;
            self.last_offset = Some(offset);
            offset += 1;
            self.record_count += 1;
            taken = (line_end + 1).min(piece.len());
            stream_bytes += len as u64 + 1;
        }
        self.records.advance(written);
        let records = u64::from(self.record_count - first_count);
        if records > 0 {
            self.base_timestamp = Some(base_timestamp);
            if timestamp > self.max_timestamp || first_count == 0 {
                self.max_timestamp = timestamp;
            }
        }
        LinesTaken {
            bytes: taken,
            records,
            stream_bytes,
        }
    }

    /// Size of the batch so far, uncompressed.
    pub(crate) fn encoded_len(&self) -> usize {
        BATCH_HEADER_BYTES + self.records.len()
    }

    /// Records in the batch so far.
    pub(crate) fn record_count(&self) -> u32 {
        self.record_count
    }

    /// Moves the batch to base offset `base_offset`, its records keeping their places in
    /// it: a record holds its offset as a delta from the base, so only the header, written
    /// at the finish, changes (a batch built before its log end was known).
    pub(crate) fn move_to(&mut self, base_offset: u64) {
        self.last_offset = self
            .last_offset
            .map(|last| last - self.base_offset + base_offset);
        self.base_offset = base_offset;
    }

    /// Bytes the builder's buffers hold, whatever the batch uses of them.
    pub(crate) fn capacity(&self) -> usize {
        self.records.bytes.len() + self.compressed.capacity()
    }

    /// Finishes the batch into one buffer.
    pub fn finish(&mut self, last_offset: Option<u64>, delete_horizon_ms: Option<i64>) -> Vec<u8> {
        self.finish_parts(&BatchEnd {
            last_offset,
            delete_horizon_ms,
            ..BatchEnd::PLAIN
        })
        .expect("an uncompressed batch needs no codec")
        .to_vec()
    }

    /// Finishes an uncompressed transactional batch of producer `producer_id` at `epoch`
    /// (a coordinator's own records in a transaction; Kafka's coordinator runtime writes
    /// them at sequence 0, which no check reads for a coordinator's batch).
    pub(crate) fn finish_transactional(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Vec<u8> {
        self.finish_parts(&BatchEnd {
            identity: BatchIdentity {
                producer_id,
                producer_epoch,
                base_sequence: 0,
                transactional: true,
                ..BatchIdentity::PLAIN
            },
            ..BatchEnd::PLAIN
        })
        .expect("an uncompressed batch needs no codec")
        .to_vec()
    }

    /// Adds a record with headers given as (key, value) pairs, as a client's producer does
    /// (tests build clients' batches with it).
    #[cfg(any(test, feature = "internals"))]
    pub fn push_with_header_pairs(
        &mut self,
        offset: u64,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&[u8], Option<&[u8]>)],
    ) {
        let mut encoded = [0u8; 10];
        let n = put_varint(&mut encoded, zigzag(headers.len() as i64));
        let mut bytes = encoded[..n].to_vec();
        for (k, v) in headers {
            for field in [Some(*k), *v] {
                let n = put_varint(&mut encoded, zigzag(field_len(field)));
                bytes.extend_from_slice(&encoded[..n]);
                bytes.extend_from_slice(field.unwrap_or_default());
            }
        }
        self.push_with_headers(offset, timestamp, key, value, &bytes);
    }

    /// Finishes the batch as a client's producer sends it (tests): `producer` is its
    /// producer id, epoch and base sequence ((-1, -1, -1) when not idempotent).
    #[cfg(any(test, feature = "internals"))]
    pub fn finish_client(&mut self, producer: (i64, i16, i32), client: ClientBatch) -> Vec<u8> {
        let (producer_id, producer_epoch, base_sequence) = producer;
        self.finish_parts(&BatchEnd {
            compression: client.compression,
            identity: BatchIdentity {
                partition_leader_epoch: -1,
                producer_id,
                producer_epoch,
                base_sequence,
                transactional: client.transactional,
                control: client.control,
            },
            log_append_time_ms: client.log_append_time_ms,
            ..BatchEnd::PLAIN
        })
        .expect("a client's batch compresses")
        .to_vec()
    }

    /// Finishes the batch as its header and records section, without copying the records
    /// into one buffer.
    pub(crate) fn finish_parts(&mut self, end: &BatchEnd) -> Result<BatchParts<'_>, CodecError> {
        let last = end
            .last_offset
            .or(self.last_offset)
            .unwrap_or(self.base_offset);
        assert!(
            self.last_offset.is_none_or(|l| last >= l),
            "batch last offset below its last record"
        );
        if let Some(horizon) = end.delete_horizon_ms {
            assert_eq!(
                self.base_timestamp.get_or_insert(horizon),
                &horizon,
                "a delete horizon is the batch's base timestamp"
            );
        }
        let last_delta =
            u32::try_from(last - self.base_offset).expect("batch offset span fits u32");
        let (base_timestamp, max_timestamp) = if self.record_count == 0 {
            let t = self.base_timestamp.unwrap_or(end.empty_timestamp);
            (t, end.empty_timestamp.max(t))
        } else {
            (
                self.base_timestamp.expect("set by the first record"),
                self.max_timestamp,
            )
        };
        // A batch left without records is written with no codec, as Kafka's
        // `writeEmptyHeader` writes it.
        let codec = if self.record_count == 0 {
            CompressionCodec::None
        } else {
            end.compression.codec()
        };
        let section: &[u8] = if codec == CompressionCodec::None {
            self.records.as_slice()
        } else {
            self.compressed.clear();
            compress(
                end.compression,
                self.records.as_slice(),
                &mut self.compressed,
            )?;
            &self.compressed
        };
        let mut attributes = codec.attribute_bits() & ATTR_COMPRESSION_MASK;
        if end.delete_horizon_ms.is_some() {
            attributes |= ATTR_DELETE_HORIZON;
        }
        if end.identity.transactional {
            attributes |= ATTR_TRANSACTIONAL;
        }
        let max_timestamp = match end.log_append_time_ms {
            Some(append_time) => {
                attributes |= ATTR_LOG_APPEND_TIME;
                append_time
            }
            None => max_timestamp,
        };
        if end.identity.control {
            attributes |= ATTR_CONTROL;
        }
        let size = BATCH_HEADER_BYTES + section.len();
        let length = u32::try_from(size - LENGTH_FIELD_END).expect("batch fits u32");
        let id = end.identity;
        let mut b = [0u8; BATCH_HEADER_BYTES];
        b[BASE_OFFSET_AT..BASE_OFFSET_AT + 8].copy_from_slice(&self.base_offset.to_be_bytes());
        b[BATCH_LENGTH_AT..BATCH_LENGTH_AT + 4].copy_from_slice(&length.to_be_bytes());
        b[PARTITION_LEADER_EPOCH_AT..PARTITION_LEADER_EPOCH_AT + 4]
            .copy_from_slice(&id.partition_leader_epoch.to_be_bytes());
        b[MAGIC_AT] = BATCH_MAGIC;
        b[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
        b[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4]
            .copy_from_slice(&last_delta.to_be_bytes());
        b[BASE_TIMESTAMP_AT..BASE_TIMESTAMP_AT + 8].copy_from_slice(&base_timestamp.to_be_bytes());
        b[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&max_timestamp.to_be_bytes());
        b[PRODUCER_ID_AT..PRODUCER_ID_AT + 8].copy_from_slice(&id.producer_id.to_be_bytes());
        b[PRODUCER_EPOCH_AT..PRODUCER_EPOCH_AT + 2]
            .copy_from_slice(&id.producer_epoch.to_be_bytes());
        b[BASE_SEQUENCE_AT..BASE_SEQUENCE_AT + 4].copy_from_slice(&id.base_sequence.to_be_bytes());
        b[RECORD_COUNT_AT..RECORD_COUNT_AT + 4].copy_from_slice(&self.record_count.to_be_bytes());
        let crc = crc32c_of_parts(&b[CRC_COVERS_FROM..], section);
        b[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
        Ok(BatchParts {
            header: b,
            records: section,
        })
    }
}

/// A finished batch as its header and records section; written with one vectored write.
#[derive(Debug)]
pub struct BatchParts<'a> {
    pub(crate) header: [u8; BATCH_HEADER_BYTES],
    pub(crate) records: &'a [u8],
}

impl BatchParts<'_> {
    pub(crate) fn len(&self) -> usize {
        BATCH_HEADER_BYTES + self.records.len()
    }

    pub(crate) fn slices(&self) -> [&[u8]; 2] {
        [&self.header, self.records]
    }

    pub fn to_vec(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(self.len());
        b.extend_from_slice(&self.header);
        b.extend_from_slice(self.records);
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::Strategy;

    fn sample_batch() -> Vec<u8> {
        let mut b = BatchBuilder::new(10);
        b.push(10, 1_000, Some(b"a"), Some(b"1"));
        b.push(11, 990, None, Some(b"no key"));
        b.push(13, 1_005, Some(b"k"), None);
        b.finish(None, None)
    }

    #[test]
    fn batch_round_trips() {
        let bytes = sample_batch();
        let (h, recs) = decode_batch(&bytes).unwrap();
        assert_eq!(h.base_offset, 10);
        assert_eq!(h.last_offset(), 13);
        assert_eq!(h.size, bytes.len());
        assert_eq!((h.base_timestamp, h.max_timestamp), (1_000, 1_005));
        assert_eq!(h.delete_horizon_ms(), None);
        assert_eq!(h.identity(), BatchIdentity::PLAIN);
        assert_eq!(recs.len(), 3);
        assert_eq!(recs[0].key.as_deref(), Some(&b"a"[..]));
        assert_eq!(recs[0].value.as_deref(), Some(&b"1"[..]));
        assert_eq!(recs[1].key, None);
        assert_eq!(recs[1].timestamp, 990);
        assert_eq!(recs[2].value, None);
        assert_eq!(recs[2].offset, 13);
        assert!(recs.iter().all(|r| r.headers.is_empty()));
    }

    /// Kafka's `DefaultRecordBatch` bytes for one keyless 8-byte record, as the seed's
    /// demo shows them: 61 + 7 + 8 = 76 bytes, and the CRC32C Kafka computes.
    #[test]
    fn a_single_record_batch_is_kafkas_bytes() {
        let mut b = BatchBuilder::new(0);
        b.push(0, 1_700_000_000_000, None, Some(b"record-1"));
        let bytes = b.finish(None, None);
        assert_eq!(bytes.len(), 76);
        let mut expected = Vec::new();
        expected.extend_from_slice(&0u64.to_be_bytes()); // baseOffset
        expected.extend_from_slice(&64u32.to_be_bytes()); // batchLength
        expected.extend_from_slice(&0u32.to_be_bytes()); // partitionLeaderEpoch
        expected.push(2); // magic
        let crc_at = expected.len();
        expected.extend_from_slice(&[0; 4]);
        expected.extend_from_slice(&0u16.to_be_bytes()); // attributes
        expected.extend_from_slice(&0u32.to_be_bytes()); // lastOffsetDelta
        expected.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
        expected.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
        expected.extend_from_slice(&(-1i64).to_be_bytes()); // producerId
        expected.extend_from_slice(&(-1i16).to_be_bytes()); // producerEpoch
        expected.extend_from_slice(&(-1i32).to_be_bytes()); // baseSequence
        expected.extend_from_slice(&1u32.to_be_bytes()); // records
                                                         // length 14 (zigzag 28), attributes, ts delta, offset delta, key -1, value 8.
        expected.extend_from_slice(&[28, 0, 0, 0, 1, 16]);
        expected.extend_from_slice(b"record-1");
        expected.push(0); // headers
        let crc = crc32c::crc32c(&expected[CRC_COVERS_FROM..]);
        expected[crc_at..crc_at + 4].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(bytes, expected);
    }

    #[test]
    fn headers_survive_a_copy() {
        let mut b = BatchBuilder::new(0);
        // One header "h" = "v", then one with a null value.
        let headers = [4, 2, b'h', 2, b'v', 2, b'n', 1];
        b.push_with_headers(0, 5, Some(b"k"), Some(b"v"), &headers);
        let bytes = b.finish(None, None);
        let (h, recs) = decode_batch(&bytes).unwrap();
        assert_eq!(
            recs[0].headers,
            [(b"h".to_vec(), Some(b"v".to_vec())), (b"n".to_vec(), None)]
        );
        let mut scratch = Vec::new();
        let section = records_section(&h, &bytes, &mut scratch).unwrap();
        let rec = RecordIter::new(&h, section).next().unwrap().unwrap();
        let mut copy = BatchBuilder::new(0);
        copy.push_record(&rec);
        assert_eq!(copy.finish(None, None), bytes);
    }

    /// The CRC does not cover the base offset, the length or the leader epoch (Kafka's
    /// layout): a flip anywhere else is caught by the CRC, one in the length by framing;
    /// the base offset is checked across batches by recovery.
    #[test]
    fn every_covered_byte_flip_is_detected() {
        let bytes = sample_batch();
        for i in BATCH_LENGTH_AT..bytes.len() {
            if (PARTITION_LEADER_EPOCH_AT..MAGIC_AT).contains(&i) {
                continue;
            }
            let mut copy = bytes.clone();
            copy[i] ^= 0x40;
            assert!(
                decode_batch(&copy).is_err(),
                "flip at byte {i} went unnoticed"
            );
        }
    }

    /// An iteration resumed from another's progress yields what the other would have.
    #[test]
    fn an_iteration_goes_on_from_anothers_progress() {
        let bytes = sample_batch();
        let h = decode_header(&bytes).unwrap();
        let section = &bytes[BATCH_HEADER_BYTES..];
        let all: Vec<_> = RecordIter::new(&h, section).map(Result::unwrap).collect();
        for taken in 0..=all.len() {
            let mut first = RecordIter::new(&h, section);
            first.by_ref().take(taken).for_each(drop);
            let rest: Vec<_> = RecordIter::resume(&h, section, first.progress())
                .map(Result::unwrap)
                .collect();
            assert_eq!(rest, all[taken..]);
        }
    }

    #[test]
    fn every_truncation_is_detected() {
        let bytes = sample_batch();
        for len in 0..bytes.len() {
            assert!(decode_batch(&bytes[..len]).is_err(), "truncation to {len}");
        }
    }

    proptest::proptest! {
        /// Any records round-trip, and the size bound holds.
        #[test]
        fn records_round_trip(
            records in proptest::collection::vec(
                (0u64..3, proptest::num::i64::ANY, proptest::option::of("[a-z]{0,5}"), proptest::option::of(proptest::collection::vec(proptest::num::u8::ANY, 0..200))),
                0..20),
            base_offset in 0u64..1 << 40,
        ) {
            let mut b = BatchBuilder::new(base_offset);
            let mut offset = base_offset;
            let mut expected = Vec::new();
            let mut bound = BATCH_HEADER_BYTES;
            for (gap, ts, key, value) in &records {
                offset += gap;
                b.push(offset, *ts, key.as_deref().map(str::as_bytes), value.as_deref());
                bound += BatchBuilder::record_size_bound(field_len(key.as_deref().map(str::as_bytes)), field_len(value.as_deref()));
                expected.push((offset, *ts, key.clone().map(String::into_bytes), value.clone()));
                offset += 1;
            }
            let bytes = b.finish(None, None);
            proptest::prop_assert!(bytes.len() <= bound);
            // The checksum as an implementation written elsewhere computes it.
            proptest::prop_assert_eq!(be_u32(&bytes, CRC_AT), crc32c::crc32c(&bytes[CRC_COVERS_FROM..]));
            let (_, recs) = decode_batch(&bytes).unwrap();
            let got: Vec<_> = recs.into_iter().map(|r| (r.offset, r.timestamp, r.key, r.value)).collect();
            proptest::prop_assert_eq!(got, expected);
        }
    }

    proptest::proptest! {
        /// The keyless fast path takes the records the general path's size check takes,
        /// and encodes them to the same bytes, in every build this CPU runs (baseline,
        /// AVX2, AVX-512BW).
        #[test]
        fn keyless_records_encode_as_the_general_path_does(
            pieces in proptest::collection::vec(
                (
                    proptest::collection::vec(
                        proptest::collection::vec(
                            proptest::num::u8::ANY.prop_map(|b| if b == b'\n' { b'.' } else { b }),
                            0..300,
                        ),
                        1..40,
                    ),
                    proptest::bool::ANY,
                    -100i64..100,
                ),
                1..4,
            ),
            base_offset in 0u64..1 << 40,
            limit in 0usize..6000,
        ) {
            // Every build of the loop this CPU can run: as every CPU can, and with the
            // wider instructions it has.
            type Push = fn(&mut BatchBuilder, i64, &[u8], usize) -> LinesTaken;
            let mut builds: Vec<(BatchBuilder, Push)> = vec![(BatchBuilder::new(0), |b, ts, piece, limit| {
                b.push_keyless_lines_with(Baseline, ts, piece, limit)
            })];
            #[cfg(target_arch = "x86_64")]
            if Avx2::detect().is_some() {
                builds.push((BatchBuilder::new(0), |b, ts, piece, limit| {
                    let avx2 = Avx2::detect().expect("detected above");
                    // SAFETY: `detect` found AVX2.
                    unsafe { b.push_keyless_lines_avx2(avx2, ts, piece, limit) }
                }));
            }
            #[cfg(target_arch = "x86_64")]
            if Avx512::detect().is_some() {
                builds.push((BatchBuilder::new(0), |b, ts, piece, limit| {
                    let avx512 = Avx512::detect().expect("detected above");
                    // SAFETY: `detect` found AVX-512BW.
                    unsafe { b.push_keyless_lines_avx512(avx512, ts, piece, limit) }
                }));
            }
            let mut general = BatchBuilder::new(0);
            for (b, _) in &mut builds {
                b.reset(base_offset, None);
            }
            general.reset(base_offset, None);
            let mut offset = base_offset;
            'pieces: for (lines, terminated, ts) in &pieces {
                let mut piece = lines.join(&b'\n');
                if *terminated {
                    piece.push(b'\n');
                }
                // An unterminated empty last line is no line: the piece ends before it.
                let lines = match lines.split_last() {
                    Some((last, before)) if last.is_empty() && !*terminated => before,
                    _ => &lines[..],
                };
                let taken: Vec<LinesTaken> =
                    builds.iter_mut().map(|(b, push)| push(b, *ts, &piece, limit)).collect();
                let (mut bytes, mut records, mut stream_bytes) = (0, 0, 0);
                for line in lines {
                    let size = general.next_record_size(offset, *ts, -1, line.len() as i64);
                    if offset > base_offset && general.encoded_len() + size > limit {
                        break;
                    }
                    general.push(offset, *ts, None, Some(line));
                    offset += 1;
                    records += 1;
                    bytes = (bytes + line.len() + 1).min(piece.len());
                    stream_bytes += line.len() as u64 + 1;
                }
                for build_taken in taken {
                    proptest::prop_assert_eq!(build_taken, LinesTaken { bytes, records, stream_bytes });
                }
                if bytes < piece.len() {
                    break 'pieces;
                }
            }
            let expected = general.finish(None, None);
            for (b, _) in &mut builds {
                proptest::prop_assert_eq!(b.finish(None, None), expected.clone());
            }
        }

        /// The read path's decoder of common records accepts only what the general decoder
        /// accepts, decodes it alike, and leaves every other record to it: over valid
        /// sections with every shape of record, and over the same sections with a byte
        /// changed.
        #[test]
        fn common_records_decode_as_the_general_decoder_decodes_them(
            records in proptest::collection::vec(
                (
                    0u64..20_000,
                    -1_000i64..1_000,
                    proptest::option::of(proptest::collection::vec(proptest::num::u8::ANY, 0..200)),
                    proptest::option::of(proptest::collection::vec(proptest::num::u8::ANY, 0..20_000)),
                    proptest::bool::ANY,
                ),
                1..12,
            ),
            flip in proptest::option::of((proptest::num::usize::ANY, 1u8..=255)),
        ) {
            let mut b = BatchBuilder::new(0);
            let mut offset = 0;
            for (gap, ts, key, value, with_header) in &records {
                offset += gap;
                match with_header {
                    true => b.push_with_header_pairs(offset, *ts, key.as_deref(), value.as_deref(), &[(b"h", Some(b"v"))]),
                    false => b.push(offset, *ts, key.as_deref(), value.as_deref()),
                }
                offset += 1;
            }
            let batch = b.finish(Some(offset + 3), None);
            let header = decode_header(&batch).unwrap();
            let mut section = batch[BATCH_HEADER_BYTES..].to_vec();
            if let Some((at, xor)) = flip {
                let at = at % section.len();
                section[at] ^= xor;
            }
            let general: Vec<_> = RecordIter::new(&header, &section).collect();
            let (mut mixed, mut common) = (Vec::new(), 0);
            let mut iter = RecordIter::new(&header, &section);
            loop {
                match iter.next_common() {
                    Some(rec) => {
                        mixed.push(Ok(rec));
                        common += 1;
                    }
                    None => match iter.next() {
                        Some(rec) => mixed.push(rec),
                        None => break,
                    },
                }
            }
            proptest::prop_assert_eq!(mixed, general);
            if flip.is_none() {
                // Every record without headers has the common shape here.
                let headerless = records.iter().filter(|r| !r.4).count();
                proptest::prop_assert_eq!(common, headerless);
            }
        }
    }

    #[test]
    fn single_record_batch_size_is_exact() {
        for (key, value) in [
            (Some(&b"k"[..]), Some(&b"v"[..])),
            (None, Some(&b"plain"[..])),
            (Some(&b"k"[..]), None),
            (None, Some(&[7u8; 300][..])),
        ] {
            let mut b = BatchBuilder::new(5);
            b.push(5, 7, key, value);
            let real = b.finish(None, None).len();
            assert_eq!(
                BatchBuilder::single_record_batch_size(field_len(key), field_len(value)),
                real
            );
        }
    }

    #[test]
    fn an_empty_batch_keeps_its_offsets_and_horizon() {
        let mut b = BatchBuilder::new(7);
        b.reset(7, Some(42));
        let bytes = b.finish(Some(9), Some(42));
        let (h, recs) = decode_batch(&bytes).unwrap();
        assert!(recs.is_empty());
        assert_eq!(h.last_offset(), 9);
        assert_eq!(h.delete_horizon_ms(), Some(42));
    }

    #[test]
    fn file_names_round_trip() {
        assert_eq!(segment_file_name(42, ".log"), "00000000000000000042.log");
        assert_eq!(
            parse_segment_file_name("00000000000000000042.index.deleted"),
            Some((42, ".index.deleted"))
        );
        assert_eq!(parse_segment_file_name("leader-epoch-checkpoint"), None);
    }

    #[test]
    fn varints_round_trip() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut out = vec![0u8; 10];
            let len = put_varint(&mut out, v);
            out.truncate(len);
            assert_eq!(out.len(), varint_len(v));
            let mut s = out.as_slice();
            assert_eq!(read_varint(&mut s).unwrap(), v);
            assert!(s.is_empty());
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
    }
}
