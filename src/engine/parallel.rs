//! Two pieces of work at once: one on the calling thread, the other on a helper thread
//! kept for the purpose (`kpfs-append-helper`), for a write to a topic's `log` that
//! appends to several partitions. Each partition's append takes its own log's writer
//! lock and writes its own files, so two can run side by side; the writer (a `cat`) is
//! blocked on the write meanwhile, and so is its core.
//!
//! A thread per call would cost more than it saves (a clone(2) and an exit per write);
//! the helper is started once. It may be busy with another writer's work when a call
//! hands it some: the caller then takes its piece back once its own is done, so a call
//! never waits longer than it would running both pieces itself.
//!
//! A large write makes several calls in a row (its records' partitions, their batches,
//! their appends; `keyed_batches.rs`), microseconds apart, and waking a parked thread
//! costs tens of microseconds on a VM: so the helper, between pieces, and the caller,
//! waiting for the helper's piece, poll for [`SPIN`] before they park.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvError, Sender, TryRecvError};
use parking_lot::Mutex;

/// How long a thread polls a channel before it parks (see the module's comment): longer
/// than the gaps between one write's calls, shorter than the gap between two writes of a
/// `cat` (its next write's copy and the FUSE round trip), so an idle helper parks.
const SPIN: Duration = Duration::from_micros(50);

/// `rx.recv()`, polling for [`SPIN`] before it parks.
#[allow(clippy::disallowed_methods)] // how long a thread burns a core, in real time
fn recv_soon<T>(rx: &Receiver<T>) -> Result<T, RecvError> {
    let start = Instant::now();
    loop {
        for _ in 0..64 {
            match rx.try_recv() {
                Ok(value) => return Ok(value),
                Err(TryRecvError::Disconnected) => return Err(RecvError),
                Err(TryRecvError::Empty) => std::hint::spin_loop(),
            }
        }
        if start.elapsed() >= SPIN {
            return rx.recv();
        }
    }
}

/// A piece of work handed to the helper, its borrows' lifetime erased (see [`join`]).
type Job = Box<dyn FnOnce() + Send>;

/// A job that whoever takes first runs: the helper, or the caller taking it back.
#[derive(Default)]
struct Slot(Mutex<Option<Job>>);

impl Slot {
    fn take(&self) -> Option<Job> {
        self.0.lock().take()
    }
}

/// The helper's queue; `None` on a machine of one core, or when the thread could not
/// start: each call then runs both pieces itself.
fn helper() -> Option<&'static Sender<Arc<Slot>>> {
    static HELPER: OnceLock<Option<Sender<Arc<Slot>>>> = OnceLock::new();
    HELPER
        .get_or_init(|| {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            if cores < 2 {
                return None;
            }
            let (tx, rx) = crossbeam_channel::unbounded::<Arc<Slot>>();
            let started = std::thread::Builder::new()
                .name("kpfs-append-helper".into())
                .spawn(move || {
                    while let Ok(slot) = recv_soon(&rx) {
                        if let Some(job) = slot.take() {
                            job();
                        }
                    }
                });
            match started {
                Ok(_) => Some(tx),
                Err(e) => {
                    tracing::warn!(error = %e, "no append helper thread: appends to several partitions run one after another");
                    None
                }
            }
        })
        .as_ref()
}

/// Runs `here` on this thread and `there` on the helper at the same time, and returns
/// both results once both are done (`there` runs here too, after `here`, when the
/// helper has not started it by then). A panic in either is resumed here, after both
/// ended.
pub(crate) fn join<T, A, B>(here: A, there: B) -> (T, T)
where
    T: Send + 'static,
    A: FnOnce() -> T,
    B: FnOnce() -> T + Send,
{
    let Some(helper) = helper() else {
        return (here(), there());
    };
    let (done_tx, done_rx) = crossbeam_channel::bounded(1);
    let job: Box<dyn FnOnce() + Send + '_> = Box::new(move || {
        // The last thing the job does: after this send it touches nothing `there`
        // borrowed.
        let _ = done_tx.send(catch_unwind(AssertUnwindSafe(there)));
    });
    // SAFETY: only the lifetime changes (the same fat pointer). The job borrows from the
    // caller's frame; this function neither returns nor unwinds before the job has
    // run to its end (its last act is the send that `done_rx.recv()` below waits for:
    // `here` runs under `catch_unwind`, and whichever thread takes the job from the slot
    // runs it, this one if the helper did not). A job is never dropped unrun: the slot
    // is emptied only by `take`, whose taker runs it, and this function takes it if the
    // helper has not. So nothing the job borrows is used after the frame ends.
    let job: Job = unsafe { std::mem::transmute::<Box<dyn FnOnce() + Send + '_>, Job>(job) };
    let slot = Arc::new(Slot(Mutex::new(Some(job))));
    if helper.send(slot.clone()).is_err() {
        // The helper is gone (it never ends while the process runs): run it here.
        tracing::error!("the append helper thread is gone");
    }
    let mine = catch_unwind(AssertUnwindSafe(here));
    if let Some(job) = slot.take() {
        job();
    }
    let theirs = recv_soon(&done_rx).expect("a job reports its end");
    match (mine, theirs) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(panic), _) | (_, Err(panic)) => resume_unwind(panic),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Barrier;

    #[test]
    fn both_pieces_run_and_see_the_callers_data() {
        let data: Vec<u64> = (0..1000).collect();
        let (low, high) = (&data[..500], &data[500..]);
        let (a, b) = join(|| low.iter().sum::<u64>(), || high.iter().sum::<u64>());
        assert_eq!(a + b, data.iter().sum::<u64>());
    }

    #[test]
    fn the_pieces_run_at_once_when_there_are_two_cores() {
        if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
            return;
        }
        // Each piece waits for the other: only two threads at once get past the barrier.
        // The helper may be busy with another test's piece: waits until it is free.
        let barrier = Barrier::new(2);
        let (a, b) = join(
            || {
                barrier.wait();
                std::thread::current().id()
            },
            || {
                barrier.wait();
                std::thread::current().id()
            },
        );
        assert_ne!(a, b);
    }

    #[test]
    fn a_busy_helper_costs_a_caller_nothing_but_its_own_time() {
        // Many callers at once, more than one helper: every call ends with both results.
        let done = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for i in 0..8u64 {
                let done = &done;
                s.spawn(move || {
                    for j in 0..200u64 {
                        let (a, b) = join(|| i * j, || i + j);
                        assert_eq!((a, b), (i * j, i + j));
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                });
            }
        });
        assert_eq!(done.load(Ordering::Relaxed), 8);
    }

    #[test]
    fn a_panic_in_either_piece_reaches_the_caller_after_both_ended() {
        for helper_panics in [false, true] {
            let ran = AtomicUsize::new(0);
            let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
                join(
                    || {
                        ran.fetch_add(1, Ordering::SeqCst);
                        assert!(helper_panics, "here");
                    },
                    || {
                        ran.fetch_add(1, Ordering::SeqCst);
                        assert!(!helper_panics, "there");
                    },
                )
            }));
            assert!(result.is_err());
            assert_eq!(ran.load(Ordering::SeqCst), 2);
        }
    }
}
