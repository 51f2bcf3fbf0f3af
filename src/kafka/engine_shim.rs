//! TEMPORARY, this branch only: the engine calls colleagues A (produce path) and B (read
//! side) are adding, with their agreed shapes, over what the engine has today, so the
//! adapter and its tests run before their branches land. Each function is replaced by the
//! engine method of the same name at the merge (`engine_shim::fetch(&topic, ..)` becomes
//! `topic.fetch(..)`), and this file is deleted. Known gaps while it lives: produced
//! records keep only their values (keys, headers, timestamps, producer ids and
//! compression are A's `LogValidator`), timestamp queries of ListOffsets answer no offset,
//! DeleteRecords moves nothing, and the long-poll wait polls.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use crate::engine::format::{decode_header, records_section, RecordIter, BATCH_HEADER_BYTES};
use crate::engine::{EngineError, Result, Topic};
use crate::kafka::deadline::Deadline;

/// A's `ProduceOutcome`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ProduceOutcome {
    pub(crate) base_offset: u64,
    pub(crate) log_append_time_ms: i64,
    pub(crate) log_start_offset: u64,
}

/// A's `Topic::append_produced`.
pub(crate) fn append_produced(topic: &Topic, records: &[u8]) -> Result<ProduceOutcome> {
    let invalid = |message: String| EngineError::InvalidRecord { message };
    let mut lines = Vec::new();
    let mut rest = records;
    while !rest.is_empty() {
        let header = decode_header(rest).map_err(|e| invalid(e.to_string()))?;
        if rest.len() < header.size {
            return Err(invalid("truncated batch".into()));
        }
        let mut scratch = Vec::new();
        let section = records_section(&header, &rest[..header.size], &mut scratch)
            .map_err(|e| invalid(e.to_string()))?;
        for record in RecordIter::new(&header, section) {
            let record = record.map_err(|e| invalid(e.to_string()))?;
            lines.extend_from_slice(record.value.unwrap_or_default());
            lines.push(b'\n');
        }
        rest = &rest[header.size..];
    }
    let info = topic.append_lines_info(&lines)?;
    Ok(ProduceOutcome {
        base_offset: info.first_offset,
        log_append_time_ms: -1,
        log_start_offset: topic.log().log_start_offset(),
    })
}

/// A's `Engine::init_producer_id`.
pub(crate) fn init_producer_id() -> Result<(i64, i16)> {
    static NEXT: AtomicI64 = AtomicI64::new(1000);
    Ok((NEXT.fetch_add(1, Ordering::Relaxed), 0))
}

/// B's `FetchedRange`.
#[derive(Debug)]
pub(crate) struct FetchedRange {
    pub(crate) file: File,
    pub(crate) position: u64,
    pub(crate) len: u64,
}

/// B's `FetchOutcome`.
#[derive(Debug)]
pub(crate) struct FetchOutcome {
    pub(crate) ranges: Vec<FetchedRange>,
    pub(crate) high_watermark: u64,
    pub(crate) log_start_offset: u64,
}

/// B's `Topic::fetch`: whole batches from the one holding `offset`, about `max_bytes`
/// (at least one batch when there is one).
pub(crate) fn fetch(topic: &Topic, offset: u64, max_bytes: u64) -> Result<FetchOutcome> {
    let snapshot = topic.log().snapshot();
    let end = topic.log().log_end_offset();
    if offset < snapshot.log_start_offset || offset > end {
        return Err(EngineError::InvalidRecord {
            message: format!("offset {offset} out of range"),
        });
    }
    let mut ranges = Vec::new();
    let mut taken = 0u64;
    for segment in snapshot.segments.iter() {
        if segment.next_offset() <= offset || taken >= max_bytes.max(1) {
            continue;
        }
        let path = segment.log_path();
        let file = File::open(&path).map_err(|e| EngineError::io("open segment", e))?;
        let size = segment.size();
        let (mut pos, mut start) = (0u64, None);
        let mut header = [0u8; BATCH_HEADER_BYTES];
        while pos + BATCH_HEADER_BYTES as u64 <= size {
            file.read_exact_at(&mut header, pos)
                .map_err(|e| EngineError::io("read segment", e))?;
            let batch = decode_header(&header).map_err(|e| EngineError::InvalidRecord {
                message: e.to_string(),
            })?;
            if batch.last_offset() >= offset {
                if start.is_none() {
                    start = Some(pos);
                } else if taken + batch.size as u64 > max_bytes {
                    break;
                }
                taken += batch.size as u64;
            }
            pos += batch.size as u64;
        }
        if let Some(start) = start {
            ranges.push(FetchedRange {
                file,
                position: start,
                len: pos - start,
            });
        }
    }
    Ok(FetchOutcome {
        ranges,
        high_watermark: end,
        log_start_offset: snapshot.log_start_offset,
    })
}

/// B's `OffsetQuery`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OffsetQuery {
    Earliest,
    Latest,
    MaxTimestamp,
    Timestamp(i64),
}

/// B's `Topic::list_offset`.
pub(crate) fn list_offset(topic: &Topic, query: OffsetQuery) -> Result<Option<(u64, i64)>> {
    Ok(match query {
        OffsetQuery::Earliest => Some((topic.log().log_start_offset(), -1)),
        OffsetQuery::Latest => Some((topic.log().log_end_offset(), -1)),
        OffsetQuery::MaxTimestamp | OffsetQuery::Timestamp(_) => None,
    })
}

/// B's `Topic::delete_records_before`.
pub(crate) fn delete_records_before(topic: &Topic, _offset: u64) -> Result<u64> {
    Ok(topic.log().log_start_offset())
}

/// B's `Engine::append_watch`: returns once the topic's log end passes `offset` or at
/// `deadline`.
#[allow(clippy::disallowed_methods)] // TEMPORARY: polls until B's append watch lands
pub(crate) fn wait_for_append(topic: &Topic, offset: u64, deadline: Deadline) {
    while topic.log().log_end_offset() <= offset && !deadline.passed() {
        std::thread::sleep(Duration::from_millis(2));
    }
}
