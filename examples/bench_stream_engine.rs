//! The engine's own cost of the streaming scenarios, without FUSE: appends N bytes of
//! L-byte lines to a topic in 1 MiB writes through `Topic::append_lines`, as the mount
//! hands them over, then reads the `log` stream back in 1 MiB reads through
//! `Topic::read_log`. Prints nanoseconds per record and MB/s of each, best of R rounds:
//! kpfs's own work, apart from the FUSE round trip that scenarios 1 and 4 of
//! `scripts/bench` also pay (docs/PERFORMANCE.md, "The hot loops of append and read").
//!
//! ```text
//! cargo run --release --features internals --example bench_stream_engine -- DATA_DIR [BYTES] [LINE_BYTES] [ROUNDS]
//! ```
#![allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]

use std::sync::Arc;
use std::time::Instant;

use kpfs::engine::{BrokerConfig, Engine, EngineOptions, ManualClock, TopicCursor};

const IO_BYTES: usize = 1 << 20;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = std::path::PathBuf::from(args.get(1).expect("DATA_DIR"));
    let bytes: usize = args.get(2).map_or(256 << 20, |b| b.parse().expect("BYTES"));
    let line_bytes: usize = args.get(3).map_or(100, |l| l.parse().expect("LINE_BYTES"));
    let rounds: usize = args.get(4).map_or(3, |r| r.parse().expect("ROUNDS"));
    assert!(
        line_bytes >= 2,
        "a line is at least one byte and its newline"
    );
    // One write's worth of whole lines, each line distinct in its first bytes.
    let lines_per_write = IO_BYTES / line_bytes;
    let mut write = Vec::with_capacity(lines_per_write * line_bytes);
    for i in 0..lines_per_write {
        let start = write.len();
        write.extend_from_slice(format!("{i:09}").as_bytes());
        write.resize(start + line_bytes - 1, b'x');
        write.push(b'\n');
    }
    let writes = bytes.div_ceil(write.len());
    let records = (writes * lines_per_write) as f64;
    let total = (writes * write.len()) as f64;
    let (mut best_append, mut best_read) = (f64::MAX, f64::MAX);
    for round in 0..rounds {
        let data = dir.join(format!("round-{round}"));
        let clock = Arc::new(ManualClock::new(1_764_430_000_000));
        let engine = Engine::open(
            &data,
            BrokerConfig::defaults(),
            clock,
            EngineOptions::default(),
        )
        .expect("open engine");
        let topic = engine.create_topic("stream", 1).expect("create topic");
        topic
            .update_config(b"segment.bytes=2147483647")
            .expect("config");
        let started = Instant::now();
        for _ in 0..writes {
            topic.append_lines(&write).expect("append");
        }
        best_append = best_append.min(started.elapsed().as_secs_f64());
        let (mut cursor, mut pos) = (TopicCursor::default(), 0u64);
        let started = Instant::now();
        loop {
            let got = topic.read_log(&mut cursor, pos, IO_BYTES).expect("read");
            if got.is_empty() {
                break;
            }
            pos += got.len() as u64;
        }
        best_read = best_read.min(started.elapsed().as_secs_f64());
        assert_eq!(pos as f64, total, "read back every byte appended");
        drop(topic);
        drop(engine);
        std::fs::remove_dir_all(&data).expect("remove round's data");
    }
    for (what, secs) in [("append", best_append), ("read", best_read)] {
        println!("{what}_ns_per_record: {:.1}", secs * 1e9 / records);
        println!("{what}_mb_per_s: {:.1}", total / secs / 1e6);
    }
}
