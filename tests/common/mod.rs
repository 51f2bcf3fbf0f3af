//! Helpers shared by the engine integration tests: a temp data dir, a manual clock and
//! a reader that drains a topic's `log` stream the way `cat` does.
#![allow(dead_code)]

// The engine is public only with this feature (see src/lib.rs); say so rather than leave
// a reader with "module `engine` is private".
#[cfg(not(feature = "internals"))]
compile_error!(
    "the integration tests drive the engine: run them with `--features internals` (scripts/test does)"
);

pub mod kafka;

use std::fs;
use std::path::Path;
use std::sync::Arc;

use kpfs::engine::format::{decode_batch, BatchHeader, Record};
use kpfs::engine::{
    BrokerConfig, Engine, EngineOptions, ManualClock, Partition, Topic, TopicCursor,
};

pub const T0: i64 = 1_764_430_000_000;

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub clock: Arc<ManualClock>,
    pub engine: Option<Engine>,
}

impl Fixture {
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let engine = open(dir.path(), &clock);
        Fixture {
            dir,
            clock,
            engine: Some(engine),
        }
    }

    pub fn engine(&self) -> &Engine {
        self.engine.as_ref().unwrap()
    }

    pub fn topic(&self, name: &str) -> Arc<Topic> {
        match self.engine().topic(name) {
            Some(t) => t,
            None => self.engine().create_topic(name, 1).unwrap(),
        }
    }

    /// Clean shutdown and reopen.
    pub fn reopen(&mut self) {
        let e = self.engine.take().unwrap();
        e.shutdown().unwrap();
        drop(e);
        self.engine = Some(open(self.dir.path(), &self.clock));
    }

    /// Reopen without a clean shutdown (as after kill -9).
    pub fn crash_and_reopen(&mut self) {
        let e = self.engine.take().unwrap();
        drop(e);
        self.engine = Some(open(self.dir.path(), &self.clock));
    }

    pub fn advance(&self, ms: i64) {
        self.clock.advance(ms);
    }
}

pub fn open(dir: &Path, clock: &Arc<ManualClock>) -> Engine {
    Engine::open(
        dir,
        BrokerConfig::defaults(),
        clock.clone(),
        EngineOptions::default(),
    )
    .unwrap()
}

/// Reads the whole `log` stream with `chunk`-byte reads, as `cat` would.
pub fn cat(topic: &Topic, chunk: usize) -> Vec<u8> {
    let mut cursor = TopicCursor::default();
    let mut out = Vec::new();
    loop {
        let got = topic
            .read_log(&mut cursor, out.len() as u64, chunk)
            .unwrap();
        if got.is_empty() {
            return out;
        }
        assert!(got.len() <= chunk);
        out.extend_from_slice(&got);
    }
}

pub fn cat_string(topic: &Topic) -> String {
    String::from_utf8(cat(topic, 128 << 10)).unwrap()
}

/// Partition 0 of a topic: most tests are of topics of one partition.
pub trait PartitionZero {
    fn p0(&self) -> Arc<Partition>;
}

impl PartitionZero for Topic {
    fn p0(&self) -> Arc<Partition> {
        self.partition(0).expect("every topic has partition 0")
    }
}

pub fn set(topic: &Topic, text: &str) {
    topic.update_config(text.as_bytes()).unwrap();
}

/// Property tests explore new random cases on every developer run, but CI runs a fixed
/// seed so a landing never depends on luck (new cases are found locally, then kept as
/// named regression tests).
pub fn proptest_seed() -> proptest::test_runner::RngSeed {
    if std::env::var_os("CI").is_some() {
        proptest::test_runner::RngSeed::Fixed(0x6b70_6673)
    } else {
        proptest::test_runner::RngSeed::Random
    }
}

/// A copy of a data directory as std::fs reads it (the page cache: what a crash of kpfs,
/// not of the machine, leaves).
pub fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// Every batch on disk of a topic, decoded, in order.
pub fn batches(t: &Topic) -> Vec<(BatchHeader, Vec<Record>)> {
    let mut out = Vec::new();
    for s in t.partition(0).unwrap().log().snapshot().segments.iter() {
        let bytes = s.read_at(0, s.size() as usize).unwrap();
        let mut at = 0;
        while at < bytes.len() {
            let (h, records) = decode_batch(&bytes[at..]).unwrap();
            at += h.size;
            out.push((h, records));
        }
    }
    out
}
