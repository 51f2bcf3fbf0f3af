//! Kafka's log cleaner: keep the latest record per key in every segment but the active
//! one, with KIP-534 tombstone horizons and the crash-safe `.cleaned -> .swap` swap.
//!
//! One pass over a topic (Kafka's `Cleaner.doClean`):
//! 1. `first_dirty` comes from the checkpoint (reset to the log start when outside the
//!    log); the first uncleanable offset is the active segment's base, or earlier per
//!    `min.compaction.lag.ms`.
//! 2. An [`OffsetMap`] of key hash -> latest offset is built over the dirty range; when
//!    it fills up the pass is partial and ends where the map filled.
//! 3. Every segment from the log start to the end of the pass is recopied, in groups no
//!    larger than the segment and index sizes allow, keeping a record iff it is the latest
//!    for its key (or lies beyond the pass) and, for a tombstone, its horizon has not passed.
//!    Transactions follow Kafka's rules ([`CleanedTxns`]): the batches of an aborted
//!    transaction go whatever their keys (and never enter the offset map), a marker goes
//!    once no data of its transaction is left and the delete horizon then stamped on it
//!    has passed, and an ABORT that still ends data goes back into the cleaned segment's
//!    `.txnindex`. A batch left without records is dropped unless it ends the cleaning
//!    round or is the last batch of a producer still active.
//! 4. Each group is written as `B.log.cleaned`, renamed `.swap`, the originals renamed
//!    `.deleted`, then `.swap` renamed to the final name (`Log::replace_segments`). Before
//!    a swap that leaves an offset gap, the recovery point is checkpointed past the group.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::cleaned_txns::CleanedTxns;
use super::codec::Compression;
use super::config::TopicConfig;
use super::error::{EngineError, Result};
use super::format::{
    decode_header, records_section, BatchBuilder, BatchEnd, BatchHeader, DecodeError, EndTxnMarker,
    RecordIter, RecordRef, MAX_RELATIVE_OFFSET, OFFSET_INDEX_ENTRY_BYTES, TIME_INDEX_ENTRY_BYTES,
};
use super::limits::{THROTTLE_CHECK_INTERVAL_MS, THROTTLE_SLEEP_SLICE_MS};
use super::log::{DeletedSegment, Log, LogSnapshot};
use super::offset_map::OffsetMap;
use super::segment::{MappedBatches, Segment, SegmentSpec};
use super::stream_index::{BatchStream, StreamMark, StreamShape, StreamWalker};

/// Kafka's `Throttler`, shared by all cleaner threads: sleeps whenever the observed I/O
/// rate over the last >= 300 ms exceeds the limit.
#[derive(Debug)]
pub(crate) struct Throttler {
    state: Mutex<(Instant, f64)>,
}

impl Default for Throttler {
    fn default() -> Self {
        Throttler {
            #[allow(clippy::disallowed_methods)] // throttling measures real elapsed time
            state: Mutex::new((Instant::now(), 0.0)),
        }
    }
}

impl Throttler {
    /// Counts `bytes` of I/O and sleeps while over the rate; the sleep ends early once
    /// `stop_requested` says so.
    #[allow(
        clippy::disallowed_methods,
        reason = "Kafka's throttle limits real I/O rates: real elapsed time, real sleeps"
    )]
    pub(crate) fn maybe_throttle(
        &self,
        bytes: u64,
        max_bytes_per_second: f64,
        stop_requested: &dyn Fn() -> bool,
    ) {
        if !(max_bytes_per_second.is_finite() && max_bytes_per_second > 0.0) {
            return;
        }
        let until = {
            let mut st = self.state.lock();
            st.1 += bytes as f64;
            let elapsed = st.0.elapsed();
            if elapsed < Duration::from_millis(THROTTLE_CHECK_INTERVAL_MS) {
                return;
            }
            let rate = st.1 / elapsed.as_secs_f64();
            let sleep = if rate > max_bytes_per_second {
                Duration::from_secs_f64(st.1 / max_bytes_per_second - elapsed.as_secs_f64())
            } else {
                Duration::ZERO
            };
            let now = Instant::now();
            *st = (now, 0.0);
            now + sleep
        };
        // In slices, so a restart of the cleaner threads never waits for a long sleep.
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || stop_requested() {
                return;
            }
            std::thread::sleep(left.min(Duration::from_millis(THROTTLE_SLEEP_SLICE_MS)));
        }
    }
}

/// What the cleaner knows about one compacted topic, for selection and `status`.
#[derive(Clone, Debug, Default)]
pub(crate) struct CleanerView {
    pub(crate) first_dirty_offset: u64,
    pub(crate) first_uncleanable_offset: u64,
    pub(crate) clean_bytes: u64,
    pub(crate) cleanable_bytes: u64,
    /// Time past `max.compaction.lag.ms` of the earliest dirty record, when positive.
    pub(crate) max_compaction_delay_ms: i64,
}

impl CleanerView {
    pub(crate) fn total_bytes(&self) -> u64 {
        self.clean_bytes + self.cleanable_bytes
    }

    pub(crate) fn ratio(&self) -> f64 {
        if self.total_bytes() == 0 {
            0.0
        } else {
            self.cleanable_bytes as f64 / self.total_bytes() as f64
        }
    }

    /// Kafka's selection rule: strictly above the ratio, or forced by the max lag.
    pub(crate) fn eligible(&self, config: &TopicConfig) -> bool {
        self.total_bytes() > 0
            && ((self.max_compaction_delay_ms > 0 && self.cleanable_bytes > 0)
                || self.ratio() > config.min_cleanable_dirty_ratio)
    }

    /// Why the topic is not due now, in words (for `status`).
    pub(crate) fn why_not_due(&self, config: &TopicConfig) -> Option<String> {
        if self.eligible(config) {
            return None;
        }
        Some(if self.cleanable_bytes == 0 {
            "nothing cleanable: dirty records are only in the active segment (or younger than min.compaction.lag.ms)".to_string()
        } else {
            format!(
                "dirty ratio {:.4} is not above min.cleanable.dirty.ratio {}",
                self.ratio(),
                config.min_cleanable_dirty_ratio
            )
        })
    }
}

/// Figures of one pass (Kafka's `CleanerStats`).
#[derive(Clone, Debug, Default)]
pub struct PassStats {
    pub(crate) started_ms: i64,
    pub(crate) elapsed_ms: u64,
    pub first_dirty_offset: u64,
    pub end_offset: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub(crate) records_read: u64,
    pub(crate) records_retained: u64,
    pub records_removed: u64,
    pub(crate) tombstones_retained: u64,
    pub tombstones_removed: u64,
    pub buffer_utilization: f64,
    pub(crate) segments_replaced: usize,
    pub partial: bool,
    pub(crate) max_compaction_delay_ms: i64,
}

/// Kafka's warning for a checkpointed first dirty offset outside `[log start, log end]`
/// (`cleanableOffsets`), which [`cleaner_view`] replaces with the log start. None when
/// the checkpoint is valid, or below the log start of a `compact,delete` topic, whose
/// retention moves the log start as a matter of course.
pub(crate) fn invalid_checkpoint_warning(
    snap: &LogSnapshot,
    checkpoint: Option<u64>,
    config: &TopicConfig,
    partition: &str,
) -> Option<String> {
    let checkpoint = checkpoint?;
    let (lso, leo) = (snap.log_start_offset, snap.active().next_offset());
    if checkpoint < lso && !config.cleanup_policy.delete {
        Some(format!(
            "Resetting first dirty offset of {partition} to log start offset {lso} since the checkpointed offset {checkpoint} is invalid."
        ))
    } else if checkpoint > leo {
        Some(format!(
            "The last checkpoint dirty offset for partition {partition} is {checkpoint}, which is larger than the log end offset {leo}. Resetting to the log start offset {lso}."
        ))
    } else {
        None
    }
}

/// Kafka's `cleanableOffsets` + `LogToClean` over a snapshot.
pub(crate) fn cleaner_view(
    (snap, last_stable_offset): (&LogSnapshot, u64),
    checkpoint: Option<u64>,
    config: &TopicConfig,
    now_ms: i64,
) -> CleanerView {
    let lso = snap.log_start_offset;
    let leo = snap.active().next_offset();
    let first_dirty = match checkpoint {
        Some(c) if c >= lso && c <= leo => c,
        _ => lso,
    };
    let active_base = snap.active().base_offset();
    // Kafka's `cleanableOffsets`: never past the last stable offset, so an open
    // transaction's records (not yet known to be committed or aborted) stay as written.
    let mut first_uncleanable = active_base.min(last_stable_offset);
    if config.min_compaction_lag_ms > 0 {
        let young_after = now_ms.saturating_sub(config.min_compaction_lag_ms);
        if let Some(s) = snap.segments[..snap.segments.len() - 1]
            .iter()
            .filter(|s| s.next_offset() > first_dirty)
            .find(|s| s.largest_timestamp() > young_after)
        {
            first_uncleanable = first_uncleanable.min(s.base_offset());
        }
    }
    let first_uncleanable = first_uncleanable.max(first_dirty);
    let dirty_segment_base = snap
        .segment_for(first_dirty)
        .map_or(active_base, |i| snap.segments[i].base_offset());
    let uncleanable_segment_base = snap
        .segment_for(first_uncleanable)
        .map_or(active_base, |i| snap.segments[i].base_offset());
    let mut view = CleanerView {
        first_dirty_offset: first_dirty,
        first_uncleanable_offset: uncleanable_segment_base,
        ..CleanerView::default()
    };
    let mut earliest_dirty_ts: Option<i64> = None;
    for s in snap.segments.iter() {
        let base = s.base_offset();
        if base < first_dirty {
            view.clean_bytes += s.size();
        }
        if base >= dirty_segment_base && base < uncleanable_segment_base {
            view.cleanable_bytes += s.size();
        }
        if base >= dirty_segment_base && base < active_base {
            if let Some(ts) = s.info().first_batch_timestamp.filter(|&t| t > 0) {
                earliest_dirty_ts = Some(earliest_dirty_ts.map_or(ts, |e: i64| e.min(ts)));
            }
        }
    }
    if config.max_compaction_lag_ms < i64::MAX {
        if let Some(ts) = earliest_dirty_ts {
            let clean_until = now_ms.saturating_sub(config.max_compaction_lag_ms);
            if ts < clean_until {
                view.max_compaction_delay_ms = clean_until - ts;
            }
        }
    }
    view
}

/// Resources of one cleaner thread.
pub(crate) struct CleanerResources<'a> {
    pub(crate) map: &'a mut OffsetMap,
    pub(crate) throttler: &'a Throttler,
    pub(crate) max_io_bytes_per_second: f64,
    /// Bytes of each of the read and write buffers (Kafka's `log.cleaner.io.buffer.size`
    /// / threads / 2): a read takes at most this much of a segment, but always a whole
    /// batch, and the batches kept from one read are written with one write.
    pub(crate) io_buffer_bytes: usize,
    /// True once the thread must stop (shutdown, or a reconfiguration restarting the
    /// threads): the pass gives up at its next read (Kafka's `checkDone`).
    pub(crate) stop_requested: &'a dyn Fn() -> bool,
    /// Makes every record of the log below `offset` durable and checkpoints that as the
    /// recovery point. Called before a swap that leaves the log with an offset gap below
    /// `offset` (a cleaned group ending before the next segment starts), so recovery
    /// after a crash never takes the gap for a segment tail a power cut lost.
    pub(crate) make_durable_below: &'a dyn Fn(u64) -> Result<()>,
}

impl CleanerResources<'_> {
    /// One read of a pass: Kafka's `checkDone`, then at most the I/O buffer of `seg`'s
    /// whole batches from `pos` (empty at its end), throttled to
    /// `log.cleaner.io.max.bytes.per.second`.
    fn read(&self, seg: &Segment, pos: u64) -> Result<MappedBatches> {
        check_stop(self.stop_requested)?;
        let bytes = seg.mapped_batches(pos, self.io_buffer_bytes)?;
        if !bytes.is_empty() {
            self.throttler.maybe_throttle(
                bytes.len() as u64,
                self.max_io_bytes_per_second,
                self.stop_requested,
            );
        }
        Ok(bytes)
    }
}

/// Kafka's `checkDone`: a pass ends early when its thread must stop.
fn check_stop(stop_requested: &dyn Fn() -> bool) -> Result<()> {
    if stop_requested() {
        return Err(EngineError::CleanAborted {
            reason: "the cleaner threads are stopping".into(),
        });
    }
    Ok(())
}

/// One pass over `log` (Kafka's `doClean`), from the checkpointed first dirty offset
/// `checkpoint`. Returns the stats, whose `end_offset` is the next checkpoint; the
/// segments it replaced (renamed `.deleted`, for delayed removal) go to `deleted`, also
/// when the pass fails after some groups were swapped.
pub(crate) fn clean(
    log: &Log,
    config: &TopicConfig,
    checkpoint: Option<u64>,
    res: &mut CleanerResources<'_>,
    now_ms: i64,
    deleted: &mut Vec<DeletedSegment>,
) -> Result<PassStats> {
    let snap = log.snapshot();
    let view = cleaner_view(
        (&snap, log.last_stable_offset()),
        checkpoint,
        config,
        now_ms,
    );
    let mut stats = PassStats {
        started_ms: now_ms,
        first_dirty_offset: view.first_dirty_offset,
        max_compaction_delay_ms: view.max_compaction_delay_ms,
        ..PassStats::default()
    };
    let dirty_records = view
        .first_uncleanable_offset
        .saturating_sub(view.first_dirty_offset);
    res.map
        .prepare(usize::try_from(dirty_records).unwrap_or(usize::MAX));
    build_offset_map(&snap, &view, res, &mut stats)?;
    let Some(latest) = res.map.latest_offset else {
        return Err(EngineError::CleanAborted {
            reason: "the dirty range is empty".into(),
        });
    };
    let end_offset = latest + 1;
    stats.end_offset = end_offset;
    stats.buffer_utilization = res.map.utilization();
    let groups = group_segments(&snap, end_offset, config);
    let pass = PassBounds {
        // Kafka's `upperBoundOffsetOfCleaningRound`.
        upper_bound: view.first_uncleanable_offset,
        now_ms,
        delete_horizon_ms: now_ms.saturating_add(config.delete_retention_ms),
    };
    // One for every group (Kafka's `doClean`): a transaction that a group boundary cuts
    // is still judged whole.
    let mut txns = CleanedTxns::default();
    for group in groups {
        let cleaned = copy_group(log, &group, res, config, &pass, &mut txns, &mut stats)?;
        let last_base = group[group.len() - 1].base_offset();
        // The group is never the active segment, so a segment follows it.
        let group_end = snap
            .segments
            .iter()
            .map(|s| s.base_offset())
            .find(|&b| b > last_base)
            .expect("a segment follows every cleaned group");
        if cleaned.next_offset() < group_end {
            (res.make_durable_below)(group_end)?;
        }
        let bases: Vec<u64> = group.iter().map(|s| s.base_offset()).collect();
        stats.segments_replaced += bases.len();
        deleted.extend(log.replace_segments(&bases, vec![cleaned])?);
    }
    stats.records_removed = stats.records_read - stats.records_retained;
    Ok(stats)
}

/// What every group of one pass is cleaned against.
struct PassBounds {
    /// The first uncleanable offset: the batch ending there is kept even when emptied.
    upper_bound: u64,
    now_ms: i64,
    /// The horizon given to tombstones kept for the first time.
    delete_horizon_ms: i64,
}

fn build_offset_map(
    snap: &LogSnapshot,
    view: &CleanerView,
    res: &mut CleanerResources<'_>,
    stats: &mut PassStats,
) -> Result<()> {
    let dirty: Vec<&std::sync::Arc<Segment>> = snap
        .segments
        .iter()
        .filter(|s| {
            s.next_offset() > view.first_dirty_offset
                && s.base_offset() < view.first_uncleanable_offset
        })
        .collect();
    // Kafka's `buildOffsetMap`: an aborted record never shadows an older committed one
    // of its key.
    let mut txns = CleanedTxns::default();
    if let Some(first) = snap.segment_for(view.first_dirty_offset) {
        txns.add_aborted(snap.collect_aborted(
            first,
            (view.first_dirty_offset, view.first_uncleanable_offset),
        ));
    }
    let mut scratch = Vec::new();
    for (i, seg) in dirty.iter().enumerate() {
        let mut pos = seg.lookup_position(view.first_dirty_offset)?;
        loop {
            let bytes = res.read(seg, pos)?;
            if bytes.is_empty() {
                break;
            }
            let map = &mut *res.map;
            let mut at = 0;
            while at < bytes.len() {
                let bad = |e| corrupt(seg, pos + at as u64, e);
                let h = decode_header(&bytes[at..]).map_err(bad)?;
                let batch = &bytes[at..at + h.size];
                let records = if h.is_control() {
                    let records = hashed_records(&h, batch, &mut scratch, map).map_err(bad)?;
                    txns.on_control_batch_read(&h, control_type(&records).map_err(bad)?, None)?;
                    Vec::new()
                } else if txns.on_batch_read(&h) {
                    Vec::new()
                } else {
                    hashed_records(&h, batch, &mut scratch, map).map_err(bad)?
                };
                for (rec, hash) in records {
                    if rec.offset < view.first_dirty_offset {
                        continue;
                    }
                    if let Some(hash) = hash {
                        if !map.put_hashed(hash, rec.offset) {
                            // Full: the pass ends before this record (a partial pass).
                            stats.partial = true;
                            return Ok(());
                        }
                    }
                    map.latest_offset = Some(rec.offset);
                }
                map.latest_offset = Some(
                    map.latest_offset
                        .map_or(h.last_offset(), |l| l.max(h.last_offset())),
                );
                at += h.size;
            }
            pos += bytes.len() as u64;
        }
        // A whole segment done: the pass covers its offset gaps too.
        let map = &mut *res.map;
        if let Some(next) = dirty
            .get(i + 1)
            .map(|s| s.base_offset())
            .or(Some(view.first_uncleanable_offset))
        {
            if next > 0 && map.latest_offset.is_some() {
                map.latest_offset = Some(next - 1);
            }
        }
    }
    Ok(())
}

/// A record with the hash of its key, if it has one.
type HashedRecord<'a> = (RecordRef<'a>, Option<[u64; 2]>);

/// Decodes the records of `batch` (decompressed into `scratch`) with their key hashes,
/// prefetching every slot first. A control record has none: its key names its type, not
/// a record's key, so it shadows nothing.
fn hashed_records<'a>(
    header: &BatchHeader,
    batch: &'a [u8],
    scratch: &'a mut Vec<u8>,
    map: &OffsetMap,
) -> std::result::Result<Vec<HashedRecord<'a>>, DecodeError> {
    let records = records_section(header, batch, scratch)?;
    // A record takes at least a byte of its section: a corrupt count cannot make this
    // allocate more than the section holds.
    let mut out = Vec::with_capacity((header.record_count as usize).min(records.len()));
    for rec in RecordIter::new(header, records) {
        let rec = rec?;
        let hash = rec
            .key
            .filter(|_| !header.is_control())
            .map(OffsetMap::hash);
        if let Some(h) = hash {
            map.prefetch(h);
        }
        out.push((rec, hash));
    }
    Ok(out)
}

/// Kafka's `ControlRecordType.parse` of a control batch's first record: `None` for a
/// batch a previous clean emptied; a key too short to name a type is corrupt (Kafka's
/// `InvalidRecordException`).
fn control_type(records: &[HashedRecord<'_>]) -> std::result::Result<Option<i16>, DecodeError> {
    let Some((first, _)) = records.first() else {
        return Ok(None);
    };
    EndTxnMarker::control_type(first).map(Some).ok_or_else(|| {
        DecodeError::BadRecord(format!(
            "Invalid value size found for end control record key. Must have at least 4 bytes, but found only {}",
            first.key.map_or(0, <[u8]>::len)
        ))
    })
}

/// Kafka's `groupSegmentsBySize` over the segments overlapping `[0, end_offset)`.
fn group_segments(
    snap: &LogSnapshot,
    end_offset: u64,
    config: &TopicConfig,
) -> Vec<Vec<std::sync::Arc<Segment>>> {
    let max_bytes = config.segment_size().max(0) as u64;
    let max_index = config.segment_index_bytes.max(0) as u64;
    let candidates: Vec<_> = snap.segments[..snap.segments.len() - 1]
        .iter()
        .filter(|s| s.base_offset() < end_offset)
        .cloned()
        .collect();
    let mut groups = Vec::new();
    let mut i = 0;
    while i < candidates.len() {
        let first = &candidates[i];
        let mut group = vec![first.clone()];
        let info = first.info();
        let (mut bytes, mut idx, mut tidx) = (
            info.size,
            info.offset_index_entries as u64,
            info.time_index_entries as u64,
        );
        i += 1;
        while i < candidates.len() {
            let c = candidates[i].info();
            let span_ok = c.size == 0
                || c.next_offset.saturating_sub(1) - first.base_offset() <= MAX_RELATIVE_OFFSET;
            if bytes + c.size <= max_bytes
                && (idx + c.offset_index_entries as u64) * OFFSET_INDEX_ENTRY_BYTES as u64
                    <= max_index
                && (tidx + c.time_index_entries as u64) * TIME_INDEX_ENTRY_BYTES as u64 <= max_index
                && span_ok
            {
                bytes += c.size;
                idx += c.offset_index_entries as u64;
                tidx += c.time_index_entries as u64;
                group.push(candidates[i].clone());
                i += 1;
            } else {
                break;
            }
        }
        groups.push(group);
    }
    groups
}

/// Writes the kept records of `group` to a new `.cleaned` segment (Kafka's
/// `cleanSegments`); on failure, including a stop, the `.cleaned` files are removed.
fn copy_group(
    log: &Log,
    group: &[std::sync::Arc<Segment>],
    res: &CleanerResources<'_>,
    config: &TopicConfig,
    pass: &PassBounds,
    txns: &mut CleanedTxns,
    stats: &mut PassStats,
) -> Result<Segment> {
    let first = &group[0];
    let cleaned = Segment::create(&SegmentSpec {
        dir: log.dir(),
        stream_dir: log.stream_dir(),
        shape: config.stream_shape(),
        base_offset: first.base_offset(),
        suffix: super::format::CLEANED_SUFFIX,
        stream_pos: first.info().stream_start,
        max_index_bytes: config.segment_index_bytes.max(0) as usize,
        now_ms: pass.now_ms,
        roll_jitter_ms: 0,
    })?;
    let snap = log.snapshot();
    let mut filter = CleanerFilter {
        map: res.map,
        pass,
        txns,
        producers: last_records_of_active_producers(log),
    };
    let copied = group
        .iter()
        .enumerate()
        .try_for_each(|(i, seg)| {
            // The aborts of the whole segment, not only of its dirty part: the cleaned
            // segment's transaction index is rebuilt from them.
            let upper_bound = group
                .get(i + 1)
                .map_or_else(|| seg.next_offset(), |next| next.base_offset());
            if let Some(at) = snap.segment_for(seg.base_offset()) {
                filter
                    .txns
                    .add_aborted(snap.collect_aborted(at, (seg.base_offset(), upper_bound)));
            }
            clean_into(seg, &cleaned, res, config, &mut filter, stats)
        })
        .and_then(|()| {
            cleaned.seal()?;
            cleaned.flush()?;
            match group.last().and_then(|s| s.modified()) {
                Some(mtime) => cleaned.set_modified(mtime),
                None => Ok(()),
            }
        });
    if let Err(e) = copied {
        if let Err(remove) = super::log::remove_files(&cleaned.file_paths()) {
            tracing::warn!(error = %remove, "cannot remove the files of an unfinished clean");
        }
        return Err(e);
    }
    Ok(cleaned)
}

/// Kafka's `LastRecord`: what the cleaner keeps of an active producer.
#[derive(Clone, Copy, Debug)]
struct LastRecord {
    /// The last offset of its last data batch, if its state still holds one.
    last_data_offset: Option<u64>,
    producer_epoch: i16,
}

/// Kafka's `UnifiedLog.lastRecordsOfActiveProducers`, by producer id.
fn last_records_of_active_producers(log: &Log) -> HashMap<i64, LastRecord> {
    log.active_producers()
        .into_iter()
        .map(|p| {
            let last = LastRecord {
                last_data_offset: u64::try_from(p.last_offset).ok(),
                producer_epoch: p.producer_epoch,
            };
            (p.producer_id, last)
        })
        .collect()
}

/// Kafka's `BatchRetention`: what becomes of a batch as a whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BatchRetention {
    /// It goes, records and all.
    Delete,
    /// It goes if none of its records stays.
    DeleteEmpty,
    /// It stays, without records if none stays.
    RetainEmpty,
}

/// Kafka's `BatchRetentionResult`, with the `discardBatchRecords` its cleaner filter
/// keeps for the batch's records.
#[derive(Clone, Copy, Debug)]
struct BatchDecision {
    retention: BatchRetention,
    /// None of the batch's records stays: aborted data, or a marker past its horizon.
    discard_records: bool,
    /// Kafka's `containsMarkerForEmptyTxn`: the batch is the marker of a transaction with
    /// no data left, which the first clean that keeps it stamps with a delete horizon.
    marker_for_empty_txn: bool,
}

/// Kafka's cleaner `RecordFilter` (`cleanInto`'s `logCleanerFilter`) over one group.
struct CleanerFilter<'a> {
    map: &'a OffsetMap,
    pass: &'a PassBounds,
    txns: &'a mut CleanedTxns,
    /// Kafka's `lastRecordsOfActiveProducers` when the group's cleaning began.
    producers: HashMap<i64, LastRecord>,
}

impl CleanerFilter<'_> {
    /// Kafka's `checkBatchRetention`; `control_type` is a control batch's
    /// ([`control_type`]). A marker piggy-backs on the tombstone horizon: it goes only
    /// once its transaction has no data left, and the horizon stamped on it then has
    /// passed.
    fn check_batch_retention(
        &mut self,
        h: &BatchHeader,
        control_type: Option<i16>,
        cleaned: &Segment,
    ) -> Result<BatchDecision> {
        let (can_discard, discard_records) = if h.is_control() {
            let can = self
                .txns
                .on_control_batch_read(h, control_type, Some(cleaned))?;
            let past_horizon = h
                .delete_horizon_ms()
                .is_some_and(|hz| hz <= self.pass.now_ms);
            (can, can && past_horizon)
        } else {
            let can = self.txns.on_batch_read(h);
            (can, can)
        };
        // The last batch of a producer still active holds its last sequence, or (a marker
        // with no data batch after it) its epoch, which fencing needs: it stays, if only
        // empty, until the producer writes again or expires.
        let last_of_producer =
            self.producers
                .get(&h.producer_id)
                .is_some_and(|last| match last.last_data_offset {
                    Some(offset) => h.last_offset() == offset,
                    None => h.is_control() && h.producer_epoch == last.producer_epoch,
                });
        let retention = if h.has_producer_id() && last_of_producer {
            BatchRetention::RetainEmpty
        } else if h.next_offset() == self.pass.upper_bound {
            // The highest cleaned offset stays visible.
            BatchRetention::RetainEmpty
        } else if discard_records {
            BatchRetention::Delete
        } else {
            BatchRetention::DeleteEmpty
        };
        Ok(BatchDecision {
            retention,
            discard_records,
            marker_for_empty_txn: can_discard && h.is_control(),
        })
    }

    /// Kafka's `shouldRetainRecord` for a record of a batch not deleted: a record beyond
    /// the pass stays; one with a key stays if it is the latest of its key and, for a
    /// tombstone, its batch's horizon has not passed; one without a key goes.
    fn should_retain_record(
        &self,
        h: &BatchHeader,
        decision: &BatchDecision,
        (rec, hash): &HashedRecord<'_>,
    ) -> bool {
        if decision.discard_records {
            return false;
        }
        if h.is_control() {
            return true;
        }
        if rec.offset > self.map.latest_offset.unwrap_or(0) {
            return true;
        }
        let Some(hash) = hash else {
            return false;
        };
        let latest = self.map.get_hashed(*hash).is_none_or(|o| rec.offset >= o);
        let tombstone_alive = h.delete_horizon_ms().is_none_or(|hz| self.pass.now_ms < hz);
        latest && (rec.value.is_some() || tombstone_alive)
    }
}

/// Kafka's `cleanInto`: copies the records of `source` that `filter` keeps, one read
/// buffer at a time, the kept batches of each read written with one append. A batch
/// whose records all stay, with no delete horizon to set, is copied byte for byte; the
/// others are rebuilt with their base and last offsets, producer fields and codec, as
/// Kafka's `MemoryRecords.filterTo` does, and one left without records stays only where
/// the filter says `RETAIN_EMPTY`. Kept records keep their stream positions: the stream
/// index of the cleaned segment gets an entry wherever a dropped record leaves a gap.
fn clean_into(
    source: &Segment,
    cleaned: &Segment,
    res: &CleanerResources<'_>,
    config: &TopicConfig,
    filter: &mut CleanerFilter<'_>,
    stats: &mut PassStats,
) -> Result<()> {
    let interval = config.index_interval_bytes.max(0) as u64;
    let (stream_start, entries) = source.stream_entries();
    let mut walker = StreamWalker::new(&entries, 0, stream_start, source.stream_shape());
    let mut write_buffer = Vec::with_capacity(res.io_buffer_bytes);
    // Stream marks of the batches in the write buffer, and each batch's range of them.
    let mut marks: Vec<StreamMark> = Vec::new();
    let mut batches: Vec<(std::ops::Range<usize>, u64)> = Vec::new();
    let mut builder = BatchBuilder::new(0);
    let mut scratch = Vec::new();
    let mut pos = 0u64;
    loop {
        let bytes = res.read(source, pos)?;
        if bytes.is_empty() {
            return Ok(());
        }
        stats.bytes_read += bytes.len() as u64;
        let mut at = 0;
        while at < bytes.len() {
            let bad = |e| corrupt(source, pos + at as u64, e);
            let h = decode_header(&bytes[at..]).map_err(bad)?;
            let batch = &bytes[at..at + h.size];
            let records = hashed_records(&h, batch, &mut scratch, filter.map).map_err(bad)?;
            let control_type = if h.is_control() {
                control_type(&records).map_err(bad)?
            } else {
                None
            };
            let decision = filter.check_batch_retention(&h, control_type, cleaned)?;
            let mut kept = Vec::with_capacity(records.len());
            for record in &records {
                let (rec, _) = record;
                // Every line is walked, kept or not: each position follows the lines
                // before it.
                let line = h.in_log_stream().then(|| {
                    (
                        walker.position(rec.offset, rec.key, rec.value),
                        walker.end().1,
                    )
                });
                if decision.retention == BatchRetention::Delete {
                    continue;
                }
                stats.records_read += 1;
                let keep = filter.should_retain_record(&h, &decision, record);
                if line.is_some() && rec.value.is_none() {
                    if keep {
                        stats.tombstones_retained += 1;
                    } else {
                        stats.tombstones_removed += 1;
                    }
                }
                if keep {
                    kept.push((rec, line));
                }
            }
            if decision.retention == BatchRetention::Delete
                || (kept.is_empty() && decision.retention != BatchRetention::RetainEmpty)
            {
                at += h.size;
                continue;
            }
            stats.records_retained += kept.len() as u64;
            // KIP-534: the first clean that keeps a tombstone, or the marker of a
            // transaction with no data left, stamps the batch's horizon. Kafka's
            // `writeEmptyHeader` gives an emptied batch none.
            let has_tombstone = kept.iter().any(|(rec, _)| rec.value.is_none());
            let horizon = match h.delete_horizon_ms() {
                _ if kept.is_empty() => None,
                Some(hz) => Some(hz),
                None if has_tombstone || decision.marker_for_empty_txn => {
                    Some(filter.pass.delete_horizon_ms)
                }
                None => None,
            };
            let first_mark = marks.len();
            let mut end = cleaned_stream_end(cleaned, &marks, &batches);
            for (rec, line) in &kept {
                let Some((stream_pos, shape)) = *line else {
                    continue;
                };
                let follows = stream_pos == end.0 && shape == end.1;
                if marks.len() == first_mark || !follows {
                    marks.push(StreamMark {
                        offset: rec.offset,
                        stream_pos,
                        shape,
                    });
                }
                end = (stream_pos + shape.line_len(rec.key, rec.value), shape);
            }
            // A batch with no line kept (emptied, or a marker) ends where the source's
            // lines so far do, so the stream end survives the records it dropped.
            let batch_stream_end = if marks.len() == first_mark {
                walker.end().0.max(end.0)
            } else {
                end.0
            };
            batches.push((first_mark..marks.len(), batch_stream_end));
            if kept.len() == records.len() && horizon == h.delete_horizon_ms() {
                write_buffer.extend_from_slice(batch);
            } else {
                builder.reset(h.base_offset, horizon);
                for (rec, _) in &kept {
                    builder.push_record(rec);
                }
                // Kafka's cleaner keeps each batch's codec (at its default level).
                let codec = h
                    .codec()
                    .map_err(|e| bad(DecodeError::BadRecord(e.to_string())))?;
                let out = builder
                    .finish_parts(&BatchEnd {
                        last_offset: Some(h.last_offset()),
                        delete_horizon_ms: horizon,
                        compression: Compression::default_level(codec),
                        identity: h.identity(),
                        empty_timestamp: h.max_timestamp,
                        // Kafka's `filterTo` keeps the batch's timestamp type.
                        log_append_time_ms: h.is_log_append_time().then_some(h.max_timestamp),
                    })
                    .map_err(|e| {
                        let what = format!(
                            "compress a cleaned batch of {}",
                            source.log_path().display()
                        );
                        EngineError::io(what, std::io::Error::other(e))
                    })?;
                write_buffer.extend_from_slice(&out.header);
                write_buffer.extend_from_slice(out.records);
            }
            at += h.size;
        }
        pos += bytes.len() as u64;
        if !write_buffer.is_empty() {
            stats.bytes_written += write_buffer.len() as u64;
            let streams: Vec<BatchStream<'_>> = batches
                .iter()
                .map(|(range, stream_end)| BatchStream {
                    marks: &marks[range.clone()],
                    stream_end: *stream_end,
                })
                .collect();
            cleaned.append_batches(&write_buffer, &streams, interval)?;
            res.throttler.maybe_throttle(
                write_buffer.len() as u64,
                res.max_io_bytes_per_second,
                res.stop_requested,
            );
            write_buffer.clear();
            marks.clear();
            batches.clear();
        }
    }
}

/// Where the cleaned segment's stream stands after what it holds and the batches still
/// in the write buffer.
fn cleaned_stream_end(
    cleaned: &Segment,
    marks: &[StreamMark],
    batches: &[(std::ops::Range<usize>, u64)],
) -> (u64, StreamShape) {
    let shape = marks
        .last()
        .map_or_else(|| cleaned.stream_shape(), |m| m.shape);
    match batches.last() {
        Some((_, end)) => (*end, shape),
        None => (cleaned.info().stream_end, shape),
    }
}

fn corrupt(seg: &Segment, position: u64, e: super::format::DecodeError) -> EngineError {
    EngineError::Corrupt {
        path: seg.log_path(),
        position,
        reason: e.to_string(),
    }
}
