//! Reference-model property tests of the engine without a mount: random sequences of
//! appends, clock moves, config changes (the rendering of keyed topics among them),
//! retention, cleaner passes, deletions, clean and unclean reopens run against 1-3 topics,
//! keyed or plain, and after every step the records on disk and the rendered `log` stream
//! are compared with a model that remembers every append and the line it was given.
//! The model cannot predict which records retention or compaction remove, so it checks
//! the invariants those must keep (suffix, latest-per-key, offsets, stream positions).

mod common;

use std::collections::BTreeMap;

use common::*;
use kpfs::engine::cleaner_manager::CleanerState;
use kpfs::engine::format::decode_batch;
use kpfs::engine::offset_map::OffsetMap;
use kpfs::engine::{Topic, TopicCursor};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

const KEYS: u8 = 6;
/// Cleanup policies of keyed topics. Plain topics (keyless lines, written as plain
/// batches) keep `delete`: a compacted topic refuses records without a key.
const POLICIES: [&str; 3] = ["delete", "compact", "compact,delete"];
/// Key separators and null markers a keyed topic switches between; neither occurs in keys
/// (`k0`..) or values (`[a-z0-9]*`).
const SEPARATORS: [&str; 4] = [":", "=", "::", "->"];
const NULL_MARKERS: [&str; 3] = ["NULL", "NIL", "-"];

#[derive(Clone, Debug)]
enum Change {
    SegmentBytes(u32),
    SegmentMs(i64),
    RetentionMs(i64),
    RetentionBytes(i64),
    Policy(usize),
    /// `key.separator` and `null.marker` of a keyed topic: indexes into `SEPARATORS` and
    /// `NULL_MARKERS`.
    Rendering(usize, usize),
}

#[derive(Clone, Debug)]
enum Op {
    /// (key index, value; `None` writes a tombstone).
    Append(usize, Vec<(u8, Option<String>)>),
    Advance(i64),
    Set(usize, Change),
    RetentionDelete,
    RetentionCompacted,
    /// Offset-map slots: a handful, so passes are often partial.
    Clean(usize),
    Deletions,
    Reopen,
    CrashReopen,
    /// Topic, position as a fraction of the stream in 1/1000, read length.
    Read(usize, u64, usize),
}

#[derive(Clone, Debug)]
struct ModelRecord {
    /// `None` in a plain topic, whose lines are the values.
    key: Option<String>,
    value: Option<String>,
    stream_pos: u64,
    /// The line as appended: it reads so whatever the rendering became since.
    line: String,
}

#[derive(Debug)]
struct TopicModel {
    name: String,
    plain: bool,
    /// Index = offset.
    records: Vec<ModelRecord>,
    stream_end: u64,
    /// Once compacted, the visible records are no longer a plain suffix.
    ever_compact: bool,
    last_stream_len: u64,
    last_log_start: u64,
    /// The current `key.separator` and `null.marker`.
    separator: &'static str,
    null_marker: &'static str,
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        (200u32..2000).prop_map(Change::SegmentBytes),
        (100i64..10_000).prop_map(Change::SegmentMs),
        prop_oneof![Just(-1i64), 1000i64..20_000].prop_map(Change::RetentionMs),
        prop_oneof![Just(-1i64), 200i64..5000].prop_map(Change::RetentionBytes),
        (0..POLICIES.len()).prop_map(Change::Policy),
        (0..SEPARATORS.len(), 0..NULL_MARKERS.len()).prop_map(|(s, n)| Change::Rendering(s, n)),
    ]
}

fn value() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        6 => "[a-z0-9]{0,12}".prop_map(Some),
        1 => Just(None),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => (0usize..3, prop::collection::vec((0..KEYS, value()), 1..6))
            .prop_map(|(t, lines)| Op::Append(t, lines)),
        4 => prop_oneof![1i64..3000, 3000i64..30_000].prop_map(Op::Advance),
        3 => (0usize..3, change()).prop_map(|(t, c)| Op::Set(t, c)),
        2 => Just(Op::RetentionDelete),
        2 => Just(Op::RetentionCompacted),
        3 => (3usize..40).prop_map(Op::Clean),
        1 => Just(Op::Deletions),
        1 => Just(Op::Reopen),
        1 => Just(Op::CrashReopen),
        2 => (0usize..3, 0u64..=1000, 1usize..300).prop_map(|(t, p, l)| Op::Read(t, p, l)),
    ]
}

/// A topic: its policy, segment bytes, and whether it is plain.
type TopicSetup = (usize, u32, bool);

fn setup() -> impl Strategy<Value = (Vec<TopicSetup>, Vec<Op>)> {
    (
        prop::collection::vec((0..POLICIES.len(), 200u32..2000, any::<bool>()), 1..=3),
        prop::collection::vec(op(), 1..40),
    )
}

fn create(f: &Fixture, name: &str, (policy, segment_bytes, plain): TopicSetup) {
    let t = f.engine().create_topic(name, 1).unwrap();
    let (parse_key, policy) = if plain {
        (false, "delete")
    } else {
        (true, POLICIES[policy])
    };
    // A low dirty ratio, short tombstone horizon and deletion delay let a few clock
    // moves reach every cleaner and deletion path within 40 steps.
    set(
        &t,
        &format!(
            "parse.key={parse_key}\nkey.separator=:\nnull.marker=NULL\ncleanup.policy={policy}\n\
             internal.segment.bytes={segment_bytes}\nindex.interval.bytes=100\n\
             min.cleanable.dirty.ratio=0.01\ndelete.retention.ms=2000\nfile.delete.delay.ms=1000",
        ),
    );
}

fn apply_change(t: &Topic, m: &mut TopicModel, c: &Change) {
    let text = match c {
        Change::Policy(_) if m.plain => return,
        Change::SegmentBytes(n) => format!("internal.segment.bytes={n}"),
        Change::SegmentMs(n) => format!("segment.ms={n}"),
        Change::RetentionMs(n) => format!("retention.ms={n}"),
        Change::RetentionBytes(n) => format!("retention.bytes={n}"),
        Change::Policy(p) => {
            m.ever_compact |= POLICIES[*p].contains("compact");
            format!("cleanup.policy={}", POLICIES[*p])
        }
        Change::Rendering(..) if m.plain => return,
        Change::Rendering(s, n) => {
            (m.separator, m.null_marker) = (SEPARATORS[*s], NULL_MARKERS[*n]);
            format!(
                "key.separator={}\nnull.marker={}",
                m.separator, m.null_marker
            )
        }
    };
    set(t, &text);
}

/// The key of a record of a keyed topic.
fn keyed(r: &ModelRecord) -> &str {
    r.key.as_deref().expect("compacted topics are keyed")
}

/// Every record in every live segment, read straight from the segment files, with its
/// stream position.
fn on_disk(t: &Topic) -> Vec<(kpfs::engine::format::Record, u64)> {
    let snap = t.partition(0).unwrap().log().snapshot();
    let mut out = Vec::new();
    for s in snap.segments.iter() {
        let bytes = s.read_at(0, s.size() as usize).unwrap();
        let positions = s.record_stream_positions().unwrap();
        let mut records = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let (h, rs) = decode_batch(&bytes[at..]).unwrap();
            records.extend(rs);
            at += h.size;
        }
        assert_eq!(records.len(), positions.len());
        out.extend(records.into_iter().zip(positions).map(|(r, (o, pos))| {
            assert_eq!(r.offset, o);
            (r, pos)
        }));
    }
    out
}

/// What a read of `len` bytes at stream position `pos` must return: the renderings of
/// the visible records that end after `pos`, the first one cut at `pos`.
fn expected_read(m: &TopicModel, visible: &[u64], pos: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for &o in visible {
        let r = &m.records[o as usize];
        let line = &r.line;
        let end = r.stream_pos + line.len() as u64;
        if end <= pos {
            continue;
        }
        let from = pos.saturating_sub(r.stream_pos) as usize;
        out.extend_from_slice(&line.as_bytes()[from..]);
        if out.len() >= len {
            break;
        }
    }
    out.truncate(len);
    out
}

fn check(t: &Topic, m: &mut TopicModel) -> Result<(), TestCaseError> {
    let name = &m.name;
    let n = m.records.len() as u64;
    let snap = t.partition(0).unwrap().log().snapshot();
    let lso = snap.log_start_offset;
    let active_base = snap.active().base_offset();
    prop_assert_eq!(
        t.partition(0).unwrap().log().log_end_offset(),
        n,
        "{}: log end offset",
        name
    );
    prop_assert!(
        lso >= m.last_log_start,
        "{}: log start offset went back from {} to {}",
        name,
        m.last_log_start,
        lso
    );
    m.last_log_start = lso;
    prop_assert!(
        !t.partition(0)
            .unwrap()
            .status_text()
            .contains("refusing writes"),
        "{}: {}",
        name,
        t.partition(0).unwrap().status_text()
    );

    let disk = on_disk(t);
    let offsets: Vec<u64> = disk.iter().map(|(r, _)| r.offset).collect();
    // (a) strictly increasing, inside [log start, end), each written as stored.
    prop_assert!(
        offsets.windows(2).all(|w| w[0] < w[1]),
        "{}: offsets not increasing: {:?}",
        name,
        offsets
    );
    for (r, stream_pos) in &disk {
        prop_assert!(
            r.offset >= lso && r.offset < n,
            "{}: offset {} outside [{}, {})",
            name,
            r.offset,
            lso,
            n
        );
        let w = &m.records[r.offset as usize];
        let key = r
            .key
            .as_deref()
            .map(|k| String::from_utf8_lossy(k).into_owned());
        let val = r
            .value
            .as_deref()
            .map(|v| String::from_utf8_lossy(v).into_owned());
        prop_assert_eq!(
            (key.as_deref(), val.as_deref(), *stream_pos),
            (w.key.as_deref(), w.value.as_deref(), w.stream_pos),
            "{}: record at offset {} differs from what was written",
            name,
            r.offset
        );
    }

    if m.ever_compact {
        // (c) The latest value of a key is never lost while its offset is retained...
        let mut latest: BTreeMap<&str, u64> = BTreeMap::new();
        for (o, r) in m.records.iter().enumerate() {
            latest.insert(keyed(r), o as u64);
        }
        for (&k, &o) in &latest {
            if o >= lso && m.records[o as usize].value.is_some() {
                prop_assert!(
                    offsets.binary_search(&o).is_ok(),
                    "{}: latest value of {} at offset {} was removed",
                    name,
                    k,
                    o
                );
            }
        }
        // ...and an older value never outlives a newer record of its key (no resurrection
        // once a tombstone or newer value has been compacted away).
        let mut last_visible: BTreeMap<&str, u64> = BTreeMap::new();
        for (r, _) in &disk {
            last_visible.insert(keyed(&m.records[r.offset as usize]), r.offset);
        }
        for (&k, &o) in &last_visible {
            prop_assert_eq!(
                o,
                latest[k],
                "{}: key {} shows offset {} but its latest write is {}",
                name,
                k,
                o,
                latest[k]
            );
        }
        // The active segment is never cleaned.
        let tail: Vec<u64> = offsets
            .iter()
            .copied()
            .filter(|&o| o >= active_base)
            .collect();
        prop_assert_eq!(
            tail,
            (active_base.max(lso)..n).collect::<Vec<_>>(),
            "{}: active segment records",
            name
        );
    } else {
        // (b) Delete-only: whole segments go from the front.
        prop_assert_eq!(
            &offsets,
            &(lso..n).collect::<Vec<_>>(),
            "{}: not a suffix",
            name
        );
    }

    // (d) The stream never shrinks and keeps every record's position.
    let stream_len = t.stream_len();
    prop_assert!(
        stream_len >= m.last_stream_len,
        "{}: stream_len went back from {} to {}",
        name,
        m.last_stream_len,
        stream_len
    );
    m.last_stream_len = stream_len;
    prop_assert_eq!(stream_len, m.stream_end, "{}: stream_len", name);
    let full = cat(t, 1 << 20);
    let rendered: String = offsets
        .iter()
        .map(|&o| m.records[o as usize].line.as_str())
        .collect();
    prop_assert_eq!(
        String::from_utf8_lossy(&full),
        rendered.as_str(),
        "{}: cat",
        name
    );
    if offsets.len() as u64 == n {
        prop_assert_eq!(full.len() as u64, stream_len, "{}: nothing removed", name);
    } else {
        prop_assert!(
            (full.len() as u64) < stream_len,
            "{}: removed records still count in cat",
            name
        );
    }
    // (e) The read size does not change the bytes.
    prop_assert_eq!(cat(t, 4096), full, "{}: 4 KiB reads", name);
    Ok(())
}

fn check_read(t: &Topic, m: &TopicModel, frac: u64, len: usize) -> Result<(), TestCaseError> {
    let visible: Vec<u64> = on_disk(t).iter().map(|(r, _)| r.offset).collect();
    let stream_len = t.stream_len();
    let pos = stream_len * frac / 1000;
    // Two sequential reads through one cursor: a repositioning read, then a continuation.
    let mut cursor = TopicCursor::default();
    let mut got = t.read_log(&mut cursor, pos, len).unwrap();
    let more = t
        .read_log(&mut cursor, pos + got.len() as u64, len)
        .unwrap();
    got.extend_from_slice(&more);
    let want = expected_read(m, &visible, pos, 2 * len);
    prop_assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&want),
        "{}: read of {} at {} of {}",
        &m.name,
        2 * len,
        pos,
        stream_len
    );
    Ok(())
}

fn run(topics: Vec<TopicSetup>, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut f = Fixture::new();
    let mut models: Vec<TopicModel> = Vec::new();
    for (i, &setup) in topics.iter().enumerate() {
        let name = format!("t{i}");
        create(&f, &name, setup);
        let (policy, _, plain) = setup;
        models.push(TopicModel {
            name,
            plain,
            records: Vec::new(),
            stream_end: 0,
            ever_compact: !plain && POLICIES[policy].contains("compact"),
            last_stream_len: 0,
            last_log_start: 0,
            separator: SEPARATORS[0],
            null_marker: NULL_MARKERS[0],
        });
    }
    let count = models.len();
    for op in &ops {
        match op {
            Op::Append(t, lines) => {
                let m = &mut models[t % count];
                let topic = f.topic(&m.name);
                let mut text = String::new();
                let mut new = Vec::new();
                let mut pos = m.stream_end;
                for (k, v) in lines {
                    let r = if m.plain {
                        // A plain line: a value, no key, never a tombstone.
                        let value = format!("v{k}{}", v.as_deref().unwrap_or(""));
                        ModelRecord {
                            key: None,
                            line: format!("{value}\n"),
                            value: Some(value),
                            stream_pos: pos,
                        }
                    } else {
                        let rendered = v.as_deref().unwrap_or(m.null_marker);
                        ModelRecord {
                            key: Some(format!("k{k}")),
                            line: format!("k{k}{}{rendered}\n", m.separator),
                            value: v.clone(),
                            stream_pos: pos,
                        }
                    };
                    let line = &r.line;
                    pos += line.len() as u64;
                    text.push_str(line);
                    new.push(r);
                }
                let appended = topic.append_lines(text.as_bytes()).unwrap();
                prop_assert_eq!(appended, new.len() as u64);
                m.records.extend(new);
                m.stream_end = pos;
            }
            Op::Advance(ms) => f.advance(*ms),
            Op::Set(t, c) => {
                let m = &mut models[t % count];
                let topic = f.topic(&m.name);
                apply_change(&topic, m, c);
            }
            Op::RetentionDelete => {
                f.engine().run_retention_once();
            }
            Op::RetentionCompacted => {
                f.engine().run_compacted_retention_once();
            }
            Op::Clean(slots) => {
                let mut map = OffsetMap::new(slots * 24, 0.9);
                f.engine().run_cleaner_once_with(&mut map);
                for m in &models {
                    let state = f.topic(&m.name).partition(0).unwrap().cleaner.state();
                    prop_assert_eq!(state, CleanerState::Idle, "{}: cleaner state", &m.name);
                }
            }
            Op::Deletions => {
                f.engine().run_deletions_once();
            }
            Op::Reopen => f.reopen(),
            Op::CrashReopen => f.crash_and_reopen(),
            Op::Read(t, frac, len) => {
                let m = &models[t % count];
                check_read(&f.topic(&m.name), m, *frac, *len)?;
            }
        }
        for m in models.iter_mut() {
            let topic = f.topic(&m.name);
            check(&topic, m)?;
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        rng_seed: common::proptest_seed(),
        ..ProptestConfig::default()
    })]

    #[test]
    fn engine_matches_the_reference_model((topics, ops) in setup()) {
        run(topics, ops)?;
    }
}
