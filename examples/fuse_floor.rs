//! The floor for kpfs benchmarks: a fuser server with kpfs's exact mount options, thread
//! count and open flags but no storage at all. Whatever kpfs costs above this is the
//! engine's and the adapter's; whatever this costs is FUSE's.
//!
//! ```text
//! cargo run --release --example fuse_floor -- MOUNTPOINT [SOURCE_BYTES [SINKS]]
//! ```
//! The root holds `sink` (accepts and discards appends; its size grows like a log's) and
//! `source` (SOURCE_BYTES, default 1 GiB or $FLOOR_SOURCE_BYTES, of 100-byte lines made in
//! memory at startup). With SINKS > 1 it also holds `sink1` .. `sink{SINKS-1}`, so
//! parallel writers each have a file of their own, as they would have a topic each in
//! kpfs. Ctrl-C or SIGTERM unmounts.
#![allow(
    clippy::disallowed_methods,
    reason = "the floor serves real file times, as kpfs does"
)]

use std::ffi::OsStr;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    InitFlags, KernelConfig, LockOwner, MountOption, OpenFlags, ReplyAttr, ReplyData,
    ReplyDirectory, ReplyEntry, ReplyOpen, ReplyWrite, ReplyXattr, Request, Session, WriteFlags,
};

const SINK: INodeNo = INodeNo(2);
const SOURCE: INodeNo = INodeNo(3);
/// `sink1` has this inode, `sink2` the next one, and so on.
const FIRST_EXTRA_SINK: u64 = 4;
const LINE_BYTES: usize = 100;
const DEFAULT_SOURCE_BYTES: u64 = 1 << 30;

struct Floor {
    /// Bytes appended to each sink: `sink` first, then `sink1`, `sink2`, ...
    sink_lens: Vec<AtomicU64>,
    source: Vec<u8>,
    started: SystemTime,
}

impl Floor {
    fn sink_index(&self, ino: INodeNo) -> Option<usize> {
        let index = match ino {
            SINK => 0,
            INodeNo(n) if n >= FIRST_EXTRA_SINK => {
                usize::try_from(n - FIRST_EXTRA_SINK + 1).ok()?
            }
            _ => return None,
        };
        (index < self.sink_lens.len()).then_some(index)
    }

    fn sink_ino(index: usize) -> INodeNo {
        match index {
            0 => SINK,
            i => INodeNo(FIRST_EXTRA_SINK + i as u64 - 1),
        }
    }

    fn sink_name(index: usize) -> String {
        match index {
            0 => "sink".to_string(),
            i => format!("sink{i}"),
        }
    }

    fn attr(&self, ino: INodeNo) -> Option<FileAttr> {
        let (kind, size, perm, nlink) = match ino {
            INodeNo::ROOT => (FileType::Directory, 0, 0o755, 2),
            SOURCE => (FileType::RegularFile, self.source.len() as u64, 0o444, 1),
            _ => {
                let sink = self.sink_index(ino)?;
                let len = self.sink_lens[sink].load(Ordering::Relaxed);
                (FileType::RegularFile, len, 0o644, 1)
            }
        };
        Some(FileAttr {
            ino,
            size,
            blocks: size.div_ceil(512),
            atime: self.started,
            mtime: self.started,
            ctime: self.started,
            crtime: self.started,
            kind,
            perm,
            nlink,
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 1 << 20,
            flags: 0,
        })
    }
}

impl Filesystem for Floor {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        let _ = config.add_capabilities(InitFlags::FUSE_PARALLEL_DIROPS);
        let _ = config.set_max_write(1 << 20);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let ino = match (parent, name.to_str()) {
            (INodeNo::ROOT, Some("source")) => SOURCE,
            (INodeNo::ROOT, Some(name)) => {
                match (0..self.sink_lens.len()).find(|&i| Self::sink_name(i) == name) {
                    Some(i) => Self::sink_ino(i),
                    None => return reply.error(Errno::ENOENT),
                }
            }
            _ => return reply.error(Errno::ENOENT),
        };
        match self.attr(ino) {
            Some(attr) => reply.entry_with_ttls(
                &Duration::ZERO,
                &Duration::from_secs(1),
                &attr,
                Generation(0),
            ),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.attr(ino) {
            Some(attr) => reply.attr(&Duration::ZERO, &attr),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn open(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO);
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        if ino != SOURCE {
            return reply.data(&[]);
        }
        let len = self.source.len();
        let start = usize::try_from(offset).unwrap_or(len).min(len);
        let end = start.saturating_add(size as usize).min(len);
        reply.data(&self.source[start..end]);
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let Some(sink) = self.sink_index(ino) else {
            return reply.error(Errno::EACCES);
        };
        self.sink_lens[sink].fetch_add(data.len() as u64, Ordering::Relaxed);
        reply.written(u32::try_from(data.len()).unwrap_or(u32::MAX));
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: fuser::ReplyEmpty,
    ) {
        reply.ok();
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let mut entries = vec![
            (INodeNo::ROOT, FileType::Directory, ".".to_string()),
            (INodeNo::ROOT, FileType::Directory, "..".to_string()),
            (SINK, FileType::RegularFile, "sink".to_string()),
            (SOURCE, FileType::RegularFile, "source".to_string()),
        ];
        entries.extend(
            (1..self.sink_lens.len())
                .map(|i| (Self::sink_ino(i), FileType::RegularFile, Self::sink_name(i))),
        );
        for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(*ino, i as u64 + 1, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn getxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _size: u32,
        reply: ReplyXattr,
    ) {
        reply.error(Errno::ENOSYS);
    }
}

/// `size` bytes of numbered 100-byte lines, so readers can spot reordering.
fn make_source(size: u64) -> Vec<u8> {
    let size = usize::try_from(size).expect("source size fits in memory");
    let mut out = Vec::with_capacity(size + LINE_BYTES);
    let mut n = 0u64;
    while out.len() < size {
        let prefix = format!("{n:012}:");
        out.extend_from_slice(prefix.as_bytes());
        out.resize(out.len() + LINE_BYTES - prefix.len() - 1, b'x');
        out.push(b'\n');
        n += 1;
    }
    out.truncate(size);
    out
}

fn shutdown_signals() -> libc::sigset_t {
    let mut set = std::mem::MaybeUninit::<libc::sigset_t>::zeroed();
    // SAFETY: `set` is writable memory for a sigset_t, initialised by sigemptyset.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        libc::sigaddset(set.as_mut_ptr(), libc::SIGINT);
        libc::sigaddset(set.as_mut_ptr(), libc::SIGTERM);
        set.assume_init()
    }
}

fn main() -> io::Result<()> {
    let mut args = std::env::args_os().skip(1);
    let Some(mountpoint) = args.next().map(PathBuf::from) else {
        eprintln!("usage: fuse_floor MOUNTPOINT [SOURCE_BYTES [SINKS]]");
        std::process::exit(1);
    };
    let source_bytes = args
        .next()
        .and_then(|a| a.to_str().and_then(|s| s.parse().ok()))
        .or_else(|| std::env::var("FLOOR_SOURCE_BYTES").ok()?.parse().ok())
        .unwrap_or(DEFAULT_SOURCE_BYTES);
    let sinks: usize = args
        .next()
        .and_then(|a| a.to_str().and_then(|s| s.parse().ok()))
        .unwrap_or(1)
        .max(1);
    let floor = Floor {
        sink_lens: (0..sinks).map(|_| AtomicU64::new(0)).collect(),
        source: make_source(source_bytes),
        started: SystemTime::now(),
    };
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName("fuse_floor".into()),
        MountOption::DefaultPermissions,
        MountOption::NoAtime,
    ];
    config.n_threads = Some(4);
    config.clone_fd = true;
    // As in kpfs: block the signals before any thread exists, so only the sigwait thread
    // ever sees them and fuser's event loops are never interrupted.
    let signals = shutdown_signals();
    // SAFETY: `signals` is an initialised sigset_t; the old mask is not wanted.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &signals, std::ptr::null_mut()) };
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let signalled = tx.clone();
    std::thread::spawn(move || {
        let mut signal = 0;
        // SAFETY: `signals` is initialised and `signal` is a valid out-pointer.
        unsafe { libc::sigwait(&signals, &mut signal) };
        let _ = signalled.send(());
    });
    let mut session = Session::new(floor, &mountpoint, &config)?;
    let mut unmounter = session.unmount_callable();
    let runner = std::thread::spawn(move || {
        let result = session.run();
        let _ = tx.send(());
        result
    });
    eprintln!("fuse_floor: mounted at {}", mountpoint.display());
    let _ = rx.recv();
    if let Err(e) = unmounter.unmount() {
        eprintln!("fuse_floor: unmount: {e}; detaching");
        let path = std::ffi::CString::new(mountpoint.as_os_str().as_encoded_bytes())?;
        // SAFETY: `path` is a valid NUL-terminated string for the duration of the call.
        unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) };
    }
    runner
        .join()
        .map_err(|_| io::Error::other("session thread panicked"))?
}
