//! Kafka's transaction coordinator (`TransactionCoordinator`, `TransactionStateManager`,
//! `TransactionMetadata`): a transactional id's producer id and epoch, its open
//! transaction's partitions, and the two-phase end (PrepareCommit or PrepareAbort, the
//! markers in every partition, then CompleteCommit or CompleteAbort).
//!
//! Both of Kafka's protocols are served, each request at its client's transaction version
//! (Kafka's `TransactionVersion`, which the request's version tells): the classic one
//! (versions 0 and 1: the producer adds partitions with AddPartitionsToTxn and offsets
//! with AddOffsetsToTxn, and its epoch changes only at InitProducerId), and version 2
//! (KIP-890 part 2: a partition joins the transaction at the producer's first write to
//! it, and every commit or abort bumps the epoch, a new producer id once the epoch runs
//! out). The finalized `transaction.version` (the coordinator's `level`) decides the
//! `__transaction_state` value version and how the coordinator's own aborts bump.
//!
//! Its durable record is Kafka's own: `__transaction_state` records (keys and values in
//! Kafka's schemas, [`records`]) in an internal compacted topic of one partition,
//! replayed at open. A transaction found prepared at open gets its markers and is
//! completed; one found ongoing stays open until its producer ends it or its
//! `transaction.timeout.ms` passes, as in Kafka.
//!
//! The coordinator knows nothing of topics: it writes markers, finds partitions and takes
//! producer ids through [`TxnHost`], which the engine implements. Timers read the
//! engine's clock, so tests drive timeouts and expirations by advancing it.

mod api;
mod records;

pub use api::TxnOrGroupError;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::clock::Clock;
use super::config::{BrokerConfig, TransactionSettings};
use super::dump_findings::{java_hash_order, java_hash_set_order, java_string_hash};
use super::error::EngineError;
use super::format::{BatchBuilder, OFFSETS_TOPIC};
use super::partition::Partition;
use records::{decode_key, encode_key, TxnLogValue};

pub(crate) use super::format::TRANSACTION_STATE_TOPIC;

/// The coordinator epoch kpfs's markers carry: one coordinator, never moved.
pub(crate) const COORDINATOR_EPOCH: i32 = 0;
/// The `transaction.version` a fresh Kafka 4.3.1 cluster finalizes, and the highest
/// kpfs serves.
pub const DEFAULT_TRANSACTION_VERSION: i16 = 2;
/// Transaction version 2, from which every commit and abort bumps the epoch (Kafka's
/// `TransactionVersion.supportsEpochBump`).
pub(crate) const TV2: i16 = 2;
/// How much of `__transaction_state` a replay reads at a time.
const REPLAY_READ_BYTES: u64 = 1 << 20;

/// Kafka's `TransactionState`, with the ids its log values carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TxnStatus {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    Dead,
    PrepareEpochFence,
}

impl TxnStatus {
    const ALL: [TxnStatus; 8] = [
        TxnStatus::Empty,
        TxnStatus::Ongoing,
        TxnStatus::PrepareCommit,
        TxnStatus::PrepareAbort,
        TxnStatus::CompleteCommit,
        TxnStatus::CompleteAbort,
        TxnStatus::Dead,
        TxnStatus::PrepareEpochFence,
    ];

    pub(crate) fn id(self) -> i8 {
        Self::ALL.iter().position(|s| *s == self).expect("listed") as i8
    }

    pub(crate) fn from_id(id: i8) -> Option<TxnStatus> {
        usize::try_from(id)
            .ok()
            .and_then(|i| Self::ALL.get(i))
            .copied()
    }

    /// Kafka's `TransactionState.stateName`, as ListTransactions and DescribeTransactions
    /// answer it and `kafka-transactions.sh` prints it.
    pub fn name(self) -> &'static str {
        match self {
            TxnStatus::Empty => "Empty",
            TxnStatus::Ongoing => "Ongoing",
            TxnStatus::PrepareCommit => "PrepareCommit",
            TxnStatus::PrepareAbort => "PrepareAbort",
            TxnStatus::CompleteCommit => "CompleteCommit",
            TxnStatus::CompleteAbort => "CompleteAbort",
            TxnStatus::Dead => "Dead",
            TxnStatus::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// The state a ListTransactions filter names, by its name.
    pub fn from_name(name: &str) -> Option<TxnStatus> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// Why a transaction request was refused, as Kafka's error codes say it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnError {
    /// An empty transactional id (INVALID_REQUEST).
    InvalidRequest(String),
    /// A `transaction.timeout.ms` above `transaction.max.timeout.ms` or not positive.
    InvalidTransactionTimeout,
    /// `__transaction_state` cannot be written (COORDINATOR_NOT_AVAILABLE).
    CoordinatorNotAvailable(String),
    /// The id's last transaction is still being ended (CONCURRENT_TRANSACTIONS).
    ConcurrentTransactions,
    /// The producer id is not the id's (INVALID_PRODUCER_ID_MAPPING).
    InvalidProducerIdMapping,
    /// An older epoch of the id's producer (PRODUCER_FENCED).
    ProducerFenced,
    /// A request the transaction's state does not allow (INVALID_TXN_STATE).
    InvalidTxnState(String),
    /// DescribeTransactions of an unknown id (TRANSACTIONAL_ID_NOT_FOUND).
    TransactionalIdNotFound,
    /// A partition that does not exist (UNKNOWN_TOPIC_OR_PARTITION).
    UnknownTopicOrPartition,
    /// A partition not added because another of the request failed
    /// (OPERATION_NOT_ATTEMPTED).
    OperationNotAttempted,
}

impl fmt::Display for TxnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TxnError::InvalidRequest(why)
            | TxnError::CoordinatorNotAvailable(why)
            | TxnError::InvalidTxnState(why) => f.write_str(why),
            TxnError::InvalidTransactionTimeout => f.write_str(
                "The transaction timeout is larger than the maximum value allowed by the broker (as configured by transaction.max.timeout.ms).",
            ),
            TxnError::ConcurrentTransactions => f.write_str(
                "The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing.",
            ),
            TxnError::InvalidProducerIdMapping => f.write_str(
                "The producer attempted to use a producer id which is not currently assigned to its transactional id.",
            ),
            TxnError::ProducerFenced => f.write_str(
                "There is a newer producer with the same transactionalId which fences the current one.",
            ),
            TxnError::TransactionalIdNotFound => {
                f.write_str("The transactionalId could not be found.")
            }
            TxnError::UnknownTopicOrPartition => {
                f.write_str("This server does not host this topic-partition.")
            }
            TxnError::OperationNotAttempted => f.write_str(
                "The broker did not attempt to execute this operation. This may happen for batched RPCs where some operations in the batch failed, causing the broker to respond without trying the rest.",
            ),
        }
    }
}

/// What the coordinator needs of the engine.
pub(crate) trait TxnHost {
    /// A producer id never given before.
    fn next_producer_id(&self) -> Result<i64, EngineError>;
    /// Whether the partition exists.
    fn has_partition(&self, topic: &str, partition: i32) -> bool;
    /// Writes the marker ending producer `pid`'s transaction (at `epoch`, of the
    /// transaction's `transaction_version`) in the partition; a partition deleted since is
    /// skipped, as Kafka drops its markers.
    fn write_marker(
        &self,
        partition: (&str, i32),
        producer: (i64, i16),
        commit: bool,
        transaction_version: i16,
    ) -> Result<(), EngineError>;
}

/// One transactional id's state (Kafka's `TransactionMetadata`).
#[derive(Clone, Debug, PartialEq, Eq)]
struct TxnMetadata {
    producer_id: i64,
    /// The producer id before the last transition (Kafka's `prevProducerId`): the one a
    /// retried EndTxn names after its epoch ran out.
    prev_producer_id: i64,
    /// The producer id a transaction version 2 end hands over at its completion, when
    /// the epoch ran out; else -1.
    next_producer_id: i64,
    producer_epoch: i16,
    timeout_ms: i32,
    status: TxnStatus,
    /// (topic, partition) in the order they were added: Kafka's `HashSet` iterates
    /// same-bucket entries so, which its answers and records follow ([`Self::kafka_order`]).
    partitions: Vec<(String, i32)>,
    /// When the open transaction began (its first partition), -1 without one.
    start_ms: i64,
    last_update_ms: i64,
    /// The transaction version of the client's last transition (Kafka's
    /// `clientTransactionVersion`).
    client_tv: i16,
}

impl TxnMetadata {
    fn log_value(&self) -> TxnLogValue {
        TxnLogValue {
            producer_id: self.producer_id,
            prev_producer_id: self.prev_producer_id,
            next_producer_id: self.next_producer_id,
            producer_epoch: self.producer_epoch,
            timeout_ms: self.timeout_ms,
            status: self.status,
            partitions: self.kafka_topics(),
            last_update_ms: self.last_update_ms,
            start_ms: self.start_ms,
            client_transaction_version: self.client_tv,
        }
    }

    fn of(value: TxnLogValue) -> TxnMetadata {
        TxnMetadata {
            producer_id: value.producer_id,
            prev_producer_id: value.prev_producer_id,
            next_producer_id: value.next_producer_id,
            producer_epoch: value.producer_epoch,
            timeout_ms: value.timeout_ms,
            status: value.status,
            partitions: value
                .partitions
                .into_iter()
                .flat_map(|(topic, ids)| ids.into_iter().map(move |id| (topic.clone(), id)))
                .collect(),
            start_ms: value.start_ms,
            last_update_ms: value.last_update_ms,
            client_tv: value.client_transaction_version,
        }
    }

    /// The partitions as Kafka's `HashSet<TopicPartition>` of them iterates: bucket by
    /// bucket, in the order they were added within one.
    fn kafka_order(&self) -> Vec<(&str, i32)> {
        java_hash_set_order(&self.partitions)
    }

    /// The partitions by topic as Kafka's `TransactionLog.valueToBytes` groups them
    /// (`Collectors.groupingBy`: a `HashMap` of the topics met in [`Self::kafka_order`],
    /// each with its partitions in that order).
    fn kafka_topics(&self) -> Vec<(String, Vec<i32>)> {
        let mut topics: Vec<(String, Vec<i32>)> = Vec::new();
        for (topic, partition) in self.kafka_order() {
            match topics.iter_mut().find(|(t, _)| t == topic) {
                Some((_, ids)) => ids.push(partition),
                None => topics.push((topic.to_string(), vec![partition])),
            }
        }
        let hashes: Vec<i32> = topics.iter().map(|(t, _)| java_string_hash(t)).collect();
        let mut by_index: Vec<Option<(String, Vec<i32>)>> = topics.into_iter().map(Some).collect();
        java_hash_order(&hashes)
            .into_iter()
            .filter_map(|i| by_index[i].take())
            .collect()
    }

    /// Kafka's check of a request from the id's producer: its id, then its epoch.
    fn check_producer(&self, producer_id: i64, epoch: i16) -> Result<(), TxnError> {
        if producer_id != self.producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if epoch != self.producer_epoch {
            return Err(TxnError::ProducerFenced);
        }
        Ok(())
    }
}

/// A transactional id as ListTransactions lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnListing {
    pub transactional_id: String,
    pub producer_id: i64,
    pub state: TxnStatus,
}

/// A transactional id as DescribeTransactions describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnDescription {
    pub transactional_id: String,
    pub state: TxnStatus,
    pub timeout_ms: i32,
    /// When the open transaction began, -1 without one.
    pub start_ms: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// (topic, partition), by topic.
    pub partitions: Vec<(String, i32)>,
}

/// The engine's one transaction coordinator (Kafka runs one per `__transaction_state`
/// partition; kpfs has one partition and one broker).
pub struct TransactionCoordinator {
    state: Mutex<State>,
    clock: Arc<dyn Clock>,
    broker: Arc<RwLock<BrokerConfig>>,
}

struct State {
    /// The finalized `transaction.version`.
    level: i16,
    txns: BTreeMap<String, TxnMetadata>,
    /// The order ids were added in and the most held at once: what the order Kafka's
    /// coordinator lists them in depends on ([`State::listing_order`]).
    added: HashMap<String, u64>,
    next_added: u64,
    peak: usize,
    log: Option<Arc<Partition>>,
    abort_checked_ms: i64,
    expiry_checked_ms: i64,
}

impl TransactionCoordinator {
    /// The coordinator of an engine whose `__transaction_state`, if it exists, is `log`:
    /// its records are replayed, and the transactions found prepared are completed.
    pub(crate) fn open(
        log: Option<Arc<Partition>>,
        clock: Arc<dyn Clock>,
        broker: Arc<RwLock<BrokerConfig>>,
        level: i16,
    ) -> Result<TransactionCoordinator, EngineError> {
        let now = clock.now_ms();
        let mut state = State {
            level,
            txns: BTreeMap::new(),
            added: HashMap::new(),
            next_added: 0,
            peak: 0,
            log: None,
            abort_checked_ms: now,
            expiry_checked_ms: now,
        };
        if let Some(log) = log {
            state.replay(&log)?;
            state.log = Some(log);
        }
        Ok(TransactionCoordinator {
            state: Mutex::new(state),
            clock,
            broker,
        })
    }

    /// `__transaction_state`, once the engine made it.
    pub(crate) fn set_log(&self, log: Arc<Partition>) {
        self.state.lock().log = Some(log);
    }

    pub(crate) fn has_log(&self) -> bool {
        self.state.lock().log.is_some()
    }

    /// The finalized `transaction.version`.
    pub(crate) fn level(&self) -> i16 {
        self.state.lock().level
    }

    fn settings(&self) -> TransactionSettings {
        self.broker.read().transaction_settings()
    }

    /// Completes the transactions the log left prepared (a crash between the prepare
    /// and the complete): their markers are written again, which the partitions take
    /// as retries.
    pub(crate) fn complete_prepared(&self, host: &dyn TxnHost) {
        let mut state = self.state.lock();
        let prepared: Vec<String> = state
            .txns
            .iter()
            .filter(|(_, m)| matches!(m.status, TxnStatus::PrepareCommit | TxnStatus::PrepareAbort))
            .map(|(id, _)| id.clone())
            .collect();
        let now = self.clock.now_ms();
        for id in prepared {
            if let Err(e) = state.complete(&id, host, now) {
                tracing::error!(transactional_id = %id, error = %e, "cannot complete a prepared transaction; retried at the next open");
            }
        }
    }

    /// InitProducerId with a transactional id (Kafka's `handleInitProducerId`): a new
    /// id gets a producer id at epoch 0; a known one its epoch bumped (a new producer id
    /// once the epoch is exhausted), which fences the producers before. An open
    /// transaction is aborted first, and the caller is told to retry
    /// (CONCURRENT_TRANSACTIONS) as Kafka does.
    pub(crate) fn init_producer_id(
        &self,
        transactional_id: &str,
        timeout_ms: i32,
        host: &dyn TxnHost,
    ) -> Result<(i64, i16), TxnError> {
        if transactional_id.is_empty() {
            return Err(TxnError::InvalidRequest(
                "Transactional id cannot be empty".to_string(),
            ));
        }
        if timeout_ms <= 0 || timeout_ms > self.settings().max_timeout_ms {
            return Err(TxnError::InvalidTransactionTimeout);
        }
        let now = self.clock.now_ms();
        let mut state = self.state.lock();
        let mut meta = match state.txns.get(transactional_id) {
            Some(meta) => meta.clone(),
            None => TxnMetadata {
                producer_id: host.next_producer_id().map_err(unavailable)?,
                prev_producer_id: -1,
                next_producer_id: -1,
                producer_epoch: -1,
                timeout_ms,
                status: TxnStatus::Empty,
                partitions: Vec::new(),
                start_ms: -1,
                last_update_ms: now,
                client_tv: 0,
            },
        };
        match meta.status {
            TxnStatus::PrepareCommit | TxnStatus::PrepareAbort => {
                return Err(TxnError::ConcurrentTransactions)
            }
            TxnStatus::Ongoing => {
                // Kafka's `prepareFenceProducerEpoch`, then the abort with that epoch.
                state.abort_fenced(transactional_id, host, now)?;
                return Err(TxnError::ConcurrentTransactions);
            }
            TxnStatus::Dead | TxnStatus::PrepareEpochFence => {
                return Err(TxnError::InvalidTxnState(format!(
                    "Found transactionalId {transactional_id} with state {}",
                    meta.status.name()
                )))
            }
            TxnStatus::Empty | TxnStatus::CompleteCommit | TxnStatus::CompleteAbort => {}
        }
        // Kafka's `prepareIncrementProducerEpoch`: a fresh producer id when the epoch
        // would reach Short.MAX_VALUE, which no batch may carry.
        if meta.producer_epoch >= i16::MAX - 1 {
            meta.producer_id = host.next_producer_id().map_err(unavailable)?;
            meta.producer_epoch = 0;
        } else {
            meta.producer_epoch += 1;
        }
        meta.timeout_ms = timeout_ms;
        meta.status = TxnStatus::Empty;
        meta.partitions.clear();
        meta.start_ms = -1;
        meta.last_update_ms = now;
        state.transit(transactional_id, meta.clone(), now)?;
        Ok((meta.producer_id, meta.producer_epoch))
    }

    /// AddPartitionsToTxn (and AddOffsetsToTxn's offsets partition), or, for a client
    /// at transaction version 2, its first write to a partition (Kafka's broker-side
    /// `addPartition` verification): the partitions join the producer's transaction,
    /// which opens with the first. Each partition's answer, or the error of the whole
    /// request.
    pub(crate) fn add_partitions(
        &self,
        transactional_id: &str,
        (producer_id, epoch): (i64, i16),
        partitions: &[(String, i32)],
        client_tv: i16,
        host: &dyn TxnHost,
    ) -> Result<Vec<Option<TxnError>>, TxnError> {
        let missing: Vec<bool> = partitions
            .iter()
            .map(|(t, p)| !host.has_partition(t, *p))
            .collect();
        if missing.iter().any(|&m| m) {
            // Kafka's KafkaApis: the unknown ones say so, the others were not attempted.
            return Ok(missing
                .into_iter()
                .map(|m| {
                    Some(if m {
                        TxnError::UnknownTopicOrPartition
                    } else {
                        TxnError::OperationNotAttempted
                    })
                })
                .collect());
        }
        let now = self.clock.now_ms();
        let mut state = self.state.lock();
        let mut meta = state.producers_txn(transactional_id, (producer_id, epoch))?;
        match meta.status {
            TxnStatus::PrepareCommit | TxnStatus::PrepareAbort => {
                return Err(TxnError::ConcurrentTransactions)
            }
            TxnStatus::Dead | TxnStatus::PrepareEpochFence => {
                return Err(TxnError::InvalidTxnState(format!(
                    "Found transactionalId {transactional_id} with state {}",
                    meta.status.name()
                )))
            }
            TxnStatus::Empty
            | TxnStatus::Ongoing
            | TxnStatus::CompleteCommit
            | TxnStatus::CompleteAbort => {}
        }
        let all_in = partitions.iter().all(|p| meta.partitions.contains(p));
        if meta.status == TxnStatus::Ongoing && all_in {
            return Ok(vec![None; partitions.len()]);
        }
        if meta.status != TxnStatus::Ongoing {
            meta.partitions.clear();
            meta.start_ms = now;
        }
        for p in partitions {
            if !meta.partitions.contains(p) {
                meta.partitions.push(p.clone());
            }
        }
        meta.status = TxnStatus::Ongoing;
        meta.last_update_ms = now;
        meta.client_tv = client_tv;
        state.transit(transactional_id, meta, now)?;
        Ok(vec![None; partitions.len()])
    }

    /// Kafka's partition verification before a transactional Produce
    /// (`TransactionCoordinator.handleVerifyPartitionsInTransaction`): the partition is
    /// in the open transaction of the id's producer at `epoch`, else why not: another
    /// producer id, another epoch (the producer was fenced, by a newer one or by the
    /// abort of its timed-out transaction), a transaction being ended, a partition not
    /// added.
    pub(crate) fn verify_partition(
        &self,
        transactional_id: &str,
        (producer_id, epoch): (i64, i16),
        partition: (&str, i32),
    ) -> Result<(), TxnError> {
        let state = self.state.lock();
        let Some(m) = state.txns.get(transactional_id) else {
            return Err(TxnError::InvalidProducerIdMapping);
        };
        if m.producer_id != producer_id {
            Err(TxnError::InvalidProducerIdMapping)
        } else if m.producer_epoch != epoch {
            Err(TxnError::ProducerFenced)
        } else if matches!(m.status, TxnStatus::PrepareCommit | TxnStatus::PrepareAbort) {
            Err(TxnError::ConcurrentTransactions)
        } else if m.status == TxnStatus::Ongoing
            && m.partitions
                .contains(&(partition.0.to_string(), partition.1))
        {
            Ok(())
        } else {
            Err(TxnError::InvalidTxnState(
                "Partition was not added to the transaction".to_string(),
            ))
        }
    }

    /// EndTxn (Kafka's `handleEndTransaction`): the transaction is prepared, its markers
    /// written to every partition, and completed, all before this returns. Returns the
    /// producer id and epoch a client at transaction version 2 goes on with (EndTxn v5's
    /// answer), `(-1, -1)` for an older one.
    ///
    /// Below transaction version 2 the epoch stays; a retry of an end already done
    /// succeeds, ending it the other way is INVALID_TXN_STATE. At version 2 the prepare
    /// bumps the epoch (a new producer id at the completion once it runs out), so a
    /// request at the current epoch is the next end: an abort with no partition added
    /// passes (Kafka's table above `endTransaction`), and a retry is told by its epoch
    /// being the one before the bump (or its producer id the one before the new one).
    pub(crate) fn end_transaction(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        commit: bool,
        client_tv: i16,
        host: &dyn TxnHost,
    ) -> Result<(i64, i16), TxnError> {
        let now = self.clock.now_ms();
        let mut state = self.state.lock();
        let meta = state
            .txns
            .get(transactional_id)
            .cloned()
            .ok_or(TxnError::InvalidProducerIdMapping)?;
        let wrong = |meta: &TxnMetadata| {
            TxnError::InvalidTxnState(format!(
                "TransactionalId {transactional_id} is in state {} and cannot be {}",
                meta.status.name(),
                if commit { "committed" } else { "aborted" }
            ))
        };
        if client_tv < TV2 {
            meta.check_producer(producer.0, producer.1)?;
            match (meta.status, commit) {
                (TxnStatus::Ongoing, _) => {}
                (TxnStatus::CompleteCommit, true) | (TxnStatus::CompleteAbort, false) => {
                    return Ok((-1, -1))
                }
                (TxnStatus::PrepareCommit, true) | (TxnStatus::PrepareAbort, false) => {
                    return Err(TxnError::ConcurrentTransactions)
                }
                _ => return Err(wrong(&meta)),
            }
            let end = End {
                client_tv,
                no_partition_added: false,
                fenced: false,
            };
            state.prepare_end(transactional_id, meta, commit, end, host, now)?;
            state.complete(transactional_id, host, now)?;
            return Ok((-1, -1));
        }
        let (producer_id, epoch) = producer;
        let retry_on_overflow = meta.prev_producer_id == producer_id
            && epoch == i16::MAX - 1
            && meta.producer_epoch == 0;
        let retry_on_bump = i32::from(meta.producer_epoch) == i32::from(epoch) + 1;
        let retry = retry_on_bump || retry_on_overflow;
        let valid_epoch = match meta.status {
            TxnStatus::PrepareCommit | TxnStatus::PrepareAbort => retry_on_bump,
            TxnStatus::CompleteCommit | TxnStatus::CompleteAbort => {
                retry || epoch == meta.producer_epoch
            }
            _ => epoch == meta.producer_epoch,
        };
        if meta.producer_id != producer_id && !retry_on_overflow {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if !valid_epoch {
            return Err(TxnError::ProducerFenced);
        }
        let no_partition_added = match (meta.status, commit) {
            (TxnStatus::Ongoing, _) => false,
            (TxnStatus::CompleteCommit, true) | (TxnStatus::CompleteAbort, false) if retry => {
                return Ok((meta.producer_id, meta.producer_epoch))
            }
            (TxnStatus::Empty | TxnStatus::CompleteCommit | TxnStatus::CompleteAbort, false)
                if !retry =>
            {
                true
            }
            (TxnStatus::PrepareCommit, true) | (TxnStatus::PrepareAbort, false) => {
                return Err(TxnError::ConcurrentTransactions)
            }
            _ => return Err(wrong(&meta)),
        };
        let end = End {
            client_tv,
            no_partition_added,
            fenced: false,
        };
        state.prepare_end(transactional_id, meta, commit, end, host, now)?;
        state.complete(transactional_id, host, now)?;
        let done = &state.txns[transactional_id];
        Ok((done.producer_id, done.producer_epoch))
    }

    /// ListTransactions: the ids in one of `states` (any when empty) of one of the
    /// producer ids (any when empty).
    pub(crate) fn list(&self, states: &[TxnStatus], producer_ids: &[i64]) -> Vec<TxnListing> {
        let state = self.state.lock();
        state
            .listing_order()
            .into_iter()
            .map(|id| (id, &state.txns[id]))
            .filter(|(_, m)| states.is_empty() || states.contains(&m.status))
            .filter(|(_, m)| producer_ids.is_empty() || producer_ids.contains(&m.producer_id))
            .map(|(id, m)| TxnListing {
                transactional_id: id.clone(),
                producer_id: m.producer_id,
                state: m.status,
            })
            .collect()
    }

    /// DescribeTransactions of one id.
    pub(crate) fn describe(&self, transactional_id: &str) -> Result<TxnDescription, TxnError> {
        let state = self.state.lock();
        let m = state
            .txns
            .get(transactional_id)
            .ok_or(TxnError::TransactionalIdNotFound)?;
        Ok(TxnDescription {
            transactional_id: transactional_id.to_string(),
            state: m.status,
            timeout_ms: m.timeout_ms,
            start_ms: m.start_ms,
            producer_id: m.producer_id,
            producer_epoch: m.producer_epoch,
            partitions: grouped_by_topic(m.kafka_order()),
        })
    }

    /// The scheduler's tick: aborts the transactions open past their timeout (Kafka's
    /// `abortTimedOutTransactions`, every
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`: the epoch is bumped,
    /// fencing the producer), and forgets the ids idle past
    /// `transactional.id.expiration.ms` with no transaction open (a tombstone in the log).
    pub(crate) fn tick(&self, host: &dyn TxnHost) {
        let now = self.clock.now_ms();
        let settings = self.settings();
        let mut state = self.state.lock();
        if now.saturating_sub(state.abort_checked_ms) >= settings.abort_check_interval_ms {
            state.abort_checked_ms = now;
            let timed_out: Vec<String> = state
                .txns
                .iter()
                .filter(|(_, m)| {
                    m.status == TxnStatus::Ongoing
                        && now.saturating_sub(m.start_ms) > i64::from(m.timeout_ms)
                })
                .map(|(id, _)| id.clone())
                .collect();
            for id in timed_out {
                tracing::info!(transactional_id = %id, "aborting a transaction open past its transaction.timeout.ms");
                if let Err(e) = state.abort_fenced(&id, host, now) {
                    tracing::warn!(transactional_id = %id, error = %e, "cannot abort a timed-out transaction; retried at the next check");
                }
            }
        }
        if now.saturating_sub(state.expiry_checked_ms) >= settings.expiration_check_interval_ms {
            state.expiry_checked_ms = now;
            let expired: Vec<String> = state
                .txns
                .iter()
                .filter(|(_, m)| {
                    matches!(
                        m.status,
                        TxnStatus::Empty | TxnStatus::CompleteCommit | TxnStatus::CompleteAbort
                    ) && now.saturating_sub(m.last_update_ms) >= settings.id_expiration_ms
                })
                .map(|(id, _)| id.clone())
                .collect();
            for id in expired {
                match state.store(&id, None, now) {
                    Ok(()) => {
                        tracing::info!(transactional_id = %id, "expired an idle transactional id");
                        state.forget(&id);
                    }
                    Err(e) => {
                        tracing::warn!(transactional_id = %id, error = %e, "cannot expire a transactional id");
                    }
                }
            }
        }
    }
}

impl State {
    /// The id's state, for a request of its producer `(producer_id, epoch)` (Kafka's
    /// checks: a producer id not the id's, then an older epoch).
    fn producers_txn(
        &self,
        id: &str,
        (producer_id, epoch): (i64, i16),
    ) -> Result<TxnMetadata, TxnError> {
        let meta = self
            .txns
            .get(id)
            .cloned()
            .ok_or(TxnError::InvalidProducerIdMapping)?;
        meta.check_producer(producer_id, epoch)?;
        Ok(meta)
    }

    fn put(&mut self, id: String, meta: TxnMetadata) {
        if !self.added.contains_key(&id) {
            self.added.insert(id.clone(), self.next_added);
            self.next_added += 1;
        }
        self.txns.insert(id, meta);
        self.peak = self.peak.max(self.txns.len());
    }

    fn forget(&mut self, id: &str) {
        self.txns.remove(id);
        self.added.remove(id);
    }

    /// The ids in the order Kafka's `listTransactionStates` visits them (with
    /// `transaction.state.log.num.partitions` 1, kpfs's one partition): its coordinator
    /// keeps them in a `ConcurrentHashMap`, iterated bin by bin, an id's bin being its
    /// `String.hashCode`, spread, modulo the table's size (16, doubled whenever the map
    /// came to hold three quarters of it; never halved), and the ids of one bin in the
    /// order they were added (kpfs does not follow the reordering of a bin's ids when the
    /// table grows, nor the trees of bins of 8 or more).
    fn listing_order(&self) -> Vec<&String> {
        let mut size: usize = 16;
        while self.peak >= size - size / 4 {
            size *= 2;
        }
        let bin = |id: &str| {
            let h = id
                .encode_utf16()
                .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
            let spread = (h ^ ((h as u32) >> 16) as i32) & 0x7fff_ffff;
            spread as usize & (size - 1)
        };
        let mut ids: Vec<&String> = self.txns.keys().collect();
        ids.sort_by_key(|id| (bin(id), self.added.get(*id).copied().unwrap_or(u64::MAX)));
        ids
    }

    /// Writes the id's new state to the log, then takes it: what a client is told was
    /// done is durable.
    fn transit(&mut self, id: &str, mut meta: TxnMetadata, now: i64) -> Result<(), TxnError> {
        // Kafka's `TxnTransitMetadata` carries the producer id before the transition.
        meta.prev_producer_id = self
            .txns
            .get(id)
            .map_or(meta.producer_id, |before| before.producer_id);
        self.store(id, Some(meta.log_value()), now)?;
        self.put(id.to_string(), meta);
        Ok(())
    }

    fn store(&self, id: &str, value: Option<TxnLogValue>, now: i64) -> Result<(), TxnError> {
        let log = self.log.as_ref().ok_or_else(|| {
            TxnError::CoordinatorNotAvailable(format!(
                "the transaction log {TRANSACTION_STATE_TOPIC} does not exist yet"
            ))
        })?;
        let mut builder = BatchBuilder::new(0);
        let value = value.map(|v| v.encode(records::value_version(self.level)));
        builder.push(0, now, Some(&encode_key(id)), value.as_deref());
        log.append_internal(&builder.finish(None, None), false)
            .map(|_| ())
            .map_err(|e| {
                TxnError::CoordinatorNotAvailable(format!(
                    "writing {TRANSACTION_STATE_TOPIC} failed: {e}"
                ))
            })
    }

    /// Kafka's `prepareAbortOrCommit`: the id's transaction prepared to end, by a client
    /// at `client_tv`. From transaction version 2 the epoch is bumped (but for an abort
    /// already at Short.MAX_VALUE, which only a fencing reaches), and an epoch that ran
    /// out gets the producer id its completion hands over, except in the coordinator's
    /// own fencing abort (`End::fenced`, Kafka's `isEpochFence`), whose epoch the next
    /// InitProducerId replaces; an abort with no partition added starts at this update.
    fn prepare_end(
        &mut self,
        id: &str,
        mut meta: TxnMetadata,
        commit: bool,
        end: End,
        host: &dyn TxnHost,
        now: i64,
    ) -> Result<(), TxnError> {
        let End {
            client_tv,
            no_partition_added,
            fenced,
        } = end;
        if client_tv >= TV2 {
            if !fenced && meta.producer_epoch >= i16::MAX - 1 {
                meta.next_producer_id = host.next_producer_id().map_err(unavailable)?;
            }
            if meta.producer_epoch != i16::MAX || commit {
                meta.producer_epoch += 1;
            }
        }
        if no_partition_added {
            meta.start_ms = now;
        }
        meta.status = if commit {
            TxnStatus::PrepareCommit
        } else {
            TxnStatus::PrepareAbort
        };
        // Kafka ends a transaction below version 2 as at version 0
        // (`endTransactionWithTV1`), whatever the level.
        meta.client_tv = if client_tv >= TV2 { client_tv } else { 0 };
        meta.last_update_ms = now;
        self.transit(id, meta, now)
    }

    /// Writes the markers of the id's prepared transaction (with its prepared epoch)
    /// and completes it (Kafka's `prepareComplete`: at transaction version 2, an epoch
    /// that ran out gives way to the next producer id, at epoch 0).
    fn complete(&mut self, id: &str, host: &dyn TxnHost, now: i64) -> Result<(), TxnError> {
        let mut meta = self.txns.get(id).cloned().expect("a prepared transaction");
        let commit = match meta.status {
            TxnStatus::PrepareCommit => true,
            TxnStatus::PrepareAbort => false,
            other => unreachable!("completing a transaction in state {other:?}"),
        };
        for (topic, partition) in &meta.partitions {
            host.write_marker(
                (topic, *partition),
                (meta.producer_id, meta.producer_epoch),
                commit,
                meta.client_tv,
            )
            .map_err(unavailable)?;
        }
        meta.status = if commit {
            TxnStatus::CompleteCommit
        } else {
            TxnStatus::CompleteAbort
        };
        if meta.client_tv >= TV2 && meta.next_producer_id != -1 {
            meta.producer_id = meta.next_producer_id;
            meta.producer_epoch = 0;
        }
        meta.next_producer_id = -1;
        meta.partitions.clear();
        meta.last_update_ms = now;
        self.transit(id, meta, now)
    }

    /// Kafka's fencing abort (`prepareFenceProducerEpoch`, then the abort with that
    /// epoch at the finalized transaction version, as the coordinator's own request): the
    /// epoch is bumped, so the producer's next request is PRODUCER_FENCED. From
    /// transaction version 2 the abort's bump is that one: Kafka 4.3.1 leaves a
    /// timed-out transaction one epoch up, its markers at that epoch
    /// (t_kafka_txn_diff.sh).
    fn abort_fenced(&mut self, id: &str, host: &dyn TxnHost, now: i64) -> Result<(), TxnError> {
        let mut meta = self.txns.get(id).cloned().expect("an open transaction");
        if self.level < TV2 {
            meta.producer_epoch = meta.producer_epoch.saturating_add(1);
        }
        let end = End {
            client_tv: self.level,
            no_partition_added: false,
            fenced: true,
        };
        self.prepare_end(id, meta, false, end, host, now)?;
        self.complete(id, host, now)
    }

    /// Rebuilds the ids from the log, oldest record first: the last record of an id is
    /// its state, a tombstone forgets it.
    fn replay(&mut self, log: &Partition) -> Result<(), EngineError> {
        let mut records = 0u64;
        log.for_each_record(REPLAY_READ_BYTES, |header, record| {
            if header.is_control() {
                return;
            }
            records += 1;
            let Some(key) = record.key else { return };
            let id = match decode_key(key) {
                Ok(Some(id)) => id,
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!(offset = record.offset, why = %e.0, "skipping an unreadable record of {TRANSACTION_STATE_TOPIC}");
                    return;
                }
            };
            match record.value.map(TxnLogValue::decode) {
                None => {
                    self.forget(&id);
                }
                Some(Ok(value)) => {
                    self.put(id, TxnMetadata::of(value));
                }
                Some(Err(e)) => {
                    tracing::warn!(offset = record.offset, why = %e.0, "skipping an unreadable record of {TRANSACTION_STATE_TOPIC}");
                }
            }
        })?;
        tracing::info!(
            transactional_ids = self.txns.len(),
            records,
            "loaded transactions from {TRANSACTION_STATE_TOPIC}"
        );
        Ok(())
    }
}

/// DescribeTransactions's partitions: by topic, each topic where Kafka's coordinator
/// first meets it in its `HashSet`'s order (`topics.find`, else a new entry at the end).
fn grouped_by_topic(order: Vec<(&str, i32)>) -> Vec<(String, i32)> {
    let mut topics: Vec<(&str, Vec<i32>)> = Vec::new();
    for (topic, partition) in order {
        match topics.iter_mut().find(|(t, _)| *t == topic) {
            Some((_, ids)) => ids.push(partition),
            None => topics.push((topic, vec![partition])),
        }
    }
    topics
        .into_iter()
        .flat_map(|(topic, ids)| ids.into_iter().map(move |id| (topic.to_string(), id)))
        .collect()
}

/// How a transaction ends (Kafka's `prepareAbortOrCommit` arguments).
#[derive(Clone, Copy)]
struct End {
    /// The transaction version of the end's client (the coordinator's own abort: the
    /// finalized one).
    client_tv: i16,
    /// An abort at transaction version 2 with no partition added.
    no_partition_added: bool,
    /// The coordinator's abort of a fenced producer's transaction.
    fenced: bool,
}

fn unavailable(e: EngineError) -> TxnError {
    TxnError::CoordinatorNotAvailable(e.to_string())
}

/// The partition of `__consumer_offsets` a group's transactional offsets go to.
pub(crate) fn offsets_partition() -> (String, i32) {
    (OFFSETS_TOPIC.to_string(), 0)
}

/// The marker a partition gets for the coordinator's transactions.
pub(crate) fn marker_for(
    (pid, epoch): (i64, i16),
    commit: bool,
    transaction_version: i16,
) -> super::log::TxnMarkerWrite {
    super::log::TxnMarkerWrite::new((pid, epoch), commit, COORDINATOR_EPOCH, transaction_version)
}
