//! The record APIs: Produce, Fetch, ListOffsets, DeleteRecords, InitProducerId,
//! DescribeProducers.

use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
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

use super::{engine_error, str_bytes, topic_by_id, Reply, STOP_CHECK};
use crate::engine::{EngineError, FetchedRange, OffsetQuery, Partition, Topic};
use crate::kafka::deadline::Deadline;
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
    } else if request.transactional_id.is_some() {
        Some((
            ResponseError::TransactionalIdAuthorizationFailed.code(),
            Some(str_bytes("kpfs does not support transactions")),
        ))
    } else {
        None
    };
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
                    topic
                        .append_produced(target.index(), &records)
                        .map_err(|e| {
                            tracing::debug!(topic = name, error = %e, "produce refused");
                            // Kafka lists the records LogValidator refused (Produce v8+).
                            if let (EngineError::RecordsRejected { errors, .. }, 8..) =
                                (&e, version)
                            {
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

/// Fetch: each asked-for partition from its offset, whole batches as file ranges; waits
/// up to `max_wait_ms` until `min_bytes` are there (long poll), answering as soon as
/// they are.
pub(crate) fn fetch(shared: &Shared, request: &FetchRequest) -> FetchReply {
    let deadline = Deadline::after(Duration::from_millis(request.max_wait_ms.max(0) as u64));
    loop {
        let reply = fetch_once(shared, request);
        let bytes: u64 = reply.ranges.iter().flatten().map(|r| r.len).sum();
        let errors = reply
            .response
            .responses
            .iter()
            .flat_map(|t| &t.partitions)
            .any(|p| p.error_code != 0);
        if bytes >= request.min_bytes.max(0) as u64
            || errors
            || deadline.passed()
            || shared.stopping.load(Ordering::Relaxed)
        {
            return reply;
        }
        // Wait for an append to one of the asked-for topics (or the deadline); with none
        // that exists, nothing can arrive.
        let topics: Vec<std::sync::Arc<Topic>> = request
            .topics
            .iter()
            .filter_map(|t| resolve(shared, &t.topic.0, t.topic_id))
            .collect();
        if topics.is_empty() {
            return reply;
        }
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
    }
}

/// Partition `index` of `topic`, if the topic has it.
fn partition_of(topic: &Topic, index: i32) -> Option<std::sync::Arc<Partition>> {
    topic.partition(u32::try_from(index).ok()?)
}

fn resolve(shared: &Shared, name: &str, id: uuid::Uuid) -> Option<std::sync::Arc<Topic>> {
    if name.is_empty() {
        topic_by_id(&shared.engine, id)
    } else {
        shared.engine.topic(name)
    }
}

fn fetch_once(shared: &Shared, request: &FetchRequest) -> FetchReply {
    let mut left = request.max_bytes.max(0) as u64;
    let mut ranges = Vec::new();
    let mut response = FetchResponse::default();
    for asked in &request.topics {
        let topic = resolve(shared, &asked.topic.0, asked.topic_id);
        let mut out = FetchableTopicResponse::default();
        out.topic = asked.topic.clone();
        out.topic_id = asked.topic_id;
        for p in &asked.partitions {
            let mut data = PartitionData::default();
            data.partition_index = p.partition;
            data.high_watermark = -1;
            data.last_stable_offset = -1;
            data.log_start_offset = -1;
            data.preferred_read_replica = BrokerId(-1);
            data.records = Some(Bytes::new());
            let target = topic.as_ref().and_then(|t| partition_of(t, p.partition));
            let fetched = match (&target, u64::try_from(p.fetch_offset)) {
                (Some(target), Ok(offset)) => {
                    let max = left.min(p.partition_max_bytes.max(0) as u64);
                    // Kafka's `minOneMessage`: until a partition has given records.
                    target
                        .fetch_limited(offset, max, ranges.is_empty())
                        .map_err(|e| engine_error(&e).0)
                }
                (Some(_), Err(_)) => Err(ResponseError::OffsetOutOfRange.code()),
                (None, _) => Err(ResponseError::UnknownTopicOrPartition.code()),
            };
            if target.is_some() {
                // Kafka's log lists aborted transactions to read_committed fetches only
                // (kpfs has none: no transactions); a partition it lacks gets an empty
                // list from KafkaApis.
                data.aborted_transactions = None;
            }
            match fetched {
                Ok(outcome) => {
                    data.high_watermark = outcome.high_watermark as i64;
                    data.last_stable_offset = outcome.high_watermark as i64;
                    data.log_start_offset = outcome.log_start_offset as i64;
                    let len = outcome.bytes();
                    if len > 0 {
                        left = left.saturating_sub(len);
                        data.records = Some(records_marker(ranges.len()));
                        ranges.push(outcome.ranges);
                    }
                }
                Err(code) => data.error_code = code,
            }
            out.partitions.push(data);
        }
        response.responses.push(out);
    }
    FetchReply { response, ranges }
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
                Some(target) => match target.list_offset(query) {
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

/// InitProducerId: a producer id and epoch for an idempotent producer. A transactional id
/// is refused with `TRANSACTIONAL_ID_AUTHORIZATION_FAILED`, fatal to the client: kpfs does
/// not support transactions (clients learn it earlier, from FindCoordinator).
pub(crate) fn init_producer_id(
    shared: &Shared,
    request: &InitProducerIdRequest,
) -> InitProducerIdResponse {
    let mut response = InitProducerIdResponse::default();
    response.producer_id = ProducerId(-1);
    response.producer_epoch = -1;
    match &request.transactional_id {
        None => {}
        // Kafka's TransactionCoordinator: an empty id is a malformed request.
        Some(id) if id.is_empty() => {
            response.error_code = ResponseError::InvalidRequest.code();
            return response;
        }
        Some(_) => {
            response.error_code = ResponseError::TransactionalIdAuthorizationFailed.code();
            return response;
        }
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
