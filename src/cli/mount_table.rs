//! Everything that reads or changes the kernel's mount table: finding the mount at a path
//! in `/proc/self/mountinfo`, making a mount point ready (curing a dead kpfs mount on the
//! way), and `kpfs umount`, which stops a mount's daemon through the pid in its data-dir
//! lock. It serves no requests and opens no engine.

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

use super::error::{io_error, CliError};
use crate::engine::LOCK_FILE;
use crate::fs::fuser_glue;

/// How long `kpfs umount` waits for the daemon to finish.
const UMOUNT_DEADLINE: Duration = Duration::from_secs(30);
const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// Makes `path` a usable, empty directory that is not already a mount point, curing a
/// mount left dead by a killed daemon on the way.
pub(super) fn prepare_mountpoint(path: &Path) -> Result<(), CliError> {
    match std::fs::metadata(path) {
        Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => {
            tracing::info!("{} is a dead kpfs mount; detaching it", path.display());
            fuser_glue::detach(path)
                .map_err(|e| io_error(format!("cannot detach dead mount {}", path.display()), e))?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            std::fs::create_dir_all(path).map_err(|e| {
                io_error(format!("cannot create mount point {}", path.display()), e)
            })?;
        }
        Err(e) => return Err(io_error(format!("mount point {}", path.display()), e)),
        Ok(meta) if !meta.is_dir() => {
            return Err(CliError::new(format!(
                "mount point {} is not a directory",
                path.display()
            )))
        }
        Ok(_) => {}
    }
    let canonical = path
        .canonicalize()
        .map_err(|e| io_error(path.display(), e))?;
    if find_mount(&canonical)?.is_some() {
        return Err(CliError::new(format!(
            "mount point {} is already a mount point",
            path.display()
        )));
    }
    let mut entries = std::fs::read_dir(&canonical).map_err(|e| io_error(path.display(), e))?;
    if entries.next().is_some() {
        return Err(CliError::new(format!(
            "mount point {} is not empty",
            path.display()
        )));
    }
    Ok(())
}

/// One line of /proc/self/mountinfo.
struct MountInfo {
    fs_type: String,
    source: String,
}

/// The topmost mount at exactly `path`, if any.
fn find_mount(path: &Path) -> Result<Option<MountInfo>, CliError> {
    let text = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| io_error("/proc/self/mountinfo", e))?;
    let target = path.as_os_str().as_bytes();
    Ok(text.lines().rev().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        let mount_point = unescape_mountinfo(before.split(' ').nth(4)?);
        if mount_point != target {
            return None;
        }
        let mut after = after.split(' ');
        let fs_type = after.next()?.to_string();
        let source = String::from_utf8_lossy(&unescape_mountinfo(after.next()?)).into_owned();
        Some(MountInfo { fs_type, source })
    }))
}

/// The kernel writes space, tab, newline and backslash in mountinfo as `\ooo`.
fn unescape_mountinfo(field: &str) -> Vec<u8> {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| {
            let digits = std::str::from_utf8(d).ok()?;
            u8::from_str_radix(digits, 8).ok()
        });
        match (bytes[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    out
}

#[allow(
    clippy::disallowed_methods,
    reason = "the daemon is another process: its exit is polled in real time until a deadline"
)]
pub(super) fn umount(mountpoint: &Path) -> Result<(), CliError> {
    let path = std::path::absolute(mountpoint).map_err(|e| io_error(mountpoint.display(), e))?;
    match std::fs::metadata(&path) {
        Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => {
            // The daemon is gone; only the kernel's side of the mount is left.
            return fuser_glue::detach(&path)
                .map_err(|e| io_error(format!("cannot detach {}", path.display()), e));
        }
        Err(e) => return Err(io_error(path.display(), e)),
        Ok(_) => {}
    }
    let canonical = path
        .canonicalize()
        .map_err(|e| io_error(path.display(), e))?;
    let mount = find_mount(&canonical)?
        .ok_or_else(|| CliError::new(format!("{} is not a mount point", path.display())))?;
    if mount.fs_type != "fuse" {
        return Err(CliError::new(format!(
            "{} is a {} mount, not kpfs",
            path.display(),
            mount.fs_type
        )));
    }
    let lock = Path::new(&mount.source).join(LOCK_FILE);
    let pid = std::fs::read_to_string(&lock)
        .map_err(|e| {
            io_error(
                format!("cannot find the kpfs daemon ({})", lock.display()),
                e,
            )
        })?
        .split_whitespace()
        .next()
        .and_then(|pid| pid.parse::<libc::pid_t>().ok())
        .filter(|&pid| pid > 0)
        .ok_or_else(|| CliError::new(format!("{} holds no daemon pid", lock.display())))?;
    // SAFETY: kill has no memory effects; pid is positive so it targets one process.
    if unsafe { libc::kill(pid, libc::SIGTERM) } != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ESRCH) {
            return Err(io_error(format!("cannot signal kpfs daemon {pid}"), e));
        }
    }
    let deadline = Instant::now() + UMOUNT_DEADLINE;
    loop {
        let alive = process_alive(pid);
        let mounted = find_mount(&canonical)?.is_some();
        if !alive && mounted {
            // The daemon died without unmounting (killed, crashed): nothing will serve
            // this mount again.
            return fuser_glue::detach(&canonical)
                .map_err(|e| io_error(format!("cannot detach {}", path.display()), e));
        }
        if !alive && !mounted {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(CliError::new(format!(
                "kpfs daemon {pid} did not stop within {} s; {} may still be mounted",
                UMOUNT_DEADLINE.as_secs(),
                path.display()
            )));
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// Whether `pid` still runs; a zombie (exited, not yet reaped by whoever started it in
/// the foreground) counts as gone.
fn process_alive(pid: libc::pid_t) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The command name is in parentheses and may itself contain spaces or ')'.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, Some('Z' | 'X') | None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_decoded() {
        assert_eq!(unescape_mountinfo(r"/mnt/a\040b"), b"/mnt/a b");
        assert_eq!(unescape_mountinfo(r"/plain"), b"/plain");
        assert_eq!(unescape_mountinfo(r"\134x"), b"\\x");
    }

    #[test]
    fn this_process_is_alive_and_a_bogus_pid_is_not() {
        assert!(process_alive(std::process::id() as libc::pid_t));
        assert!(!process_alive(i32::MAX));
    }
}
