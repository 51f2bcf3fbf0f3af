//! Applying retention to a topic (Kafka's `deleteOldSegments`): the pure plans of
//! [`crate::engine::retention`] one step at a time, each on a fresh segment list, with
//! the events, counters and log lines that say why each segment went.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::engine::config::TopicConfig;
use crate::engine::error::Result;
use crate::engine::log::DeletedSegment;
use crate::engine::retention::{self, DeletionCause, SegmentFacts};
use crate::engine::segment::Segment;

use super::Partition;

/// Segments deleted by one retention step.
#[derive(Debug)]
pub(crate) struct RetentionDeletion {
    pub(crate) segments: Vec<DeletedSegment>,
}

/// See [`Partition::retention_view`].
struct RetentionView {
    facts: Vec<SegmentFacts>,
    segments: Arc<Vec<Arc<Segment>>>,
    log_end: u64,
}

impl Partition {
    /// Retention's view of the segments, taken again (see [`Partition::refresh`]) before each
    /// step only if the log changed since.
    fn retention_view(&self) -> RetentionView {
        let snap = self.log.snapshot();
        RetentionView {
            facts: snap.segments.iter().map(|s| retention_facts(s)).collect(),
            log_end: snap.active().next_offset(),
            segments: snap.segments,
        }
    }

    /// A step decides on facts no append, roll, deletion or cleaner swap has overtaken
    /// (all of them change the segment list or the log end), and a pass over 100,000
    /// idle segments reads each segment's facts once, not once per step.
    fn refresh(&self, view: &mut RetentionView) {
        let snap = self.log.snapshot();
        if !Arc::ptr_eq(&snap.segments, &view.segments)
            || snap.active().next_offset() != view.log_end
        {
            *view = self.retention_view();
        }
    }

    /// Kafka's `deleteOldSegments`: log-start breach, then (with `delete` in the policy)
    /// size, then time, each step re-reading the segment list. A `compact`-only topic gets
    /// the log-start rule alone.
    pub(crate) fn run_retention(&self) -> Result<Vec<RetentionDeletion>> {
        let config = self.config();
        let mut done = Vec::new();
        let now = self.topic.clock.now_ms();
        let lso = self.log.log_start_offset();
        let mut view = self.retention_view();
        let n = retention::log_start_breach(&view.facts, lso);
        let cause = DeletionCause::LogStartOffset {
            log_start_offset: lso,
        };
        self.apply_deletion(n, cause, &config, &view.facts, &mut done)?;
        if config.cleanup_policy.delete {
            self.refresh(&mut view);
            let total: u64 = view.facts.iter().map(|s| s.size).sum();
            let n = retention::size_breach(&view.facts, config.retention_bytes);
            let cause = DeletionCause::Size {
                total_bytes: total,
                retention_bytes: config.retention_bytes,
            };
            self.apply_deletion(n, cause, &config, &view.facts, &mut done)?;
            self.refresh(&mut view);
            let n = retention::time_breach(&view.facts, config.retention_ms, now);
            let cause = DeletionCause::Time {
                retention_ms: config.retention_ms,
                now_ms: now,
            };
            self.apply_deletion(n, cause, &config, &view.facts, &mut done)?;
            self.refresh(&mut view);
            let future = retention::future_timestamp_segment(&view.facts, now);
            let previous = self
                .future_timestamp_segment
                .swap(future.map_or(-1, |b| b as i64), Ordering::Relaxed);
            if let Some(base) = future {
                if previous != base as i64 && config.retention_ms >= 0 {
                    tracing::warn!(
                        partition = self.log.partition(),
                        base_offset = base,
                        "segment contains future timestamp(s), making it ineligible to be deleted"
                    );
                }
            }
        }
        Ok(done)
    }

    fn apply_deletion(
        &self,
        count: usize,
        cause: DeletionCause,
        config: &TopicConfig,
        facts: &[SegmentFacts],
        done: &mut Vec<RetentionDeletion>,
    ) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        let last = facts[count - 1].base_offset;
        let reasons = explain_deletion(facts, count, &cause);
        let rolls_first = count == facts.len();
        let log_end = self.log.log_end_offset();
        let segments = self.log.delete_segments_through(last, config)?;
        if rolls_first {
            self.record_event("roll",
                &format!("new segment at offset {log_end}: reason=retention: every segment, the active one included, is deletable, so an empty active segment is rolled first"),
            );
        }
        for reason in &reasons {
            self.record_event(
                "delete",
                &format!(
                    "{reason}; renamed .deleted, removed after file.delete.delay.ms {}",
                    config.file_delete_delay_ms
                ),
            );
        }
        let counter = match cause {
            DeletionCause::LogStartOffset { .. } => &self.stats.segments_deleted_log_start,
            DeletionCause::Size { .. } => &self.stats.segments_deleted_size,
            DeletionCause::Time { .. } => &self.stats.segments_deleted_time,
        };
        counter.fetch_add(segments.len() as u64, Ordering::Relaxed);
        tracing::info!(
            topic = self.log.partition(),
            segments = ?segments.iter().map(|d| d.segment.base_offset()).collect::<Vec<_>>(),
            cause = ?cause,
            log_start_offset = self.log.log_start_offset(),
            "deleting segments (renamed .deleted)"
        );
        done.push(RetentionDeletion { segments });
        Ok(())
    }
}

/// What retention decides on about `segment`.
fn retention_facts(segment: &Segment) -> SegmentFacts {
    let (size, largest_timestamp) = segment.size_and_largest_timestamp();
    SegmentFacts {
        base_offset: segment.base_offset(),
        size,
        largest_timestamp,
        is_empty: size == 0,
    }
}

/// One line per deleted segment saying which rule took it, with the numbers.
fn explain_deletion(facts: &[SegmentFacts], count: usize, cause: &DeletionCause) -> Vec<String> {
    let mut out = Vec::with_capacity(count);
    match cause {
        DeletionCause::Time {
            retention_ms,
            now_ms,
        } => {
            for f in &facts[..count] {
                out.push(format!(
                    "segment {} cause=time: largest timestamp {} ({}) is {} ms old, more than retention.ms {retention_ms}",
                    f.base_offset,
                    f.largest_timestamp,
                    crate::engine::clock::format_time_ms(f.largest_timestamp),
                    now_ms - f.largest_timestamp
                ));
            }
        }
        DeletionCause::Size {
            total_bytes,
            retention_bytes,
        } => {
            let mut diff = *total_bytes as i128 - i128::from(*retention_bytes);
            for f in &facts[..count] {
                out.push(format!(
                    "segment {} cause=size: partition is {diff} bytes over retention.bytes {retention_bytes} (total {total_bytes}) and {diff} - {} segment bytes >= 0",
                    f.base_offset, f.size
                ));
                diff -= f.size as i128;
            }
        }
        DeletionCause::LogStartOffset { log_start_offset } => {
            for (i, f) in facts[..count].iter().enumerate() {
                out.push(format!(
                    "segment {} cause=log_start_offset: the next segment starts at {} <= log start offset {log_start_offset}",
                    f.base_offset,
                    facts.get(i + 1).map_or(0, |n| n.base_offset)
                ));
            }
        }
    }
    out
}
