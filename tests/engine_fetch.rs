//! The read side Kafka clients use, through the engine API: Fetch (whole batches as file
//! ranges), ListOffsets, DeleteRecords and the wait of a long-poll fetch.

mod common;

use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use kpfs::engine::format::decode_batch;
use kpfs::engine::offset_map::OffsetMap;
use kpfs::engine::segment::RollReason;
use kpfs::engine::{EngineError, FetchOutcome, Isolation, OffsetQuery, OffsetRequest, Topic};

/// Every batch of a fetch, as (base offset, record offsets, values).
fn batches(outcome: &FetchOutcome) -> Vec<(u64, Vec<u64>, Vec<String>)> {
    let mut out = Vec::new();
    for range in &outcome.ranges {
        let mut bytes = vec![0; range.len as usize];
        range
            .file
            .read_exact_at(&mut bytes, range.position)
            .unwrap();
        let mut at = 0;
        while at < bytes.len() {
            let (h, records) = decode_batch(&bytes[at..]).unwrap();
            let offsets = records.iter().map(|r| r.offset).collect();
            let values = records
                .iter()
                .map(|r| String::from_utf8(r.value.clone().unwrap_or_default()).unwrap())
                .collect();
            out.push((h.base_offset, offsets, values));
            at += h.size;
        }
        assert_eq!(at, bytes.len(), "a range holds whole batches");
    }
    out
}

fn bases(outcome: &FetchOutcome) -> Vec<u64> {
    batches(outcome).iter().map(|b| b.0).collect()
}

/// The size of each batch of the topic, in offset order.
fn batch_sizes(t: &Topic) -> Vec<u64> {
    let all = t
        .p0()
        .fetch(t.p0().log().log_start_offset(), u64::MAX)
        .unwrap();
    let mut sizes = Vec::new();
    for range in &all.ranges {
        let mut bytes = vec![0; range.len as usize];
        range
            .file
            .read_exact_at(&mut bytes, range.position)
            .unwrap();
        let mut at = 0;
        while at < bytes.len() {
            let (h, _) = decode_batch(&bytes[at..]).unwrap();
            sizes.push(h.size as u64);
            at += h.size;
        }
    }
    sizes
}

fn roll(t: &Topic) {
    t.p0().log().roll(&t.config(), RollReason::Size).unwrap();
}

fn out_of_range(result: kpfs::engine::Result<FetchOutcome>) -> (u64, u64, u64, String) {
    match result {
        Err(
            e @ EngineError::OffsetOutOfRange {
                offset,
                log_start,
                log_end,
                request: OffsetRequest::Fetch,
                ..
            },
        ) => (offset, log_start, log_end, e.to_string()),
        other => panic!("expected OffsetOutOfRange, got {other:?}"),
    }
}

/// Three writes: batches [0, 1, 2], [3], [4, 5].
fn three_batches(f: &Fixture, name: &str) -> Arc<Topic> {
    let t = f.topic(name);
    t.append_lines(b"a\nb\nc\n").unwrap();
    t.append_lines(b"d\n").unwrap();
    t.append_lines(b"e\nf\n").unwrap();
    t
}

#[test]
fn a_fetch_starts_with_the_batch_holding_its_offset() {
    let f = Fixture::new();
    let t = three_batches(&f, "t");
    let all = t.p0().fetch(0, u64::MAX).unwrap();
    assert_eq!((all.high_watermark, all.log_start_offset), (6, 0));
    assert_eq!(
        batches(&all),
        vec![
            (0, vec![0, 1, 2], vec!["a".into(), "b".into(), "c".into()]),
            (3, vec![3], vec!["d".into()]),
            (4, vec![4, 5], vec!["e".into(), "f".into()]),
        ]
    );
    // From inside a batch: that whole batch; the client skips the records before.
    assert_eq!(bases(&t.p0().fetch(1, u64::MAX).unwrap()), vec![0, 3, 4]);
    assert_eq!(bases(&t.p0().fetch(2, u64::MAX).unwrap()), vec![0, 3, 4]);
    assert_eq!(bases(&t.p0().fetch(3, u64::MAX).unwrap()), vec![3, 4]);
    assert_eq!(bases(&t.p0().fetch(5, u64::MAX).unwrap()), vec![4]);
    // At the log end: nothing yet, no error.
    let end = t.p0().fetch(6, u64::MAX).unwrap();
    assert!(end.ranges.is_empty());
    assert_eq!(end.high_watermark, 6);
    // Past it: Kafka's OffsetOutOfRange.
    let (offset, start, log_end, text) = out_of_range(t.p0().fetch(7, u64::MAX));
    assert_eq!((offset, start, log_end), (7, 0, 6));
    assert_eq!(
        text,
        "Received request for offset 7 for partition t-0, but we only have log segments upto 6."
    );
}

#[test]
fn max_bytes_takes_whole_batches_and_at_least_one() {
    let f = Fixture::new();
    let t = three_batches(&f, "t");
    let sizes = batch_sizes(&t);
    assert_eq!(sizes.len(), 3);
    // Smaller than the first batch: that batch anyway (Kafka's minOneMessage).
    let one = t.p0().fetch(0, 1).unwrap();
    assert_eq!(bases(&one), vec![0]);
    assert_eq!(one.bytes(), sizes[0]);
    assert_eq!(bases(&t.p0().fetch(0, 0).unwrap()), vec![0]);
    // Exactly two batches, and one byte less.
    assert_eq!(
        bases(&t.p0().fetch(0, sizes[0] + sizes[1]).unwrap()),
        vec![0, 3]
    );
    assert_eq!(
        bases(&t.p0().fetch(0, sizes[0] + sizes[1] - 1).unwrap()),
        vec![0]
    );
    // Never a partial batch: the bytes are whole batches up to the limit.
    let limited = t.p0().fetch(0, sizes[0] + sizes[1] + sizes[2] - 1).unwrap();
    assert_eq!(limited.bytes(), sizes[0] + sizes[1]);
}

#[test]
fn a_fetch_goes_on_into_later_segments_up_to_max_bytes() {
    let f = Fixture::new();
    let t = f.topic("t");
    for i in 0..4 {
        t.append_lines(format!("first-{i}\nsecond-{i}\n").as_bytes())
            .unwrap();
        roll(&t);
    }
    t.append_lines(b"active\n").unwrap();
    assert_eq!(t.p0().log().snapshot().segments.len(), 5);
    let all = t.p0().fetch(0, u64::MAX).unwrap();
    assert_eq!(all.ranges.len(), 5, "one range per segment");
    assert_eq!(bases(&all), vec![0, 2, 4, 6, 8]);
    // From inside the third segment's batch.
    assert_eq!(bases(&t.p0().fetch(5, u64::MAX).unwrap()), vec![4, 6, 8]);
    // The limit counts across segments.
    let size = batch_sizes(&t)[0];
    let two = t.p0().fetch(2, 2 * size).unwrap();
    assert_eq!((bases(&two), two.ranges.len()), (vec![2, 4], 2));
    let (_, _, _, text) = out_of_range(t.p0().fetch(10, 1));
    assert!(text.ends_with("upto 9."), "{text}");
}

#[test]
fn after_retention_an_old_offset_is_out_of_range_and_its_ranges_stay_readable() {
    let f = Fixture::new();
    let t = f.topic("t");
    set(&t, "file.delete.delay.ms=0\nretention.ms=1000");
    t.append_lines(b"old-0\nold-1\n").unwrap();
    roll(&t);
    f.advance(500);
    t.append_lines(b"new-2\n").unwrap();
    // A fetch in flight: its ranges were opened before retention removes the segment.
    let in_flight = t.p0().fetch(0, u64::MAX).unwrap();
    f.advance(1_000);
    assert_eq!(f.engine().run_retention_once(), 1);
    f.engine().run_deletions_once();
    assert!(
        !t.p0().segment_log_files().unwrap().contains(&0),
        "the file is gone"
    );
    assert_eq!(
        batches(&in_flight),
        vec![
            (0, vec![0, 1], vec!["old-0".into(), "old-1".into()]),
            (2, vec![2], vec!["new-2".into()])
        ],
        "an open range keeps the removed file's bytes"
    );
    let (offset, start, end, text) = out_of_range(t.p0().fetch(1, u64::MAX));
    assert_eq!((offset, start, end), (1, 2, 3));
    assert_eq!(
        text,
        "Received request for offset 1 for partition t-0, but we only have log segments starting from offset: 2."
    );
    // auto.offset.reset=earliest is the client's: it asks ListOffsets and fetches there.
    let (earliest, _) = t
        .p0()
        .list_offset(OffsetQuery::Earliest, Isolation::ReadUncommitted)
        .unwrap()
        .unwrap();
    assert_eq!(bases(&t.p0().fetch(earliest, u64::MAX).unwrap()), vec![2]);
}

#[test]
fn a_compacted_topic_fetches_what_the_cleaner_left() {
    let f = Fixture::new();
    let t = f.topic("c");
    set(
        &t,
        "cleanup.policy=compact\nmin.cleanable.dirty.ratio=0.01\nparse.key=true\nkey.separator=:",
    );
    for round in 0..3 {
        for key in ["a", "b"] {
            t.append_lines(format!("{key}:{key}{round}\n").as_bytes())
                .unwrap();
        }
    }
    roll(&t);
    t.append_lines(b"c:c0\n").unwrap();
    let mut map = OffsetMap::new(1 << 20, 0.9);
    assert!(f.engine().run_cleaner_once_with(&mut map).is_some());
    let values: Vec<String> = batches(&t.p0().fetch(0, u64::MAX).unwrap())
        .into_iter()
        .flat_map(|b| b.2)
        .collect();
    assert_eq!(values, vec!["a2", "b2", "c0"]);
    // An offset the cleaner removed: the fetch starts at the next batch that remains.
    let from_gap = batches(&t.p0().fetch(1, u64::MAX).unwrap());
    assert_eq!(from_gap[0].1, vec![4]);
    assert_eq!(t.p0().fetch(0, u64::MAX).unwrap().high_watermark, 7);
}

#[test]
fn list_offsets_answers_every_query() {
    let f = Fixture::new();
    let t = f.topic("t");
    // Batches at T0+1000 (offsets 0-1), T0+2000 (2), then a new segment at T0+3000 (3-4).
    f.advance(1_000);
    t.append_lines(b"a\nb\n").unwrap();
    f.advance(1_000);
    t.append_lines(b"c\n").unwrap();
    roll(&t);
    f.advance(1_000);
    t.append_lines(b"d\ne\n").unwrap();
    let q = |query| {
        t.p0()
            .list_offset(query, Isolation::ReadUncommitted)
            .unwrap()
    };
    assert_eq!(q(OffsetQuery::Earliest), Some((0, -1)));
    assert_eq!(q(OffsetQuery::EarliestLocal), Some((0, -1)));
    assert_eq!(q(OffsetQuery::Latest), Some((5, -1)));
    assert_eq!(q(OffsetQuery::LatestTiered), None);
    // The first record carrying the largest timestamp.
    assert_eq!(q(OffsetQuery::MaxTimestamp), Some((3, T0 + 3_000)));
    // By timestamp: the first record at or after it.
    assert_eq!(q(OffsetQuery::Timestamp(0)), Some((0, T0 + 1_000)));
    assert_eq!(q(OffsetQuery::Timestamp(T0 + 1_000)), Some((0, T0 + 1_000)));
    assert_eq!(q(OffsetQuery::Timestamp(T0 + 1_500)), Some((2, T0 + 2_000)));
    assert_eq!(q(OffsetQuery::Timestamp(T0 + 2_001)), Some((3, T0 + 3_000)));
    assert_eq!(q(OffsetQuery::Timestamp(T0 + 3_001)), None);
    assert_eq!(
        OffsetQuery::from_request_timestamp(-3),
        OffsetQuery::MaxTimestamp
    );
    assert_eq!(
        OffsetQuery::from_request_timestamp(42),
        OffsetQuery::Timestamp(42)
    );
    // An empty topic: earliest and latest 0, nothing by time or max timestamp.
    let e = f.topic("empty");
    assert_eq!(
        e.p0()
            .list_offset(OffsetQuery::Latest, Isolation::ReadUncommitted)
            .unwrap(),
        Some((0, -1))
    );
    assert_eq!(
        e.p0()
            .list_offset(OffsetQuery::MaxTimestamp, Isolation::ReadUncommitted)
            .unwrap(),
        None
    );
}

#[test]
fn a_timestamp_search_uses_the_time_index_of_a_large_segment() {
    let f = Fixture::new();
    let t = f.topic("t");
    set(&t, "index.interval.bytes=100");
    for i in 0..300u64 {
        f.advance(10);
        t.append_lines(format!("record-{i}\n").as_bytes()).unwrap();
    }
    roll(&t);
    let entries = t.p0().log().snapshot().segments[0]
        .time_index_entries()
        .unwrap();
    assert!(entries.len() > 10, "the segment has a time index");
    for i in [0u64, 1, 57, 150, 299] {
        let ts = T0 + 10 * (i as i64 + 1);
        assert_eq!(
            t.p0()
                .list_offset(OffsetQuery::Timestamp(ts), Isolation::ReadUncommitted)
                .unwrap(),
            Some((i, ts))
        );
        assert_eq!(
            t.p0()
                .list_offset(OffsetQuery::Timestamp(ts - 5), Isolation::ReadUncommitted)
                .unwrap(),
            Some((i, ts))
        );
    }
    assert_eq!(
        t.p0()
            .list_offset(OffsetQuery::MaxTimestamp, Isolation::ReadUncommitted)
            .unwrap(),
        Some((299, T0 + 3_000))
    );
}

#[test]
fn delete_records_moves_the_log_start_for_readers_retention_and_reopens() {
    let mut f = Fixture::new();
    let t = f.topic("t");
    t.append_lines(b"r0\nr1\n").unwrap();
    roll(&t);
    t.append_lines(b"r2\nr3\n").unwrap();
    roll(&t);
    t.append_lines(b"r4\n").unwrap();
    let stream_len = t.stream_len();
    assert_eq!(t.p0().delete_records_before(3).unwrap(), 3);
    assert_eq!(cat_string(&t), "r3\nr4\n");
    assert_eq!(t.stream_len(), stream_len, "the log file never shrinks");
    assert_eq!(
        t.p0()
            .list_offset(OffsetQuery::Earliest, Isolation::ReadUncommitted)
            .unwrap(),
        Some((3, -1))
    );
    let (_, start, _, _) = out_of_range(t.p0().fetch(2, u64::MAX));
    assert_eq!(start, 3);
    // A fetch at the new start gets the batch holding it, which begins below it.
    assert_eq!(bases(&t.p0().fetch(3, u64::MAX).unwrap()), vec![2, 4]);
    // Never back, and never past the high watermark.
    assert_eq!(t.p0().delete_records_before(1).unwrap(), 3);
    let err = t.p0().delete_records_before(6).unwrap_err();
    assert!(matches!(
        err,
        EngineError::OffsetOutOfRange {
            request: OffsetRequest::DeleteRecords,
            ..
        }
    ));
    assert_eq!(
        err.to_string(),
        "Cannot increment the log start offset to 6 of partition t-0 since it is larger than the high watermark 5"
    );
    let checkpoint = std::fs::read_to_string(f.dir.path().join("log-start-offset-checkpoint"));
    assert_eq!(checkpoint.unwrap(), "0\n1\nt 0 3\n");
    // Kept across a clean and an unclean reopen.
    f.reopen();
    let t = f.topic("t");
    assert_eq!(t.p0().log().log_start_offset(), 3);
    assert_eq!(cat_string(&t), "r3\nr4\n");
    f.crash_and_reopen();
    let t = f.topic("t");
    assert_eq!(t.p0().log().log_start_offset(), 3);
    // Retention's log-start rule deletes the segment wholly below it, not the one it is in.
    assert_eq!(f.engine().run_retention_once(), 1);
    let bases_left: Vec<u64> = t
        .p0()
        .log()
        .snapshot()
        .segments
        .iter()
        .map(|s| s.base_offset())
        .collect();
    assert_eq!(bases_left, vec![2, 4]);
    assert_eq!(cat_string(&t), "r3\nr4\n");
    // Up to the log end: every record goes; the log end stays.
    assert_eq!(t.p0().delete_records_before(5).unwrap(), 5);
    assert_eq!(cat_string(&t), "");
    assert!(t.p0().fetch(5, u64::MAX).unwrap().ranges.is_empty());
    assert_eq!(
        t.p0()
            .list_offset(OffsetQuery::Latest, Isolation::ReadUncommitted)
            .unwrap(),
        Some((5, -1))
    );
}

#[test]
fn a_deleted_topic_takes_its_log_start_along() {
    let mut f = Fixture::new();
    let t = f.topic("t");
    t.append_lines(b"a\nb\n").unwrap();
    t.p0().delete_records_before(1).unwrap();
    drop(t);
    f.engine().delete_topic("t").unwrap();
    let t = f.topic("t");
    t.append_lines(b"c\n").unwrap();
    assert_eq!(t.p0().log().log_start_offset(), 0);
    f.reopen();
    assert_eq!(f.topic("t").p0().log().log_start_offset(), 0);
    assert_eq!(cat_string(&f.topic("t")), "c\n");
}

#[test]
fn delete_records_is_refused_without_delete_in_the_policy() {
    let f = Fixture::new();
    let t = f.topic("c");
    set(&t, "cleanup.policy=compact\nparse.key=true");
    t.append_lines(b"k\tv\n").unwrap();
    let err = t.p0().delete_records_before(1).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Records of partition c-0 can not be deleted due to the configured policy"
    );
    assert_eq!(t.p0().log().log_start_offset(), 0);
    set(&t, "cleanup.policy=compact,delete");
    assert_eq!(t.p0().delete_records_before(1).unwrap(), 1);
}

#[test]
fn an_append_wakes_a_waiting_fetch_before_its_deadline() {
    let f = Fixture::new();
    let t = f.topic("t");
    let other = f.topic("other");
    let watch = f.engine().append_watch();
    let seen = t.append_generation();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            #[allow(clippy::disallowed_methods)] // a real deadline: the wait is real
            let deadline = Instant::now() + Duration::from_secs(60);
            let ready = watch.wait_until(&[&other, &t], deadline, || {
                t.p0().fetch(0, u64::MAX).unwrap().bytes() > 0
            });
            #[allow(clippy::disallowed_methods)] // how long before the deadline it woke
            let left = deadline.saturating_duration_since(Instant::now());
            (ready, left)
        });
        // Appends to another topic do not satisfy it; one to `t` does, whenever it
        // comes (before or after the waiter registered).
        other.append_lines(b"elsewhere\n").unwrap();
        t.append_lines(b"arrived\n").unwrap();
        let (ready, left) = waiter.join().unwrap();
        assert!(ready);
        assert!(
            left > Duration::from_secs(50),
            "woken by the append, not the deadline"
        );
    });
    assert!(t.append_generation() > seen);
}

#[test]
fn a_wait_without_appends_ends_at_its_deadline() {
    let f = Fixture::new();
    let t = f.topic("t");
    t.append_lines(b"before\n").unwrap();
    let watch = f.engine().append_watch();
    let seen = t.append_generation();
    #[allow(clippy::disallowed_methods)] // a real deadline: the wait is real
    let start = Instant::now();
    let deadline = start + Duration::from_millis(100);
    let ready = watch.wait_until(&[&t], deadline, || t.append_generation() != seen);
    assert!(!ready);
    #[allow(clippy::disallowed_methods)] // the wait lasted until the deadline
    let waited = start.elapsed();
    assert!(waited >= Duration::from_millis(100), "{waited:?}");
    // The watch is reusable: a condition already true returns at once.
    let ready = watch.wait_until(&[&t], deadline, || true);
    assert!(ready);
}
