//! The cleaner through the engine with an injected clock: the seed's compaction demo
//! with its exact offsets, tombstone horizons over several passes, partial passes with a
//! tiny offset map, keyless records, emptied batches, and the cleaner threads following
//! their configuration.

mod common;

use std::sync::Arc;

use common::*;
use kpfs::engine::format::decode_batch;
use kpfs::engine::offset_map::OffsetMap;
use kpfs::engine::{BrokerConfig, Engine, EngineOptions, ManualClock, Topic};

fn small_map() -> OffsetMap {
    OffsetMap::new(1 << 20, 0.9)
}

/// (offset, key, value) of one record.
type Row = (u64, String, Option<String>);

/// Every record in every live segment, by segment base.
fn dump(t: &Topic) -> Vec<(u64, Vec<Row>)> {
    let snap = t.p0().log().snapshot();
    snap.segments
        .iter()
        .map(|s| {
            let bytes = s.read_at(0, s.size() as usize).unwrap();
            let mut at = 0;
            let mut recs = Vec::new();
            while at < bytes.len() {
                let (h, rs) = decode_batch(&bytes[at..]).unwrap();
                for r in rs {
                    recs.push((
                        r.offset,
                        String::from_utf8(r.key.unwrap_or_default()).unwrap(),
                        r.value.map(|v| String::from_utf8(v).unwrap()),
                    ));
                }
                at += h.size;
            }
            (s.base_offset(), recs)
        })
        .collect()
}

fn round(t: &Topic, n: u32) {
    for k in ["a", "b", "c"] {
        t.append_lines(format!("{k}:round{n}-value-for-{k}\n").as_bytes())
            .unwrap();
    }
}

fn compact_demo_topic(f: &Fixture) -> std::sync::Arc<Topic> {
    let t = f.topic("compact-demo");
    set(
        &t,
        "cleanup.policy=compact\nsegment.bytes=1048576\nsegment.ms=3000\nmin.cleanable.dirty.ratio=0.01\n\
         delete.retention.ms=3000\nparse.key=true\nkey.separator=:\nnull.marker=NULL",
    );
    t
}

#[test]
fn seed_compaction_demo_exact_offsets() {
    let f = Fixture::new();
    let t = compact_demo_topic(&f);
    let mut map = small_map();
    round(&t, 1);
    f.advance(4000);
    round(&t, 2);
    f.engine().run_cleaner_once_with(&mut map);
    f.advance(4000);
    t.append_lines(b"a:NULL\n").unwrap();
    f.engine().run_cleaner_once_with(&mut map);
    f.advance(4000);
    round(&t, 3);
    f.engine().run_cleaner_once_with(&mut map);
    let segs = dump(&t);
    assert_eq!(segs.len(), 2, "{segs:?}");
    assert_eq!(segs[0].0, 0);
    assert_eq!(
        segs[0].1,
        vec![
            (4, "b".into(), Some("round2-value-for-b".into())),
            (5, "c".into(), Some("round2-value-for-c".into())),
            (6, "a".into(), None),
        ]
    );
    assert_eq!(segs[1].0, 7);
    assert_eq!(
        segs[1].1.iter().map(|r| r.0).collect::<Vec<_>>(),
        vec![7, 8, 9]
    );
    assert_eq!(
        cat_string(&t),
        "b:round2-value-for-b\nc:round2-value-for-c\na:NULL\na:round3-value-for-a\nb:round3-value-for-b\nc:round3-value-for-c\n"
    );
    // A further round: the round-2 values and the superseded tombstone go.
    f.advance(4000);
    round(&t, 4);
    f.engine().run_cleaner_once_with(&mut map);
    let segs = dump(&t);
    assert_eq!(
        segs[0].1.iter().map(|r| r.0).collect::<Vec<_>>(),
        vec![7, 8, 9]
    );
    assert_eq!(segs[1].0, 10);
    assert_eq!(t.p0().log().log_end_offset(), 13);
    assert_eq!(
        t.p0().log().log_start_offset(),
        0,
        "compaction never moves the log start"
    );
}

#[test]
fn tombstone_lives_delete_retention_ms_after_the_first_pass_then_goes() {
    let f = Fixture::new();
    let t = compact_demo_topic(&f);
    set(&t, "delete.retention.ms=10000");
    let mut map = small_map();
    t.append_lines(b"d:1\nd:NULL\n").unwrap();
    f.advance(4000);
    t.append_lines(b"e:1\n").unwrap();
    // Pass 1 retains the tombstone and stamps its horizon (now + 10 s).
    assert!(f.engine().run_cleaner_once_with(&mut map).is_some());
    assert_eq!(dump(&t)[0].1, vec![(1, "d".into(), None)]);
    f.advance(4000);
    t.append_lines(b"f:1\n").unwrap();
    // Pass 2, before the horizon: still there.
    assert!(f.engine().run_cleaner_once_with(&mut map).is_some());
    assert!(dump(&t)[0].1.contains(&(1, "d".into(), None)));
    f.advance(7000);
    t.append_lines(b"g:1\n").unwrap();
    // Pass 3, past the horizon: gone; the other keys stay.
    let (_, stats) = f.engine().run_cleaner_once_with(&mut map).unwrap();
    assert_eq!(stats.tombstones_removed, 1);
    let all: Vec<_> = dump(&t).into_iter().flat_map(|s| s.1).collect();
    assert!(!all.iter().any(|r| r.1 == "d"), "{all:?}");
    assert!(all.iter().any(|r| r.1 == "e"));
}

#[test]
fn selection_needs_a_ratio_strictly_above_the_threshold() {
    let f = Fixture::new();
    let t = f.topic("ratio");
    set(
        &t,
        "cleanup.policy=compact\nparse.key=true\nkey.separator=:\ninternal.segment.bytes=400",
    );
    let mut map = small_map();
    for i in 0..20 {
        t.append_lines(format!("k{}:v{i:03}\n", i % 3).as_bytes())
            .unwrap();
    }
    // Everything but the active segment is dirty: ratio 1.0 > 0.5.
    assert!(f.engine().run_cleaner_once_with(&mut map).is_some());
    // Now nothing new is dirty: ratio 0.
    assert!(f.engine().run_cleaner_once_with(&mut map).is_none());
    set(&t, "min.cleanable.dirty.ratio=1");
    for i in 0..20 {
        t.append_lines(format!("k{}:w{i:03}\n", i % 3).as_bytes())
            .unwrap();
    }
    assert!(
        f.engine().run_cleaner_once_with(&mut map).is_none(),
        "a ratio can never exceed 1.0"
    );
    set(&t, "max.compaction.lag.ms=1");
    f.advance(10);
    assert!(
        f.engine().run_cleaner_once_with(&mut map).is_some(),
        "max.compaction.lag.ms forces it"
    );
}

#[test]
fn min_compaction_lag_holds_young_segments_back() {
    let f = Fixture::new();
    let t = f.topic("minlag");
    set(&t, "cleanup.policy=compact\nparse.key=true\nkey.separator=:\ninternal.segment.bytes=400\nmin.compaction.lag.ms=60000");
    let mut map = small_map();
    for i in 0..20 {
        t.append_lines(format!("k:v{i:03}\n").as_bytes()).unwrap();
    }
    assert!(f.engine().run_cleaner_once_with(&mut map).is_none());
    f.advance(60_001);
    t.append_lines(b"k:last\n").unwrap();
    assert!(f.engine().run_cleaner_once_with(&mut map).is_some());
}

#[test]
fn partial_passes_with_a_tiny_map_converge() {
    let f = Fixture::new();
    let t = f.topic("partial");
    set(&t, "cleanup.policy=compact\nparse.key=true\nkey.separator=:\ninternal.segment.bytes=600\nmin.cleanable.dirty.ratio=0");
    for i in 0..300 {
        t.append_lines(format!("key{}:value{i}\n", i % 40).as_bytes())
            .unwrap();
    }
    // Room for 10 keys per pass.
    let mut map = OffsetMap::new(24 * 12, 0.9);
    let mut passes = 0;
    while let Some((_, stats)) = f.engine().run_cleaner_once_with(&mut map) {
        passes += 1;
        assert!(passes < 100);
        if stats.partial {
            assert!(stats.end_offset < t.p0().log().snapshot().active().base_offset());
        }
    }
    assert!(passes > 1, "a small map makes several passes");
    let text = cat_string(&t);
    let active_base = t.p0().log().snapshot().active().base_offset();
    // Every key's latest value is present and in order.
    for k in 0..40 {
        let latest = (0..300).rev().find(|i| i % 40 == k).unwrap();
        assert!(text.contains(&format!("key{k}:value{latest}\n")), "key{k}");
    }
    // Below the active segment each key appears at most once.
    let cleaned: Vec<_> = dump(&t)
        .into_iter()
        .filter(|s| s.0 < active_base)
        .flat_map(|s| s.1)
        .collect();
    let mut keys: Vec<_> = cleaned.iter().map(|r| r.1.clone()).collect();
    let n = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), n, "duplicates left below the active segment");
}

#[test]
fn keyless_records_written_before_compaction_are_removed() {
    let f = Fixture::new();
    let t = f.topic("keyless");
    set(&t, "internal.segment.bytes=400");
    for i in 0..10 {
        t.append_lines(format!("plain{i}\n").as_bytes()).unwrap();
    }
    set(&t, "parse.key=true\nkey.separator=:");
    for i in 0..10 {
        t.append_lines(format!("k:{i}\n").as_bytes()).unwrap();
    }
    set(&t, "cleanup.policy=compact");
    let err = t.append_lines(b"no key here\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "No key separator found on line number 1: 'no key here'"
    );
    set(&t, "parse.key=false");
    let err = t.append_lines(b"plain\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "Compacted topic cannot accept message without key in topic partition keyless-0"
    );
    set(&t, "parse.key=true");
    let mut map = small_map();
    f.engine().run_cleaner_once_with(&mut map).unwrap();
    let active_base = t.p0().log().snapshot().active().base_offset();
    let cleaned: Vec<_> = dump(&t)
        .into_iter()
        .filter(|s| s.0 < active_base)
        .flat_map(|s| s.1)
        .collect();
    assert!(cleaned.iter().all(|r| !r.1.is_empty()), "{cleaned:?}");
}

#[test]
fn cleaned_segments_keep_offsets_order_and_stream_size() {
    let mut f = Fixture::new();
    let t = f.topic("order");
    set(
        &t,
        "cleanup.policy=compact\nparse.key=true\nkey.separator=:\ninternal.segment.bytes=500",
    );
    for i in 0..200 {
        t.append_lines(format!("k{}:{i}\n", (i * 7) % 13).as_bytes())
            .unwrap();
    }
    let size_before = t.stream_len();
    let mut map = small_map();
    f.engine().run_cleaner_once_with(&mut map).unwrap();
    assert_eq!(t.stream_len(), size_before, "the log size never shrinks");
    let offsets: Vec<u64> = dump(&t)
        .into_iter()
        .flat_map(|s| s.1)
        .map(|r| r.0)
        .collect();
    assert!(offsets.windows(2).all(|w| w[0] < w[1]));
    let text = cat_string(&t);
    drop(t);
    f.reopen();
    let t = f.topic("order");
    assert_eq!(cat_string(&t), text);
    assert_eq!(t.stream_len(), size_before);
    assert_eq!(t.p0().log().log_end_offset(), 200);
}

/// The case: 16 keyless lines in segments 0, 5, 10 and 15, then `compact`. Kafka
/// keeps an emptied batch only where the cleaning round ends (`RETAIN_EMPTY` when the
/// batch's next offset is the first uncleanable offset), so segments 0 and 5 are cleaned
/// down to nothing and segment 10 keeps one empty batch for offset 14. The stream end,
/// the log end and the data survive a crash and a clean reopen.
#[test]
fn emptied_batches_are_kept_only_where_the_cleaning_round_ends() {
    let mut f = Fixture::new();
    let t = f.topic("empty");
    set(&t, "internal.segment.bytes=410");
    let mut text = String::new();
    for i in 1..=16 {
        let line = format!("line-{i:02}\n");
        t.append_lines(line.as_bytes()).unwrap();
        text.push_str(&line);
    }
    let bases = |t: &Topic| -> Vec<u64> {
        let snap = t.p0().log().snapshot();
        snap.segments.iter().map(|s| s.base_offset()).collect()
    };
    assert_eq!(bases(&t), [0, 5, 10, 15]);
    set(&t, "cleanup.policy=compact\nmin.cleanable.dirty.ratio=0.01");
    let (_, stats) = f.engine().run_cleaner_once_with(&mut small_map()).unwrap();
    assert_eq!((stats.first_dirty_offset, stats.end_offset), (0, 15));
    let check = |t: &Topic, when: &str| {
        assert_eq!(bases(t), [0, 5, 10, 15], "{when}");
        let snap = t.p0().log().snapshot();
        let sizes: Vec<u64> = snap.segments.iter().map(|s| s.size()).collect();
        assert_eq!(&sizes[..2], [0, 0], "{when}: segments 0 and 5 hold nothing");
        let kept = snap.segments[2].read_at(0, sizes[2] as usize).unwrap();
        let h = kpfs::engine::format::decode_header(&kept).unwrap();
        assert_eq!(h.size as u64, sizes[2], "{when}: one batch in segment 10");
        assert_eq!(
            (h.base_offset, h.last_offset(), h.record_count),
            (14, 14, 0),
            "{when}"
        );
        assert_eq!(t.p0().log().log_end_offset(), 16, "{when}");
        assert_eq!(t.stream_len(), text.len() as u64, "{when}");
        assert_eq!(cat_string(t), "line-16\n", "{when}");
    };
    check(&t, "after the pass");
    drop(t);
    // Nothing below the gaps is cut as a lost tail: the pass checkpointed the recovery
    // point past them before swapping.
    f.crash_and_reopen();
    check(&f.topic("empty"), "after a crash");
    f.reopen();
    let t = f.topic("empty");
    check(&t, "after a clean reopen");
    set(&t, "cleanup.policy=delete");
    t.append_lines(b"line-17\n").unwrap();
    assert_eq!(t.p0().log().log_end_offset(), 17);
    assert_eq!(cat_string(&t), "line-16\nline-17\n");
    assert_eq!(t.stream_len(), (text.len() + 8) as u64);
}

/// An engine running its background threads, the cleaner's backoff cut to 20 ms.
fn engine_with_threads(
    dir: &std::path::Path,
    clock: &Arc<ManualClock>,
    broker: &[(&str, &str)],
) -> Engine {
    let mut overrides = vec![("log.cleaner.backoff.ms".to_string(), "20".to_string())];
    overrides.extend(broker.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    Engine::open(
        dir,
        BrokerConfig::load(None, &overrides).unwrap(),
        clock.clone(),
        EngineOptions {
            background_threads: true,
            transaction_version: None,
        },
    )
    .unwrap()
}

/// Polls `done` every 10 ms for up to 20 s.
#[allow(
    clippy::disallowed_methods,
    reason = "the cleaner threads run in real time: polled against a deadline"
)]
fn wait_for(what: &str, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "gave up waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// The `[first, end)` ranges of the passes in a topic's events, oldest first.
fn pass_ranges(t: &Topic) -> Vec<String> {
    t.events_text()
        .lines()
        .filter_map(|l| l.split(" clean offsets ").nth(1))
        .map(|rest| rest[..rest.find(')').unwrap() + 1].to_string())
        .collect()
}

/// Kafka's `LogCleaner.reconfigure`: cleaner configs written to `.kpfs/config` apply at
/// once. `log.cleaner.threads` changes the running threads, and a new dedupe buffer
/// size and load factor give the threads a new offset map: here one that holds a single
/// key, so keys 0,1,0,1,0 take five one-key passes (before, one pass [0, 5) until a
/// remount).
#[test]
fn cleaner_configs_apply_at_once_with_new_threads_and_map() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let engine = engine_with_threads(dir.path(), &clock, &[]);
    assert_eq!(engine.cleaner_thread_count(), 1);
    engine
        .update_broker_config(b"log.cleaner.threads=2")
        .unwrap();
    assert_eq!(engine.cleaner_thread_count(), 2);
    // 1048577 bytes make 43,690 slots of 24 bytes; at a load factor of 0.00004, 1 key.
    engine
        .update_broker_config(
            b"log.cleaner.threads=1\nlog.cleaner.dedupe.buffer.size=1048577\n\
              log.cleaner.io.buffer.load.factor=0.00004",
        )
        .unwrap();
    assert_eq!(engine.cleaner_thread_count(), 1);
    let t = engine.create_topic("keys", 1).unwrap();
    set(
        &t,
        "cleanup.policy=compact\nparse.key=true\nkey.separator=:\n\
         min.cleanable.dirty.ratio=0.01\nsegment.ms=1000",
    );
    t.append_lines(b"0:a\n1:b\n0:c\n1:d\n0:e\n").unwrap();
    clock.advance(2000);
    t.append_lines(b"2:f\n").unwrap();
    wait_for("the cleaner to reach offset 5", || {
        t.p0().cleaner.checkpoint() == Some(5)
    });
    assert_eq!(
        pass_ranges(&t),
        ["[0, 1)", "[1, 2)", "[2, 3)", "[3, 4)", "[4, 5)"]
    );
}

/// A restart of the cleaner threads does not wait for a pass in progress: the pass stops
/// at its next read (Kafka's `checkDone`), even in a throttle sleep, its `.cleaned`
/// files are removed, and the new threads clean the topic with the new settings.
#[allow(
    clippy::disallowed_methods,
    reason = "the throttler sleeps in real time, which is what this test measures"
)]
#[test]
fn a_reconfiguration_stops_a_pass_in_progress() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    // 1 KB/s: the first read of a 20 KB segment then sleeps about 20 s.
    let engine = engine_with_threads(
        dir.path(),
        &clock,
        &[("log.cleaner.io.max.bytes.per.second", "1000")],
    );
    let t = engine.create_topic("slow", 1).unwrap();
    set(
        &t,
        "parse.key=true\nkey.separator=:\ninternal.segment.bytes=20000",
    );
    let mut lines = String::new();
    for i in 0..4000 {
        lines.push_str(&format!("k{}:{i:040}\n", i % 100));
    }
    t.append_lines(lines.as_bytes()).unwrap();
    // The throttler measures windows of at least 300 ms from its creation: past the
    // first one, the pass's first read is over the rate at once.
    std::thread::sleep(std::time::Duration::from_millis(400));
    set(&t, "cleanup.policy=compact\nmin.cleanable.dirty.ratio=0.01");
    wait_for("a pass to start", || {
        t.p0().cleaner.state() == kpfs::engine::cleaner_manager::CleanerState::Cleaning
    });
    let started = std::time::Instant::now();
    engine
        .update_broker_config(b"log.cleaner.io.max.bytes.per.second=1.0E9")
        .unwrap();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(2),
        "the restart waited {:?} for the throttled pass",
        started.elapsed()
    );
    let end = t.p0().log().snapshot().active().base_offset();
    wait_for("the new threads to clean the topic", || {
        t.p0().cleaner.checkpoint() == Some(end)
    });
    let leftovers: Vec<String> = std::fs::read_dir(t.p0().dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".cleaned") || n.contains(".swap"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // Below the active segment, only each key's latest value is left.
    let cleaned = dump(&t)
        .into_iter()
        .filter(|(base, _)| *base < end)
        .flat_map(|(_, rows)| rows)
        .count();
    assert!(cleaned <= 100, "{cleaned} records left below offset {end}");
    let last: String = lines.lines().skip(3900).map(|l| format!("{l}\n")).collect();
    assert!(cat_string(&t).ends_with(&last));
}

/// Kafka's `forceUpdateCheckpoint`: a checkpointed first dirty offset past the log end
/// is replaced by the log start, in the file too, at the cleaner's next look at the
/// topic, even when the topic is not due for cleaning. `kpfs check` is then healthy.
#[test]
fn an_invalid_cleaner_checkpoint_is_rewritten_to_the_log_start() {
    let mut f = Fixture::new();
    let t = f.topic("c");
    set(
        &t,
        "cleanup.policy=compact\nparse.key=true\nkey.separator=:",
    );
    t.append_lines(b"a:1\nb:2\na:3\n").unwrap();
    drop(t);
    f.reopen();
    let path = f.dir.path().join(kpfs::engine::CLEANER_CHECKPOINT_FILE);
    std::fs::write(&path, "0\n1\nc 0 200\n").unwrap();
    f.crash_and_reopen();
    let unhealthy = kpfs::engine::inspect::check_data_dir(f.dir.path());
    assert!(
        !unhealthy.is_healthy(),
        "the planted checkpoint is reported"
    );
    let t = f.topic("c");
    // Nothing is cleanable (everything is in the active segment): no pass, a reset.
    assert!(f.engine().run_cleaner_once().is_none());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "0\n1\nc 0 0\n");
    assert_eq!(t.p0().cleaner.checkpoint(), Some(0));
    assert!(
        t.events_text().contains(
            " checkpoint The last checkpoint dirty offset for partition c-0 is 200, which is \
             larger than the log end offset 3. Resetting to the log start offset 0.\n"
        ),
        "{}",
        t.events_text()
    );
    drop(t);
    f.reopen();
    let report = kpfs::engine::inspect::check_data_dir(f.dir.path());
    assert!(report.is_healthy(), "{:?}", report.problems);
}

/// `log.cleaner.io.buffer.size` sizes the cleaner's reads and writes; the result is the
/// same whether a read takes one batch (size 0) or many, written with one append each:
/// the same records, segments and index entries.
#[test]
fn the_io_buffer_size_changes_how_the_cleaner_reads_not_what_it_writes() {
    let cleaned = |io_buffer_size: &str| {
        let f = Fixture::new();
        f.engine()
            .update_broker_config(format!("log.cleaner.io.buffer.size={io_buffer_size}").as_bytes())
            .unwrap();
        let t = f.topic("io");
        set(
            &t,
            "cleanup.policy=compact\nparse.key=true\nkey.separator=:\n\
             internal.segment.bytes=2000\nindex.interval.bytes=100\nmin.cleanable.dirty.ratio=0.01",
        );
        for i in 0..300 {
            t.append_lines(format!("k{}:{i}\n", (i * 7) % 40).as_bytes())
                .unwrap();
        }
        f.engine().run_cleaner_once().unwrap();
        let snap = t.p0().log().snapshot();
        let indexes: Vec<Vec<(u64, u32)>> = snap
            .segments
            .iter()
            .map(|s| s.index_entries().unwrap())
            .collect();
        (dump(&t), indexes, cat_string(&t))
    };
    let one_batch_per_read = cleaned("0");
    assert!(
        one_batch_per_read.1.iter().any(|entries| entries.len() > 1),
        "the cleaned segments have index entries"
    );
    assert_eq!(cleaned("524288"), one_batch_per_read);
}

/// `compression.type` names the codec of the batches an append writes (lines are
/// uncompressed producer data, so `producer` writes none); `cat`, the cleaner and a
/// reopen read all four; a batch the cleaner rebuilds keeps its codec, as Kafka's
/// `MemoryRecords.filterTo` does, and kept records keep their stream positions.
#[test]
fn every_codec_is_written_read_cleaned_and_reopened() {
    use kpfs::engine::format::decode_header;
    let mut f = Fixture::new();
    let codecs = ["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"];
    let mut texts = Vec::new();
    for codec in codecs {
        let t = f.topic(codec);
        set(
            &t,
            &format!(
                "compression.type={codec}\ncleanup.policy=compact\nparse.key=true\nkey.separator=:\n\
                 min.cleanable.dirty.ratio=0.01\ninternal.segment.bytes=2000"
            ),
        );
        let mut written = String::new();
        for round in 0..6 {
            let mut write = String::new();
            for k in 0..10 {
                write.push_str(&format!(
                    "k{k}:{}-round{round}-{}\n",
                    codec,
                    "v".repeat(k * 7)
                ));
            }
            t.append_lines(write.as_bytes()).unwrap();
            written.push_str(&write);
        }
        assert_eq!(cat_string(&t), written, "{codec}: what was written");
        let attributes = |t: &Topic| -> Vec<u16> {
            let mut ids = Vec::new();
            for s in t.p0().log().snapshot().segments.iter() {
                let bytes = s.read_at(0, s.size() as usize).unwrap();
                let mut at = 0;
                while at < bytes.len() {
                    let h = decode_header(&bytes[at..]).unwrap();
                    // An empty batch has no records to compress (Kafka's writeEmptyHeader).
                    if h.record_count > 0 {
                        ids.push(u16::from_be_bytes([bytes[at + 21], bytes[at + 22]]) & 7);
                    }
                    at += h.size;
                }
            }
            ids
        };
        let want = ["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"]
            .iter()
            .position(|c| *c == codec)
            .unwrap()
            .saturating_sub(1) as u16;
        assert!(
            attributes(&t).iter().all(|&id| id == want),
            "{codec}: {:?}",
            attributes(&t)
        );
        // Compressed batches are small: roll, so every round is in a cleanable segment.
        t.p0()
            .log()
            .roll(&t.config(), kpfs::engine::segment::RollReason::Size)
            .unwrap();
        let size_before = t.stream_len();
        f.engine().run_cleaner_once_with(&mut small_map()).unwrap();
        let cleaned = cat_string(&t);
        assert!(
            cleaned.len() < written.len(),
            "{codec}: nothing was cleaned"
        );
        assert!(
            cleaned.ends_with(&written[written.len() - 200..]),
            "{codec}"
        );
        assert!(
            attributes(&t).iter().all(|&id| id == want),
            "{codec} after cleaning"
        );
        assert_eq!(
            t.stream_len(),
            size_before,
            "{codec}: the log size never shrinks"
        );
        texts.push((codec, cleaned, size_before));
    }
    f.reopen();
    for (codec, text, size) in texts {
        let t = f.topic(codec);
        assert_eq!(cat_string(&t), text, "{codec} after a reopen");
        assert_eq!(t.stream_len(), size, "{codec} after a reopen");
    }
}

/// With `log.cleaner.enable=false` no cleaner thread starts, so `status` must not call a
/// dirty topic due for compaction forever: it says the cleaner is off and what the ratio
/// would decide, and that a topic with compact,delete gets no retention either (Kafka
/// runs it in the cleaner threads).
#[test]
fn status_says_when_the_cleaner_is_off() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let engine = engine_with_threads(dir.path(), &clock, &[("log.cleaner.enable", "false")]);
    assert_eq!(engine.cleaner_thread_count(), 0);
    let t = engine.create_topic("keys", 1).unwrap();
    set(
        &t,
        "cleanup.policy=compact,delete\nparse.key=true\nkey.separator=:\n\
         min.cleanable.dirty.ratio=0.01\nsegment.ms=1000",
    );
    t.append_lines(b"k:1\nk:2\n").unwrap();
    clock.advance(2000);
    t.append_lines(b"k:3\n").unwrap();
    let status = t.p0().status_text();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
            .unwrap_or_else(|| panic!("no {name} in {status}"))
            .to_string()
    };
    assert_eq!(
        field("compaction_due"),
        "no: log.cleaner.enable=false, so no cleaner thread runs (with it on: yes: dirty ratio 1.0000 > 0.01)"
    );
    assert_eq!(
        field("retention"),
        "never: log.cleaner.enable=false, so no cleaner thread runs, and a topic with compact gets retention from those threads (as in Kafka)"
    );
    assert!(!status.contains("retention_oldest_segment"), "{status}");
}
