//! Cost of a retention pass with nothing to delete: TOPICS topics of PARTITIONS partitions
//! (default 1) of SEGMENTS segments each, then timed `run_retention_once` passes (the engine's own retention step, as the
//! retention thread runs it). Then two passes with deletions of different sizes: the
//! oldest segment of each partition of every tenth topic, then of every topic, so the cost
//! per deleted segment can be compared between them. Run by `scripts/bench`.
//!
//! ```text
//! cargo run --release --features internals --example bench_retention -- DATA_DIR [TOPICS] [SEGMENTS] [PARTITIONS]
//! ```
//! A setup failure (such as running out of descriptors) prints `setup failed: ...` and
//! exits with status 3, so the caller can tell it from a wrong result.
#![allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]

use std::sync::Arc;
use std::time::Instant;

use kpfs::engine::{BrokerConfig, Engine, EngineOptions, ManualClock};

fn setup_failed(what: &str, e: impl std::fmt::Display) -> ! {
    eprintln!("setup failed: {what}: {e}");
    std::process::exit(3);
}

/// Makes exactly the oldest segment of each partition of `topics` deletable by size (the
/// partitions of a topic are alike, and `retention.bytes` is per partition), then times
/// one retention pass. Returns (milliseconds, segments deleted).
fn timed_deletion(engine: &Engine, topics: &[String]) -> (f64, usize) {
    for name in topics {
        let topic = engine.topic(name).expect("topic");
        let total = topic.partition(0).unwrap().log().size_bytes();
        let oldest = topic.partition(0).unwrap().log().snapshot().segments[0].size();
        topic
            .update_config(format!("retention.bytes={}", total - oldest).as_bytes())
            .expect("config");
    }
    let t0 = Instant::now();
    let deleted = engine.run_retention_once();
    (t0.elapsed().as_secs_f64() * 1000.0, deleted)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = std::path::PathBuf::from(args.get(1).expect("DATA_DIR"));
    let topics: usize = args.get(2).map_or(1000, |v| v.parse().expect("TOPICS"));
    let segments: usize = args.get(3).map_or(100, |v| v.parse().expect("SEGMENTS"));
    let partitions: u32 = args.get(4).map_or(1, |v| v.parse().expect("PARTITIONS"));
    // The daemon's process setup: 1,000 topics hold 1,000 active `.log` files open.
    kpfs::cli::rlimit::raise_open_file_limit().expect("raise the open-file limit");
    let clock = Arc::new(ManualClock::new(1_764_430_000_000));
    let engine = Engine::open(
        &dir,
        BrokerConfig::defaults(),
        clock.clone(),
        EngineOptions::default(),
    )
    .unwrap_or_else(|e| setup_failed("open engine", e));
    let started = Instant::now();
    for t in 0..topics {
        let topic = engine
            .create_topic(&format!("t{t:05}"), partitions)
            .unwrap_or_else(|e| setup_failed(&format!("create topic {t}"), e));
        // Every append rolls: one record per segment; retention by time keeps them all.
        topic
            .update_config(
                b"internal.segment.bytes=100\nsegment.index.bytes=4096\nretention.ms=86400000",
            )
            .expect("config");
        for p in 0..partitions {
            for s in 0..segments {
                if let Err(e) = topic.append_lines_after(Some(p), b"", format!("{s}\n").as_bytes())
                {
                    setup_failed(&format!("topic {t}, partition {p}, segment {s}"), e);
                }
            }
        }
    }
    println!("topics: {topics}");
    println!("partitions_per_topic: {partitions}");
    println!("segments_per_partition: {segments}");
    println!("setup_secs: {:.1}", started.elapsed().as_secs_f64());
    let mut times = Vec::new();
    for _ in 0..5 {
        let t0 = Instant::now();
        let deleted = engine.run_retention_once();
        times.push(t0.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(deleted, 0, "nothing is old enough to delete");
    }
    times.sort_by(f64::total_cmp);
    println!(
        "pass_nothing_to_delete_ms_median: {:.2}",
        times[times.len() / 2]
    );
    println!(
        "pass_nothing_to_delete_ms_max: {:.2}",
        times[times.len() - 1]
    );
    let names = engine.topic_names();
    let tenth: Vec<String> = names.iter().step_by(10).cloned().collect();
    let (ms, deleted) = timed_deletion(&engine, &tenth);
    let per_topic = partitions as usize;
    assert_eq!(
        deleted,
        tenth.len() * per_topic,
        "one segment per partition of a chosen topic"
    );
    println!("pass_deleting_tenth_ms: {ms:.2}");
    println!("segments_deleted_tenth: {deleted}");
    println!(
        "ms_per_deleted_segment_tenth: {:.3}",
        ms / deleted.max(1) as f64
    );
    let (ms, deleted) = timed_deletion(&engine, &names);
    assert_eq!(
        deleted,
        names.len() * per_topic,
        "one segment per partition"
    );
    println!("pass_deleting_one_per_topic_ms: {ms:.2}");
    println!("segments_deleted: {deleted}");
    println!("ms_per_deleted_segment: {:.3}", ms / deleted.max(1) as f64);
}
