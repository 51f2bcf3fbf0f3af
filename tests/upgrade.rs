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

/// The broker the fixture was mounted with (its `.config` files name the override).
fn open(data_dir: &Path) -> Result<Engine, EngineError> {
    let broker = BrokerConfig::load(
        None,
        &[(
            "log.segment.delete.delay.ms".to_string(),
            "86400000".to_string(),
        )],
    )
    .unwrap();
    Engine::open(
        data_dir,
        broker,
        Arc::new(ManualClock::new(T0)),
        EngineOptions::default(),
    )
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
