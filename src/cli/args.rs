//! The command line as clap sees it (the `Cli` structs), and the mount arguments made
//! absolute (`MountPlan`) that the rest of the CLI works from. Parsing only: nothing here
//! touches the data directory, the mount table or the process.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};

use super::error::{io_error, CliError};

/// kpfs: a Kafka-faithful log store you use with echo, cat and tail -f.
#[derive(Debug, Parser)]
#[command(name = "kpfs", version)]
pub struct Cli {
    #[command(subcommand)]
    pub(super) command: CliCommand,
}

#[derive(Debug, Subcommand)]
pub(super) enum CliCommand {
    /// Mount a data directory: each topic is a folder, append with `>> TOPIC/log`.
    /// Kafka clients connect too when `listeners` is set.
    Mount(MountArgs),
    /// Serve a data directory to Kafka clients only, without a mount (no /dev/fuse
    /// needed): in the foreground, logging to stderr, until SIGTERM or Ctrl-C.
    Serve(ServeArgs),
    /// Unmount a kpfs mount point and wait for its daemon to shut down cleanly.
    Umount(UmountArgs),
    /// Print segment, index and time-index files like Kafka's kafka-dump-log.sh.
    DumpLog(DumpLogArgs),
    /// Verify a data directory offline (CRCs, offsets, indexes, names, checkpoints).
    /// Never modifies anything; exits non-zero when it finds a problem.
    Check(CheckArgs),
    /// Convert a data directory written before Kafka's RecordBatch v2 (kpfs's own batch
    /// format), which mount refuses. One-way: back it up first. Safe to interrupt and
    /// run again. The daemon must be stopped.
    Upgrade(UpgradeArgs),
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("input").required(true).multiple(true).args(["files", "files_list"])))]
pub(super) struct DumpLogArgs {
    /// `.log`, `.index`, `.timeindex` or producer-state `.snapshot` files of a partition
    /// directory, or a `.stream` file of kpfs's `kpfs-topics/` (also with `.deleted`,
    /// `.cleaned`, `.swap`).
    #[arg(value_name = "FILE")]
    pub(super) files: Vec<PathBuf>,
    /// The same as a comma-separated list, as kafka-dump-log.sh takes them (after the
    /// FILE arguments).
    #[arg(long = "files", value_name = "FILE,...", value_delimiter = ',')]
    pub(super) files_list: Vec<PathBuf>,
    /// Print each record's key and payload.
    #[arg(long)]
    pub(super) print_data_log: bool,
    /// Print each record (without key and payload unless --print-data-log).
    #[arg(long)]
    pub(super) deep_iteration: bool,
    /// Decode the records as `__consumer_offsets`'s (group metadata and committed offsets).
    #[arg(long)]
    pub(super) offsets_decoder: bool,
    /// Check index entries against the log and print them.
    #[arg(long)]
    pub(super) index_sanity_check: bool,
    /// Check index entries against the log and print only problems.
    #[arg(long)]
    pub(super) verify_index_only: bool,
    /// Print only the batches that end within this many bytes of a log's start.
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u32).range(..=i32::MAX as i64))]
    pub(super) max_bytes: Option<u32>,
    /// How far past an index entry's position its batch may end [default: 5242880].
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u32).range(..=i32::MAX as i64))]
    pub(super) max_message_size: Option<u32>,
}

#[derive(Debug, Args)]
pub(super) struct CheckArgs {
    /// The data directory to check (a mount's `--data-dir`); it may be mounted, when
    /// active segments may change while they are read.
    pub(super) data_dir: PathBuf,
}

#[derive(Debug, Args)]
pub(super) struct UpgradeArgs {
    /// The data directory to convert, in place (not mounted or served).
    pub(super) data_dir: PathBuf,
}

/// What both `mount` and `serve` open: a data directory with a broker configuration.
#[derive(Debug, Args)]
pub(super) struct BrokerArgs {
    /// Where topics are stored [default: $XDG_DATA_HOME/kpfs or ~/.local/share/kpfs].
    #[arg(long, value_name = "DIR")]
    pub(super) data_dir: Option<PathBuf>,
    /// Broker configuration in Kafka's server.properties format.
    #[arg(long, value_name = "FILE")]
    pub(super) config: Option<PathBuf>,
    /// One broker config, applied over --config; repeatable.
    #[arg(long = "override", value_name = "KEY=VALUE", value_parser = parse_override)]
    pub(super) overrides: Vec<(String, String)>,
    /// A feature's finalized level, as Kafka's `kafka-storage.sh format --feature` sets
    /// it: only transaction.version (0, 1 or 2; default 2, Kafka 4.3.1's).
    #[arg(long = "feature", value_name = "NAME=LEVEL", value_parser = parse_feature)]
    pub(super) transaction_version: Option<i16>,
}

#[derive(Debug, Args)]
pub(super) struct ServeArgs {
    #[command(flatten)]
    pub(super) broker: BrokerArgs,
}

#[derive(Debug, Args)]
pub(super) struct MountArgs {
    /// Where the filesystem appears (created if missing; must be an empty directory).
    pub(super) mountpoint: PathBuf,
    #[command(flatten)]
    pub(super) broker: BrokerArgs,
    /// Stay attached to the terminal and log to stderr too.
    #[arg(long)]
    pub(super) foreground: bool,
    /// Let users other than the mounting one use the mount (permission bits still apply).
    #[arg(long)]
    pub(super) allow_other: bool,
    /// Mount a Kafka cluster instead of the local engine: its brokers as HOST:PORT[,...].
    /// The data directory then holds only the daemon's log and lock.
    #[arg(long, value_name = "HOST:PORT,...")]
    pub(super) bootstrap_server: Option<String>,
    /// With --bootstrap-server: client properties for the cluster, as Kafka's tools take
    /// them (`security.protocol=...`, one `key=value` per line).
    #[arg(long, value_name = "FILE", requires = "bootstrap_server")]
    pub(super) command_config: Option<PathBuf>,
    /// Set by the daemonizing parent: where to report "ok" or "error: ..." once.
    #[arg(long, hide = true, value_name = "FD")]
    pub(super) ready_fd: Option<i32>,
}

#[derive(Debug, Args)]
pub(super) struct UmountArgs {
    /// The mount point `kpfs mount` was given.
    pub(super) mountpoint: PathBuf,
}

fn parse_feature(text: &str) -> Result<i16, String> {
    match text.split_once('=') {
        Some(("transaction.version", level)) => match level.trim().parse::<i16>() {
            Ok(level @ 0..=2) => Ok(level),
            _ => Err(format!(
                "transaction.version is 0, 1 or 2, not '{}'",
                level.trim()
            )),
        },
        Some((name, _)) => Err(format!(
            "kpfs sets no feature '{name}' (only transaction.version)"
        )),
        None => Err(format!("expected NAME=LEVEL, got '{text}'")),
    }
}

fn parse_override(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_string(), value.trim().to_string()))
        }
        _ => Err(format!("expected KEY=VALUE, got '{text}'")),
    }
}

/// The broker arguments with every path made absolute, so the daemon (which changes its
/// working directory to `/`) and `/proc/self/mountinfo` see the same paths.
pub(super) struct BrokerPlan {
    pub(super) data_dir: PathBuf,
    pub(super) config: Option<PathBuf>,
    pub(super) overrides: Vec<(String, String)>,
    pub(super) transaction_version: Option<i16>,
}

impl BrokerPlan {
    pub(super) fn new(args: BrokerArgs) -> Result<BrokerPlan, CliError> {
        let data_dir = match args.data_dir {
            Some(dir) => dir,
            None => default_data_dir()?,
        };
        Ok(BrokerPlan {
            data_dir: absolute(&data_dir)?,
            config: args.config.as_deref().map(absolute).transpose()?,
            overrides: args.overrides,
            transaction_version: args.transaction_version,
        })
    }
}

/// Mount arguments with every path made absolute.
pub(super) struct MountPlan {
    pub(super) mountpoint: PathBuf,
    pub(super) broker: BrokerPlan,
    pub(super) allow_other: bool,
    /// `--bootstrap-server` and `--command-config`: a Kafka cluster to mount.
    pub(super) cluster: Option<ClusterPlan>,
}

/// The cluster a mount serves instead of the local engine.
pub(super) struct ClusterPlan {
    pub(super) bootstrap: String,
    pub(super) command_config: Option<PathBuf>,
}

impl MountPlan {
    pub(super) fn new(args: MountArgs) -> Result<MountPlan, CliError> {
        let cluster = match args.bootstrap_server {
            Some(bootstrap) => Some(ClusterPlan {
                bootstrap,
                command_config: args.command_config.as_deref().map(absolute).transpose()?,
            }),
            None => None,
        };
        Ok(MountPlan {
            mountpoint: absolute(&args.mountpoint)?,
            broker: BrokerPlan::new(args.broker)?,
            allow_other: args.allow_other,
            cluster,
        })
    }
}

fn absolute(path: &Path) -> Result<PathBuf, CliError> {
    std::path::absolute(path).map_err(|e| io_error(path.display(), e))
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
    fn the_one_feature_is_transaction_version_0_to_2() {
        assert_eq!(parse_feature("transaction.version=0"), Ok(0));
        assert_eq!(parse_feature("transaction.version=2"), Ok(2));
        assert!(parse_feature("transaction.version=3").is_err());
        assert!(parse_feature("group.version=1").is_err());
        assert!(parse_feature("transaction.version").is_err());
    }
}
