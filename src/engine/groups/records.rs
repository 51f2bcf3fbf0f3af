//! The records of `__consumer_offsets` in Kafka's schemas (group-coordinator's
//! `OffsetCommitKey` v1, `OffsetCommitValue` v3, `GroupMetadataKey` v2,
//! `GroupMetadataValue` v3: the versions Kafka 4.x writes), each prefixed by its
//! version as an int16. Kafka's tools (`kafka-dump-log.sh --offsets-decoder`) read
//! what kpfs writes, and kpfs reads every version Kafka ever wrote of them.

const OFFSET_COMMIT_KEY_VERSION: i16 = 1;
const GROUP_METADATA_KEY_VERSION: i16 = 2;
const OFFSET_COMMIT_VALUE_VERSION: i16 = 3;
const GROUP_METADATA_VALUE_VERSION: i16 = 3;

/// A record key of `__consumer_offsets`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum OffsetsKey {
    OffsetCommit {
        group: String,
        topic: String,
        partition: i32,
    },
    GroupMetadata {
        group: String,
    },
}

/// `OffsetCommitValue`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OffsetCommitValue {
    pub(crate) offset: i64,
    pub(crate) leader_epoch: i32,
    pub(crate) metadata: String,
    pub(crate) commit_timestamp_ms: i64,
}

/// `GroupMetadataValue.MemberMetadata`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StoredMember {
    pub(crate) member_id: String,
    pub(crate) group_instance_id: Option<String>,
    pub(crate) client_id: String,
    pub(crate) client_host: String,
    pub(crate) rebalance_timeout_ms: i32,
    pub(crate) session_timeout_ms: i32,
    pub(crate) subscription: Vec<u8>,
    pub(crate) assignment: Vec<u8>,
}

/// `GroupMetadataValue`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GroupMetadataValue {
    pub(crate) protocol_type: String,
    pub(crate) generation: i32,
    pub(crate) protocol: Option<String>,
    pub(crate) leader: Option<String>,
    pub(crate) current_state_timestamp_ms: i64,
    pub(crate) members: Vec<StoredMember>,
}

/// Why a record of `__consumer_offsets` could not be read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct UnreadableRecord(pub(crate) String);

impl OffsetsKey {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Writer::default();
        match self {
            OffsetsKey::OffsetCommit {
                group,
                topic,
                partition,
            } => {
                out.i16(OFFSET_COMMIT_KEY_VERSION);
                out.string(group);
                out.string(topic);
                out.i32(*partition);
            }
            OffsetsKey::GroupMetadata { group } => {
                out.i16(GROUP_METADATA_KEY_VERSION);
                out.string(group);
            }
        }
        out.0
    }

    /// Keys of versions 0 and 1 are offset commits, 2 group metadata; any other
    /// version is another coordinator's record (Kafka's consumer-group and share-group
    /// records): `Ok(None)`, skipped as Kafka skips what it does not know.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Option<OffsetsKey>, UnreadableRecord> {
        let mut r = Reader(bytes);
        let key = match r.i16()? {
            0 | 1 => OffsetsKey::OffsetCommit {
                group: r.string()?,
                topic: r.string()?,
                partition: r.i32()?,
            },
            2 => OffsetsKey::GroupMetadata { group: r.string()? },
            _ => return Ok(None),
        };
        Ok(Some(key))
    }

    pub(crate) fn group(&self) -> &str {
        match self {
            OffsetsKey::OffsetCommit { group, .. } | OffsetsKey::GroupMetadata { group } => group,
        }
    }
}

impl OffsetCommitValue {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Writer::default();
        out.i16(OFFSET_COMMIT_VALUE_VERSION);
        out.i64(self.offset);
        out.i32(self.leader_epoch);
        out.string(&self.metadata);
        out.i64(self.commit_timestamp_ms);
        out.0
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<OffsetCommitValue, UnreadableRecord> {
        let mut r = Reader(bytes);
        let version = r.i16()?;
        if !(0..=4).contains(&version) {
            return Err(UnreadableRecord(format!(
                "OffsetCommitValue version {version} is unknown"
            )));
        }
        let offset = r.i64()?;
        let leader_epoch = if version >= 3 { r.i32()? } else { -1 };
        let metadata = if version >= 4 {
            r.compact_string()?
        } else {
            r.string()?
        };
        let commit_timestamp_ms = r.i64()?;
        Ok(OffsetCommitValue {
            offset,
            leader_epoch,
            metadata,
            commit_timestamp_ms,
        })
    }
}

impl GroupMetadataValue {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Writer::default();
        out.i16(GROUP_METADATA_VALUE_VERSION);
        out.string(&self.protocol_type);
        out.i32(self.generation);
        out.nullable_string(self.protocol.as_deref());
        out.nullable_string(self.leader.as_deref());
        out.i64(self.current_state_timestamp_ms);
        out.i32(self.members.len() as i32);
        for m in &self.members {
            out.string(&m.member_id);
            out.nullable_string(m.group_instance_id.as_deref());
            out.string(&m.client_id);
            out.string(&m.client_host);
            out.i32(m.rebalance_timeout_ms);
            out.i32(m.session_timeout_ms);
            out.bytes(&m.subscription);
            out.bytes(&m.assignment);
        }
        out.0
    }

    /// Versions 0 to 3 (non-flexible); version 4 (flexible) is read too.
    pub(crate) fn decode(bytes: &[u8]) -> Result<GroupMetadataValue, UnreadableRecord> {
        let mut r = Reader(bytes);
        let version = r.i16()?;
        if !(0..=4).contains(&version) {
            return Err(UnreadableRecord(format!(
                "GroupMetadataValue version {version} is unknown"
            )));
        }
        let flexible = version >= 4;
        let string = |r: &mut Reader<'_>| {
            if flexible {
                r.compact_string()
            } else {
                r.string()
            }
        };
        let nullable = |r: &mut Reader<'_>| {
            if flexible {
                r.compact_nullable_string()
            } else {
                r.nullable_string()
            }
        };
        let protocol_type = string(&mut r)?;
        let generation = r.i32()?;
        let protocol = nullable(&mut r)?;
        let leader = nullable(&mut r)?;
        let current_state_timestamp_ms = if version >= 2 { r.i64()? } else { -1 };
        let count = if flexible {
            r.uvarint()?.saturating_sub(1) as usize
        } else {
            usize::try_from(r.i32()?).unwrap_or(0)
        };
        let mut members = Vec::with_capacity(count.min(1024));
        for _ in 0..count {
            let member_id = string(&mut r)?;
            let group_instance_id = if version >= 3 {
                nullable(&mut r)?
            } else {
                None
            };
            let client_id = string(&mut r)?;
            let client_host = string(&mut r)?;
            let rebalance_timeout_ms = if version >= 1 { r.i32()? } else { -1 };
            let session_timeout_ms = r.i32()?;
            let (subscription, assignment) = if flexible {
                let s = r.compact_bytes()?;
                (s, r.compact_bytes()?)
            } else {
                let s = r.bytes()?;
                (s, r.bytes()?)
            };
            if flexible {
                r.skip_tagged_fields()?;
            }
            members.push(StoredMember {
                member_id,
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                subscription,
                assignment,
            });
        }
        Ok(GroupMetadataValue {
            protocol_type,
            generation,
            protocol,
            leader,
            current_state_timestamp_ms,
            members,
        })
    }
}

/// Big-endian writer of Kafka's non-flexible types.
#[derive(Default)]
struct Writer(Vec<u8>);

impl Writer {
    fn i16(&mut self, v: i16) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn string(&mut self, s: &str) {
        // Kafka's strings are at most i16::MAX bytes; ids and metadata are bounded
        // far below that before they get here (offset.metadata.max.bytes).
        let len = s.len().min(i16::MAX as usize);
        self.i16(len as i16);
        self.0.extend_from_slice(&s.as_bytes()[..len]);
    }
    fn nullable_string(&mut self, s: Option<&str>) {
        match s {
            Some(s) => self.string(s),
            None => self.i16(-1),
        }
    }
    fn bytes(&mut self, b: &[u8]) {
        self.i32(b.len() as i32);
        self.0.extend_from_slice(b);
    }
}

/// Reader of Kafka's types, flexible (compact) ones included.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], UnreadableRecord> {
        if self.0.len() < n {
            return Err(UnreadableRecord(format!(
                "{n} bytes needed, {} left",
                self.0.len()
            )));
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }
    fn i16(&mut self) -> Result<i16, UnreadableRecord> {
        Ok(i16::from_be_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }
    fn i32(&mut self) -> Result<i32, UnreadableRecord> {
        Ok(i32::from_be_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn i64(&mut self) -> Result<i64, UnreadableRecord> {
        Ok(i64::from_be_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    fn uvarint(&mut self) -> Result<u64, UnreadableRecord> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.take(1)?[0];
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(UnreadableRecord("a varint longer than 10 bytes".into()))
    }
    fn utf8(&mut self, len: usize) -> Result<String, UnreadableRecord> {
        String::from_utf8(self.take(len)?.to_vec())
            .map_err(|_| UnreadableRecord("a string that is not UTF-8".into()))
    }
    fn nullable_string(&mut self) -> Result<Option<String>, UnreadableRecord> {
        match self.i16()? {
            -1 => Ok(None),
            len if len < 0 => Err(UnreadableRecord(format!("string length {len}"))),
            len => self.utf8(len as usize).map(Some),
        }
    }
    fn string(&mut self) -> Result<String, UnreadableRecord> {
        self.nullable_string()?
            .ok_or_else(|| UnreadableRecord("a null non-nullable string".into()))
    }
    fn compact_nullable_string(&mut self) -> Result<Option<String>, UnreadableRecord> {
        match self.uvarint()? {
            0 => Ok(None),
            n => self.utf8((n - 1) as usize).map(Some),
        }
    }
    fn compact_string(&mut self) -> Result<String, UnreadableRecord> {
        self.compact_nullable_string()?
            .ok_or_else(|| UnreadableRecord("a null non-nullable string".into()))
    }
    fn bytes(&mut self) -> Result<Vec<u8>, UnreadableRecord> {
        match self.i32()? {
            -1 => Ok(Vec::new()),
            len if len < 0 => Err(UnreadableRecord(format!("bytes length {len}"))),
            len => Ok(self.take(len as usize)?.to_vec()),
        }
    }
    fn compact_bytes(&mut self) -> Result<Vec<u8>, UnreadableRecord> {
        match self.uvarint()? {
            0 => Ok(Vec::new()),
            n => Ok(self.take((n - 1) as usize)?.to_vec()),
        }
    }
    fn skip_tagged_fields(&mut self) -> Result<(), UnreadableRecord> {
        for _ in 0..self.uvarint()? {
            self.uvarint()?;
            let len = self.uvarint()? as usize;
            self.take(len)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offset_commit_is_kafkas_bytes() {
        let key = OffsetsKey::OffsetCommit {
            group: "g".into(),
            topic: "t".into(),
            partition: 0,
        };
        assert_eq!(
            key.encode(),
            [0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 0],
            "OffsetCommitKey v1: version, group, topic, partition"
        );
        let value = OffsetCommitValue {
            offset: 42,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp_ms: 1_000,
        };
        let bytes = value.encode();
        assert_eq!(
            bytes,
            [
                0, 3, 0, 0, 0, 0, 0, 0, 0, 42, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0,
                0x03, 0xe8
            ],
            "OffsetCommitValue v3: version, offset, leader epoch, metadata, commit time"
        );
        assert_eq!(OffsetsKey::decode(&key.encode()), Ok(Some(key)));
        assert_eq!(OffsetCommitValue::decode(&bytes), Ok(value));
    }

    #[test]
    fn group_metadata_round_trips_and_reads_older_versions() {
        let value = GroupMetadataValue {
            protocol_type: "consumer".into(),
            generation: 3,
            protocol: Some("range".into()),
            leader: Some("m-1".into()),
            current_state_timestamp_ms: 77,
            members: vec![StoredMember {
                member_id: "m-1".into(),
                group_instance_id: None,
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 300_000,
                session_timeout_ms: 45_000,
                subscription: vec![1, 2],
                assignment: vec![3],
            }],
        };
        assert_eq!(GroupMetadataValue::decode(&value.encode()), Ok(value));
        // Version 0: no rebalance timeout, state timestamp or instance id.
        let mut v0 = Writer::default();
        v0.i16(0);
        v0.string("consumer");
        v0.i32(1);
        v0.nullable_string(None);
        v0.nullable_string(None);
        v0.i32(0);
        let old = GroupMetadataValue::decode(&v0.0).unwrap();
        assert_eq!((old.generation, old.current_state_timestamp_ms), (1, -1));
        assert!(old.members.is_empty());
    }

    #[test]
    fn other_coordinators_records_are_skipped_and_garbage_is_refused() {
        assert_eq!(OffsetsKey::decode(&[0, 3, 0, 1, b'g']), Ok(None));
        assert!(OffsetsKey::decode(&[0, 1, 0, 9, b'g']).is_err());
        assert!(OffsetCommitValue::decode(&[0, 9]).is_err());
    }
}
