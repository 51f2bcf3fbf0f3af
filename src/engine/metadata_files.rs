//! Kafka's small text files: `meta.properties` in the data directory (Kafka's
//! `MetaProperties`: cluster id, node id, directory id) and, beside the segments of a
//! partition directory, `partition.metadata` (the topic id, Kafka's
//! `PartitionMetadataFile`) and `leader-epoch-checkpoint` (Kafka's `LeaderEpochFileCache`
//! checkpoint), and the [`Uuid`] they name. Each is written as Kafka writes it: to
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

use super::clock::java_date_string;
use super::config::parse_properties;
use super::error::{EngineError, Result};
use super::files::{io_at, write_atomically, write_or_defer};
use super::format::{
    LEADER_EPOCH, LEADER_EPOCH_CHECKPOINT_FILE, META_PROPERTIES_FILE, PARTITION_METADATA_FILE,
};
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
    load_topic_id_or(partition_dir, Uuid::random)
}

/// [`load_topic_id`], giving a new partition of an existing topic that topic's id:
/// every partition directory of a topic carries the same one, as in Kafka.
pub(crate) fn adopt_topic_id(partition_dir: &Path, id: Uuid) -> Result<Uuid> {
    load_topic_id_or(partition_dir, || Ok(id))
}

fn load_topic_id_or(partition_dir: &Path, new_id: impl FnOnce() -> Result<Uuid>) -> Result<Uuid> {
    let path = partition_dir.join(PARTITION_METADATA_FILE);
    remove_stale_temporary(&path);
    match fs::read_to_string(&path) {
        Ok(text) => parse_partition_metadata(&text).ok_or_else(|| EngineError::Corrupt {
            path: path.clone(),
            position: 0,
            reason: "not a partition metadata file (`version: 0`, `topic_id: <id>`)".into(),
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let id = new_id()?;
            write_atomically(&path, partition_metadata_text(id).as_bytes())?;
            Ok(id)
        }
        Err(e) => Err(io_at(&path, "read")(e)),
    }
}

/// `meta.properties` (Kafka's `MetaProperties`, version 1 as KRaft writes it): which
/// cluster and node the data directory belongs to, and its own id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MetaProperties {
    /// Any text in Kafka (`kafka-storage.sh format --cluster-id`); kpfs draws a [`Uuid`].
    pub(crate) cluster_id: String,
    pub(crate) node_id: i32,
    pub(crate) directory_id: Uuid,
}

impl MetaProperties {
    /// The file as `PropertiesUtils.writePropertiesFile` writes it:
    /// `Properties.store(writer, "")` puts an empty comment and the date first, then the
    /// entries sorted by key (Java 18 and later sort them).
    fn text(&self, now_ms: i64) -> String {
        format!(
            "#\n#{}\ncluster.id={}\ndirectory.id={}\nnode.id={}\nversion=1\n",
            java_date_string(now_ms),
            self.cluster_id,
            self.directory_id,
            self.node_id
        )
    }
}

/// The data directory's `meta.properties`, read, or written when missing: a new
/// directory gets a new cluster id, kept from then on. The configured `node_id` must be
/// the stored one (Kafka's `MetaPropertiesEnsemble.verify`); a file without a
/// `directory.id` gets one, as Kafka's startup adds it.
pub(crate) fn load_meta_properties(
    data_dir: &Path,
    node_id: i32,
    now_ms: i64,
) -> Result<MetaProperties> {
    let path = data_dir.join(META_PROPERTIES_FILE);
    remove_stale_temporary(&path);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let meta = MetaProperties {
                cluster_id: Uuid::random()?.to_string(),
                node_id,
                directory_id: Uuid::random()?,
            };
            write_atomically(&path, meta.text(now_ms).as_bytes())?;
            return Ok(meta);
        }
        Err(e) => return Err(io_at(&path, "read")(e)),
    };
    let (meta, has_directory_id) = parse_meta_properties(&path, &text)?;
    if meta.node_id != node_id {
        return Err(EngineError::NodeIdMismatch {
            stored: meta.node_id,
            configured: node_id,
            path,
        });
    }
    if !has_directory_id {
        write_atomically(&path, meta.text(now_ms).as_bytes())?;
    }
    Ok(meta)
}

/// A `meta.properties` text, with Kafka's refusals (`MetaProperties.Builder`,
/// `PropertiesUtils.loadRequiredIntProp`); whether it named a directory id (a missing
/// one is drawn).
pub(crate) fn parse_meta_properties(path: &Path, text: &str) -> Result<(MetaProperties, bool)> {
    let corrupt = |reason: String| EngineError::Corrupt {
        path: path.to_path_buf(),
        position: 0,
        reason,
    };
    let pairs = parse_properties(text).map_err(|e| corrupt(e.to_string()))?;
    let get = |key: &str| pairs.iter().rev().find(|(k, _)| *k == key).map(|(_, v)| *v);
    match get("version").unwrap_or("0") {
        "1" => {}
        other => {
            return Err(corrupt(format!(
                "meta.properties version {other}: kpfs reads version 1 (KRaft) only"
            )))
        }
    }
    let cluster_id = get("cluster.id").ok_or_else(|| {
        corrupt(format!(
            "cluster.id was not specified in the v1 file: {}",
            path.display()
        ))
    })?;
    let node_id = get("node.id")
        .ok_or_else(|| corrupt("Failed to find node.id".into()))?
        .parse()
        .map_err(|_| corrupt("Unable to read node.id as a base-10 number.".into()))?;
    let directory_id = match get("directory.id") {
        Some(text) => Some(Uuid::parse(text).ok_or_else(|| {
            corrupt(format!(
                "Unable to read directory.id as a Uuid: {text} is not a Kafka Uuid"
            ))
        })?),
        None => None,
    };
    let meta = MetaProperties {
        cluster_id: cluster_id.to_string(),
        node_id,
        directory_id: match directory_id {
            Some(id) => id,
            None => Uuid::random()?,
        },
    };
    Ok((meta, directory_id.is_some()))
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
    fn meta_properties_are_written_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(META_PROPERTIES_FILE);
        // 2024-02-29T23:59:59Z.
        let now_ms = 1_709_251_199_000;
        let meta = load_meta_properties(dir.path(), 1, now_ms).unwrap();
        assert_eq!(meta.node_id, 1);
        assert_eq!(
            Uuid::parse(&meta.cluster_id).map(|id| id.to_string()),
            Some(meta.cluster_id.clone())
        );
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            format!(
                "#\n#Thu Feb 29 23:59:59 UTC 2024\ncluster.id={}\ndirectory.id={}\nnode.id=1\nversion=1\n",
                meta.cluster_id, meta.directory_id
            )
        );
        // Kept: the same ids at every open, the file untouched.
        let written = fs::read(&path).unwrap();
        assert_eq!(
            load_meta_properties(dir.path(), 1, now_ms + 1000).unwrap(),
            meta
        );
        assert_eq!(fs::read(&path).unwrap(), written);
        // Row 11: a crash while writing it leaves `meta.properties.tmp`.
        let tmp = dir.path().join("meta.properties.tmp");
        fs::write(&tmp, b"torn").unwrap();
        assert_eq!(load_meta_properties(dir.path(), 1, now_ms).unwrap(), meta);
        assert!(!tmp.exists());
        // Another directory is another cluster.
        let other = tempfile::tempdir().unwrap();
        assert_ne!(
            load_meta_properties(other.path(), 1, now_ms)
                .unwrap()
                .cluster_id,
            meta.cluster_id
        );
    }

    #[test]
    fn a_node_id_other_than_the_stored_one_is_refused_as_kafka_refuses_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(META_PROPERTIES_FILE);
        load_meta_properties(dir.path(), 1, 0).unwrap();
        let written = fs::read(&path).unwrap();
        let e = load_meta_properties(dir.path(), 2, 0).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "Stored node id 1 doesn't match previous node id 2 in {}. If you moved your \
                 data, make sure your configured node id matches. If you intend to create a \
                 new node, you should remove all data in your data directories.",
                path.display()
            )
        );
        assert_eq!(fs::read(&path).unwrap(), written, "nothing changed");
    }

    #[test]
    fn meta_properties_from_kafka_are_read_and_bad_ones_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(META_PROPERTIES_FILE);
        // As Kafka 3.x/4.x wrote it (hash order, no directory.id before 3.7): the
        // missing directory id is drawn and written, the rest kept.
        fs::write(
            &path,
            "#\n#Tue Jan 09 10:00:00 UTC 2024\nnode.id=3\nversion=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qg\n",
        )
        .unwrap();
        let meta = load_meta_properties(dir.path(), 3, 0).unwrap();
        assert_eq!(meta.cluster_id, "MkU3OEVBNTcwNTJENDM2Qg");
        let text = fs::read_to_string(&path).unwrap();
        assert!(
            text.contains(&format!("directory.id={}\n", meta.directory_id)),
            "{text}"
        );
        assert_eq!(load_meta_properties(dir.path(), 3, 0).unwrap(), meta);
        for (text, reason) in [
            (
                "version=0\nbroker.id=1\n",
                "meta.properties version 0: kpfs reads version 1 (KRaft) only",
            ),
            (
                "version=1\nnode.id=1\n",
                &format!(
                    "cluster.id was not specified in the v1 file: {}",
                    path.display()
                ),
            ),
            ("version=1\ncluster.id=x\n", "Failed to find node.id"),
            (
                "version=1\ncluster.id=x\nnode.id=one\n",
                "Unable to read node.id as a base-10 number.",
            ),
            (
                "version=1\ncluster.id=x\nnode.id=1\ndirectory.id=nope\n",
                "Unable to read directory.id as a Uuid: nope is not a Kafka Uuid",
            ),
        ] {
            fs::write(&path, text).unwrap();
            assert_eq!(
                load_meta_properties(dir.path(), 1, 0)
                    .unwrap_err()
                    .to_string(),
                format!("{} at byte 0: {reason}", path.display()),
                "{text}"
            );
            assert_eq!(fs::read_to_string(&path).unwrap(), text, "left as it was");
        }
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
