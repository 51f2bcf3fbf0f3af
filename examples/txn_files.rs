//! Writes a data directory whose partition `txn-0` holds transactions, through the
//! engine's partition API (kpfs has no transaction coordinator yet, so no client can make
//! them): tests/shell/t_kafka_dump_log.sh dumps its files with Kafka's
//! `kafka-dump-log.sh` and with `kpfs dump-log` and diffs the two.
//!
//! ```text
//! txn_files DATA_DIR
//! ```
//!
//! Two segments, every batch indexed, on a manual clock (the same bytes on every run):
//! segment 0 holds a plain batch, an aborted and a committed transaction that overlap,
//! and a transaction still open at the roll, which the roll's producer snapshot records;
//! segment 9 an idempotent batch, the abort of that transaction, another abort (the
//! first one's last stable offset stops at the second's transaction) and a transaction
//! left open, which the close's snapshot records.

use std::path::PathBuf;
use std::sync::Arc;

use kpfs::engine::format::ClientBatch;
use kpfs::engine::log::TxnMarkerWrite;
use kpfs::engine::segment::RollReason;
use kpfs::engine::{BrokerConfig, Clock, Engine, EngineOptions, ManualClock, Topic};

const T0: i64 = 1_764_430_000_000;
/// Kafka 4 clients' transaction version: a marker carries the epoch bumped by one.
const TV2: i16 = 2;
/// The coordinator epoch the markers carry (Kafka's dump prints it).
const COORDINATOR_EPOCH: i32 = 3;

struct Writer {
    topic: Arc<Topic>,
    clock: Arc<ManualClock>,
}

impl Writer {
    /// A client batch of `values` from producer `pid` (`-1`: a plain one) at `epoch`, its
    /// first sequence `seq`, one millisecond after the previous write.
    fn batch(&self, (pid, epoch, seq): (i64, i16, i32), transactional: bool, values: &[&str]) {
        self.clock.advance(1);
        let bytes = ClientBatch {
            transactional,
            ..ClientBatch::PLAIN
        }
        .of_values((pid, epoch, seq), self.clock.now_ms(), values);
        let appended = if transactional {
            self.topic.append_produced_in_txn(0, &bytes)
        } else {
            self.topic.append_produced(0, &bytes)
        };
        appended.expect("append a batch");
    }

    fn end(&self, (pid, epoch): (i64, i16), commit: bool) {
        self.clock.advance(1);
        let marker = TxnMarkerWrite::new((pid, epoch), commit, COORDINATOR_EPOCH, TV2);
        self.topic
            .append_txn_marker(0, &marker)
            .expect("append a marker");
    }
}

fn main() {
    let dir = PathBuf::from(std::env::args().nth(1).expect("usage: txn_files DATA_DIR"));
    let clock = Arc::new(ManualClock::new(T0));
    let engine = Engine::open(
        &dir,
        BrokerConfig::defaults(),
        clock.clone(),
        EngineOptions::default(),
    )
    .expect("open the data directory");
    let topic = engine.create_topic("txn", 1).expect("create topic txn");
    topic
        .update_config(b"index.interval.bytes=1")
        .expect("index every batch");
    let w = Writer { topic, clock };
    w.batch((-1, -1, -1), false, &["plain"]); // 0
    w.batch((1000, 0, 0), true, &["a1", "a2"]); // 1-2
    w.batch((2000, 0, 0), true, &["b1"]); // 3
    w.end((1000, 1), false); // 4: aborts 1-2 while 3 is open
    w.batch((2000, 0, 1), true, &["b2", "b3"]); // 5-6
    w.end((2000, 1), true); // 7
    w.batch((3000, 0, 0), true, &["c1"]); // 8
    let log = w.topic.partition(0).expect("partition 0");
    log.log()
        .roll(&w.topic.config(), RollReason::Time)
        .expect("roll");
    w.batch((5000, 0, 0), false, &["idempotent"]); // 9
    w.batch((1000, 1, 0), true, &["a3"]); // 10
    w.end((3000, 1), false); // 11: aborts 8, begun in the segment before
    w.end((1000, 2), false); // 12
    w.batch((4000, 0, 0), true, &["d1"]); // 13: left open
    engine.shutdown().expect("close the data directory");
}
