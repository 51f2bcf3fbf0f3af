//! Cost of a retention pass with nothing to delete: TOPICS topics of SEGMENTS segments
//! each, then timed `run_retention_once` passes (the engine's own retention step, as the
//! retention thread runs it). Then a pass that deletes one segment per topic.
//!
//! ```text
//! cargo run --release --example bench_retention -- DATA_DIR [TOPICS] [SEGMENTS]
//! ```

use std::sync::Arc;
use std::time::Instant;

use kpfs::engine::{BrokerConfig, Engine, EngineOptions, ManualClock};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = std::path::PathBuf::from(args.get(1).expect("DATA_DIR"));
    let topics: usize = args.get(2).map_or(1000, |v| v.parse().expect("TOPICS"));
    let segments: usize = args.get(3).map_or(100, |v| v.parse().expect("SEGMENTS"));
    let clock = Arc::new(ManualClock::new(1_764_430_000_000));
    let engine = Engine::open(
        &dir,
        BrokerConfig::defaults(),
        clock.clone(),
        EngineOptions::default(),
    )
    .expect("open engine");
    let started = Instant::now();
    for t in 0..topics {
        let topic = engine
            .create_topic(&format!("t{t:05}"))
            .expect("create topic");
        // Every append rolls: one record per segment; retention by time keeps them all.
        topic
            .update_config(
                b"internal.segment.bytes=100\nsegment.index.bytes=4096\nretention.ms=86400000",
            )
            .expect("config");
        for s in 0..segments {
            topic
                .append_lines(format!("{s}\n").as_bytes())
                .expect("append");
        }
    }
    println!("topics: {topics}");
    println!("segments_per_topic: {segments}");
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
    // Make exactly the oldest segment of every topic deletable by size.
    for name in engine.topic_names() {
        let topic = engine.topic(&name).expect("topic");
        let total = topic.log().size_bytes();
        let oldest = topic.log().snapshot().segments[0].size();
        topic
            .update_config(format!("retention.bytes={}", total - oldest).as_bytes())
            .expect("config");
    }
    let t0 = Instant::now();
    let deleted = engine.run_retention_once();
    let ms = t0.elapsed().as_secs_f64() * 1000.0;
    println!("pass_deleting_one_per_topic_ms: {ms:.2}");
    println!("segments_deleted: {deleted}");
    println!("ms_per_deleted_segment: {:.3}", ms / deleted.max(1) as f64);
}
