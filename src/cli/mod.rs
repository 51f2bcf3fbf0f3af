//! The command line, thin over `fs` and `engine`: `run` dispatches each `kpfs`
//! subcommand and returns the one error `main` prints. Split as ripgrep splits its binary
//! crate, one concern per file: `args` (clap definitions; the mount arguments made
//! absolute), `broker` (what mount and serve share: data dir, broker config, engine, the
//! Kafka listener), `daemon` (`kpfs mount`: spawning the daemon, its life), `serve`
//! (`kpfs serve`: engine and listener without a mount), `signals`, `mount_table`
//! (mountinfo, mount points, `kpfs umount`), `logging`, `rlimit` and `error`. The
//! offline commands `dump-log` and `check` only print what `engine::inspect` finds, and
//! `upgrade` what `engine::upgrade` did, so they live here. No filesystem semantics
//! (those are in `fs`), no wire protocol (`kafka`) and no storage logic (`engine`).

mod args;
mod broker;
mod daemon;
mod error;
mod logging;
mod mount_table;
// The retention benchmark raises the limit as the daemon does.
#[cfg(feature = "internals")]
pub mod rlimit;
#[cfg(not(feature = "internals"))]
mod rlimit;
mod serve;
mod signals;

use std::io::{self, Write};
use std::path::Path;

use crate::engine::inspect::{check_data_dir, dump_file, DumpFindings, DumpOptions};
use crate::engine::upgrade::{refuse_legacy, refuse_legacy_segment, upgrade_data_dir};

pub use args::Cli;
use args::{CliCommand, DumpLogArgs};
use error::io_error;
pub use error::CliError;

pub fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        CliCommand::Mount(args) => daemon::mount(args),
        CliCommand::Serve(args) => serve::serve(args),
        CliCommand::Umount(args) => mount_table::umount(&args.mountpoint),
        CliCommand::DumpLog(args) => dump_log(&args),
        CliCommand::Check(args) => check(&args.data_dir),
        CliCommand::Upgrade(args) => upgrade(&args.data_dir),
    }
}

fn upgrade(data_dir: &Path) -> Result<(), CliError> {
    let report = upgrade_data_dir(data_dir, None).map_err(|e| CliError::new(e.to_string()))?;
    if report.already_current {
        println!(
            "{} already holds Kafka's RecordBatch v2: nothing to do",
            data_dir.display()
        );
        return Ok(());
    }
    let resumed = match report.segments_already_converted {
        0 => String::new(),
        n => format!(" ({n} more converted by an interrupted run)"),
    };
    println!(
        "upgraded {}: {} topics, {} segments{resumed}, {} batches, {} records to RecordBatch v2; {} leftover files removed",
        data_dir.display(),
        report.topics,
        report.segments_converted,
        report.batches,
        report.records,
        report.leftovers_removed,
    );
    if report.bytes_cut > 0 {
        println!(
            "dropped {} bytes of torn segment tails (an unclean stop), as the old kpfs's recovery would have",
            report.bytes_cut
        );
    }
    Ok(())
}

fn dump_log(args: &DumpLogArgs) -> Result<(), CliError> {
    let opts = DumpOptions {
        print_data_log: args.print_data_log,
        deep_iteration: args.deep_iteration,
        offsets_decoder: args.offsets_decoder,
        index_sanity_check: args.index_sanity_check,
        verify_index_only: args.verify_index_only,
        max_bytes: args.max_bytes,
        max_message_size: args.max_message_size,
    };
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let mut findings = DumpFindings::default();
    let mut failures = Vec::new();
    for file in args.files.iter().chain(&args.files_list) {
        if let Err(e) = refuse_legacy_segment(file) {
            failures.push(e.to_string());
        } else if let Err(e) = dump_file(file, &opts, &mut out, &mut findings) {
            failures.push(e.to_string());
            // Kafka's tool stops at an exception, before its findings.
            if e.stops_the_dump() {
                out.flush().map_err(|e| io_error("stdout", e))?;
                return Err(CliError::new(failures.join("; ")));
            }
        }
    }
    out.flush().map_err(|e| io_error("stdout", e))?;
    // After stdout, on stderr, as Kafka's tool prints them.
    findings
        .print(&mut io::stderr().lock())
        .map_err(|e| io_error("stderr", e))?;
    if failures.is_empty() {
        Ok(())
    } else {
        Err(CliError::new(failures.join("; ")))
    }
}

fn check(data_dir: &Path) -> Result<(), CliError> {
    refuse_legacy(data_dir).map_err(|e| CliError::new(e.to_string()))?;
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
