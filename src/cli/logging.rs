//! The daemon's log: `tracing` events, filtered by `RUST_LOG` (default `info`), appended
//! to `DATA_DIR/kpfs.log` and, in the foreground, copied to stderr.

use std::fs::OpenOptions;
use std::io;
use std::path::Path;

use super::error::{io_error, CliError};
use crate::engine::DAEMON_LOG_FILE;

/// The target of the one event that records why the command failed: `main` prints that
/// error to stderr itself (`kpfs: ...`), so stderr's copy of the log leaves it out.
pub(super) const FATAL_TARGET: &str = "kpfs::fatal";

pub(super) fn init_logging(data_dir: &Path, to_stderr: bool) -> Result<(), CliError> {
    use tracing_subscriber::fmt::writer::MakeWriterExt;
    use tracing_subscriber::EnvFilter;

    let path = data_dir.join(DAEMON_LOG_FILE);
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| io_error(path.display(), e))?;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_thread_names(true);
    let file = std::sync::Mutex::new(file);
    // try_init: a second subscriber (tests calling this twice) is not an error worth dying for.
    let _ = if to_stderr {
        let stderr = io::stderr.with_filter(|meta| meta.target() != FATAL_TARGET);
        builder.with_writer(file.and(stderr)).try_init()
    } else {
        builder.with_writer(file).try_init()
    };
    Ok(())
}
