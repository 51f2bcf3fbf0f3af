//! The conversion itself: each old segment rewritten as Kafka's RecordBatch v2 with its
//! stream index, one segment at a time, so that a stop at any point (kill -9, power cut)
//! leaves every segment whole in one format or the other and a rerun finishes the job.
//!
//! Per segment `X`: the new files are written as `X.log.upgrading`, its indexes and
//! `X.stream.upgrading` (in the topic's kpfs folder) through [`Segment`], as the cleaner
//! writes its output, and fsynced; then renamed over the old ones, the stream index first
//! and the `.log` second. The `.log` decides: an old `.log` (magic 1 at byte 12) is
//! converted again from scratch, a v2 one (magic 2 at byte 16) is done and only the
//! renames after it are finished. An empty `.log` is the same in both formats: it is done
//! once its stream index is live and its `.log.upgrading` gone.
//!
//! Segments go newest first, so the segments before the one being converted are still
//! old: an empty segment's stream starts where the last non-empty one before it ends, and
//! only the old batch headers say where that is (the new format keeps record positions,
//! not the range a batch had when appended). The topic's own files move, and leftovers go,
//! once all its segments are done; the data directory's marker is written last.

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::super::config::{BrokerConfig, TopicConfig, TopicOverrides};
use super::super::error::{EngineError, Result};
use super::super::files::{io_at, remove_file, sync_dir, write_atomically};
use super::super::format::{
    kpfs_topic_dir, segment_file_name, BatchBuilder, BatchEnd, BATCH_MAGIC, INDEX_SUFFIX,
    LOG_SUFFIX, MAX_SEGMENT_FILE_BYTES, STREAM_INDEX_SUFFIX, TIME_INDEX_ENTRY_BYTES,
    TIME_INDEX_SUFFIX, TOPIC_CONFIG_FILE,
};
use super::super::segment::{Segment, SegmentSpec};
use super::super::stream_index::{BatchStream, StreamMark, StreamShape};
use super::legacy_format::{
    LegacyBatchHeader, LegacyRecord, LEGACY_MAGIC, LEGACY_STREAM_START_FILE,
    LEGACY_TOPIC_CONFIG_FILE, MAGIC_AT as LEGACY_MAGIC_AT,
};
use super::LegacyPartition;

/// The suffix of a segment's new files until they replace the old ones.
pub(crate) const UPGRADING_SUFFIX: &str = ".upgrading";
/// Where Kafka's RecordBatch v2 has its magic byte.
const V2_MAGIC_AT: usize = 16;
/// Converted batches are written in runs of about this many bytes (one write each).
const WRITE_BUFFER_BYTES: usize = 1 << 20;

/// What a `.log` holds, by its first batch's magic byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentFormat {
    /// No batch: the same bytes in both formats.
    Empty,
    /// kpfs's own batch format (magic 1).
    Legacy,
    /// Kafka's RecordBatch v2.
    V2,
}

/// Tells a `.log`'s format from its first batch. kpfs writes partition leader epoch 0,
/// so byte 12 of a v2 batch is 0, never the old magic.
pub fn segment_format(log: &Path) -> Result<SegmentFormat> {
    let mut head = Vec::with_capacity(V2_MAGIC_AT + 1);
    fs::File::open(log)
        .and_then(|f| f.take(V2_MAGIC_AT as u64 + 1).read_to_end(&mut head))
        .map_err(io_at(log, "read"))?;
    if head.is_empty() {
        Ok(SegmentFormat::Empty)
    } else if head.get(LEGACY_MAGIC_AT) == Some(&LEGACY_MAGIC) {
        Ok(SegmentFormat::Legacy)
    } else if head.get(V2_MAGIC_AT) == Some(&BATCH_MAGIC) {
        Ok(SegmentFormat::V2)
    } else {
        Err(EngineError::Corrupt {
            path: log.to_path_buf(),
            position: 0,
            reason: "the first batch is neither kpfs's old format (magic 1) nor RecordBatch v2"
                .into(),
        })
    }
}

/// What an upgrade did; a rerun counts only what was left to do.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct UpgradeReport {
    /// The data directory already held the current format: nothing was done.
    pub already_current: bool,
    pub topics: usize,
    pub segments_converted: usize,
    /// Segments a previous, interrupted run had already converted.
    pub segments_already_converted: usize,
    pub batches: u64,
    pub records: u64,
    /// `.deleted` and `.cleaned` files of the old release removed.
    pub leftovers_removed: usize,
    /// Bytes after a segment's last valid batch (a torn tail of an unclean stop), which
    /// the old release's recovery cut too.
    pub bytes_cut: u64,
    /// The durable steps taken (for the crash tests: a stop after each).
    pub steps: usize,
}

/// Counts durable steps and stops the upgrade after the chosen one, as a kill -9 there
/// would: whatever was written stays, nothing after it happens.
pub(super) struct Steps {
    taken: usize,
    fail_after: Option<usize>,
}

impl Steps {
    pub(super) fn new(fail_after: Option<usize>) -> Steps {
        Steps {
            taken: 0,
            fail_after,
        }
    }

    pub(super) fn taken(&self) -> usize {
        self.taken
    }

    pub(super) fn done(&mut self, what: impl FnOnce() -> String) -> Result<()> {
        self.taken += 1;
        if self.fail_after == Some(self.taken) {
            return Err(EngineError::io(
                format!("upgrade stopped after step {}: {}", self.taken, what()),
                io::Error::other("injected failure"),
            ));
        }
        Ok(())
    }
}

/// Converts one old partition directory: every segment, then the topic's own files.
pub(super) fn convert_partition(
    dir: &Path,
    steps: &mut Steps,
    report: &mut UpgradeReport,
) -> Result<()> {
    let partition = LegacyPartition::read(dir)?;
    let stream_dir = kpfs_topic_dir(dir);
    fs::create_dir_all(&stream_dir).map_err(io_at(&stream_dir, "create"))?;
    let new_config = stream_dir.join(TOPIC_CONFIG_FILE);
    // A rerun after the overrides moved finds them at their new place.
    let overrides = match &partition.overrides {
        Some(text) => Some(text.clone()),
        None => match fs::read_to_string(&new_config) {
            Ok(text) => Some(text),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(io_at(&new_config, "read")(e)),
        },
    };
    let config = BrokerConfig::defaults().resolve_topic(&match &overrides {
        Some(text) => TopicOverrides::from_properties(text)?,
        None => TopicOverrides::default(),
    });
    let target = Target {
        dir,
        stream_dir: &stream_dir,
        config: &config,
    };
    let done: Vec<bool> = partition
        .segments
        .iter()
        .map(|&(base, _)| target.is_done(base))
        .collect::<Result<_>>()?;
    let starts = stream_starts(&partition, &done)?;
    for (i, &(base, _)) in partition.segments.iter().enumerate().rev() {
        if done[i] {
            target.finish_renames(base, steps)?;
            report.segments_already_converted += 1;
        } else {
            target.convert_segment(base, starts[i], steps, report)?;
            report.segments_converted += 1;
        }
    }
    if let Some(text) = &partition.overrides {
        write_atomically(&new_config, text.as_bytes())?;
        steps.done(|| format!("{} written", new_config.display()))?;
    }
    for name in [LEGACY_TOPIC_CONFIG_FILE, LEGACY_STREAM_START_FILE] {
        let path = dir.join(name);
        if path.exists() {
            remove_file(&path)?;
            steps.done(|| format!("{} removed", path.display()))?;
        }
    }
    for path in &partition.leftovers {
        remove_file(path)?;
        report.leftovers_removed += 1;
        steps.done(|| format!("{} removed", path.display()))?;
    }
    sync_dir(dir)
}

/// Where each segment's stream starts, for the segments not converted yet (which come
/// before the converted ones: segments go newest first): the stream end of the last
/// non-empty segment before it, or for the first ones the old stream-start file (written
/// when retention had deleted segments) or 0, as the old release loaded them.
fn stream_starts(partition: &LegacyPartition, done: &[bool]) -> Result<Vec<u64>> {
    let first_base = partition.segments.first().map(|s| s.0);
    let mut end = match partition.stream_start {
        Some((base, position)) if Some(base) == first_base => position,
        _ => 0,
    };
    let mut starts = Vec::with_capacity(partition.segments.len());
    for (i, (_, log)) in partition.segments.iter().enumerate() {
        starts.push(end);
        if done[i] {
            // Only converted segments follow (see above): no start is needed any more.
            break;
        }
        for batch in LegacyPartition::batches(log)? {
            match batch {
                Ok((header, _)) => end = header.stream_end(),
                Err(_) => break, // a torn tail: convert_segment reports it
            }
        }
    }
    Ok(starts)
}

/// Where one partition's converted segments go, and the config they are written under.
struct Target<'a> {
    dir: &'a Path,
    stream_dir: &'a Path,
    config: &'a TopicConfig,
}

impl Target<'_> {
    fn path(&self, base: u64, kind: &str, extra: &str) -> PathBuf {
        let dir = if kind == STREAM_INDEX_SUFFIX {
            self.stream_dir
        } else {
            self.dir
        };
        dir.join(segment_file_name(base, kind) + extra)
    }

    /// See the module doc: the `.log` tells, and for an empty one its stream index.
    fn is_done(&self, base: u64) -> Result<bool> {
        if self.path(base, LOG_SUFFIX, UPGRADING_SUFFIX).exists() {
            return Ok(false);
        }
        Ok(match segment_format(&self.path(base, LOG_SUFFIX, ""))? {
            SegmentFormat::V2 => true,
            SegmentFormat::Legacy => false,
            SegmentFormat::Empty => self.path(base, STREAM_INDEX_SUFFIX, "").exists(),
        })
    }

    /// The renames after the `.log`'s, which a stop may have left undone. (The stream
    /// index is renamed before the `.log`, but a power cut may keep only the later
    /// rename.)
    fn finish_renames(&self, base: u64, steps: &mut Steps) -> Result<()> {
        for kind in [STREAM_INDEX_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
            let from = self.path(base, kind, UPGRADING_SUFFIX);
            if from.exists() {
                self.rename_into_place(base, kind, steps)?;
            }
        }
        Ok(())
    }

    fn rename_into_place(&self, base: u64, kind: &str, steps: &mut Steps) -> Result<()> {
        let from = self.path(base, kind, UPGRADING_SUFFIX);
        let to = self.path(base, kind, "");
        fs::rename(&from, &to).map_err(io_at(&from, "rename"))?;
        steps.done(|| format!("{} renamed", from.display()))
    }

    fn convert_segment(
        &self,
        base: u64,
        stream_start: u64,
        steps: &mut Steps,
        report: &mut UpgradeReport,
    ) -> Result<()> {
        let old_log = self.path(base, LOG_SUFFIX, "");
        // What an interrupted run left: written again from the old segment.
        for kind in [
            LOG_SUFFIX,
            INDEX_SUFFIX,
            TIME_INDEX_SUFFIX,
            STREAM_INDEX_SUFFIX,
        ] {
            remove_file(&self.path(base, kind, UPGRADING_SUFFIX))?;
        }
        let old = fs::metadata(&old_log).map_err(io_at(&old_log, "stat"))?;
        let interval = self.config.index_interval_bytes.max(1) as u64;
        // The segment is written whole, never rolled: its indexes get room for every
        // entry a v2 segment several times the old one's size may need (trimmed at seal).
        let index_room = ((old.len() * 8 / interval + 2) as usize) * TIME_INDEX_ENTRY_BYTES;
        let segment = Segment::create(&SegmentSpec {
            dir: self.dir,
            stream_dir: self.stream_dir,
            shape: self.config.stream_shape(),
            base_offset: base,
            suffix: UPGRADING_SUFFIX,
            stream_pos: stream_start,
            max_index_bytes: index_room.max(self.config.segment_index_bytes.max(0) as usize),
            now_ms: 0,
            roll_jitter_ms: 0,
        })?;
        let written = self
            .copy_batches(&old_log, &segment, stream_start, report)
            .and_then(|()| {
                segment.seal()?;
                segment.flush()?;
                match old.modified() {
                    Ok(mtime) => segment.set_modified(mtime),
                    Err(_) => Ok(()),
                }
            });
        drop(segment);
        written?;
        sync_dir(self.stream_dir)?;
        sync_dir(self.dir)?;
        steps.done(|| {
            format!(
                "{} written",
                self.path(base, LOG_SUFFIX, UPGRADING_SUFFIX).display()
            )
        })?;
        self.rename_into_place(base, STREAM_INDEX_SUFFIX, steps)?;
        // The stream index must be live before the `.log` that needs it is.
        sync_dir(self.stream_dir)?;
        self.rename_into_place(base, LOG_SUFFIX, steps)?;
        self.rename_into_place(base, INDEX_SUFFIX, steps)?;
        self.rename_into_place(base, TIME_INDEX_SUFFIX, steps)?;
        sync_dir(self.dir)
    }

    /// Appends a v2 batch for every old one: same base and last offset (a cleaned batch
    /// keeps its last offset), timestamps, keys, values, tombstones and delete horizon,
    /// and each record's stream position.
    fn copy_batches(
        &self,
        old_log: &Path,
        segment: &Segment,
        stream_start: u64,
        report: &mut UpgradeReport,
    ) -> Result<()> {
        let mut stream = StreamCursor {
            end: stream_start,
            shape: self.config.stream_shape(),
        };
        let mut builder = BatchBuilder::new(0);
        let mut pending = Pending {
            old_log,
            segment,
            interval: self.config.index_interval_bytes.max(0) as u64,
            buffer: Vec::with_capacity(WRITE_BUFFER_BYTES),
            marks: Vec::new(),
            batches: Vec::new(),
        };
        let mut next_offset = 0u64;
        let mut old_pos = 0u64;
        for batch in LegacyPartition::batches(old_log)? {
            let (header, records) = match batch {
                Ok(batch) => batch,
                Err(at) => {
                    let old_len = fs::metadata(old_log).map_err(io_at(old_log, "stat"))?.len();
                    tracing::warn!(path = %old_log.display(), position = at.position, error = %at.error, "dropping an old segment's invalid tail, as the old release's recovery did");
                    report.bytes_cut += old_len - at.position;
                    break;
                }
            };
            if header.base_offset < next_offset {
                return Err(EngineError::Corrupt {
                    path: old_log.to_path_buf(),
                    position: old_pos,
                    reason: format!(
                        "batch base offset {} below the previous batch's next offset {next_offset}",
                        header.base_offset
                    ),
                });
            }
            next_offset = header.last_offset() + 1;
            old_pos += header.size as u64;
            let first_mark = pending.marks.len();
            stream.note_batch(&records, &mut pending.marks);
            pending
                .batches
                .push((first_mark..pending.marks.len(), stream.end));
            encode_batch(&mut builder, &header, &records, &mut pending.buffer);
            report.batches += 1;
            report.records += records.len() as u64;
            if pending.buffer.len() >= WRITE_BUFFER_BYTES {
                pending.flush()?;
            }
        }
        pending.flush()
    }
}

/// Converted batches not written yet, with their stream marks and each batch's range of
/// them and stream end.
struct Pending<'a> {
    old_log: &'a Path,
    segment: &'a Segment,
    interval: u64,
    buffer: Vec<u8>,
    marks: Vec<StreamMark>,
    batches: Vec<(std::ops::Range<usize>, u64)>,
}

impl Pending<'_> {
    fn flush(&mut self) -> Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        if self.segment.size() + self.buffer.len() as u64 > MAX_SEGMENT_FILE_BYTES {
            return Err(EngineError::Corrupt {
                path: self.old_log.to_path_buf(),
                position: 0,
                reason: format!("its records need more than {MAX_SEGMENT_FILE_BYTES} bytes as RecordBatch v2, more than a segment can hold"),
            });
        }
        let streams: Vec<BatchStream<'_>> = self
            .batches
            .iter()
            .map(|(range, stream_end)| BatchStream {
                marks: &self.marks[range.clone()],
                stream_end: *stream_end,
            })
            .collect();
        self.segment
            .append_batches(&self.buffer, &streams, self.interval)?;
        self.buffer.clear();
        self.marks.clear();
        self.batches.clear();
        Ok(())
    }
}

/// One old batch as a v2 batch, appended to `out`. KIP-534: a batch with a delete
/// horizon has it as its base timestamp, the records' timestamps as deltas from it.
fn encode_batch(
    builder: &mut BatchBuilder,
    header: &LegacyBatchHeader,
    records: &[LegacyRecord],
    out: &mut Vec<u8>,
) {
    let base_timestamp = header
        .delete_horizon_ms
        .or(records.is_empty().then_some(header.base_timestamp));
    builder.reset(header.base_offset, base_timestamp);
    for r in records {
        builder.push(r.offset, r.timestamp, r.key.as_deref(), r.value.as_deref());
    }
    // The old format had no compression: the records stay uncompressed, as appended.
    let parts = builder
        .finish_parts(&BatchEnd {
            last_offset: Some(header.last_offset()),
            delete_horizon_ms: header.delete_horizon_ms,
            empty_timestamp: header.max_timestamp,
            ..BatchEnd::PLAIN
        })
        .expect("an uncompressed batch has no codec to fail");
    out.extend_from_slice(&parts.header);
    out.extend_from_slice(parts.records);
}

/// Where the converted records stand in the stream: the end of the last one and the
/// rendering its length was counted under.
struct StreamCursor {
    end: u64,
    shape: StreamShape,
}

impl StreamCursor {
    /// The stream marks of one batch: its first record, and every record whose position
    /// does not follow from the one before (the cleaner removed records between them) or
    /// whose line was written under another rendering.
    fn note_batch(&mut self, records: &[LegacyRecord], marks: &mut Vec<StreamMark>) {
        for (i, r) in records.iter().enumerate() {
            let shape = shape_of(r, self.shape);
            if i == 0 || r.stream_pos != self.end || shape != self.shape {
                marks.push(StreamMark {
                    offset: r.offset,
                    stream_pos: r.stream_pos,
                    shape,
                });
            }
            self.shape = shape;
            self.end = r.stream_pos + shape.line_len(r.key.as_deref(), r.value.as_deref());
        }
    }
}

/// The rendering an old record's line was written under, from its length: the old
/// format kept each line as written, the new one its length's rule (key, separator,
/// value, null marker). `hint` (the previous record's) is kept when it gives the line's
/// length; a line no rendering explains keeps `hint`, and the record after it gets its
/// own mark, so no position is lost.
fn shape_of(r: &LegacyRecord, hint: StreamShape) -> StreamShape {
    let (key, value) = (r.key.as_deref(), r.value.as_deref());
    let body = r.line_len.saturating_sub(1);
    let len = |f: Option<&[u8]>| f.map(|f| f.len() as u64);
    let u32_of = |n: Option<u64>| n.and_then(|n| u32::try_from(n).ok());
    let separator = hint.separator_len.unwrap_or(1);
    let keyed = |separator_len: Option<u64>, null_len: Option<u64>| {
        Some(StreamShape {
            separator_len: Some(u32_of(separator_len)?),
            null_len: u32_of(null_len)?,
        })
    };
    let derived = || -> Option<StreamShape> {
        match (len(key), len(value)) {
            (None, None) => Some(StreamShape {
                separator_len: None,
                null_len: u32_of(Some(body))?,
            }),
            (Some(k), Some(v)) => keyed(body.checked_sub(k + v), Some(u64::from(hint.null_len))),
            (Some(k), None) => keyed(
                Some(u64::from(separator)),
                body.checked_sub(k + u64::from(separator)),
            ),
            (None, Some(v)) => keyed(
                Some(u64::from(separator)),
                body.checked_sub(v + u64::from(separator)),
            ),
        }
    };
    let candidates = [
        Some(hint),
        // A line appended before keys were parsed.
        Some(StreamShape {
            separator_len: None,
            ..hint
        }),
        derived(),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|s| s.line_len(key, value) == r.line_len)
        .unwrap_or(hint)
}
