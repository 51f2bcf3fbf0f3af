//! Deadlines of network waits: real time, since the kernel's timeouts (`SO_RCVTIMEO`, a
//! client's `max_wait_ms`) and a remote cluster's answers are real time, not the engine's
//! injected clock. Shared by the two network-facing parts, the Kafka listener and the
//! cluster store.

use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug)]
pub(crate) struct Deadline(Instant);

impl Deadline {
    #[allow(clippy::disallowed_methods)] // a deadline for the kernel and the client, in real time
    pub(crate) fn after(timeout: Duration) -> Deadline {
        Deadline(Instant::now() + timeout)
    }

    /// Zero once passed.
    #[allow(clippy::disallowed_methods)] // as `after`
    pub(crate) fn remaining(self) -> Duration {
        self.0.saturating_duration_since(Instant::now())
    }

    pub(crate) fn passed(self) -> bool {
        self.remaining().is_zero()
    }

    pub(crate) fn min(self, other: Deadline) -> Deadline {
        Deadline(self.0.min(other.0))
    }

    pub(crate) fn instant(self) -> Instant {
        self.0
    }
}
