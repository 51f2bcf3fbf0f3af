//! The CLI's one error type: a message for the user, printed once by `main`.

use std::fmt;
use std::io;

/// A runtime failure, printed once by `main` as `kpfs: <message>`.
#[derive(Debug)]
pub struct CliError {
    message: String,
}

impl CliError {
    pub(super) fn new(message: impl Into<String>) -> CliError {
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

pub(super) fn io_error(context: impl fmt::Display, e: io::Error) -> CliError {
    CliError::new(format!("{context}: {e}"))
}
