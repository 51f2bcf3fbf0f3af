//! Transactions in one partition, as Kafka's `ProducerStateManager`, `UnifiedLog` and
//! `TransactionIndex` keep them: transactional batches open a transaction at their
//! producer's first offset, COMMIT and ABORT markers end it, the last stable offset
//! bounds `read_committed` fetches, aborts go to the segment's `.txnindex` in Kafka's
//! bytes, and all of it survives a clean restart and a crash. The cleaner applies Kafka's
//! transaction rules to it (the last section).

mod common;

use std::fs;
use std::path::PathBuf;

use common::*;
use kpfs::engine::format::{BatchBuilder, ClientBatch};
use kpfs::engine::log::TxnMarkerWrite;
use kpfs::engine::{EngineError, Isolation, Topic};

/// Kafka 4 clients' transaction version: the coordinator bumps the epoch at each end.
const TV2: i16 = 2;

/// A batch of `values` from producer `pid` at `epoch`, its first sequence `seq`.
fn batch(pid: i64, epoch: i16, seq: i32, transactional: bool, values: &[&str]) -> Vec<u8> {
    let records: Vec<(Option<&str>, Option<&str>)> =
        values.iter().map(|v| (None, Some(*v))).collect();
    keyed_batch(pid, epoch, seq, transactional, &records)
}

/// [`batch`] of (key, value) records; a `None` value is a tombstone.
fn keyed_batch(
    pid: i64,
    epoch: i16,
    seq: i32,
    transactional: bool,
    records: &[(Option<&str>, Option<&str>)],
) -> Vec<u8> {
    let mut b = BatchBuilder::new(0);
    for (i, (k, v)) in records.iter().enumerate() {
        b.push(i as u64, T0, k.map(str::as_bytes), v.map(str::as_bytes));
    }
    b.finish_client(
        (pid, epoch, seq),
        ClientBatch {
            transactional,
            ..ClientBatch::PLAIN
        },
    )
}

fn txn(t: &Topic, pid: i64, epoch: i16, seq: i32, values: &[&str]) -> u64 {
    t.append_produced_in_txn(0, &batch(pid, epoch, seq, true, values))
        .unwrap()
        .base_offset
}

fn end(t: &Topic, pid: i64, epoch: i16, commit: bool) -> u64 {
    t.append_txn_marker(0, &TxnMarkerWrite::new((pid, epoch), commit, 0, TV2))
        .unwrap()
}

fn lso(t: &Topic) -> u64 {
    t.p0().log().last_stable_offset()
}

fn txn_index_files(t: &Topic) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(t.p0().dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".txnindex"))
        .collect();
    files.sort();
    files
}

/// One 34-byte entry: (producer id, first offset, last offset, last stable offset).
type IndexEntry = (i64, i64, i64, i64);

fn txn_index_entries(path: &PathBuf) -> Vec<IndexEntry> {
    let bytes = fs::read(path).unwrap();
    assert_eq!(bytes.len() % 34, 0, "whole entries");
    bytes
        .chunks(34)
        .map(|e| {
            assert_eq!(&e[..2], &[0, 0], "version 0");
            let at = |i: usize| i64::from_be_bytes(e[i..i + 8].try_into().unwrap());
            (at(2), at(10), at(18), at(26))
        })
        .collect()
}

/// What a read_committed fetch from `offset` returns: the batches' base offsets and
/// the aborted transactions as (producer id, first offset).
fn fetch_committed(t: &Topic, offset: u64) -> (Vec<u64>, Vec<(i64, u64)>, u64) {
    let out = t
        .p0()
        .fetch_limited(offset, 1 << 20, true, Isolation::ReadCommitted)
        .unwrap();
    let mut bases = Vec::new();
    for r in &out.ranges {
        let mut bytes = vec![0u8; r.len as usize];
        std::os::unix::fs::FileExt::read_exact_at(&r.file, &mut bytes, r.position).unwrap();
        let mut at = 0;
        while at < bytes.len() {
            let h = kpfs::engine::format::decode_header(&bytes[at..]).unwrap();
            bases.push(h.base_offset);
            at += h.size;
        }
    }
    let aborted = out
        .aborted
        .expect("a read_committed fetch lists aborted transactions")
        .iter()
        .map(|a| (a.producer_id, a.first_offset))
        .collect();
    (bases, aborted, out.last_stable_offset)
}

#[test]
fn an_open_transaction_holds_the_last_stable_offset_until_its_commit() {
    let f = Fixture::new();
    let t = f.topic("t");
    assert_eq!(txn(&t, 7, 0, 0, &["a", "b"]), 0);
    assert_eq!(txn(&t, 7, 0, 2, &["c"]), 2);
    assert_eq!(lso(&t), 0, "the open transaction starts at 0");
    assert_eq!(t.p0().log().ongoing_txns(), vec![(7, 0)]);
    let (bases, aborted, stable) = fetch_committed(&t, 0);
    assert_eq!((bases, aborted, stable), (vec![], vec![], 0));
    let uncommitted = t.p0().fetch(0, 1 << 20).unwrap();
    assert_eq!(uncommitted.last_stable_offset, 0);
    assert_eq!(uncommitted.high_watermark, 3);
    assert!(uncommitted.aborted.is_none());

    // Transaction version 2: the marker carries the bumped epoch.
    assert_eq!(end(&t, 7, 1, true), 3);
    assert_eq!(lso(&t), 4);
    assert!(t.p0().log().ongoing_txns().is_empty());
    let (bases, aborted, stable) = fetch_committed(&t, 0);
    assert_eq!((bases, aborted, stable), (vec![0, 2, 3], vec![], 4));
    assert!(txn_index_files(&t).is_empty(), "commits are never indexed");
    // The marker is a control batch: no line of `log`.
    assert_eq!(cat_string(&t), "a\nb\nc\n");
}

#[test]
fn an_abort_is_indexed_with_the_last_stable_offset_after_it() {
    let f = Fixture::new();
    let t = f.topic("t");
    txn(&t, 1, 0, 0, &["a1", "a2"]); // 0-1
    txn(&t, 2, 0, 0, &["b1"]); // 2
    assert_eq!(end(&t, 1, 1, false), 3);
    // Producer 2's transaction is still open: the stable offset stops at it.
    assert_eq!(lso(&t), 2);
    let files = txn_index_files(&t);
    assert_eq!(files.len(), 1);
    assert!(files[0].ends_with("00000000000000000000.txnindex"));
    assert_eq!(txn_index_entries(&files[0]), vec![(1, 0, 3, 2)]);
    assert_eq!(end(&t, 2, 1, false), 4);
    assert_eq!(lso(&t), 5);
    assert_eq!(
        txn_index_entries(&files[0]),
        vec![(1, 0, 3, 2), (2, 2, 4, 5)]
    );
    let (bases, aborted, _) = fetch_committed(&t, 0);
    assert_eq!(bases, vec![0, 2, 3, 4]);
    assert_eq!(aborted, vec![(1, 0), (2, 2)]);
    let (_, aborted, _) = fetch_committed(&t, 4);
    assert_eq!(
        aborted,
        vec![(2, 2)],
        "only those ending at or after the fetch offset"
    );
}

/// The aborted transactions a read_committed fetch of one batch from `offset` lists
/// (one byte asked: minOneMessage sends the batch holding the offset alone).
fn aborted_of_one_batch(t: &Topic, offset: u64) -> Vec<(i64, u64)> {
    let out = t
        .p0()
        .fetch_limited(offset, 1, true, Isolation::ReadCommitted)
        .unwrap();
    assert_eq!(out.ranges.len(), 1, "one range from {offset}");
    out.aborted
        .unwrap()
        .iter()
        .map(|a| (a.producer_id, a.first_offset))
        .collect()
}

#[test]
fn a_read_committed_fetch_lists_the_aborts_up_to_kafkas_estimate_of_its_end() {
    let f = Fixture::new();
    let t = f.topic("t");
    t.append_lines(b"plain-0\n").unwrap(); // 0
    t.append_lines(b"plain-1\n").unwrap(); // 1
    txn(&t, 2, 0, 0, &["b"]); // 2
    end(&t, 2, 1, false); // 3
    t.append_lines(b"plain-4\n").unwrap(); // 4
                                           // Without offset-index entries (4096 bytes between them), Kafka's estimate of the
                                           // read's end is the log end: the abort past the batch sent is listed.
    assert_eq!(aborted_of_one_batch(&t, 0), vec![(2, 2)]);
    assert_eq!(aborted_of_one_batch(&t, 4), vec![]);

    // An entry per batch (but the first): the estimate is the next batch's offset.
    let g = Fixture::new();
    let t = g.topic("t");
    set(&t, "index.interval.bytes=1");
    t.append_lines(b"plain-0\n").unwrap(); // 0
    t.append_lines(b"plain-1\n").unwrap(); // 1
    txn(&t, 2, 0, 0, &["b"]); // 2
    end(&t, 2, 1, false); // 3
    t.append_lines(b"plain-4\n").unwrap(); // 4
    assert_eq!(aborted_of_one_batch(&t, 0), vec![]);
    assert_eq!(
        aborted_of_one_batch(&t, 1),
        vec![],
        "the abort starts at the bound, 2"
    );
    assert_eq!(aborted_of_one_batch(&t, 2), vec![(2, 2)]);
    assert_eq!(aborted_of_one_batch(&t, 3), vec![(2, 2)], "its marker");
}

#[test]
fn writes_that_do_not_fit_a_transaction_are_refused_with_kafkas_texts() {
    let f = Fixture::new();
    let t = f.topic("t");
    let refused = t
        .append_produced(0, &batch(5, 0, 0, true, &["x"]))
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "Record was not part of an ongoing transaction"
    );
    txn(&t, 5, 0, 0, &["x"]);
    let plain = t
        .append_produced(0, &batch(5, 0, 1, false, &["y"]))
        .unwrap_err();
    assert!(matches!(plain, EngineError::InvalidTxnState { .. }));
    assert_eq!(
        plain.to_string(),
        "Expected transactional write from producer 5 at offset (offset=1, segment=[-1:-1]) in partition t-0"
    );
    // Once the transaction is open, its later batches need no verification.
    t.append_produced(0, &batch(5, 0, 1, true, &["y"])).unwrap();
    end(&t, 5, 1, true);
    let stale = t
        .append_txn_marker(0, &TxnMarkerWrite::new((5, 0), true, 0, TV2))
        .unwrap_err();
    assert!(matches!(stale, EngineError::InvalidProducerEpoch { .. }));
    assert_eq!(
        stale.to_string(),
        "Epoch of producer 5 at offset 3 in t-0 is 0, which is <= the last seen epoch 1 (TV2)"
    );
    // A retry of the marker that ended the transaction is written again, as Kafka does.
    assert_eq!(end(&t, 5, 1, true), 3);
    let fenced = t
        .append_txn_marker(0, &TxnMarkerWrite::new((5, 2), true, -1, TV2))
        .unwrap_err();
    assert!(matches!(
        fenced,
        EngineError::TransactionCoordinatorFenced { .. }
    ));
    assert_eq!(
        fenced.to_string(),
        "Invalid coordinator epoch for producerId 5 at offset 4 in partition t-0: -1 (zombie), 0 (current)"
    );
    let old_txn = t
        .append_produced_in_txn(0, &batch(5, 0, 0, true, &["z"]))
        .unwrap_err();
    assert_eq!(
        old_txn.to_string(),
        "Epoch of producer 5 is 0, which is smaller than the last seen epoch 1"
    );
    assert_eq!(
        t.p0().log().log_end_offset(),
        4,
        "nothing refused was written"
    );
}

#[test]
fn open_transactions_and_the_index_survive_a_restart_and_a_crash() {
    let mut f = Fixture::new();
    let t = f.topic("t");
    txn(&t, 1, 0, 0, &["a"]); // 0
    end(&t, 1, 1, false); // 1
    txn(&t, 2, 0, 0, &["b"]); // 2
    drop(t);
    f.reopen();
    let t = f.topic("t");
    assert_eq!(
        lso(&t),
        2,
        "the open transaction is in the close's snapshot"
    );
    assert_eq!(t.p0().log().ongoing_txns(), vec![(2, 2)]);
    let index = txn_index_files(&t)[0].clone();
    let before = txn_index_entries(&index);
    assert_eq!(before, vec![(1, 0, 1, 2)]);
    // A crash that lost the index and every snapshot: recovery of the segment replays
    // the markers and writes the same entries.
    txn(&t, 2, 0, 1, &["c"]); // 3
    end(&t, 2, 1, false); // 4
    let after_two = txn_index_entries(&index);
    assert_eq!(after_two, vec![(1, 0, 1, 2), (2, 2, 4, 5)]);
    drop(t);
    let dir = f.dir.path().join("t-0");
    fs::remove_file(&index).unwrap();
    for e in fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "snapshot") {
            fs::remove_file(p).unwrap();
        }
    }
    f.crash_and_reopen();
    let t = f.topic("t");
    assert_eq!(txn_index_entries(&txn_index_files(&t)[0]), after_two);
    assert_eq!(lso(&t), 5);
    let (_, aborted, _) = fetch_committed(&t, 0);
    assert_eq!(aborted, vec![(1, 0), (2, 2)]);
}

#[test]
fn a_corrupt_index_is_rebuilt_from_the_markers() {
    let mut f = Fixture::new();
    let t = f.topic("t");
    txn(&t, 1, 0, 0, &["a"]);
    end(&t, 1, 1, false);
    let index = txn_index_files(&t)[0].clone();
    let good = fs::read(&index).unwrap();
    drop(t);
    f.reopen();
    let mut bad = good.clone();
    bad[0] = 3; // an unknown version
    fs::write(&index, &bad).unwrap();
    f.reopen();
    let t = f.topic("t");
    assert_eq!(fs::read(&index).unwrap(), good);
    assert_eq!(fetch_committed(&t, 0).1, vec![(1, 0)]);
}

#[test]
fn retention_deletes_a_segments_txnindex_with_it() {
    let f = Fixture::new();
    let t = f.topic("t");
    // Each batch and marker gets a segment of its own.
    set(&t, "internal.segment.bytes=100\n");
    txn(&t, 1, 0, 0, &["a"]);
    end(&t, 1, 1, false);
    txn(&t, 2, 0, 0, &["b"]);
    end(&t, 2, 1, true);
    txn(&t, 3, 0, 0, &["c"]);
    let names = |t: &Topic| -> Vec<String> {
        txn_index_files(t)
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    };
    assert_eq!(names(&t), vec!["00000000000000000001.txnindex".to_string()]);
    t.p0().delete_records_before(4).unwrap();
    assert!(f.engine().run_retention_once() > 0);
    assert_eq!(
        names(&t),
        vec!["00000000000000000001.txnindex.deleted".to_string()]
    );
    f.engine().run_deletions_once();
}

/// Reads the whole `log` of a topic's partition `p`, in `chunk`-byte reads.
fn cat_partition(t: &Topic, p: u32, chunk: usize) -> String {
    let partition = t.partition(p).unwrap();
    let mut cursor = kpfs::engine::LogCursor::default();
    let mut out = Vec::new();
    loop {
        let got = partition
            .read_log(&mut cursor, out.len() as u64, chunk)
            .unwrap();
        if got.is_empty() {
            return String::from_utf8(out).unwrap();
        }
        out.extend_from_slice(&got);
    }
}

#[test]
fn log_shows_committed_records_only_at_the_positions_they_were_given() {
    let f = Fixture::new();
    let t = f.topic("t");
    t.append_lines(b"before\n").unwrap(); // 0, stream 0..7
    txn(&t, 1, 0, 0, &["open1", "open2"]); // 1-2, stream 7..19
    t.append_lines(b"plain\n").unwrap(); // 3, stream 19..25
    assert_eq!(
        cat_string(&t),
        "before\n",
        "nothing from the open transaction on"
    );
    assert_eq!(t.stream_len(), 7);
    end(&t, 1, 1, true); // 4
    assert_eq!(cat_string(&t), "before\nopen1\nopen2\nplain\n");
    assert_eq!(t.stream_len(), 25);

    txn(&t, 2, 0, 0, &["gone"]); // 5, stream 25..30
    t.append_lines(b"after\n").unwrap(); // 6, stream 30..36
    assert_eq!(t.stream_len(), 25);
    end(&t, 2, 1, false); // 7
                          // The aborted record keeps its place: the size counts it, reads skip it.
    assert_eq!(t.stream_len(), 36);
    let shown = "before\nopen1\nopen2\nplain\nafter\n";
    for chunk in [1, 3, 7, 64 << 10] {
        assert_eq!(
            String::from_utf8(cat(&t, chunk)).unwrap(),
            shown,
            "chunk {chunk}"
        );
    }
    // A read at a position inside the aborted record goes on at the next one shown.
    let mut cursor = kpfs::engine::TopicCursor::default();
    assert_eq!(t.read_log(&mut cursor, 27, 100).unwrap(), b"after\n");
    let capture = t.p0().current_capture(false).unwrap();
    assert_eq!(capture.size(), shown.len() as u64);
}

#[test]
fn a_topic_log_waits_for_an_open_transaction_in_any_partition() {
    let f = Fixture::new();
    let t = f.engine().create_topic("orders", 2).unwrap();
    t.append_lines_after(Some(0), b"", b"p0-a\n").unwrap();
    t.append_produced_in_txn(1, &batch(9, 0, 0, true, &["p1-txn"]))
        .unwrap();
    t.append_lines_after(Some(0), b"", b"p0-b\n").unwrap();
    assert_eq!(cat_string(&t), "p0-a\n");
    assert_eq!(t.stream_len(), 5);
    assert_eq!(
        cat_partition(&t, 0, 3),
        "p0-a\np0-b\n",
        "partition 0's own stream"
    );
    assert_eq!(cat_partition(&t, 1, 3), "");
    // A reader that reached the open transaction goes on from there after the commit.
    let mut cursor = kpfs::engine::TopicCursor::default();
    assert_eq!(t.read_log(&mut cursor, 0, 100).unwrap(), b"p0-a\n");
    assert_eq!(t.read_log(&mut cursor, 5, 100).unwrap(), b"");
    t.append_txn_marker(1, &TxnMarkerWrite::new((9, 1), true, 0, TV2))
        .unwrap();
    assert_eq!(t.read_log(&mut cursor, 5, 100).unwrap(), b"p1-txn\np0-b\n");
    assert_eq!(cat_string(&t), "p0-a\np1-txn\np0-b\n");
    assert_eq!(t.stream_len(), 17);
}

#[test]
fn a_topic_log_reads_each_partition_on_from_where_its_last_run_ended() {
    // The crash harness's transactional producer: transaction after transaction over
    // three partitions, so the stream changes partition at every run, with a marker
    // between a partition's runs and a third of the transactions aborted (their runs
    // placed, their records hidden).
    let f = Fixture::new();
    let t = f.engine().create_topic("txns", 3).unwrap();
    let (mut shown, mut stream) = (String::new(), String::new());
    let mut positions = Vec::new();
    let mut seq = [0i32; 3];
    for n in 0..40 {
        let commit = n % 3 != 0;
        for p in 0..3u32 {
            let values: Vec<String> = (0..1 + (n + p as usize) % 3)
                .map(|i| format!("t{n}-p{p}-{i}"))
                .collect();
            let refs: Vec<&str> = values.iter().map(String::as_str).collect();
            t.append_produced_in_txn(p, &batch(7, 0, seq[p as usize], true, &refs))
                .unwrap();
            seq[p as usize] += values.len() as i32;
            for v in values {
                positions.push((stream.len() as u64, shown.len()));
                stream += &format!("{v}\n");
                if commit {
                    shown += &format!("{v}\n");
                }
            }
        }
        for p in 0..3 {
            t.append_txn_marker(p, &TxnMarkerWrite::new((7, 0), commit, 0, 0))
                .unwrap();
        }
    }
    assert_eq!(t.stream_len(), stream.len() as u64);
    for chunk in [1, 5, 64 << 10] {
        assert_eq!(
            String::from_utf8(cat(&t, chunk)).unwrap(),
            shown,
            "chunk {chunk}"
        );
    }
    // A handle that read it all in small reads and seeks back (before its last read,
    // which it would replay) reads on from there, every partition's records included,
    // not from where its partitions' cursors had stopped. A position on an aborted
    // record reads on from the next record shown.
    for &(pos, at) in positions.iter().step_by(11) {
        let mut cursor = kpfs::engine::TopicCursor::default();
        let mut read = 0;
        loop {
            let got = t.read_log(&mut cursor, read, 5).unwrap();
            if got.is_empty() {
                break;
            }
            read += got.len() as u64;
        }
        let got = t.read_log(&mut cursor, pos, 1 << 20).unwrap();
        assert_eq!(
            String::from_utf8(got).unwrap(),
            &shown[at..],
            "from stream position {pos}"
        );
    }
}

// ---- The transaction coordinator, through the engine ----

use kpfs::engine::groups::{CommitRequest, OffsetToCommit};
use kpfs::engine::transactions::{TxnError, TxnStatus};

/// One batch of `values` in producer `(pid, epoch)`'s transaction, at sequence `seq`.
fn produce_txn(f: &Fixture, id: &str, producer: (i64, i16), seq: i32, values: &[&str]) -> u64 {
    f.engine()
        .produce_in_txn(
            id,
            ("t", 0),
            producer,
            0,
            &batch(producer.0, producer.1, seq, true, values),
        )
        .unwrap()
        .base_offset
}

fn state_of(f: &Fixture, id: &str) -> TxnStatus {
    f.engine().describe_transaction(id).unwrap().state
}

#[test]
fn the_coordinator_commits_and_aborts_through_markers_in_every_partition() {
    let f = Fixture::new();
    let t = f.topic("t");
    let e = f.engine();
    let producer = e.init_transactional_producer("tx", 60_000).unwrap();
    assert_eq!(producer.1, 0, "a new transactional id starts at epoch 0");
    assert_eq!(state_of(&f, "tx"), TxnStatus::Empty);
    // Without AddPartitionsToTxn the partition is not in the transaction.
    let refused = e
        .produce_in_txn(
            "tx",
            ("t", 0),
            producer,
            0,
            &batch(producer.0, 0, 0, true, &["x"]),
        )
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "Partition was not added to the transaction"
    );
    let added = e
        .add_partitions_to_txn(
            "tx",
            producer,
            &[("t".to_string(), 0), ("nope".to_string(), 0)],
        )
        .unwrap();
    assert_eq!(
        added,
        vec![
            Some(TxnError::OperationNotAttempted),
            Some(TxnError::UnknownTopicOrPartition)
        ]
    );
    e.add_partitions_to_txn("tx", producer, &[("t".to_string(), 0)])
        .unwrap();
    assert_eq!(state_of(&f, "tx"), TxnStatus::Ongoing);
    produce_txn(&f, "tx", producer, 0, &["a", "b"]);
    assert_eq!(cat_string(&t), "", "not committed yet");
    e.end_txn("tx", producer, true, 0).unwrap();
    assert_eq!(state_of(&f, "tx"), TxnStatus::CompleteCommit);
    assert_eq!(cat_string(&t), "a\nb\n");
    assert_eq!(lso(&t), 3, "two records and the marker");
    // A retry of the same end succeeds; the other end is refused.
    e.end_txn("tx", producer, true, 0).unwrap();
    assert!(matches!(
        e.end_txn("tx", producer, false, 0),
        Err(TxnError::InvalidTxnState(_))
    ));

    e.add_partitions_to_txn("tx", producer, &[("t".to_string(), 0)])
        .unwrap();
    produce_txn(&f, "tx", producer, 2, &["gone"]);
    e.end_txn("tx", producer, false, 0).unwrap();
    assert_eq!(cat_string(&t), "a\nb\n");
    assert_eq!(fetch_committed(&t, 0).1, vec![(producer.0, 3)]);
    // A second producer with the id fences the first.
    let newer = e.init_transactional_producer("tx", 60_000).unwrap();
    assert_eq!(newer, (producer.0, 1));
    assert_eq!(
        e.add_partitions_to_txn("tx", producer, &[("t".to_string(), 0)]),
        Err(TxnError::ProducerFenced)
    );
    // Kafka's partition verification of a Produce, as its AddPartitionsToTxnManager
    // answers the producer: the fenced epoch is INVALID_PRODUCER_EPOCH (which producers
    // handle there), another producer id INVALID_PRODUCER_ID_MAPPING.
    let write = |producer: (i64, i16)| {
        e.produce_in_txn(
            "tx",
            ("t", 0),
            producer,
            0,
            &batch(producer.0, producer.1, 3, true, &["late"]),
        )
        .unwrap_err()
    };
    assert!(matches!(
        write(producer),
        EngineError::InvalidProducerEpoch { .. }
    ));
    assert!(matches!(
        write((producer.0 + 1, 1)),
        EngineError::InvalidProducerIdMapping { .. }
    ));
    assert!(matches!(write(newer), EngineError::InvalidTxnState { .. }));
    let listed = e.list_transactions(&[TxnStatus::Empty], &[]);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].transactional_id, "tx");
}

#[test]
fn transactional_ids_are_listed_in_the_order_of_kafkas_coordinator() {
    let f = Fixture::new();
    let e = f.engine();
    for id in ["txd-a", "txd-b", "txd-timeout", "ctp"] {
        e.init_transactional_producer(id, 60_000).unwrap();
    }
    let listed: Vec<String> = e
        .list_transactions(&[], &[])
        .into_iter()
        .map(|l| l.transactional_id)
        .collect();
    // A ConcurrentHashMap's bins of 16 (String.hashCode spread): txd-timeout's is 9,
    // txd-a's and ctp's 14 (in the order they were added), txd-b's 15. Kafka 4.3.1's
    // `kafka-transactions.sh list` prints txd-timeout, txd-a, txd-b
    // (t_kafka_txn_diff.sh).
    assert_eq!(listed, ["txd-timeout", "txd-a", "ctp", "txd-b"]);
}

#[test]
fn an_open_transaction_is_aborted_by_a_new_producer_and_by_its_timeout() {
    let f = Fixture::new();
    let t = f.topic("t");
    let e = f.engine();
    let first = e.init_transactional_producer("tx", 10_000).unwrap();
    e.add_partitions_to_txn("tx", first, &[("t".to_string(), 0)])
        .unwrap();
    produce_txn(&f, "tx", first, 0, &["zombie"]);
    // Kafka's InitProducerId aborts the open transaction (with a bumped epoch) and asks
    // the new producer to retry.
    assert_eq!(
        e.init_transactional_producer("tx", 10_000),
        Err(TxnError::ConcurrentTransactions)
    );
    assert_eq!(state_of(&f, "tx"), TxnStatus::CompleteAbort);
    let second = e.init_transactional_producer("tx", 10_000).unwrap();
    assert_eq!(second, (first.0, 2));
    assert_eq!(lso(&t), t.p0().log().log_end_offset());
    assert_eq!(cat_string(&t), "");

    e.add_partitions_to_txn("tx", second, &[("t".to_string(), 0)])
        .unwrap();
    produce_txn(&f, "tx", second, 0, &["slow"]);
    f.advance(10_001);
    e.run_transaction_timers_once();
    assert_eq!(state_of(&f, "tx"), TxnStatus::CompleteAbort);
    assert_eq!(
        e.end_txn("tx", second, true, 0),
        Err(TxnError::ProducerFenced),
        "the timed-out producer is fenced"
    );
    assert_eq!(lso(&t), t.p0().log().log_end_offset());
    // An id idle for transactional.id.expiration.ms (7 days) is forgotten.
    f.advance(7 * 24 * 3_600_000);
    e.run_transaction_timers_once();
    assert_eq!(
        e.describe_transaction("tx"),
        Err(TxnError::TransactionalIdNotFound)
    );
}

#[test]
fn the_coordinators_state_survives_a_crash_and_transactional_offsets_commit_with_it() {
    let mut f = Fixture::new();
    let t = f.topic("t");
    let producer = f
        .engine()
        .init_transactional_producer("tx", 60_000)
        .unwrap();
    f.engine().add_offsets_to_txn("tx", producer).unwrap();
    f.engine()
        .add_partitions_to_txn("tx", producer, &[("t".to_string(), 0)])
        .unwrap();
    produce_txn(&f, "tx", producer, 0, &["out"]);
    let commit = CommitRequest {
        group_id: "g".to_string(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        offsets: vec![OffsetToCommit {
            topic: "t".to_string(),
            partition: 0,
            offset: 7,
            leader_epoch: -1,
            metadata: None,
        }],
    };
    f.engine()
        .txn_offset_commit("tx", producer, 0, &commit)
        .unwrap();
    let committed = |f: &Fixture| {
        f.engine()
            .groups()
            .fetch_offsets("g", Some(&[("t".to_string(), 0)]))[0]
            .offset
    };
    assert_eq!(committed(&f), -1, "pending until the transaction commits");
    drop(t);
    f.crash_and_reopen();
    assert_eq!(
        state_of(&f, "tx"),
        TxnStatus::Ongoing,
        "an open transaction stays open"
    );
    assert_eq!(committed(&f), -1);
    f.engine().end_txn("tx", producer, true, 0).unwrap();
    assert_eq!(committed(&f), 7);
    assert_eq!(cat_string(&f.topic("t")), "out\n");
    f.crash_and_reopen();
    assert_eq!(committed(&f), 7, "replayed with its marker");
    assert_eq!(state_of(&f, "tx"), TxnStatus::CompleteCommit);
    assert_eq!(cat_string(&f.topic("t")), "out\n");
}

#[test]
fn status_shows_the_last_stable_offset_and_what_holds_it() {
    let f = Fixture::new();
    let t = f.engine().create_topic("t", 2).unwrap();
    let pick = |text: &str, keys: &[&str]| -> Vec<String> {
        text.lines()
            .filter(|l| keys.iter().any(|k| l.starts_with(k)))
            .map(String::from)
            .collect()
    };
    let in_txn = |p, pid, values: &[&str]| {
        t.append_produced_in_txn(p, &batch(pid, 0, 0, true, values))
            .unwrap()
    };
    in_txn(0, 7, &["a", "b"]); // 0-1
    in_txn(0, 9, &["c"]); // 2
    t.append_lines_after(Some(1), b"", b"x\n").unwrap(); // 0
    in_txn(1, 8, &["y"]); // 1
    let keys = ["last_stable_offset", "open_transaction"];
    assert_eq!(
        pick(&t.p0().status_text(), &keys),
        [
            "last_stable_offset: 0",
            "open_transaction: producer_id=7 first_offset=0",
            "open_transaction: producer_id=9 first_offset=2",
        ]
    );
    let topic = f.engine().topic_status_text(&t);
    let offsets = |l: &String| l.split(" size_bytes=").next().unwrap().to_string();
    assert_eq!(
        pick(&topic, &["open_transaction", "partition: "])
            .iter()
            .map(offsets)
            .collect::<Vec<_>>(),
        [
            "open_transaction: partition=0 producer_id=7 first_offset=0",
            "open_transaction: partition=0 producer_id=9 first_offset=2",
            "open_transaction: partition=1 producer_id=8 first_offset=1",
            "partition: 0 log_start_offset=0 log_end_offset=3 last_stable_offset=0",
            "partition: 1 log_start_offset=0 log_end_offset=2 last_stable_offset=1",
        ]
    );
    t.append_txn_marker(0, &TxnMarkerWrite::new((7, 1), true, 0, TV2))
        .unwrap(); // 3
    assert_eq!(
        pick(&t.p0().status_text(), &keys),
        [
            "last_stable_offset: 2",
            "open_transaction: producer_id=9 first_offset=2",
        ]
    );
    t.append_txn_marker(0, &TxnMarkerWrite::new((9, 1), false, 0, TV2))
        .unwrap(); // 4
    assert_eq!(
        pick(&t.p0().status_text(), &keys),
        ["last_stable_offset: 5"],
        "the log end once no transaction is open"
    );
}

// Compaction of transactional data (Kafka's `Cleaner` with its
// `CleanedTransactionMetadata`): aborted batches go whatever their keys, markers outlive
// their transaction's data by `delete.retention.ms`, the cleaned segments' `.txnindex`
// list the aborts whose data they still end, and each active producer's last batch stays.

/// A compacted topic whose every batch gets a segment of its own, so every segment is a
/// cleaning group of its own and a transaction spans groups.
fn compacted(f: &Fixture) -> std::sync::Arc<Topic> {
    let t = f.topic("c");
    set(
        &t,
        "cleanup.policy=compact\nmin.cleanable.dirty.ratio=0.01\ndelete.retention.ms=10000\n\
         parse.key=true\nkey.separator=:\ninternal.segment.bytes=100\n",
    );
    t
}

fn txn_kv(t: &Topic, (pid, epoch, seq): (i64, i16, i32), records: &[(&str, &str)]) -> u64 {
    let records: Vec<_> = records.iter().map(|(k, v)| (Some(*k), Some(*v))).collect();
    t.append_produced_in_txn(0, &keyed_batch(pid, epoch, seq, true, &records))
        .unwrap()
        .base_offset
}

/// Every batch on disk, one line each: its offsets, producer id, `control`, its records
/// (`key:value`, a marker's type) and its delete horizon after T0.
fn stored(t: &Topic) -> Vec<String> {
    let mut out = Vec::new();
    for s in t.p0().log().snapshot().segments.iter() {
        let bytes = s.read_at(0, s.size() as usize).unwrap();
        let mut at = 0;
        while at < bytes.len() {
            let (h, records) = kpfs::engine::format::decode_batch(&bytes[at..]).unwrap();
            let attributes = u16::from_be_bytes([bytes[at + 21], bytes[at + 22]]);
            let control = attributes & 0x20 != 0;
            let pid = i64::from_be_bytes(bytes[at + 43..at + 51].try_into().unwrap());
            let text = |b: Option<Vec<u8>>| String::from_utf8(b.unwrap_or_default()).unwrap();
            let records: Vec<String> = records
                .into_iter()
                .map(|r| match (control, r.key) {
                    (true, Some(k)) if k == [0, 0, 0, 1] => "COMMIT".to_string(),
                    (true, Some(k)) if k == [0, 0, 0, 0] => "ABORT".to_string(),
                    (_, k) => format!("{}:{}", text(k), text(r.value)),
                })
                .collect();
            let mut line = format!("{}-{} p{pid}", h.base_offset, h.last_offset());
            if control {
                line.push_str(" control");
            }
            line.push_str(&format!(" [{}]", records.join(",")));
            if let Some(hz) = h.delete_horizon_ms() {
                line.push_str(&format!(" horizon T0+{}", hz - T0));
            }
            out.push(line);
            at += h.size;
        }
    }
    out
}

/// The live `.txnindex` files (not those renamed `.deleted`) and their entries.
fn live_txn_indexes(t: &Topic) -> Vec<(String, Vec<IndexEntry>)> {
    txn_index_files(t)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == "txnindex"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, txn_index_entries(&p))
        })
        .collect()
}

/// One cleaner pass, which leaves the `log` stream's size as it was.
fn clean(f: &Fixture, t: &Topic) {
    let size = t.stream_len();
    assert!(f.engine().run_cleaner_once().is_some(), "the topic is due");
    assert_eq!(t.stream_len(), size, "every kept record keeps its place");
}

#[test]
fn the_cleaner_drops_aborted_data_and_markers_once_their_horizon_passes() {
    let mut f = Fixture::new();
    let t = compacted(&f);
    txn_kv(&t, (1, 0, 0), &[("k1", "a1"), ("k2", "a2")]); // 0-1
    txn_kv(&t, (2, 0, 0), &[("k1", "x")]); // 2
    txn_kv(&t, (3, 0, 0), &[("k6", "q")]); // 3
    end(&t, 1, 1, true); // 4
    end(&t, 2, 1, false); // 5: producer 3's transaction holds the stable offset at 3
    end(&t, 3, 1, false); // 6
    txn_kv(&t, (1, 1, 0), &[("k2", "b2")]); // 7
    end(&t, 1, 2, true); // 8
    txn_kv(&t, (2, 1, 0), &[("k4", "c")]); // 9
    end(&t, 2, 2, true); // 10
    t.append_lines(b"k3:p\n").unwrap(); // 11, the active segment
    assert_eq!(
        live_txn_indexes(&t),
        vec![
            ("00000000000000000005.txnindex".into(), vec![(2, 2, 5, 3)]),
            ("00000000000000000006.txnindex".into(), vec![(3, 3, 6, 7)]),
        ]
    );
    assert_eq!(cat_string(&t), "k1:a1\nk2:a2\nk2:b2\nk4:c\nk3:p\n");

    // Pass 1: the aborted records go, and shadow nothing: k1's committed a1 stays though
    // the aborted x came after it. k2's a2 goes under the committed b2. Every marker still
    // ends data it met, and each ABORT's entry is written again into its cleaned segment's
    // index.
    clean(&f, &t);
    assert_eq!(
        stored(&t),
        [
            "0-1 p1 [k1:a1]",
            "4-4 p1 control [COMMIT]",
            "5-5 p2 control [ABORT]",
            "6-6 p3 control [ABORT]",
            "7-7 p1 [k2:b2]",
            "8-8 p1 control [COMMIT]",
            "9-9 p2 [k4:c]",
            "10-10 p2 control [COMMIT]",
            "11-11 p-1 [k3:p]",
        ]
    );
    assert_eq!(
        live_txn_indexes(&t),
        vec![
            ("00000000000000000005.txnindex".into(), vec![(2, 2, 5, 3)]),
            ("00000000000000000006.txnindex".into(), vec![(3, 3, 6, 7)]),
        ]
    );
    assert_eq!(fetch_committed(&t, 0).1, vec![(2, 2), (3, 3)]);
    assert_eq!(cat_string(&t), "k1:a1\nk2:b2\nk4:c\nk3:p\n");

    // Pass 2: k1:new supersedes a1, the last data of producer 1's first transaction,
    // whose COMMIT still stays this pass (it met the batch). The aborts have no data
    // left: their markers get a horizon (now + delete.retention.ms), and no index entry.
    f.advance(1000);
    t.append_lines(b"k1:new\n").unwrap(); // 12
    t.append_lines(b"z:1\n").unwrap(); // 13
    clean(&f, &t);
    assert_eq!(
        stored(&t)[..3],
        [
            "4-4 p1 control [COMMIT]",
            "5-5 p2 control [ABORT] horizon T0+11000",
            "6-6 p3 control [ABORT] horizon T0+11000",
        ]
    );
    assert_eq!(live_txn_indexes(&t), vec![]);
    assert_eq!(fetch_committed(&t, 0).1, vec![]);
    assert_eq!(cat_string(&t), "k2:b2\nk4:c\nk3:p\nk1:new\nz:1\n");

    // Pass 3, before the aborts' horizon: they stay as they are; now the COMMIT ends
    // no data, and gets its horizon.
    f.advance(5000);
    t.append_lines(b"z:2\n").unwrap(); // 14
    clean(&f, &t);
    assert_eq!(
        stored(&t)[..3],
        [
            "4-4 p1 control [COMMIT] horizon T0+16000",
            "5-5 p2 control [ABORT] horizon T0+11000",
            "6-6 p3 control [ABORT] horizon T0+11000",
        ]
    );

    // Pass 4, at the aborts' horizon: producer 2's goes. Producer 3's is its producer's
    // last batch, which holds its epoch: it stays, without its record.
    f.advance(5000);
    t.append_lines(b"z:3\n").unwrap(); // 15
    clean(&f, &t);
    assert_eq!(
        stored(&t)[..2],
        [
            "4-4 p1 control [COMMIT] horizon T0+16000",
            "6-6 p3 control []"
        ]
    );

    // Pass 5, at the COMMIT's horizon: it goes. The emptied marker stays, as it is.
    f.advance(5000);
    t.append_lines(b"z:4\n").unwrap(); // 16
    clean(&f, &t);
    let last = [
        "6-6 p3 control []",
        "7-7 p1 [k2:b2]",
        "8-8 p1 control [COMMIT]",
        "9-9 p2 [k4:c]",
        "10-10 p2 control [COMMIT]",
        "11-11 p-1 [k3:p]",
        "12-12 p-1 [k1:new]",
        "15-15 p-1 [z:3]",
        "16-16 p-1 [z:4]",
    ];
    assert_eq!(stored(&t), last);
    let text = "k2:b2\nk4:c\nk3:p\nk1:new\nz:3\nz:4\n";
    assert_eq!(cat_string(&t), text);
    let size = t.stream_len();
    drop(t);

    for crash in [false, true] {
        if crash {
            f.crash_and_reopen();
        } else {
            f.reopen();
        }
        let t = f.topic("c");
        assert_eq!(stored(&t), last, "crash: {crash}");
        assert_eq!(cat_string(&t), text, "crash: {crash}");
        assert_eq!(t.stream_len(), size, "crash: {crash}");
        assert_eq!((lso(&t), t.p0().log().log_end_offset()), (17, 17));
        assert_eq!(live_txn_indexes(&t), vec![], "crash: {crash}");
        assert_eq!(
            fetch_committed(&t, 0).0,
            [6, 7, 8, 9, 10, 11, 12, 15, 16],
            "crash: {crash}"
        );
    }
}

#[test]
fn an_aborted_transaction_across_segments_is_judged_whole_and_reindexed() {
    let f = Fixture::new();
    let t = compacted(&f);
    // Big enough segments for a few batches each: groups of several segments.
    set(&t, "internal.segment.bytes=300");
    txn_kv(&t, (1, 0, 0), &[("k", "committed")]); // 0
    end(&t, 1, 1, true); // 1
    txn_kv(&t, (2, 0, 0), &[("k", "aborted-1")]); // 2
    txn_kv(&t, (2, 0, 1), &[("j", "aborted-2")]); // 3
    txn_kv(&t, (3, 0, 0), &[("m", "open")]); // 4
    txn_kv(&t, (2, 0, 2), &[("k", "aborted-3")]); // 5
    end(&t, 2, 1, false); // 6
    end(&t, 3, 1, true); // 7
    t.append_lines(b"y1:1\n").unwrap(); // 8
    t.append_lines(b"y2:1\n").unwrap(); // 9
    t.append_lines(b"y3:1\n").unwrap(); // 10, the active segment
    let bases: Vec<u64> = t
        .p0()
        .log()
        .snapshot()
        .segments
        .iter()
        .map(|s| s.base_offset())
        .collect();
    assert_eq!(bases, [0, 3, 6, 10], "the abort's data spans two groups");
    let before = live_txn_indexes(&t);
    assert_eq!(
        before,
        vec![("00000000000000000006.txnindex".into(), vec![(2, 2, 6, 4)])]
    );
    clean(&f, &t);
    assert_eq!(
        stored(&t),
        [
            "0-0 p1 [k:committed]",
            "1-1 p1 control [COMMIT]",
            "4-4 p3 [m:open]",
            "6-6 p2 control [ABORT]",
            "7-7 p3 control [COMMIT]",
            "8-8 p-1 [y1:1]",
            "9-9 p-1 [y2:1]",
            "10-10 p-1 [y3:1]",
        ]
    );
    assert_eq!(
        live_txn_indexes(&t),
        before,
        "the cleaned segment ending the abort lists it again"
    );
    assert_eq!(cat_string(&t), "k:committed\nm:open\ny1:1\ny2:1\ny3:1\n");
}

#[test]
fn an_idempotent_producers_last_batch_stays_empty_until_it_writes_again() {
    let mut f = Fixture::new();
    let t = compacted(&f);
    let idempotent =
        |seq: i32, value: &str| keyed_batch(5, 0, seq, false, &[(Some("k"), Some(value))]);
    t.append_produced(0, &idempotent(0, "a")).unwrap(); // 0
    t.append_lines(b"k:b\n").unwrap(); // 1
    t.append_lines(b"y:1\n").unwrap(); // 2
    clean(&f, &t);
    // Its record goes under k:b, but the batch holds the producer's last sequence.
    assert_eq!(stored(&t), ["0-0 p5 []", "1-1 p-1 [k:b]", "2-2 p-1 [y:1]"]);
    let kept = t.p0().log().snapshot().segments[0].read_at(0, 61).unwrap();
    assert_eq!(
        (&kept[51..53], &kept[53..57]),
        (&[0, 0][..], &[0, 0, 0, 0][..]),
        "its epoch and first sequence stay"
    );
    assert_eq!(cat_string(&t), "k:b\ny:1\n");
    drop(t);
    // So a crash that loses the producer snapshots still finds the producer in the log.
    for e in fs::read_dir(f.dir.path().join("c-0")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "snapshot") {
            fs::remove_file(p).unwrap();
        }
    }
    f.crash_and_reopen();
    let t = f.topic("c");
    let producer = t.p0().log().active_producers();
    assert_eq!(
        producer
            .iter()
            .map(|p| (p.producer_id, p.last_sequence, p.last_offset))
            .collect::<Vec<_>>(),
        [(5, 0, 0)]
    );

    t.append_produced(0, &idempotent(1, "c")).unwrap(); // 3
    t.append_lines(b"y:2\n").unwrap(); // 4
    clean(&f, &t);
    assert_eq!(
        stored(&t),
        ["2-2 p-1 [y:1]", "3-3 p5 [k:c]", "4-4 p-1 [y:2]"],
        "once it wrote again, its emptied batch goes"
    );
}

#[test]
fn a_corrupt_index_is_rebuilt_whole_after_a_crash_past_the_recovery_point() {
    let mut f = Fixture::new();
    let t = f.topic("t");
    // An offset-index entry per batch, so recovery could resume after the flushed ones.
    set(&t, "index.interval.bytes=0\n");
    txn(&t, 1, 0, 0, &["a"]); // 0
    end(&t, 1, 1, false); // 1
                          // A clean close: the recovery point vouches for offsets 0-1, and a producer snapshot
                          // at 2 holds the state after the first abort.
    drop(t);
    f.reopen();
    let t = f.topic("t");
    txn(&t, 2, 0, 0, &["b"]); // 2
    end(&t, 2, 1, false); // 3
    let index = txn_index_files(&t)[0].clone();
    let good = txn_index_entries(&index);
    assert_eq!(good, vec![(1, 0, 1, 2), (2, 2, 3, 4)]);
    drop(t);
    let mut bad = fs::read(&index).unwrap();
    bad[0] = 1;
    fs::write(&index, &bad).unwrap();
    f.crash_and_reopen();
    let t = f.topic("t");
    assert_eq!(txn_index_entries(&txn_index_files(&t)[0]), good);
    assert_eq!(fetch_committed(&t, 0).1, vec![(1, 0), (2, 2)]);
}
