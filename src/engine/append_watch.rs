//! Waiting for appends, for a long-poll Fetch (`max_wait_ms`, `min_bytes`): a fetch with
//! too little data waits until some topic it reads from gets records, or its deadline,
//! and answers as soon as enough arrived, not at the timeout (Kafka's `DelayedFetch`,
//! completed by the appends that make it satisfiable).
//!
//! Each topic has an [`AppendSignal`]: a generation counter bumped by every append, and
//! the wakers of the watches waiting on it. The append path pays one atomic increment
//! and one atomic load; it takes a lock and wakes threads only while someone waits on
//! that topic, and only those. A waiter registers its [`AppendWatch`]'s waker with each
//! topic of its fetch, then checks its condition, then sleeps on its own condvar; an
//! append after the registration finds the waker, and one before it is seen by the
//! check (the counter and the registration count are `SeqCst`: either the append sees
//! the waiter, or the waiter sees the append).

// Its user is the Kafka listener (`src/kafka`, issue 15's wire adapter), built in
// parallel: until it lands, only the tests (`internals`) call this. The merge with it
// removes this line.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

/// One topic's appends, as waiters see them.
#[derive(Debug, Default)]
pub(crate) struct AppendSignal {
    /// Moves on with every append (and when the topic is deleted, so its waiters look
    /// again and find it gone).
    generation: AtomicU64,
    /// How many wakers are registered: the append path reads only this while none is.
    waiting: AtomicUsize,
    wakers: Mutex<Vec<Arc<Waker>>>,
}

impl AppendSignal {
    /// Called after records were appended (they are readable): wakes the watches
    /// waiting on this topic.
    pub(crate) fn appended(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) > 0 {
            for waker in self.wakers.lock().iter() {
                waker.wake();
            }
        }
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    fn register(&self, waker: &Arc<Waker>) {
        self.wakers.lock().push(waker.clone());
        self.waiting.fetch_add(1, Ordering::SeqCst);
    }

    fn unregister(&self, waker: &Arc<Waker>) {
        let mut wakers = self.wakers.lock();
        if let Some(i) = wakers.iter().position(|w| Arc::ptr_eq(w, waker)) {
            wakers.swap_remove(i);
            self.waiting.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// A flag and a condvar: set by an append to any topic the watch waits on.
#[derive(Debug, Default)]
struct Waker {
    woken: Mutex<bool>,
    cond: Condvar,
}

impl Waker {
    fn wake(&self) {
        *self.woken.lock() = true;
        self.cond.notify_one();
    }
}

/// A waiter's handle (one per connection or thread; reusable, one wait at a time):
/// [`AppendWatch::wait_until`] blocks until an append to one of the given topics makes
/// the caller's condition true, or the deadline passes. Made by
/// [`Engine::append_watch`](super::Engine::append_watch).
#[derive(Debug, Default)]
pub struct AppendWatch {
    waker: Arc<Waker>,
}

impl AppendWatch {
    /// Blocks until `ready()` holds, checking it first and again after every append to
    /// one of `topics`, or until `deadline`; returns `ready()`'s last answer. `ready` may
    /// read anything of the topics (their log end, a fetch's bytes, their
    /// [`Topic::append_generation`](super::Topic::append_generation)).
    pub fn wait_until(
        &self,
        topics: &[&super::Topic],
        deadline: Instant,
        mut ready: impl FnMut() -> bool,
    ) -> bool {
        let signals: Vec<&AppendSignal> = topics.iter().map(|t| t.append_signal()).collect();
        for signal in &signals {
            signal.register(&self.waker);
        }
        let outcome = loop {
            if ready() {
                break true;
            }
            let mut woken = self.waker.woken.lock();
            if !*woken && self.waker.cond.wait_until(&mut woken, deadline).timed_out() {
                drop(woken);
                break ready();
            }
            *woken = false;
        };
        for signal in &signals {
            signal.unregister(&self.waker);
        }
        *self.waker.woken.lock() = false;
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registration_is_undone_and_an_append_without_waiters_wakes_nobody() {
        let signal = AppendSignal::default();
        let waker = Arc::new(Waker::default());
        signal.register(&waker);
        signal.appended();
        assert!(*waker.woken.lock());
        signal.unregister(&waker);
        assert_eq!(signal.waiting.load(Ordering::SeqCst), 0);
        assert!(signal.wakers.lock().is_empty());
        *waker.woken.lock() = false;
        signal.appended();
        assert!(!*waker.woken.lock());
        assert_eq!(signal.generation(), 2);
    }
}
