//! `kpfs upgrade` on the legacy-v1 fixture (data directories the release before
//! RecordBatch v2 wrote): the engine refuses them, the upgrade converts a copy, and every
//! topic then reads as the old release showed it (`tests/fixtures/legacy-v1/expected`):
//! the `log` bytes, the stream size and the config. Also after a stop at every step of the
//! upgrade and a rerun.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use kpfs::engine::offset_map::OffsetMap;
use kpfs::engine::upgrade::{upgrade_data_dir, FORMAT_VERSION_FILE};
use kpfs::engine::{BrokerConfig, Engine, EngineError, EngineOptions, ManualClock};

/// The fixture's data directories and their topics.
const DATA_DIRS: [(&str, &[&str]); 2] = [
    (
        "clean",
        &["plain", "retained", "keyed", "compacted", "configured"],
    ),
    ("unclean", &["crashed"]),
];

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/legacy-v1")
}

/// A copy of one of the fixture's data directories (the fixture itself stays as users
/// have it).
fn copy_of(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let data_dir = tmp.path().join(name);
    copy_dir(&fixture().join(name), &data_dir);
    (tmp, data_dir)
}

/// The broker the fixture was mounted with (its `.config` files name the override), on
/// a clock held at `T0`, before any of the fixture's times: nothing in it expires.
fn open(data_dir: &Path) -> Result<Engine, EngineError> {
    open_at(data_dir, &Arc::new(ManualClock::new(T0)))
}

fn open_at(data_dir: &Path, clock: &Arc<ManualClock>) -> Result<Engine, EngineError> {
    let broker = BrokerConfig::load(
        None,
        &[(
            "log.segment.delete.delay.ms".to_string(),
            "86400000".to_string(),
        )],
    )
    .unwrap();
    Engine::open(data_dir, broker, clock.clone(), EngineOptions::default())
}

/// Every topic of `name` shows what the old release showed before it stopped.
fn assert_reads_as_before(data_dir: &Path, name: &str, topics: &[&str]) {
    let engine = open(data_dir).unwrap();
    for topic in topics {
        let t = engine.topic(topic).unwrap();
        let expected = |what: &str| {
            fs::read_to_string(fixture().join(format!("expected/{name}/{topic}.{what}"))).unwrap()
        };
        assert_eq!(cat_string(&t), expected("log"), "{name}/{topic}: cat log");
        // Small reads land inside lines and at the stream's gaps.
        assert_eq!(
            String::from_utf8(cat(&t, 7)).unwrap(),
            expected("log"),
            "{name}/{topic}: cat log in 7-byte reads"
        );
        assert_eq!(
            t.stream_len().to_string(),
            expected("size").trim(),
            "{name}/{topic}: stat -c %s log"
        );
        assert_same_config(
            &t.config_text(),
            &expected("config"),
            &format!("{name}/{topic}"),
        );
        // No old leftovers, no kpfs files: what a Kafka partition directory holds.
        for file in fs::read_dir(data_dir.join(format!("{topic}-0"))).unwrap() {
            let file = file.unwrap().file_name().into_string().unwrap();
            assert!(
                !file.starts_with("kpfs-")
                    && ![".deleted", ".cleaned", ".upgrading"]
                        .iter()
                        .any(|s| file.ends_with(s)),
                "{name}/{topic}: {file} left in the partition directory"
            );
        }
    }
    engine.shutdown().unwrap();
}

/// The same overrides, and every default the old release listed (this one may list
/// configs it did not have).
fn assert_same_config(now: &str, before: &str, context: &str) {
    let overrides = |text: &str| text.split("# defaults\n").next().unwrap().to_string();
    assert_eq!(
        overrides(now),
        overrides(before),
        "{context}: config overrides"
    );
    for line in before.lines() {
        assert!(
            now.lines().any(|l| l == line),
            "{context}: config lost {line:?}"
        );
    }
}

#[test]
fn an_old_data_dir_is_refused_then_upgraded_and_reads_as_before() {
    for (name, topics) in DATA_DIRS {
        let (_tmp, data_dir) = copy_of(name);
        let Err(refused) = open(&data_dir) else {
            panic!("{name}: an old data dir was opened");
        };
        assert!(
            refused
                .to_string()
                .contains(&format!("kpfs upgrade {}", data_dir.display())),
            "{refused}"
        );
        let report = upgrade_data_dir(&data_dir, None).unwrap();
        assert_eq!(report.topics, topics.len());
        assert_eq!(
            fs::read_to_string(data_dir.join(FORMAT_VERSION_FILE)).unwrap(),
            "2\n"
        );
        assert_reads_as_before(&data_dir, name, topics);
        assert!(upgrade_data_dir(&data_dir, None).unwrap().already_current);
    }
}

#[test]
fn appends_after_an_upgrade_continue_the_old_stream() {
    let (_tmp, data_dir) = copy_of("clean");
    upgrade_data_dir(&data_dir, None).unwrap();
    let engine = open(&data_dir).unwrap();
    for topic in ["retained", "keyed", "compacted"] {
        let t = engine.topic(topic).unwrap();
        let before = cat_string(&t);
        let size = t.stream_len();
        t.append_lines(b"z:after\n").unwrap();
        assert_eq!(cat_string(&t), before + "z:after\n", "{topic}");
        assert_eq!(t.stream_len(), size + 8, "{topic}");
    }
    engine.shutdown().unwrap();
}

#[test]
fn an_upgrade_stopped_after_any_step_reads_as_before_once_run_again() {
    for (name, topics) in DATA_DIRS {
        let steps = {
            let (_tmp, data_dir) = copy_of(name);
            upgrade_data_dir(&data_dir, None).unwrap().steps
        };
        assert!(steps > 4 * topics.len(), "{name}: {steps} steps");
        for stop_after in 1..=steps {
            let (_tmp, data_dir) = copy_of(name);
            let stopped = upgrade_data_dir(&data_dir, Some(stop_after));
            assert!(stopped.is_err(), "{name}: no stop after step {stop_after}");
            // Until the last step (the marker) the data dir is still refused.
            assert_eq!(
                open(&data_dir).is_ok(),
                stop_after == steps,
                "{name}: open after a stop after step {stop_after}"
            );
            let resumed = upgrade_data_dir(&data_dir, None).unwrap();
            assert_eq!(resumed.already_current, stop_after == steps);
            assert_reads_as_before(&data_dir, name, topics);
        }
    }
}

/// The tombstone the old cleaner kept in `compacted` keeps the delete horizon it had, and
/// goes at the first pass once that time has come, as Kafka's cleaner drops a tombstone
/// past its horizon: the upgrade carries the horizon, never restarts it. Both sides of it
/// are readings of a held clock, so the test means the same on any day.
#[test]
fn an_upgraded_tombstone_goes_when_its_old_delete_horizon_passes() {
    let (_tmp, data_dir) = copy_of("clean");
    upgrade_data_dir(&data_dir, None).unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let engine = open_at(&data_dir, &clock).unwrap();
    let t = engine.topic("compacted").unwrap();
    let horizons: Vec<(u64, i64)> = batches(&t)
        .iter()
        .filter_map(|(h, _)| h.delete_horizon_ms().map(|ms| (h.base_offset, ms)))
        .collect();
    let [(9, horizon)] = horizons[..] else {
        panic!("one horizon, on the tombstone at offset 9: {horizons:?}");
    };
    assert_eq!(
        horizon,
        legacy_horizon("clean/compacted-0"),
        "the old horizon"
    );
    let mut expected = cat_string(&t);
    assert!(expected.starts_with("a:NULL\n"), "{expected:?}");
    let mut size: u64 = expected_size("clean", "compacted").parse().unwrap();

    // The old cleaner left nothing dirty: a pass needs new records in sealed segments
    // (internal.segment.bytes=250 rolls every few records).
    let mut map = OffsetMap::new(1 << 20, 0.9);
    let mut pass_at = |now: i64, keys: std::ops::Range<u32>, expected: &mut String| {
        clock.set(now);
        for k in keys {
            let line = format!("e{k}:v\n");
            t.append_lines(line.as_bytes()).unwrap();
            expected.push_str(&line);
            size += line.len() as u64;
        }
        assert!(
            engine.run_cleaner_once_with(&mut map).is_some(),
            "no pass at {now}"
        );
    };
    pass_at(horizon - 1, 0..5, &mut expected);
    assert_eq!(
        cat_string(&t),
        expected,
        "a pass before the horizon keeps the tombstone"
    );
    pass_at(horizon, 5..10, &mut expected);
    assert_eq!(
        cat_string(&t),
        expected.strip_prefix("a:NULL\n").unwrap(),
        "a pass at the horizon drops the tombstone and nothing else"
    );
    assert_eq!(t.stream_len(), size, "the stream keeps its size");
    engine.shutdown().unwrap();
}

fn expected_size(dir: &str, topic: &str) -> String {
    fs::read_to_string(fixture().join(format!("expected/{dir}/{topic}.size")))
        .unwrap()
        .trim()
        .to_string()
}

/// The delete horizon in the old segments of a partition directory, read from the bytes
/// as the old format laid them out (FORMAT.md at 2a602bc: base offset at 0, the length
/// after its field at 8, attributes at 17 with bit 0 for a horizon, the horizon at 39),
/// not through the upgrade's own decoder.
fn legacy_horizon(partition_dir: &str) -> i64 {
    let mut found = Vec::new();
    for entry in fs::read_dir(fixture().join(partition_dir)).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "log") {
            continue;
        }
        let bytes = fs::read(&path).unwrap();
        let mut at = 0;
        while at + 47 <= bytes.len() {
            let length = u32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
            let attributes = u16::from_be_bytes(bytes[at + 17..at + 19].try_into().unwrap());
            if attributes & 1 != 0 {
                found.push(i64::from_be_bytes(
                    bytes[at + 39..at + 47].try_into().unwrap(),
                ));
            }
            at += 12 + length;
        }
    }
    let [horizon] = found[..] else {
        panic!("{partition_dir}: one old batch with a horizon, found {found:?}");
    };
    horizon
}
