//! Small file-system steps the log and its loader share: listing, removing and making
//! directory changes durable, each error naming its path.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::error::{EngineError, Result};

pub fn io_at(path: &Path, what: &str) -> impl FnOnce(io::Error) -> EngineError {
    let context = format!("{what} {}", path.display());
    move |e| EngineError::io(context, e)
}

/// fsync of a directory, so creations, renames and removals in it survive a crash.
pub fn sync_dir(dir: &Path) -> Result<()> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_at(dir, "fsync directory"))
}

/// The names of a directory's entries, sorted; a name that is not UTF-8 is skipped with
/// a warning (kpfs never writes one).
pub fn list_names(dir: &Path) -> Result<Vec<String>> {
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
pub fn remove_file(path: &Path) -> Result<()> {
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

/// Where [`write_atomically`](super::topic::write_atomically) writes `path`'s new
/// contents before renaming them over it.
pub fn temporary_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}
