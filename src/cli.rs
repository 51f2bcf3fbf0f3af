//! The command line and the daemon's lifecycle: parse (clap), validate paths, start the
//! engine, mount, wait for a signal or an external unmount, shut down cleanly. It holds
//! no filesystem semantics (those are in `fs`) and no storage logic (`engine`).

use std::ffi::OsString;
use std::fmt;
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use crossbeam_channel::{Receiver, Sender};

use crate::engine::inspect::{check_data_dir, dump_file, DumpOptions};
use crate::engine::limits;
use crate::engine::{BrokerConfig, Engine, EngineOptions, SystemClock, DAEMON_LOG_FILE, LOCK_FILE};
use crate::fs::fuser_glue::{self, MountConfig, Mounted};
use crate::fs::KpfsFs;

/// How long `kpfs umount` waits for the daemon to finish.
const UMOUNT_DEADLINE: Duration = Duration::from_secs(30);
/// How long the daemon waits, after unmounting, for in-flight requests and the closes
/// of open descriptors, before it closes the engine anyway.
const DRAIN_DEADLINE: Duration = Duration::from_secs(5);
const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// kpfs: a Kafka-faithful log store you use with echo, cat and tail -f.
#[derive(Debug, Parser)]
#[command(name = "kpfs", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: CliCommand,
}

#[derive(Debug, Subcommand)]
pub enum CliCommand {
    /// Mount a data directory: each topic is a folder, append with `>> TOPIC/log`.
    Mount(MountArgs),
    /// Unmount a kpfs mount point and wait for its daemon to shut down cleanly.
    Umount(UmountArgs),
    /// Print segment, index and time-index files like Kafka's kafka-dump-log.sh.
    DumpLog(DumpLogArgs),
    /// Verify a data directory offline (CRCs, offsets, indexes, names, checkpoints).
    /// Never modifies anything; exits non-zero when it finds a problem.
    Check(CheckArgs),
}

#[derive(Debug, Args)]
pub struct DumpLogArgs {
    /// `.log`, `.index` or `.timeindex` files (also with `.deleted`, `.cleaned`, `.swap`).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Print each record's key and payload.
    #[arg(long)]
    pub print_data_log: bool,
    /// Print each record (without key and payload unless --print-data-log).
    #[arg(long)]
    pub deep_iteration: bool,
    /// Check index entries against the log and print them.
    #[arg(long)]
    pub index_sanity_check: bool,
    /// Check index entries against the log and print only problems.
    #[arg(long)]
    pub verify_index_only: bool,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    pub data_dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct MountArgs {
    /// Where the filesystem appears (created if missing; must be an empty directory).
    pub mountpoint: PathBuf,
    /// Where topics are stored [default: $XDG_DATA_HOME/kpfs or ~/.local/share/kpfs].
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Broker configuration in Kafka's server.properties format.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// One broker config, applied over --config; repeatable.
    #[arg(long = "override", value_name = "KEY=VALUE", value_parser = parse_override)]
    pub overrides: Vec<(String, String)>,
    /// Stay attached to the terminal and log to stderr too.
    #[arg(long)]
    pub foreground: bool,
    /// Let users other than the mounting one use the mount (permission bits still apply).
    #[arg(long)]
    pub allow_other: bool,
    /// Set by the daemonizing parent: where to report "ok" or "error: ..." once.
    #[arg(long, hide = true, value_name = "FD")]
    pub ready_fd: Option<i32>,
}

#[derive(Debug, Args)]
pub struct UmountArgs {
    pub mountpoint: PathBuf,
}

fn parse_override(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_string(), value.trim().to_string()))
        }
        _ => Err(format!("expected KEY=VALUE, got '{text}'")),
    }
}

/// A runtime failure, printed once by `main` as `kpfs: <message>`.
#[derive(Debug)]
pub struct CliError {
    message: String,
}

impl CliError {
    fn new(message: impl Into<String>) -> CliError {
        CliError {
            message: message.into(),
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CliError {}

/// Every segment keeps its `.log` open (as Kafka does), so a data directory with many
/// segments needs more descriptors than the usual soft limit: raise it to the hard one.
fn raise_open_file_limit() {
    match limits::raise_open_file_limit() {
        Ok(open_files) => tracing::info!(open_files, "open-file limit"),
        Err(e) => tracing::warn!(error = %e, "could not raise the open-file limit"),
    }
}

fn io_error(context: impl fmt::Display, e: io::Error) -> CliError {
    CliError::new(format!("{context}: {e}"))
}

pub fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        CliCommand::Mount(args) => mount(args),
        CliCommand::Umount(args) => umount(&args.mountpoint),
        CliCommand::DumpLog(args) => dump_log(&args),
        CliCommand::Check(args) => check(&args.data_dir),
    }
}

fn dump_log(args: &DumpLogArgs) -> Result<(), CliError> {
    let opts = DumpOptions {
        print_data_log: args.print_data_log,
        deep_iteration: args.deep_iteration,
        index_sanity_check: args.index_sanity_check,
        verify_index_only: args.verify_index_only,
    };
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let mut failures = Vec::new();
    for file in &args.files {
        if let Err(e) = dump_file(file, &opts, &mut out) {
            failures.push(e.to_string());
        }
    }
    out.flush().map_err(|e| io_error("stdout", e))?;
    if failures.is_empty() {
        Ok(())
    } else {
        Err(CliError::new(failures.join("; ")))
    }
}

fn check(data_dir: &Path) -> Result<(), CliError> {
    let report = check_data_dir(data_dir);
    for note in &report.notes {
        println!("note: {note}");
    }
    for problem in &report.problems {
        println!("problem: {problem}");
    }
    println!(
        "checked {} topics, {} segments, {} records: {} problems",
        report.topics,
        report.segments,
        report.records,
        report.problems.len()
    );
    if report.is_healthy() {
        Ok(())
    } else {
        Err(CliError::new(format!(
            "{} is not healthy",
            data_dir.display()
        )))
    }
}

/// Mount arguments with every path made absolute, so the daemon (which changes its
/// working directory to `/`) and `/proc/self/mountinfo` see the same paths.
struct MountPlan {
    mountpoint: PathBuf,
    data_dir: PathBuf,
    config: Option<PathBuf>,
    overrides: Vec<(String, String)>,
    allow_other: bool,
}

fn mount(args: MountArgs) -> Result<(), CliError> {
    let data_dir = match args.data_dir {
        Some(dir) => dir,
        None => default_data_dir()?,
    };
    let absolute = |p: &Path| std::path::absolute(p).map_err(|e| io_error(p.display(), e));
    let plan = MountPlan {
        mountpoint: absolute(&args.mountpoint)?,
        data_dir: absolute(&data_dir)?,
        config: args.config.as_deref().map(absolute).transpose()?,
        overrides: args.overrides,
        allow_other: args.allow_other,
    };
    if !args.foreground {
        return spawn_daemon(&plan);
    }
    let mut ready = args.ready_fd.map(|fd| {
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
            tracing::error!("{e}");
            Err(e)
        }
    }
}

fn default_data_dir() -> Result<PathBuf, CliError> {
    let non_empty = |v: Option<OsString>| v.filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(xdg) = non_empty(std::env::var_os("XDG_DATA_HOME")) {
        return Ok(xdg.join("kpfs"));
    }
    match non_empty(std::env::var_os("HOME")) {
        Some(home) => Ok(home.join(".local/share/kpfs")),
        None => Err(CliError::new(
            "no data directory: pass --data-dir or set XDG_DATA_HOME or HOME",
        )),
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
        .arg(&plan.data_dir);
    if let Some(config) = &plan.config {
        command.arg("--config").arg(config);
    }
    for (key, value) in &plan.overrides {
        command.arg("--override").arg(format!("{key}={value}"));
    }
    if plan.allow_other {
        command.arg("--allow-other");
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
        plan.data_dir.join(DAEMON_LOG_FILE).display()
    )))
}

enum Event {
    Signal(i32),
    SessionEnded,
}

/// A mounted, serving daemon.
struct Daemon {
    engine: Arc<Engine>,
    fs: Arc<KpfsFs>,
    mounted: Mounted,
    events: Receiver<Event>,
}

const SHUTDOWN_SIGNALS: [i32; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

fn shutdown_sigset() -> libc::sigset_t {
    let mut set = std::mem::MaybeUninit::<libc::sigset_t>::zeroed();
    // SAFETY: `set` is valid writable memory for a sigset_t; sigemptyset initialises it
    // and sigaddset only gets valid signal numbers.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        for signal in SHUTDOWN_SIGNALS {
            libc::sigaddset(set.as_mut_ptr(), signal);
        }
        set.assume_init()
    }
}

/// Blocks the shutdown signals in the calling thread, and so in every thread it spawns
/// afterwards; they are then only ever delivered to the sigwait thread.
fn block_shutdown_signals() -> Result<(), CliError> {
    let set = shutdown_sigset();
    // SAFETY: `set` is an initialised sigset_t; the old mask is not wanted.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io_error(
            "pthread_sigmask",
            io::Error::from_raw_os_error(rc),
        ));
    }
    Ok(())
}

fn spawn_signal_thread(events: Sender<Event>) -> Result<(), CliError> {
    std::thread::Builder::new()
        .name("kpfs-signals".into())
        .spawn(move || {
            let set = shutdown_sigset();
            loop {
                let mut signal = 0;
                // SAFETY: `set` is initialised and `signal` is a valid out-pointer.
                let rc = unsafe { libc::sigwait(&set, &mut signal) };
                if rc == 0 && events.send(Event::Signal(signal)).is_err() {
                    return;
                }
            }
        })
        .map(|_| ())
        .map_err(|e| io_error("cannot start the signal thread", e))
}

fn start(plan: &MountPlan, to_stderr: bool) -> Result<Daemon, CliError> {
    block_shutdown_signals()?;
    if !Path::new("/dev/fuse").exists() {
        return Err(CliError::new(
            "no /dev/fuse: load the fuse kernel module (modprobe fuse) or, in a container, \
             pass --device /dev/fuse",
        ));
    }
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&plan.data_dir)
        .map_err(|e| io_error(format!("data directory {}", plan.data_dir.display()), e))?;
    let data_dir = plan
        .data_dir
        .canonicalize()
        .map_err(|e| io_error(plan.data_dir.display(), e))?;
    init_logging(&data_dir, to_stderr)?;
    prepare_mountpoint(&plan.mountpoint)?;
    let broker = load_broker_config(plan)?;
    raise_open_file_limit();
    let engine = Engine::open(
        &data_dir,
        broker,
        Arc::new(SystemClock),
        EngineOptions {
            background_threads: true,
        },
    )
    .map_err(|e| CliError::new(e.to_string()))?;
    let engine = Arc::new(engine);
    // The daemon must not keep whatever directory it was started from busy.
    std::env::set_current_dir("/").map_err(|e| io_error("chdir /", e))?;

    let (sender, events) = crossbeam_channel::unbounded();
    let ended = sender.clone();
    let config = MountConfig {
        fs_name: data_dir.to_string_lossy().into_owned(),
        allow_other: plan.allow_other,
    };
    let fs = Arc::new(KpfsFs::new(engine.clone(), &data_dir));
    let mounted = match fuser_glue::mount(fs.clone(), &plan.mountpoint, &config, move |result| {
        if let Err(e) = result {
            tracing::error!("FUSE session ended with an error: {e}");
        }
        let _ = ended.send(Event::SessionEnded);
    }) {
        Ok(mounted) => mounted,
        Err(e) => {
            if let Err(shutdown) = engine.shutdown() {
                tracing::error!("engine shutdown after a failed mount: {shutdown}");
            }
            // One line: the daemon reports it to `kpfs mount` through a line-based pipe,
            // and fusermount3's own message ends in a newline.
            let detail = e.to_string().trim_end().replace('\n', "; ");
            let mut reason = format!("cannot mount {}: {detail}", plan.mountpoint.display());
            if let Some(hint) = non_root_mount_hint(&e, plan.allow_other) {
                reason.push_str(": ");
                reason.push_str(&hint);
            }
            return Err(CliError::new(reason));
        }
    };
    spawn_signal_thread(sender)?;
    tracing::info!(
        "mounted {} (data directory {}, pid {})",
        plan.mountpoint.display(),
        data_dir.display(),
        std::process::id()
    );
    Ok(Daemon {
        engine,
        fs,
        mounted,
        events,
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
        self.fs.finish_open_writes();
        self.engine
            .shutdown()
            .map_err(|e| CliError::new(format!("engine shutdown failed: {e}")))?;
        tracing::info!("clean shutdown");
        Ok(())
    }

    fn wait_for_session_end(&self) -> bool {
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

fn load_broker_config(plan: &MountPlan) -> Result<BrokerConfig, CliError> {
    let properties = plan
        .config
        .as_ref()
        .map(|path| {
            std::fs::read_to_string(path)
                .map_err(|e| io_error(format!("--config {}", path.display()), e))
        })
        .transpose()?;
    BrokerConfig::load(properties.as_deref(), &plan.overrides)
        .map_err(|e| CliError::new(format!("invalid broker configuration: {e}")))
}

fn init_logging(data_dir: &Path, to_stderr: bool) -> Result<(), CliError> {
    use tracing_subscriber::fmt::writer::MakeWriterExt;
    use tracing_subscriber::EnvFilter;

    let path = data_dir.join(DAEMON_LOG_FILE);
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| io_error(path.display(), e))?;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_thread_names(true);
    let file = std::sync::Mutex::new(file);
    // try_init: a second subscriber (tests calling this twice) is not an error worth dying for.
    let _ = if to_stderr {
        builder.with_writer(file.and(io::stderr)).try_init()
    } else {
        builder.with_writer(file).try_init()
    };
    Ok(())
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

/// Makes `path` a usable, empty directory that is not already a mount point, curing a
/// mount left dead by a killed daemon on the way.
fn prepare_mountpoint(path: &Path) -> Result<(), CliError> {
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

fn umount(mountpoint: &Path) -> Result<(), CliError> {
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
    fn overrides_need_a_key_and_an_equals_sign() {
        assert_eq!(
            parse_override("retention.ms=1000"),
            Ok(("retention.ms".into(), "1000".into()))
        );
        assert_eq!(parse_override("a=b=c"), Ok(("a".into(), "b=c".into())));
        assert!(parse_override("retention.ms").is_err());
        assert!(parse_override("=5").is_err());
    }

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
