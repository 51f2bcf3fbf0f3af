//! Retention planning: which oldest segments Kafka's `deleteOldSegments` would delete.
//! Pure functions over segment facts, so the rules are tested without files; the topic
//! applies a plan one step at a time, re-reading the segment list between steps as Kafka
//! does (log-start-offset breach, then size, then time).

/// What retention needs to know about one segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SegmentFacts {
    pub(crate) base_offset: u64,
    pub(crate) size: u64,
    /// Kafka's `largestTimestamp()`: max record timestamp, else the file's mtime.
    pub(crate) largest_timestamp: i64,
    pub(crate) is_empty: bool,
}

/// Why segments were deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum DeletionCause {
    LogStartOffset {
        log_start_offset: u64,
    },
    Size {
        total_bytes: u64,
        retention_bytes: i64,
    },
    Time {
        retention_ms: i64,
        now_ms: i64,
    },
}

/// Kafka's `deletableSegments`: the longest oldest-first prefix whose members satisfy
/// `deletable(segment, next)`, never including an empty last segment. With one replica
/// the high watermark equals the log end offset, so the HW bound never stops a segment.
fn deletable_prefix(
    segments: &[SegmentFacts],
    mut deletable: impl FnMut(&SegmentFacts, Option<&SegmentFacts>) -> bool,
) -> usize {
    let mut n = 0;
    for (i, seg) in segments.iter().enumerate() {
        let next = segments.get(i + 1);
        let last_and_empty = next.is_none() && seg.is_empty;
        if last_and_empty || !deletable(seg, next) {
            break;
        }
        n += 1;
    }
    n
}

/// Segments wholly below the log start offset (a next segment starts at or below it).
pub(crate) fn log_start_breach(segments: &[SegmentFacts], log_start_offset: u64) -> usize {
    deletable_prefix(segments, |_, next| {
        next.is_some_and(|n| n.base_offset <= log_start_offset)
    })
}

/// `diff = total - retention.bytes`; a segment goes while `diff - its size >= 0`.
pub(crate) fn size_breach(segments: &[SegmentFacts], retention_bytes: i64) -> usize {
    if retention_bytes < 0 {
        return 0;
    }
    let total: u64 = segments.iter().map(|s| s.size).sum();
    if total < retention_bytes as u64 {
        return 0;
    }
    let mut diff = total as i128 - i128::from(retention_bytes);
    deletable_prefix(segments, |seg, _| {
        if diff - seg.size as i128 >= 0 {
            diff -= seg.size as i128;
            true
        } else {
            false
        }
    })
}

/// `now - largest timestamp > retention.ms` (strict).
pub(crate) fn time_breach(segments: &[SegmentFacts], retention_ms: i64, now_ms: i64) -> usize {
    if retention_ms < 0 {
        return 0;
    }
    deletable_prefix(segments, |seg, _| {
        now_ms - seg.largest_timestamp > retention_ms
    })
}

/// The first segment holding a timestamp in the future, which can never expire by time.
pub(crate) fn future_timestamp_segment(segments: &[SegmentFacts], now_ms: i64) -> Option<u64> {
    segments
        .iter()
        .find(|s| !s.is_empty && s.largest_timestamp > now_ms)
        .map(|s| s.base_offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(base: u64, size: u64, ts: i64) -> SegmentFacts {
        SegmentFacts {
            base_offset: base,
            size,
            largest_timestamp: ts,
            is_empty: size == 0,
        }
    }

    #[test]
    fn size_rule_is_kafkas_arithmetic() {
        // The seed's size demo: 4 segments, retention.bytes=300: the oldest three go.
        let segs = [
            seg(0, 415, 1),
            seg(5, 415, 2),
            seg(10, 415, 3),
            seg(15, 415, 4),
        ];
        assert_eq!(size_breach(&segs, 300), 3);
        // diff = 1660 - 1000 = 660: the first goes (245 left), the second would make it negative.
        assert_eq!(size_breach(&segs, 1000), 1);
        assert_eq!(
            size_breach(&segs, 1660),
            0,
            "exactly at the limit: total < limit is false but diff 0"
        );
        assert_eq!(size_breach(&segs, 1661), 0);
        assert_eq!(size_breach(&segs, -1), 0);
        assert_eq!(
            size_breach(&segs, 0),
            4,
            "retention.bytes=0 deletes every non-empty segment"
        );
    }

    #[test]
    fn empty_last_segment_is_never_deleted() {
        let segs = [seg(0, 100, 1), seg(5, 0, -1)];
        assert_eq!(size_breach(&segs, 0), 1);
        assert_eq!(time_breach(&segs, 10, 1_000_000), 1);
    }

    #[test]
    fn time_rule_is_strict_and_prefix_only() {
        let segs = [seg(0, 10, 1000), seg(5, 10, 5000), seg(10, 10, 1000)];
        assert_eq!(
            time_breach(&segs, 100, 1100),
            0,
            "1100-1000 = 100 is not > 100"
        );
        assert_eq!(
            time_breach(&segs, 100, 1101),
            1,
            "stops at the first young segment"
        );
        assert_eq!(
            time_breach(&segs, 100, 5101),
            3,
            "the non-empty active segment too"
        );
        assert_eq!(time_breach(&segs, -1, i64::MAX), 0);
    }

    #[test]
    fn log_start_breach_needs_a_next_segment_at_or_below_it() {
        let segs = [seg(0, 10, 1), seg(5, 10, 1), seg(10, 10, 1)];
        assert_eq!(log_start_breach(&segs, 0), 0);
        assert_eq!(log_start_breach(&segs, 7), 1);
        assert_eq!(log_start_breach(&segs, 10), 2);
        assert_eq!(
            log_start_breach(&segs, 99),
            2,
            "the last segment never goes by this rule"
        );
    }

    #[test]
    fn future_timestamps_are_reported() {
        let segs = [seg(0, 10, 1), seg(5, 10, 9_999)];
        assert_eq!(future_timestamp_segment(&segs, 5_000), Some(5));
        assert_eq!(time_breach(&segs, 10, 5_000), 1);
    }
}
