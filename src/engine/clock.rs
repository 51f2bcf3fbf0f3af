//! Time as the engine sees it. The engine never reads the system clock directly: it is
//! handed a [`Clock`], so tests can simulate days of retention in microseconds with
//! [`ManualClock`] while the daemon uses [`SystemClock`].

use std::sync::atomic::{AtomicI64, Ordering};

/// Wall-clock milliseconds since the Unix epoch (record timestamps, retention, horizons).
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now_ms(&self) -> i64;
}

/// The real clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        #[allow(clippy::disallowed_methods)] // the one place the real clock is read
        let now = std::time::SystemTime::now();
        now.duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    }
}

/// A clock that only moves when a test moves it.
#[derive(Debug)]
pub struct ManualClock {
    now_ms: AtomicI64,
}

impl ManualClock {
    pub fn new(start_ms: i64) -> Self {
        ManualClock {
            now_ms: AtomicI64::new(start_ms),
        }
    }

    pub fn advance(&self, ms: i64) {
        self.now_ms.fetch_add(ms, Ordering::SeqCst);
    }

    pub fn set(&self, ms: i64) {
        self.now_ms.store(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now_ms.load(Ordering::SeqCst)
    }
}
