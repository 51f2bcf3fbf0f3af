//! The engine's transaction requests, as the Kafka listener makes them: the coordinator
//! of [`super`] with the engine as its host (producer ids, partitions, markers), and
//! the transactional appends that need both the coordinator and a topic.

use crate::engine::error::EngineError;
use crate::engine::format::OFFSETS_TOPIC;
use crate::engine::groups::{CommitRequest, GroupError};
use crate::engine::produce::ProduceOutcome;
use crate::engine::{Engine, Inner};

use super::{
    marker_for, offsets_partition, TxnDescription, TxnError, TxnHost, TxnListing, TxnStatus, TV2,
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
        transaction_version: i16,
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
        match target.append_txn_marker(index, &marker_for(producer, commit, transaction_version)) {
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

    /// AddPartitionsToTxn (v0-3, the classic protocol's): each partition's answer, or
    /// the request's error.
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
            0,
            self.inner.as_ref(),
        )
    }

    /// The finalized `transaction.version` (ApiVersions's `finalized_features`).
    pub fn transaction_version(&self) -> i16 {
        self.inner.transactions.level()
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

    /// EndTxn from a client at transaction version `client_tv`: the transaction is
    /// committed or aborted in every partition when this returns. The producer id and
    /// epoch the client goes on with, `(-1, -1)` below transaction version 2.
    pub fn end_txn(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        commit: bool,
        client_tv: i16,
    ) -> Result<(i64, i16), TxnError> {
        self.ready_for_transactions()?;
        self.inner.transactions.end_transaction(
            transactional_id,
            producer,
            commit,
            client_tv,
            self.inner.as_ref(),
        )
    }

    /// Produce of a transactional id's batch to a partition, from a client at
    /// transaction version `client_tv`: appended as part of the producer's transaction if
    /// the coordinator has the partition in it, or, at transaction version 2, once the
    /// coordinator added it (Kafka's `addPartition` verification); else refused as
    /// Kafka's partition verification refuses it, with the codes its
    /// `AddPartitionsToTxnManager` gives the producer: a fenced epoch is
    /// INVALID_PRODUCER_EPOCH (what producers expect there), a partition not in the
    /// transaction INVALID_TXN_STATE.
    pub fn produce_in_txn(
        &self,
        transactional_id: &str,
        (topic, partition): (&str, u32),
        producer: (i64, i16),
        client_tv: i16,
        records: &[u8],
    ) -> Result<ProduceOutcome, EngineError> {
        let target = self.topic(topic).ok_or_else(|| EngineError::UnknownTopic {
            name: topic.to_string(),
        })?;
        let index = i32::try_from(partition).unwrap_or(i32::MAX);
        let verified = if client_tv >= TV2 {
            self.add_to_txn(transactional_id, producer, &[(topic.to_string(), index)])
        } else {
            self.inner
                .transactions
                .verify_partition(transactional_id, producer, (topic, index))
        };
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

    /// Partitions join the transaction of a client at transaction version 2, as the
    /// coordinator's AddPartitionsToTxn from a broker adds them: all of a Produce's at
    /// once (Kafka's `AddPartitionsToTxnManager` sends them in one request), so that
    /// the transaction's log has one transition for them.
    pub fn add_to_txn(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        partitions: &[(String, i32)],
    ) -> Result<(), TxnError> {
        self.ready_for_transactions()?;
        let answers = self.inner.transactions.add_partitions(
            transactional_id,
            producer,
            partitions,
            TV2,
            self.inner.as_ref(),
        )?;
        match answers.into_iter().flatten().next() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// TxnOffsetCommit from a client at transaction version `client_tv`: the offsets go
    /// to `__consumer_offsets` in the producer's transaction, committed with it. At
    /// transaction version 2 the offsets partition joins the transaction here (Kafka's
    /// implicit AddOffsetsToTxn), with the codes of a Produce's verification.
    pub fn txn_offset_commit(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        client_tv: i16,
        request: &CommitRequest,
    ) -> Result<Vec<Option<GroupError>>, TxnOrGroupError> {
        let (topic, partition) = offsets_partition();
        if client_tv >= TV2 {
            self.ensure_offsets_topic().map_err(|e| {
                TxnOrGroupError::Txn(TxnError::CoordinatorNotAvailable(e.to_string()))
            })?;
            self.add_to_txn(transactional_id, producer, &[(topic, partition)])
                .map_err(TxnOrGroupError::Txn)?;
        } else if self
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
        fn write_marker(
            &self,
            _: (&str, i32),
            _: (i64, i16),
            _: bool,
            _: i16,
        ) -> Result<(), EngineError> {
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
            .produce_in_txn("tx", ("t", 0), producer, 0, &batch)
            .unwrap();
        let failed = engine.inner.transactions.end_transaction(
            "tx",
            producer,
            true,
            0,
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

    const NOW: i64 = 1_764_430_000_000;

    /// One transactional batch of `value` from `producer` at sequence `seq`.
    fn batch((pid, epoch): (i64, i16), seq: i32, value: &str) -> Vec<u8> {
        let mut b = BatchBuilder::new(0);
        b.push(0, NOW, None, Some(value.as_bytes()));
        b.finish_client(
            (pid, epoch, seq),
            ClientBatch {
                transactional: true,
                ..ClientBatch::PLAIN
            },
        )
    }

    fn open(dir: &std::path::Path, level: Option<i16>) -> Engine {
        open_at(dir, level, &Arc::new(ManualClock::new(NOW)))
    }

    fn open_at(dir: &std::path::Path, level: Option<i16>, clock: &Arc<ManualClock>) -> Engine {
        Engine::open(
            dir,
            crate::engine::BrokerConfig::defaults(),
            clock.clone(),
            crate::engine::EngineOptions {
                background_threads: false,
                transaction_version: level,
            },
        )
        .unwrap()
    }

    /// Every value of `__transaction_state`, with its version.
    fn log_values(engine: &Engine) -> Vec<(i16, super::super::records::TxnLogValue)> {
        let log = engine.inner.transactions.state.lock().log.clone().unwrap();
        let mut values = Vec::new();
        log.for_each_record(1 << 20, |_, record| {
            let bytes = record.value.unwrap();
            let version = i16::from_be_bytes([bytes[0], bytes[1]]);
            values.push((
                version,
                super::super::records::TxnLogValue::decode(bytes).unwrap(),
            ));
        })
        .unwrap();
        values
    }

    /// The epoch partition t-0 keeps for producer `pid` (its last batch's or marker's).
    fn partition_epoch(engine: &Engine, pid: i64) -> i16 {
        let p = engine.topic("t").unwrap().partition(0).unwrap();
        p.log()
            .active_producers()
            .into_iter()
            .find(|e| e.producer_id == pid)
            .unwrap()
            .producer_epoch
    }

    #[test]
    fn at_transaction_version_2_a_write_adds_its_partition_and_every_end_bumps_the_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let engine = open(dir.path(), None);
        engine.create_topic("t", 1).unwrap();
        let (pid, epoch) = engine.init_transactional_producer("tx", 60_000).unwrap();
        assert_eq!(epoch, 0);
        // Below transaction version 2 the partition must have been added first.
        let refused = engine.produce_in_txn("tx", ("t", 0), (pid, 0), 0, &batch((pid, 0), 0, "a"));
        assert!(matches!(refused, Err(EngineError::InvalidTxnState { .. })));
        engine
            .produce_in_txn("tx", ("t", 0), (pid, 0), TV2, &batch((pid, 0), 0, "a"))
            .unwrap();
        let open = engine.describe_transaction("tx").unwrap();
        assert_eq!(open.state, TxnStatus::Ongoing);
        assert_eq!(open.partitions, [("t".to_string(), 0)]);
        assert_eq!(open.start_ms, NOW);
        // The commit bumps the epoch; the marker carries the bumped one.
        assert_eq!(engine.end_txn("tx", (pid, 0), true, TV2), Ok((pid, 1)));
        assert_eq!(partition_epoch(&engine, pid), 1);
        let done = engine.describe_transaction("tx").unwrap();
        assert_eq!(
            (done.state, done.producer_epoch),
            (TxnStatus::CompleteCommit, 1)
        );
        // A retry (the epoch before the bump) is answered with the new epoch, unwritten;
        // another commit at the new epoch has nothing to commit.
        let records = log_values(&engine).len();
        assert_eq!(engine.end_txn("tx", (pid, 0), true, TV2), Ok((pid, 1)));
        assert_eq!(log_values(&engine).len(), records);
        assert!(matches!(
            engine.end_txn("tx", (pid, 1), true, TV2),
            Err(TxnError::InvalidTxnState(_))
        ));
        assert_eq!(
            engine.end_txn("tx", (pid, 0), false, TV2),
            Err(TxnError::InvalidTxnState(
                "TransactionalId tx is in state CompleteCommit and cannot be aborted".to_string()
            )),
            "a retried abort of a commit"
        );
        // An abort with no partition added passes, and bumps the epoch too.
        assert_eq!(engine.end_txn("tx", (pid, 1), false, TV2), Ok((pid, 2)));
        assert_eq!(
            engine.describe_transaction("tx").unwrap().state,
            TxnStatus::CompleteAbort
        );
        // The epochs before are fenced, at the partition and at the coordinator.
        let stale = engine.produce_in_txn("tx", ("t", 0), (pid, 1), TV2, &batch((pid, 1), 0, "b"));
        assert!(matches!(
            stale,
            Err(EngineError::InvalidProducerEpoch { .. })
        ));
        let other = engine.produce_in_txn(
            "tx",
            ("t", 0),
            (pid + 1, 2),
            TV2,
            &batch((pid + 1, 2), 0, "b"),
        );
        assert!(matches!(
            other,
            Err(EngineError::InvalidProducerIdMapping { .. })
        ));
        assert_eq!(
            engine.end_txn("tx", (pid, 0), false, TV2),
            Err(TxnError::ProducerFenced)
        );
        engine
            .produce_in_txn("tx", ("t", 0), (pid, 2), TV2, &batch((pid, 2), 0, "c"))
            .unwrap();
        assert_eq!(engine.end_txn("tx", (pid, 2), false, TV2), Ok((pid, 3)));
        assert_eq!(partition_epoch(&engine, pid), 3);
        // Kafka's TransactionLogValue v1, the client's transaction version in its tag.
        let values = log_values(&engine);
        assert!(values.iter().all(|(version, _)| *version == 1));
        let ongoing = &values[1].1;
        assert_eq!(
            (
                ongoing.status,
                ongoing.client_transaction_version,
                ongoing.prev_producer_id
            ),
            (TxnStatus::Ongoing, TV2, pid)
        );
        assert_eq!(
            values[0].1.client_transaction_version, 0,
            "InitProducerId's"
        );
    }

    /// A `read_committed` Fetch that lands while a transaction's first batch is being
    /// appended (in the segment, its producer's state not yet updated) must not take the
    /// batch for committed: Kafka's readers never see a batch there (its high watermark
    /// passes a batch only once the producer state recorded it). When kpfs's last stable
    /// offset was the log end there, a transaction that then aborted had its records
    /// consumed: franz-go's TestTxnEtl panicked "consumed too much".
    #[test]
    fn a_transactions_first_batch_is_not_stable_while_it_is_being_appended() {
        let dir = tempfile::tempdir().unwrap();
        let engine = open(dir.path(), None);
        engine.create_topic("t", 1).unwrap();
        let (pid, epoch) = engine.init_transactional_producer("tx", 60_000).unwrap();
        let p = engine.topic("t").unwrap().partition(0).unwrap();
        let read_committed = |p: &crate::engine::Partition| {
            let read = p
                .fetch_limited(0, 1 << 20, true, Isolation::ReadCommitted)
                .unwrap();
            let aborted: Vec<(i64, u64)> = read
                .aborted
                .iter()
                .flatten()
                .map(|a| (a.producer_id, a.first_offset))
                .collect();
            (
                read.high_watermark,
                read.last_stable_offset,
                read.bytes() > 0,
                aborted,
            )
        };
        // The reader that lands in the append, as a Fetch on another connection can.
        let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let (reader, seen_by_reader) = (p.clone(), seen.clone());
        p.log().after_append.set(move || {
            seen_by_reader.lock().push(read_committed(&reader));
        });
        engine
            .produce_in_txn(
                "tx",
                ("t", 0),
                (pid, epoch),
                TV2,
                &batch((pid, epoch), 0, "a"),
            )
            .unwrap();
        assert_eq!(
            *seen.lock(),
            [(1, 0, false, vec![])],
            "in the log, not stable: no record for a read_committed reader"
        );
        assert_eq!(read_committed(&p), (1, 0, false, vec![]), "still open");
        // It aborts: a reader is told so along with the batch.
        engine.end_txn("tx", (pid, epoch), false, TV2).unwrap();
        assert_eq!(read_committed(&p), (2, 2, true, vec![(pid, 0)]));
    }

    /// A read that a transaction's ABORT lands in, the marker rolling a new segment
    /// (whose `.txnindex` gets the abort): neither a `read_committed` Fetch nor a read of
    /// `log` may show the aborted record. Reading the segments before the roll and the
    /// last stable offset after the abort, they had the record below the last stable
    /// offset and no segment listing the abort. Kafka reads the last stable offset first,
    /// then the segments as they are then.
    #[test]
    fn an_abort_rolling_a_segment_during_a_read_is_not_read_as_committed() {
        let dir = tempfile::tempdir().unwrap();
        let engine = open(dir.path(), None);
        // (what the read served of the aborted record, the aborts it listed)
        type Read = fn(&crate::engine::Partition) -> (bool, Vec<(i64, u64)>);
        let fetch: Read = |p| {
            let read = p
                .fetch_limited(0, 1 << 20, true, Isolation::ReadCommitted)
                .unwrap();
            let aborted = read.aborted.iter().flatten();
            let aborted = aborted.map(|a| (a.producer_id, a.first_offset)).collect();
            (read.bytes() > 0, aborted)
        };
        let cat: Read = |p| {
            let mut cursor = crate::engine::LogCursor::default();
            let shown = p.read_log(&mut cursor, 0, 1 << 10).unwrap();
            (!shown.is_empty(), Vec::new())
        };
        for (name, read) in [("fetched", fetch), ("cat", cat)] {
            let t = engine.create_topic(name, 1).unwrap();
            let (pid, epoch) = engine.init_transactional_producer(name, 60_000).unwrap();
            engine
                .produce_in_txn(
                    name,
                    (name, 0),
                    (pid, epoch),
                    TV2,
                    &batch((pid, epoch), 0, "aborted"),
                )
                .unwrap();
            // Segments so small that the marker rolls a new one.
            t.update_config(b"internal.segment.bytes=100").unwrap();
            let p = t.partition(0).unwrap();
            // The coordinator's ABORT (at the bumped epoch), landing inside the read.
            let writer = t.clone();
            p.log().between_stable_and_segments.set(move || {
                let abort = super::super::marker_for((pid, epoch + 1), false, TV2);
                writer.append_txn_marker(0, &abort).unwrap();
            });
            let (served, aborted) = read(&p);
            assert_eq!(p.log().snapshot().segments.len(), 2, "{name}: rolled");
            assert!(
                !served || aborted == [(pid, 0)],
                "{name}: the aborted record shown, with the aborts {aborted:?}"
            );
        }
    }

    #[test]
    fn at_transaction_version_2_a_txn_offset_commit_adds_the_offsets_partition() {
        let dir = tempfile::tempdir().unwrap();
        let engine = open(dir.path(), None);
        engine.create_topic("t", 1).unwrap();
        let producer = engine.init_transactional_producer("tx", 60_000).unwrap();
        let commit = CommitRequest {
            group_id: "g".to_string(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
            offsets: vec![crate::engine::groups::OffsetToCommit {
                topic: "t".to_string(),
                partition: 0,
                offset: 7,
                leader_epoch: -1,
                metadata: None,
            }],
        };
        // The classic protocol needs AddOffsetsToTxn first.
        assert!(matches!(
            engine.txn_offset_commit("tx", producer, 0, &commit),
            Err(TxnOrGroupError::Txn(TxnError::InvalidTxnState(_)))
        ));
        engine
            .txn_offset_commit("tx", producer, TV2, &commit)
            .unwrap();
        assert_eq!(
            engine.describe_transaction("tx").unwrap().partitions,
            [offsets_partition()]
        );
        // (offset, pending) of t-0 for group `group`.
        let committed = |engine: &Engine, group: &str| {
            let fetched = &engine
                .groups()
                .fetch_offsets(group, Some(&[("t".to_string(), 0)]))[0];
            (fetched.offset, fetched.pending_txn)
        };
        assert_eq!(
            committed(&engine, "g"),
            (-1, true),
            "pending until the transaction commits, and said to be (KIP-447)"
        );
        assert_eq!(committed(&engine, "other"), (-1, false), "g's alone");
        assert_eq!(
            engine.end_txn("tx", producer, true, TV2),
            Ok((producer.0, 1))
        );
        assert_eq!(committed(&engine, "g"), (7, false));
        // A fenced producer's offsets are refused as its writes are.
        assert!(matches!(
            engine.txn_offset_commit("tx", producer, TV2, &commit),
            Err(TxnOrGroupError::Txn(TxnError::ProducerFenced))
        ));
        // An aborted transaction's offsets are pending until the abort, then dropped.
        let producer = (producer.0, 1);
        let mut moved = commit.clone();
        moved.offsets[0].offset = 9;
        engine
            .txn_offset_commit("tx", producer, TV2, &moved)
            .unwrap();
        assert_eq!(committed(&engine, "g"), (7, true));
        assert_eq!(
            engine.end_txn("tx", producer, false, TV2),
            Ok((producer.0, 2))
        );
        assert_eq!(committed(&engine, "g"), (7, false));
    }

    #[test]
    fn an_exhausted_epoch_ends_with_a_new_producer_id_which_a_replayed_retry_still_gets() {
        let dir = tempfile::tempdir().unwrap();
        let engine = open(dir.path(), None);
        engine.create_topic("t", 1).unwrap();
        let (pid, _) = engine.init_transactional_producer("tx", 60_000).unwrap();
        let last = i16::MAX - 1;
        engine
            .inner
            .transactions
            .state
            .lock()
            .txns
            .get_mut("tx")
            .unwrap()
            .producer_epoch = last;
        engine
            .produce_in_txn(
                "tx",
                ("t", 0),
                (pid, last),
                TV2,
                &batch((pid, last), 0, "a"),
            )
            .unwrap();
        let (next, epoch) = engine.end_txn("tx", (pid, last), true, TV2).unwrap();
        assert_ne!(next, pid, "a new producer id");
        assert_eq!(epoch, 0);
        // The markers carry the old id at Short.MAX_VALUE, which only they may.
        assert_eq!(partition_epoch(&engine, pid), i16::MAX);
        let values = log_values(&engine);
        let prepared = &values[values.len() - 2].1;
        assert_eq!(
            (
                prepared.status,
                prepared.producer_id,
                prepared.producer_epoch,
                prepared.next_producer_id
            ),
            (TxnStatus::PrepareCommit, pid, i16::MAX, next)
        );
        let complete = &values[values.len() - 1].1;
        assert_eq!(
            (
                complete.producer_id,
                complete.prev_producer_id,
                complete.next_producer_id
            ),
            (next, pid, -1)
        );
        // After a crash the replayed state still knows the retry by the old id.
        drop(engine);
        let engine = open(dir.path(), None);
        assert_eq!(engine.end_txn("tx", (pid, last), true, TV2), Ok((next, 0)));
        assert_eq!(
            engine.end_txn("tx", (pid, last), false, TV2),
            Err(TxnError::InvalidTxnState(
                "TransactionalId tx is in state CompleteCommit and cannot be aborted".to_string()
            ))
        );
        engine
            .produce_in_txn("tx", ("t", 0), (next, 0), TV2, &batch((next, 0), 0, "b"))
            .unwrap();
        assert_eq!(engine.end_txn("tx", (next, 0), true, TV2), Ok((next, 1)));
    }

    #[test]
    fn at_level_0_the_records_are_version_0_and_a_timeout_bumps_the_epoch_once() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(NOW));
        let engine = open_at(dir.path(), Some(0), &clock);
        engine.create_topic("t", 1).unwrap();
        let producer = engine.init_transactional_producer("tx", 1_000).unwrap();
        engine
            .add_partitions_to_txn("tx", producer, &[("t".to_string(), 0)])
            .unwrap();
        engine
            .produce_in_txn("tx", ("t", 0), producer, 0, &batch(producer, 0, "a"))
            .unwrap();
        clock.advance(10_000);
        engine.run_transaction_timers_once();
        let aborted = engine.describe_transaction("tx").unwrap();
        assert_eq!(
            (aborted.state, aborted.producer_epoch),
            (TxnStatus::CompleteAbort, 1)
        );
        assert_eq!(partition_epoch(&engine, producer.0), 1);
        assert!(log_values(&engine).iter().all(|(version, _)| *version == 0));
    }
}
