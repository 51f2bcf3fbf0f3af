//! A topic's copy for backups (`.kpfs/snapshot/TOPIC/log`): each partition's capture
//! ([`LogCapture`]), laid end to end in partition order, so a topic of one partition
//! shows exactly its partition's capture, and one of several every visible record once,
//! partition 0's first. (Not the order of `TOPIC/log`: a copy is for restoring, and
//! `cat log >> TOPIC/log` sends each keyed record to its key's partition again.)
//!
//! Invariants: the size is the sum of the partitions' capture sizes, and a read at
//! `pos < size` returns `min(want, size - pos)` bytes, crossing from one partition's
//! capture into the next.

use std::sync::Arc;

use super::error::Result;
use super::partition::{LogCapture, LogCursor, Partition};
use super::topic::Topic;

/// The current captures of every partition of a topic, as one file.
#[derive(Debug)]
pub struct TopicCapture {
    parts: Vec<CapturedPartition>,
    len: u64,
}

#[derive(Debug)]
struct CapturedPartition {
    partition: Arc<Partition>,
    capture: Arc<LogCapture>,
    /// Where its bytes start in the topic's copy.
    start: u64,
}

/// Where one handle reads a [`TopicCapture`]: the partition's capture and its cursor.
#[derive(Debug, Default)]
pub struct TopicCaptureCursor {
    part: usize,
    inner: LogCursor,
}

impl Topic {
    /// Every partition's current capture ([`Partition::current_capture`]); `opening`
    /// counts a handle on each, until [`TopicCapture::closed`].
    pub fn current_capture(&self, opening: bool) -> Result<TopicCapture> {
        let mut parts: Vec<CapturedPartition> = Vec::new();
        let mut len = 0;
        for partition in self.partitions().iter() {
            let capture = match partition.current_capture(opening) {
                Ok(capture) => capture,
                Err(e) => {
                    if opening {
                        TopicCapture { parts, len }.closed();
                    }
                    return Err(e);
                }
            };
            let start = len;
            len += capture.size();
            parts.push(CapturedPartition {
                partition: Arc::clone(partition),
                capture,
                start,
            });
        }
        Ok(TopicCapture { parts, len })
    }
}

impl TopicCapture {
    pub fn size(&self) -> u64 {
        self.len
    }

    /// The time of the last append any partition had before its capture.
    pub fn modified_ms(&self) -> i64 {
        self.parts
            .iter()
            .map(|p| p.capture.modified_ms())
            .max()
            .unwrap_or(0)
    }

    /// Reads up to `want` bytes at `pos` through `cursor` (one per handle).
    pub fn read(&self, cursor: &mut TopicCaptureCursor, pos: u64, want: usize) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut at = pos;
        while out.len() < want && at < self.len {
            // The last part starting at or before `at`: a partition with an empty capture
            // starts where the next one does.
            let index = self.parts.partition_point(|p| p.start <= at) - 1;
            if cursor.part != index {
                cursor.part = index;
                cursor.inner = LogCursor::default();
            }
            let part = &self.parts[index];
            let bytes = part.partition.read_capture(
                &part.capture,
                &mut cursor.inner,
                at - part.start,
                want - out.len(),
            )?;
            if bytes.is_empty() {
                break;
            }
            at += bytes.len() as u64;
            out.extend_from_slice(&bytes);
        }
        Ok(out)
    }

    /// A handle reading the captures was closed.
    pub fn closed(&self) {
        for part in &self.parts {
            part.partition.capture_closed(&part.capture);
        }
    }
}
