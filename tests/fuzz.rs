//! Hostile-input property tests: random and mutated bytes for the batch decoder, garbage
//! index files, damaged data directories for recovery, and random text for the config
//! parsers. None may panic; what they accept must be consistent with what was written,
//! and what they refuse must say why (and, for files, which file).

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use common::*;
use kpfs::engine::format::{
    decode_batch, decode_header, verify_batch, BatchBuilder, BATCH_HEADER_BYTES,
};
use kpfs::engine::{
    BrokerConfig, Engine, EngineOptions, ManualClock, Topic, TopicCursor, TopicOverrides,
    CLEAN_SHUTDOWN_FILE, RECOVERY_CHECKPOINT_FILE,
};
use proptest::prelude::*;

const TOPIC: &str = "f";

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        rng_seed: common::proptest_seed(),
        ..ProptestConfig::default()
    }
}

/// A real batch of `lines` as the append path builds it: keyless (each line a value), or
/// keyed (key before the first ':').
fn real_batch(lines: &[Vec<u8>], base: u64, keyed: bool) -> Vec<u8> {
    let mut b = BatchBuilder::new(base);
    for (i, line) in lines.iter().enumerate() {
        let key = keyed
            .then(|| line.iter().position(|&c| c == b':').map(|at| &line[..at]))
            .flatten();
        let value = Some(&line[key.map_or(0, |k| k.len() + 1)..]);
        b.push(base + i as u64, T0 + i as i64, key, value);
    }
    b.finish(None, None)
}

/// Bytes of a batch that Kafka's CRC32C does not cover: the base offset and the
/// partition leader epoch (the length is checked by framing).
const UNCOVERED: [std::ops::Range<usize>; 2] = [0..8, 12..16];

/// The CRC a batch needs to verify again after a mutation (Kafka's rule: CRC32C of
/// everything from the attributes on).
fn reseal(batch: &mut [u8]) {
    if batch.len() < BATCH_HEADER_BYTES {
        return;
    }
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// Everything the decoder can be asked about a buffer, and the invariants of what it
/// accepts.
fn decode_everything(bytes: &[u8]) {
    let _ = decode_header(bytes);
    if let Ok(h) = verify_batch(bytes) {
        assert!(h.size <= bytes.len() && h.size >= BATCH_HEADER_BYTES);
        if let Ok((_, records)) = decode_batch(bytes) {
            for r in records {
                assert!(r.offset >= h.base_offset && r.offset <= h.last_offset());
            }
        }
    }
    if let Ok((h, records)) = decode_batch(bytes) {
        assert!(records.len() as u64 <= u64::from(h.record_count));
        let mut prev = None;
        for r in records {
            assert!(prev.is_none_or(|p| r.offset > p), "offsets increase");
            prev = Some(r.offset);
        }
    }
}

fn line_strategy() -> impl Strategy<Value = Vec<u8>> {
    // No newline inside: the append path splits lines before they reach a batch.
    prop::collection::vec(
        any::<u8>().prop_filter("no newline", |b| *b != b'\n'),
        0..40,
    )
}

proptest! {
    #![proptest_config(config(3000))]

    #[test]
    fn random_bytes_never_panic_the_decoder(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        decode_everything(&bytes);
        // A random buffer behind a plausible header: length and magic right.
        let mut framed = bytes.clone();
        framed.resize(framed.len().max(BATCH_HEADER_BYTES), 0);
        let len = (framed.len() - 12) as u32;
        framed[8..12].copy_from_slice(&len.to_be_bytes());
        framed[16] = 2;
        decode_everything(&framed);
        reseal(&mut framed);
        decode_everything(&framed);
    }
}

proptest! {
    #![proptest_config(config(2000))]

    #[test]
    fn flipped_or_cut_batches_are_refused_or_consistent(
        lines in prop::collection::vec(line_strategy(), 1..8),
        base in 0u64..1_000_000,
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
        cut in any::<prop::sample::Index>(),
        keyed in any::<bool>(),
    ) {
        let batch = real_batch(&lines, base, keyed);
        let (h, records) = decode_batch(&batch).expect("a real batch decodes");
        prop_assert_eq!(records.len(), lines.len());
        prop_assert_eq!(h.size, batch.len());

        // One flipped byte the CRC covers is always detected (CRC32C catches every error
        // of up to 32 bits; the length and magic are checked by shape). The base offset
        // is checked across batches by recovery, the leader epoch by nothing (as Kafka).
        let (at, x) = &flips[0];
        let flipped = at.index(batch.len());
        if !UNCOVERED.iter().any(|r| r.contains(&flipped)) {
            let mut one = batch.clone();
            one[flipped] ^= x;
            prop_assert!(verify_batch(&one).is_err(), "a flipped byte at {} went unnoticed", flipped);
        }

        // Any proper prefix is refused.
        let short = &batch[..cut.index(batch.len())];
        prop_assert!(verify_batch(short).is_err());
        decode_everything(short);

        // Several flips with the CRC fixed up: the record parser itself must hold.
        let mut many = batch.clone();
        for (at, x) in &flips {
            many[at.index(batch.len())] ^= x;
        }
        decode_everything(&many);
        reseal(&mut many);
        decode_everything(&many);
    }
}

// ---------------------------------------------------------------------------------------
// Files on disk: indexes and whole segments of a real data directory.

/// A data directory with one topic of several small segments, shut down cleanly, and the
/// text its `log` shows. Built once; every case works on a copy.
fn template() -> &'static (tempfile::TempDir, String) {
    static T: OnceLock<(tempfile::TempDir, String)> = OnceLock::new();
    T.get_or_init(|| {
        let f = Fixture::new();
        let t = f.topic(TOPIC);
        set(
            &t,
            "internal.segment.bytes=700\nsegment.index.bytes=4096\nindex.interval.bytes=64",
        );
        let mut text = String::new();
        for i in 0..120 {
            let line = format!("k{}:value-{i:04}-{}\n", i % 7, "z".repeat(i % 23));
            t.append_lines(line.as_bytes()).unwrap();
            text.push_str(&line);
            f.advance(5);
        }
        assert!(t.p0().log().snapshot().segments.len() >= 5);
        let mut f = f;
        let e = f.engine.take().unwrap();
        e.shutdown().unwrap();
        drop(e);
        (f.dir, text)
    })
}

fn segment_files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir.join(format!("{TOPIC}-0")))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    v.sort();
    v
}

/// Reads the whole `log` like `cat`, stopping at the first error instead of panicking.
fn cat_until_error(t: &Topic) -> (Vec<u8>, Option<String>) {
    let mut cursor = TopicCursor::default();
    let mut out = Vec::new();
    loop {
        match t.read_log(&mut cursor, out.len() as u64, 1000) {
            Ok(got) if got.is_empty() => return (out, None),
            Ok(got) => out.extend_from_slice(&got),
            Err(e) => return (out, Some(e.to_string())),
        }
    }
}

/// What a damaged data directory may show: whole original lines in their original order.
fn assert_lines_subsequence(shown: &[u8], original: &str) {
    let shown = std::str::from_utf8(shown).expect("only written bytes are shown");
    assert!(
        shown.is_empty() || shown.ends_with('\n'),
        "torn last line, ending {:?}",
        &shown[shown.len().saturating_sub(60)..]
    );
    let orig: Vec<&str> = original.split_terminator('\n').collect();
    let mut at = 0;
    for (i, line) in shown.split_terminator('\n').enumerate() {
        match orig[at..].iter().position(|o| *o == line) {
            Some(p) => at += p + 1,
            None => panic!("line {i} {line:?} is not an original line in order"),
        }
    }
}

fn open_engine(dir: &Path) -> kpfs::engine::Result<Engine> {
    Engine::open(
        dir,
        BrokerConfig::defaults(),
        Arc::new(ManualClock::new(T0 + 10_000_000)),
        EngineOptions::default(),
    )
}

proptest! {
    #![proptest_config(config(48))]

    #[test]
    fn garbage_indexes_never_change_what_log_shows(
        garbage in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 1..4),
        which in prop::collection::vec(any::<prop::sample::Index>(), 1..4),
        time_index in any::<bool>(),
        reads in prop::collection::vec((any::<prop::sample::Index>(), 1usize..300), 1..6),
    ) {
        let (tpl, text) = template();
        let copy = tempfile::tempdir().unwrap();
        copy_dir(tpl.path(), copy.path());
        let suffix = if time_index { ".timeindex" } else { ".index" };
        let files = segment_files(copy.path(), suffix);
        for (bytes, w) in garbage.iter().zip(&which) {
            fs::write(&files[w.index(files.len())], bytes).unwrap();
        }
        // The clean shutdown marker stays: indexes are trusted as far as they look sane.
        let engine = match open_engine(copy.path()) {
            Ok(e) => e,
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(msg.contains(&*copy.path().to_string_lossy()), "error names no file: {msg}");
                return Ok(());
            }
        };
        let t = engine.topic(TOPIC).unwrap();
        let (shown, err) = cat_until_error(&t);
        prop_assert_eq!(err, None);
        prop_assert_eq!(String::from_utf8(shown).unwrap(), text.clone());
        // Reads at arbitrary positions go through the index; they return the right
        // bytes or an error, never other bytes.
        for (at, len) in reads {
            let pos = at.index(text.len());
            let mut cursor = TopicCursor::default();
            if let Ok(got) = t.read_log(&mut cursor, pos as u64, len) {
                let end = (pos + got.len()).min(text.len());
                prop_assert_eq!(&got[..], &text.as_bytes()[pos..end], "read at {}", pos);
            }
        }
        t.append_lines(b"k9:after\n").unwrap();
    }
}

#[derive(Clone, Debug)]
enum Damage {
    Flip(prop::sample::Index, u8),
    Truncate(prop::sample::Index),
    AppendGarbage(Vec<u8>),
    Zero(prop::sample::Index, usize),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (any::<prop::sample::Index>(), 1u8..=255).prop_map(|(i, x)| Damage::Flip(i, x)),
        any::<prop::sample::Index>().prop_map(Damage::Truncate),
        prop::collection::vec(any::<u8>(), 1..120).prop_map(Damage::AppendGarbage),
        (any::<prop::sample::Index>(), 1usize..100).prop_map(|(i, n)| Damage::Zero(i, n)),
    ]
}

fn apply(path: &Path, d: &Damage) {
    let mut bytes = fs::read(path).unwrap();
    match d {
        Damage::Flip(i, x) if !bytes.is_empty() => {
            let at = i.index(bytes.len());
            bytes[at] ^= x;
        }
        Damage::Truncate(i) if !bytes.is_empty() => bytes.truncate(i.index(bytes.len())),
        Damage::AppendGarbage(g) => bytes.extend_from_slice(g),
        Damage::Zero(i, n) if !bytes.is_empty() => {
            let at = i.index(bytes.len());
            let end = (at + n).min(bytes.len());
            bytes[at..end].fill(0);
        }
        _ => {}
    }
    fs::write(path, bytes).unwrap();
}

proptest! {
    #![proptest_config(config(96))]

    #[test]
    fn damaged_segments_recover_or_fail_naming_the_file(
        damages in prop::collection::vec((any::<prop::sample::Index>(), 0usize..3, damage()), 1..4),
        clean_marker in any::<bool>(),
        recovery_checkpoint in any::<bool>(),
    ) {
        let (tpl, text) = template();
        let copy = tempfile::tempdir().unwrap();
        copy_dir(tpl.path(), copy.path());
        for (which, kind, d) in &damages {
            let files = segment_files(copy.path(), [".log", ".index", ".timeindex"][*kind]);
            apply(&files[which.index(files.len())], d);
        }
        if !clean_marker {
            fs::remove_file(copy.path().join(CLEAN_SHUTDOWN_FILE)).unwrap();
        }
        if !recovery_checkpoint {
            fs::remove_file(copy.path().join(RECOVERY_CHECKPOINT_FILE)).unwrap();
        }
        let engine = match open_engine(copy.path()) {
            Ok(e) => e,
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(msg.contains(&format!("{TOPIC}-0/")), "error names no file: {msg}");
                return Ok(());
            }
        };
        let t = engine.topic(TOPIC).unwrap();
        let (mut shown, err) = cat_until_error(&t);
        if err.is_some() {
            // Reads are not line-aligned: the bytes before a failed read may end mid-line,
            // as `cat` prints them before it reports EIO. Whole lines are what count.
            shown.truncate(shown.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1));
        }
        if !clean_marker && !recovery_checkpoint {
            // A full recovery scan leaves only valid batches: nothing to trip over. (With
            // a recovery point, segments below it are trusted as after a clean shutdown,
            // so damage there shows up as a read error instead, as in Kafka.)
            prop_assert_eq!(err.clone(), None, "read error after recovery");
        }
        // Not a prefix even after a full scan: a sealed segment cut exactly at a batch
        // boundary is valid as it stands, so the segments after it stay (a gap in the
        // offsets, as compaction leaves). Only order and wholeness are guaranteed.
        assert_lines_subsequence(&shown, text);
        // Writing after the damage either works or is refused; it never panics.
        let _ = t.append_lines(b"k9:after\n");
        let _ = cat_until_error(&t);
        drop(t);
        let _ = engine.shutdown();
    }
}

// ---------------------------------------------------------------------------------------
// Config text: topic `config` writes, broker properties and `.kpfs/config` writes.

const KEYS: &[&str] = &[
    "cleanup.policy",
    "retention.ms",
    "retention.bytes",
    "segment.bytes",
    "segment.ms",
    "segment.index.bytes",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
    "parse.key",
    "key.separator",
    "null.marker",
    "max.message.bytes",
    "log.retention.hours",
    "log.cleaner.threads",
    "log.flush.interval.ms",
    "log.segment.bytes",
    "num.partitions",
    "",
];

fn config_text() -> impl Strategy<Value = String> {
    let value = prop_oneof![
        Just(String::new()),
        "-?[0-9]{1,25}",
        "[0-9]\\.[0-9]{1,3}",
        "(compact|delete|,| ){0,5}",
        "(true|false|TRUE|yes)",
        any::<String>(),
    ];
    let line = prop_oneof![
        (prop::sample::select(KEYS), value).prop_map(|(k, v)| format!("{k}={v}")),
        prop::sample::select(KEYS).prop_map(|k| format!("-{k}")),
        any::<String>(),
        Just("# comment".to_string()),
    ];
    prop::collection::vec(line, 0..5).prop_map(|lines| lines.join("\n"))
}

fn assert_message<T, E: std::fmt::Display>(r: Result<T, E>) {
    if let Err(e) = r {
        assert!(
            !e.to_string().trim().is_empty(),
            "an error without a message"
        );
    }
}

proptest! {
    #![proptest_config(config(96))]

    #[test]
    fn config_parsers_never_panic_and_always_explain(text in config_text(), raw in any::<String>()) {
        let broker = BrokerConfig::defaults();
        assert_message(TopicOverrides::default().apply_command(&text, &broker));
        assert_message(TopicOverrides::default().apply_command(&raw, &broker));
        assert_message(TopicOverrides::from_properties(&text));
        assert_message(BrokerConfig::load(Some(&text), &[]));
        assert_message(broker.apply_dynamic(&text));
        assert_message(broker.apply_dynamic(&raw));
        assert_message(broker.with_dynamic_properties(&raw));
        if let Some((k, v)) = text.lines().next().and_then(|l| l.split_once('=')) {
            assert_message(BrokerConfig::load(None, &[(k.to_string(), v.to_string())]));
        }
        // What the topic parser accepts, its persisted form reads back identically.
        if let Ok(o) = TopicOverrides::default().apply_command(&text, &broker) {
            let back = TopicOverrides::from_properties(&o.to_properties());
            prop_assert_eq!(back.map(|b| b.to_properties()).ok(), Some(o.to_properties()));
        }
    }
}
