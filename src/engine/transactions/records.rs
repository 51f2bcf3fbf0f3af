//! The records of `__transaction_state` in Kafka's schemas (transaction-coordinator's
//! `TransactionLogKey` v0 and `TransactionLogValue` v0; v1, the flexible version a
//! coordinator at transaction version 2 writes, is read too), each prefixed by its
//! version as an int16, so `kafka-dump-log.sh --transaction-log-decoder` reads what kpfs
//! writes. A transactional id's record with no value (a tombstone) says the id expired.

use std::collections::BTreeSet;

use crate::engine::schema::{Reader, UnreadableRecord, Writer};

use super::TxnStatus;

const KEY_VERSION: i16 = 0;
/// The value version of a coordinator at transaction version 0 or 1, which is what kpfs
/// serves (Kafka's `TransactionVersion.transactionLogValueVersion`).
const VALUE_VERSION: i16 = 0;

/// `TransactionLogKey`: the transactional id.
pub(crate) fn encode_key(transactional_id: &str) -> Vec<u8> {
    let mut out = Writer::default();
    out.i16(KEY_VERSION);
    out.string(transactional_id);
    out.0
}

/// The transactional id of a key; `Ok(None)` for a key version kpfs does not know (a
/// later Kafka's), skipped as Kafka skips it.
pub(crate) fn decode_key(bytes: &[u8]) -> Result<Option<String>, UnreadableRecord> {
    let mut r = Reader(bytes);
    match r.i16()? {
        0 => r.string().map(Some),
        _ => Ok(None),
    }
}

/// `TransactionLogValue`: a transactional id's state after one transition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TxnLogValue {
    pub(crate) producer_id: i64,
    pub(crate) producer_epoch: i16,
    pub(crate) timeout_ms: i32,
    pub(crate) status: TxnStatus,
    /// (topic, partition); Kafka writes none (null) for an Empty transaction.
    pub(crate) partitions: BTreeSet<(String, i32)>,
    pub(crate) last_update_ms: i64,
    pub(crate) start_ms: i64,
}

impl TxnLogValue {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Writer::default();
        out.i16(VALUE_VERSION);
        out.i64(self.producer_id);
        out.i16(self.producer_epoch);
        out.i32(self.timeout_ms);
        out.0.push(self.status.id() as u8);
        if self.status == TxnStatus::Empty {
            out.i32(-1);
        } else {
            let mut topics: Vec<(&str, Vec<i32>)> = Vec::new();
            for (topic, partition) in &self.partitions {
                match topics.last_mut() {
                    Some((t, ids)) if t == topic => ids.push(*partition),
                    _ => topics.push((topic, vec![*partition])),
                }
            }
            out.i32(topics.len() as i32);
            for (topic, ids) in topics {
                out.string(topic);
                out.i32(ids.len() as i32);
                for id in ids {
                    out.i32(id);
                }
            }
        }
        out.i64(self.last_update_ms);
        out.i64(self.start_ms);
        out.0
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<TxnLogValue, UnreadableRecord> {
        let mut r = Reader(bytes);
        let version = r.i16()?;
        if !(0..=1).contains(&version) {
            return Err(UnreadableRecord(format!(
                "unknown TransactionLogValue version {version}"
            )));
        }
        let flexible = version >= 1;
        let producer_id = r.i64()?;
        let producer_epoch = r.i16()?;
        let timeout_ms = r.i32()?;
        let status_id = r.take(1)?[0] as i8;
        let status = TxnStatus::from_id(status_id)
            .ok_or_else(|| UnreadableRecord(format!("unknown transaction status {status_id}")))?;
        let count = if flexible {
            r.uvarint()? as i64 - 1
        } else {
            i64::from(r.i32()?)
        };
        let mut partitions = BTreeSet::new();
        for _ in 0..count.max(0) {
            let topic = if flexible {
                r.compact_string()?
            } else {
                r.string()?
            };
            let ids = if flexible {
                r.uvarint()? as i64 - 1
            } else {
                i64::from(r.i32()?)
            };
            for _ in 0..ids.max(0) {
                partitions.insert((topic.clone(), r.i32()?));
            }
            if flexible {
                r.skip_tagged_fields()?;
            }
        }
        let last_update_ms = r.i64()?;
        let start_ms = r.i64()?;
        if flexible {
            r.skip_tagged_fields()?;
        }
        Ok(TxnLogValue {
            producer_id,
            producer_epoch,
            timeout_ms,
            status,
            partitions,
            last_update_ms,
            start_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_and_an_ongoing_value_are_kafkas_bytes() {
        assert_eq!(encode_key("tx"), [0, 0, 0, 2, b't', b'x']);
        let value = TxnLogValue {
            producer_id: 7,
            producer_epoch: 3,
            timeout_ms: 60_000,
            status: TxnStatus::Ongoing,
            partitions: [
                ("a".to_string(), 0),
                ("a".to_string(), 2),
                ("b".to_string(), 1),
            ]
            .into_iter()
            .collect(),
            last_update_ms: 5,
            start_ms: 4,
        };
        let bytes = value.encode();
        let mut expected = vec![0, 0]; // version
        expected.extend_from_slice(&7i64.to_be_bytes());
        expected.extend_from_slice(&3i16.to_be_bytes());
        expected.extend_from_slice(&60_000i32.to_be_bytes());
        expected.push(1); // ONGOING
        expected.extend_from_slice(&2i32.to_be_bytes());
        expected.extend_from_slice(&[0, 1, b'a', 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 2]);
        expected.extend_from_slice(&[0, 1, b'b', 0, 0, 0, 1, 0, 0, 0, 1]);
        expected.extend_from_slice(&5i64.to_be_bytes());
        expected.extend_from_slice(&4i64.to_be_bytes());
        assert_eq!(bytes, expected);
        assert_eq!(TxnLogValue::decode(&bytes).unwrap(), value);
    }

    #[test]
    fn an_empty_transaction_has_null_partitions_and_version_1_is_read() {
        let value = TxnLogValue {
            producer_id: 1,
            producer_epoch: 0,
            timeout_ms: 1000,
            status: TxnStatus::Empty,
            partitions: BTreeSet::new(),
            last_update_ms: 9,
            start_ms: -1,
        };
        let bytes = value.encode();
        assert_eq!(&bytes[17..21], &(-1i32).to_be_bytes(), "null partitions");
        assert_eq!(TxnLogValue::decode(&bytes).unwrap(), value);
        // Version 1 (flexible): compact array of one topic, then the tagged fields.
        let mut v1 = vec![0, 1];
        v1.extend_from_slice(&1i64.to_be_bytes());
        v1.extend_from_slice(&0i16.to_be_bytes());
        v1.extend_from_slice(&1000i32.to_be_bytes());
        v1.push(4); // COMPLETE_COMMIT
        v1.extend_from_slice(&[2, 2, b't', 2, 0, 0, 0, 3, 0]); // [t: [3]], no tags
        v1.extend_from_slice(&9i64.to_be_bytes());
        v1.extend_from_slice(&8i64.to_be_bytes());
        v1.extend_from_slice(&[1, 2, 2, 0, 2]); // tag 2 (clientTransactionVersion) = 2
        let read = TxnLogValue::decode(&v1).unwrap();
        assert_eq!(read.status, TxnStatus::CompleteCommit);
        assert_eq!(
            read.partitions,
            [("t".to_string(), 3)].into_iter().collect()
        );
        assert_eq!((read.last_update_ms, read.start_ms), (9, 8));
    }
}
