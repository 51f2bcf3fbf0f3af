//! `kpfs upgrade`: converting a data directory written in kpfs's own batch format (magic
//! 1, the format before Kafka's RecordBatch v2) to the current one. Explicit and one-way,
//! like Kafka's `kafka-storage.sh`: mount, `kpfs check` and `kpfs dump-log` refuse an old
//! data directory with an error that names the command (see "Upgrading" in FORMAT.md).
//!
//! Detection: the current format writes [`FORMAT_VERSION_FILE`] into the data directory
//! at the first open of an empty one and at the end of an upgrade; a data directory with
//! topic directories and without that file was written before it existed, in the old
//! format. `legacy_format` decodes the old segments.

// The reading half is used by the conversion, which needs the RecordBatch v2 writer of
// format.rs; until both are merged only the tests read old segments.
#[cfg_attr(not(test), allow(dead_code))]
mod legacy_format;

use std::fs::{self, File};
use std::io::BufReader;
use std::path::{Path, PathBuf};

use super::error::{EngineError, Result};
use super::files::{io_at, list_names};
use super::format::{parse_segment_file_name, DELETING_SUFFIX, LOG_SUFFIX, PARTITION_SUFFIX};
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
#[cfg_attr(not(test), allow(dead_code))]
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

#[cfg_attr(not(test), allow(dead_code))]
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

#[cfg_attr(not(test), allow(dead_code))]
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
}
