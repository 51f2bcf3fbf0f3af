//! The records of `__transaction_state` in Kafka's schemas (transaction-coordinator's
//! `TransactionLogKey` v0 and `TransactionLogValue` v0 and v1), each prefixed by its
//! version as an int16, so `kafka-dump-log.sh --transaction-log-decoder` reads what kpfs
//! writes. A transactional id's record with no value (a tombstone) says the id expired.
//!
//! The value's version is the finalized `transaction.version`'s (Kafka's
//! `TransactionVersion.transactionLogValueVersion`): 0 at level 0, 1 (flexible, with the
//! tagged fields PreviousProducerId, NextProducerId and ClientTransactionVersion) above.

use crate::engine::schema::{Reader, UnreadableRecord, Writer};

use super::TxnStatus;

const KEY_VERSION: i16 = 0;
/// The tags of `TransactionLogValue` v1's tagged fields.
const TAG_PREVIOUS_PRODUCER_ID: u64 = 0;
const TAG_NEXT_PRODUCER_ID: u64 = 1;
const TAG_CLIENT_TRANSACTION_VERSION: u64 = 2;

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

/// The value version a coordinator at `transaction.version` `level` writes.
pub(crate) fn value_version(level: i16) -> i16 {
    i16::from(level >= 1)
}

/// `TransactionLogValue`: a transactional id's state after one transition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TxnLogValue {
    pub(crate) producer_id: i64,
    /// The producer id before this transition (v1; -1 in a v0 record).
    pub(crate) prev_producer_id: i64,
    /// The producer id a transaction version 2 commit or abort whose epoch ran out
    /// hands over at its completion (v1), else -1.
    pub(crate) next_producer_id: i64,
    pub(crate) producer_epoch: i16,
    pub(crate) timeout_ms: i32,
    pub(crate) status: TxnStatus,
    /// By topic, in the order written; Kafka writes none (null) for an Empty
    /// transaction.
    pub(crate) partitions: Vec<(String, Vec<i32>)>,
    pub(crate) last_update_ms: i64,
    pub(crate) start_ms: i64,
    /// The transaction version of the client's last transition (v1; 0 in a v0 record).
    pub(crate) client_transaction_version: i16,
}

impl TxnLogValue {
    /// The value at `version` (0 or 1); v1's tagged fields are written when not at their
    /// defaults, as Kafka's generated serializer writes them.
    pub(crate) fn encode(&self, version: i16) -> Vec<u8> {
        let flexible = version >= 1;
        let mut out = Writer::default();
        out.i16(version);
        out.i64(self.producer_id);
        out.i16(self.producer_epoch);
        out.i32(self.timeout_ms);
        out.0.push(self.status.id() as u8);
        if self.status == TxnStatus::Empty {
            if flexible {
                out.uvarint(0);
            } else {
                out.i32(-1);
            }
        } else {
            let topics = &self.partitions;
            if flexible {
                out.uvarint(topics.len() as u64 + 1);
            } else {
                out.i32(topics.len() as i32);
            }
            for (topic, ids) in topics {
                if flexible {
                    out.compact_string(topic);
                    out.uvarint(ids.len() as u64 + 1);
                } else {
                    out.string(topic);
                    out.i32(ids.len() as i32);
                }
                for id in ids {
                    out.i32(*id);
                }
                if flexible {
                    out.uvarint(0);
                }
            }
        }
        out.i64(self.last_update_ms);
        out.i64(self.start_ms);
        if flexible {
            let mut tags: Vec<(u64, Vec<u8>)> = Vec::new();
            if self.prev_producer_id != -1 {
                tags.push((
                    TAG_PREVIOUS_PRODUCER_ID,
                    self.prev_producer_id.to_be_bytes().to_vec(),
                ));
            }
            if self.next_producer_id != -1 {
                tags.push((
                    TAG_NEXT_PRODUCER_ID,
                    self.next_producer_id.to_be_bytes().to_vec(),
                ));
            }
            if self.client_transaction_version != 0 {
                tags.push((
                    TAG_CLIENT_TRANSACTION_VERSION,
                    self.client_transaction_version.to_be_bytes().to_vec(),
                ));
            }
            out.uvarint(tags.len() as u64);
            for (tag, data) in tags {
                out.uvarint(tag);
                out.uvarint(data.len() as u64);
                out.0.extend_from_slice(&data);
            }
        }
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
        let mut partitions = Vec::new();
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
            let mut read = Vec::new();
            for _ in 0..ids.max(0) {
                read.push(r.i32()?);
            }
            partitions.push((topic, read));
            if flexible {
                r.skip_tagged_fields()?;
            }
        }
        let last_update_ms = r.i64()?;
        let start_ms = r.i64()?;
        let mut value = TxnLogValue {
            producer_id,
            prev_producer_id: -1,
            next_producer_id: -1,
            producer_epoch,
            timeout_ms,
            status,
            partitions,
            last_update_ms,
            start_ms,
            client_transaction_version: 0,
        };
        if flexible {
            for _ in 0..r.uvarint()? {
                let tag = r.uvarint()?;
                let len = r.uvarint()? as usize;
                let mut data = Reader(r.take(len)?);
                match tag {
                    TAG_PREVIOUS_PRODUCER_ID => value.prev_producer_id = data.i64()?,
                    TAG_NEXT_PRODUCER_ID => value.next_producer_id = data.i64()?,
                    TAG_CLIENT_TRANSACTION_VERSION => {
                        value.client_transaction_version = data.i16()?
                    }
                    // A later Kafka's field, skipped as its reader skips unknown tags.
                    _ => {}
                }
            }
        }
        Ok(value)
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
            prev_producer_id: -1,
            next_producer_id: -1,
            client_transaction_version: 0,
            producer_epoch: 3,
            timeout_ms: 60_000,
            status: TxnStatus::Ongoing,
            partitions: vec![("a".to_string(), vec![0, 2]), ("b".to_string(), vec![1])],
            last_update_ms: 5,
            start_ms: 4,
        };
        let bytes = value.encode(0);
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
            prev_producer_id: -1,
            next_producer_id: -1,
            client_transaction_version: 0,
            producer_epoch: 0,
            timeout_ms: 1000,
            status: TxnStatus::Empty,
            partitions: Vec::new(),
            last_update_ms: 9,
            start_ms: -1,
        };
        let bytes = value.encode(0);
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
        assert_eq!(read.partitions, [("t".to_string(), vec![3])]);
        assert_eq!((read.last_update_ms, read.start_ms), (9, 8));
        assert_eq!(read.client_transaction_version, 2);
        assert_eq!((read.prev_producer_id, read.next_producer_id), (-1, -1));
    }

    #[test]
    fn version_1_writes_the_tagged_fields_off_their_defaults() {
        let value = TxnLogValue {
            producer_id: 7,
            prev_producer_id: 7,
            next_producer_id: 9,
            producer_epoch: i16::MAX,
            timeout_ms: 1000,
            status: TxnStatus::PrepareCommit,
            partitions: vec![("t".to_string(), vec![3])],
            last_update_ms: 9,
            start_ms: 8,
            client_transaction_version: 2,
        };
        let bytes = value.encode(1);
        let mut expected = vec![0, 1];
        expected.extend_from_slice(&7i64.to_be_bytes());
        expected.extend_from_slice(&i16::MAX.to_be_bytes());
        expected.extend_from_slice(&1000i32.to_be_bytes());
        expected.push(2); // PREPARE_COMMIT
        expected.extend_from_slice(&[2, 2, b't', 2, 0, 0, 0, 3, 0]);
        expected.extend_from_slice(&9i64.to_be_bytes());
        expected.extend_from_slice(&8i64.to_be_bytes());
        expected.extend_from_slice(&[3, 0, 8]);
        expected.extend_from_slice(&7i64.to_be_bytes());
        expected.extend_from_slice(&[1, 8]);
        expected.extend_from_slice(&9i64.to_be_bytes());
        expected.extend_from_slice(&[2, 2, 0, 2]);
        assert_eq!(bytes, expected);
        assert_eq!(TxnLogValue::decode(&bytes).unwrap(), value);
        // At their defaults the tags are left out, and an Empty state's partitions are a
        // null compact array.
        let empty = TxnLogValue {
            prev_producer_id: -1,
            next_producer_id: -1,
            client_transaction_version: 0,
            status: TxnStatus::Empty,
            partitions: Vec::new(),
            ..value
        };
        let bytes = empty.encode(1);
        assert_eq!(bytes[17], 0, "null partitions");
        assert_eq!(*bytes.last().unwrap(), 0, "no tagged fields");
        assert_eq!(TxnLogValue::decode(&bytes).unwrap(), empty);
    }
}
