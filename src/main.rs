use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = match kpfs::cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // --help and --version are not usage errors.
            return if e.use_stderr() {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match kpfs::cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kpfs: {e}");
            ExitCode::from(2)
        }
    }
}
