//! Records from a consumer a batch at a time: librdkafka's `rd_kafka_consume_batch_queue`
//! on the consumer's queue, one call per batch. The `rdkafka` crate's `poll` takes one
//! record per call, and its per-call bookkeeping (deadlines read from the clock, an event
//! per record) made the tracker a quarter of kcat's speed; this is the loop kcat itself
//! runs. The unsafe code is here alone: pointers librdkafka hands out, read while the
//! batch holds them and destroyed with it.

use std::time::Duration;

use rdkafka::bindings as rd;
use rdkafka::consumer::{BaseConsumer, Consumer};

/// One record of a batch, or the end of a partition (`end`: the offset after its last).
pub(crate) enum Item<'a> {
    Record {
        partition: i32,
        offset: i64,
        key: Option<&'a [u8]>,
        value: Option<&'a [u8]>,
    },
    EndOfPartition {
        partition: i32,
        end: i64,
    },
    /// A consumer error (a broker down, a leader moving): librdkafka retries on its own.
    Error(rd::rd_kafka_resp_err_t),
}

/// Up to `max` messages taken from a consumer's queue, destroyed when dropped.
pub(crate) struct Batch {
    messages: Vec<*mut rd::rd_kafka_message_t>,
}

impl Batch {
    /// Waits up to `wait` for the first message, then takes what else is there, up to
    /// `max` in all.
    pub(crate) fn take(consumer: &BaseConsumer, wait: Duration, max: usize) -> Batch {
        let mut messages: Vec<*mut rd::rd_kafka_message_t> = Vec::with_capacity(max);
        let wait_ms = i32::try_from(wait.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: the client pointer is the consumer's, alive while it is borrowed; the
        // queue handle is released before return; librdkafka writes at most `max`
        // message pointers into the vector's spare capacity and says how many.
        unsafe {
            let queue = rd::rd_kafka_queue_get_consumer(consumer.client().native_ptr());
            if queue.is_null() {
                return Batch { messages };
            }
            let n = rd::rd_kafka_consume_batch_queue(queue, wait_ms, messages.as_mut_ptr(), max);
            rd::rd_kafka_queue_destroy(queue);
            messages.set_len(usize::try_from(n).unwrap_or(0).min(max));
        }
        Batch { messages }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.messages.len()
    }

    pub(crate) fn items(&self) -> impl Iterator<Item = Item<'_>> {
        self.messages.iter().map(|&message| {
            // SAFETY: every pointer is a message librdkafka returned and this batch has
            // not destroyed yet; its key and payload live as long as it does.
            let m = unsafe { &*message };
            let bytes = |ptr: *mut std::ffi::c_void, len: usize| {
                (!ptr.is_null()).then(|| {
                    // SAFETY: librdkafka's key or payload of `len` bytes, owned by the
                    // message, which outlives the borrow (as above).
                    unsafe { std::slice::from_raw_parts(ptr as *const u8, len) }
                })
            };
            match m.err {
                rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR => Item::Record {
                    partition: m.partition,
                    offset: m.offset,
                    key: bytes(m.key, m.key_len),
                    value: bytes(m.payload, m.len),
                },
                rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__PARTITION_EOF => Item::EndOfPartition {
                    partition: m.partition,
                    end: m.offset,
                },
                err => Item::Error(err),
            }
        })
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        for &message in &self.messages {
            // SAFETY: each message is destroyed once, here, after every borrow of it.
            unsafe { rd::rd_kafka_message_destroy(message) };
        }
    }
}
