//! The record APIs: Produce, Fetch, ListOffsets, DeleteRecords, InitProducerId,
//! DescribeProducers.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{
    BrokerId, DeleteRecordsRequest, DeleteRecordsResponse, DescribeProducersRequest,
    DescribeProducersResponse, FetchRequest, FetchResponse, InitProducerIdRequest,
    InitProducerIdResponse, ListOffsetsRequest, ListOffsetsResponse, ProduceRequest,
    ProduceResponse, ProducerId, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::fetch_session::{Answered, Asked};
use super::{engine_error, str_bytes, Reply, STOP_CHECK};
use crate::deadline::Deadline;
use crate::engine::format::decode_header;
use crate::engine::transactions::TV2;
use crate::engine::{EngineError, FetchedRange, Isolation, OffsetQuery, Partition, Topic};
use crate::kafka::error_code::error_code;
use crate::kafka::response::records_marker;
use crate::kafka::Shared;

/// What Kafka's Produce answers for an append the engine refused: the code, the text
/// only where Kafka sends one (its batch reader's and `LogValidator`'s record errors; its
/// request rules and the log's own refusals reach the client as a code alone), and
/// whether the partition's log start offset goes with it (`ReplicaManager` reports it
/// for all but the errors of a partition it cannot append to at all).
fn produce_refusal(error: &EngineError) -> (i16, Option<StrBytes>, bool) {
    let code = error_code(error).code();
    match error {
        EngineError::UnreadableBatch { .. } => (code, Some(str_bytes(&error.to_string())), false),
        EngineError::RecordsRejected { .. } => (code, Some(str_bytes(&error.to_string())), true),
        EngineError::ProduceRequestRule { .. }
        | EngineError::CorruptMessage { .. }
        | EngineError::RecordTooLarge { .. }
        | EngineError::BatchOverSegmentSize { .. }
        | EngineError::RecompressedTooLarge { .. }
        | EngineError::UnknownTopic { .. }
        | EngineError::Poisoned { .. }
        | EngineError::Corrupt { .. }
        | EngineError::Io { .. } => (code, None, false),
        _ => (code, None, true),
    }
}

/// Produce: each partition's records handed to the engine as the client's batches.
/// Kafka's Produce does not create topics (Metadata does, before a client produces).
pub(crate) fn produce(shared: &Shared, request: ProduceRequest, version: i16) -> Reply {
    let acks = request.acks;
    // Kafka's ReplicaManager answers a bad acks with the code alone.
    let refusal = if !matches!(acks, -1..=1) {
        Some((
            ResponseError::InvalidRequiredAcks.code(),
            // Kafka's KafkaApis answers the code alone.
            None,
        ))
    } else {
        None
    };
    let transactional_id = request.transactional_id.as_ref().map(|id| id.0.to_string());
    let client_tv = super::txn::client_transaction_version(version, 12);
    if let (Some(id), None, TV2) = (&transactional_id, &refusal, client_tv) {
        add_produced_partitions(shared, id, &request);
    }
    let mut failed = None;
    let mut response = ProduceResponse::default();
    for topic_data in request.topic_data {
        let name = topic_data.name.0.to_string();
        let topic = shared.engine.topic(&name);
        let mut out = TopicProduceResponse::default();
        out.name = topic_data.name;
        for partition in topic_data.partition_data {
            let mut result = PartitionProduceResponse::default();
            result.index = partition.index;
            result.base_offset = -1;
            result.log_append_time_ms = -1;
            result.log_start_offset = -1;
            let target = topic
                .as_ref()
                .and_then(|t| partition_of(t, partition.index).map(|p| (t, p)));
            let outcome = match (&refusal, target) {
                (Some(refused), _) => Err(refused.clone()),
                (None, Some((topic, target))) => {
                    let records = partition.records.unwrap_or_default();
                    // A transactional batch goes in as part of its producer's transaction,
                    // once the coordinator has the partition in it.
                    let in_txn = transactional_id.as_deref().zip(
                        decode_header(&records)
                            .ok()
                            .filter(|h| h.is_transactional()),
                    );
                    let appended = match in_txn {
                        Some((id, h)) => shared.engine.produce_in_txn(
                            id,
                            (&name, target.index()),
                            (h.producer_id, h.producer_epoch),
                            client_tv,
                            &records,
                        ),
                        None => topic.append_produced(target.index(), &records),
                    };
                    appended.map_err(|e| {
                        tracing::debug!(topic = name, error = %e, "produce refused");
                        // Kafka lists the records LogValidator refused (Produce v8+).
                        if let (EngineError::RecordsRejected { errors, .. }, 8..) = (&e, version) {
                            result.record_errors = errors
                                .iter()
                                .map(|r| {
                                    let mut b = BatchIndexAndErrorMessage::default();
                                    b.batch_index = r.batch_index;
                                    b.batch_index_error_message = Some(str_bytes(&r.message));
                                    b
                                })
                                .collect();
                        }
                        let (code, message, with_log_start) = produce_refusal(&e);
                        if with_log_start {
                            result.log_start_offset = target.log().log_start_offset() as i64;
                        }
                        (code, message)
                    })
                }
                // Kafka's ReplicaManager: the code alone.
                _ => Err((ResponseError::UnknownTopicOrPartition.code(), None)),
            };
            match outcome {
                Ok(done) => {
                    result.base_offset = done.base_offset as i64;
                    result.log_append_time_ms = done.log_append_time_ms;
                    result.log_start_offset = done.log_start_offset as i64;
                }
                Err((code, message)) => {
                    failed.get_or_insert_with(|| {
                        format!("{name}-{}: error {code}: {message:?}", partition.index)
                    });
                    result.error_code = code;
                    result.error_message = message;
                }
            }
            out.partition_responses.push(result);
        }
        response.responses.push(out);
    }
    match (acks, failed) {
        (0, None) => Reply::Nothing,
        (0, Some(reason)) => Reply::Close(format!("acks=0 produce failed: {reason}")),
        _ => Reply::Message(ResponseKind::Produce(response)),
    }
}

/// A Fetch response whose records are file ranges: `response` holds, in each partition
/// with records, a marker (`response::records_marker`) that `connection` replaces with
/// `ranges[i]`.
pub(crate) struct FetchReply {
    pub(crate) response: FetchResponse,
    pub(crate) ranges: Vec<Vec<FetchedRange>>,
}

/// Fetch: each partition of the request (or of its fetch session) from its offset, whole
/// batches as file ranges; waits up to `max_wait_ms` until `min_bytes` are there (long
/// poll), answering as soon as they are. As Kafka's `KafkaApis.handleFetchRequest`: the
/// partitions that exist are read in order, and those that do not follow them as
/// `UNKNOWN_TOPIC_OR_PARTITION`; consecutive partitions of a topic share its entry. A
/// fetch session (KIP-227, [`fetch_session`]) remembers the partitions of a consumer's
/// full Fetch, and its incremental answers carry only the partitions that changed.
pub(crate) fn fetch(shared: &Shared, request: &FetchRequest) -> FetchReply {
    let asked: Vec<Asked> = request
        .topics
        .iter()
        .flat_map(|t| {
            let topic = t.topic.0.to_string();
            t.partitions.iter().map(move |p| Asked {
                topic: topic.clone(),
                partition: p.partition,
                fetch_offset: p.fetch_offset,
                max_bytes: p.partition_max_bytes,
            })
        })
        .collect();
    let forgotten: Vec<(String, i32)> = request
        .forgotten_topics_data
        .iter()
        .flat_map(|t| t.partitions.iter().map(|&p| (t.topic.0.to_string(), p)))
        .collect();
    let now = || shared.engine.clock().now_ms();
    let context = shared.fetch_sessions.context(
        request.session_id,
        request.session_epoch,
        asked,
        &forgotten,
        now(),
    );
    // Kafka's `metadataCache.contains`: what does not exist is not read (and cannot
    // make the request wait).
    let mut readable = Vec::new();
    let mut missing = Vec::new();
    for asked in context.partitions() {
        let target = shared
            .engine
            .topic(&asked.topic)
            .and_then(|t| partition_of(&t, asked.partition));
        match target {
            Some(partition) => readable.push((asked, partition)),
            None => missing.push(asked),
        }
    }
    // The topics read, once each: a long poll watches them for appends.
    let mut names = std::collections::HashSet::new();
    let topics: Vec<std::sync::Arc<Topic>> = readable
        .iter()
        .filter(|(asked, _)| names.insert(asked.topic.as_str()))
        .filter_map(|(asked, _)| shared.engine.topic(&asked.topic))
        .collect();
    let deadline = Deadline::after(Duration::from_millis(request.max_wait_ms.max(0) as u64));
    let isolation = Isolation::from_request(request.isolation_level);
    let read = loop {
        let read = read_partitions(&readable, request.max_bytes, isolation);
        let bytes: u64 = read.iter().map(|(_, r)| r.bytes).sum();
        if readable.is_empty()
            || bytes >= request.min_bytes.max(0) as u64
            || read.iter().any(|(data, _)| data.error_code != 0)
            || deadline.passed()
            || shared.stopping.load(Ordering::Relaxed)
        {
            break read;
        }
        // Wait for an append to one of the read topics (or the deadline).
        let seen: Vec<u64> = topics.iter().map(|t| t.append_generation()).collect();
        let watched: Vec<&Topic> = topics.iter().map(|t| t.as_ref()).collect();
        shared.engine.append_watch().wait_until(
            &watched,
            deadline.min(Deadline::after(STOP_CHECK)).instant(),
            || {
                topics
                    .iter()
                    .zip(&seen)
                    .any(|(t, &g)| t.append_generation() != g)
            },
        );
    };
    // The answer's partitions, in Kafka's order: those read, then those missing.
    let mut answered: Vec<(&Asked, PartitionData, Vec<FetchedRange>)> = Vec::new();
    for ((asked, _), (data, read)) in readable.iter().zip(read) {
        answered.push((asked, data, read.ranges));
    }
    for asked in missing {
        let mut data = empty_partition(asked.partition);
        data.error_code = ResponseError::UnknownTopicOrPartition.code();
        answered.push((asked, data, Vec::new()));
    }
    let summaries: Vec<(&Asked, Answered)> = answered
        .iter()
        .map(|(asked, data, ranges)| {
            let summary = Answered {
                has_records: ranges.iter().any(|r| r.len > 0),
                high_watermark: data.high_watermark,
                log_start_offset: data.log_start_offset,
                error: data.error_code != 0,
            };
            (*asked, summary)
        })
        .collect();
    let outcome = shared.fetch_sessions.outcome(&context, &summaries, now());
    let mut response = FetchResponse::default();
    response.error_code = outcome.error_code;
    response.session_id = outcome.session_id;
    let mut ranges = Vec::new();
    for ((asked, mut data, read), keep) in answered.into_iter().zip(outcome.keep) {
        if !keep {
            continue;
        }
        if read.iter().any(|r| r.len > 0) {
            data.records = Some(records_marker(ranges.len()));
            ranges.push(read);
        }
        match response.responses.last_mut() {
            Some(last) if last.topic.0.as_str() == asked.topic => last.partitions.push(data),
            _ => {
                let mut out = FetchableTopicResponse::default();
                out.topic = super::topic_name(&asked.topic);
                out.partitions = vec![data];
                response.responses.push(out);
            }
        }
    }
    FetchReply { response, ranges }
}

/// A partition's answer before it is read: no offsets, no records.
fn empty_partition(index: i32) -> PartitionData {
    let mut data = PartitionData::default();
    data.partition_index = index;
    data.high_watermark = -1;
    data.last_stable_offset = -1;
    data.log_start_offset = -1;
    data.preferred_read_replica = BrokerId(-1);
    data.records = Some(Bytes::new());
    data
}

/// What one read of a partition gave: its byte count and file ranges.
struct Read {
    bytes: u64,
    ranges: Vec<FetchedRange>,
}

/// Each partition read from its offset, within the request's `max_bytes` (Kafka's
/// `ReplicaManager.readFromLog`: only the first partition with records may go over it).
fn read_partitions(
    readable: &[(&Asked, std::sync::Arc<Partition>)],
    max_bytes: i32,
    isolation: Isolation,
) -> Vec<(PartitionData, Read)> {
    let mut left = max_bytes.max(0) as u64;
    let mut min_one = true;
    readable
        .iter()
        .map(|(asked, partition)| {
            let mut data = empty_partition(asked.partition);
            // Kafka's log lists aborted transactions to read_committed fetches only.
            data.aborted_transactions = None;
            let fetched = match u64::try_from(asked.fetch_offset) {
                Ok(offset) => {
                    let max = left.min(asked.max_bytes.max(0) as u64);
                    partition
                        .fetch_limited(offset, max, min_one, isolation)
                        .map_err(|e| engine_error(&e).0)
                }
                Err(_) => Err(ResponseError::OffsetOutOfRange.code()),
            };
            let mut read = Read {
                bytes: 0,
                ranges: Vec::new(),
            };
            match fetched {
                Ok(outcome) => {
                    data.high_watermark = outcome.high_watermark as i64;
                    data.last_stable_offset = outcome.last_stable_offset as i64;
                    data.log_start_offset = outcome.log_start_offset as i64;
                    data.aborted_transactions = outcome.aborted.as_ref().map(|aborted| {
                        aborted
                            .iter()
                            .map(|txn| {
                                let mut out = AbortedTransaction::default();
                                out.producer_id = ProducerId(txn.producer_id);
                                out.first_offset = txn.first_offset as i64;
                                out
                            })
                            .collect()
                    });
                    let len = outcome.bytes();
                    if len > 0 {
                        left = left.saturating_sub(len);
                        min_one = false;
                        read = Read {
                            bytes: len,
                            ranges: outcome.ranges,
                        };
                    }
                }
                Err(code) => data.error_code = code,
            }
            (data, read)
        })
        .collect()
}

/// Partition `index` of `topic`, if the topic has it.
fn partition_of(topic: &Topic, index: i32) -> Option<std::sync::Arc<Partition>> {
    topic.partition(u32::try_from(index).ok()?)
}

/// ListOffsets: `-1` latest, `-2` earliest, `-3` the record with the largest timestamp
/// (v7+), any other a timestamp looked up in the time index.
pub(crate) fn list_offsets(
    shared: &Shared,
    request: &ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    let mut response = ListOffsetsResponse::default();
    for asked in &request.topics {
        let topic = shared.engine.topic(&asked.name.0);
        let mut out = ListOffsetsTopicResponse::default();
        out.name = asked.name.clone();
        for p in &asked.partitions {
            let mut result = ListOffsetsPartitionResponse::default();
            result.partition_index = p.partition_index;
            result.timestamp = -1;
            result.offset = -1;
            let query = OffsetQuery::from_request_timestamp(p.timestamp);
            match topic
                .as_ref()
                .and_then(|t| partition_of(t, p.partition_index))
            {
                // Kafka's special timestamps are -1, -2 and (v7+) -3; a version that
                // has no meaning for a negative one is what Kafka's answer says lacks.
                Some(_) if p.timestamp < -3 || (p.timestamp == -3 && version < 7) => {
                    result.error_code = ResponseError::UnsupportedVersion.code()
                }
                Some(target) => match target
                    .list_offset(query, Isolation::from_request(request.isolation_level))
                {
                    Ok(Some((offset, timestamp))) => {
                        result.offset = offset as i64;
                        result.timestamp = timestamp;
                        // A field of v4+: encoding refuses it set in older versions.
                        if version >= 4 {
                            result.leader_epoch = 0;
                        }
                    }
                    Ok(None) => {}
                    Err(e) => result.error_code = engine_error(&e).0,
                },
                None => result.error_code = ResponseError::UnknownTopicOrPartition.code(),
            }
            out.partitions.push(result);
        }
        response.topics.push(out);
    }
    response
}

/// DeleteRecords: moves each log start offset (`-1`: to the high watermark), as
/// `kafka-delete-records.sh`.
pub(crate) fn delete_records(
    shared: &Shared,
    request: &DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let mut response = DeleteRecordsResponse::default();
    for asked in &request.topics {
        let topic = shared.engine.topic(&asked.name.0);
        let mut out = DeleteRecordsTopicResult::default();
        out.name = asked.name.clone();
        for p in &asked.partitions {
            let mut result = DeleteRecordsPartitionResult::default();
            result.partition_index = p.partition_index;
            result.low_watermark = -1;
            match topic
                .as_ref()
                .and_then(|t| partition_of(t, p.partition_index))
            {
                Some(target) => {
                    let offset = match p.offset {
                        -1 => Ok(target.log().log_end_offset()),
                        o => u64::try_from(o).map_err(|_| ResponseError::OffsetOutOfRange.code()),
                    };
                    match offset.and_then(|o| {
                        target
                            .delete_records_before(o)
                            .map_err(|e| engine_error(&e).0)
                    }) {
                        Ok(low) => result.low_watermark = low as i64,
                        Err(code) => result.error_code = code,
                    }
                }
                None => result.error_code = ResponseError::UnknownTopicOrPartition.code(),
            }
            out.partitions.push(result);
        }
        response.topics.push(out);
    }
    response
}

/// Kafka's broker-side verification of a transaction version 2 Produce: the transactional
/// batches' partitions join their producer's transaction in one AddPartitionsToTxn, so the
/// coordinator logs one transition for them all. What it refuses, each partition's append
/// answers (it asks the coordinator again and is refused the same way).
fn add_produced_partitions(shared: &Shared, transactional_id: &str, request: &ProduceRequest) {
    let mut by_producer: BTreeMap<(i64, i16), Vec<(String, i32)>> = BTreeMap::new();
    for topic_data in &request.topic_data {
        let Some(topic) = shared.engine.topic(&topic_data.name.0) else {
            continue;
        };
        for partition in &topic_data.partition_data {
            let header = partition
                .records
                .as_ref()
                .and_then(|r| decode_header(r).ok())
                .filter(|h| h.is_transactional());
            if let (Some(h), Some(_)) = (header, partition_of(&topic, partition.index)) {
                by_producer
                    .entry((h.producer_id, h.producer_epoch))
                    .or_default()
                    .push((topic_data.name.0.to_string(), partition.index));
            }
        }
    }
    for (producer, partitions) in by_producer {
        if let Err(e) = shared
            .engine
            .add_to_txn(transactional_id, producer, &partitions)
        {
            tracing::debug!(transactional_id, error = %e, "partitions not added to the transaction");
        }
    }
}

/// InitProducerId: a producer id and epoch for an idempotent producer, or, with a
/// transactional id, from the transaction coordinator (which bumps the epoch, fencing the
/// producers of the id before, and aborts an open transaction first, as Kafka's does).
pub(crate) fn init_producer_id(
    shared: &Shared,
    request: &InitProducerIdRequest,
) -> InitProducerIdResponse {
    let mut response = InitProducerIdResponse::default();
    response.producer_id = ProducerId(-1);
    response.producer_epoch = -1;
    if let Some(id) = &request.transactional_id {
        match shared
            .engine
            .init_transactional_producer(id, request.transaction_timeout_ms)
        {
            Ok((id, epoch)) => {
                response.producer_id = ProducerId(id);
                response.producer_epoch = epoch;
            }
            Err(e) => response.error_code = super::txn::txn_error_code(&e).code(),
        }
        return response;
    }
    match shared.engine.init_producer_id() {
        Ok((id, epoch)) => {
            response.producer_id = ProducerId(id);
            response.producer_epoch = epoch;
        }
        Err(e) => response.error_code = engine_error(&e).0,
    }
    response
}

/// DescribeProducers: the producer state each asked-for partition keeps, as Kafka's
/// `Partition.activeProducerState` answers it (kafka-transactions.sh describe-producers).
/// A topic or partition that does not exist is the code alone, as in Kafka.
pub(crate) fn describe_producers(
    shared: &Shared,
    request: &DescribeProducersRequest,
) -> DescribeProducersResponse {
    let mut response = DescribeProducersResponse::default();
    for asked in &request.topics {
        let topic = shared.engine.topic(&asked.name.0);
        let mut out = TopicResponse::default();
        out.name = asked.name.clone();
        for &index in &asked.partition_indexes {
            let mut partition = PartitionResponse::default();
            partition.partition_index = index;
            match topic.as_ref().and_then(|t| partition_of(t, index)) {
                Some(target) => {
                    partition.active_producers = target
                        .log()
                        .active_producers()
                        .into_iter()
                        .map(|p| {
                            let mut state = ProducerState::default();
                            state.producer_id = ProducerId(p.producer_id);
                            state.producer_epoch = i32::from(p.producer_epoch);
                            state.last_sequence = p.last_sequence;
                            state.last_timestamp = p.timestamp;
                            state.coordinator_epoch = p.coordinator_epoch;
                            state.current_txn_start_offset = p.current_txn_first_offset;
                            state
                        })
                        .collect();
                }
                None => partition.error_code = ResponseError::UnknownTopicOrPartition.code(),
            }
            out.partitions.push(partition);
        }
        response.topics.push(out);
    }
    response
}
