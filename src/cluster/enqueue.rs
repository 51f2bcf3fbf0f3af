//! A write's records into the producer's queue with one call: librdkafka's
//! `rd_kafka_produce_batch`, each record to the partition it names. The `rdkafka` crate
//! sends one record per call (`rd_kafka_producev`), and each call copies the topic's name
//! into a new C string and looks the topic up by it; kcat, which the mount is measured
//! against, holds a topic handle instead. The unsafe code is here alone: a topic handle
//! released on drop, and the delivery opaque of each record, which librdkafka owns once
//! the record is queued and which comes back here when it is not.

use std::ffi::{c_void, CString};
use std::sync::Arc;

use rdkafka::bindings as rd;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::producer::{Producer, ProducerContext, ThreadedProducer};

/// One record of a write, to `partition`; `None` is a null key or value.
#[derive(Clone, Copy)]
pub(crate) struct OutRecord<'a> {
    pub(crate) partition: u32,
    pub(crate) key: Option<&'a [u8]>,
    pub(crate) value: Option<&'a [u8]>,
}

/// Queues `records` for `topic`, librdkafka copying their bytes, each carrying a clone of
/// `opaque` to its delivery report; waits while the queue is full (the threaded
/// producer's own thread drains the reports that make room). Returns the records that
/// were not queued, by index, with why: none were queued, or only those, so a caller may
/// queue them again.
pub(crate) fn enqueue<C, T>(
    producer: &ThreadedProducer<C>,
    topic: &str,
    records: &[OutRecord<'_>],
    opaque: &Arc<T>,
) -> Result<Vec<(usize, RDKafkaErrorCode)>, String>
where
    C: ProducerContext<DeliveryOpaque = Arc<T>>,
    T: Send + Sync,
{
    let name = CString::new(topic).map_err(|e| format!("topic name {topic:?}: {e}"))?;
    let as_ptr =
        |bytes: Option<&[u8]>| bytes.map_or(std::ptr::null_mut(), |b| b.as_ptr() as *mut c_void);
    let mut messages: Vec<rd::rd_kafka_message_t> = records
        .iter()
        .map(|r| rd::rd_kafka_message_t {
            err: rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR,
            rkt: std::ptr::null_mut(),
            partition: r.partition as i32,
            payload: as_ptr(r.value),
            len: r.value.map_or(0, <[u8]>::len),
            key: as_ptr(r.key),
            key_len: r.key.map_or(0, <[u8]>::len),
            offset: 0,
            _private: Arc::into_raw(Arc::clone(opaque)) as *mut c_void,
        })
        .collect();
    let count =
        i32::try_from(messages.len()).map_err(|_| "too many records for one call".to_string())?;
    // SAFETY: the client pointer is the producer's, alive while it is borrowed; the topic
    // handle is released before return. librdkafka copies each key and payload (F_COPY)
    // before `produce_batch` returns, and reads nothing of `messages` after; a queued
    // record's `_private` is librdkafka's from then on (the producer's delivery callback
    // takes the `Arc` back), a refused one's is still ours and is taken back below.
    let refused = unsafe {
        let handle = rd::rd_kafka_topic_new(
            producer.client().native_ptr(),
            name.as_ptr(),
            std::ptr::null_mut(),
        );
        if handle.is_null() {
            for m in &messages {
                drop(Arc::from_raw(m._private as *const T));
            }
            return Err(format!("librdkafka gave no handle for topic {topic}"));
        }
        rd::rd_kafka_produce_batch(
            handle,
            // Unused: with F_PARTITION each record names its own.
            -1,
            rd::RD_KAFKA_MSG_F_COPY | rd::RD_KAFKA_MSG_F_PARTITION | rd::RD_KAFKA_MSG_F_BLOCK,
            messages.as_mut_ptr(),
            count,
        );
        rd::rd_kafka_topic_destroy(handle);
        let mut refused = Vec::new();
        for (i, m) in messages.iter_mut().enumerate() {
            if m.err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                drop(Arc::from_raw(m._private as *const T));
                refused.push((i, RDKafkaErrorCode::from(m.err)));
            }
        }
        refused
    };
    Ok(refused)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossbeam_channel::{unbounded, Sender};
    use rdkafka::config::ClientConfig;
    use rdkafka::message::DeliveryResult;
    use rdkafka::producer::PurgeConfig;
    use rdkafka::ClientContext;
    use std::time::Duration;

    /// Tells of each delivery report, once the report's opaque is dropped.
    struct Reports(Sender<()>);
    impl ClientContext for Reports {}
    impl ProducerContext for Reports {
        type DeliveryOpaque = Arc<()>;
        fn delivery(&self, _: &DeliveryResult<'_>, opaque: Arc<()>) {
            drop(opaque);
            self.0.send(()).unwrap();
        }
    }

    #[test]
    fn queued_records_hand_their_opaque_to_the_report_and_refused_ones_give_it_back() {
        let (reported, reports) = unbounded();
        // No broker listens there: records stay queued until purged.
        let producer: ThreadedProducer<Reports> = ClientConfig::new()
            .set("bootstrap.servers", "127.0.0.1:9")
            .set("message.max.bytes", "2000")
            .create_with_context(Reports(reported))
            .unwrap();
        let opaque = Arc::new(());
        let big = vec![b'x'; 4000];
        let records = [
            OutRecord {
                partition: 0,
                key: Some(b"k"),
                value: Some(b"v"),
            },
            OutRecord {
                partition: 1,
                key: None,
                value: Some(&big),
            },
            OutRecord {
                partition: 2,
                key: Some(b"k"),
                value: None,
            },
        ];
        let refused = enqueue(&producer, "t", &records, &opaque).unwrap();
        assert_eq!(refused, vec![(1, RDKafkaErrorCode::MessageSizeTooLarge)]);
        assert_eq!(
            Arc::strong_count(&opaque),
            3,
            "each queued record holds a clone, the refused one none"
        );
        producer.purge(PurgeConfig::default().queue());
        for _ in 0..2 {
            reports
                .recv_timeout(Duration::from_secs(10))
                .expect("a report per queued record");
        }
        assert_eq!(Arc::strong_count(&opaque), 1, "every clone came back");
    }
}
