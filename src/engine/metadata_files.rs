//! Kafka's small text files beside the segments of a partition directory:
//! `partition.metadata` (the topic id, Kafka's `PartitionMetadataFile`) and
//! `leader-epoch-checkpoint` (Kafka's `LeaderEpochFileCache` checkpoint), and the
//! [`Uuid`] they and `meta.properties` name. Each is written as Kafka writes it: to
//! `NAME.tmp`, fsynced, renamed over `NAME` ([`write_atomically`]).
//!
//! kpfs is one broker that leads every partition at leader epoch 0 (the epoch its batches
//! carry), so a partition's epoch cache is the single entry `0 <start offset>`. It
//! follows Kafka's rules for that entry: `assign(0, log end)` when the partition becomes
//! leader (topic creation, and every open, which puts it back if truncation removed it),
//! `truncateFromStart` when the log start moves (the entry moves up to it),
//! `truncateFromEnd` at open (an entry at or past the log end goes, and is assigned again
//! at the log end). A Kafka cluster bumps the epoch on leader changes, a restart among
//! them; a single kpfs has none to record.

use parking_lot::Mutex;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

use super::error::{EngineError, Result};
use super::files::{io_at, write_atomically, write_or_defer};
use super::format::{LEADER_EPOCH, LEADER_EPOCH_CHECKPOINT_FILE, PARTITION_METADATA_FILE};
use super::log_loader::remove_stale_temporary;

/// Kafka's `Uuid`: 128 bits, written as URL-safe base64 without padding (22 characters).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Uuid([u8; 16]);

impl Uuid {
    /// Kafka's `Uuid.randomUuid`: a version 4 UUID (`java.util.UUID.randomUUID`), drawn
    /// again while it is reserved (all zero, or 1) or its text starts with `-` (which
    /// command-line tools would take for an option). The bits come from `/dev/urandom`,
    /// what the `getrandom` crate reads on Linux: no crate is needed for 16 bytes.
    pub(crate) fn random() -> Result<Uuid> {
        loop {
            let mut b = [0u8; 16];
            read_urandom(&mut b)?;
            b[6] = (b[6] & 0x0f) | 0x40;
            b[8] = (b[8] & 0x3f) | 0x80;
            let id = Uuid(b);
            let reserved = u128::from_be_bytes(b) <= 1;
            if !reserved && !id.to_string().starts_with('-') {
                return Ok(id);
            }
        }
    }

    /// The 128 bits, most significant byte first (Kafka's two longs, as the wire sends them).
    pub fn to_bytes(self) -> [u8; 16] {
        self.0
    }

    /// Kafka's `Uuid.fromString`.
    pub fn parse(text: &str) -> Option<Uuid> {
        let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
        Some(Uuid(bytes.try_into().ok()?))
    }
}

impl std::fmt::Display for Uuid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&URL_SAFE_NO_PAD.encode(self.0))
    }
}

fn read_urandom(buf: &mut [u8]) -> Result<()> {
    use std::io::Read;
    let path = Path::new("/dev/urandom");
    fs::File::open(path)
        .and_then(|mut f| f.read_exact(buf))
        .map_err(io_at(path, "read"))
}

/// `partition.metadata`'s text (Kafka's `PartitionMetadata.encode`: no final newline).
fn partition_metadata_text(topic_id: Uuid) -> String {
    format!("version: 0\ntopic_id: {topic_id}")
}

/// The topic id in a `partition.metadata` text (Kafka's `PartitionMetadataReadBuffer`).
fn parse_partition_metadata(text: &str) -> Option<Uuid> {
    let mut lines = text.lines();
    let version = lines.next()?.strip_prefix("version: ")?;
    if version.trim() != "0" {
        return None;
    }
    Uuid::parse(lines.next()?.strip_prefix("topic_id: ")?.trim())
}

/// The partition's topic id, made at the topic's creation and kept for its life: read
/// from `partition.metadata`, or drawn and written when the file is missing (a new
/// topic, or a data directory from before the file). A file that does not parse is
/// refused: a new id would silently make it another topic.
pub(crate) fn load_topic_id(partition_dir: &Path) -> Result<Uuid> {
    let path = partition_dir.join(PARTITION_METADATA_FILE);
    remove_stale_temporary(&path);
    match fs::read_to_string(&path) {
        Ok(text) => parse_partition_metadata(&text).ok_or_else(|| EngineError::Corrupt {
            path: path.clone(),
            position: 0,
            reason: "not a partition metadata file (`version: 0`, `topic_id: <id>`)".into(),
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let id = Uuid::random()?;
            write_atomically(&path, partition_metadata_text(id).as_bytes())?;
            Ok(id)
        }
        Err(e) => Err(io_at(&path, "read")(e)),
    }
}

/// The partition's leader-epoch checkpoint: the one entry `0 start_offset`. (`Default`:
/// the placeholder a log holds until [`load`](Self::load) replaces it while it opens.)
#[derive(Debug, Default)]
pub(crate) struct LeaderEpochCheckpoint {
    path: PathBuf,
    start_offset: u64,
    /// Why the file does not hold `start_offset` yet (a full disk when retention moved
    /// the log start: the deletion that frees space must not fail on it).
    unsaved: Mutex<Option<String>>,
}

impl LeaderEpochCheckpoint {
    /// Reads the checkpoint when the log opens and brings it to what Kafka's load and
    /// `makeLeader` leave: the entry is cut back to the log start (`truncateFromStart`),
    /// dropped at or past the log end (`truncateFromEnd`) and assigned again at the log
    /// end when missing (`assign`). Written only when that changed it; a file that does
    /// not parse counts as missing (it holds nothing the log cannot tell).
    pub(crate) fn load(partition_dir: &Path, log_start: u64, log_end: u64) -> Result<Self> {
        let path = partition_dir.join(LEADER_EPOCH_CHECKPOINT_FILE);
        remove_stale_temporary(&path);
        let stored = match fs::read_to_string(&path) {
            Ok(text) => parse_checkpoint(&text),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(io_at(&path, "read")(e)),
        };
        let start_offset = match stored {
            Some(start) if start < log_end => start.max(log_start),
            _ => log_end,
        };
        let checkpoint = LeaderEpochCheckpoint {
            path,
            start_offset,
            unsaved: Mutex::new(None),
        };
        if stored != Some(start_offset) {
            checkpoint.write()?;
        }
        Ok(checkpoint)
    }

    /// Kafka's `truncateFromStart`: the entry starts no earlier than the log start.
    pub(crate) fn log_start_moved(&mut self, log_start: u64) -> Result<()> {
        if log_start <= self.start_offset {
            return Ok(());
        }
        self.start_offset = log_start;
        self.write()
    }

    fn write(&self) -> Result<()> {
        let text = format!("0\n1\n{LEADER_EPOCH} {}\n", self.start_offset);
        write_or_defer(&self.path, text.as_bytes(), &self.unsaved)
    }

    /// Writes what a full disk kept from the file, if anything.
    pub(crate) fn save_unsaved(&self) -> Result<()> {
        if self.unsaved.lock().is_some() {
            self.write()?;
        }
        Ok(())
    }

    #[cfg(test)]
    fn start_offset(&self) -> u64 {
        self.start_offset
    }
}

/// The start offset of epoch 0 in a checkpoint text (Kafka's `CheckpointReadBuffer`:
/// version 0, the entry count, `epoch offset` lines), if it is one.
fn parse_checkpoint(text: &str) -> Option<u64> {
    let mut lines = text.lines();
    if lines.next()?.trim() != "0" {
        return None;
    }
    let count: usize = lines.next()?.trim().parse().ok()?;
    let entries: Vec<(i32, u64)> = lines
        .map(|l| {
            let mut fields = l.split_whitespace();
            let entry = (fields.next()?.parse().ok()?, fields.next()?.parse().ok()?);
            fields.next().is_none().then_some(entry)
        })
        .collect::<Option<_>>()?;
    if entries.len() != count {
        return None;
    }
    entries
        .iter()
        .find(|(epoch, _)| *epoch == LEADER_EPOCH)
        .map(|&(_, start)| start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_read_and_write_as_kafkas_uuid_to_string() {
        // Kafka's UuidTest: new Uuid(0L, 1L) is "AAAAAAAAAAAAAAAAAAAAAQ".
        let one = Uuid(1u128.to_be_bytes());
        assert_eq!(one.to_string(), "AAAAAAAAAAAAAAAAAAAAAQ");
        assert_eq!(Uuid::parse("AAAAAAAAAAAAAAAAAAAAAQ"), Some(one));
        assert_eq!(Uuid::parse("AAAA"), None);
        let id = Uuid::random().unwrap();
        let text = id.to_string();
        assert_eq!(text.len(), 22);
        assert!(!text.starts_with('-'));
        assert_eq!(id.0[6] >> 4, 4, "version 4");
        assert_eq!(id.0[8] >> 6, 0b10, "IETF variant");
        assert_eq!(Uuid::parse(&text), Some(id));
        assert_ne!(Uuid::random().unwrap(), id);
    }

    #[test]
    fn partition_metadata_is_written_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let id = load_topic_id(dir.path()).unwrap();
        let path = dir.path().join(PARTITION_METADATA_FILE);
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            format!("version: 0\ntopic_id: {id}")
        );
        // Row 11: a crash while writing it leaves `partition.metadata.tmp`.
        let tmp = dir.path().join("partition.metadata.tmp");
        fs::write(&tmp, "version: 0\ntopic_").unwrap();
        assert_eq!(load_topic_id(dir.path()).unwrap(), id);
        assert!(!tmp.exists());
        fs::write(&path, "version: 0\ntopic_id: x").unwrap();
        assert!(load_topic_id(dir.path()).is_err());
    }

    #[test]
    fn the_epoch_entry_follows_the_log_start_and_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE);
        let mut c = LeaderEpochCheckpoint::load(dir.path(), 0, 0).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "0\n1\n0 0\n");
        c.log_start_moved(0).unwrap();
        c.log_start_moved(15).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "0\n1\n0 15\n");
        // Reopened with records past it: kept.
        assert_eq!(
            LeaderEpochCheckpoint::load(dir.path(), 15, 20)
                .unwrap()
                .start_offset(),
            15
        );
        // Reopened emptied at 15 (the entry is at the log end): dropped and assigned again
        // at the log end, which is the same.
        assert_eq!(
            LeaderEpochCheckpoint::load(dir.path(), 15, 15)
                .unwrap()
                .start_offset(),
            15
        );
        // Cut back by recovery below the entry: assigned at the new end.
        assert_eq!(
            LeaderEpochCheckpoint::load(dir.path(), 0, 10)
                .unwrap()
                .start_offset(),
            10
        );
        assert_eq!(fs::read_to_string(&path).unwrap(), "0\n1\n0 10\n");
        // Unreadable: assigned at the log end.
        fs::write(&path, "0\n2\n0 0\n").unwrap();
        assert_eq!(
            LeaderEpochCheckpoint::load(dir.path(), 0, 7)
                .unwrap()
                .start_offset(),
            7
        );
        // Kafka's own separators (any whitespace) read.
        assert_eq!(parse_checkpoint("0\n1\n0   3\n"), Some(3));
    }
}
