//! Descriptors and mappings a data directory costs: one descriptor and two index maps
//! per topic (its active segment), none per sealed segment, whatever was read. The
//! descriptor limit here is 20,000 and vm.max_map_count 65,530, so a mount of 1,000
//! topics x 100 segments only fits if sealed segments hold neither. Its own test binary:
//! it counts the whole process's descriptors and mappings, so no other test may run
//! beside it.

mod common;

use common::*;

fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .count()
}

#[test]
fn sealed_segments_hold_no_descriptor_and_no_mapping() {
    const TOPICS: usize = 20;
    const SEGMENTS: usize = 30;
    let mut f = Fixture::new();
    let (fds_before, maps_before) = (open_descriptors(), mappings());
    for t in 0..TOPICS {
        let topic = f.topic(&format!("t{t}"));
        set(
            &topic,
            "internal.segment.bytes=200\nindex.interval.bytes=50",
        );
        for s in 0..SEGMENTS * 3 {
            topic
                .append_lines(format!("line-{s:04}-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n").as_bytes())
                .unwrap();
        }
        assert!(topic.p0().log().snapshot().segments.len() >= SEGMENTS);
        // Reading every segment, and seeking into the middle, maps sealed segments and
        // looks up their indexes; neither may stay behind.
        assert!(!cat_string(&topic).is_empty());
        let mut cursor = kpfs::engine::TopicCursor::default();
        topic.read_log(&mut cursor, 2000, 100).unwrap();
    }
    let check = |when: &str, fds_before: usize, maps_before: usize| {
        let fds = open_descriptors() - fds_before;
        let maps = mappings().saturating_sub(maps_before);
        assert!(
            fds <= TOPICS + 2,
            "{when}: {fds} descriptors for {TOPICS} topics of {SEGMENTS}+ segments"
        );
        assert!(
            maps <= 3 * TOPICS + 16,
            "{when}: {maps} mappings for {TOPICS} topics of {SEGMENTS}+ segments"
        );
    };
    check("after appends and reads", fds_before, maps_before);
    f.crash_and_reopen();
    check("after an unclean reopen", fds_before, maps_before);
    f.reopen();
    check("after a clean reopen", fds_before, maps_before);
}
