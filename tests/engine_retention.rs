//! Retention through the engine with an injected clock: Kafka's order (log start, size,
//! time), the prefix rule, roll-then-delete of an expired active segment, `.deleted`
//! files removed after `file.delete.delay.ms`, and readers moved to the log start.

mod common;

use common::*;
use kpfs::engine::TopicCursor;

fn names(t: &kpfs::engine::Topic) -> Vec<String> {
    t.p0()
        .backing_files()
        .unwrap()
        .into_iter()
        .map(|f| f.name)
        .filter(|n| !n.starts_with("kpfs-"))
        .collect()
}

fn produce(t: &kpfs::engine::Topic, from: usize, n: usize) {
    for i in from..from + n {
        t.append_lines(format!("record-{i}\n").as_bytes()).unwrap();
    }
}

#[test]
fn seed_time_retention_demo() {
    let f = Fixture::new();
    let t = f.topic("retention-time-demo");
    set(&t, "retention.ms=5000\nsegment.ms=3000");
    produce(&t, 0, 5);
    f.advance(4000);
    produce(&t, 5, 5);
    assert_eq!(t.p0().segment_log_files().unwrap(), vec![0, 5]);
    f.advance(2000);
    // Segment 0's records are 6 s old, segment 5's only 2 s: only 0 goes.
    assert_eq!(f.engine().run_retention_once(), 1);
    f.advance(4000);
    // Now segment 5 (the non-empty active one) expired too: roll at 10, then delete it.
    assert_eq!(f.engine().run_retention_once(), 1);
    let files = names(&t);
    assert!(
        files.contains(&"00000000000000000005.log.deleted".to_string()),
        "{files:?}"
    );
    assert!(files.contains(&"00000000000000000010.log".to_string()));
    assert_eq!(t.p0().log().log_start_offset(), 10);
    assert_eq!(t.p0().log().log_end_offset(), 10);
    assert_eq!(cat_string(&t), "");
    // Removed after file.delete.delay.ms (default 60000).
    f.advance(59_999);
    f.engine().run_deletions_once();
    assert!(names(&t).iter().any(|n| n.ends_with(".deleted")));
    f.advance(1);
    f.engine().run_deletions_once();
    assert!(
        !names(&t).iter().any(|n| n.ends_with(".deleted")),
        "{:?}",
        names(&t)
    );
    // The empty active segment is never deleted.
    f.advance(1_000_000);
    assert_eq!(f.engine().run_retention_once(), 0);
    produce(&t, 10, 1);
    assert_eq!(cat_string(&t), "record-10\n");
}

#[test]
fn seed_size_retention_demo() {
    let f = Fixture::new();
    let t = f.topic("retention-size-demo");
    set(
        &t,
        "retention.ms=600000\nretention.bytes=300\nsegment.bytes=1048576\nsegment.ms=3000",
    );
    for batch in 0..4 {
        produce(&t, batch * 5, 5);
        f.advance(4000);
    }
    assert_eq!(t.p0().segment_log_files().unwrap(), vec![0, 5, 10, 15]);
    f.engine().run_retention_once();
    assert_eq!(t.p0().segment_log_files().unwrap(), vec![15]);
    assert_eq!(t.p0().log().log_start_offset(), 15);
    let deleted = names(&t).iter().filter(|n| n.ends_with(".deleted")).count();
    assert_eq!(
        deleted, 11,
        "segments 0, 5, 10 (.log, .index, .timeindex) and the snapshots of 5 and 10"
    );
    assert!(
        t.p0().log().size_bytes() > 300,
        "the partition may stay above retention.bytes by one segment"
    );
}

#[test]
fn size_retention_keeps_within_one_segment_of_the_limit() {
    let f = Fixture::new();
    let t = f.topic("size");
    set(&t, "internal.segment.bytes=400\nretention.bytes=1000");
    produce(&t, 0, 200);
    f.engine().run_retention_once();
    let size = t.p0().log().size_bytes();
    assert!(size <= 1000 + 400, "{size}");
    assert!(size >= 1000 - 400, "{size}");
    let text = cat_string(&t);
    assert!(text.ends_with("record-199\n"));
    let first: usize = text
        .lines()
        .next()
        .unwrap()
        .trim_start_matches("record-")
        .parse()
        .unwrap();
    assert_eq!(first as u64, t.p0().log().log_start_offset());
}

#[test]
fn retention_bytes_zero_deletes_every_non_empty_segment() {
    let f = Fixture::new();
    let t = f.topic("zero");
    set(&t, "internal.segment.bytes=400");
    produce(&t, 0, 30);
    set(&t, "retention.bytes=0");
    f.engine().run_retention_once();
    assert_eq!(t.p0().log().log_start_offset(), 30);
    assert_eq!(t.p0().log().snapshot().segments.len(), 1);
    assert!(t.p0().log().snapshot().active().is_empty());
}

#[test]
fn minus_one_disables_time_and_size() {
    let f = Fixture::new();
    let t = f.topic("forever");
    set(
        &t,
        "internal.segment.bytes=400\nretention.ms=-1\nretention.bytes=-1",
    );
    produce(&t, 0, 30);
    f.advance(365 * 86_400_000);
    assert_eq!(f.engine().run_retention_once(), 0);
    assert_eq!(t.p0().log().log_start_offset(), 0);
}

#[test]
fn compact_only_topics_are_untouched_by_time_and_size() {
    let f = Fixture::new();
    let t = f.topic("compacted");
    set(&t, "parse.key=true\nkey.separator=:\ninternal.segment.bytes=400\nretention.ms=1\nretention.bytes=1");
    produce_keyed(&t, 30);
    set(&t, "cleanup.policy=compact");
    f.advance(10_000);
    assert_eq!(
        f.engine().run_retention_once(),
        0,
        "the retention task skips compacted topics"
    );
    assert_eq!(
        f.engine().run_compacted_retention_once(),
        0,
        "compact-only gets log-start breach only"
    );
    set(&t, "cleanup.policy=compact,delete");
    assert!(
        f.engine().run_compacted_retention_once() > 0,
        "compact,delete gets time/size from the cleaner loop"
    );
}

fn produce_keyed(t: &kpfs::engine::Topic, n: usize) {
    for i in 0..n {
        t.append_lines(format!("k{}:v{i}\n", i % 5).as_bytes())
            .unwrap();
    }
}

#[test]
fn future_timestamps_block_time_retention() {
    let f = Fixture::new();
    let t = f.topic("future");
    set(&t, "segment.ms=1000\nretention.ms=1000");
    produce(&t, 0, 3);
    // The clock steps back: the first segment now holds a future timestamp.
    f.clock.set(T0 - 100_000);
    produce(&t, 3, 3);
    f.advance(50_000);
    assert_eq!(f.engine().run_retention_once(), 0);
    assert!(
        t.p0().status_text().contains("future_timestamp_segment: 0"),
        "{}",
        t.p0().status_text()
    );
}

#[test]
fn readers_below_the_new_log_start_continue_there() {
    let f = Fixture::new();
    let t = f.topic("readers");
    set(&t, "internal.segment.bytes=400\nretention.ms=1000");
    produce(&t, 0, 20);
    let mut cursor = TopicCursor::default();
    let first = t.read_log(&mut cursor, 0, 10).unwrap();
    assert_eq!(first, b"record-0\nr");
    f.advance(2000);
    produce(&t, 20, 1);
    f.engine().run_retention_once();
    let lso = t.p0().log().log_start_offset();
    assert!(lso > 0);
    let rest = t.read_log(&mut cursor, 10, 1 << 20).unwrap();
    let rest = String::from_utf8(rest).unwrap();
    // The reader first gets the rest of the record it had started (it already held that
    // batch), then continues at the log start.
    let (held, after) = rest.split_once('\n').unwrap();
    assert_eq!(held, "ecord-1");
    assert!(after.starts_with(&format!("record-{lso}\n")), "{rest}");
    assert!(t.p0().status_text().contains("reader_skips: 1"));
    // The stream size never shrinks.
    assert!(t.stream_len() >= 10 + rest.len() as u64);
}

#[test]
fn leftover_deleted_files_are_removed_at_open() {
    let mut f = Fixture::new();
    let t = f.topic("leftover");
    set(&t, "internal.segment.bytes=400\nretention.bytes=0");
    produce(&t, 0, 30);
    f.engine().run_retention_once();
    assert!(names(&t).iter().any(|n| n.ends_with(".deleted")));
    drop(t);
    f.reopen();
    let t = f.topic("leftover");
    assert!(!names(&t).iter().any(|n| n.ends_with(".deleted")));
    assert_eq!(t.p0().log().log_start_offset(), 30);
}

/// The scheduler flushes rolled segments without the writer lock, from a snapshot;
/// retention may meanwhile delete some of them and (with `file.delete.delay.ms=0`)
/// remove their files. Such a segment needs no flush: the log must not be poisoned.
#[test]
fn flushing_rolled_segments_survives_their_concurrent_removal() {
    use kpfs::engine::log::remove_files;
    use kpfs::engine::segment::RollReason;
    let f = Fixture::new();
    let t = f.topic("r");
    let config = t.config();
    for i in 0..300 {
        t.append_lines(format!("line-{i}\n").as_bytes()).unwrap();
        t.p0().log().roll(&config, RollReason::Size).unwrap();
    }
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
    let flusher = {
        let (t, barrier) = (t.clone(), barrier.clone());
        std::thread::spawn(move || {
            barrier.wait();
            t.p0().flush_rolled_segments().map_err(|e| e.to_string())
        })
    };
    barrier.wait();
    let last = t.p0().log().snapshot().segments[250].base_offset();
    for d in t.p0().log().delete_segments_through(last, &config).unwrap() {
        remove_files(&d.files).unwrap();
    }
    let flushed = flusher.join().unwrap();
    assert_eq!(flushed, Ok(()));
    assert_eq!(t.p0().log().poison_reason(), None);
    t.append_lines(b"after\n").unwrap();
}
