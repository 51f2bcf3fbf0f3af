//! The only module that speaks fuser: decodes each request, calls [`KpfsFs`], and turns
//! the plain result into a reply. It also owns the mount session (mount, run on a thread
//! of our own, unmount), because those are fuser types too.

use std::cell::Cell;
use std::ffi::{CString, OsStr};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    BsdFileFlags, Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags,
    Generation, INodeNo, InitFlags, KernelConfig, LockOwner, MountOption, Notifier, OpenFlags,
    RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry,
    ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, Session, SessionACL, SessionUnmounter,
    TimeOrNow, WriteFlags,
};

use crate::fs::inode::ROOT_INO;
use crate::fs::{Attr, FileKind, FsError, KpfsFs, NamespaceOp, SetAttr};
use crate::store::Store;

/// The kernel caps one request at 1 MiB (`fuse_max_pages_limit`) anyway; asking for more
/// only makes every event loop's buffer larger.
const MAX_WRITE: u32 = 1 << 20;
/// Event loops. Different topics are served in parallel; appends to one topic are
/// serialised by the kernel's inode lock whatever this is.
const THREADS: usize = 4;

struct FuseAdapter<S: Store> {
    fs: Arc<KpfsFs<S>>,
}

thread_local! {
    /// Set while this thread serves an RMDIR. The kernel drops the removed entry itself,
    /// and an invalidation sent from inside the request would wait for the directory
    /// lock that the request holds.
    static IN_RMDIR: Cell<bool> = const { Cell::new(false) };
}

/// A topic the engine deleted: unless this mount's own `rmdir` did (which forgets the
/// topic's inodes itself), its inodes go and the kernel drops its cached entry now, not
/// when the entry's TTL runs out (DeleteTopics through the listener: `stat` would still
/// find the folder). On the deleter's thread, so the deletion is answered only then.
fn forget_deleted_topic<S: Store>(fs: &Weak<KpfsFs<S>>, notifier: &Notifier, topic: &str) {
    if IN_RMDIR.with(Cell::get) {
        return;
    }
    if let Some(fs) = fs.upgrade() {
        fs.inodes.forget_topic(topic);
    }
    if let Err(e) = notifier.inval_entry(INodeNo(ROOT_INO), OsStr::new(topic)) {
        tracing::warn!(topic, error = %e, "cannot drop the kernel's entry of a deleted topic");
    }
}

fn errno(error: &FsError) -> Errno {
    Errno::from_i32(error.errno)
}

/// Logs a failed request at a level that matches how surprising it is, and replies.
macro_rules! fail {
    ($reply:expr, $op:literal, $error:expr) => {{
        let error: FsError = $error;
        if error.errno == libc::ENOENT {
            tracing::trace!(op = $op, errno = error.errno, "{}", error.message);
        } else if error.errno == libc::EIO {
            tracing::warn!(op = $op, errno = error.errno, "{}", error.message);
        } else {
            tracing::debug!(op = $op, errno = error.errno, "{}", error.message);
        }
        $reply.error(errno(&error));
    }};
}

fn system_time(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

fn file_type(kind: FileKind) -> FileType {
    match kind {
        FileKind::Directory => FileType::Directory,
        FileKind::RegularFile => FileType::RegularFile,
    }
}

fn file_attr(attr: &Attr) -> FileAttr {
    let mtime = system_time(attr.mtime_ms);
    FileAttr {
        ino: INodeNo(attr.ino),
        size: attr.size,
        blocks: attr.blocks,
        atime: mtime,
        mtime,
        ctime: mtime,
        crtime: mtime,
        kind: file_type(attr.kind),
        perm: attr.perm,
        nlink: attr.nlink,
        uid: attr.uid,
        gid: attr.gid,
        rdev: 0,
        blksize: attr.blksize,
        flags: 0,
    }
}

fn open_flags(direct_io: bool) -> FopenFlags {
    if direct_io {
        FopenFlags::FOPEN_DIRECT_IO
    } else {
        FopenFlags::empty()
    }
}

impl<S: Store> Filesystem for FuseAdapter<S> {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        // Parallel lookups/readdirs across topics; the writeback cache is deliberately not
        // requested (the engine, not the kernel, owns size and mtime).
        if let Err(missing) = config.add_capabilities(InitFlags::FUSE_PARALLEL_DIROPS) {
            tracing::info!("kernel lacks {missing:?}; directory operations are serialised");
        }
        // `>` as one open with O_TRUNC: without it the kernel truncates by path before the
        // descriptor exists, so a rewrite of a config file would drop every override at
        // once, before its lines were checked.
        if let Err(missing) = config.add_capabilities(InitFlags::FUSE_ATOMIC_O_TRUNC) {
            tracing::info!("kernel lacks {missing:?}; `>` on a config file applies in two steps");
        }
        // Every file is FOPEN_DIRECT_IO, which makes the kernel refuse a shared mmap(2)
        // (ENODEV) unless the server allows it (Linux 6.6+): mapped pages are then read
        // through the server as reads are.
        if config
            .add_capabilities(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP)
            .is_err()
        {
            self.fs
                .note_no_mmap(&format!("FUSE ABI {}", config.kernel_abi()));
        }
        if let Err(nearest) = config.set_max_write(MAX_WRITE) {
            tracing::debug!("max_write {MAX_WRITE} refused, using {nearest}");
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.fs.lookup(parent.0, name) {
            Ok(entry) => reply.entry_with_ttls(
                &entry.attr.ttl,
                &entry.entry_ttl,
                &file_attr(&entry.attr),
                Generation(0),
            ),
            Err(e) => fail!(reply, "lookup", e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.fs.getattr(ino.0) {
            Ok(attr) => reply.attr(&attr.ttl, &file_attr(&attr)),
            Err(e) => fail!(reply, "getattr", e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let change = SetAttr {
            size,
            mode,
            uid,
            gid,
            times: atime.is_some() || mtime.is_some(),
            fh: fh.map(|fh| fh.0),
        };
        match self.fs.setattr(ino.0, change) {
            Ok(attr) => reply.attr(&attr.ttl, &file_attr(&attr)),
            Err(e) => fail!(reply, "setattr", e),
        }
    }

    fn mknod(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        let e = self.fs.refuse_namespace(NamespaceOp::Mknod, parent.0, name);
        fail!(reply, "mknod", e)
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        match self.fs.mkdir(parent.0, name) {
            Ok(entry) => reply.entry_with_ttls(
                &entry.attr.ttl,
                &entry.entry_ttl,
                &file_attr(&entry.attr),
                Generation(0),
            ),
            Err(e) => fail!(reply, "mkdir", e),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.fs.unlink(parent.0, name) {
            Ok(()) => reply.ok(),
            Err(e) => fail!(reply, "unlink", e),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        IN_RMDIR.with(|r| r.set(true));
        let result = self.fs.rmdir(parent.0, name);
        IN_RMDIR.with(|r| r.set(false));
        match result {
            Ok(()) => reply.ok(),
            Err(e) => fail!(reply, "rmdir", e),
        }
    }

    fn symlink(
        &self,
        _req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        _target: &Path,
        reply: ReplyEntry,
    ) {
        let e = self
            .fs
            .refuse_namespace(NamespaceOp::Symlink, parent.0, link_name);
        fail!(reply, "symlink", e)
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        match self
            .fs
            .rename(parent.0, name, newparent.0, newname, flags.is_empty())
        {
            Ok(()) => reply.ok(),
            Err(e) => fail!(reply, "rename", e),
        }
    }

    fn link(
        &self,
        _req: &Request,
        _ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let e = self
            .fs
            .refuse_namespace(NamespaceOp::Link, newparent.0, newname);
        fail!(reply, "link", e)
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.fs.open(ino.0, flags.0) {
            Ok(opened) => reply.opened(FileHandle(opened.fh), open_flags(opened.direct_io)),
            Err(e) => fail!(reply, "open", e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.fs.read(fh.0, offset, size) {
            Ok(data) => reply.data(&data),
            Err(e) => fail!(reply, "read", e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        if write_flags.contains(WriteFlags::FUSE_WRITE_CACHE) {
            // Dirty pages of a shared writable mapping, written back at their offsets:
            // appending them would store whole pages as records.
            let e = self.fs.refuse_mapped_write(fh.0);
            fail!(reply, "write", e);
            return;
        }
        match self
            .fs
            .write_from(fh.0, data, lock_owner.map(|owner| owner.0))
        {
            Ok(written) => reply.written(written),
            Err(e) => fail!(reply, "write", e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // Every close(2) sends one, also of a duplicate that leaves the file open (bash's
        // dup2 before the write it is about to make, a child's exit): KpfsFs decides by
        // who closes, both for a `log` line left open and for a config change.
        match self.fs.flush(fh.0, lock_owner.0) {
            Ok(()) => reply.ok(),
            Err(e) => fail!(reply, "flush", e),
        }
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.fs.release(fh.0);
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        match self.fs.fsync(fh.0) {
            Ok(()) => reply.ok(),
            Err(e) => fail!(reply, "fsync", e),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.fs.opendir(ino.0) {
            Ok(opened) => reply.opened(FileHandle(opened.fh), open_flags(opened.direct_io)),
            Err(e) => fail!(reply, "opendir", e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        match self.fs.readdir(fh.0, offset) {
            Ok(entries) => {
                for (i, entry) in entries.iter().enumerate() {
                    // The offset the kernel hands back to continue after this entry.
                    let next = offset + i as u64 + 1;
                    if reply.add(INodeNo(entry.ino), next, file_type(entry.kind), &entry.name) {
                        break;
                    }
                }
                reply.ok();
            }
            Err(e) => fail!(reply, "readdir", e),
        }
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.fs.releasedir(fh.0);
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.fs.statfs() {
            Ok(s) => reply.statfs(
                s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, s.namelen, s.frsize,
            ),
            Err(e) => fail!(reply, "statfs", e),
        }
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        match self.fs.setxattr(ino.0, name, value) {
            Ok(()) => reply.ok(),
            Err(e) => fail!(reply, "setxattr", e),
        }
    }

    fn getxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _size: u32,
        reply: ReplyXattr,
    ) {
        // ENOSYS is remembered by the kernel: it stops the security.capability probe
        // that would otherwise precede every first write.
        reply.error(Errno::ENOSYS);
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, _size: u32, reply: ReplyXattr) {
        reply.error(Errno::ENOSYS);
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        let e = self.fs.refuse_xattr_change(ino.0);
        fail!(reply, "removexattr", e)
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        match self.fs.create(parent.0, name, flags & libc::O_EXCL != 0) {
            Ok((entry, opened)) => reply.created(
                &entry.attr.ttl,
                &file_attr(&entry.attr),
                Generation(0),
                FileHandle(opened.fh),
                open_flags(opened.direct_io),
            ),
            Err(e) => fail!(reply, "create", e),
        }
    }
}

/// How to mount.
#[derive(Clone, Debug)]
pub(crate) struct MountConfig {
    /// The mount source shown in /proc/self/mountinfo: the absolute data directory, so
    /// `kpfs umount` can find the daemon's lock file from the mount point alone.
    pub(crate) fs_name: String,
    pub(crate) allow_other: bool,
}

/// A live mount whose request loop runs on its own thread.
pub(crate) struct Mounted {
    mountpoint: PathBuf,
    unmounter: SessionUnmounter,
    thread: JoinHandle<io::Result<()>>,
}

/// Mounts `fs` at `mountpoint` and completes the INIT handshake before returning, so a
/// caller that gets `Ok` has a working mount. `on_end` runs on the session thread when
/// the request loop ends, whether by our unmount or an external `umount`.
pub(crate) fn mount<S: Store>(
    fs: Arc<KpfsFs<S>>,
    mountpoint: &Path,
    config: &MountConfig,
    on_end: impl FnOnce(&io::Result<()>) + Send + 'static,
) -> io::Result<Mounted> {
    let mut session_config = Config::default();
    session_config.mount_options = vec![
        MountOption::FSName(config.fs_name.clone()),
        MountOption::DefaultPermissions,
        MountOption::NoAtime,
    ];
    if config.allow_other {
        // fuser 0.18 has no AllowOther option: the ACL adds `allow_other` to the kernel
        // mount options itself.
        session_config.acl = SessionACL::All;
    }
    session_config.n_threads = Some(THREADS);
    session_config.clone_fd = true;
    let store = fs.store.clone();
    let weak = Arc::downgrade(&fs);
    let mut session = Session::new(FuseAdapter { fs }, mountpoint, &session_config)?;
    let unmounter = session.unmount_callable();
    let notifier = session.notifier();
    store.on_topic_deletion(Some(Box::new(move |topic| {
        forget_deleted_topic(&weak, &notifier, topic)
    })));
    let spawned = std::thread::Builder::new()
        .name("kpfs-session".into())
        .spawn({
            let store = store.clone();
            move || {
                let result = session.run();
                // No kernel listens any more.
                store.on_topic_deletion(None);
                on_end(&result);
                result
            }
        });
    let thread = spawned.inspect_err(|_| store.on_topic_deletion(None))?;
    Ok(Mounted {
        mountpoint: mountpoint.to_path_buf(),
        unmounter,
        thread,
    })
}

impl Mounted {
    /// Unmounts; if something still holds a file open (EBUSY), detaches the mount so
    /// new opens fail at once while existing descriptors drain.
    pub(crate) fn unmount(&mut self) -> io::Result<()> {
        match self.unmounter.unmount() {
            Ok(()) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                tracing::info!("{} is busy; detaching it", self.mountpoint.display());
                detach(&self.mountpoint)
            }
            Err(e) => Err(e),
        }
    }

    /// Waits for the request loop to end.
    pub(crate) fn join(self) -> io::Result<()> {
        self.thread
            .join()
            .map_err(|_| io::Error::other("the FUSE session thread panicked"))?
    }
}

/// `umount2(MNT_DETACH)`: also the cure for a mount left dead by a killed daemon. A
/// user other than root may not call it (EPERM) and detaches through the setuid
/// `fusermount3 -u -z` instead, as fuser itself unmounts for such a user.
pub(crate) fn detach(path: &Path) -> io::Result<()> {
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))?;
    // SAFETY: `c_path` is a valid NUL-terminated string that outlives the call.
    let rc = unsafe { libc::umount2(c_path.as_ptr(), libc::MNT_DETACH) };
    if rc == 0 {
        return Ok(());
    }
    let error = io::Error::last_os_error();
    if error.raw_os_error() != Some(libc::EPERM) {
        return Err(error);
    }
    let Some(helper) = find_fusermount() else {
        return Err(io::Error::new(
            error.kind(),
            format!("{error}; a non-root user needs fusermount3 (the fuse3 package) for it"),
        ));
    };
    let output = std::process::Command::new(&helper)
        .args(["-u", "-z", "--"])
        .arg(path)
        .output()?;
    if output.status.success() {
        Ok(())
    } else {
        Err(io::Error::new(
            error.kind(),
            format!(
                "{error}; {} -u -z: {}",
                helper.display(),
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        ))
    }
}

/// The setuid mount helper fuser runs for a user other than root, if it is there: the
/// one `$FUSERMOUNT_PATH` names, else `fusermount3` (or the older `fusermount`) on
/// `$PATH`, in `/sbin` or in `/bin`, where fuser looks.
pub(crate) fn find_fusermount() -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |path: &Path| {
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if let Some(path) = std::env::var_os("FUSERMOUNT_PATH") {
        return Some(PathBuf::from(path)).filter(|p| executable(p));
    }
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.extend(["/sbin", "/bin"].map(PathBuf::from));
    ["fusermount3", "fusermount"].iter().find_map(|name| {
        dirs.iter()
            .map(|dir| dir.join(name))
            .find(|candidate| executable(candidate))
    })
}
