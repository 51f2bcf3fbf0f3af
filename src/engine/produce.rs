//! Kafka's checks of the records a client produces to one partition, before they are
//! appended: `KafkaApis`'s request rules (exactly one batch, magic 2),
//! `UnifiedLog.analyzeAndValidateRecords` (base offset 0, `max.message.bytes`, CRC) and
//! `LogValidator` (offset range against the record count, no control batch, sequences,
//! keys on compacted topics, `message.timestamp.*`), then the batch as the log will
//! write it: in place when its codec is the topic's target codec (Kafka's
//! `targetCompression`), else rebuilt with it. The log places the result at the log end
//! under its writer lock, where the producer-state checks happen.
//!
//! Every check here needs only the batch and the topic's config, so a refused batch is
//! refused before the log is locked, and nothing of it is written.

use std::borrow::Cow;

use super::codec::CodecError;
use super::config::{TimestampType, TopicConfig};
use super::error::{BatchSize, EngineError, RecordError, Result};
use super::format::{
    be_u32, decode_header, header_bytes, records_section, set_max_timestamp,
    set_partition_leader_epoch, verify_batch, BatchBuilder, BatchEnd, BatchHeader, BatchIdentity,
    DecodeError, RecordIter, RecordRef, BATCH_HEADER_BYTES, BATCH_MAGIC, LEADER_EPOCH,
};
use super::producer_state::ProducerBatch;
use super::stream_index::StreamShape;

/// What Kafka's Produce response tells the client about one partition's append.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProduceOutcome {
    /// The offset of the batch's first record (the original one for a retried batch).
    pub base_offset: u64,
    /// The append time stamped on the batch under `message.timestamp.type=LogAppendTime`,
    /// else -1; for a retried batch, the original batch's max timestamp, as Kafka answers.
    pub log_append_time_ms: i64,
    pub log_start_offset: u64,
}

/// Bytes of a batch up to and including its magic (Kafka's `HEADER_SIZE_UP_TO_MAGIC`):
/// fewer cannot be a batch.
const BATCH_BYTES_UP_TO_MAGIC: usize = 17;
/// The smallest length field Kafka's batch reader takes (`LegacyRecord.RECORD_OVERHEAD_V0`).
const MIN_BATCH_LENGTH_FIELD: u32 = 14;
/// Where the length field ends: the batch's size is the field plus this.
const LOG_OVERHEAD: usize = 12;

/// A client's batch, checked, as the log appends it: its header (base offset 0, to be
/// moved to the log end) and records section, and what the log needs to place it.
#[derive(Debug)]
pub(crate) struct ValidatedBatch<'a> {
    pub(crate) header: [u8; BATCH_HEADER_BYTES],
    pub(crate) records: Cow<'a, [u8]>,
    /// Stream bytes its records take in the `log` file under `shape`.
    pub(crate) stream_len: u64,
    pub(crate) shape: StreamShape,
    pub(crate) producer: Option<ProducerBatch>,
    /// The append time stamped on it (LogAppendTime), else -1.
    pub(crate) log_append_time_ms: i64,
}

impl ValidatedBatch<'_> {
    /// The header as it stands (base offset 0).
    pub(crate) fn decoded_header(&self) -> BatchHeader {
        decode_header(&self.header).expect("a validated batch's header decodes")
    }

    pub(crate) fn size(&self) -> usize {
        BATCH_HEADER_BYTES + self.records.len()
    }
}

/// Checks the records field of one partition of a Produce request against `config` and
/// makes the batch the log appends, stamped with `now_ms` under LogAppendTime.
pub(crate) fn validate_produced<'a>(
    records: &'a [u8],
    config: &TopicConfig,
    partition: &str,
    now_ms: i64,
) -> Result<ValidatedBatch<'a>> {
    let batch = single_batch(records)?;
    let base_offset = u64::from_be_bytes(batch[..8].try_into().expect("8 bytes"));
    if base_offset != 0 {
        return Err(invalid(format!(
            "The baseOffset of the record batch in the append to {partition} should be 0, but it is {}",
            base_offset as i64
        )));
    }
    let max = config.max_message_bytes.max(0) as u64;
    if batch.len() as u64 > max {
        return Err(EngineError::RecordTooLarge {
            partition: partition.to_string(),
            size: BatchSize::Exactly(batch.len() as u64),
            max,
        });
    }
    let header = verify_batch(batch).map_err(|e| match e {
        DecodeError::CrcMismatch { stored, .. } => corrupt_crc(stored, partition),
        DecodeError::BadLength(_) | DecodeError::Truncated { .. } => {
            corrupt_crc(stored_crc(batch), partition)
        }
        other => invalid(format!("{other} in topic partition {partition}")),
    })?;
    check_batch(&header, partition)?;
    let mut scratch = Vec::new();
    let section = records_section(&header, batch, &mut scratch)
        .map_err(|e| invalid(format!("{e} in topic partition {partition}")))?;
    let shape = config.stream_shape();
    let checked = check_records(&header, section, config, partition, now_ms)?;
    let log_append_time = config.message_timestamp_type == TimestampType::LogAppendTime;
    let max_timestamp = if log_append_time {
        now_ms
    } else {
        checked.max_timestamp
    };
    let source = header.codec().map_err(|e| invalid(e.to_string()))?;
    let target = config.compression.target(source);
    let stream_len = checked.stream_len;
    let producer = ProducerBatch::of(&header);
    let log_append_time_ms = if log_append_time { now_ms } else { -1 };
    if target.codec() == source {
        // Kafka's in-place assignment: the client's records as sent.
        let mut out = header_bytes(batch);
        let stored = &batch[BATCH_HEADER_BYTES..];
        set_max_timestamp(&mut out, stored, log_append_time, max_timestamp);
        set_partition_leader_epoch(&mut out, LEADER_EPOCH);
        return Ok(ValidatedBatch {
            header: out,
            records: Cow::Borrowed(stored),
            stream_len,
            shape,
            producer,
            log_append_time_ms,
        });
    }
    // Kafka's `buildRecordsAndAssignOffsets`: the records again, in the topic's codec.
    let mut builder = BatchBuilder::new(0);
    for record in RecordIter::new(&header, section) {
        let record = record.expect("the records decoded once already");
        builder.push_record(&record);
    }
    let parts = builder
        .finish_parts(&BatchEnd {
            compression: target,
            identity: BatchIdentity {
                partition_leader_epoch: LEADER_EPOCH,
                transactional: false,
                control: false,
                ..header.identity()
            },
            log_append_time_ms: log_append_time.then_some(now_ms),
            ..BatchEnd::PLAIN
        })
        .map_err(|e: CodecError| invalid(format!("{e} in topic partition {partition}")))?;
    if parts.len() as u64 > max {
        return Err(EngineError::RecompressedTooLarge {
            partition: partition.to_string(),
            size: parts.len() as u64,
            max,
        });
    }
    Ok(ValidatedBatch {
        header: parts.header,
        records: Cow::Owned(parts.records.to_vec()),
        stream_len,
        shape,
        producer,
        log_append_time_ms,
    })
}

/// Kafka's request rules for Produce v3 and later (`ProduceRequest.validateRecords`) and
/// its batch reader's (`ByteBufferLogInputStream`): exactly one whole batch of magic 2.
fn single_batch(records: &[u8]) -> Result<&[u8]> {
    const NO_BATCH: EngineError = EngineError::ProduceRequestRule {
        rule: "must have at least one record batch per partition",
    };
    if records.len() < BATCH_BYTES_UP_TO_MAGIC {
        return Err(NO_BATCH);
    }
    let length = be_u32(records, 8);
    if length < MIN_BATCH_LENGTH_FIELD {
        return Err(EngineError::UnreadableBatch {
            message: format!(
                "Record size {} is less than the minimum record overhead ({MIN_BATCH_LENGTH_FIELD})",
                length as i32
            ),
        });
    }
    let size = length as usize + LOG_OVERHEAD;
    if records.len() < size {
        return Err(NO_BATCH);
    }
    let magic = records[16];
    if magic > BATCH_MAGIC {
        return Err(EngineError::UnreadableBatch {
            message: format!("Invalid magic found in record: {magic}"),
        });
    }
    if magic != BATCH_MAGIC {
        return Err(EngineError::ProduceRequestRule {
            rule: "are only allowed to contain record batches with magic version 2",
        });
    }
    if records.len() > size {
        // Kafka takes only whole batches and ignores a torn tail; kpfs refuses both.
        return Err(EngineError::ProduceRequestRule {
            rule: "are only allowed to contain exactly one record batch per partition",
        });
    }
    Ok(records)
}

/// Kafka's `LogValidator.validateBatch` for a client's batch.
fn check_batch(h: &BatchHeader, partition: &str) -> Result<()> {
    let (base, last) = (h.base_offset as i64, h.last_offset() as i64);
    let count = i64::from(h.record_count);
    if count <= 0 {
        return Err(invalid(format!(
            "Invalid reported count for record batch: {count} in topic partition {partition}"
        )));
    }
    if last - base + 1 != count {
        return Err(invalid(format!(
            "Inconsistent batch offset range [{base}, {last}] and count of records {count} in topic partition {partition}"
        )));
    }
    if h.is_control() {
        return Err(invalid(format!(
            "Clients are not allowed to write control records in topic partition {partition}"
        )));
    }
    if h.producer_id >= 0 && h.base_sequence < 0 {
        return Err(invalid(format!(
            "Invalid sequence number {} in record batch with producerId {} in topic partition {partition}",
            h.base_sequence, h.producer_id
        )));
    }
    Ok(())
}

/// What the records of a batch that passed [`check_records`] add up to.
struct CheckedRecords {
    /// Kafka's `maxBatchTimestamp`: the largest record timestamp, -1 without one.
    max_timestamp: i64,
    stream_len: u64,
}

/// Kafka's `LogValidator.validateRecord` for every record: a key on a compacted topic,
/// then the timestamp; every refused record is listed.
fn check_records(
    h: &BatchHeader,
    section: &[u8],
    config: &TopicConfig,
    partition: &str,
    now_ms: i64,
) -> Result<CheckedRecords> {
    let shape = config.stream_shape();
    let mut errors = Vec::new();
    let mut invalid_timestamp = false;
    let mut checked = CheckedRecords {
        max_timestamp: -1,
        stream_len: 0,
    };
    for (index, record) in RecordIter::new(h, section).enumerate() {
        let record = record.map_err(|e| invalid(format!("{e} in topic partition {partition}")))?;
        let index = index as i32;
        checked.stream_len += shape.line_len(record.key, record.value);
        checked.max_timestamp = checked.max_timestamp.max(record.timestamp);
        if config.cleanup_policy.compact && record.key.is_none() {
            errors.push(RecordError {
                batch_index: index,
                message: format!(
                    "Compacted topic cannot accept message without key in topic partition {partition}"
                ),
            });
        } else if let Some(message) = timestamp_error(h, &record, config, now_ms) {
            invalid_timestamp = true;
            errors.push(RecordError {
                batch_index: index,
                message,
            });
        }
    }
    if errors.is_empty() {
        Ok(checked)
    } else {
        Err(EngineError::RecordsRejected {
            invalid_timestamp,
            errors,
        })
    }
}

/// Kafka's `LogValidator.validateTimestamp`, with Java's wrapping long arithmetic.
fn timestamp_error(
    h: &BatchHeader,
    record: &RecordRef<'_>,
    config: &TopicConfig,
    now: i64,
) -> Option<String> {
    let ts = record.timestamp;
    if config.message_timestamp_type == TimestampType::CreateTime && ts != -1 {
        let before = config.message_timestamp_before_max_ms;
        let after = config.message_timestamp_after_max_ms;
        let diff = now.wrapping_sub(ts);
        if diff > before || diff.wrapping_neg() > after {
            return Some(format!(
                "Timestamp {ts} of message with offset {} is out of range. The timestamp should be within [{}, {}]",
                record.offset,
                now.wrapping_sub(before),
                now.wrapping_add(after)
            ));
        }
    } else if h.is_log_append_time() {
        return Some(format!(
            "Invalid timestamp type in message DefaultRecord(offset={}, timestamp={ts}, key={} bytes, value={} bytes). Producer should not set timestamp type to LogAppendTime.",
            record.offset,
            record.key.map_or(0, <[u8]>::len),
            record.value.map_or(0, <[u8]>::len)
        ));
    }
    None
}

fn invalid(message: String) -> EngineError {
    EngineError::InvalidProducedBatch { message }
}

/// The CRC field of a batch too short to have its checksum checked.
fn stored_crc(batch: &[u8]) -> u32 {
    batch.get(17..21).map_or(0, |crc| be_u32(crc, 0))
}

/// Kafka's `CorruptRecordException` text for a batch whose CRC does not match.
fn corrupt_crc(stored: u32, partition: &str) -> EngineError {
    EngineError::CorruptMessage {
        message: format!(
            "Record is corrupt (stored crc = {stored}) in topic partition {partition}."
        ),
    }
}
