//! Open file handles: what one `open(2)` of a kpfs path carries until RELEASE. Each
//! handle owns its own state behind its own lock, so two processes reading or appending
//! through different descriptors never contend on a table-wide lock.

use std::collections::HashMap;
use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::engine::{ConfigChange, ConfigScope};
use crate::fs::inode::Node;
use crate::fs::DirEntry;
use crate::store::{CaptureStore, PartitionStore, Store, TopicStore};

/// The capture type of store `S`'s topics.
type CaptureOf<S> = <<S as Store>::Topic as TopicStore>::Capture;

/// Where a write to a synthetic config file goes.
pub(crate) enum ConfigTarget<S: Store> {
    Broker,
    Topic(Arc<S::Topic>),
}

impl<S: Store> ConfigTarget<S> {
    pub(crate) fn scope(&self) -> ConfigScope {
        match self {
            ConfigTarget::Broker => ConfigScope::Broker,
            ConfigTarget::Topic(_) => ConfigScope::Topic,
        }
    }
}

/// A config file open for writing: where its change goes and the change so far. One
/// open-to-close is one change (docs/SEMANTICS.md).
pub(crate) struct ConfigWriter<S: Store> {
    pub(crate) target: ConfigTarget<S>,
    pub(crate) edit: Mutex<ConfigEdit>,
}

/// The change a config handle carries, and who may commit it.
pub(crate) struct ConfigEdit {
    pub(crate) change: ConfigChange,
    /// Written or truncated since the last commit.
    pub(crate) pending: bool,
    /// Lock owners (the kernel's id of a process's file table) that wrote since the
    /// last commit. A FLUSH commits only for one of them: a child that inherited the
    /// descriptor and exits (`{ echo a=1; sleep 1; echo b=2; } > config`) closes it
    /// mid-change, and its FLUSH must not apply half of it.
    pub(crate) writers: Vec<u64>,
    /// A write came without a lock owner: any FLUSH commits.
    pub(crate) anonymous_writer: bool,
}

impl<S: Store> ConfigWriter<S> {
    pub(crate) fn new(target: ConfigTarget<S>) -> ConfigWriter<S> {
        let change = ConfigChange::new(target.scope());
        ConfigWriter {
            target,
            edit: Mutex::new(ConfigEdit {
                change,
                pending: false,
                writers: Vec::new(),
                anonymous_writer: false,
            }),
        }
    }
}

impl ConfigEdit {
    pub(crate) fn note_writer(&mut self, owner: Option<u64>) {
        self.pending = true;
        match owner {
            Some(owner) if !self.writers.contains(&owner) => self.writers.push(owner),
            Some(_) => {}
            None => self.anonymous_writer = true,
        }
    }

    /// Whether a FLUSH from `owner` ends the change: something is pending and `owner`
    /// wrote it. A truncation alone (`> config`) waits for RELEASE, since the shell's
    /// first FLUSH comes between the truncation and the writes.
    pub(crate) fn due_at_flush(&self, owner: u64) -> bool {
        self.pending && (self.anonymous_writer || self.writers.contains(&owner))
    }

    /// Marks the change committed (or refused): only new writes make it due again.
    pub(crate) fn committed(&mut self) {
        self.pending = false;
        self.writers.clear();
        self.anonymous_writer = false;
    }
}

/// A draft of a config file (`sed -i`'s temporary): what was written to it, checked as it
/// arrived like a write of the whole file (`>`), applied when it is renamed over
/// `config`. It outlives its handles (sed closes it before the rename) and lives until
/// the rename, an unlink, its topic's deletion or unmount.
pub(crate) struct Draft<S: Store> {
    pub(crate) writer: ConfigWriter<S>,
    pub(crate) bytes: Mutex<Vec<u8>>,
}

impl<S: Store> Draft<S> {
    pub(crate) fn new(target: ConfigTarget<S>) -> Draft<S> {
        let writer = ConfigWriter::new(target);
        // A new file is the whole file: its lines are the overrides.
        writer.edit.lock().change.truncate();
        Draft {
            writer,
            bytes: Mutex::new(Vec::new()),
        }
    }

    /// The topic a draft of a topic's config belongs to.
    pub(crate) fn topic(&self) -> Option<&Arc<S::Topic>> {
        match &self.writer.target {
            ConfigTarget::Topic(topic) => Some(topic),
            ConfigTarget::Broker => None,
        }
    }
}

/// Which stream a `log` handle reads: the topic's (every partition's records in the
/// order they were appended) or one partition's (`TOPIC/partitions/N/log`).
pub(crate) enum LogReader<S: Store> {
    Topic(<S::Topic as TopicStore>::Cursor),
    Partition {
        partition: Arc<S::Partition>,
        cursor: <S::Partition as PartitionStore>::Cursor,
    },
}

/// The per-handle state of a `log`.
pub(crate) struct LogState<S: Store> {
    pub(crate) reader: LogReader<S>,
    /// Bytes after the last `\n` written through this handle: the start of a line whose
    /// end has not arrived yet (one write(2) may reach us as several WRITEs).
    pub(crate) pending: Vec<u8>,
    /// The FUSE lock owner (one per process's descriptor table) of the last write, when
    /// the kernel gave one: a close by that process ends the line it left unterminated.
    pub(crate) writer: Option<u64>,
    /// A line of which a piece was refused, while later writes may carry more of it.
    pub(crate) refused: Option<Box<RefusedLine>>,
}

/// A line of which a piece was refused. Nothing of it is ever stored: what the handle
/// held of it is dropped, and the writes that carry more of it are refused too.
pub(crate) struct RefusedLine {
    pub(crate) errno: i32,
    /// The first refusal's reason, repeated for the writes refused with it.
    pub(crate) reason: String,
    /// Its newline has not come: every write up to the one that brings it is refused.
    open: bool,
    /// When the refused write itself held the line's newline and began in the middle of
    /// the line: that write's bytes up to and including the newline. The kernel answers a
    /// write(2) whose later piece is refused with the count of its earlier pieces, and
    /// the program sends the rest again, which starts with them.
    tail: Vec<u8>,
}

impl RefusedLine {
    /// Whether `data` carries more of the line: the bytes before its newline, or the
    /// refused write's tail sent again.
    pub(crate) fn carried_by(&self, data: &[u8]) -> bool {
        self.open || (!self.tail.is_empty() && data.starts_with(&self.tail))
    }
}

impl<S: Store> LogState<S> {
    /// The state of a handle of the topic's `log` (`partition` `None`) or of a partition's.
    pub(crate) fn new(partition: Option<Arc<S::Partition>>) -> LogState<S> {
        let reader = match partition {
            None => LogReader::Topic(Default::default()),
            Some(partition) => LogReader::Partition {
                partition,
                cursor: Default::default(),
            },
        };
        LogState {
            reader,
            pending: Vec::new(),
            writer: None,
            refused: None,
        }
    }

    /// The partition the handle's writes go to; `None`: where the partitioner sends them.
    pub(crate) fn target(&self) -> Option<u32> {
        match &self.reader {
            LogReader::Topic(_) => None,
            LogReader::Partition { partition, .. } => Some(partition.index()),
        }
    }

    /// Notes that a write of `data` was refused. `continued` says whether it carried the
    /// rest of a line that earlier writes began: that line is refused whole, and so is the
    /// line the write leaves unterminated, whose next pieces are still to come.
    pub(crate) fn refuse_write(
        &mut self,
        data: &[u8],
        continued: bool,
        errno: i32,
        reason: String,
    ) {
        self.pending.clear();
        let open = data.last() != Some(&b'\n');
        let tail = match memchr::memchr(b'\n', data) {
            Some(newline) if continued && !open => data[..=newline].to_vec(),
            _ => Vec::new(),
        };
        self.refused = (open || !tail.is_empty()).then(|| {
            Box::new(RefusedLine {
                errno,
                reason,
                open,
                tail,
            })
        });
    }
}

pub(crate) enum HandleKind<S: Store> {
    Log {
        topic: Arc<S::Topic>,
        state: Mutex<LogState<S>>,
    },
    /// A text file rendered once at open, so a reader sees one consistent snapshot even
    /// when it reads in several pieces.
    Text {
        text: Vec<u8>,
        /// A config file opened for writing; `None` for files opened read-only.
        writer: Option<ConfigWriter<S>>,
    },
    /// `log_start_offset`: the offset as of the open, and the unterminated rest of what
    /// a writer wrote (each complete line is an offset, applied as it arrives).
    LogStart {
        topic: Arc<S::Topic>,
        partition: Arc<S::Partition>,
        text: Vec<u8>,
        pending: Mutex<Vec<u8>>,
    },
    /// A draft of a config file, shared with the drafts table.
    Draft(Arc<Draft<S>>),
    /// A file of the partition directory. Holding the `File` keeps reads working after
    /// the engine renames it to `.deleted` or unlinks it.
    Backing { file: File },
    /// `.kpfs/snapshot/TOPIC/log`: the capture it was opened on, read through its own
    /// cursor; the topic keeps the capture current until the handle is released.
    Capture {
        capture: CaptureOf<S>,
        cursor: Mutex<<CaptureOf<S> as CaptureStore>::Cursor>,
    },
    /// A directory listing, taken at opendir so offsets stay meaningful while topics or
    /// segments come and go.
    Dir { entries: Vec<DirEntry> },
}

pub(crate) struct Handle<S: Store> {
    /// The node the handle was opened on, for error reasons.
    pub(crate) node: Node,
    pub(crate) writable: bool,
    pub(crate) kind: HandleKind<S>,
    /// The topic of a topic's file, as it was when the handle was opened.
    pub(crate) topic: Option<Arc<S::Topic>>,
}

pub(crate) struct HandleTable<S: Store> {
    handles: Mutex<HashMap<u64, Arc<Handle<S>>>>,
    next_fh: AtomicU64,
}

impl<S: Store> Default for HandleTable<S> {
    fn default() -> Self {
        Self::new()
    }
}

impl<S: Store> HandleTable<S> {
    pub(crate) fn new() -> HandleTable<S> {
        HandleTable {
            handles: Mutex::new(HashMap::new()),
            // 0 is what the kernel passes when no handle exists; never hand it out.
            next_fh: AtomicU64::new(1),
        }
    }

    pub(crate) fn insert(&self, handle: Handle<S>) -> u64 {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.handles.lock().insert(fh, Arc::new(handle));
        fh
    }

    pub(crate) fn get(&self, fh: u64) -> Option<Arc<Handle<S>>> {
        self.handles.lock().get(&fh).cloned()
    }

    pub(crate) fn remove(&self, fh: u64) -> Option<Arc<Handle<S>>> {
        self.handles.lock().remove(&fh)
    }

    /// Every open handle, as of now.
    pub(crate) fn all(&self) -> Vec<Arc<Handle<S>>> {
        self.handles.lock().values().cloned().collect()
    }
}
