//! The read side Kafka clients use: Fetch (`UnifiedLog.read`: whole batches as file
//! ranges to send with sendfile(2)), ListOffsets (`fetchOffsetByTimestamp`) and
//! DeleteRecords (`maybeIncrementLogStartOffset`). One partition, one replica: the high
//! watermark is the log end offset. A `read_committed` reader (Kafka's `TXN_COMMITTED`
//! isolation) reads up to the last stable offset and is told the aborted transactions
//! of what it read, whose batches it drops.

use std::fs::File;

use crate::engine::error::{EngineError, OffsetRequest, Result};
use crate::engine::format::{decode_header, records_section, BatchHeader, RecordIter, RecordRef};
use crate::engine::limits::STALE_READ_RETRIES;
use crate::engine::log::LogSnapshot;
use crate::engine::txn_index::AbortedTxn;

use super::Partition;

/// Bytes of one segment's `.log` to send as they are: whole batches.
#[derive(Debug)]
pub struct FetchedRange {
    /// Opened for this fetch: it keeps the bytes readable after retention or the
    /// cleaner renamed or removed the segment.
    pub file: File,
    pub position: u64,
    pub len: u64,
}

/// What a fetch found: the batches from the one holding the fetch offset on, in offset
/// order, and the offsets a Fetch response carries beside them.
#[derive(Debug)]
pub struct FetchOutcome {
    pub ranges: Vec<FetchedRange>,
    pub high_watermark: u64,
    pub last_stable_offset: u64,
    pub log_start_offset: u64,
    /// For a `read_committed` fetch, the aborted transactions that overlap what it read
    /// (Kafka's `collectAbortedTransactions`), oldest first; `None` for `read_uncommitted`.
    pub aborted: Option<Vec<AbortedTxn>>,
}

/// Kafka's `IsolationLevel` of a Fetch or ListOffsets request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    /// Up to the high watermark, aborted records included.
    ReadUncommitted,
    /// Up to the last stable offset, with the aborted transactions to drop.
    ReadCommitted,
}

impl Isolation {
    /// The isolation a request's `isolation_level` byte names (1 = READ_COMMITTED).
    pub fn from_request(level: i8) -> Isolation {
        if level == 1 {
            Isolation::ReadCommitted
        } else {
            Isolation::ReadUncommitted
        }
    }
}

impl FetchOutcome {
    /// The bytes of all ranges.
    pub fn bytes(&self) -> u64 {
        self.ranges.iter().map(|r| r.len).sum()
    }
}

/// A ListOffsets query: the special timestamps of Kafka's `ListOffsetsRequest`, or a
/// time in ms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetQuery {
    /// -2: the log start offset.
    Earliest,
    /// -1: the log end offset.
    Latest,
    /// -3: the record with the largest timestamp.
    MaxTimestamp,
    /// -4: the start of the local log; without tiered storage, the log start.
    EarliestLocal,
    /// -5: the last offset in tiered storage; without it, none (Kafka answers -1).
    LatestTiered,
    /// The first record whose timestamp is at or above this.
    Timestamp(i64),
}

impl OffsetQuery {
    /// The query a ListOffsets request's timestamp field asks.
    pub fn from_request_timestamp(timestamp: i64) -> OffsetQuery {
        match timestamp {
            -1 => OffsetQuery::Latest,
            -2 => OffsetQuery::Earliest,
            -3 => OffsetQuery::MaxTimestamp,
            -4 => OffsetQuery::EarliestLocal,
            -5 => OffsetQuery::LatestTiered,
            t => OffsetQuery::Timestamp(t),
        }
    }
}

/// Kafka's `RecordBatch.NO_TIMESTAMP`: the earliest and latest answers carry none.
const NO_TIMESTAMP: i64 = -1;

impl Partition {
    /// Kafka's `UnifiedLog.read` up to the high watermark, with `minOneMessage`: the
    /// whole batches from the one holding `offset` (a fetch from inside a batch gets
    /// that batch; the client skips the records before its offset), at least that one
    /// even when it is over `max_bytes`, then as many whole batches as fit `max_bytes`,
    /// going on into later segments (Kafka stops at the segment's end). `offset` equal
    /// to the log end gives no range; below the log start or past the log end is
    /// [`EngineError::OffsetOutOfRange`].
    pub fn fetch(&self, offset: u64, max_bytes: u64) -> Result<FetchOutcome> {
        self.fetch_limited(offset, max_bytes, true, Isolation::ReadUncommitted)
    }

    /// [`Partition::fetch`] with Kafka's `minOneMessage` given: a Fetch of several
    /// partitions lets only its first partition with records go over the limit
    /// (`ReplicaManager.readFromLog`); without it a first batch over `max_bytes` gives
    /// no range, the offsets alone. Under [`Isolation::ReadCommitted`] the batches stop
    /// at the last stable offset (Kafka's `TXN_COMMITTED` read).
    pub fn fetch_limited(
        &self,
        offset: u64,
        max_bytes: u64,
        min_one: bool,
        isolation: Isolation,
    ) -> Result<FetchOutcome> {
        // The last stable offset before the segments (Kafka's `UnifiedLog.read` takes its
        // `maxOffsetMetadata` first too): the segments read after it hold every record
        // below it, and every abort decided below it in a `.txnindex`. Read the other way
        // round, an ABORT landing in between that rolled a new segment put its abort in a
        // segment this read did not have, and the aborted batches, below the last stable
        // offset, were served as committed.
        let lso = self.log.last_stable_offset();
        #[cfg(test)]
        self.log.between_stable_and_segments.run();
        let mut snap = self.log.snapshot();
        let mut attempts = 0;
        loop {
            match self.fetch_in(&snap, (offset, max_bytes), (min_one, isolation), lso) {
                Err(e) if attempts < STALE_READ_RETRIES && self.outdated(&snap) => {
                    // A segment of the snapshot was removed before it could be opened: a
                    // fresh snapshot has its replacement, or a log start past `offset`.
                    tracing::debug!(partition = self.log.partition(), error = %e, "fetch retried on a fresh snapshot");
                    attempts += 1;
                    snap = self.log.snapshot();
                }
                other => return other,
            }
        }
    }

    fn fetch_in(
        &self,
        snap: &LogSnapshot,
        (offset, max_bytes): (u64, u64),
        (min_one, isolation): (bool, Isolation),
        lso: u64,
    ) -> Result<FetchOutcome> {
        let active = snap.active().info();
        let committed = isolation == Isolation::ReadCommitted;
        let lso = lso.clamp(snap.log_start_offset, active.next_offset);
        let mut outcome = FetchOutcome {
            ranges: Vec::new(),
            high_watermark: active.next_offset,
            last_stable_offset: lso,
            log_start_offset: snap.log_start_offset,
            aborted: committed.then(Vec::new),
        };
        if offset < outcome.log_start_offset || offset > outcome.high_watermark {
            return Err(self.out_of_range(offset, snap, OffsetRequest::Fetch));
        }
        let end_offset = if committed { lso } else { active.next_offset };
        let Some(first) = snap.segment_for(offset).filter(|_| offset < end_offset) else {
            return Ok(outcome);
        };
        // The last segment read from and where in it the bytes read end.
        let mut read_end = None;
        let mut remaining = max_bytes;
        for (i, segment) in snap.segments.iter().enumerate().skip(first) {
            // The active segment is read up to where the high watermark stood.
            let max_position = if segment.id() == active.id {
                active.size
            } else {
                u64::MAX
            };
            let from = offset.max(segment.base_offset());
            if from >= end_offset {
                break;
            }
            let min_one = min_one && outcome.ranges.is_empty();
            let Some(span) =
                segment.fetch_span(from, remaining, (max_position, end_offset), min_one)?
            else {
                continue;
            };
            if span.len > 0 {
                read_end = Some((i, span.position + span.len));
                remaining = remaining.saturating_sub(span.len);
                outcome.ranges.push(FetchedRange {
                    file: span.file,
                    position: span.position,
                    len: span.len,
                });
            }
            if !span.to_end || remaining == 0 {
                break;
            }
        }
        if let Some(aborted) = outcome.aborted.as_mut() {
            // Kafka's `LocalLog.addAbortedTransactions`: the aborts that overlap from
            // `offset` up to an estimate of the read's end, the first offset-index entry
            // at or past the bytes read, else the next segment's base offset, else the
            // log end; so a read_committed consumer learns of aborts a little ahead of
            // the batches it gets. (kpfs's read may go on into later segments: the
            // estimate is from the last one read.)
            let upper_bound = match read_end {
                Some((i, end_position)) => {
                    match snap.segments[i].fetch_upper_bound_offset(end_position)? {
                        Some(indexed) => indexed,
                        None => snap
                            .segments
                            .get(i + 1)
                            .map_or(active.next_offset, |next| next.base_offset()),
                    }
                }
                // Nothing read: nothing to list.
                None => offset,
            };
            *aborted = snap.collect_aborted(first, (offset, upper_bound));
        }
        Ok(outcome)
    }

    fn out_of_range(&self, offset: u64, snap: &LogSnapshot, request: OffsetRequest) -> EngineError {
        EngineError::OffsetOutOfRange {
            partition: self.log.partition().to_string(),
            offset,
            log_start: snap.log_start_offset,
            log_end: snap.active().next_offset(),
            request,
        }
    }

    /// Kafka's `UnifiedLog.fetchOffsetByTimestamp`, as (offset, timestamp); `None` where
    /// Kafka answers offset -1 (no record at or after the timestamp, no tiered storage).
    /// A timestamp search takes the first segment whose largest timestamp (its mtime
    /// when it holds none) is at or above the target, and in it the first record at or
    /// above it, through the time index; it does not go on into later segments, as
    /// Kafka's `searchOffsetInLocalLog`. Under [`Isolation::ReadCommitted`] the latest
    /// offset is the last stable one, and a record at or past it is no answer (Kafka's
    /// `Partition.fetchOffsetForTimestamp` with its `lastFetchableOffset`).
    pub fn list_offset(
        &self,
        query: OffsetQuery,
        isolation: Isolation,
    ) -> Result<Option<(u64, i64)>> {
        let snap = self.log.snapshot();
        let fetchable = match isolation {
            Isolation::ReadCommitted => self.log.last_stable_offset(),
            Isolation::ReadUncommitted => snap.active().next_offset(),
        };
        let answer = match query {
            OffsetQuery::Earliest | OffsetQuery::EarliestLocal => {
                Some((snap.log_start_offset, NO_TIMESTAMP))
            }
            OffsetQuery::Latest => Some((fetchable, NO_TIMESTAMP)),
            OffsetQuery::LatestTiered => None,
            OffsetQuery::MaxTimestamp => {
                // The first segment holding the largest timestamp (Kafka's `maxBy`).
                let mut best: Option<(i64, usize)> = None;
                for (i, s) in snap.segments.iter().enumerate() {
                    let ts = s.info().max_timestamp;
                    if best.is_none_or(|(b, _)| ts > b) {
                        best = Some((ts, i));
                    }
                }
                match best {
                    Some((_, i)) => snap.segments[i].max_timestamp_record()?,
                    None => None,
                }
            }
            OffsetQuery::Timestamp(target) => {
                match snap
                    .segments
                    .iter()
                    .find(|s| s.largest_timestamp() >= target)
                {
                    Some(s) => s.find_offset_by_timestamp(target, snap.log_start_offset)?,
                    None => None,
                }
            }
        };
        let searched = matches!(query, OffsetQuery::Timestamp(_) | OffsetQuery::MaxTimestamp);
        Ok(answer.filter(|&(offset, _)| !searched || offset < fetchable))
    }

    /// Every record from the log start to the log end, in order, with its batch's header
    /// (a coordinator's replay of its internal topic at open), read `read_bytes` at a
    /// time. Control batches come with their record too.
    pub(crate) fn for_each_record(
        &self,
        read_bytes: u64,
        mut f: impl FnMut(&BatchHeader, &RecordRef<'_>),
    ) -> Result<()> {
        let mut offset = self.log.log_start_offset();
        let mut buffer = Vec::new();
        let mut scratch = Vec::new();
        let corrupt = |reason: String| EngineError::Corrupt {
            path: self.dir().to_path_buf(),
            position: 0,
            reason: format!("reading {} at open: {reason}", self.log.partition()),
        };
        loop {
            let fetched = self.fetch(offset, read_bytes)?;
            if fetched.ranges.is_empty() {
                return Ok(());
            }
            buffer.clear();
            for range in &fetched.ranges {
                let start = buffer.len();
                buffer.resize(start + range.len as usize, 0);
                std::os::unix::fs::FileExt::read_exact_at(
                    &range.file,
                    &mut buffer[start..],
                    range.position,
                )
                .map_err(|e| EngineError::io(format!("read {}", self.log.partition()), e))?;
            }
            let mut rest = &buffer[..];
            while !rest.is_empty() {
                let header = decode_header(rest).map_err(|e| corrupt(e.to_string()))?;
                let batch = &rest[..header.size.min(rest.len())];
                let section = records_section(&header, batch, &mut scratch)
                    .map_err(|e| corrupt(e.to_string()))?;
                for record in RecordIter::new(&header, section) {
                    let record = record.map_err(|e| corrupt(e.to_string()))?;
                    if record.offset >= offset {
                        f(&header, &record);
                    }
                }
                offset = offset.max(header.next_offset());
                rest = &rest[header.size.min(rest.len())..];
            }
        }
    }

    /// Kafka's DeleteRecords (`Partition.deleteRecordsOnLeader`): moves the log start
    /// offset up to `offset` (never down) and returns the new low watermark, the log
    /// start. Refused past the high watermark (`OFFSET_OUT_OF_RANGE`) and on a topic
    /// whose `cleanup.policy` lacks `delete` (`POLICY_VIOLATION`). Readers of `log` and
    /// fetches no longer see the records below it, retention's log-start rule deletes
    /// the segments wholly below it, and `log-start-offset-checkpoint` keeps it across
    /// a restart; it is written, with the records below the new start made durable,
    /// before this returns.
    pub fn delete_records_before(&self, offset: u64) -> Result<u64> {
        // Through a handle opened before a deletion: the checkpoint entry it would write
        // belongs to whatever topic has the name now.
        self.log.check_not_deleted()?;
        self.refuse_internal(crate::engine::error::InternalTopicAction::DeleteRecords)?;
        if !self.config().cleanup_policy.delete {
            return Err(EngineError::RecordDeletionPolicy {
                partition: self.log.partition().to_string(),
            });
        }
        let snap = self.log.snapshot();
        if offset > snap.active().next_offset() {
            return Err(self.out_of_range(offset, &snap, OffsetRequest::DeleteRecords));
        }
        if offset <= self.log.log_start_offset() {
            return Ok(self.log.log_start_offset());
        }
        if offset > self.log.recovery_point() {
            // The checkpoint must never name an offset a crash could take back.
            self.log.flush()?;
        }
        // Saved first: a failure leaves the log as it was.
        self.topic
            .log_starts
            .save(&self.topic_partition(), offset)?;
        if let Some(log_start) = self.log.increment_log_start_offset(offset)? {
            tracing::info!(
                partition = self.log.partition(),
                log_start,
                "incremented log start offset due to client record deletion"
            );
            self.record_event(
                "log-start",
                &format!("log start offset moved to {log_start} (records deleted before it)"),
            );
        }
        Ok(self.log.log_start_offset())
    }
}
