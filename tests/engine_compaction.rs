//! The cleaner through the engine with an injected clock: the seed's compaction demo
//! with its exact offsets, tombstone horizons over several passes, partial passes with a
//! tiny offset map, keyless records, and the swap protocol interrupted at each step.

mod common;

use common::*;
use kpfs::engine::cleaner::OffsetMap;
use kpfs::engine::format::decode_batch;
use kpfs::engine::Topic;

fn small_map() -> OffsetMap {
    OffsetMap::new(1 << 20, 0.9)
}

/// (offset, key, value) of one record.
type Row = (u64, String, Option<String>);

/// Every record in every live segment, by segment base.
fn dump(t: &Topic) -> Vec<(u64, Vec<Row>)> {
    let snap = t.log().snapshot();
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
    assert_eq!(t.log().log_end_offset(), 13);
    assert_eq!(
        t.log().log_start_offset(),
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
            assert!(stats.end_offset < t.log().snapshot().active().base_offset());
        }
    }
    assert!(passes > 1, "a small map makes several passes");
    let text = cat_string(&t);
    let active_base = t.log().snapshot().active().base_offset();
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
    let active_base = t.log().snapshot().active().base_offset();
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
    assert_eq!(t.log().log_end_offset(), 200);
}
