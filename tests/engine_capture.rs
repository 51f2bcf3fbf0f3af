//! Captures (`.kpfs/snapshot/TOPIC/log`): the visible records of one moment, end to end,
//! read back byte for byte while appends go on, retention deletes and removes the
//! segments they came from and the cleaner replaces them; and how long a topic keeps its
//! current capture.

mod common;

use std::sync::Arc;

use common::*;
use kpfs::engine::offset_map::OffsetMap;
use kpfs::engine::{LogCapture, LogCursor, Topic, CAPTURE_GRACE_MS};

/// The whole capture read with `chunk`-byte reads from the start, as tar and rsync do.
fn read_capture(t: &Topic, capture: &LogCapture, chunk: usize) -> Vec<u8> {
    let mut cursor = LogCursor::default();
    let mut out = Vec::new();
    loop {
        let got = t
            .p0()
            .read_capture(capture, &mut cursor, out.len() as u64, chunk)
            .unwrap();
        if got.is_empty() {
            return out;
        }
        let expected = chunk.min(capture.size() as usize - out.len());
        assert_eq!(
            got.len(),
            expected,
            "a read inside the capture is never short"
        );
        out.extend_from_slice(&got);
    }
}

/// Reads of the capture at positions out of order, each through a fresh cursor and
/// through one cursor that seeks around, match the bytes at those positions.
fn check_positioned_reads(t: &Topic, capture: &LogCapture, expected: &[u8]) {
    let len = expected.len() as u64;
    let mut shared = LogCursor::default();
    for pos in [
        len / 2,
        1,
        len.saturating_sub(3),
        0,
        len / 3,
        len - 1,
        len / 2 + 7,
    ] {
        let want = 10usize.min((len - pos) as usize);
        let at = pos as usize;
        for cursor in [&mut LogCursor::default(), &mut shared] {
            let got = t.p0().read_capture(capture, cursor, pos, 10).unwrap();
            assert_eq!(got, &expected[at..at + want], "10 bytes at {pos}");
        }
    }
    assert!(t
        .p0()
        .read_capture(capture, &mut LogCursor::default(), len, 10)
        .unwrap()
        .is_empty());
}

/// A keyed, compacted topic of many small segments and a delete topic with retention:
/// the capture taken before the cleaner's pass, retention, the removal of the `.deleted`
/// files and more appends reads exactly what `cat log` read at the capture, whatever
/// the read sizes and positions, and a later capture what `cat log` reads then.
#[test]
fn a_capture_reads_as_it_was_while_retention_and_the_cleaner_run() {
    let f = Fixture::new();
    let compacted = f.topic("compacted");
    set(
        &compacted,
        "cleanup.policy=compact\nparse.key=true\nkey.separator=:\ninternal.segment.bytes=600\n\
         min.cleanable.dirty.ratio=0.01",
    );
    for i in 0..300 {
        compacted
            .append_lines(format!("k{}:value-{i}\n", (i * 7) % 11).as_bytes())
            .unwrap();
    }
    let retained = f.topic("retained");
    set(&retained, "retention.ms=5000\nsegment.ms=1000");
    for round in 0..4 {
        for i in 0..20 {
            retained
                .append_lines(format!("round-{round}-record-{i}\n").as_bytes())
                .unwrap();
        }
        f.advance(2000);
    }
    // Retention has removed records below the capture already: its gap is skipped too.
    assert!(f.engine().run_retention_once() > 0);

    let mut captured = Vec::new();
    for (name, t) in [("compacted", &compacted), ("retained", &retained)] {
        let capture = t.p0().current_capture(true).unwrap();
        let visible = cat(t, 4096);
        assert_eq!(capture.size(), visible.len() as u64, "{name} size");
        captured.push((name, t.clone(), capture, visible));
    }
    assert!(
        captured[1].2.size() < retained.stream_len(),
        "a gap below the capture"
    );

    let mut map = OffsetMap::new(1 << 20, 0.9);
    assert!(f.engine().run_cleaner_once_with(&mut map).is_some());
    f.advance(10_000);
    assert!(f.engine().run_retention_once() > 0);
    for t in [&compacted, &retained] {
        t.append_lines(b"k1:after the capture\n").unwrap();
    }
    // Past file.delete.delay.ms: the segments the capture came from leave the disk.
    f.advance(60_000);
    assert!(f.engine().run_deletions_once() > 0);

    for (name, t, capture, visible) in &captured {
        assert_ne!(&cat(t, 4096), visible, "{name} changed since the capture");
        for chunk in [1, 7, 4096, 1 << 20] {
            assert_eq!(&read_capture(t, capture, chunk), visible, "{name}, {chunk}");
        }
        check_positioned_reads(t, capture, visible);
        t.p0().capture_closed(capture);
    }
    f.advance(CAPTURE_GRACE_MS);
    for (name, t) in [("compacted", &compacted), ("retained", &retained)] {
        let capture = t.p0().current_capture(false).unwrap();
        let visible = cat(t, 4096);
        assert_eq!(capture.size(), visible.len() as u64);
        assert_eq!(read_capture(t, &capture, 1000), visible, "{name} now");
    }
}

/// The size belongs to the topic, not to a handle: every look within the grace window
/// after the capture was made, or while a handle reads it, sees one capture; after the
/// window (counted from its making or its last close, never from a look) the next look
/// makes a new one, and the scheduler's tick drops one nobody looks at.
#[test]
fn a_topic_keeps_one_capture_while_it_is_read_and_for_the_grace_window() {
    let f = Fixture::new();
    let t = f.topic("t");
    t.append_lines(b"one\ntwo\n").unwrap();
    let looked = t.p0().current_capture(false).unwrap();
    f.advance(CAPTURE_GRACE_MS - 1);
    t.append_lines(b"three\n").unwrap();
    let opened = t.p0().current_capture(true).unwrap();
    assert!(
        Arc::ptr_eq(&looked, &opened),
        "tar's stat and open see one capture"
    );
    assert_eq!(opened.size(), 8);
    // Held open, it stays current however long the copy takes.
    f.advance(10 * CAPTURE_GRACE_MS);
    assert!(Arc::ptr_eq(
        &t.p0().current_capture(false).unwrap(),
        &opened
    ));
    t.p0().capture_closed(&opened);
    f.advance(CAPTURE_GRACE_MS - 1);
    assert!(
        Arc::ptr_eq(&t.p0().current_capture(false).unwrap(), &opened),
        "tar's stat after its last read sees what it read"
    );
    f.advance(1);
    let next = t.p0().current_capture(false).unwrap();
    assert!(!Arc::ptr_eq(&next, &opened));
    assert_eq!(next.size(), 14);

    // Nobody looks: the tick lets it go (and with it the segments it pinned).
    t.p0().expire_capture();
    assert_eq!(Arc::strong_count(&next), 2, "kept within the window");
    f.advance(CAPTURE_GRACE_MS);
    t.p0().expire_capture();
    assert_eq!(Arc::strong_count(&next), 1, "dropped after the window");
}
