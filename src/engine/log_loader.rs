//! Loading a partition directory when its log opens (Kafka's `LogLoader`), and the two
//! steps of the data directory's load that concern leftovers of a crash (Kafka's
//! `LogManager.loadLogs`). Each function is one row of the recovery case table in
//! docs/ARCHITECTURE.md (rows 6, 7 and 8 share the segment recovery they decide on);
//! [`LogLoader::load`] applies them in the table's order, and `tests/recovery.rs` names
//! its tests after the rows.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use super::batch_validation::{BatchWalker, Step};
use super::config::TopicConfig;
use super::error::{EngineError, Result};
use super::files::{io_at, list_names, remove_file, sync_dir, temporary_path};
use super::format::{
    parse_segment_file_name, segment_file_name, CLEANED_SUFFIX, DELETED_SUFFIX, DELETING_SUFFIX,
    INDEX_SUFFIX, KPFS_TOPICS_DIR, LOG_SUFFIX, STREAM_INDEX_SUFFIX, SWAP_SUFFIX, TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
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
    pub truncated: Vec<Truncation>,
    pub recovered_segments: usize,
    /// Bytes validated batch by batch: the unsynced tail after a crash.
    pub recovered_bytes: u64,
    /// The lowest offset from which a recovered segment's transaction index lost its
    /// entries: the producer state is replayed from a snapshot at or below it.
    pub(crate) txn_index_from: Option<u64>,
}

/// A segment recovery cut: the log ends there, and every later segment went with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    /// The segment's `.log` file name.
    pub file: String,
    /// Bytes of the `.log` kept: the valid batches.
    pub kept_bytes: u64,
    /// Bytes cut after them (0 when the segment lost its tail before a later one).
    pub cut_bytes: u64,
    /// Where the log ends now.
    pub log_end_offset: u64,
    /// Why the recovery cut there.
    pub reason: String,
    /// Later segments deleted with the cut.
    pub later_segments: usize,
}

impl Truncation {
    /// What the cut did, after the file's name: the topic's `events` and `status`, and
    /// `.kpfs/errors`, say it with the file named their way.
    pub(crate) fn describe(&self) -> String {
        format!(
            "cut at position {} ({} bytes cut: {}); the log now ends at offset {}, {} later segment(s) deleted",
            self.kept_bytes, self.cut_bytes, self.reason, self.log_end_offset, self.later_segments
        )
    }
}

/// The names in a partition directory and in its kpfs folder, with the directory each is
/// in.
type Names<'a> = Vec<(&'a Path, String)>;

/// How many files the steps of a load removed or renamed so far.
fn changes(report: &OpenReport) -> usize {
    report.removed_files.len() + report.completed_swaps.len()
}

/// One partition directory being loaded.
pub(crate) struct LogLoader<'a> {
    pub(crate) dir: &'a Path,
    /// The topic's kpfs folder: the segments' stream indexes, which follow every rule
    /// below as the segment files do.
    pub(crate) stream_dir: &'a Path,
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
        // The directories are listed once and again only after a step changed them: a
        // mount opens thousands of partitions, nearly all with nothing to clean up, and
        // a listing each step cost more than the rest of their opening.
        let mut names = self.all_names()?;
        let mut listed_at = changes(&report);
        self.remove_deleted_files(&names, &mut report)?;
        self.list_again_if_changed(&mut names, &mut listed_at, &report)?;
        self.roll_back_unfinished_cleaning(&names, &mut report)?;
        self.list_again_if_changed(&mut names, &mut listed_at, &report)?;
        self.remove_index_swaps_without_log_swap(&names, &mut report)?;
        self.list_again_if_changed(&mut names, &mut listed_at, &report)?;
        self.complete_swaps(&names, &mut report)?;
        self.list_again_if_changed(&mut names, &mut listed_at, &report)?;
        let bases = self.log_bases(&names);
        self.remove_orphan_indexes(&names, &bases, &mut report)?;
        let segments = self.load_segments(&bases, &mut report)?;
        Ok((segments, report))
    }

    /// Lists the directories again when a step changed them since `names` was listed.
    fn list_again_if_changed<'n>(
        &'n self,
        names: &mut Names<'n>,
        listed_at: &mut usize,
        report: &OpenReport,
    ) -> Result<()> {
        if changes(report) != *listed_at {
            *names = self.all_names()?;
            *listed_at = changes(report);
        }
        Ok(())
    }

    /// Names in the partition directory and in the topic's kpfs folder, with the
    /// directory each is in.
    fn all_names(&self) -> Result<Names<'_>> {
        let mut names = Vec::new();
        for dir in [self.dir, self.stream_dir] {
            names.extend(list_names(dir)?.into_iter().map(|n| (dir, n)));
        }
        Ok(names)
    }

    /// Row 1: `.deleted` files were already out of the log.
    fn remove_deleted_files(&self, names: &Names<'_>, report: &mut OpenReport) -> Result<()> {
        for (dir, name) in names {
            if name.ends_with(DELETED_SUFFIX) {
                remove_file(&dir.join(name))?;
                report.removed_files.push(name.clone());
            }
        }
        Ok(())
    }

    /// Row 2: `.cleaned` files are a clean that never finished writing; it is rolled
    /// back with every `.swap` at or above the lowest `.cleaned` base (Kafka's
    /// `removeTempFilesAndCollectSwapFiles`).
    fn roll_back_unfinished_cleaning(
        &self,
        names: &Names<'_>,
        report: &mut OpenReport,
    ) -> Result<()> {
        let lowest_cleaned = names
            .iter()
            .filter(|(_, n)| n.ends_with(CLEANED_SUFFIX))
            .filter_map(|(_, n)| parse_segment_file_name(n))
            .map(|(base, _)| base)
            .min();
        for (dir, name) in names {
            let swap_above_cleaned = name
                .strip_suffix(SWAP_SUFFIX)
                .and_then(parse_segment_file_name)
                .is_some_and(|(base, _)| lowest_cleaned.is_some_and(|m| base >= m));
            if name.ends_with(CLEANED_SUFFIX) || swap_above_cleaned {
                remove_file(&dir.join(name))?;
                report.removed_files.push(name.clone());
            }
        }
        Ok(())
    }

    /// Row 4: an index `.swap` without its `.log.swap` is left by a crash during the
    /// final renames; the index is rebuilt from the log.
    fn remove_index_swaps_without_log_swap(
        &self,
        names: &Names<'_>,
        report: &mut OpenReport,
    ) -> Result<()> {
        for (dir, name) in names {
            let Some((base, _)) = name
                .strip_suffix(SWAP_SUFFIX)
                .and_then(parse_segment_file_name)
            else {
                continue;
            };
            let log_swap = segment_file_name(base, LOG_SUFFIX) + SWAP_SUFFIX;
            if !names.iter().any(|(d, n)| *d == self.dir && *n == log_swap) {
                remove_file(&dir.join(name))?;
                report.removed_files.push(name.clone());
            }
        }
        Ok(())
    }

    /// Row 3: a complete set of `.log.swap` files replaces every segment whose base is in
    /// `[first swap base, swap next offset)`; then the `.swap` suffixes are dropped.
    fn complete_swaps(&self, names: &Names<'_>, report: &mut OpenReport) -> Result<()> {
        let mut swaps: Vec<u64> = names
            .iter()
            .filter(|(d, _)| *d == self.dir)
            .filter_map(|(_, n)| n.strip_suffix(SWAP_SUFFIX))
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
            max_next = max_next.max(self.swap_next_offset(base)?);
        }
        let min_swap = swaps[0];
        // A stream index moves before its `.log` (`Segment::rename_suffix`): when a
        // swapped segment's index already lost its `.swap`, the live one is the new one.
        let new_index_live = |base: u64| {
            let swap = segment_file_name(base, STREAM_INDEX_SUFFIX) + SWAP_SUFFIX;
            swaps.contains(&base) && !names.iter().any(|(_, n)| *n == swap)
        };
        // The originals that the swap replaces but that were not yet renamed `.deleted`.
        for (dir, name) in names {
            if name.ends_with(SWAP_SUFFIX) {
                continue;
            }
            if let Some((base, suffix)) = parse_segment_file_name(name) {
                let kept = suffix == STREAM_INDEX_SUFFIX && new_index_live(base);
                if base >= min_swap && base < max_next && !kept {
                    remove_file(&dir.join(name))?;
                    report.removed_files.push(name.clone());
                }
            }
        }
        for (dir, name) in self.all_names()? {
            if let Some(final_name) = name.strip_suffix(SWAP_SUFFIX) {
                fs::rename(dir.join(&name), dir.join(final_name))
                    .map_err(io_at(&dir.join(&name), "complete swap of"))?;
                report.completed_swaps.push(final_name.to_string());
            }
        }
        sync_dir(self.stream_dir)?;
        sync_dir(self.dir)
    }

    /// The offset after the last batch of a `.log.swap` (the cleaner fsynced it whole
    /// before renaming it), read from batch headers alone.
    fn swap_next_offset(&self, base: u64) -> Result<u64> {
        let path = self
            .dir
            .join(segment_file_name(base, LOG_SUFFIX) + SWAP_SUFFIX);
        let file = fs::File::open(&path).map_err(io_at(&path, "open"))?;
        let len = file.metadata().map_err(io_at(&path, "stat"))?.len();
        let mut walker = BatchWalker::new(&file, len, base, false);
        let mut next = base;
        while let Step::Batch { header, .. } = walker.next_step().map_err(io_at(&path, "read"))? {
            next = header.next_offset();
        }
        Ok(next)
    }

    /// Base offsets of the `.log` files, in order.
    fn log_bases(&self, names: &Names<'_>) -> Vec<u64> {
        let mut bases: Vec<u64> = names
            .iter()
            .filter(|(d, _)| *d == self.dir)
            .filter_map(|(_, n)| parse_segment_file_name(n))
            .filter(|(_, suffix)| *suffix == LOG_SUFFIX)
            .map(|(b, _)| b)
            .collect();
        bases.sort_unstable();
        bases
    }

    /// Row 5: an index with no `.log` of the same base offset is an orphan.
    fn remove_orphan_indexes(
        &self,
        names: &Names<'_>,
        bases: &[u64],
        report: &mut OpenReport,
    ) -> Result<()> {
        for (dir, name) in names {
            if let Some((base, suffix)) = parse_segment_file_name(name) {
                let index = [
                    INDEX_SUFFIX,
                    TIME_INDEX_SUFFIX,
                    TXN_INDEX_SUFFIX,
                    STREAM_INDEX_SUFFIX,
                ]
                .contains(&suffix);
                if index && bases.binary_search(&base).is_err() {
                    tracing::warn!(file = %name, "Found an orphaned index file with no corresponding log file; deleting it");
                    remove_file(&dir.join(name))?;
                    report.removed_files.push(name.clone());
                }
            }
        }
        Ok(())
    }

    /// Opens the segments in offset order, recovering those the durability does not vouch
    /// for (rows 6 to 9), and cuts the log at the first invalid byte or lost tail.
    fn load_segments(&self, bases: &[u64], report: &mut OpenReport) -> Result<Vec<Arc<Segment>>> {
        let mut segments: Vec<Arc<Segment>> = Vec::new();
        // Where a segment whose stream index is lost starts: the end of the one before.
        let mut stream_pos = 0;
        let total = bases.len();
        for (i, &base) in bases.iter().enumerate() {
            let index_missing = !self
                .dir
                .join(segment_file_name(base, INDEX_SUFFIX))
                .exists();
            let seg = Segment::open(&SegmentSpec {
                dir: self.dir,
                stream_dir: self.stream_dir,
                shape: self.config.stream_shape(),
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
                let later = &bases[i + 1..];
                if let Some(truncation) = report.truncated.last_mut() {
                    truncation.later_segments = later.len();
                }
                self.remove_segments_after_cut(later, report)?;
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
        let from = report
            .txn_index_from
            .map_or(outcome.txn_index_from, |f| f.min(outcome.txn_index_from));
        report.txn_index_from = Some(from);
        let Some(reason) = outcome.invalid else {
            return Ok(false);
        };
        report
            .truncated
            .push(truncation(seg, outcome.bytes_cut, reason));
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
        let reason = format!(
            "it ends at offset {} but the next segment starts at {next_base}: its tail was lost",
            seg.next_offset()
        );
        report.truncated.push(truncation(seg, 0, reason));
        true
    }

    /// Rows 6 and 6b: everything after the first invalid byte goes, later segments
    /// included.
    fn remove_segments_after_cut(&self, later: &[u64], report: &mut OpenReport) -> Result<()> {
        for &base in later {
            for (dir, suffix) in [
                (self.dir, LOG_SUFFIX),
                (self.dir, INDEX_SUFFIX),
                (self.dir, TIME_INDEX_SUFFIX),
                (self.dir, TXN_INDEX_SUFFIX),
                (self.stream_dir, STREAM_INDEX_SUFFIX),
            ] {
                let p = dir.join(segment_file_name(base, suffix));
                if p.exists() {
                    tracing::warn!(file = %p.display(), "deleting segment file after a truncated segment");
                    remove_file(&p)?;
                    report.removed_files.push(p.display().to_string());
                }
            }
        }
        Ok(())
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

fn truncation(seg: &Segment, cut_bytes: u64, reason: String) -> Truncation {
    Truncation {
        file: seg
            .log_path()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        kept_bytes: seg.size(),
        cut_bytes,
        log_end_offset: seg.next_offset(),
        reason,
        // Set once the caller knows what follows.
        later_segments: 0,
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

/// Row 12, kpfs's side: a topic's kpfs folder follows its partition directory when the
/// topic is deleted, so a `-delete` folder, or one whose partition directory is gone (a
/// crash between the two renames), is the rest of a deletion; it is removed, so a topic
/// created later under that name starts without the old one's configs.
pub(crate) fn finish_interrupted_kpfs_folder_deletions(data_dir: &Path) {
    let kpfs_topics = data_dir.join(KPFS_TOPICS_DIR);
    let Ok(names) = list_names(&kpfs_topics) else {
        return;
    };
    for name in names {
        let path = kpfs_topics.join(&name);
        if name.ends_with(DELETING_SUFFIX) || !data_dir.join(&name).is_dir() {
            tracing::info!(dir = %path.display(), "removing the kpfs folder of a deleted topic");
            let _ = fs::remove_dir_all(&path);
        }
    }
}
