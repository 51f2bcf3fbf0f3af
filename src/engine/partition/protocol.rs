//! Kafka's console-producer line protocol (`LineMessageReader`): the lines of a write
//! become records, every one validated before anything is written.

use crate::engine::config::TopicConfig;
use crate::engine::error::{BatchSize, EngineError, Result};
use crate::engine::excerpt::Excerpt;
use crate::engine::format::{field_len, BatchBuilder};
use crate::engine::log::PendingRecord;

thread_local! {
    /// The parsed records of the write in progress, kept between writes: a 1 MiB write of
    /// 100-byte lines holds 10,000 of them, and growing a fresh vector for every write
    /// was a tenth of the append path's time.
    pub(crate) static PARSED: std::cell::RefCell<Vec<PendingRecord>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Kafka's console-producer line protocol (`LineMessageReader`) over a piece of one
/// write that starts at position `base` of it, added to the write's `records`.
pub(crate) fn parse_lines(
    data: &[u8],
    base: usize,
    config: &TopicConfig,
    partition: &str,
    records: &mut Vec<PendingRecord>,
) -> Result<()> {
    let format = config.line_format();
    let max = config.max_message_bytes.max(0) as u64;
    let mut rest = data;
    while !rest.is_empty() {
        let line_number = records.len() + 1;
        let (line, line_end) = match memchr::memchr(b'\n', rest) {
            Some(i) => {
                let line = &rest[..i];
                rest = &rest[i + 1..];
                (line, true)
            }
            None => (std::mem::take(&mut rest), false),
        };
        let line_start = base + data.len() - rest.len() - line.len() - usize::from(line_end);
        let Some((key, value)) = format.split(line) else {
            return Err(EngineError::MissingKeySeparator {
                line_number,
                line: Excerpt::quoted(line).to_string(),
            });
        };
        let (key_len, value_len) = (field_len(key), field_len(value));
        // Kafka checks a record's batch size before its key (analyzeAndValidateRecords,
        // then LogValidator); a missing separator is the console producer's error, before
        // either.
        let batch = BatchBuilder::single_record_batch_size(key_len, value_len) as u64;
        if batch > max {
            return Err(EngineError::RecordTooLarge {
                partition: partition.to_string(),
                size: BatchSize::Exactly(batch),
                max,
            });
        }
        if key.is_none() && config.cleanup_policy.compact {
            return Err(EngineError::KeylessOnCompacted {
                partition: partition.to_string(),
            });
        }
        records.push(PendingRecord {
            line_start,
            line_len: line.len(),
            key_len,
            value_len,
        });
    }
    Ok(())
}

/// Records in `data` under the line protocol of [`parse_lines`].
pub(crate) fn count_lines(data: &[u8]) -> u64 {
    let newlines = memchr::memchr_iter(b'\n', data).count() as u64;
    newlines + u64::from(data.last().is_some_and(|&b| b != b'\n'))
}
