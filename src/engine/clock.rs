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

/// A UTC time broken into its calendar fields.
struct Civil {
    year: i64,
    /// 1..=12.
    month: i64,
    day: i64,
    /// 0 = Sunday.
    weekday: i64,
    hour: i64,
    minute: i64,
    second: i64,
    millis: i64,
}

impl Civil {
    fn of_ms(ms: i64) -> Civil {
        let secs = ms.div_euclid(1000);
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400);
        // Civil-from-days (Howard Hinnant's algorithm).
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        Civil {
            year: yoe + era * 400 + i64::from(month <= 2),
            month,
            day: doy - (153 * mp + 2) / 5 + 1,
            // 1970-01-01 was a Thursday.
            weekday: (days + 4).rem_euclid(7),
            hour: rem / 3600,
            minute: rem % 3600 / 60,
            second: rem % 60,
            millis: ms.rem_euclid(1000),
        }
    }
}

/// `2026-11-29T18:30:00.123Z` without a date crate.
pub(crate) fn format_time_ms(ms: i64) -> String {
    let Civil {
        year,
        month,
        day,
        hour,
        minute,
        second,
        millis,
        ..
    } = Civil::of_ms(ms);
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{millis:03}Z")
}

/// Java's `Date.toString` in UTC, `Sun Nov 29 18:30:00 UTC 2026`: the date line
/// `Properties.store` writes at the top of a properties file.
pub(crate) fn java_date_string(ms: i64) -> String {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let c = Civil::of_ms(ms);
    format!(
        "{} {} {:02} {:02}:{:02}:{:02} UTC {}",
        DAYS[c.weekday as usize],
        MONTHS[(c.month - 1) as usize],
        c.day,
        c.hour,
        c.minute,
        c.second,
        c.year
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_read_as_kafka_writes_them() {
        assert_eq!(format_time_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(java_date_string(0), "Thu Jan 01 00:00:00 UTC 1970");
        // 2024-02-29T23:59:59.999Z, a leap day and a Thursday.
        let ms = 1_709_251_199_999;
        assert_eq!(format_time_ms(ms), "2024-02-29T23:59:59.999Z");
        assert_eq!(java_date_string(ms), "Thu Feb 29 23:59:59 UTC 2024");
        assert_eq!(java_date_string(-1), "Wed Dec 31 23:59:59 UTC 1969");
    }
}
