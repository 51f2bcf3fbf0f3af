//! Shutdown signals (SIGTERM, SIGINT, SIGHUP): blocked in every thread and taken by one
//! `sigwait` thread, which hands them to the daemon's or the server's main loop.

use std::io;

use crossbeam_channel::Sender;

use super::error::{io_error, CliError};

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
pub(super) fn block_shutdown_signals() -> Result<(), CliError> {
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

/// Sends `event(signal)` for each shutdown signal, until the receiver is gone.
pub(super) fn spawn_signal_thread<E: Send + 'static>(
    events: Sender<E>,
    event: fn(i32) -> E,
) -> Result<(), CliError> {
    std::thread::Builder::new()
        .name("kpfs-signals".into())
        .spawn(move || {
            let set = shutdown_sigset();
            loop {
                let mut signal = 0;
                // SAFETY: `set` is initialised and `signal` is a valid out-pointer.
                let rc = unsafe { libc::sigwait(&set, &mut signal) };
                if rc == 0 && events.send(event(signal)).is_err() {
                    return;
                }
            }
        })
        .map(|_| ())
        .map_err(|e| io_error("cannot start the signal thread", e))
}
