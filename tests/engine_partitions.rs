//! Topics of several partitions in the engine: one partition directory each with one
//! topic id, the producer's default partitioner for `TOPIC/log`'s writes, the topic's
//! `log` stream across its partitions (every record once, in the order of the appends,
//! at positions that hold across reads, reopens and retention), partitions added, and the
//! checkpoints that list every partition.

mod common;

use std::fs;

use common::{cat, cat_string, set, Fixture};
use kpfs::engine::format::decode_batch;
use kpfs::engine::{LogCursor, TopicCursor};

fn partition_text(f: &Fixture, topic: &str, index: u32) -> String {
    let p = f.engine().topic(topic).unwrap().partition(index).unwrap();
    let (mut cursor, mut out) = (LogCursor::default(), Vec::new());
    loop {
        let got = p.read_log(&mut cursor, out.len() as u64, 4096).unwrap();
        if got.is_empty() {
            return String::from_utf8(out).unwrap();
        }
        out.extend_from_slice(&got);
    }
}

#[test]
fn a_topic_of_three_partitions_has_three_directories_with_one_topic_id() {
    let f = Fixture::new();
    let t = f.engine().create_topic("orders", 3).unwrap();
    assert_eq!(t.partition_count(), 3);
    let ids: Vec<String> = (0..3)
        .map(|p| {
            fs::read_to_string(f.dir.path().join(format!("orders-{p}/partition.metadata"))).unwrap()
        })
        .collect();
    assert!(ids[0].starts_with("version: 0\ntopic_id: "), "{}", ids[0]);
    assert_eq!(ids[0], ids[1]);
    assert_eq!(ids[0], ids[2]);
    assert!(t.partition(3).is_none());
    let err = f.engine().create_topic("none", 0).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Number of partitions was set to an invalid non-positive value."
    );
}

/// Keyless writes take the partitions in turn, a write's lines stay together, and the
/// topic's `log` shows the writes in the order they were appended.
#[test]
fn keyless_writes_take_the_partitions_in_turn() {
    let f = Fixture::new();
    let t = f.engine().create_topic("turns", 3).unwrap();
    let writes = ["a1\na2\n", "b1\n", "c1\nc2\nc3\n", "d1\n"];
    for w in writes {
        t.append_lines(w.as_bytes()).unwrap();
    }
    assert_eq!(partition_text(&f, "turns", 0), "a1\na2\nd1\n");
    assert_eq!(partition_text(&f, "turns", 1), "b1\n");
    assert_eq!(partition_text(&f, "turns", 2), "c1\nc2\nc3\n");
    let all: String = writes.concat();
    assert_eq!(cat_string(&t), all);
    assert_eq!(t.stream_len(), all.len() as u64);
    for chunk in [1, 2, 5, 7] {
        assert_eq!(
            String::from_utf8(cat(&t, chunk)).unwrap(),
            all,
            "reads of {chunk}"
        );
    }
}

/// Keys go where Kafka's Java producer sends them: `toPositive(murmur2(key)) % 5` is 0 for
/// "21", 1 for "foobar" and 2 for "abc" (murmur2 of Kafka's `UtilsTest`).
#[test]
fn keyed_records_go_to_their_keys_partitions() {
    let f = Fixture::new();
    let t = f.engine().create_topic("keyed", 5).unwrap();
    set(&t, "parse.key=true\nkey.separator=:");
    t.append_lines(b"abc:1\n21:2\nfoobar:3\nabc:4\n").unwrap();
    assert_eq!(partition_text(&f, "keyed", 0), "21:2\n");
    assert_eq!(partition_text(&f, "keyed", 1), "foobar:3\n");
    assert_eq!(partition_text(&f, "keyed", 2), "abc:1\nabc:4\n");
    // One append per partition, in the order of their first records.
    assert_eq!(cat_string(&t), "abc:1\nabc:4\n21:2\nfoobar:3\n");
    // An explicit partition takes any key.
    t.append_lines_after(Some(4), b"", b"abc:5\n").unwrap();
    assert_eq!(partition_text(&f, "keyed", 4), "abc:5\n");
    let missing = t.append_lines_after(Some(5), b"", b"abc:6\n").unwrap_err();
    assert_eq!(
        missing.to_string(),
        "This server does not host this topic-partition: keyed-5"
    );
}

/// Keyed writes to the topic's `log` racing writes to its partitions' own `log`s: each
/// keyed write places its parts where the partitions end under the append lock (placed
/// from ends read before it, they would overlap another writer's records), and the
/// topic's `log` shows every record once, each writer's in its order.
#[test]
fn keyed_writes_racing_appends_to_one_partition_keep_every_record_once() {
    let f = Fixture::new();
    let t = f.engine().create_topic("race", 3).unwrap();
    set(&t, "parse.key=true\nkey.separator=:");
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..1000 {
                let write: String = ["abc", "21", "foobar"]
                    .iter()
                    .map(|k| format!("{k}:keyed-{k}-{i}\n"))
                    .collect();
                t.append_lines(write.as_bytes()).unwrap();
            }
        });
        s.spawn(|| {
            for i in 0..1000 {
                let line = format!("any:direct-{i}\n");
                t.append_lines_after(Some(i % 3), b"", line.as_bytes())
                    .unwrap();
            }
        });
    });
    let all = cat_string(&t);
    let lines: Vec<&str> = all.lines().collect();
    assert_eq!(lines.len(), 4000);
    assert_eq!(t.stream_len(), all.len() as u64);
    for writer in ["keyed", "direct"] {
        let values: Vec<&str> = lines
            .iter()
            .filter_map(|l| l.split_once(':').map(|(_, v)| v))
            .filter(|v| v.starts_with(writer))
            .collect();
        let mut seen = std::collections::HashSet::new();
        assert!(
            values.iter().all(|v| seen.insert(*v)),
            "{writer}: a record twice"
        );
        let order: Vec<u32> = values
            .iter()
            .map(|v| v.rsplit('-').next().unwrap().parse().unwrap())
            .collect();
        assert!(
            order.windows(2).all(|w| w[0] <= w[1]),
            "{writer}: out of order"
        );
    }
}

/// A keyed write whose records go to several partitions is refused whole when one
/// record cannot be stored: no partition keeps its part.
#[test]
fn a_keyed_write_refused_for_one_record_appends_nothing_anywhere() {
    let f = Fixture::new();
    let t = f.engine().create_topic("keyed", 5).unwrap();
    set(
        &t,
        "parse.key=true\nkey.separator=:\ninternal.segment.bytes=200",
    );
    // abc goes to partition 2, 21 to partition 0: its record alone is over a segment.
    let big = format!("abc:1\n21:{}\n", "x".repeat(300));
    let err = t.append_lines(big.as_bytes()).unwrap_err();
    assert!(
        err.to_string().contains("in append to partition keyed-0, which exceeds the maximum configured segment size of 200"),
        "{err}"
    );
    for p in 0..5 {
        assert_eq!(partition_text(&f, "keyed", p), "", "partition {p}");
    }
    assert_eq!(t.stream_len(), 0);
}

/// A keyed write whose part for a partition is over `max.message.bytes` goes in several
/// batches per partition, built before the partitions' ends are known (at offsets from
/// 0) and moved there: after earlier records, each partition holds its records in order
/// at consecutive offsets, and recovery after a crash (which checks every unsynced
/// batch's CRC and offsets) keeps them all.
#[test]
fn a_keyed_write_over_the_batch_limit_goes_in_several_batches_per_partition() {
    let mut f = Fixture::new();
    let t = f.engine().create_topic("split", 5).unwrap();
    set(&t, "parse.key=true\nkey.separator=:\nmax.message.bytes=200");
    t.append_lines(b"21:first\nabc:first\n").unwrap();
    let mut write = String::new();
    let mut expected = [String::new(), String::new(), String::new()];
    for i in 0..60 {
        let (key, p) = [("abc", 2), ("21", 0), ("foobar", 1)][i % 3];
        let line = format!("{key}:value-{i:03}\n");
        write.push_str(&line);
        expected[p].push_str(&line);
    }
    t.append_lines(write.as_bytes()).unwrap();
    let check = |f: &Fixture| {
        let t = f.engine().topic("split").unwrap();
        assert_eq!(
            partition_text(f, "split", 0),
            format!("21:first\n{}", expected[0])
        );
        assert_eq!(partition_text(f, "split", 1), expected[1]);
        assert_eq!(
            partition_text(f, "split", 2),
            format!("abc:first\n{}", expected[2])
        );
        // One append per partition, in the order of their first records.
        assert_eq!(
            cat_string(&t),
            format!(
                "21:first\nabc:first\n{}{}{}",
                expected[2], expected[0], expected[1]
            )
        );
        for (p, records) in [(0, 21), (1, 20), (2, 21)] {
            let end = t.partition(p).unwrap().log().log_end_offset();
            assert_eq!(end, records, "partition {p}");
        }
    };
    check(&f);
    let p2 = t.partition(2).unwrap();
    let segment = p2.log().snapshot().segments[0].clone();
    let bytes = segment.read_at(0, segment.size() as usize).unwrap();
    let (mut at, mut next, mut batches) = (0, 0, 0);
    while at < bytes.len() {
        let (h, records) = decode_batch(&bytes[at..]).unwrap();
        assert_eq!(h.base_offset, next, "batch {batches}");
        assert_eq!(records.len(), h.record_count as usize);
        next = h.last_offset() + 1;
        at += h.size;
        batches += 1;
    }
    assert_eq!(next, 21);
    assert!(batches > 3, "{batches} batches in partition 2");
    drop((segment, p2, t));
    f.crash_and_reopen();
    check(&f);
}

/// A keyed write large enough to be built and appended by two threads (the even
/// partitions' batches on the writer's, the odd ones' on the append helper) stores what
/// one thread would: each key's records in one partition, in write order, and the topic's
/// `log` shows the partitions' parts in the order of their first records, before and
/// after a crash.
#[test]
fn a_large_keyed_write_split_over_two_threads_keeps_the_write_order() {
    let mut f = Fixture::new();
    let t = f.engine().create_topic("wide", 12).unwrap();
    set(&t, "parse.key=true\nkey.separator=:");
    let lines: Vec<String> = (0..6000)
        .map(|i| format!("k{}:value-{i:05}\n", (i * 7919) % 101))
        .collect();
    let write = lines.concat();
    assert!(write.len() > 64 << 10, "large enough to be split");
    t.append_lines(write.as_bytes()).unwrap();
    drop(t);
    let check = |f: &Fixture| {
        let parts: Vec<String> = (0..12).map(|p| partition_text(f, "wide", p)).collect();
        let first_line = |part: &String| {
            let line = part.split_inclusive('\n').next().unwrap();
            lines.iter().position(|l| l == line).unwrap()
        };
        let mut filled: Vec<usize> = (0..12).filter(|&p| !parts[p].is_empty()).collect();
        assert!(filled.iter().any(|p| p % 2 == 0) && filled.iter().any(|p| p % 2 == 1));
        let mut key_partition = std::collections::HashMap::new();
        for &p in &filled {
            let mut last = None;
            for line in parts[p].split_inclusive('\n') {
                let at = lines.iter().position(|l| l == line).unwrap();
                assert!(last < Some(at), "partition {p}: {line} out of write order");
                last = Some(at);
                let key = line.split_once(':').unwrap().0;
                assert_eq!(*key_partition.entry(key).or_insert(p), p, "key {key}");
            }
        }
        let stored: usize = parts.iter().map(|p| p.lines().count()).sum();
        assert_eq!(stored, lines.len());
        filled.sort_by_key(|&p| first_line(&parts[p]));
        let in_order: String = filled.iter().map(|&p| parts[p].as_str()).collect();
        assert_eq!(cat_string(&f.engine().topic("wide").unwrap()), in_order);
    };
    check(&f);
    f.crash_and_reopen();
    check(&f);
}

/// The topic's stream keeps its positions: a read at any position after a reopen, and
/// after retention removed one partition's oldest records, gives what it gave before
/// (the removed lines are a gap).
#[test]
fn positions_in_the_topics_log_hold_across_reopens_and_retention() {
    let mut f = Fixture::new();
    let t = f.engine().create_topic("held", 2).unwrap();
    set(&t, "internal.segment.bytes=200\nmax.message.bytes=100");
    let mut expected = String::new();
    for i in 0..30 {
        let w = format!("write-{i:02}\n");
        t.append_lines(w.as_bytes()).unwrap();
        expected.push_str(&w);
    }
    assert_eq!(cat_string(&t), expected);
    let at = |t: &kpfs::engine::Topic, pos: u64, len: usize| {
        String::from_utf8(t.read_log(&mut TopicCursor::default(), pos, len).unwrap()).unwrap()
    };
    let middle = at(&t, 99, 30);
    assert_eq!(middle, expected[99..129]);
    f.reopen();
    let t = f.engine().topic("held").unwrap();
    assert_eq!(cat_string(&t), expected);
    assert_eq!(at(&t, 99, 30), middle);
    assert_eq!(t.stream_len(), expected.len() as u64);
    // Partition 0 (the even writes) loses its oldest segments; partition 1 keeps all.
    let before = t.partition(1).unwrap().log().snapshot().segments.len();
    let p0 = t.partition(0).unwrap();
    let start = p0.log().snapshot().segments[1].base_offset();
    p0.delete_records_before(start).unwrap();
    f.engine().run_retention_once();
    assert!(p0.log().log_start_offset() >= start);
    assert_eq!(
        t.partition(1).unwrap().log().snapshot().segments.len(),
        before
    );
    let kept: String = expected
        .lines()
        .enumerate()
        .filter(|(i, _)| i % 2 == 1 || (*i as u64) / 2 >= p0.log().log_start_offset())
        .map(|(_, l)| format!("{l}\n"))
        .collect();
    assert_eq!(cat_string(&t), kept);
    assert_eq!(
        t.stream_len(),
        expected.len() as u64,
        "the size never shrinks"
    );
    // A read at a record's position still finds that record.
    let last = expected.rfind("write-29").unwrap() as u64;
    assert_eq!(at(&t, last, 9), "write-29\n");
    // New writes continue after a crash too.
    f.crash_and_reopen();
    let t = f.engine().topic("held").unwrap();
    t.append_lines(b"after\n").unwrap();
    assert!(cat_string(&t).ends_with("write-29\nafter\n"));
    assert_eq!(t.stream_len(), expected.len() as u64 + 6);
}

/// A reader at the end of the topic's `log` (`tail -f`) sits in a run that has placed
/// nothing yet (a new topic's first run, or the run of an append that was refused) when
/// the next append, to another partition, replaces that run in place: the reader goes on
/// in the run that replaced it, so it reads that partition's records at their positions
/// rather than its old partition's (found by tests/model.rs).
#[test]
fn a_reader_at_the_end_follows_a_run_replaced_in_place() {
    let f = Fixture::new();
    let t = f.engine().create_topic("follow", 3).unwrap();
    set(&t, "internal.segment.bytes=200");
    let mut tail = TopicCursor::default();
    assert_eq!(t.read_log(&mut tail, 0, 100).unwrap(), b"");
    // The first run is partition 0's; the first append goes to partition 1.
    t.append_lines_after(Some(1), b"", b"one\n").unwrap();
    assert_eq!(t.read_log(&mut tail, 0, 100).unwrap(), b"one\n");
    // An append to partition 2 refused by its log (a record over a segment) leaves its
    // run empty, and the reader at the end enters it.
    let big = format!("{}\n", "x".repeat(300));
    t.append_lines_after(Some(2), b"", big.as_bytes())
        .unwrap_err();
    assert_eq!(t.read_log(&mut tail, 4, 100).unwrap(), b"");
    t.append_lines_after(Some(0), b"", b"zero\n").unwrap();
    assert_eq!(t.read_log(&mut tail, 4, 100).unwrap(), b"zero\n");
    t.append_lines_after(Some(2), b"", b"two\n").unwrap();
    assert_eq!(t.read_log(&mut tail, 9, 100).unwrap(), b"two\n");
    assert_eq!(cat_string(&t), "one\nzero\ntwo\n");
}

/// Partitions are only ever added, with Kafka's texts for the rest; a topic of one
/// partition keeps its stream when it gets more, and the new ones carry its id.
#[test]
fn partitions_are_added_never_removed() {
    let mut f = Fixture::new();
    let t = f.topic("grows");
    t.append_lines(b"one\ntwo\n").unwrap();
    let mut cursor = TopicCursor::default();
    assert_eq!(t.read_log(&mut cursor, 0, 4).unwrap(), b"one\n");
    t.add_partitions(3).unwrap();
    // The reader goes on where it was, then sees the records of every partition.
    t.append_lines(b"three\n").unwrap();
    t.append_lines(b"four\n").unwrap();
    assert_eq!(
        t.read_log(&mut cursor, 4, 100).unwrap(),
        b"two\nthree\nfour\n"
    );
    assert_eq!(cat_string(&t), "one\ntwo\nthree\nfour\n");
    assert_eq!(
        t.add_partitions(2).unwrap_err().to_string(),
        "The topic grows currently has 3 partition(s); 2 would not be an increase."
    );
    assert_eq!(
        t.add_partitions(3).unwrap_err().to_string(),
        "Topic already has 3 partition(s)."
    );
    let id = |p: u32| {
        fs::read_to_string(f.dir.path().join(format!("grows-{p}/partition.metadata"))).unwrap()
    };
    assert_eq!(id(0), id(2));
    f.reopen();
    let t = f.engine().topic("grows").unwrap();
    assert_eq!(t.partition_count(), 3);
    assert_eq!(cat_string(&t), "one\ntwo\nthree\nfour\n");
}

/// The broker-wide checkpoints list every partition, as Kafka's do.
#[test]
fn checkpoints_list_every_partition() {
    let mut f = Fixture::new();
    let t = f.engine().create_topic("listed", 3).unwrap();
    for i in 0..3 {
        t.append_lines(format!("r{i}\n").as_bytes()).unwrap();
    }
    t.partition(2).unwrap().delete_records_before(1).unwrap();
    f.reopen();
    let recovery =
        fs::read_to_string(f.dir.path().join("recovery-point-offset-checkpoint")).unwrap();
    assert_eq!(recovery, "0\n3\nlisted 0 1\nlisted 1 1\nlisted 2 1\n");
    let starts = fs::read_to_string(f.dir.path().join("log-start-offset-checkpoint")).unwrap();
    assert_eq!(starts, "0\n1\nlisted 2 1\n");
    let t = f.engine().topic("listed").unwrap();
    assert_eq!(t.partition(2).unwrap().log().log_start_offset(), 1);
    assert_eq!(cat_string(&t), "r0\nr1\n");
    f.engine().delete_topic("listed").unwrap();
    assert!(!f.dir.path().join("listed-1").exists());
    let starts = fs::read_to_string(f.dir.path().join("log-start-offset-checkpoint")).unwrap();
    assert_eq!(starts, "0\n0\n");
}
