//! The transaction APIs: AddPartitionsToTxn v0-3 (v4+ are between brokers) and
//! AddOffsetsToTxn, which clients below transaction version 2 send, EndTxn (v5 is
//! transaction version 2's: the answer carries the producer's new id and epoch), and the
//! admin APIs kafka-transactions.sh uses, ListTransactions and DescribeTransactions.
//! InitProducerId with a transactional id is in `records`, beside the idempotent one;
//! TxnOffsetCommit in `groups`, beside OffsetCommit.

use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::list_transactions_response::TransactionState as ListedTransaction;
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, DescribeTransactionsRequest, DescribeTransactionsResponse,
    EndTxnRequest, EndTxnResponse, ListTransactionsRequest, ListTransactionsResponse, ProducerId,
    TransactionalId,
};
use kafka_protocol::ResponseError;

use super::{str_bytes, topic_name};
use crate::engine::transactions::{TxnError, TxnStatus, TV2};
use crate::kafka::Shared;

/// The code Kafka answers a transaction refusal with.
pub(crate) fn txn_error_code(error: &TxnError) -> ResponseError {
    match error {
        TxnError::InvalidRequest(_) => ResponseError::InvalidRequest,
        TxnError::InvalidTransactionTimeout => ResponseError::InvalidTransactionTimeout,
        TxnError::CoordinatorNotAvailable(_) => ResponseError::CoordinatorNotAvailable,
        TxnError::ConcurrentTransactions => ResponseError::ConcurrentTransactions,
        TxnError::InvalidProducerIdMapping => ResponseError::InvalidProducerIdMapping,
        TxnError::ProducerFenced => ResponseError::ProducerFenced,
        TxnError::InvalidTxnState(_) => ResponseError::InvalidTxnState,
        TxnError::TransactionalIdNotFound => ResponseError::TransactionalIdNotFound,
        TxnError::UnknownTopicOrPartition => ResponseError::UnknownTopicOrPartition,
        TxnError::OperationNotAttempted => ResponseError::OperationNotAttempted,
    }
}

fn code(outcome: &Result<(), TxnError>) -> i16 {
    outcome
        .as_ref()
        .err()
        .map_or(0, |e| txn_error_code(e).code())
}

/// AddPartitionsToTxn v0-3: the partitions join the producer's transaction; each
/// partition answers, with the request's error when the whole request was refused.
pub(crate) fn add_partitions_to_txn(
    shared: &Shared,
    request: &AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    let asked: Vec<(String, i32)> = request
        .v3_and_below_topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |&p| (t.name.0.to_string(), p)))
        .collect();
    let producer = (
        request.v3_and_below_producer_id.0,
        request.v3_and_below_producer_epoch,
    );
    let codes: Vec<i16> = match shared.engine.add_partitions_to_txn(
        &request.v3_and_below_transactional_id.0,
        producer,
        &asked,
    ) {
        Ok(answers) => answers
            .iter()
            .map(|a| a.as_ref().map_or(0, |e| txn_error_code(e).code()))
            .collect(),
        Err(e) => vec![txn_error_code(&e).code(); asked.len()],
    };
    let mut response = AddPartitionsToTxnResponse::default();
    for ((topic, partition), code) in asked.into_iter().zip(codes) {
        let mut result = AddPartitionsToTxnPartitionResult::default();
        result.partition_index = partition;
        result.partition_error_code = code;
        match response.results_by_topic_v3_and_below.last_mut() {
            Some(last) if last.name.0.as_str() == topic => last.results_by_partition.push(result),
            _ => {
                let mut out = AddPartitionsToTxnTopicResult::default();
                out.name = topic_name(&topic);
                out.results_by_partition = vec![result];
                response.results_by_topic_v3_and_below.push(out);
            }
        }
    }
    response
}

/// AddOffsetsToTxn: the group's offsets partition joins the transaction.
pub(crate) fn add_offsets_to_txn(
    shared: &Shared,
    request: &AddOffsetsToTxnRequest,
) -> AddOffsetsToTxnResponse {
    let outcome = shared.engine.add_offsets_to_txn(
        &request.transactional_id.0,
        (request.producer_id.0, request.producer_epoch),
    );
    let mut response = AddOffsetsToTxnResponse::default();
    response.error_code = code(&outcome);
    response
}

/// EndTxn: the transaction is committed or aborted, markers written, when it answers.
pub(crate) fn end_txn(shared: &Shared, request: &EndTxnRequest, version: i16) -> EndTxnResponse {
    let outcome = shared.engine.end_txn(
        &request.transactional_id.0,
        (request.producer_id.0, request.producer_epoch),
        request.committed,
        client_transaction_version(version, 5),
    );
    let mut response = EndTxnResponse::default();
    let (producer_id, epoch) = match outcome {
        Ok(producer) => producer,
        Err(e) => {
            response.error_code = txn_error_code(&e).code();
            (-1, -1)
        }
    };
    response.producer_id = ProducerId(producer_id);
    response.producer_epoch = epoch;
    response
}

/// The transaction version of a client whose request is at `version`, transaction
/// version 2 from `first_tv2` (Kafka's `TransactionVersion.transactionVersionForEndTxn`
/// and `KafkaApis`'s choices for Produce and TxnOffsetCommit: a client sends those
/// versions only when the cluster finalized transaction version 2).
pub(crate) fn client_transaction_version(version: i16, first_tv2: i16) -> i16 {
    if version >= first_tv2 {
        TV2
    } else {
        0
    }
}

/// ListTransactions: the transactional ids, filtered by state and producer id (an
/// unknown state name is answered in `unknown_state_filters`, as Kafka does).
pub(crate) fn list_transactions(
    shared: &Shared,
    request: &ListTransactionsRequest,
) -> ListTransactionsResponse {
    let mut response = ListTransactionsResponse::default();
    let mut states = Vec::new();
    for name in &request.state_filters {
        match TxnStatus::from_name(name) {
            Some(state) => states.push(state),
            None => response.unknown_state_filters.push(name.clone()),
        }
    }
    if !request.state_filters.is_empty() && states.is_empty() {
        return response;
    }
    let producer_ids: Vec<i64> = request.producer_id_filters.iter().map(|p| p.0).collect();
    for listed in shared.engine.list_transactions(&states, &producer_ids) {
        let mut out = ListedTransaction::default();
        out.transactional_id = TransactionalId(str_bytes(&listed.transactional_id));
        out.producer_id = ProducerId(listed.producer_id);
        out.transaction_state = str_bytes(listed.state.name());
        response.transaction_states.push(out);
    }
    response
}

/// DescribeTransactions: each id's state, producer and partitions.
pub(crate) fn describe_transactions(
    shared: &Shared,
    request: &DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let mut response = DescribeTransactionsResponse::default();
    for id in &request.transactional_ids {
        let mut out = TransactionState::default();
        out.transactional_id = id.clone();
        out.transaction_state = str_bytes("");
        out.producer_id = ProducerId(-1);
        out.producer_epoch = -1;
        out.transaction_start_time_ms = -1;
        match shared.engine.describe_transaction(&id.0) {
            Ok(d) => {
                out.transaction_state = str_bytes(d.state.name());
                out.transaction_timeout_ms = d.timeout_ms;
                out.transaction_start_time_ms = d.start_ms;
                out.producer_id = ProducerId(d.producer_id);
                out.producer_epoch = d.producer_epoch;
                for (topic, partition) in d.partitions {
                    match out.topics.last_mut() {
                        Some(last) if last.topic.0.as_str() == topic => {
                            last.partitions.push(partition)
                        }
                        _ => {
                            let mut t = TopicData::default();
                            t.topic = topic_name(&topic);
                            t.partitions = vec![partition];
                            out.topics.push(t);
                        }
                    }
                }
            }
            Err(e) => out.error_code = txn_error_code(&e).code(),
        }
        response.transaction_states.push(out);
    }
    response
}
