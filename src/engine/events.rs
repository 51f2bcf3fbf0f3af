//! A topic's recent actions (rolls, deletions, cleaning passes, refused appends), one line
//! each with time, the partition it happened to (`TOPIC-N`, or the topic's name for what
//! concerns the whole topic) and reason, newest last: the `events` file. Bounded, so a
//! busy topic costs a fixed amount of memory.

use std::collections::VecDeque;

use parking_lot::Mutex;

use super::clock::format_time_ms;

use super::limits::MAX_EVENTS;

#[derive(Debug, Default)]
pub(crate) struct EventLog {
    lines: Mutex<VecDeque<String>>,
}

impl EventLog {
    /// Adds `where kind detail` stamped with `now_ms`.
    pub(crate) fn record(&self, now_ms: i64, at: &str, kind: &str, detail: &str) {
        let line = format!("{} {at} {kind} {detail}", format_time_ms(now_ms));
        let mut lines = self.lines.lock();
        if lines.len() == MAX_EVENTS {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    pub(crate) fn text(&self) -> String {
        let lines = self.lines.lock();
        let mut out = String::with_capacity(lines.len() * 80);
        for l in lines.iter() {
            out.push_str(l);
            out.push('\n');
        }
        out
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lines.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_events() {
        let log = EventLog::default();
        for i in 0..MAX_EVENTS + 3 {
            log.record(0, "t-0", "roll", &format!("n={i}"));
        }
        assert_eq!(log.len(), MAX_EVENTS);
        let text = log.text();
        assert!(text.starts_with("1970-01-01T00:00:00.000Z t-0 roll n=3\n"));
        assert!(text.ends_with(&format!("roll n={}\n", MAX_EVENTS + 2)));
    }
}
