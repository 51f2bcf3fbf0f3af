//! The engine's transaction requests, as the Kafka listener makes them: the coordinator
//! of [`super`] with the engine as its host (producer ids, partitions, markers), and
//! the transactional appends that need both the coordinator and a topic.

use crate::engine::error::EngineError;
use crate::engine::format::OFFSETS_TOPIC;
use crate::engine::groups::{CommitRequest, GroupError};
use crate::engine::produce::ProduceOutcome;
use crate::engine::{Engine, Inner};

use super::{
    marker_for, offsets_partition, TxnDescription, TxnError, TxnHost, TxnListing, TxnStatus,
};

impl TxnHost for Inner {
    fn next_producer_id(&self) -> Result<i64, EngineError> {
        self.producer_ids.lock().next_id()
    }

    fn has_partition(&self, topic: &str, partition: i32) -> bool {
        let topics = self.topics.read();
        topics
            .get(topic)
            .zip(u32::try_from(partition).ok())
            .is_some_and(|(t, p)| t.partition(p).is_some())
    }

    fn write_marker(
        &self,
        (topic, partition): (&str, i32),
        producer: (i64, i16),
        commit: bool,
    ) -> Result<(), EngineError> {
        let target = self.topics.read().get(topic).cloned();
        let (Some(target), Ok(index)) = (target, u32::try_from(partition)) else {
            tracing::info!(
                topic,
                partition,
                "dropped a transaction marker for a partition that is gone"
            );
            return Ok(());
        };
        match target.append_txn_marker(index, &marker_for(producer, commit)) {
            Err(EngineError::UnknownPartition { .. } | EngineError::UnknownTopic { .. }) => Ok(()),
            Err(e) => Err(e),
            Ok(_) => {
                if topic == OFFSETS_TOPIC {
                    self.groups.complete_transaction(producer.0, commit);
                }
                Ok(())
            }
        }
    }
}

impl Engine {
    /// InitProducerId with a transactional id: see
    /// [`TransactionCoordinator::init_producer_id`](super::TransactionCoordinator::init_producer_id).
    pub fn init_transactional_producer(
        &self,
        transactional_id: &str,
        timeout_ms: i32,
    ) -> Result<(i64, i16), TxnError> {
        self.ready_for_transactions()?;
        self.inner
            .transactions
            .init_producer_id(transactional_id, timeout_ms, self.inner.as_ref())
    }

    /// AddPartitionsToTxn: each partition's answer, or the request's error.
    pub fn add_partitions_to_txn(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        partitions: &[(String, i32)],
    ) -> Result<Vec<Option<TxnError>>, TxnError> {
        self.ready_for_transactions()?;
        self.inner.transactions.add_partitions(
            transactional_id,
            producer,
            partitions,
            self.inner.as_ref(),
        )
    }

    /// AddOffsetsToTxn: the group's partition of `__consumer_offsets` joins the
    /// transaction, so TxnOffsetCommit may write there.
    pub fn add_offsets_to_txn(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
    ) -> Result<(), TxnError> {
        self.ensure_offsets_topic()
            .map_err(|e| TxnError::CoordinatorNotAvailable(e.to_string()))?;
        let answers =
            self.add_partitions_to_txn(transactional_id, producer, &[offsets_partition()])?;
        match answers.into_iter().next().flatten() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// EndTxn: the transaction is committed or aborted in every partition when this
    /// returns.
    pub fn end_txn(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        commit: bool,
    ) -> Result<(), TxnError> {
        self.ready_for_transactions()?;
        self.inner.transactions.end_transaction(
            transactional_id,
            producer,
            commit,
            self.inner.as_ref(),
        )
    }

    /// Produce of a transactional id's batch to a partition: appended as part of the
    /// producer's transaction if the coordinator has the partition in it, else refused
    /// as Kafka's partition verification refuses it, with the codes its
    /// `AddPartitionsToTxnManager` gives the producer: a fenced epoch is
    /// INVALID_PRODUCER_EPOCH (what producers expect there), a partition not in the
    /// transaction INVALID_TXN_STATE.
    pub fn produce_in_txn(
        &self,
        transactional_id: &str,
        (topic, partition): (&str, u32),
        producer: (i64, i16),
        records: &[u8],
    ) -> Result<ProduceOutcome, EngineError> {
        let target = self.topic(topic).ok_or_else(|| EngineError::UnknownTopic {
            name: topic.to_string(),
        })?;
        let index = i32::try_from(partition).unwrap_or(i32::MAX);
        let verified =
            self.inner
                .transactions
                .verify_partition(transactional_id, producer, (topic, index));
        if let Err(e) = verified {
            let message = e.to_string();
            return Err(match e {
                TxnError::ProducerFenced => EngineError::InvalidProducerEpoch { message },
                TxnError::InvalidProducerIdMapping => {
                    EngineError::InvalidProducerIdMapping { message }
                }
                TxnError::ConcurrentTransactions => EngineError::ConcurrentTransactions { message },
                _ => EngineError::InvalidTxnState { message },
            });
        }
        target.append_produced_in_txn(partition, records)
    }

    /// TxnOffsetCommit: the offsets go to `__consumer_offsets` in the producer's
    /// transaction, committed with it.
    pub fn txn_offset_commit(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        request: &CommitRequest,
    ) -> Result<Vec<Option<GroupError>>, TxnOrGroupError> {
        let (topic, partition) = offsets_partition();
        if self
            .inner
            .transactions
            .verify_partition(transactional_id, producer, (&topic, partition))
            .is_err()
        {
            return Err(TxnOrGroupError::Txn(TxnError::InvalidTxnState(
                "Partition was not added to the transaction".to_string(),
            )));
        }
        self.inner
            .groups
            .commit_txn_offsets(request, producer)
            .map_err(TxnOrGroupError::Group)
    }

    /// ListTransactions.
    pub fn list_transactions(&self, states: &[TxnStatus], producer_ids: &[i64]) -> Vec<TxnListing> {
        self.inner.transactions.list(states, producer_ids)
    }

    /// DescribeTransactions of one id.
    pub fn describe_transaction(&self, transactional_id: &str) -> Result<TxnDescription, TxnError> {
        self.inner.transactions.describe(transactional_id)
    }

    /// The transaction coordinator's tick, which the scheduler runs: for tests that hold
    /// the clock.
    #[cfg(any(test, feature = "internals"))]
    pub fn run_transaction_timers_once(&self) {
        self.inner.transactions.tick(self.inner.as_ref());
    }

    /// `__transaction_state` exists, so the coordinator has somewhere to write.
    fn ready_for_transactions(&self) -> Result<(), TxnError> {
        self.ensure_transaction_state_topic()
            .map_err(|e| TxnError::CoordinatorNotAvailable(e.to_string()))
    }
}

/// TxnOffsetCommit's refusal: the transaction's, or the group's.
#[derive(Debug)]
pub enum TxnOrGroupError {
    Txn(TxnError),
    Group(GroupError),
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::engine::clock::ManualClock;
    use crate::engine::format::{BatchBuilder, ClientBatch};
    use crate::engine::Isolation;

    /// The engine as host, but its markers fail: a crash between the prepare and the
    /// markers, as the log sees it.
    struct MarkersFail<'a>(&'a Inner);

    impl TxnHost for MarkersFail<'_> {
        fn next_producer_id(&self) -> Result<i64, EngineError> {
            self.0.next_producer_id()
        }
        fn has_partition(&self, topic: &str, partition: i32) -> bool {
            self.0.has_partition(topic, partition)
        }
        fn write_marker(&self, _: (&str, i32), _: (i64, i16), _: bool) -> Result<(), EngineError> {
            Err(EngineError::io(
                "write a marker",
                std::io::Error::other("the machine lost power"),
            ))
        }
    }

    #[test]
    fn a_transaction_found_prepared_at_open_is_completed() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(1_764_430_000_000));
        let engine = Engine::open_for_test(dir.path(), clock.clone());
        let t = engine.create_topic("t", 1).unwrap();
        let producer = engine.init_transactional_producer("tx", 60_000).unwrap();
        engine
            .add_partitions_to_txn("tx", producer, &[("t".to_string(), 0)])
            .unwrap();
        let mut b = BatchBuilder::new(0);
        b.push(0, 1_764_430_000_000, None, Some(b"done"));
        let batch = b.finish_client(
            (producer.0, producer.1, 0),
            ClientBatch {
                transactional: true,
                ..ClientBatch::PLAIN
            },
        );
        engine
            .produce_in_txn("tx", ("t", 0), producer, &batch)
            .unwrap();
        let failed = engine.inner.transactions.end_transaction(
            "tx",
            producer,
            true,
            &MarkersFail(engine.inner.as_ref()),
        );
        assert!(matches!(failed, Err(TxnError::CoordinatorNotAvailable(_))));
        assert_eq!(
            engine.describe_transaction("tx").unwrap().state,
            TxnStatus::PrepareCommit
        );
        let stable = |engine: &Engine| {
            let p = engine.topic("t").unwrap().partition(0).unwrap();
            p.fetch_limited(0, 1 << 20, true, Isolation::ReadCommitted)
                .unwrap()
                .last_stable_offset
        };
        assert_eq!(stable(&engine), 0, "no marker yet");
        drop(t);
        drop(engine);
        let engine = Engine::open_for_test(dir.path(), clock);
        assert_eq!(
            engine.describe_transaction("tx").unwrap().state,
            TxnStatus::CompleteCommit,
            "completed at open"
        );
        assert_eq!(stable(&engine), 2, "the record and its COMMIT marker");
    }
}
