//! The records of `__consumer_offsets` in Kafka's schemas (group-coordinator's
//! `OffsetCommitKey` v1, `OffsetCommitValue` v3 (Kafka 4.3.1 writes v4, which adds
//! the tagged topic id), `GroupMetadataKey` v2, `GroupMetadataValue` v3), each prefixed by its
//! version as an int16. Kafka's tools (`kafka-dump-log.sh --offsets-decoder`) read
//! what kpfs writes, and kpfs reads every version Kafka ever wrote of them.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

pub(crate) use crate::engine::schema::UnreadableRecord;
use crate::engine::schema::{Reader, Writer};

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
    /// Version 4's tagged `topicId` (Kafka 4.x writes it; kpfs writes version 3 without
    /// it): read so that a dump of Kafka's records shows it.
    pub(crate) topic_id: Option<[u8; 16]>,
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

/// `OffsetCommitValue`'s tag of `topicId`.
const TOPIC_ID_TAG: u64 = 0;

impl OffsetCommitValue {
    /// The offset this value commits for `topic`'s `partition`.
    pub(crate) fn committed(self, topic: String, partition: i32) -> super::CommittedOffset {
        super::CommittedOffset {
            topic,
            partition,
            offset: self.offset,
            leader_epoch: self.leader_epoch,
            metadata: self.metadata,
            commit_timestamp_ms: self.commit_timestamp_ms,
        }
    }

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
        let mut topic_id = None;
        if version >= 4 {
            for _ in 0..r.uvarint()? {
                let tag = r.uvarint()?;
                let len = r.uvarint()? as usize;
                let field = <[u8; 16]>::try_from(r.take(len)?);
                if let (TOPIC_ID_TAG, Ok(id)) = (tag, field) {
                    topic_id = Some(id);
                }
            }
        }
        Ok(OffsetCommitValue {
            offset,
            leader_epoch,
            metadata,
            commit_timestamp_ms,
            topic_id,
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

/// `kafka-dump-log.sh --offsets-decoder`'s rendering of one record: the key as
/// `{"type":"V","data":{...}}`, the value as `{"version":"V","data":{...}}` or
/// `<DELETE>` for a tombstone, in the field names of Kafka's JSON converters (a consumer
/// group member's subscription and assignment decoded as Kafka's tool decodes them).
/// A record it cannot read says so in the key, as Kafka's tool does.
pub(crate) fn dump_json(
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    offset: u64,
) -> (String, Option<String>) {
    let error = |why: String| (format!("Error at offset {offset}, skipping. {why}"), None);
    let Some(key) = key else {
        return error(
            "Failed to decode message using offset topic decoder (message had a missing key)"
                .into(),
        );
    };
    let version = match Reader(key).i16() {
        Ok(v) => v,
        Err(e) => return error(e.0),
    };
    let decoded = match OffsetsKey::decode(key) {
        Ok(Some(k)) => k,
        Ok(None) => {
            return (
                format!("Unknown record type {version} at offset {offset}, skipping."),
                None,
            )
        }
        Err(e) => return error(e.0),
    };
    let mut k = Json::default();
    match &decoded {
        OffsetsKey::OffsetCommit {
            group,
            topic,
            partition,
        } => {
            k.string("group", group);
            k.string("topic", topic);
            k.raw("partition", &partition.to_string());
        }
        OffsetsKey::GroupMetadata { group } => k.string("group", group),
    }
    let key_text = format!("{{\"type\":\"{version}\",\"data\":{}}}", k.finish());
    let Some(value) = value else {
        return (key_text, Some("<DELETE>".into()));
    };
    let value_version = match Reader(value).i16() {
        Ok(v) => v,
        Err(e) => return error(e.0),
    };
    let data = match decoded {
        OffsetsKey::OffsetCommit { .. } => OffsetCommitValue::decode(value).map(|v| {
            let mut j = Json::default();
            j.raw("offset", &v.offset.to_string());
            if value_version >= 3 {
                j.raw("leaderEpoch", &v.leader_epoch.to_string());
            }
            j.string("metadata", &v.metadata);
            j.raw("commitTimestamp", &v.commit_timestamp_ms.to_string());
            if value_version == 1 {
                j.raw("expireTimestamp", "-1");
            }
            // Kafka's converter leaves out a tagged field at its default (the zero Uuid).
            if let Some(id) = v.topic_id.filter(|id| id.iter().any(|&b| b != 0)) {
                j.string("topicId", &URL_SAFE_NO_PAD.encode(id));
            }
            j.finish()
        }),
        OffsetsKey::GroupMetadata { .. } => {
            GroupMetadataValue::decode(value).map(|v| group_json(&v, value_version))
        }
    };
    match data {
        Ok(data) => (
            key_text,
            Some(format!(
                "{{\"version\":\"{value_version}\",\"data\":{data}}}"
            )),
        ),
        Err(e) => error(e.0),
    }
}

fn group_json(v: &GroupMetadataValue, version: i16) -> String {
    let consumer = v.protocol_type == super::subscription::CONSUMER_PROTOCOL_TYPE;
    let mut j = Json::default();
    j.string("protocolType", &v.protocol_type);
    j.raw("generation", &v.generation.to_string());
    j.nullable_string("protocol", v.protocol.as_deref());
    j.nullable_string("leader", v.leader.as_deref());
    if version >= 2 {
        j.raw(
            "currentStateTimestamp",
            &v.current_state_timestamp_ms.to_string(),
        );
    }
    let members: Vec<String> = v
        .members
        .iter()
        .map(|m| {
            let mut mj = Json::default();
            mj.string("memberId", &m.member_id);
            if version >= 3 {
                mj.nullable_string("groupInstanceId", m.group_instance_id.as_deref());
            }
            mj.string("clientId", &m.client_id);
            mj.string("clientHost", &m.client_host);
            if version >= 1 {
                mj.raw("rebalanceTimeout", &m.rebalance_timeout_ms.to_string());
            }
            mj.raw("sessionTimeout", &m.session_timeout_ms.to_string());
            let decoded = |bytes: &[u8], f: fn(&[u8]) -> Option<String>| {
                consumer
                    .then(|| f(bytes))
                    .flatten()
                    .unwrap_or_else(|| base64_json(bytes))
            };
            mj.raw("subscription", &decoded(&m.subscription, subscription_json));
            mj.raw("assignment", &decoded(&m.assignment, assignment_json));
            mj.finish()
        })
        .collect();
    j.raw("members", &format!("[{}]", members.join(",")));
    j.finish()
}

/// Kafka's JSON of bytes it could not decode: base64, as Jackson writes binary.
fn base64_json(bytes: &[u8]) -> String {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine as _;
    format!("\"{}\"", STANDARD.encode(bytes))
}

fn partitions_json(r: &mut Reader<'_>) -> Result<String, UnreadableRecord> {
    let count = r.i32()?;
    let mut items = Vec::new();
    for _ in 0..count.max(0) {
        let mut j = Json::default();
        j.string("topic", &r.string()?);
        let n = r.i32()?;
        let partitions = (0..n.max(0))
            .map(|_| r.i32().map(|p| p.to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        j.raw("partitions", &format!("[{}]", partitions.join(",")));
        items.push(j.finish());
    }
    Ok(format!("[{}]", items.join(",")))
}

fn nullable_bytes_json(r: &mut Reader<'_>) -> Result<String, UnreadableRecord> {
    match r.i32()? {
        -1 => Ok("null".into()),
        len if len < 0 => Err(UnreadableRecord(format!("bytes length {len}"))),
        len => Ok(base64_json(r.take(len as usize)?)),
    }
}

/// `ConsumerProtocolSubscription` (versions 0-3) as Kafka's tool prints it.
fn subscription_json(bytes: &[u8]) -> Option<String> {
    let mut r = Reader(bytes);
    let run = |r: &mut Reader<'_>| -> Result<String, UnreadableRecord> {
        let version = r.i16()?;
        let count = r.i32()?;
        let topics = (0..count.max(0))
            .map(|_| r.string().map(|t| json_string(&t)))
            .collect::<Result<Vec<_>, _>>()?;
        let mut j = Json::default();
        j.raw("topics", &format!("[{}]", topics.join(",")));
        j.raw("userData", &nullable_bytes_json(r)?);
        if version >= 1 {
            j.raw("ownedPartitions", &partitions_json(r)?);
        }
        if version >= 2 {
            j.raw("generationId", &r.i32()?.to_string());
        }
        if version >= 3 {
            j.nullable_string("rackId", r.nullable_string()?.as_deref());
        }
        Ok(j.finish())
    };
    run(&mut r).ok()
}

/// `ConsumerProtocolAssignment` (versions 0-3) as Kafka's tool prints it.
fn assignment_json(bytes: &[u8]) -> Option<String> {
    let mut r = Reader(bytes);
    let run = |r: &mut Reader<'_>| -> Result<String, UnreadableRecord> {
        r.i16()?;
        let mut j = Json::default();
        j.raw("assignedPartitions", &partitions_json(r)?);
        j.raw("userData", &nullable_bytes_json(r)?);
        Ok(j.finish())
    };
    run(&mut r).ok()
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A JSON object built field by field, in Kafka's field order.
#[derive(Default)]
struct Json(Vec<String>);

impl Json {
    fn raw(&mut self, name: &str, value: &str) {
        self.0.push(format!("\"{name}\":{value}"));
    }
    fn string(&mut self, name: &str, value: &str) {
        self.raw(name, &json_string(value));
    }
    fn nullable_string(&mut self, name: &str, value: Option<&str>) {
        self.raw(name, &value.map_or_else(|| "null".to_string(), json_string));
    }
    fn finish(self) -> String {
        format!("{{{}}}", self.0.join(","))
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
            topic_id: None,
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
    fn dumps_as_kafkas_offsets_decoder() {
        let key = OffsetsKey::OffsetCommit {
            group: "g".into(),
            topic: "t".into(),
            partition: 0,
        }
        .encode();
        let value = OffsetCommitValue {
            offset: 5,
            leader_epoch: -1,
            metadata: "m\"".into(),
            commit_timestamp_ms: 9,
            topic_id: None,
        }
        .encode();
        assert_eq!(
            dump_json(Some(&key), Some(&value), 0),
            (
                r#"{"type":"1","data":{"group":"g","topic":"t","partition":0}}"#.to_string(),
                Some(
                    r#"{"version":"3","data":{"offset":5,"leaderEpoch":-1,"metadata":"m\"","commitTimestamp":9}}"#
                        .to_string()
                )
            )
        );
        // Version 4 as Kafka 4.3.1 writes it: compact metadata, the topic id tagged (0).
        let mut v4 = vec![0, 4];
        v4.extend_from_slice(&5i64.to_be_bytes());
        v4.extend_from_slice(&0i32.to_be_bytes());
        v4.push(1); // metadata "" (compact: length + 1)
        v4.extend_from_slice(&9i64.to_be_bytes());
        v4.extend_from_slice(&[1, 0, 16]); // one tagged field: tag 0, 16 bytes
        v4.extend_from_slice(&[0xfb; 16]);
        assert_eq!(
            dump_json(Some(&key), Some(&v4), 0).1.unwrap(),
            r#"{"version":"4","data":{"offset":5,"leaderEpoch":0,"metadata":"","commitTimestamp":9,"topicId":"-_v7-_v7-_v7-_v7-_v7-w"}}"#
        );
        assert_eq!(
            dump_json(Some(&key), None, 0).1.as_deref(),
            Some("<DELETE>")
        );
        assert_eq!(
            dump_json(Some(&[0, 7]), None, 3).0,
            "Unknown record type 7 at offset 3, skipping."
        );
        // A consumer member's subscription and assignment are decoded.
        let group = GroupMetadataValue {
            protocol_type: "consumer".into(),
            generation: 1,
            protocol: Some("range".into()),
            leader: Some("m".into()),
            current_state_timestamp_ms: 2,
            members: vec![StoredMember {
                member_id: "m".into(),
                group_instance_id: None,
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 3,
                session_timeout_ms: 4,
                subscription: vec![0, 0, 0, 0, 0, 1, 0, 1, b't', 0xff, 0xff, 0xff, 0xff],
                assignment: vec![
                    0, 0, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
                ],
            }],
        };
        let gkey = OffsetsKey::GroupMetadata { group: "g".into() }.encode();
        assert_eq!(
            dump_json(Some(&gkey), Some(&group.encode()), 1).1.unwrap(),
            concat!(
                r#"{"version":"3","data":{"protocolType":"consumer","generation":1,"protocol":"range","leader":"m","currentStateTimestamp":2,"#,
                r#""members":[{"memberId":"m","groupInstanceId":null,"clientId":"c","clientHost":"/127.0.0.1","rebalanceTimeout":3,"sessionTimeout":4,"#,
                r#""subscription":{"topics":["t"],"userData":null},"assignment":{"assignedPartitions":[{"topic":"t","partitions":[0]}],"userData":null}}]}}"#
            )
        );
    }

    #[test]
    fn other_coordinators_records_are_skipped_and_garbage_is_refused() {
        assert_eq!(OffsetsKey::decode(&[0, 3, 0, 1, b'g']), Ok(None));
        assert!(OffsetsKey::decode(&[0, 1, 0, 9, b'g']).is_err());
        assert!(OffsetCommitValue::decode(&[0, 9]).is_err());
    }
}
