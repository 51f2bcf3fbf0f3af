//! `kpfs upgrade`: converting a data directory written in kpfs's own batch format (magic
//! 1, the format before Kafka's RecordBatch v2) to the current one. Explicit and one-way,
//! like Kafka's `kafka-storage.sh`: mount, `kpfs check` and `kpfs dump-log` refuse an old
//! data directory with an error that names the command (see "Upgrading" in FORMAT.md).
//!
//! Detection: the current format writes [`FORMAT_VERSION_FILE`] into the data directory
//! at the first open of an empty one and at the end of an upgrade; a data directory with
//! topic directories and without that file was written before it existed, in the old
//! format. `legacy_format` decodes the old segments.

mod convert;
mod legacy_format;

use std::fs::{self, File};
use std::io::BufReader;
use std::path::{Path, PathBuf};

use super::error::{EngineError, Result};
use super::files::{io_at, list_names, write_atomically};
use super::format::{parse_segment_file_name, DELETING_SUFFIX, LOG_SUFFIX};
/// Data directories of kpfs's own format predate partitions: each topic had one, `TOPIC-0`.
const PARTITION_SUFFIX: &str = "-0";
use convert::{convert_partition, Steps};
pub use convert::{segment_format, SegmentFormat, UpgradeReport};
use legacy_format::{LegacyBatches, LEGACY_STREAM_START_FILE, LEGACY_TOPIC_CONFIG_FILE};

/// Names the on-disk format of a data directory; absent in one written before it existed.
pub const FORMAT_VERSION_FILE: &str = "kpfs-format-version";
/// The format this build writes: segments of Kafka's RecordBatch v2.
pub const FORMAT_VERSION: u32 = 2;

/// What a data directory holds, by its marker and its topic directories.
#[derive(Debug, PartialEq, Eq)]
pub enum DataDirFormat {
    /// Neither topics nor a marker: a new data directory (its first open writes the marker).
    Fresh,
    /// The marker names this build's format.
    Current,
    /// Topics without a marker: written in kpfs's own format; `kpfs upgrade` converts it.
    Legacy { topics: Vec<String> },
}

/// Tells what `data_dir` holds. A marker naming another version is an error: a newer
/// kpfs wrote the directory, and this one must not touch it.
pub fn data_dir_format(data_dir: &Path) -> Result<DataDirFormat> {
    let marker = data_dir.join(FORMAT_VERSION_FILE);
    match fs::read_to_string(&marker) {
        Ok(text) => {
            return match text.trim().parse::<u32>() {
                Ok(FORMAT_VERSION) => Ok(DataDirFormat::Current),
                _ => Err(EngineError::UnknownDataDirFormat {
                    path: marker,
                    found: text.trim().to_string(),
                    supported: FORMAT_VERSION,
                }),
            };
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_at(&marker, "read")(e)),
    }
    if !data_dir.exists() {
        return Ok(DataDirFormat::Fresh);
    }
    let topics = legacy_topics(data_dir)?;
    Ok(if topics.is_empty() {
        DataDirFormat::Fresh
    } else {
        DataDirFormat::Legacy { topics }
    })
}

/// Refuses a data directory in the old format, naming the command that converts it.
pub fn refuse_legacy(data_dir: &Path) -> Result<()> {
    match data_dir_format(data_dir)? {
        DataDirFormat::Legacy { .. } => Err(EngineError::LegacyDataDir {
            data_dir: data_dir.to_path_buf(),
        }),
        DataDirFormat::Fresh | DataDirFormat::Current => Ok(()),
    }
}

/// What every open of a data directory does first, under its lock: refuses an old one
/// (naming `kpfs upgrade`) and gives a new one the marker of the current format, so a
/// later open can tell it from an old one.
pub(crate) fn prepare_for_open(data_dir: &Path) -> Result<()> {
    match data_dir_format(data_dir)? {
        DataDirFormat::Legacy { .. } => Err(EngineError::LegacyDataDir {
            data_dir: data_dir.to_path_buf(),
        }),
        DataDirFormat::Fresh => write_marker(data_dir),
        DataDirFormat::Current => Ok(()),
    }
}

/// Refuses a segment file in the old format (`kpfs dump-log` of an old `.log`), naming
/// the data directory it is in (`DATA_DIR/TOPIC-0/X.log`) for `kpfs upgrade`.
pub fn refuse_legacy_segment(path: &Path) -> Result<()> {
    let is_log = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(parse_segment_file_name)
        .is_some_and(|(_, suffix)| suffix.starts_with(LOG_SUFFIX));
    if !is_log || !path.is_file() || segment_format(path)? != SegmentFormat::Legacy {
        return Ok(());
    }
    let data_dir = path
        .parent()
        .and_then(Path::parent)
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    Err(EngineError::LegacyDataDir {
        data_dir: data_dir.to_path_buf(),
    })
}

fn write_marker(data_dir: &Path) -> Result<()> {
    write_atomically(
        &data_dir.join(FORMAT_VERSION_FILE),
        format!("{FORMAT_VERSION}\n").as_bytes(),
    )
}

/// `kpfs upgrade DATA_DIR`: converts every topic of an old data directory, then writes
/// the format marker. Takes the data directory's lock (a running daemon holds it). Safe
/// to stop at any point and run again. `fail_after_steps` stops it after that many
/// durable steps, as a kill -9 there would (the crash tests' way in; `None` otherwise).
pub fn upgrade_data_dir(data_dir: &Path, fail_after_steps: Option<usize>) -> Result<UpgradeReport> {
    if !data_dir.is_dir() {
        return Err(io_at(data_dir, "upgrade")(std::io::Error::from(
            std::io::ErrorKind::NotFound,
        )));
    }
    let _lock = super::take_lock(data_dir)?;
    let mut report = UpgradeReport::default();
    let mut steps = Steps::new(fail_after_steps);
    let topics = match data_dir_format(data_dir)? {
        DataDirFormat::Current => {
            report.already_current = true;
            return Ok(report);
        }
        DataDirFormat::Fresh => Vec::new(),
        DataDirFormat::Legacy { topics } => topics,
    };
    for topic in &topics {
        let dir = data_dir.join(format!("{topic}{PARTITION_SUFFIX}"));
        convert_partition(&dir, &mut steps, &mut report)?;
        report.topics += 1;
    }
    write_marker(data_dir)?;
    steps.done(|| "format marker written".into())?;
    report.steps = steps.taken();
    Ok(report)
}

/// The topics of an old data directory: its partition directories (`TOPIC-0`), without
/// those being deleted (`TOPIC-0.<id>-delete`, which the next open removes).
fn legacy_topics(data_dir: &Path) -> Result<Vec<String>> {
    let mut topics = Vec::new();
    for name in list_names(data_dir)? {
        let Some(topic) = name.strip_suffix(PARTITION_SUFFIX) else {
            continue;
        };
        if !topic.is_empty() && !name.ends_with(DELETING_SUFFIX) && data_dir.join(&name).is_dir() {
            topics.push(topic.to_string());
        }
    }
    Ok(topics)
}

/// One partition directory of an old data directory, as the conversion reads it.
#[derive(Debug)]
pub(crate) struct LegacyPartition {
    /// The live `.log` files by base offset, oldest first.
    pub(crate) segments: Vec<(u64, PathBuf)>,
    /// `.deleted` and `.cleaned` files: the old release removed them at its next open.
    pub(crate) leftovers: Vec<PathBuf>,
    /// The topic's config overrides (the escaped `key=value` lines), if any were set.
    pub(crate) overrides: Option<String>,
    /// `(base offset, stream position)` of the first segment, once retention deleted some.
    pub(crate) stream_start: Option<(u64, u64)>,
}

impl LegacyPartition {
    pub(crate) fn read(dir: &Path) -> Result<LegacyPartition> {
        let mut partition = LegacyPartition {
            segments: Vec::new(),
            leftovers: Vec::new(),
            overrides: None,
            stream_start: None,
        };
        for name in list_names(dir)? {
            let path = dir.join(&name);
            if name == LEGACY_TOPIC_CONFIG_FILE {
                partition.overrides =
                    Some(fs::read_to_string(&path).map_err(io_at(&path, "read"))?);
                continue;
            }
            if name == LEGACY_STREAM_START_FILE {
                partition.stream_start = Some(parse_stream_start(&path)?);
                continue;
            }
            let Some((base, suffix)) = parse_segment_file_name(&name) else {
                continue;
            };
            if suffix == LOG_SUFFIX {
                partition.segments.push((base, path));
            } else if suffix.ends_with(".deleted") || suffix.ends_with(".cleaned") {
                partition.leftovers.push(path);
            } else if suffix.ends_with(".swap") {
                // A crash in the middle of a cleaner swap: only the old release's recovery
                // knows which segments the swap replaces.
                return Err(EngineError::Corrupt {
                    path,
                    position: 0,
                    reason: "a cleaner swap the old kpfs did not finish: mount this data directory once with the kpfs that wrote it, unmount, then upgrade".into(),
                });
            }
        }
        partition.segments.sort();
        Ok(partition)
    }

    /// The batches of one old segment, in file order.
    pub(crate) fn batches(log: &Path) -> Result<LegacyBatches<BufReader<File>>> {
        let file = File::open(log).map_err(io_at(log, "open"))?;
        Ok(LegacyBatches::new(BufReader::new(file)))
    }
}

fn parse_stream_start(path: &Path) -> Result<(u64, u64)> {
    let text = fs::read_to_string(path).map_err(io_at(path, "read"))?;
    let mut fields = text.split_whitespace().map(str::parse::<u64>);
    match (fields.next(), fields.next(), fields.next()) {
        (Some(Ok(base)), Some(Ok(position)), None) => Ok((base, position)),
        _ => Err(EngineError::Corrupt {
            path: path.to_path_buf(),
            position: 0,
            reason: format!("expected '<base offset> <stream position>', found {text:?}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::legacy_format::LegacyRecord;
    use super::*;
    use crate::engine::format::{segment_file_name, STREAM_INDEX_SUFFIX};

    fn fixture() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/legacy-v1")
    }

    fn records(partition: &LegacyPartition) -> Vec<LegacyRecord> {
        let mut all = Vec::new();
        for (_, log) in &partition.segments {
            for batch in LegacyPartition::batches(log).unwrap() {
                all.extend(batch.unwrap().1);
            }
        }
        all
    }

    /// What `cat log` showed: key, separator and value, or the null marker.
    fn rendered(records: &[LegacyRecord], separator: &[u8], null_marker: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for r in records {
            if let Some(key) = &r.key {
                out.extend_from_slice(key);
                out.extend_from_slice(separator);
            }
            out.extend_from_slice(r.value.as_deref().unwrap_or(null_marker));
            out.push(b'\n');
        }
        out
    }

    #[test]
    fn the_fixture_reads_back_as_its_topics_showed_it() {
        for (dir, topic, null_marker) in [
            ("clean", "plain", ""),
            ("clean", "retained", ""),
            ("clean", "keyed", "NULL"),
            ("clean", "compacted", "NULL"),
            ("clean", "configured", ""),
            ("unclean", "crashed", ""),
        ] {
            let partition =
                LegacyPartition::read(&fixture().join(dir).join(format!("{topic}-0"))).unwrap();
            let records = records(&partition);
            let expected = |what: &str| {
                fs::read(fixture().join(format!("expected/{dir}/{topic}.{what}"))).unwrap()
            };
            assert_eq!(
                String::from_utf8(rendered(&records, b":", null_marker.as_bytes())).unwrap(),
                String::from_utf8(expected("log")).unwrap(),
                "{topic}"
            );
            let last = records.last().unwrap();
            let size: u64 = String::from_utf8(expected("size"))
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            assert_eq!(last.stream_pos + last.line_len, size, "{topic}: stream end");
            assert!(partition.overrides.is_some(), "{topic}: overrides");
        }
    }

    #[test]
    fn retention_leftovers_and_the_stream_start_are_found() {
        let partition = LegacyPartition::read(&fixture().join("clean/retained-0")).unwrap();
        assert_eq!(partition.stream_start, Some((6, 66)));
        let bases: Vec<_> = partition.segments.iter().map(|s| s.0).collect();
        assert_eq!(bases, [6, 9]);
        assert_eq!(partition.leftovers.len(), 6);
        assert_eq!(records(&partition)[0].stream_pos, 66);
    }

    #[test]
    fn old_data_dirs_are_told_from_current_and_fresh_ones() {
        assert_eq!(
            data_dir_format(&fixture().join("clean")).unwrap(),
            DataDirFormat::Legacy {
                topics: ["compacted", "configured", "keyed", "plain", "retained"]
                    .map(String::from)
                    .to_vec()
            }
        );
        let err = refuse_legacy(&fixture().join("unclean")).unwrap_err();
        assert!(err.to_string().contains("kpfs upgrade "), "{err}");
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(data_dir_format(dir.path()).unwrap(), DataDirFormat::Fresh);
        fs::write(dir.path().join(FORMAT_VERSION_FILE), "2\n").unwrap();
        fs::create_dir(dir.path().join("t-0")).unwrap();
        assert_eq!(data_dir_format(dir.path()).unwrap(), DataDirFormat::Current);
        fs::write(dir.path().join(FORMAT_VERSION_FILE), "3\n").unwrap();
        assert!(matches!(
            data_dir_format(dir.path()),
            Err(EngineError::UnknownDataDirFormat { .. })
        ));
    }

    /// A batch as both formats must agree on it: base and last offset, delete horizon,
    /// and each record's offset, timestamp, key, value and stream position.
    type Batch = (
        u64,
        u64,
        Option<i64>,
        Vec<(u64, i64, Option<Vec<u8>>, Option<Vec<u8>>, u64)>,
    );

    fn legacy_batches(partition_dir: &Path) -> Vec<Batch> {
        let partition = LegacyPartition::read(partition_dir).unwrap();
        let mut all = Vec::new();
        for (_, log) in &partition.segments {
            for batch in LegacyPartition::batches(log).unwrap() {
                let (h, records) = batch.unwrap();
                let records = records
                    .into_iter()
                    .map(|r| (r.offset, r.timestamp, r.key, r.value, r.stream_pos))
                    .collect();
                all.push((h.base_offset, h.last_offset(), h.delete_horizon_ms, records));
            }
        }
        all
    }

    /// The batches of a converted partition, each record placed by the segment's stream
    /// index as the engine places it.
    fn converted_batches(partition_dir: &Path) -> Vec<Batch> {
        use crate::engine::format::{decode_batch, decode_header, kpfs_topic_dir};
        use crate::engine::stream_index::{StreamIndex, StreamShape, StreamWalker};
        let mut bases: Vec<u64> = list_names(partition_dir)
            .unwrap()
            .iter()
            .filter_map(|n| parse_segment_file_name(n))
            .filter(|(_, suffix)| *suffix == LOG_SUFFIX)
            .map(|(base, _)| base)
            .collect();
        bases.sort();
        let mut all = Vec::new();
        for base in bases {
            let bytes = fs::read(partition_dir.join(segment_file_name(base, LOG_SUFFIX))).unwrap();
            let index = StreamIndex::load(
                &kpfs_topic_dir(partition_dir).join(segment_file_name(base, STREAM_INDEX_SUFFIX)),
                base,
                bytes.len() as u64,
            )
            .unwrap()
            .expect("a stream index for every segment");
            let unused = StreamShape {
                separator_len: None,
                null_len: 0,
            };
            let mut walker = StreamWalker::new(index.entries(), 0, index.stream_start(), unused);
            let mut at = 0;
            while at < bytes.len() {
                let size = decode_header(&bytes[at..]).unwrap().size;
                let (h, records) = decode_batch(&bytes[at..at + size]).unwrap();
                let records = records
                    .into_iter()
                    .map(|r| {
                        let pos = walker.position(r.offset, r.key.as_deref(), r.value.as_deref());
                        (r.offset, r.timestamp, r.key, r.value, pos)
                    })
                    .collect();
                all.push((
                    h.base_offset,
                    h.last_offset(),
                    h.delete_horizon_ms(),
                    records,
                ));
                at += size;
            }
        }
        all
    }

    fn copy_of(dir: &str) -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let copy = tmp.path().join(dir);
        let status = std::process::Command::new("cp")
            .arg("-a")
            .arg(fixture().join(dir))
            .arg(&copy)
            .status()
            .unwrap();
        assert!(status.success());
        (tmp, copy)
    }

    fn assert_every_record_kept(dir: &str, copy: &Path, context: &str) {
        for topic in legacy_topics(&fixture().join(dir)).unwrap() {
            let name = format!("{topic}{PARTITION_SUFFIX}");
            let before = legacy_batches(&fixture().join(dir).join(&name));
            assert!(!before.is_empty());
            assert_eq!(
                converted_batches(&copy.join(&name)),
                before,
                "{topic} {context}"
            );
        }
    }

    #[test]
    fn every_record_keeps_its_offsets_timestamps_fields_horizon_and_stream_position() {
        for dir in ["clean", "unclean"] {
            let (_tmp, copy) = copy_of(dir);
            upgrade_data_dir(&copy, None).unwrap();
            assert_every_record_kept(dir, &copy, "");
        }
        // The fixture has what the conversion must keep.
        let compacted = legacy_batches(&fixture().join("clean/compacted-0"));
        assert!(compacted.iter().any(|b| b.2.is_some()), "a delete horizon");
        let first = &compacted[0].3[0];
        assert!(
            first.4 > 0,
            "a stream that starts after bytes the cleaner removed"
        );
        let partition = LegacyPartition::read(&fixture().join("clean/compacted-0")).unwrap();
        assert!(
            partition
                .segments
                .iter()
                .any(|(_, log)| fs::metadata(log).unwrap().len() == 0),
            "segments the cleaner emptied"
        );
    }

    #[test]
    fn an_upgrade_stopped_after_any_step_keeps_every_record_once_run_again() {
        for dir in ["clean", "unclean"] {
            let steps = upgrade_data_dir(&copy_of(dir).1, None).unwrap().steps;
            for stop_after in 1..steps {
                let (_tmp, copy) = copy_of(dir);
                let stopped = upgrade_data_dir(&copy, Some(stop_after)).unwrap_err();
                assert!(
                    stopped.to_string().contains("injected failure"),
                    "{stopped}"
                );
                assert!(matches!(
                    data_dir_format(&copy).unwrap(),
                    DataDirFormat::Legacy { .. }
                ));
                let rest = upgrade_data_dir(&copy, None).unwrap();
                assert!(
                    rest.steps <= steps,
                    "the rerun redoes at most one segment's steps"
                );
                assert_every_record_kept(
                    dir,
                    &copy,
                    &format!("after a stop after step {stop_after}"),
                );
            }
        }
    }
}
