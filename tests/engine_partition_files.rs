//! The rest of a Kafka partition directory through the engine: producer-state snapshots
//! taken at rolls and at the close, renamed `.deleted` with their segment by retention
//! and the cleaner and removed after `file.delete.delay.ms`, stray and corrupt ones
//! removed at open; `leader-epoch-checkpoint` following the log start; the topic id of
//! `partition.metadata` kept for the topic's life. The seed's listings, file for file.

mod common;

use std::fs;

use common::*;
use kpfs::engine::producer_state::decode_snapshot;
use kpfs::engine::Topic;

fn names(t: &Topic) -> Vec<String> {
    t.p0()
        .backing_files()
        .unwrap()
        .into_iter()
        .map(|f| f.name)
        .collect()
}

fn live(t: &Topic) -> Vec<String> {
    names(t)
        .into_iter()
        .filter(|n| !n.ends_with(".deleted"))
        .collect()
}

fn deleted(t: &Topic) -> Vec<String> {
    names(t)
        .into_iter()
        .filter(|n| n.ends_with(".deleted"))
        .collect()
}

fn segment_files(base: u64, kinds: &[&str]) -> Vec<String> {
    kinds.iter().map(|k| format!("{base:020}{k}")).collect()
}

fn read(t: &Topic, name: &str) -> Vec<u8> {
    fs::read(t.p0().dir().join(name)).unwrap()
}

fn produce(t: &Topic, from: usize, n: usize) {
    for i in from..from + n {
        t.append_lines(format!("record-{i}\n").as_bytes()).unwrap();
    }
}

const EMPTY_SNAPSHOT: [u8; 10] = [0, 1, 0x48, 0x67, 0x4b, 0xc7, 0, 0, 0, 0];

#[test]
fn a_new_topic_holds_kafkas_files_and_no_snapshot() {
    let f = Fixture::new();
    let t = f.topic("fresh");
    let mut expected = segment_files(0, &[".index", ".log", ".timeindex"]);
    expected.extend([
        "leader-epoch-checkpoint".into(),
        "partition.metadata".into(),
    ]);
    assert_eq!(live(&t), expected);
    assert_eq!(read(&t, "leader-epoch-checkpoint"), b"0\n1\n0 0\n");
    let metadata = String::from_utf8(read(&t, "partition.metadata")).unwrap();
    assert_eq!(
        metadata,
        format!("version: 0\ntopic_id: {}", t.p0().log().topic_id())
    );
}

#[test]
fn seed_size_demo_deletes_eleven_files() {
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
    // A roll writes the snapshot at the new segment's base; segment 0 has none.
    for base in [5, 10, 15] {
        assert_eq!(read(&t, &format!("{base:020}.snapshot")), EMPTY_SNAPSHOT);
    }
    f.engine().run_retention_once();
    let mut expected = segment_files(15, &[".index", ".log", ".snapshot", ".timeindex"]);
    expected.extend([
        "leader-epoch-checkpoint".into(),
        "partition.metadata".into(),
    ]);
    assert_eq!(live(&t), expected);
    let mut gone = segment_files(0, &[".index.deleted", ".log.deleted", ".timeindex.deleted"]);
    for base in [5, 10] {
        gone.extend(segment_files(
            base,
            &[
                ".index.deleted",
                ".log.deleted",
                ".snapshot.deleted",
                ".timeindex.deleted",
            ],
        ));
    }
    gone.sort();
    assert_eq!(deleted(&t), gone);
    assert_eq!(gone.len(), 11, "the seed's count: 3 + 4 + 4");
    assert_eq!(read(&t, "leader-epoch-checkpoint"), b"0\n1\n0 15\n");
    // The snapshots go with their segments after file.delete.delay.ms.
    f.advance(60_000);
    f.engine().run_deletions_once();
    assert_eq!(deleted(&t), Vec::<String>::new());
}

#[test]
fn seed_compaction_demo_lists_kafkas_partition_directory() {
    let f = Fixture::new();
    let t = f.topic("compact-demo");
    set(
        &t,
        "cleanup.policy=compact\nsegment.bytes=1048576\nsegment.ms=3000\nmin.cleanable.dirty.ratio=0.01\n\
         delete.retention.ms=3000\nparse.key=true\nkey.separator=:\nnull.marker=NULL",
    );
    let round = |n: u32| {
        for k in ["a", "b", "c"] {
            t.append_lines(format!("{k}:round{n}-value-for-{k}\n").as_bytes())
                .unwrap();
        }
    };
    round(1);
    f.advance(4000);
    round(2);
    f.engine().run_cleaner_once();
    f.advance(4000);
    t.append_lines(b"a:NULL\n").unwrap();
    f.engine().run_cleaner_once();
    f.advance(4000);
    round(3);
    f.engine().run_cleaner_once();
    // The cleaner merged 0, 3 and 6 into 0: the snapshots of 3 and 6 went with them.
    let mut expected = segment_files(0, &[".index", ".log", ".timeindex"]);
    expected.extend(segment_files(
        7,
        &[".index", ".log", ".snapshot", ".timeindex"],
    ));
    expected.extend([
        "leader-epoch-checkpoint".into(),
        "partition.metadata".into(),
    ]);
    assert_eq!(live(&t), expected);
    assert!(
        deleted(&t).iter().any(|n| n.ends_with(".snapshot.deleted")),
        "{:?}",
        deleted(&t)
    );
}

#[test]
fn a_clean_close_snapshots_the_log_end_and_a_reopen_keeps_it() {
    let mut f = Fixture::new();
    let t = f.topic("close");
    set(&t, "segment.ms=3000");
    produce(&t, 0, 5);
    f.advance(4000);
    produce(&t, 5, 2);
    let id = t.p0().log().topic_id();
    drop(t);
    f.reopen();
    let t = f.topic("close");
    let snapshots: Vec<String> = live(&t)
        .into_iter()
        .filter(|n| n.ends_with(".snapshot"))
        .collect();
    assert_eq!(
        snapshots,
        [format!("{:020}.snapshot", 5), format!("{:020}.snapshot", 7)]
    );
    assert_eq!(
        decode_snapshot(&read(&t, &format!("{:020}.snapshot", 7))),
        Ok(vec![])
    );
    assert_eq!(
        t.p0().log().topic_id(),
        id,
        "the topic id is kept for the topic's life"
    );
    // The close's snapshot at 7 becomes the next segment's: no new one is written.
    f.advance(4000);
    produce(&t, 7, 1);
    assert_eq!(t.p0().segment_log_files().unwrap(), vec![0, 5, 7]);
    assert_eq!(read(&t, &format!("{:020}.snapshot", 7)), EMPTY_SNAPSHOT);
}

#[test]
fn opening_after_a_crash_removes_stray_and_corrupt_snapshots() {
    let mut f = Fixture::new();
    let t = f.topic("crash");
    set(&t, "segment.ms=3000");
    produce(&t, 0, 5);
    f.advance(4000);
    produce(&t, 5, 5);
    let dir = t.p0().dir().to_path_buf();
    drop(t);
    // A stray below the last base, a leftover `.deleted`, a torn snapshot at the log end,
    // and one past it.
    fs::write(dir.join(format!("{:020}.snapshot", 3)), EMPTY_SNAPSHOT).unwrap();
    fs::write(
        dir.join(format!("{:020}.snapshot.deleted", 1)),
        EMPTY_SNAPSHOT,
    )
    .unwrap();
    fs::write(
        dir.join(format!("{:020}.snapshot", 10)),
        &EMPTY_SNAPSHOT[..5],
    )
    .unwrap();
    fs::write(dir.join(format!("{:020}.snapshot", 99)), EMPTY_SNAPSHOT).unwrap();
    f.crash_and_reopen();
    let t = f.topic("crash");
    let snapshots: Vec<String> = names(&t)
        .into_iter()
        .filter(|n| n.contains(".snapshot"))
        .collect();
    assert_eq!(
        snapshots,
        [
            format!("{:020}.snapshot", 5),
            format!("{:020}.snapshot", 10)
        ]
    );
    assert_eq!(read(&t, &format!("{:020}.snapshot", 10)), EMPTY_SNAPSHOT);
    assert_eq!(read(&t, "leader-epoch-checkpoint"), b"0\n1\n0 0\n");
}
