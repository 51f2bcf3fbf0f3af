//! Time as the engine sees it. The engine never reads the system clock directly: it is
//! handed a [`Clock`], so tests can simulate days of retention in microseconds with
//! [`ManualClock`] while the daemon uses [`SystemClock`].

#[cfg(any(test, feature = "internals"))]
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
#[cfg(any(test, feature = "internals"))]
pub struct ManualClock {
    now_ms: AtomicI64,
}

#[cfg(any(test, feature = "internals"))]
impl ManualClock {
    pub fn new(start_ms: i64) -> Self {
        ManualClock {
            now_ms: AtomicI64::new(start_ms),
        }
    }

    pub fn advance(&self, ms: i64) {
        self.now_ms.fetch_add(ms, Ordering::SeqCst);
    }

    #[cfg(feature = "internals")]
    pub fn set(&self, ms: i64) {
        self.now_ms.store(ms, Ordering::SeqCst);
    }
}

#[cfg(any(test, feature = "internals"))]
impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now_ms.load(Ordering::SeqCst)
    }
}

/// `2026-11-29T18:30:00.123Z` without a date crate.
pub(crate) fn format_time_ms(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
