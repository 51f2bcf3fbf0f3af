//! Small file-system steps of the engine, each error naming its path: files written so
//! that a crash leaves either the old or the new content (configs, checkpoints,
//! `kpfs-stream-start`), listing and removing files, and the directory fsync that makes
//! creations, renames and removals survive a crash.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use super::error::{EngineError, Result};
use super::format::TMP_SUFFIX;
use super::topic_partition::TopicPartition;

pub(crate) fn io_at(path: &Path, what: &str) -> impl FnOnce(io::Error) -> EngineError {
    let context = format!("{what} {}", path.display());
    move |e| EngineError::io(context, e)
}

/// fsync of a directory, so creations, renames and removals in it survive a crash.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_at(dir, "fsync directory"))
}

/// The names of a directory's entries, sorted; a name that is not UTF-8 is skipped with
/// a warning (kpfs never writes one).
pub(crate) fn list_names(dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_at(dir, "list"))? {
        let entry = entry.map_err(io_at(dir, "list"))?;
        match entry.file_name().into_string() {
            Ok(n) => names.push(n),
            Err(n) => {
                tracing::warn!(name = ?n, dir = %dir.display(), "ignoring a non-UTF-8 file name")
            }
        }
    }
    names.sort();
    Ok(names)
}

/// Removes a file; one already gone is no error.
pub(crate) fn remove_file(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(EngineError::io(format!("remove {}", path.display()), e)),
    }
}

/// Removes files of deleted segments (after `file.delete.delay.ms`).
pub fn remove_files(files: &[PathBuf]) -> Result<()> {
    for f in files {
        remove_file(f)?;
    }
    Ok(())
}

/// Writes a small file so that a crash leaves either the old or the new content.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let tmp = temporary_path(path);
    let io = |what: &str, e| EngineError::io(format!("{what} {}", tmp.display()), e);
    let mut f = File::create(&tmp).map_err(|e| io("create", e))?;
    let written = f
        .write_all(bytes)
        .map_err(|e| io("write", e))
        .and_then(|()| f.sync_all().map_err(|e| io("fsync", e)))
        .and_then(|()| fs::rename(&tmp, path).map_err(|e| io("rename", e)));
    if written.is_err() {
        // A full disk fails the write: the half-written file must not stay behind.
        let _ = fs::remove_file(&tmp);
    }
    written?;
    if let Some(dir) = path.parent() {
        sync_dir(dir)?;
    }
    Ok(())
}

/// [`write_atomically`], except that out of space (ENOSPC, EDQUOT) it records why in
/// `unsaved` and returns `Ok`: the caller applies its change anyway, since a full disk
/// must not block the way out of it (lowering retention), and calls again later. A
/// successful write clears the reason.
pub(crate) fn write_or_defer(
    path: &Path,
    bytes: &[u8],
    unsaved: &Mutex<Option<String>>,
) -> Result<()> {
    let mut reason = unsaved.lock();
    match write_atomically(path, bytes) {
        Ok(()) => {
            if reason.take().is_some() {
                tracing::info!(file = %path.display(), "saved what was kept in memory while the disk was full");
            }
            Ok(())
        }
        Err(e) if e.is_out_of_space() => {
            if reason.is_none() {
                tracing::warn!(file = %path.display(), error = %e, "kept in memory until there is space");
            }
            *reason = Some(e.to_string());
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Reads one of Kafka's offset checkpoint files (`0\n<count>\n<topic> <partition>
/// <offset>` lines). Anything unreadable is skipped, which only makes kpfs start from
/// the log start (a cleaner checkpoint) or validate more (a recovery point), as Kafka.
pub(crate) fn read_offset_checkpoint(path: &Path) -> BTreeMap<TopicPartition, u64> {
    let Ok(text) = fs::read_to_string(path) else {
        return BTreeMap::new();
    };
    text.lines()
        .skip(2)
        .filter_map(|line| {
            let mut parts = line.split(' ');
            match (parts.next(), parts.next(), parts.next()) {
                (Some(name), Some(partition), Some(offset)) => Some((
                    TopicPartition::new(name, partition.parse().ok()?),
                    offset.parse::<u64>().ok()?,
                )),
                _ => None,
            }
        })
        .collect()
}

pub(crate) fn write_offset_checkpoint(
    path: &Path,
    entries: &BTreeMap<TopicPartition, u64>,
) -> Result<()> {
    let mut text = format!("0\n{}\n", entries.len());
    for (tp, offset) in entries {
        text.push_str(&format!("{} {} {offset}\n", tp.topic, tp.partition));
    }
    write_atomically(path, text.as_bytes())
}

/// Where [`write_atomically`] writes `path`'s new contents before renaming them over it.
pub(crate) fn temporary_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(TMP_SUFFIX);
    path.with_file_name(name)
}
