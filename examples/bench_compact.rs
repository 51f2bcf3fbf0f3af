//! Cleaner throughput and memory: N bytes of 100-byte keyed records over K keys in a
//! compacted topic, then cleaner passes until nothing is due. Run by
//! `scripts/bench`; prints one `key: value` line per figure.
//!
//! ```text
//! cargo run --release --features internals --example bench_compact -- DATA_DIR [BYTES] [KEYS]
//! ```
#![allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]

use std::sync::Arc;
use std::time::Instant;

use kpfs::engine::offset_map::OFFSET_MAP_ENTRY_BYTES;
use kpfs::engine::{BrokerConfig, Engine, EngineOptions, ManualClock};

fn rss_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = std::path::PathBuf::from(args.get(1).expect("DATA_DIR"));
    let bytes: u64 = args.get(2).map_or(1 << 30, |b| b.parse().expect("BYTES"));
    let keys: u64 = args.get(3).map_or(1_000_000, |k| k.parse().expect("KEYS"));
    let clock = Arc::new(ManualClock::new(1_764_430_000_000));
    let engine = Engine::open(
        &dir,
        BrokerConfig::defaults(),
        clock.clone(),
        EngineOptions::default(),
    )
    .expect("open engine");
    let topic = engine
        .create_topic("compact-bench", 1)
        .expect("create topic");
    topic
        .update_config(b"cleanup.policy=compact\nparse.key=true\nkey.separator=:\nsegment.bytes=67108864\nmin.cleanable.dirty.ratio=0.01")
        .expect("config");
    // Lines of exactly 100 bytes: "k0000123:" + value padding + "\n".
    let records = bytes / 100;
    let mut chunk = Vec::with_capacity(1 << 20);
    let started = Instant::now();
    for i in 0..records {
        let key = i % keys;
        let head = format!("k{key:07}:v{i:012}-");
        chunk.extend_from_slice(head.as_bytes());
        chunk.resize(chunk.len() + 99 - head.len(), b'x');
        chunk.push(b'\n');
        if chunk.len() >= (1 << 20) - 100 {
            topic.append_lines(&chunk).expect("append");
            chunk.clear();
        }
    }
    if !chunk.is_empty() {
        topic.append_lines(&chunk).expect("append");
    }
    // One more record after a roll so every bulk segment is below the active one.
    clock.advance(8 * 86_400_000);
    topic.append_lines(b"k-last:roll\n").expect("append");
    let append_secs = started.elapsed().as_secs_f64();
    let log_bytes = topic.partition(0).unwrap().log().size_bytes();
    println!("records: {records}");
    println!("keys: {keys}");
    println!("log_bytes_before: {log_bytes}");
    println!("append_secs: {append_secs:.3}");
    // Measure the cleaner's own peak: reset the high-water mark first.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let rss_before = rss_kib("VmRSS:");
    let mut passes = 0;
    let (mut read, mut written, mut removed) = (0u64, 0u64, 0u64);
    let mut utilization: f64 = 0.0;
    let started = Instant::now();
    while let Some((_, stats)) = engine.run_cleaner_once() {
        passes += 1;
        read += stats.bytes_read;
        written += stats.bytes_written;
        removed += stats.records_removed;
        utilization = utilization.max(stats.buffer_utilization);
    }
    let clean_secs = started.elapsed().as_secs_f64();
    let peak = rss_kib("VmHWM:");
    let map_bytes = engine.broker_config().cleaner_dedupe_buffer_size();
    println!("passes: {passes}");
    println!("clean_secs: {clean_secs:.3}");
    println!(
        "cleaner_read_mb_per_s: {:.1}",
        read as f64 / clean_secs / 1e6
    );
    println!("bytes_read: {read}");
    println!("bytes_written: {written}");
    println!(
        "recopy_percent: {:.1}",
        100.0 * written as f64 / read.max(1) as f64
    );
    println!("records_removed: {removed}");
    println!("map_bytes: {map_bytes}");
    println!("map_bytes_per_key: {OFFSET_MAP_ENTRY_BYTES}");
    println!("map_utilization_percent: {:.1}", utilization * 100.0);
    println!("rss_before_kib: {rss_before}");
    println!("peak_rss_kib: {peak}");
    println!(
        "log_bytes_after: {}",
        topic.partition(0).unwrap().log().size_bytes()
    );
    engine.shutdown().expect("shutdown");
}
