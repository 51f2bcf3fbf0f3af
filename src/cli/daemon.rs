//! `kpfs mount`: the daemon's life. The parent re-executes kpfs detached and waits for
//! its one-line report on the ready pipe; the daemon creates the data directory, logs,
//! opens the engine, mounts, then serves until a shutdown signal (taken by a `sigwait`
//! thread) or an external unmount, and shuts down cleanly. Filesystem semantics stay in
//! `fs`, storage in `engine`, mount-table reading in `mount_table`.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use super::args::{ClusterPlan, MountArgs, MountPlan};
use super::broker::{load_broker_config, open_engine, prepare_data_dir, start_listener};
use super::error::{io_error, CliError};
use super::logging::{init_logging, FATAL_TARGET};
use super::mount_table::prepare_mountpoint;
use super::signals::{block_shutdown_signals, spawn_signal_thread};
use crate::cluster::{ClientSettings, Cluster};
use crate::engine::clock::SystemClock;
use crate::engine::config::parse_properties;
use crate::engine::{take_lock, Engine, DAEMON_LOG_FILE};
use crate::fs::fuser_glue::{self, MountConfig, Mounted};
use crate::fs::KpfsFs;
use crate::kafka::ListenerHandle;
use crate::store::Store;

/// How long the daemon waits, after unmounting, for in-flight requests and the closes
/// of open descriptors, before it closes the engine anyway.
const DRAIN_DEADLINE: Duration = Duration::from_secs(5);

/// Without `--foreground`, starts the daemon and returns once it reports; with it (the
/// daemon itself, or a user keeping kpfs attached), mounts and serves until shutdown.
pub(super) fn mount(args: MountArgs) -> Result<(), CliError> {
    let (foreground, ready_fd) = (args.foreground, args.ready_fd);
    let plan = MountPlan::new(args)?;
    if !foreground {
        return spawn_daemon(&plan);
    }
    let mut ready = ready_fd.map(|fd| {
        // SAFETY: the fd was created by our parent for us alone (spawn_daemon) and is
        // used nowhere else in this process.
        unsafe { File::from_raw_fd(fd) }
    });
    let to_stderr = ready.is_none();
    let mut report = |line: String| {
        if let Some(mut file) = ready.take() {
            // The parent may have died; the daemon carries on regardless.
            let _ = writeln!(file, "{line}");
        }
    };
    match start(&plan, to_stderr) {
        Ok(daemon) => {
            report("ok".into());
            daemon.serve()
        }
        Err(e) => {
            report(format!("error: {e}"));
            tracing::error!(target: FATAL_TARGET, "{e}");
            Err(e)
        }
    }
}

/// Re-executes this binary as a detached daemon and waits until it reports that the
/// mount is live (or why it is not), so `kpfs mount` returning 0 means "ready to use".
fn spawn_daemon(plan: &MountPlan) -> Result<(), CliError> {
    let exe = std::env::current_exe().map_err(|e| io_error("cannot find the kpfs binary", e))?;
    let (reader, writer) = io::pipe().map_err(|e| io_error("pipe", e))?;
    let ready_fd = writer.as_raw_fd();
    let mut command = Command::new(exe);
    command
        .arg("mount")
        .arg(&plan.mountpoint)
        .arg("--foreground")
        .arg("--ready-fd")
        .arg(ready_fd.to_string())
        .arg("--data-dir")
        .arg(&plan.broker.data_dir);
    if let Some(config) = &plan.broker.config {
        command.arg("--config").arg(config);
    }
    for (key, value) in &plan.broker.overrides {
        command.arg("--override").arg(format!("{key}={value}"));
    }
    if let Some(level) = plan.broker.transaction_version {
        command
            .arg("--feature")
            .arg(format!("transaction.version={level}"));
    }
    if plan.allow_other {
        command.arg("--allow-other");
    }
    if let Some(cluster) = &plan.cluster {
        command.arg("--bootstrap-server").arg(&cluster.bootstrap);
        if let Some(config) = &cluster.command_config {
            command.arg("--command-config").arg(config);
        }
    }
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: the closure runs between fork and exec and calls only async-signal-safe
    // functions (setsid, fcntl) on an fd that is open in the child.
    unsafe {
        command.pre_exec(move || {
            // A session of its own: the terminal's hangup or Ctrl-C must not reach it.
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            // The pipe is close-on-exec like every std fd; the daemon must inherit it.
            let flags = libc::fcntl(ready_fd, libc::F_GETFD);
            if flags < 0 || libc::fcntl(ready_fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command
        .spawn()
        .map_err(|e| io_error("cannot start the kpfs daemon", e))?;
    // Only the daemon may hold the write end, so its exit shows up here as EOF.
    drop(writer);
    drop(command);
    let mut line = String::new();
    BufReader::new(reader)
        .read_line(&mut line)
        .map_err(|e| io_error("waiting for the daemon", e))?;
    let line = line.trim_end();
    if line == "ok" {
        return Ok(());
    }
    if let Some(reason) = line.strip_prefix("error: ") {
        let _ = child.wait();
        return Err(CliError::new(reason));
    }
    let status = child
        .wait()
        .map_or_else(|e| e.to_string(), |s| s.to_string());
    Err(CliError::new(format!(
        "the daemon exited before the mount was ready ({status}); see {}",
        plan.broker.data_dir.join(DAEMON_LOG_FILE).display()
    )))
}

enum Event {
    Signal(i32),
    SessionEnded,
}

/// A mounted, serving daemon.
struct Daemon {
    backend: Backend,
    mounted: Mounted,
    events: Receiver<Event>,
}

/// What the mount serves.
enum Backend {
    Local {
        engine: Arc<Engine>,
        fs: Arc<KpfsFs<Engine>>,
        /// The Kafka listener, when `listeners` is set.
        listener: Option<ListenerHandle>,
    },
    Cluster {
        fs: Arc<KpfsFs<Cluster>>,
        /// The data directory's lock, held while mounted.
        _lock: File,
    },
}

fn start(plan: &MountPlan, to_stderr: bool) -> Result<Daemon, CliError> {
    block_shutdown_signals()?;
    if !Path::new("/dev/fuse").exists() {
        return Err(CliError::new(
            "no /dev/fuse: load the fuse kernel module (modprobe fuse) or, in a container, \
             pass --device /dev/fuse (or use `kpfs serve`, which needs no mount)",
        ));
    }
    let data_dir = prepare_data_dir(&plan.broker.data_dir)?;
    init_logging(&data_dir, to_stderr)?;
    prepare_mountpoint(&plan.mountpoint)?;
    let (sender, events) = crossbeam_channel::unbounded();
    let config = MountConfig {
        fs_name: data_dir.to_string_lossy().into_owned(),
        allow_other: plan.allow_other,
    };
    let (backend, mounted) = match &plan.cluster {
        Some(cluster) => {
            let lock = take_lock(&data_dir).map_err(|e| CliError::new(e.to_string()))?;
            let cluster = connect_cluster(cluster, &data_dir)?;
            std::env::set_current_dir("/").map_err(|e| io_error("chdir /", e))?;
            let fs = Arc::new(KpfsFs::new(Arc::new(cluster), &data_dir));
            let mounted = mount_fs(fs.clone(), plan, &config, &sender)?;
            (Backend::Cluster { fs, _lock: lock }, mounted)
        }
        None => {
            let broker = load_broker_config(&plan.broker)?;
            let engine = open_engine(&data_dir, broker, plan.broker.transaction_version)?;
            // Before the mount, so a listener that cannot start leaves nothing mounted.
            let listener = match start_listener(&engine) {
                Ok(listener) => listener,
                Err(e) => {
                    if let Err(shutdown) = engine.shutdown() {
                        tracing::error!(
                            "engine shutdown after a failed listener start: {shutdown}"
                        );
                    }
                    return Err(e);
                }
            };
            // The daemon must not keep whatever directory it was started from busy.
            std::env::set_current_dir("/").map_err(|e| io_error("chdir /", e))?;
            let fs = Arc::new(KpfsFs::new(engine.clone(), &data_dir));
            match mount_fs(fs.clone(), plan, &config, &sender) {
                Ok(mounted) => (
                    Backend::Local {
                        engine,
                        fs,
                        listener,
                    },
                    mounted,
                ),
                Err(e) => {
                    if let Some(listener) = listener {
                        listener.shutdown();
                    }
                    if let Err(shutdown) = engine.shutdown() {
                        tracing::error!("engine shutdown after a failed mount: {shutdown}");
                    }
                    return Err(e);
                }
            }
        }
    };
    spawn_signal_thread(sender, Event::Signal)?;
    tracing::info!(
        "mounted {} (data directory {}, pid {})",
        plan.mountpoint.display(),
        data_dir.display(),
        std::process::id()
    );
    Ok(Daemon {
        backend,
        mounted,
        events,
    })
}

/// The cluster of `--bootstrap-server`, with the client properties of `--command-config`.
fn connect_cluster(plan: &ClusterPlan, data_dir: &Path) -> Result<Cluster, CliError> {
    let properties = match &plan.command_config {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| io_error(path.display(), e))?;
            parse_properties(&text)
                .map_err(|e| CliError::new(format!("{}: {e}", path.display())))?
                .into_iter()
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .collect()
        }
        None => Vec::new(),
    };
    Cluster::connect(
        ClientSettings::new(&plan.bootstrap, properties),
        Arc::new(SystemClock),
        data_dir,
    )
    .map_err(|e| {
        CliError::new(format!(
            "cannot mount the cluster at {}: {e}",
            plan.bootstrap
        ))
    })
}

/// Mounts `fs`; the session's end is sent to the daemon as an event.
fn mount_fs<S: Store>(
    fs: Arc<KpfsFs<S>>,
    plan: &MountPlan,
    config: &MountConfig,
    sender: &crossbeam_channel::Sender<Event>,
) -> Result<Mounted, CliError> {
    let ended = sender.clone();
    fuser_glue::mount(fs, &plan.mountpoint, config, move |result| {
        if let Err(e) = result {
            tracing::error!("FUSE session ended with an error: {e}");
        }
        let _ = ended.send(Event::SessionEnded);
    })
    .map_err(|e| {
        // One line: the daemon reports it to `kpfs mount` through a line-based pipe,
        // and fusermount3's own message ends in a newline.
        let detail = e.to_string().trim_end().replace('\n', "; ");
        let mut reason = format!("cannot mount {}: {detail}", plan.mountpoint.display());
        if let Some(hint) = non_root_mount_hint(&e, plan.allow_other) {
            reason.push_str(": ");
            reason.push_str(&hint);
        }
        CliError::new(reason)
    })
}

impl Daemon {
    /// Serves until a shutdown signal or an external unmount, then closes the engine
    /// cleanly. The unmount comes first so the closes of writers still reach a live
    /// engine; the unterminated lines of writers that keep `log` open past the drain
    /// become records before the engine closes.
    fn serve(mut self) -> Result<(), CliError> {
        let ended = match self.events.recv() {
            Ok(Event::Signal(signal)) => {
                tracing::info!("signal {signal}: unmounting");
                if let Err(e) = self.mounted.unmount() {
                    tracing::error!("unmount failed: {e}");
                }
                self.wait_for_session_end()
            }
            Ok(Event::SessionEnded) | Err(_) => {
                tracing::info!("unmounted externally");
                true
            }
        };
        if ended {
            if let Err(e) = self.mounted.join() {
                tracing::warn!("FUSE session: {e}");
            }
        } else {
            tracing::warn!(
                "descriptors still open after {DRAIN_DEADLINE:?}; closing the engine anyway"
            );
        }
        match self.backend {
            Backend::Local {
                engine,
                fs,
                listener,
            } => {
                fs.finish_open_writes();
                if let Some(listener) = listener {
                    listener.shutdown();
                }
                engine
                    .shutdown()
                    .map_err(|e| CliError::new(format!("engine shutdown failed: {e}")))?;
            }
            Backend::Cluster { fs, .. } => fs.finish_open_writes(),
        }
        tracing::info!("clean shutdown");
        Ok(())
    }

    fn wait_for_session_end(&self) -> bool {
        #[allow(clippy::disallowed_methods)] // a deadline for the kernel, in real time
        let deadline = Instant::now() + DRAIN_DEADLINE;
        loop {
            match self.events.recv_deadline(deadline) {
                Ok(Event::SessionEnded) => return true,
                Ok(Event::Signal(signal)) => tracing::info!("signal {signal}: already stopping"),
                Err(_) => return false,
            }
        }
    }
}

/// What a user other than root lacks when a mount fails, and how to get it. Root mounts
/// with mount(2) itself; any other user needs read and write access to /dev/fuse (it is
/// opened first) and the setuid helper `fusermount3` (the `fuse3` package), which
/// mounts for it and allows `allow_other` only with `user_allow_other` in
/// /etc/fuse.conf.
fn non_root_mount_hint(error: &io::Error, allow_other: bool) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid cannot fail and has no memory effects.
    if unsafe { libc::geteuid() } == 0 {
        return None;
    }
    if let Err(e) = OpenOptions::new().read(true).write(true).open("/dev/fuse") {
        return Some(format!(
            "this user cannot open /dev/fuse ({e}): a mount by a user other than root \
             needs read and write access to it (most systems make it mode 0666; as root: \
             chmod 0666 /dev/fuse) and fusermount3 from the fuse3 package"
        ));
    }
    let Some(helper) = fuser_glue::find_fusermount() else {
        return Some(
            "a mount by a user other than root needs the setuid helper fusermount3, which \
             is not installed or not on PATH: install the fuse3 package (Debian, Ubuntu: \
             apt-get install fuse3) or mount as root"
                .to_string(),
        );
    };
    let setuid_root =
        std::fs::metadata(&helper).is_ok_and(|m| m.uid() == 0 && m.mode() & libc::S_ISUID != 0);
    if !setuid_root {
        return Some(format!(
            "{} must be setuid root to mount for a user other than root (as root: \
             chown root {0} && chmod u+s {0})",
            helper.display()
        ));
    }
    if allow_other && error.to_string().contains("user_allow_other") {
        return Some(
            "--allow-other by a user other than root needs the line user_allow_other in \
             /etc/fuse.conf (added by root), or mount without --allow-other"
                .to_string(),
        );
    }
    None
}
