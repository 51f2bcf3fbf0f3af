//! Data for the mount-time benchmark: TOPICS topics of PARTITIONS partitions (default 1)
//! holding BYTES of 100-byte lines in total (each chunk of lines to the next partition in
//! turn, as keyless writes go), written through the engine (no FUSE round trips, one thread per core), then
//! closed cleanly, as `kpfs umount` leaves a data directory. Run by `scripts/bench`.
//!
//! ```text
//! cargo run --release --features internals --example bench_mount_data -- DATA_DIR TOPICS BYTES [PARTITIONS]
//! ```
#![allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]

use std::sync::Arc;
use std::time::Instant;

use kpfs::engine::{BrokerConfig, Engine, EngineOptions, SystemClock};

const LINE_BYTES: usize = 100;
const CHUNK_LINES: usize = 10_000;

/// `NAME:NUMBER:xxx...\n`, 100 bytes; the number in place rather than through `format!`,
/// which would cost more than the engine's append for 10 GiB of lines.
fn push_line(chunk: &mut Vec<u8>, name: &str, mut n: u64) {
    let start = chunk.len();
    chunk.extend_from_slice(name.as_bytes());
    chunk.push(b':');
    let digits = chunk.len();
    chunk.extend_from_slice(b"000000000000:");
    chunk.resize(start + LINE_BYTES - 1, b'x');
    chunk.push(b'\n');
    for d in (digits..digits + 12).rev() {
        chunk[d] = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(dir), Some(topics), Some(bytes)) = (
        args.get(1),
        args.get(2).and_then(|v| v.parse::<usize>().ok()),
        args.get(3).and_then(|v| v.parse::<u64>().ok()),
    ) else {
        eprintln!("usage: bench_mount_data DATA_DIR TOPICS BYTES [PARTITIONS]");
        std::process::exit(2);
    };
    let partitions: u32 = args.get(4).map_or(1, |v| v.parse().expect("PARTITIONS"));
    let engine = Engine::open(
        std::path::Path::new(dir),
        BrokerConfig::defaults(),
        Arc::new(SystemClock),
        EngineOptions::default(),
    )
    .expect("open engine");
    let lines_per_topic = bytes / LINE_BYTES as u64 / topics.max(1) as u64;
    let names: Vec<String> = (0..topics).map(|t| format!("t{t:04}")).collect();
    for name in &names {
        engine.create_topic(name, partitions).expect("create topic");
    }
    let started = Instant::now();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|scope| {
        for part in names.chunks(names.len().div_ceil(threads).max(1)) {
            let engine = &engine;
            scope.spawn(move || {
                let mut chunk = Vec::with_capacity(CHUNK_LINES * LINE_BYTES);
                for name in part {
                    let topic = engine.topic(name).expect("topic");
                    let mut written = 0;
                    while written < lines_per_topic {
                        let n = (lines_per_topic - written).min(CHUNK_LINES as u64);
                        chunk.clear();
                        for i in written..written + n {
                            push_line(&mut chunk, name, i);
                        }
                        topic.append_lines(&chunk).expect("append");
                        written += n;
                    }
                }
            });
        }
    });
    let secs = started.elapsed().as_secs_f64();
    engine.shutdown().expect("shutdown");
    println!("topics: {topics}");
    println!("partitions_per_topic: {partitions}");
    println!("records: {}", lines_per_topic * topics as u64);
    println!(
        "bytes: {}",
        lines_per_topic * topics as u64 * LINE_BYTES as u64
    );
    println!("write_secs: {secs:.1}");
}
