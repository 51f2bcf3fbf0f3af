//! Open file handles: what one `open(2)` of a kpfs path carries until RELEASE. Each
//! handle owns its own state behind its own lock, so two processes reading or appending
//! through different descriptors never contend on a table-wide lock.

use std::collections::HashMap;
use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::engine::{LogCursor, Topic};
use crate::fs::inode::Node;
use crate::fs::DirEntry;

/// Where a write to a synthetic config file goes.
pub enum ConfigTarget {
    Broker,
    Topic(Arc<Topic>),
}

/// The per-handle state of `TOPIC/log`.
pub struct LogState {
    pub cursor: LogCursor,
    /// Bytes after the last `\n` written through this handle: the start of a line whose
    /// end has not arrived yet (one write(2) may reach us as several WRITEs).
    pub pending: Vec<u8>,
}

pub enum HandleKind {
    Log {
        topic: Arc<Topic>,
        state: Mutex<LogState>,
    },
    /// A text file rendered once at open, so a reader sees one consistent snapshot even
    /// when it reads in several pieces.
    Text {
        text: Vec<u8>,
        /// Where writes go; `None` for read-only files.
        target: Option<ConfigTarget>,
    },
    /// A file of the partition directory. Holding the `File` keeps reads working after
    /// the engine renames it to `.deleted` or unlinks it.
    Backing { file: File },
    /// A directory listing, taken at opendir so offsets stay meaningful while topics or
    /// segments come and go.
    Dir { entries: Vec<DirEntry> },
}

pub struct Handle {
    /// The node the handle was opened on, for error reasons.
    pub node: Node,
    pub writable: bool,
    pub kind: HandleKind,
}

pub struct HandleTable {
    handles: Mutex<HashMap<u64, Arc<Handle>>>,
    next_fh: AtomicU64,
}

impl Default for HandleTable {
    fn default() -> Self {
        Self::new()
    }
}

impl HandleTable {
    pub fn new() -> HandleTable {
        HandleTable {
            handles: Mutex::new(HashMap::new()),
            // 0 is what the kernel passes when no handle exists; never hand it out.
            next_fh: AtomicU64::new(1),
        }
    }

    pub fn insert(&self, handle: Handle) -> u64 {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.handles.lock().insert(fh, Arc::new(handle));
        fh
    }

    pub fn get(&self, fh: u64) -> Option<Arc<Handle>> {
        self.handles.lock().get(&fh).cloned()
    }

    pub fn remove(&self, fh: u64) -> Option<Arc<Handle>> {
        self.handles.lock().remove(&fh)
    }
}
