//! The FUSE adapter's logic: maps mount paths and open handles onto a [`Store`] (the local
//! engine, or a test's store), which it reaches through that interface only. Every
//! method takes plain arguments and returns plain structs, so the whole adapter can be
//! driven without a kernel; `fuser_glue` is the only module that knows about fuser.
//!
//! Refusals are part of the interface: every refused operation (except "no such entry"
//! on a lookup) is reported to the engine with a reason, which the user reads in
//! `.kpfs/errors`, since an errno alone cannot say *why*.

pub(crate) mod errno;
pub(crate) mod fuser_glue;
pub(crate) mod handle;
pub(crate) mod inode;

use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::engine::excerpt::Excerpt;
use crate::engine::groups::GroupError;
use crate::engine::{
    parse_partition_number, Clock, ConfigChange, ConfigScope, EngineError, SystemClock,
};
use crate::store::{CaptureStore, PartitionStore, Store, TopicStore};
use errno::{errno_of, group_errno};
use handle::{
    ConfigTarget, ConfigWriter, Draft, Handle, HandleKind, HandleTable, LogReader, LogState,
};
use inode::{
    group_file_name, group_of_file_name, is_sed_temporary, GroupFile, InodeTable, Node, Scope,
    CONTROL_DIR, GROUPS_DIR, LOG_START_FILE, PARTITIONS_DIR, SNAPSHOT_DIR, TRANSACTIONS_DIR,
};

/// Attributes of files are never cached: `tail -f` polls fstat once a second and must
/// see every append, and config/status renderings change behind the kernel's back.
const FILE_ATTR_TTL: Duration = Duration::ZERO;
/// Directories only change through this daemon (mkdir/rmdir) or by segments rolling,
/// and a zero TTL makes the kernel re-look-up every entry a readdir returned.
const DIR_ATTR_TTL: Duration = Duration::from_secs(1);
/// `log`, `config`, `status`, `segments` exist as long as their topic does.
const FIXED_ENTRY_TTL: Duration = Duration::from_secs(1);
/// Segment files come and go with rolls and retention; never cache their names.
const SEGMENT_ENTRY_TTL: Duration = Duration::ZERO;
/// Groups come and go with Kafka clients (and their offsets' expiry); never cache them.
const GROUP_ENTRY_TTL: Duration = Duration::ZERO;
/// Transactional ids come with producers and go with their expiry; never cache them.
const TRANSACTION_ENTRY_TTL: Duration = Duration::ZERO;
/// Drafts (`sed -i`'s temporaries) are renamed or removed within a command; never cache
/// them, so the name `config` a rename gave one resolves to `config` again at once.
const DRAFT_TTL: Duration = Duration::ZERO;
/// Drafts at once, over the mount: `sed -i` makes one at a time, and each holds memory.
const MAX_DRAFTS: usize = 64;
/// A draft's bytes: a rendered config file is a few KiB; far more is not a config file.
const MAX_DRAFT_BYTES: usize = 8 << 20;
/// The mode of the config files, which a draft shares: sed gives its temporary the mode
/// of the file it edits, and a mode kpfs cannot keep is refused.
const CONFIG_PERM: u16 = 0o644;
/// `st_blksize`: large enough that stdio and cp pick big buffers, matching the 1 MiB
/// ceiling the kernel puts on one FUSE request.
const BLOCK_SIZE: u32 = 1 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FileKind {
    Directory,
    RegularFile,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Attr {
    pub(crate) ino: u64,
    pub(crate) kind: FileKind,
    pub(crate) size: u64,
    /// `st_blocks`: 512-byte units allocated, what `du` adds up.
    pub(crate) blocks: u64,
    pub(crate) perm: u16,
    pub(crate) nlink: u32,
    pub(crate) mtime_ms: i64,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) blksize: u32,
    /// How long the kernel may cache these attributes.
    pub(crate) ttl: Duration,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) attr: Attr,
    /// How long the kernel may cache the name -> inode binding.
    pub(crate) entry_ttl: Duration,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Opened {
    pub(crate) fh: u64,
    /// Bypass the page cache: reads must return what the engine renders now.
    pub(crate) direct_io: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DirEntry {
    pub(crate) ino: u64,
    pub(crate) kind: FileKind,
    pub(crate) name: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StatFs {
    pub(crate) blocks: u64,
    pub(crate) bfree: u64,
    pub(crate) bavail: u64,
    pub(crate) files: u64,
    pub(crate) ffree: u64,
    pub(crate) bsize: u32,
    pub(crate) namelen: u32,
    pub(crate) frsize: u32,
}

/// A SETATTR, reduced to what kpfs decides on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SetAttr {
    pub(crate) size: Option<u64>,
    pub(crate) mode: Option<u32>,
    pub(crate) uid: Option<u32>,
    pub(crate) gid: Option<u32>,
    /// atime or mtime set explicitly (touch, utimensat).
    pub(crate) times: bool,
    /// The open file the change was made through (ftruncate, and the truncation of
    /// an `O_TRUNC` open), if any.
    pub(crate) fh: Option<u64>,
}

/// A refused or failed operation: the errno for the kernel and a text for the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FsError {
    pub(crate) errno: i32,
    pub(crate) message: String,
}

pub(crate) type FsResult<T> = Result<T, FsError>;

/// The namespace operations kpfs refuses outright.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NamespaceOp {
    Create,
    /// An `O_EXCL` create: a probe that expects to fail (editors' swap, backup and
    /// test files, lock and temporary files), refused without a record in
    /// `.kpfs/errors`, so saving in vim leaves no noise there.
    CreateExclusive,
    Mknod,
    Unlink,
    Rename,
    Link,
    Symlink,
}

pub(crate) struct KpfsFs<S: Store> {
    store: Arc<S>,
    data_dir: PathBuf,
    inodes: InodeTable,
    handles: HandleTable<S>,
    drafts: Mutex<HashMap<Node, Arc<Draft<S>>>>,
    uid: u32,
    gid: u32,
    /// mtime of directories and of files without a modification time of their own.
    mounted_ms: i64,
}

impl<S: Store> KpfsFs<S> {
    pub(crate) fn new(store: Arc<S>, data_dir: &Path) -> KpfsFs<S> {
        // SAFETY: geteuid and getegid cannot fail and touch no memory.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        KpfsFs {
            store,
            data_dir: data_dir.to_path_buf(),
            inodes: InodeTable::new(),
            handles: HandleTable::new(),
            drafts: Mutex::new(HashMap::new()),
            uid,
            gid,
            mounted_ms: SystemClock.now_ms(),
        }
    }

    #[cfg(test)]
    pub(crate) fn store(&self) -> &Arc<S> {
        &self.store
    }

    /// The kernel (`kernel`, its FUSE version) cannot map files opened for direct I/O:
    /// every mmap(2) of a kpfs file fails with ENODEV before kpfs hears of it, so the
    /// reason is recorded once, at mount.
    pub(crate) fn note_no_mmap(&self, kernel: &str) {
        self.store.record_rejection(
            &Node::Root.path(),
            &format!(
                "warning: this kernel ({kernel}) lacks FUSE_DIRECT_IO_ALLOW_MMAP (Linux 6.6+): \
                 mmap(2) of any file of the mount fails with ENODEV; read the files instead"
            ),
        );
    }

    /// The write-back of a page of a shared writable mapping (mmap): refused, since every
    /// write to a kpfs file appends or edits by lines.
    pub(crate) fn refuse_mapped_write(&self, fh: u64) -> FsError {
        let path = self
            .handles
            .get(fh)
            .map_or_else(|| format!("file handle {fh}"), |h| h.node.path());
        self.refuse(
            &path,
            libc::EPERM,
            "writes through a shared mapping (mmap) are not supported: append with >>",
        )
    }

    /// Records the reason for `.kpfs/errors` and builds the error for the kernel.
    fn refuse(&self, path: &str, errno: i32, reason: impl Into<String>) -> FsError {
        let reason = reason.into();
        self.store.record_rejection(path, &reason);
        FsError {
            errno,
            message: format!("{path}: {reason}"),
        }
    }

    fn engine_error(&self, path: &str, error: &EngineError) -> FsError {
        self.refuse(path, errno_of(error), error.to_string())
    }

    fn group_error(&self, path: &str, error: &GroupError) -> FsError {
        self.refuse(path, group_errno(error), error.to_string())
    }

    /// Whether consumer group `id` exists (Kafka's ListGroups lists it).
    fn group_exists(&self, id: &str) -> bool {
        self.store.group_ids().iter().any(|g| g == id)
    }

    /// The text of a file of `.kpfs/groups/GROUP/`, rendered now.
    fn group_text(&self, node: &Node) -> FsResult<String> {
        let text = match node {
            Node::GroupFile { group, file } => match file {
                GroupFile::State => self.store.group_state_text(group),
                GroupFile::Members => self.store.group_members_text(group),
                GroupFile::Offsets => self.store.group_offsets_text(group),
            },
            _ => None,
        };
        text.ok_or_else(|| Self::not_found(&node.path()))
    }

    /// `.kpfs/transactions/ID`'s text, rendered now (its duration on the engine clock).
    fn transaction_text(&self, node: &Node) -> FsResult<String> {
        node.transactional_id()
            .and_then(|id| self.store.transaction_text(id))
            .ok_or_else(|| Self::not_found(&node.path()))
    }

    /// "No such entry" without a record: shells and tools probe for names all the time.
    fn not_found(path: &str) -> FsError {
        FsError {
            errno: libc::ENOENT,
            message: format!("{path}: no such file or directory"),
        }
    }

    fn node(&self, ino: u64) -> FsResult<Node> {
        self.inodes
            .node(ino)
            .ok_or_else(|| Self::not_found(&format!("inode {ino}")))
    }

    fn topic(&self, node: &Node) -> FsResult<Arc<S::Topic>> {
        let name = node.topic().unwrap_or_default();
        self.store
            .topic(name)
            .ok_or_else(|| Self::not_found(&node.path()))
    }

    /// The partition a node's per-partition content is of: N in `TOPIC/partitions/N`,
    /// partition 0 in the topic's own folder.
    fn partition_at(&self, node: &Node) -> FsResult<Arc<S::Partition>> {
        self.topic(node)?
            .partition(node.nested_partition().unwrap_or(0))
            .ok_or_else(|| Self::not_found(&node.path()))
    }

    /// A `status` file's text and its mtime: the topic's, or a partition's.
    fn status(&self, node: &Node) -> FsResult<(String, i64)> {
        if let Node::Status(Scope::Topic(_)) = node {
            let topic = self.topic(node)?;
            return Ok((self.store.topic_status_text(&topic), topic.modified_ms()));
        }
        let partition = self.partition_at(node)?;
        Ok((
            self.store.partition_status_text(&partition),
            partition.modified_ms(),
        ))
    }

    /// The draft `node` names, if it still exists: one of a deleted (or deleted and
    /// recreated) topic is gone with it.
    fn draft(&self, node: &Node) -> Option<Arc<Draft<S>>> {
        let mut drafts = self.drafts.lock();
        let draft = drafts.get(node)?;
        let alive = draft.topic().is_none_or(|topic| {
            self.store
                .topic(topic.name())
                .is_some_and(|current| Arc::ptr_eq(&current, topic))
        });
        if alive {
            return Some(Arc::clone(draft));
        }
        drafts.remove(node);
        drop(drafts);
        self.inodes.forget(node);
        None
    }

    /// The drafts in the folder `dir` (a topic's or `.kpfs`).
    fn drafts_in(&self, dir: &Node) -> Vec<Node> {
        let nodes: Vec<Node> = self.drafts.lock().keys().cloned().collect();
        nodes
            .into_iter()
            .filter(|node| node.parent() == *dir && self.draft(node).is_some())
            .collect()
    }

    /// The draft `name` in `dir`, as a node.
    fn draft_node(dir: &Node, name: &str) -> Option<Node> {
        let topic = match dir {
            Node::TopicDir(t) => Some(t.clone()),
            Node::ControlDir => None,
            _ => return None,
        };
        Some(Node::Draft {
            topic,
            name: name.to_string(),
        })
    }

    fn dir_attr(&self, ino: u64) -> Attr {
        Attr {
            ino,
            kind: FileKind::Directory,
            size: 0,
            blocks: 0,
            perm: 0o755,
            nlink: 2,
            mtime_ms: self.mounted_ms,
            uid: self.uid,
            gid: self.gid,
            blksize: BLOCK_SIZE,
            ttl: DIR_ATTR_TTL,
        }
    }

    fn file_attr(&self, ino: u64, size: u64, perm: u16, mtime_ms: i64) -> Attr {
        Attr {
            ino,
            kind: FileKind::RegularFile,
            size,
            // Generated files claim the blocks their bytes would fill: fewer would make
            // `cp` and `tar` take them for sparse files, and `log`'s size can be past its
            // last readable byte (retention gaps), so a sparse copy would end in zeros.
            blocks: size.div_ceil(512),
            perm,
            nlink: 1,
            mtime_ms,
            uid: self.uid,
            gid: self.gid,
            blksize: BLOCK_SIZE,
            ttl: FILE_ATTR_TTL,
        }
    }

    fn attr_of(&self, ino: u64, node: &Node) -> FsResult<Attr> {
        let attr = match node {
            Node::Root | Node::ControlDir | Node::GroupsDir => self.dir_attr(ino),
            Node::GroupDir(group) => {
                if !self.group_exists(group) {
                    return Err(Self::not_found(&node.path()));
                }
                self.dir_attr(ino)
            }
            Node::GroupFile { .. } => {
                let len = self.group_text(node)?.len() as u64;
                self.file_attr(ino, len, 0o444, self.mounted_ms)
            }
            Node::TransactionsDir => self.dir_attr(ino),
            Node::Transaction(_) => {
                let len = self.transaction_text(node)?.len() as u64;
                self.file_attr(ino, len, 0o444, self.mounted_ms)
            }
            Node::TopicDir(_) | Node::PartitionsDir(_) => {
                self.topic(node)?;
                self.dir_attr(ino)
            }
            Node::PartitionDir(..) | Node::SegmentsDir(_) => {
                self.partition_at(node)?;
                self.dir_attr(ino)
            }
            Node::BrokerConfig => {
                let len = self.store.broker_config_text().len() as u64;
                self.file_attr(ino, len, CONFIG_PERM, self.mounted_ms)
            }
            Node::Errors => {
                let len = self.store.rejections_text().len() as u64;
                self.file_attr(ino, len, 0o444, self.mounted_ms)
            }
            Node::Metrics => {
                let len = self.store.metrics_text().len() as u64;
                self.file_attr(ino, len, 0o444, self.mounted_ms)
            }
            Node::Log(Scope::Topic(_)) => {
                let topic = self.topic(node)?;
                self.file_attr(ino, topic.stream_len(), 0o644, topic.modified_ms())
            }
            Node::Log(Scope::Partition(..)) => {
                let partition = self.partition_at(node)?;
                self.file_attr(ino, partition.stream_len(), 0o644, partition.modified_ms())
            }
            Node::TopicConfig(_) => {
                let len = self.topic(node)?.config_text().len() as u64;
                self.file_attr(ino, len, CONFIG_PERM, self.mounted_ms)
            }
            Node::Status(_) => {
                let (text, modified_ms) = self.status(node)?;
                self.file_attr(ino, text.len() as u64, 0o444, modified_ms)
            }
            Node::Events(_) => {
                let topic = self.topic(node)?;
                let len = topic.events_text().len() as u64;
                self.file_attr(ino, len, 0o444, topic.modified_ms())
            }
            Node::LogStart(_) => {
                let len = log_start_text(&*self.partition_at(node)?).len() as u64;
                self.file_attr(ino, len, 0o644, self.mounted_ms)
            }
            Node::Draft { .. } => {
                let draft = self
                    .draft(node)
                    .ok_or_else(|| Self::not_found(&node.path()))?;
                let len = draft.bytes.lock().len() as u64;
                Attr {
                    ttl: DRAFT_TTL,
                    ..self.file_attr(ino, len, CONFIG_PERM, self.mounted_ms)
                }
            }
            Node::SnapshotDir => self.dir_attr(ino),
            Node::SnapshotTopicDir(_) => {
                self.topic(node)?;
                self.dir_attr(ino)
            }
            // Whoever asks, and whether through a handle or not (the kernel's fstat names
            // none), sees the topic's current capture.
            Node::SnapshotLog(_) => {
                let capture = self
                    .topic(node)?
                    .current_capture(false)
                    .map_err(|e| self.engine_error(&node.path(), &e))?;
                self.file_attr(ino, capture.size(), 0o444, capture.modified_ms())
            }
            Node::SnapshotConfig(_) => {
                let len = self.topic(node)?.config_text().len() as u64;
                self.file_attr(ino, len, 0o444, self.mounted_ms)
            }
            Node::Segment { scope, name } => {
                let files = self
                    .partition_at(node)?
                    .segment_files()
                    .map_err(|e| self.engine_error(&node.path(), &e))?;
                let file = files
                    .into_iter()
                    .find(|f| &f.name == name)
                    .ok_or_else(|| Self::not_found(&node.path()))?;
                // The real allocation: active indexes are preallocated sparse files of
                // segment.index.bytes, and `du` must not count what was never written.
                Attr {
                    blocks: file.blocks,
                    // Partition 0's files have two names (Scope::of_segment_files).
                    nlink: if scope.nested_partition().is_none() {
                        2
                    } else {
                        1
                    },
                    ..self.file_attr(ino, file.size, 0o444, file.mtime_ms)
                }
            }
        };
        Ok(attr)
    }

    /// The node `name` names inside `parent`, if it exists.
    fn child(&self, parent: &Node, name: &str) -> FsResult<Node> {
        let missing = || Self::not_found(&parent.child_path(name));
        let child = match parent {
            Node::Root if name == CONTROL_DIR => Node::ControlDir,
            Node::Root => {
                self.store.topic(name).ok_or_else(missing)?;
                Node::TopicDir(name.to_string())
            }
            Node::ControlDir => match name {
                "config" => Node::BrokerConfig,
                "errors" => Node::Errors,
                "metrics" => Node::Metrics,
                GROUPS_DIR => Node::GroupsDir,
                TRANSACTIONS_DIR => Node::TransactionsDir,
                SNAPSHOT_DIR => Node::SnapshotDir,
                _ => self.draft_child(parent, name).ok_or_else(missing)?,
            },
            Node::SnapshotDir => {
                self.store.topic(name).ok_or_else(missing)?;
                Node::SnapshotTopicDir(name.to_string())
            }
            Node::SnapshotTopicDir(t) => {
                self.topic(parent)?;
                match name {
                    "log" => Node::SnapshotLog(t.clone()),
                    "config" => Node::SnapshotConfig(t.clone()),
                    _ => return Err(missing()),
                }
            }
            Node::GroupsDir => {
                let group = group_of_file_name(name)
                    .filter(|g| self.group_exists(g))
                    .ok_or_else(missing)?;
                Node::GroupDir(group)
            }
            Node::TransactionsDir => {
                let id = group_of_file_name(name)
                    .filter(|id| self.store.transaction_text(id).is_some())
                    .ok_or_else(missing)?;
                Node::Transaction(id)
            }
            Node::GroupDir(group) => {
                if !self.group_exists(group) {
                    return Err(missing());
                }
                let file = GroupFile::ALL
                    .into_iter()
                    .find(|f| f.name() == name)
                    .ok_or_else(missing)?;
                Node::GroupFile {
                    group: group.clone(),
                    file,
                }
            }
            Node::TopicDir(t) => {
                self.topic(parent)?;
                let scope = Scope::Topic(t.clone());
                match name {
                    "config" => Node::TopicConfig(t.clone()),
                    "events" => Node::Events(t.clone()),
                    PARTITIONS_DIR => Node::PartitionsDir(t.clone()),
                    _ => match partition_file::<S>(scope, name) {
                        Some(node) => node,
                        None => self.draft_child(parent, name).ok_or_else(missing)?,
                    },
                }
            }
            Node::PartitionsDir(t) => {
                let topic = self.topic(parent)?;
                let index = parse_partition_number(name)
                    .filter(|&n| n < topic.partition_count())
                    .ok_or_else(missing)?;
                Node::PartitionDir(t.clone(), index)
            }
            Node::PartitionDir(t, n) => {
                self.partition_at(parent)?;
                partition_file::<S>(Scope::Partition(t.clone(), *n), name).ok_or_else(missing)?
            }
            Node::SegmentsDir(scope) => {
                let files = self
                    .partition_at(parent)?
                    .segment_files()
                    .map_err(|e| self.engine_error(&parent.child_path(name), &e))?;
                if !files.iter().any(|f| f.name == name) {
                    return Err(missing());
                }
                Node::Segment {
                    scope: scope.of_segment_files(),
                    name: name.to_string(),
                }
            }
            Node::BrokerConfig
            | Node::Errors
            | Node::Metrics
            | Node::Log(_)
            | Node::TopicConfig(_)
            | Node::Status(_)
            | Node::Events(_)
            | Node::LogStart(_)
            | Node::Segment { .. }
            | Node::GroupFile { .. }
            | Node::Transaction(_)
            | Node::Draft { .. }
            | Node::SnapshotLog(_)
            | Node::SnapshotConfig(_) => {
                return Err(FsError {
                    errno: libc::ENOTDIR,
                    message: format!("{}: not a directory", parent.path()),
                })
            }
        };
        Ok(child)
    }

    /// The draft `name` in `dir`, if there is one.
    fn draft_child(&self, dir: &Node, name: &str) -> Option<Node> {
        let node = Self::draft_node(dir, name)?;
        self.draft(&node).map(|_| node)
    }

    fn entry(&self, node: &Node) -> FsResult<Entry> {
        let ino = self.inodes.ino(node);
        let attr = self.attr_of(ino, node)?;
        let entry_ttl = match node {
            Node::Segment { .. } => SEGMENT_ENTRY_TTL,
            Node::GroupDir(_) | Node::GroupFile { .. } => GROUP_ENTRY_TTL,
            Node::Transaction(_) => TRANSACTION_ENTRY_TTL,
            Node::Draft { .. } => DRAFT_TTL,
            _ => FIXED_ENTRY_TTL,
        };
        Ok(Entry { attr, entry_ttl })
    }

    pub(crate) fn lookup(&self, parent: u64, name: &OsStr) -> FsResult<Entry> {
        let parent = self.node(parent)?;
        let Some(name) = name.to_str() else {
            return Err(Self::not_found(&parent.child_path(&name.to_string_lossy())));
        };
        let child = self.child(&parent, name)?;
        self.entry(&child)
    }

    pub(crate) fn getattr(&self, ino: u64) -> FsResult<Attr> {
        let node = self.node(ino)?;
        self.attr_of(ino, &node)
    }

    pub(crate) fn setattr(&self, ino: u64, change: SetAttr) -> FsResult<Attr> {
        let node = self.node(ino)?;
        let path = node.path();
        // Setting what is already there is no change: editors restore the mode and owner
        // of the file they save.
        let current = self.attr_of(ino, &node)?;
        let same_mode = change
            .mode
            .is_none_or(|m| m & 0o7777 == u32::from(current.perm));
        let same_owner = change.uid.is_none_or(|u| u == current.uid)
            && change.gid.is_none_or(|g| g == current.gid);
        if !same_mode || !same_owner {
            return Err(self.refuse(
                &path,
                libc::EPERM,
                "permissions and owners are fixed by kpfs (chmod/chown are not supported)",
            ));
        }
        match change.size {
            // `>` sends the truncate together with mtime=now; the size decides.
            Some(size) => self.resize(&node, size, change.fh)?,
            None if change.times => {
                return Err(self.refuse(
                    &path,
                    libc::EPERM,
                    "timestamps are kept by kpfs (touch/utimensat are not supported)",
                ))
            }
            None => {}
        }
        self.attr_of(ino, &node)
    }

    /// A file's size set to `size` (a truncation, `fh` the descriptor it came through if
    /// any): what `>`, `truncate` and ftruncate mean for each kind of file.
    fn resize(&self, node: &Node, size: u64, fh: Option<u64>) -> FsResult<()> {
        let path = node.path();
        match node {
            Node::Log(_) => {
                return Err(self.refuse(
                    &path,
                    libc::EPERM,
                    "log is append-only: use >> to append; records leave only \
                 through retention (retention.ms, retention.bytes) or an offset \
                 written to log_start_offset (records before it are deleted)",
                ))
            }
            // `>` (O_TRUNC) and ftruncate: what the handle writes next is the whole
            // set of overrides.
            Node::TopicConfig(_) | Node::BrokerConfig if size == 0 => {
                self.truncate_config(node, fh)?
            }
            Node::Draft { .. } if size == 0 => {
                if let Some(draft) = self.draft(node) {
                    draft.bytes.lock().clear();
                    draft.writer.edit.lock().change.truncate();
                }
            }
            Node::TopicConfig(_) | Node::BrokerConfig | Node::Draft { .. } => {
                return Err(self.refuse(
                    &path,
                    libc::EPERM,
                    format!("cannot resize a config file to {size} bytes; write key=value lines"),
                ))
            }
            // `echo N > log_start_offset`: the offset written is what counts.
            Node::LogStart(_) if size == 0 => {}
            Node::LogStart(_) => {
                return Err(self.refuse(
                    &path,
                    libc::EPERM,
                    format!("cannot resize {LOG_START_FILE} to {size} bytes; write an offset"),
                ))
            }
            Node::Root
            | Node::ControlDir
            | Node::TopicDir(_)
            | Node::SegmentsDir(_)
            | Node::PartitionsDir(_)
            | Node::PartitionDir(..)
            | Node::Errors
            | Node::Metrics
            | Node::Status(_)
            | Node::Events(_)
            | Node::Segment { .. }
            | Node::GroupsDir
            | Node::GroupDir(_)
            | Node::GroupFile { .. }
            | Node::TransactionsDir
            | Node::Transaction(_)
            | Node::SnapshotDir
            | Node::SnapshotTopicDir(_)
            | Node::SnapshotLog(_)
            | Node::SnapshotConfig(_) => {
                return Err(self.refuse(&path, libc::EPERM, "read-only: cannot be truncated"))
            }
        }
        Ok(())
    }

    pub(crate) fn mkdir(&self, parent: u64, name: &OsStr) -> FsResult<Entry> {
        let parent = self.node(parent)?;
        let path = parent.child_path(&name.to_string_lossy());
        if parent.in_groups() {
            return Err(self.refuse(&path, libc::EPERM, GROUPS_READ_ONLY));
        }
        if parent.in_transactions() {
            return Err(self.refuse(&path, libc::EPERM, TRANSACTIONS_READ_ONLY));
        }
        if let Node::PartitionsDir(_) = parent {
            return self.add_partition(&parent, name, &path);
        }
        if parent != Node::Root {
            return Err(self.refuse(
                &path,
                libc::EPERM,
                "directories can only be created in the mount root (mkdir TOPIC creates a \
                 topic) and in TOPIC/partitions (mkdir TOPIC/partitions/N adds partition N)",
            ));
        }
        let Some(name) = name.to_str() else {
            return Err(self.refuse(&path, libc::EINVAL, "topic names must be UTF-8"));
        };
        if name == CONTROL_DIR {
            return Err(self.refuse(&path, libc::EPERM, "the name .kpfs is reserved by kpfs"));
        }
        self.store
            .create_topic(name)
            .map_err(|e| self.engine_error(&path, &e))?;
        // Created, but Kafka warns about such a name: say so where refusals go.
        if let Some(warning) = crate::engine::topic_name_warning(name) {
            self.store
                .record_rejection(&path, &format!("warning: {warning}"));
        }
        self.entry(&Node::TopicDir(name.to_string()))
    }

    /// `mkdir TOPIC/partitions/N`: Kafka's CreatePartitions, one partition at a time,
    /// so N is the current count.
    fn add_partition(&self, dir: &Node, name: &OsStr, path: &str) -> FsResult<Entry> {
        let topic = self.topic(dir)?;
        let count = topic.partition_count();
        let next = format!("{}/{PARTITIONS_DIR}/{count}", topic.name());
        let exists = || FsError {
            errno: libc::EEXIST,
            message: format!("{path}: exists"),
        };
        match name.to_str().and_then(parse_partition_number) {
            Some(n) if n < count => Err(exists()),
            Some(n) if n == count => match topic.add_partitions(count + 1) {
                Ok(()) => self.entry(&Node::PartitionDir(topic.name().to_string(), n)),
                // Another mkdir of the same partition came first.
                Err(EngineError::PartitionsUnchanged { .. }) => Err(exists()),
                Err(e) => Err(self.engine_error(path, &e)),
            },
            Some(_) => Err(self.refuse(
                path,
                libc::EINVAL,
                format!(
                    "partitions are added one at a time: {} has {count} partitions, and \
                     mkdir {next} adds the next",
                    topic.name()
                ),
            )),
            None => Err(self.refuse(
                path,
                libc::EINVAL,
                format!(
                    "a partition's folder is its number (0, 1, ...): mkdir {next} adds \
                     partition {count}"
                ),
            )),
        }
    }

    pub(crate) fn rmdir(&self, parent: u64, name: &OsStr) -> FsResult<()> {
        let parent = self.node(parent)?;
        let path = parent.child_path(&name.to_string_lossy());
        let Some(name) = name.to_str() else {
            return Err(Self::not_found(&path));
        };
        if parent == Node::GroupsDir {
            return self.delete_group(name, &path);
        }
        if parent == Node::TransactionsDir {
            self.child(&parent, name)?;
            return Err(self.refuse(&path, libc::EPERM, TRANSACTIONS_READ_ONLY));
        }
        if let Node::PartitionsDir(t) = &parent {
            self.child(&parent, name)?;
            return Err(self.refuse(
                &path,
                libc::EPERM,
                format!(
                    "partitions are never removed, as in Kafka (they are only ever added): \
                     rmdir {t} deletes the topic"
                ),
            ));
        }
        if parent != Node::Root || name == CONTROL_DIR {
            self.child(&parent, name)?;
            return Err(self.refuse(
                &path,
                libc::EPERM,
                "only topic and group directories can be removed (rmdir TOPIC deletes a \
                 topic, rmdir .kpfs/groups/GROUP a group without members)",
            ));
        }
        match self.store.delete_topic(name) {
            Ok(()) => {
                self.inodes.forget_topic(name);
                Ok(())
            }
            Err(EngineError::UnknownTopic { .. }) => Err(Self::not_found(&path)),
            Err(e) => Err(self.engine_error(&path, &e)),
        }
    }

    /// `rmdir .kpfs/groups/GROUP`: Kafka's DeleteGroups, refused while the group has
    /// members.
    fn delete_group(&self, name: &str, path: &str) -> FsResult<()> {
        let group = group_of_file_name(name).ok_or_else(|| Self::not_found(path))?;
        match self.store.delete_group(&group) {
            Ok(()) => {
                self.inodes.forget_group(&group);
                Ok(())
            }
            Err(GroupError::GroupIdNotFound { .. }) => Err(Self::not_found(path)),
            Err(e) => Err(self.group_error(path, &e)),
        }
    }

    /// Refuses an operation that would add, remove or move a name: the layout of a kpfs
    /// mount is fixed by its topics.
    pub(crate) fn refuse_namespace(&self, op: NamespaceOp, parent: u64, name: &OsStr) -> FsError {
        let parent = self.inodes.node(parent);
        let path = match &parent {
            Some(parent) => parent.child_path(&name.to_string_lossy()),
            None => name.to_string_lossy().into_owned(),
        };
        let in_groups = parent.as_ref().is_some_and(Node::in_groups);
        let in_transactions = parent.as_ref().is_some_and(Node::in_transactions);
        let reason = match op {
            _ if in_groups => GROUPS_READ_ONLY,
            _ if in_transactions => TRANSACTIONS_READ_ONLY,
            NamespaceOp::Create | NamespaceOp::CreateExclusive | NamespaceOp::Mknod => {
                "cannot create files: mkdir TOPIC creates a topic; append records with >> TOPIC/log"
            }
            NamespaceOp::Unlink => {
                "cannot remove files: records leave only through retention \
                 (retention.ms, retention.bytes) or an offset written to \
                 log_start_offset; rmdir TOPIC deletes a topic"
            }
            NamespaceOp::Rename => "cannot rename: topic and file names are fixed",
            NamespaceOp::Link => "hard links are not supported",
            NamespaceOp::Symlink => "symbolic links are not supported",
        };
        if op == NamespaceOp::CreateExclusive {
            return FsError {
                errno: libc::EPERM,
                message: format!("{path}: {reason}"),
            };
        }
        self.refuse(&path, libc::EPERM, reason)
    }

    /// CREATE: `sed -i`'s temporary beside a config file is a draft of it (see
    /// [`Draft`]); every other create is refused as [`KpfsFs::refuse_namespace`] says.
    pub(crate) fn create(
        &self,
        parent: u64,
        name: &OsStr,
        exclusive: bool,
    ) -> FsResult<(Entry, Opened)> {
        let refused = || {
            let op = if exclusive {
                NamespaceOp::CreateExclusive
            } else {
                NamespaceOp::Create
            };
            self.refuse_namespace(op, parent, name)
        };
        let dir = self.inodes.node(parent).ok_or_else(refused)?;
        let node = name
            .to_str()
            .filter(|name| is_sed_temporary(name))
            .and_then(|name| Self::draft_node(&dir, name))
            .ok_or_else(refused)?;
        let path = node.path();
        let (target, topic) = match &dir {
            Node::TopicDir(_) => {
                let topic = self.topic(&dir)?;
                self.refuse_internal_config(&topic, &path)?;
                (ConfigTarget::Topic(Arc::clone(&topic)), Some(topic))
            }
            _ => (ConfigTarget::Broker, None),
        };
        let exists = self.draft(&node).is_some();
        let draft = {
            let mut drafts = self.drafts.lock();
            if exists || drafts.contains_key(&node) {
                // mkstemp tries another name; no record, as for any O_EXCL probe.
                return Err(FsError {
                    errno: libc::EEXIST,
                    message: format!("{path}: exists"),
                });
            }
            if drafts.len() >= MAX_DRAFTS {
                drop(drafts);
                return Err(self.refuse(
                    &path,
                    libc::ENOSPC,
                    format!(
                        "{MAX_DRAFTS} drafts (sed -i temporaries) exist already: remove \
                         those a killed sed left (rm TOPIC/sed??????)"
                    ),
                ));
            }
            let draft = Arc::new(Draft::new(target));
            drafts.insert(node.clone(), Arc::clone(&draft));
            draft
        };
        let entry = self.entry(&node)?;
        let fh = self.handles.insert(Handle {
            node,
            writable: true,
            kind: HandleKind::Draft(draft),
            topic,
        });
        Ok((
            entry,
            Opened {
                fh,
                direct_io: true,
            },
        ))
    }

    /// UNLINK: a draft goes (sed removes its temporary when it fails); nothing else can.
    pub(crate) fn unlink(&self, parent: u64, name: &OsStr) -> FsResult<()> {
        let node = self.draft_named(parent, name);
        match node {
            Some(node) => {
                self.drafts.lock().remove(&node);
                self.inodes.forget(&node);
                Ok(())
            }
            None => Err(self.refuse_namespace(NamespaceOp::Unlink, parent, name)),
        }
    }

    /// RENAME: a draft renamed over the config file beside it applies as one write of
    /// the whole file (`>`) would at its close: whole, or nothing of it, rename(2)
    /// failing with the reason (sed prints it). Nothing else is ever renamed.
    pub(crate) fn rename(
        &self,
        parent: u64,
        name: &OsStr,
        new_parent: u64,
        new_name: &OsStr,
        plain: bool,
    ) -> FsResult<()> {
        let Some(node) = self.draft_named(parent, name) else {
            return Err(self.refuse_namespace(NamespaceOp::Rename, parent, name));
        };
        let dir = node.parent();
        if !plain || new_parent != parent || new_name != "config" {
            return Err(self.refuse(
                &node.path(),
                libc::EPERM,
                format!(
                    "a draft of {} can only be renamed over it (as sed -i does)",
                    dir.child_path("config")
                ),
            ));
        }
        let draft = self
            .draft(&node)
            .ok_or_else(|| Self::not_found(&node.path()))?;
        {
            let mut edit = draft.writer.edit.lock();
            self.apply_config(&dir.child_path("config"), &draft.writer, &mut edit)?;
        }
        self.drafts.lock().remove(&node);
        self.inodes.forget(&node);
        Ok(())
    }

    /// The draft `name` in the folder `parent`, if there is one.
    fn draft_named(&self, parent: u64, name: &OsStr) -> Option<Node> {
        let dir = self.inodes.node(parent)?;
        self.draft_child(&dir, name.to_str()?)
    }

    /// kpfs keeps no extended attributes. Setting the access ACL a file's mode already
    /// implies (what vim and `cp -p` copy onto the file they save) changes nothing and
    /// succeeds; anything else is refused.
    pub(crate) fn setxattr(&self, ino: u64, name: &OsStr, value: &[u8]) -> FsResult<()> {
        let node = self.node(ino)?;
        let perm = self.attr_of(ino, &node)?.perm;
        if name == POSIX_ACL_ACCESS && acl_is_mode(value, perm) {
            return Ok(());
        }
        Err(self.refuse_xattr_change(ino))
    }

    pub(crate) fn refuse_xattr_change(&self, ino: u64) -> FsError {
        let path = self
            .inodes
            .node(ino)
            .map_or_else(|| format!("inode {ino}"), |n| n.path());
        self.refuse(&path, libc::EPERM, "extended attributes are not supported")
    }

    pub(crate) fn open(&self, ino: u64, flags: i32) -> FsResult<Opened> {
        let node = self.node(ino)?;
        let path = node.path();
        let writable = flags & libc::O_ACCMODE != libc::O_RDONLY;
        let read_only =
            |what: &str| Err(self.refuse(&path, libc::EACCES, format!("{what} is read-only")));
        // Looked up once: the handle serves this topic, never one created later under
        // the same name.
        let topic = node.topic().map(|_| self.topic(&node)).transpose()?;
        let of_topic = || topic.clone().ok_or_else(|| Self::not_found(&path));
        let kind =
            match &node {
                Node::Root
                | Node::ControlDir
                | Node::TopicDir(_)
                | Node::SegmentsDir(_)
                | Node::PartitionsDir(_)
                | Node::PartitionDir(..)
                | Node::GroupsDir
                | Node::GroupDir(_)
                | Node::TransactionsDir
                | Node::SnapshotDir
                | Node::SnapshotTopicDir(_) => {
                    return Err(self.refuse(&path, libc::EISDIR, "is a directory"))
                }
                Node::SnapshotLog(_) | Node::SnapshotConfig(_) if writable => return read_only(
                    ".kpfs/snapshot is a copy of the topics for backups (append to TOPIC/log); it",
                ),
                Node::SnapshotLog(_) => HandleKind::Capture {
                    capture: of_topic()?
                        .current_capture(true)
                        .map_err(|e| self.engine_error(&path, &e))?,
                    cursor: Mutex::new(Default::default()),
                },
                Node::SnapshotConfig(_) => HandleKind::Text {
                    text: of_topic()?.config_text().into_bytes(),
                    writer: None,
                },
                Node::GroupFile { .. } if writable => {
                    return Err(self.refuse(&path, libc::EACCES, GROUPS_READ_ONLY))
                }
                Node::GroupFile { .. } => HandleKind::Text {
                    text: self.group_text(&node)?.into_bytes(),
                    writer: None,
                },
                Node::Transaction(_) if writable => {
                    return Err(self.refuse(&path, libc::EACCES, TRANSACTIONS_READ_ONLY))
                }
                Node::Transaction(_) => HandleKind::Text {
                    text: self.transaction_text(&node)?.into_bytes(),
                    writer: None,
                },
                Node::Log(scope) => {
                    let partition = match scope {
                        Scope::Topic(_) => None,
                        Scope::Partition(..) => Some(self.partition_at(&node)?),
                    };
                    HandleKind::Log {
                        topic: of_topic()?,
                        state: Mutex::new(LogState::new(partition)),
                    }
                }
                Node::TopicConfig(_) => {
                    let topic = of_topic()?;
                    if writable {
                        self.refuse_internal_config(&topic, &path)?;
                    }
                    HandleKind::Text {
                        text: topic.config_text().into_bytes(),
                        writer: writable.then(|| ConfigWriter::new(ConfigTarget::Topic(topic))),
                    }
                }
                Node::BrokerConfig => HandleKind::Text {
                    text: self.store.broker_config_text().into_bytes(),
                    writer: writable.then(|| ConfigWriter::new(ConfigTarget::Broker)),
                },
                Node::Errors if writable => return read_only(".kpfs/errors"),
                Node::Errors => HandleKind::Text {
                    text: self.store.rejections_text().into_bytes(),
                    writer: None,
                },
                Node::Status(_) if writable => return read_only("status"),
                Node::Status(_) => HandleKind::Text {
                    text: self.status(&node)?.0.into_bytes(),
                    writer: None,
                },
                Node::Metrics if writable => return read_only(".kpfs/metrics"),
                Node::Metrics => HandleKind::Text {
                    text: self.store.metrics_text().into_bytes(),
                    writer: None,
                },
                Node::Events(_) if writable => return read_only("events"),
                Node::Events(_) => HandleKind::Text {
                    text: of_topic()?.events_text().into_bytes(),
                    writer: None,
                },
                Node::LogStart(_) => {
                    let partition = self.partition_at(&node)?;
                    HandleKind::LogStart {
                        text: log_start_text(&*partition).into_bytes(),
                        topic: of_topic()?,
                        partition,
                        pending: Mutex::new(Vec::new()),
                    }
                }
                Node::Draft { .. } => {
                    HandleKind::Draft(self.draft(&node).ok_or_else(|| Self::not_found(&path))?)
                }
                Node::Segment { .. } if writable => {
                    return read_only("segments/ is a view of the partition directory; it")
                }
                Node::Segment { name, .. } => {
                    let file = self
                        .partition_at(&node)?
                        .open_segment_file(name)
                        .map_err(|e| self.engine_error(&path, &e))?;
                    HandleKind::Backing { file }
                }
            };
        let truncates = writable && flags & libc::O_TRUNC != 0;
        let fh = self.handles.insert(Handle {
            node: node.clone(),
            writable,
            kind,
            topic,
        });
        // With FUSE_ATOMIC_O_TRUNC, `>`'s truncation comes in the open and belongs to the
        // new descriptor, as an ftruncate through it would: a config file's next lines
        // replace its overrides at close, and a refused line leaves them all.
        if truncates {
            if let Err(e) = self.resize(&node, 0, Some(fh)) {
                self.handles.remove(fh);
                return Err(e);
            }
        }
        Ok(Opened {
            fh,
            direct_io: true,
        })
    }

    pub(crate) fn opendir(&self, ino: u64) -> FsResult<Opened> {
        let node = self.node(ino)?;
        let parent_ino = self.inodes.ino(&node.parent());
        let mut entries = vec![
            DirEntry {
                ino,
                kind: FileKind::Directory,
                name: ".".into(),
            },
            DirEntry {
                ino: parent_ino,
                kind: FileKind::Directory,
                name: "..".into(),
            },
        ];
        let children: Vec<Node> = match &node {
            Node::Root => std::iter::once(Node::ControlDir)
                .chain(self.store.topic_names().into_iter().map(Node::TopicDir))
                .collect(),
            Node::ControlDir => {
                let mut children = vec![
                    Node::BrokerConfig,
                    Node::Errors,
                    Node::Metrics,
                    Node::GroupsDir,
                    Node::TransactionsDir,
                    Node::SnapshotDir,
                ];
                children.extend(self.drafts_in(&node));
                children
            }
            Node::GroupsDir => {
                let ids = self.store.group_ids();
                self.inodes.retain_groups(&ids);
                // An id no file name can show is left out (docs/SEMANTICS.md).
                ids.into_iter()
                    .filter(|id| group_file_name(id).is_some())
                    .map(Node::GroupDir)
                    .collect()
            }
            Node::TransactionsDir => {
                let ids = self.store.transactional_ids();
                self.inodes.retain_transactions(&ids);
                // An id no file name can show is left out, as in .kpfs/groups.
                ids.into_iter()
                    .filter(|id| group_file_name(id).is_some())
                    .map(Node::Transaction)
                    .collect()
            }
            Node::GroupDir(group) => {
                if !self.group_exists(group) {
                    return Err(Self::not_found(&node.path()));
                }
                GroupFile::ALL
                    .into_iter()
                    .map(|file| Node::GroupFile {
                        group: group.clone(),
                        file,
                    })
                    .collect()
            }
            Node::TopicDir(t) => {
                self.topic(&node)?;
                let scope = Scope::Topic(t.clone());
                let mut children = vec![
                    Node::Log(scope.clone()),
                    Node::TopicConfig(t.clone()),
                    Node::SegmentsDir(scope.clone()),
                    Node::Status(scope.clone()),
                    Node::Events(t.clone()),
                    Node::LogStart(scope),
                    Node::PartitionsDir(t.clone()),
                ];
                children.retain(|n| S::SEGMENT_FILES || !matches!(n, Node::SegmentsDir(_)));
                children.extend(self.drafts_in(&node));
                children
            }
            Node::PartitionsDir(t) => (0..self.topic(&node)?.partition_count())
                .map(|n| Node::PartitionDir(t.clone(), n))
                .collect(),
            Node::PartitionDir(t, n) => {
                self.partition_at(&node)?;
                let scope = Scope::Partition(t.clone(), *n);
                PARTITION_FILES
                    .iter()
                    .filter_map(|name| partition_file::<S>(scope.clone(), name))
                    .collect()
            }
            Node::SnapshotDir => self
                .store
                .topic_names()
                .into_iter()
                .map(Node::SnapshotTopicDir)
                .collect(),
            Node::SnapshotTopicDir(t) => {
                self.topic(&node)?;
                vec![
                    Node::SnapshotLog(t.clone()),
                    Node::SnapshotConfig(t.clone()),
                ]
            }
            Node::SegmentsDir(scope) => {
                let files = self
                    .partition_at(&node)?
                    .segment_files()
                    .map_err(|e| self.engine_error(&node.path(), &e))?;
                let names: Vec<String> = files.into_iter().map(|f| f.name).collect();
                let scope = scope.of_segment_files();
                self.inodes.retain_segments(&scope, &names);
                names
                    .into_iter()
                    .map(|name| Node::Segment {
                        scope: scope.clone(),
                        name,
                    })
                    .collect()
            }
            Node::BrokerConfig
            | Node::Errors
            | Node::Metrics
            | Node::Log(_)
            | Node::TopicConfig(_)
            | Node::Status(_)
            | Node::Events(_)
            | Node::LogStart(_)
            | Node::Segment { .. }
            | Node::GroupFile { .. }
            | Node::Transaction(_)
            | Node::Draft { .. }
            | Node::SnapshotLog(_)
            | Node::SnapshotConfig(_) => {
                return Err(self.refuse(&node.path(), libc::ENOTDIR, "not a directory"))
            }
        };
        entries.extend(children.into_iter().map(|child| DirEntry {
            ino: self.inodes.ino(&child),
            kind: if child.is_dir() {
                FileKind::Directory
            } else {
                FileKind::RegularFile
            },
            name: leaf_name(&child),
        }));
        let fh = self.handles.insert(Handle {
            node,
            writable: false,
            kind: HandleKind::Dir { entries },
            topic: None,
        });
        Ok(Opened {
            fh,
            direct_io: false,
        })
    }

    /// Entries from position `offset` of the listing taken at opendir.
    pub(crate) fn readdir(&self, fh: u64, offset: u64) -> FsResult<Vec<DirEntry>> {
        let handle = self.handle(fh)?;
        match &handle.kind {
            HandleKind::Dir { entries } => Ok(entries
                .iter()
                .skip(usize::try_from(offset).unwrap_or(usize::MAX))
                .cloned()
                .collect()),
            HandleKind::Log { .. }
            | HandleKind::Text { .. }
            | HandleKind::LogStart { .. }
            | HandleKind::Draft(_)
            | HandleKind::Backing { .. }
            | HandleKind::Capture { .. } => Err(bad_handle(fh)),
        }
    }

    fn handle(&self, fh: u64) -> FsResult<Arc<Handle<S>>> {
        self.handles.get(fh).ok_or_else(|| bad_handle(fh))
    }

    pub(crate) fn read(&self, fh: u64, offset: u64, size: u32) -> FsResult<Vec<u8>> {
        let handle = self.handle(fh)?;
        let path = handle.node.path();
        if let Some(topic) = &handle.topic {
            // After `rmdir` (or DeleteTopics), a descriptor opened before reads nothing
            // of the topic, nor of a new one under its name.
            topic
                .check_not_deleted()
                .map_err(|e| self.engine_error(&path, &e))?;
        }
        match &handle.kind {
            HandleKind::Log { topic, state } => {
                let read = match &mut state.lock().reader {
                    LogReader::Topic(cursor) => topic.read_log(cursor, offset, size as usize),
                    LogReader::Partition { partition, cursor } => {
                        partition.read_log(cursor, offset, size as usize)
                    }
                };
                read.map_err(|e| self.engine_error(&path, &e))
            }
            HandleKind::Text { text, .. } | HandleKind::LogStart { text, .. } => {
                Ok(slice_at(text, offset, size))
            }
            HandleKind::Draft(draft) => Ok(slice_at(&draft.bytes.lock(), offset, size)),
            HandleKind::Capture { capture, cursor } => capture
                .read(&mut cursor.lock(), offset, size as usize)
                .map_err(|e| self.engine_error(&path, &e)),
            HandleKind::Backing { file } => {
                let mut buf = vec![0; size as usize];
                let mut filled = 0;
                // pread may return short before EOF (signals); only 0 means the end.
                while filled < buf.len() {
                    match file.read_at(&mut buf[filled..], offset + filled as u64) {
                        Ok(0) => break,
                        Ok(n) => filled += n,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            let errno = e.raw_os_error().unwrap_or(libc::EIO);
                            return Err(self.refuse(&path, errno, format!("read failed: {e}")));
                        }
                    }
                }
                buf.truncate(filled);
                Ok(buf)
            }
            HandleKind::Dir { .. } => Err(bad_handle(fh)),
        }
    }

    /// [`KpfsFs::write_from`] by a process the kernel did not name.
    #[cfg(test)]
    pub(crate) fn write(&self, fh: u64, data: &[u8]) -> FsResult<u32> {
        self.write_from(fh, data, None)
    }

    /// Handles one WRITE. The kernel's offset is ignored: `log` only ever grows at the
    /// engine's end, whatever `i_size` the kernel had cached. `owner` is the writing
    /// process's FUSE lock owner, if the kernel gave it (see [`KpfsFs::flush`]).
    pub(crate) fn write_from(&self, fh: u64, data: &[u8], owner: Option<u64>) -> FsResult<u32> {
        let handle = self.handle(fh)?;
        if !handle.writable {
            return Err(bad_handle(fh));
        }
        match &handle.kind {
            HandleKind::Log { topic, state } => {
                let mut state = state.lock();
                state.writer = owner;
                self.write_log(topic, &mut state, data, &handle.node)?;
            }
            HandleKind::Text {
                writer: Some(writer),
                ..
            } => self.write_config(writer, data, owner, &handle.node)?,
            HandleKind::Draft(draft) => self.write_draft(draft, data, owner, &handle.node)?,
            HandleKind::LogStart {
                topic,
                partition,
                pending,
                ..
            } => {
                let mut pending = pending.lock();
                pending.extend_from_slice(data);
                let complete = memchr::memrchr(b'\n', &pending).map_or(0, |i| i + 1);
                let lines: Vec<u8> = pending.drain(..complete).collect();
                for line in lines.split(|&b| b == b'\n') {
                    self.move_log_start(topic, partition, line, &handle.node)?;
                }
            }
            HandleKind::Text { writer: None, .. }
            | HandleKind::Backing { .. }
            | HandleKind::Capture { .. }
            | HandleKind::Dir { .. } => return Err(bad_handle(fh)),
        }
        // One FUSE write is at most max_write (1 MiB here), far below u32::MAX.
        Ok(u32::try_from(data.len()).unwrap_or(u32::MAX))
    }

    /// One write to a config file. Each line is checked as it arrives, and so is what
    /// the lines so far make of the config in force (the checks across keys, as at
    /// close), so the writer hears of a bad line, or of the line that makes the config
    /// invalid, from the write (bash prints a write's error, never a close's); the change
    /// applies at close.
    fn write_config(
        &self,
        writer: &ConfigWriter<S>,
        data: &[u8],
        owner: Option<u64>,
        node: &Node,
    ) -> FsResult<()> {
        let mut edit = writer.edit.lock();
        edit.note_writer(owner);
        let lines_before = edit.change.lines();
        let refused = edit.change.write(data);
        if let Some(first) = refused.first() {
            let path = node.path();
            for e in &refused[1..] {
                self.store.record_rejection(&path, &e.to_string());
            }
            return Err(self.refuse(&path, libc::EINVAL, first.to_string()));
        }
        // Once a line was refused the change is over: it applies no more.
        if edit.change.lines() == lines_before || edit.change.is_refused() {
            return Ok(());
        }
        let checked = match &writer.target {
            ConfigTarget::Broker => self.store.check_broker_change(&edit.change),
            ConfigTarget::Topic(topic) => topic.check_config_change(&edit.change),
        };
        checked.map_err(|e| {
            edit.change.refuse_last_line();
            self.engine_error(&node.path(), &e)
        })
    }

    /// One write to a draft: checked as a write to the config file it drafts, and kept.
    fn write_draft(
        &self,
        draft: &Draft<S>,
        data: &[u8],
        owner: Option<u64>,
        node: &Node,
    ) -> FsResult<()> {
        let mut bytes = draft.bytes.lock();
        if bytes.len() + data.len() > MAX_DRAFT_BYTES {
            return Err(self.refuse(
                &node.path(),
                libc::EFBIG,
                format!(
                    "a draft of a config file holds at most {MAX_DRAFT_BYTES} bytes: \
                     a config file is key=value lines"
                ),
            ));
        }
        self.write_config(&draft.writer, data, owner, node)?;
        bytes.extend_from_slice(data);
        Ok(())
    }

    /// One write to `log`: its complete lines are appended, its unterminated last line
    /// waits in `state.pending`. Nothing of a line of which any piece was refused is ever
    /// stored (see [`LogState::refuse_write`]); `node` names the file in a refusal (its
    /// path is built only then: appends are hot).
    fn write_log(
        &self,
        topic: &S::Topic,
        state: &mut LogState<S>,
        data: &[u8],
        node: &Node,
    ) -> FsResult<()> {
        if let Some(line) = state.refused.take() {
            if line.carried_by(data) {
                let error = self.refuse(
                    &node.path(),
                    line.errno,
                    format!(
                        "this write carries more of a refused line, and nothing of that \
                         line is stored: {}",
                        line.reason
                    ),
                );
                state.refuse_write(data, true, line.errno, line.reason);
                return Err(error);
            }
        }
        let continued = !state.pending.is_empty();
        let target = state.target();
        self.append_lines(topic, target, &mut state.pending, data)
            .map_err(|e| {
                let error = self.engine_error(&node.path(), &e);
                state.refuse_write(data, continued, error.errno, e.to_string());
                error
            })
    }

    /// Appends the complete lines of `pending + data` (to partition `target`, or where
    /// the partitioner sends them) and keeps the unterminated rest in `pending`. On error
    /// nothing is appended, and the caller drops the line.
    fn append_lines(
        &self,
        topic: &S::Topic,
        target: Option<u32>,
        pending: &mut Vec<u8>,
        data: &[u8],
    ) -> Result<(), EngineError> {
        // The complete lines go to the engine straight from the request buffer. A fragment
        // an earlier write left (cat's 128 KiB or 1 MiB chunks rarely end on a newline)
        // is finished with this write's first line, and only that line is copied.
        let kept = pending.len();
        let first_newline = if kept > 0 {
            memchr::memchr(b'\n', data)
        } else {
            None
        };
        let (head_end, body) = match first_newline {
            Some(nl) => {
                pending.extend_from_slice(&data[..=nl]);
                (pending.len(), &data[nl + 1..])
            }
            None => (0, data),
        };
        let complete = memchr::memrchr(b'\n', body).map(|i| i + 1);
        let rest_len = if kept > 0 && first_newline.is_none() {
            kept + data.len()
        } else {
            body.len() - complete.unwrap_or(0)
        };
        if rest_len > 0 {
            // Refused before any of the write's lines is appended: all or nothing.
            topic.check_unterminated_line(target, rest_len)?;
        }
        if kept > 0 && first_newline.is_none() {
            // Still no newline: the fragment only grows.
            pending.extend_from_slice(data);
            return Ok(());
        }
        let complete_end = complete.unwrap_or(0);
        if head_end > 0 || complete_end > 0 {
            topic.append_lines(target, &pending[..head_end], &body[..complete_end])?;
        }
        pending.clear();
        pending.extend_from_slice(&body[complete_end..]);
        Ok(())
    }

    /// A close(2) of a descriptor of the handle (FLUSH: every close of every duplicate
    /// sends one, and close(2) returns its error). For `log`, a close by the process that
    /// wrote the handle's last bytes ends the line it left unterminated: the line becomes
    /// a record now, or is refused with close(2)'s error. A close by another process that
    /// shares the descriptor (a child that inherited it) leaves the line open. A config
    /// file's change applies at a close by a process that wrote it, so close(2) reports
    /// why it did not.
    pub(crate) fn flush(&self, fh: u64, closer: u64) -> FsResult<()> {
        let handle = self.handle(fh)?;
        match &handle.kind {
            HandleKind::Log { topic, state } => {
                self.end_line(topic, &mut state.lock(), Some(closer), &handle.node)
            }
            HandleKind::Text {
                writer: Some(writer),
                ..
            } => self.commit_config(&handle, writer, Some(closer)),
            HandleKind::LogStart {
                topic,
                partition,
                pending,
                ..
            } => {
                let line = std::mem::take(&mut *pending.lock());
                self.move_log_start(topic, partition, &line, &handle.node)
            }
            // A draft applies when it is renamed over its config file, not at close.
            HandleKind::Text { writer: None, .. }
            | HandleKind::Draft(_)
            | HandleKind::Backing { .. }
            | HandleKind::Capture { .. }
            | HandleKind::Dir { .. } => Ok(()),
        }
    }

    /// Ends the handle's unterminated line, if `closer` wrote it or is `None` (the last
    /// close, or unmount): a fragment becomes a record, a refused line is over.
    fn end_line(
        &self,
        topic: &S::Topic,
        state: &mut LogState<S>,
        closer: Option<u64>,
        node: &Node,
    ) -> FsResult<()> {
        if closer.is_some() && state.writer.is_some() && closer != state.writer {
            return Ok(());
        }
        state.refused = None;
        let line = std::mem::take(&mut state.pending);
        if line.is_empty() {
            return Ok(());
        }
        topic
            .append_lines(state.target(), &[], &line)
            .map_err(|e| self.engine_error(&node.path(), &e))
    }

    /// Applies the change a config handle carries, if it is due: at a FLUSH from a
    /// process that wrote it (`owner`), or at RELEASE (`None`: the last close, for a
    /// truncation without writes). A refused line refuses the whole change.
    fn commit_config(
        &self,
        handle: &Handle<S>,
        writer: &ConfigWriter<S>,
        owner: Option<u64>,
    ) -> FsResult<()> {
        let mut edit = writer.edit.lock();
        let due = match owner {
            Some(owner) => edit.due_at_flush(owner),
            None => edit.pending,
        };
        if !due {
            return Ok(());
        }
        edit.committed();
        self.apply_config(&handle.node.path(), writer, &mut edit)
    }

    /// Applies the change `edit` of `writer` holds (the lock of `writer.edit`): whole,
    /// or nothing of it, with the reasons in `.kpfs/errors` under `path`.
    fn apply_config(
        &self,
        path: &str,
        writer: &ConfigWriter<S>,
        edit: &mut handle::ConfigEdit,
    ) -> FsResult<()> {
        let refused = edit.change.end_lines();
        for e in &refused {
            self.store.record_rejection(path, &e.to_string());
        }
        let (before, applied) = match &writer.target {
            ConfigTarget::Broker => (
                self.store.broker_config_warnings(),
                self.store.apply_broker_change(&edit.change),
            ),
            ConfigTarget::Topic(topic) => (
                topic.config_warnings(),
                topic.apply_config_change(&edit.change),
            ),
        };
        applied.map_err(|e| self.engine_error(path, &e))?;
        // Accepted, but perhaps not doing what it seems: say so where refusals go, once,
        // when the change brings the warning in.
        let after = match &writer.target {
            ConfigTarget::Broker => self.store.broker_config_warnings(),
            ConfigTarget::Topic(topic) => topic.config_warnings(),
        };
        for warning in after.iter().filter(|w| !before.contains(w)) {
            self.store
                .record_rejection(path, &format!("warning: {warning}"));
        }
        Ok(())
    }

    /// One line written to `log_start_offset`: an offset, before which the records of
    /// `partition` are deleted (Kafka's DeleteRecords); blank lines are nothing.
    fn move_log_start(
        &self,
        topic: &S::Topic,
        partition: &S::Partition,
        line: &[u8],
        node: &Node,
    ) -> FsResult<()> {
        let text = String::from_utf8_lossy(line);
        let text = text.trim();
        if text.is_empty() {
            return Ok(());
        }
        let count = topic.partition_count();
        if node.nested_partition().is_none() && count > 1 {
            // Partition 0's file, kept where it always was; an offset means nothing
            // without its partition.
            return Err(self.refuse(
                &node.path(),
                libc::EINVAL,
                format!(
                    "{} has {count} partitions: write the offset to {}/{PARTITIONS_DIR}/N/{LOG_START_FILE} of partition N",
                    topic.name(),
                    topic.name()
                ),
            ));
        }
        let Ok(offset) = text.parse::<u64>() else {
            return Err(self.refuse(
                &node.path(),
                libc::EINVAL,
                format!(
                    "{} is not an offset: write the offset before which records are deleted",
                    Excerpt::quoted(text.as_bytes())
                ),
            ));
        };
        partition
            .delete_records_before(offset)
            .map_err(|e| self.engine_error(&node.path(), &e))
    }

    /// The internal topic is read-only in the mount, its `config` too (the engine refuses
    /// its appends, DeleteRecords and deletion whoever asks; configs only here, since
    /// Kafka lets an admin client change them).
    fn refuse_internal_config(&self, topic: &S::Topic, path: &str) -> FsResult<()> {
        if !topic.is_internal() {
            return Ok(());
        }
        Err(self.refuse(
            path,
            libc::EPERM,
            format!(
                "{} is an internal topic, read-only in the mount: only the group coordinator writes it",
                topic.name()
            ),
        ))
    }

    /// `>` or ftruncate to zero on a config file: through an open handle, its next
    /// lines replace the overrides; by path (`truncate -s 0`), every override goes now.
    fn truncate_config(&self, node: &Node, fh: Option<u64>) -> FsResult<()> {
        if let Some(handle) = fh.and_then(|fh| self.handles.get(fh)) {
            if let HandleKind::Text {
                writer: Some(writer),
                ..
            } = &handle.kind
            {
                let mut edit = writer.edit.lock();
                edit.change.truncate();
                edit.pending = true;
                return Ok(());
            }
        }
        let path = node.path();
        let applied = match node {
            Node::BrokerConfig => {
                let mut change = ConfigChange::new(ConfigScope::Broker);
                change.truncate();
                self.store.apply_broker_change(&change)
            }
            _ => {
                let topic = self.topic(node)?;
                self.refuse_internal_config(&topic, &path)?;
                let mut change = ConfigChange::new(ConfigScope::Topic);
                change.truncate();
                topic.apply_config_change(&change)
            }
        };
        applied.map_err(|e| self.engine_error(&path, &e))
    }

    /// The last close of a descriptor (RELEASE): a final line without `\n` that no FLUSH
    /// ended is still a record, and a config change no FLUSH committed applies.
    pub(crate) fn release(&self, fh: u64) {
        let Some(handle) = self.handles.remove(fh) else {
            return;
        };
        if let HandleKind::Text {
            writer: Some(writer),
            ..
        } = &handle.kind
        {
            if let Err(error) = self.commit_config(&handle, writer, None) {
                // Nobody waits for RELEASE's answer; the record is all the user gets.
                tracing::warn!(errno = error.errno, "{}", error.message);
            }
        }
        if let HandleKind::Capture { capture, .. } = &handle.kind {
            capture.closed();
        }
        self.end_open_line(&handle);
    }

    /// At unmount: the lines that writers still holding `log` open left unterminated
    /// become records, as at their close (nothing is appended through those descriptors
    /// once the engine is closed).
    pub(crate) fn finish_open_writes(&self) {
        for handle in self.handles.all() {
            self.end_open_line(&handle);
        }
    }

    fn end_open_line(&self, handle: &Handle<S>) {
        if let HandleKind::Log { topic, state } = &handle.kind {
            if let Err(error) = self.end_line(topic, &mut state.lock(), None, &handle.node) {
                // Nobody waits for the answer; the record in .kpfs/errors is all the user
                // gets.
                tracing::warn!(errno = error.errno, "{}", error.message);
            }
        }
    }

    pub(crate) fn releasedir(&self, fh: u64) {
        self.handles.remove(fh);
    }

    pub(crate) fn fsync(&self, fh: u64) -> FsResult<()> {
        let handle = self.handle(fh)?;
        match &handle.kind {
            HandleKind::Log { topic, .. } => topic
                .sync()
                .map_err(|e| self.engine_error(&handle.node.path(), &e)),
            // A config change is durable when the close (or a draft's rename) that applies
            // it returns; the rest is read-only.
            HandleKind::Text { .. }
            | HandleKind::Draft(_)
            | HandleKind::LogStart { .. }
            | HandleKind::Backing { .. }
            | HandleKind::Capture { .. }
            | HandleKind::Dir { .. } => Ok(()),
        }
    }

    /// Space of the filesystem holding the data directory: that is where records go.
    pub(crate) fn statfs(&self) -> FsResult<StatFs> {
        let path = CString::new(self.data_dir.as_os_str().as_bytes()).map_err(|_| FsError {
            errno: libc::EINVAL,
            message: "data directory path contains NUL".into(),
        })?;
        let mut st = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
        // SAFETY: `path` is a valid NUL-terminated string and `st` points to writable
        // memory of the right type for the duration of the call.
        let rc = unsafe { libc::statvfs(path.as_ptr(), st.as_mut_ptr()) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            return Err(FsError {
                errno: e.raw_os_error().unwrap_or(libc::EIO),
                message: format!("statvfs {}: {e}", self.data_dir.display()),
            });
        }
        // SAFETY: statvfs returned 0, so it filled the whole struct (which was zeroed).
        let st = unsafe { st.assume_init() };
        Ok(StatFs {
            blocks: st.f_blocks,
            bfree: st.f_bfree,
            bavail: st.f_bavail,
            files: st.f_files,
            ffree: st.f_ffree,
            bsize: u32::try_from(st.f_bsize).unwrap_or(u32::MAX),
            namelen: u32::try_from(st.f_namemax).unwrap_or(255),
            frsize: u32::try_from(st.f_frsize).unwrap_or(u32::MAX),
        })
    }
}

/// Why nothing in `.kpfs/groups` can be created, written, renamed or removed but a
/// group's directory.
const GROUPS_READ_ONLY: &str = ".kpfs/groups is read-only: groups come from Kafka clients \
     (a consumer with a group.id); rmdir .kpfs/groups/GROUP deletes a group without members";

/// Why nothing in `.kpfs/transactions` can be created, written, renamed or removed.
const TRANSACTIONS_READ_ONLY: &str = ".kpfs/transactions is read-only: transactions come \
     from Kafka clients (a producer with a transactional.id), which commit or abort them; \
     an id leaves after transactional.id.expiration.ms without a transaction";

/// The xattr that holds a file's access ACL (`acl_set_file`).
const POSIX_ACL_ACCESS: &str = "system.posix_acl_access";

/// Whether `value`, a `system.posix_acl_access` xattr (Linux's `posix_acl_xattr`: a
/// little-endian version 2 header, then entries of tag, permissions and id), is the
/// minimal ACL that says exactly what `perm` says: owner, group and other entries only.
fn acl_is_mode(value: &[u8], perm: u16) -> bool {
    const VERSION: u32 = 2;
    const USER_OBJ: u16 = 0x01;
    const GROUP_OBJ: u16 = 0x04;
    const OTHER: u16 = 0x20;
    let Some((version, entries)) = value.split_first_chunk::<4>() else {
        return false;
    };
    if u32::from_le_bytes(*version) != VERSION || entries.len() != 3 * 8 {
        return false;
    }
    let mut tags = Vec::with_capacity(3);
    for entry in entries.chunks_exact(8) {
        let tag = u16::from_le_bytes([entry[0], entry[1]]);
        let bits = u16::from_le_bytes([entry[2], entry[3]]);
        let shift = match tag {
            USER_OBJ => 6,
            GROUP_OBJ => 3,
            OTHER => 0,
            _ => return false,
        };
        if bits != (perm >> shift) & 0o7 || tags.contains(&tag) {
            return false;
        }
        tags.push(tag);
    }
    true
}

/// The `log_start_offset` file: the offset and a newline.
fn log_start_text(partition: &impl PartitionStore) -> String {
    format!("{}\n", partition.log_start_offset())
}

/// The files of a partition's folder, in listing order.
const PARTITION_FILES: [&str; 4] = ["log", "segments", "status", LOG_START_FILE];

/// The per-partition file `name` of the folder `scope`, if it is one: `segments` only
/// where store `S` has segment files to show.
fn partition_file<S: Store>(scope: Scope, name: &str) -> Option<Node> {
    Some(match name {
        "log" => Node::Log(scope),
        "segments" if S::SEGMENT_FILES => Node::SegmentsDir(scope),
        "status" => Node::Status(scope),
        LOG_START_FILE => Node::LogStart(scope),
        _ => return None,
    })
}

/// The bytes of `text` a read of `size` at `offset` gets.
fn slice_at(text: &[u8], offset: u64, size: u32) -> Vec<u8> {
    let start = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(text.len());
    let end = start.saturating_add(size as usize).min(text.len());
    text[start..end].to_vec()
}

fn bad_handle(fh: u64) -> FsError {
    FsError {
        errno: libc::EBADF,
        message: format!("file handle {fh} is not open for this operation"),
    }
}

fn leaf_name(node: &Node) -> String {
    let path = node.path();
    match path.rsplit_once('/') {
        Some((_, leaf)) => leaf.to_string(),
        None => path,
    }
}

#[cfg(test)]
mod mock_tests;
#[cfg(test)]
mod tests;
