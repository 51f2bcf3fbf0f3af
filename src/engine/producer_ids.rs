//! Producer ids for Kafka's InitProducerId (`ProducerIdManager` handing out
//! `ProducerIdsBlock`s): an idempotent producer's id must never be given twice, or a new
//! producer would inherit another's sequences. Ids come from blocks of
//! [`PRODUCER_ID_BLOCK_SIZE`]; the start of the next block is written to
//! [`PRODUCER_ID_BLOCK_FILE`] (atomically, synced) before the first id of a block is
//! handed out, so after any restart the ids start past every id ever given, wasting at
//! most the rest of one block (Kafka's controller records the same in its metadata log).

use std::path::{Path, PathBuf};

use super::error::{EngineError, Result};
use super::files::{io_at, write_atomically};
use super::format::PRODUCER_ID_BLOCK_FILE;
use super::limits::PRODUCER_ID_BLOCK_SIZE;
use super::log_loader::remove_stale_temporary;

/// The version line of [`PRODUCER_ID_BLOCK_FILE`].
const VERSION: &str = "0";

#[derive(Debug)]
pub(crate) struct ProducerIds {
    path: PathBuf,
    /// The next id to hand out.
    next: i64,
    /// The end of the block recorded on disk: ids below it may be handed out.
    block_end: i64,
}

impl ProducerIds {
    /// Reads where the next block starts (0 in a new data directory).
    pub(crate) fn open(data_dir: &Path) -> Result<ProducerIds> {
        let path = data_dir.join(PRODUCER_ID_BLOCK_FILE);
        remove_stale_temporary(&path);
        let next = read_block_file(&path)?;
        Ok(ProducerIds {
            path,
            next,
            block_end: next,
        })
    }

    /// A producer id never handed out before, in this run or any earlier one.
    pub(crate) fn next_id(&mut self) -> Result<i64> {
        if self.next == self.block_end {
            let end = self
                .next
                .checked_add(PRODUCER_ID_BLOCK_SIZE)
                .ok_or_else(|| EngineError::InvalidRecord {
                    message: "Exhausted all producerIds as the next block's end producerId has exceeded the int64 type limit".to_string(),
                })?;
            write_atomically(&self.path, format!("{VERSION}\n{end}\n").as_bytes())?;
            self.block_end = end;
        }
        let id = self.next;
        self.next += 1;
        Ok(id)
    }
}

/// The first id of the next block, as [`PRODUCER_ID_BLOCK_FILE`] at `path` says (0 when
/// it is missing); a file that says anything else is refused, naming it.
pub(crate) fn read_block_file(path: &Path) -> Result<i64> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse(&text).ok_or_else(|| EngineError::Corrupt {
            path: path.to_path_buf(),
            position: 0,
            reason: format!(
                "not a producer id block file ({VERSION}, then the next block's first id): {text:?}"
            ),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(io_at(path, "read")(e)),
    }
}

fn parse(text: &str) -> Option<i64> {
    let mut lines = text.lines();
    if lines.next()? != VERSION {
        return None;
    }
    let next = lines.next()?.parse::<i64>().ok().filter(|&n| n >= 0)?;
    lines.next().is_none().then_some(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_never_reused_across_reopens_and_a_block_is_recorded_before_use() {
        let dir = tempfile::tempdir().unwrap();
        let mut ids = ProducerIds::open(dir.path()).unwrap();
        assert_eq!(ids.next_id().unwrap(), 0);
        assert_eq!(
            std::fs::read_to_string(dir.path().join(PRODUCER_ID_BLOCK_FILE)).unwrap(),
            "0\n1000\n"
        );
        for expected in 1..1000 {
            assert_eq!(ids.next_id().unwrap(), expected);
        }
        assert_eq!(ids.next_id().unwrap(), 1000);
        assert_eq!(
            std::fs::read_to_string(dir.path().join(PRODUCER_ID_BLOCK_FILE)).unwrap(),
            "0\n2000\n"
        );
        // A restart (clean or not) starts past the recorded block.
        let mut reopened = ProducerIds::open(dir.path()).unwrap();
        assert_eq!(reopened.next_id().unwrap(), 2000);
    }

    #[test]
    fn a_damaged_block_file_is_refused_rather_than_guessed() {
        let dir = tempfile::tempdir().unwrap();
        for text in ["", "1\n5\n", "0\n-3\n", "0\nx\n", "0\n5\n6\n"] {
            std::fs::write(dir.path().join(PRODUCER_ID_BLOCK_FILE), text).unwrap();
            let err = ProducerIds::open(dir.path()).unwrap_err().to_string();
            assert!(
                err.contains("not a producer id block file"),
                "{text:?}: {err}"
            );
        }
    }
}
