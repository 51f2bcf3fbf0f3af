//! Loading a partition directory when its log opens (Kafka's `LogLoader`), and the two
//! steps of the data directory's load that concern leftovers of a crash (Kafka's
//! `LogManager.loadLogs`). Each function is one row of the recovery case table in
//! docs/ARCHITECTURE.md (rows 6, 7 and 8 share the segment recovery they decide on);
//! [`LogLoader::load`] applies them in the table's order, and `tests/recovery.rs` names
//! its tests after the rows.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use super::config::TopicConfig;
use super::error::{EngineError, Result};
use super::files::{io_at, list_names, remove_file, sync_dir, temporary_path};
use super::format::{
    parse_segment_file_name, segment_file_name, CLEANED_SUFFIX, DELETED_SUFFIX, DELETING_SUFFIX,
    INDEX_SUFFIX, LOG_SUFFIX, STREAM_START_FILE, SWAP_SUFFIX, TIME_INDEX_SUFFIX,
};
use super::segment::{Segment, SegmentSpec};

/// How far a log's files can be trusted when it is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// The data directory was closed cleanly: every segment was flushed.
    CleanShutdown,
    /// After a crash: records below this offset (the checkpointed recovery point) were
    /// fsynced with their indexes, so only what follows is validated.
    RecoveryPoint(u64),
}

/// What `Log::open` found and did, for logging and tests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct OpenReport {
    pub removed_files: Vec<String>,
    pub(crate) completed_swaps: Vec<String>,
    pub truncated: Vec<(String, u64, u64)>,
    pub recovered_segments: usize,
    /// Bytes validated batch by batch: the unsynced tail after a crash.
    pub recovered_bytes: u64,
}

/// One partition directory being loaded.
pub(crate) struct LogLoader<'a> {
    pub(crate) dir: &'a Path,
    /// `TOPIC-0`, for log messages.
    pub(crate) partition: &'a str,
    pub(crate) config: &'a TopicConfig,
    pub(crate) now_ms: i64,
    pub(crate) durability: Durability,
    /// Each loaded segment's share of `segment.jitter.ms`.
    pub(crate) next_jitter: &'a dyn Fn() -> i64,
}

impl LogLoader<'_> {
    /// Brings the directory to a consistent state and loads its segments in offset
    /// order (none for a new log).
    pub(crate) fn load(&self) -> Result<(Vec<Arc<Segment>>, OpenReport)> {
        let mut report = OpenReport::default();
        self.remove_deleted_files(&mut report)?;
        self.roll_back_unfinished_cleaning(&mut report)?;
        self.remove_index_swaps_without_log_swap(&mut report)?;
        self.complete_swaps(&mut report)?;
        let bases = self.log_bases()?;
        self.remove_orphan_indexes(&bases, &mut report)?;
        let segments = self.load_segments(&bases, &mut report)?;
        Ok((segments, report))
    }

    /// Row 1: `.deleted` files were already out of the log.
    fn remove_deleted_files(&self, report: &mut OpenReport) -> Result<()> {
        for name in list_names(self.dir)? {
            if name.ends_with(DELETED_SUFFIX) {
                remove_file(&self.dir.join(&name))?;
                report.removed_files.push(name);
            }
        }
        Ok(())
    }

    /// Row 2: `.cleaned` files are a clean that never finished writing; it is rolled
    /// back with every `.swap` at or above the lowest `.cleaned` base (Kafka's
    /// `removeTempFilesAndCollectSwapFiles`).
    fn roll_back_unfinished_cleaning(&self, report: &mut OpenReport) -> Result<()> {
        let names = list_names(self.dir)?;
        let lowest_cleaned = names
            .iter()
            .filter(|n| n.ends_with(CLEANED_SUFFIX))
            .filter_map(|n| parse_segment_file_name(n))
            .map(|(base, _)| base)
            .min();
        for name in names {
            let swap_above_cleaned = name
                .strip_suffix(SWAP_SUFFIX)
                .and_then(parse_segment_file_name)
                .is_some_and(|(base, _)| lowest_cleaned.is_some_and(|m| base >= m));
            if name.ends_with(CLEANED_SUFFIX) || swap_above_cleaned {
                remove_file(&self.dir.join(&name))?;
                report.removed_files.push(name);
            }
        }
        Ok(())
    }

    /// Row 4: an index `.swap` without its `.log.swap` is left by a crash during the
    /// final renames; the index is rebuilt from the log.
    fn remove_index_swaps_without_log_swap(&self, report: &mut OpenReport) -> Result<()> {
        let names = list_names(self.dir)?;
        for name in &names {
            let Some((base, _)) = name
                .strip_suffix(SWAP_SUFFIX)
                .and_then(parse_segment_file_name)
            else {
                continue;
            };
            let log_swap = segment_file_name(base, LOG_SUFFIX) + SWAP_SUFFIX;
            if !names.contains(&log_swap) {
                remove_file(&self.dir.join(name))?;
                report.removed_files.push(name.clone());
            }
        }
        Ok(())
    }

    /// Row 3: a complete set of `.log.swap` files replaces every segment whose base is in
    /// `[first swap base, swap next offset)`; then the `.swap` suffixes are dropped.
    fn complete_swaps(&self, report: &mut OpenReport) -> Result<()> {
        let mut swaps: Vec<u64> = list_names(self.dir)?
            .iter()
            .filter_map(|n| n.strip_suffix(SWAP_SUFFIX))
            .filter_map(parse_segment_file_name)
            .filter(|(_, suffix)| *suffix == LOG_SUFFIX)
            .map(|(base, _)| base)
            .collect();
        if swaps.is_empty() {
            return Ok(());
        }
        swaps.sort_unstable();
        let mut max_next = 0u64;
        for &base in &swaps {
            let seg = Segment::open(&SegmentSpec {
                dir: self.dir,
                base_offset: base,
                suffix: SWAP_SUFFIX,
                stream_pos: 0,
                max_index_bytes: 1 << 20,
                now_ms: self.now_ms,
                roll_jitter_ms: 0,
            })?;
            max_next = max_next.max(seg.next_offset());
        }
        let min_swap = swaps[0];
        // The originals that the swap replaces but that were not yet renamed `.deleted`.
        for name in list_names(self.dir)? {
            if name.ends_with(SWAP_SUFFIX) {
                continue;
            }
            if let Some((base, _)) = parse_segment_file_name(&name) {
                if base >= min_swap && base < max_next {
                    remove_file(&self.dir.join(&name))?;
                    report.removed_files.push(name);
                }
            }
        }
        for name in list_names(self.dir)? {
            if let Some(final_name) = name.strip_suffix(SWAP_SUFFIX) {
                fs::rename(self.dir.join(&name), self.dir.join(final_name))
                    .map_err(io_at(&self.dir.join(&name), "complete swap of"))?;
                report.completed_swaps.push(final_name.to_string());
            }
        }
        sync_dir(self.dir)
    }

    /// Base offsets of the `.log` files, in order.
    fn log_bases(&self) -> Result<Vec<u64>> {
        let mut bases: Vec<u64> = list_names(self.dir)?
            .iter()
            .filter_map(|n| parse_segment_file_name(n))
            .filter(|(_, suffix)| *suffix == LOG_SUFFIX)
            .map(|(b, _)| b)
            .collect();
        bases.sort_unstable();
        Ok(bases)
    }

    /// Row 5: an index with no `.log` of the same base offset is an orphan.
    fn remove_orphan_indexes(&self, bases: &[u64], report: &mut OpenReport) -> Result<()> {
        for name in list_names(self.dir)? {
            if let Some((base, suffix)) = parse_segment_file_name(&name) {
                if (suffix == INDEX_SUFFIX || suffix == TIME_INDEX_SUFFIX)
                    && bases.binary_search(&base).is_err()
                {
                    tracing::warn!(file = %name, "Found an orphaned index file with no corresponding log file; deleting it");
                    remove_file(&self.dir.join(&name))?;
                    report.removed_files.push(name);
                }
            }
        }
        Ok(())
    }

    /// Opens the segments in offset order, recovering those the durability does not vouch
    /// for (rows 6 to 9), and cuts the log at the first invalid byte or lost tail.
    fn load_segments(&self, bases: &[u64], report: &mut OpenReport) -> Result<Vec<Arc<Segment>>> {
        let mut segments: Vec<Arc<Segment>> = Vec::new();
        let mut stream_pos = self.restore_stream_start(bases.first().copied());
        let total = bases.len();
        for (i, &base) in bases.iter().enumerate() {
            let index_missing = !self
                .dir
                .join(segment_file_name(base, INDEX_SUFFIX))
                .exists();
            let seg = Segment::open(&SegmentSpec {
                dir: self.dir,
                base_offset: base,
                suffix: "",
                stream_pos,
                max_index_bytes: self.config.segment_index_bytes as usize,
                now_ms: self.now_ms,
                roll_jitter_ms: (self.next_jitter)(),
            })?;
            if let Some(prev) = segments.last() {
                refuse_overlap(prev, &seg)?;
            }
            let mut cut = false;
            match self.validation_start(&seg, index_missing) {
                Some(point) => {
                    cut = self.recover_segment(&seg, point, report)?;
                    if total > 16 && (i + 1) % 16 == 0 {
                        tracing::info!(partition = %self.partition, done = i + 1, total, "recovering segments");
                    }
                }
                // Flushed before the clean shutdown or before the recovery point passed it.
                None => seg.mark_synced(),
            }
            if !cut {
                cut = self.cut_at_lost_tail(&seg, bases.get(i + 1).copied(), report);
            }
            stream_pos = seg.info().stream_end;
            segments.push(Arc::new(seg));
            if cut {
                self.remove_segments_after_cut(&bases[i + 1..], report)?;
                break;
            }
        }
        Ok(segments)
    }

    /// Rows 6, 7 and 8: from where a segment's batches must be validated, if at all.
    fn validation_start(&self, seg: &Segment, index_missing: bool) -> Option<u64> {
        match self.durability {
            // Row 7 (and after a crash alike): a missing `.index` is rebuilt from the log.
            _ if index_missing => Some(0),
            // Row 8: after a clean shutdown only a last index entry that names no batch
            // ending at its offset, or a tail that does not decode, makes a scan.
            Durability::CleanShutdown => seg.needs_recovery().then_some(0),
            // Row 6: after a crash what lies below the recovery point is trusted.
            Durability::RecoveryPoint(point) => {
                (seg.needs_recovery() || seg.next_offset() > point).then_some(point)
            }
        }
    }

    /// Rows 6, 7 and 8: validates the segment's batches from `point` on (CRC, lengths,
    /// offsets), rebuilds its indexes and truncates it at the first invalid byte. Tells
    /// whether it cut anything, which ends the log there.
    fn recover_segment(&self, seg: &Segment, point: u64, report: &mut OpenReport) -> Result<bool> {
        let interval = self.config.index_interval_bytes as u64;
        let outcome = seg.recover_after(point, interval)?;
        report.recovered_segments += 1;
        report.recovered_bytes += outcome.bytes_checked;
        if outcome.bytes_cut == 0 {
            return Ok(false);
        }
        report.truncated.push((
            seg.log_path().display().to_string(),
            seg.size(),
            outcome.bytes_cut,
        ));
        Ok(true)
    }

    /// Row 6b: above the recovery point, segments end where the next one starts (rolls
    /// start at the log end; the cleaner checkpoints the recovery point past a group
    /// before its swap leaves a gap). A shorter one lost an unsynced tail in a power cut:
    /// what follows it cannot be trusted in order. Tells whether the log ends here.
    fn cut_at_lost_tail(
        &self,
        seg: &Segment,
        next_base: Option<u64>,
        report: &mut OpenReport,
    ) -> bool {
        // After a clean shutdown, or below the recovery point, every tail was synced.
        let Durability::RecoveryPoint(point) = self.durability else {
            return false;
        };
        let Some(next_base) = next_base else {
            return false;
        };
        if next_base <= point || seg.next_offset() >= next_base {
            return false;
        }
        tracing::warn!(
            file = %seg.log_path().display(),
            ends_at = seg.next_offset(),
            next_segment = next_base,
            "segment lost its tail; deleting the segments after it"
        );
        report
            .truncated
            .push((seg.log_path().display().to_string(), seg.size(), 0));
        true
    }

    /// Rows 6 and 6b: everything after the first invalid byte goes, later segments
    /// included.
    fn remove_segments_after_cut(&self, later: &[u64], report: &mut OpenReport) -> Result<()> {
        for &base in later {
            for suffix in [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
                let p = self.dir.join(segment_file_name(base, suffix));
                if p.exists() {
                    tracing::warn!(file = %p.display(), "deleting segment file after a truncated segment");
                    remove_file(&p)?;
                    report.removed_files.push(p.display().to_string());
                }
            }
        }
        Ok(())
    }

    /// Row 10: an empty first segment has no batch to tell where the stream stands;
    /// [`STREAM_START_FILE`] does, when it names that segment.
    fn restore_stream_start(&self, first_base: Option<u64>) -> u64 {
        let Ok(text) = fs::read_to_string(self.dir.join(STREAM_START_FILE)) else {
            return 0;
        };
        let mut parts = text.split_whitespace().map(|p| p.parse::<u64>());
        match (parts.next(), parts.next()) {
            (Some(Ok(base)), Some(Ok(pos))) if Some(base) == first_base => pos,
            _ => 0,
        }
    }

    /// The recovery point the loaded log starts with, given its end.
    pub(crate) fn recovery_point(&self, log_end: u64) -> u64 {
        match self.durability {
            Durability::CleanShutdown => log_end,
            Durability::RecoveryPoint(point) if point > log_end => {
                tracing::warn!(
                    partition = %self.partition,
                    recovery_point = point,
                    log_end_offset = log_end,
                    "the checkpointed recovery point is past the log end; using the log end"
                );
                log_end
            }
            Durability::RecoveryPoint(point) => point,
        }
    }
}

/// Row 9: segments that overlap (a base below the previous segment's end) cannot be
/// ordered; the log refuses to open, naming the file.
fn refuse_overlap(prev: &Segment, seg: &Segment) -> Result<()> {
    let prev_next = prev.next_offset();
    if prev_next <= seg.base_offset() {
        return Ok(());
    }
    Err(EngineError::Corrupt {
        path: seg.log_path(),
        position: 0,
        reason: format!(
            "segment {} overlaps the previous segment, which ends at offset {prev_next}",
            seg.base_offset()
        ),
    })
}

/// Row 11: a `.tmp` beside a config or checkpoint is what a crash in the middle of
/// [`write_atomically`](super::files::write_atomically) left (a failed write removes its
/// own); the file itself is intact, since it is only ever replaced by a rename.
pub(crate) fn remove_stale_temporary(path: &Path) {
    let tmp = temporary_path(path);
    if tmp.exists() {
        tracing::info!(file = %tmp.display(), "removing a half-written temporary file");
        let _ = std::fs::remove_file(&tmp);
    }
}

/// Row 12: a topic directory named `-delete` is a deletion that a crash (or a failed
/// removal) interrupted; it is finished. Tells whether `name` was such a directory.
pub(crate) fn finish_interrupted_topic_deletion(name: &str, path: &Path) -> bool {
    if !name.ends_with(DELETING_SUFFIX) {
        return false;
    }
    let _ = fs::remove_dir_all(path);
    true
}
