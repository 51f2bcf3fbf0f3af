//! Kafka's framing: a request is a big-endian `int32` size and that many bytes (header and
//! body). A request is read whole before anything decodes it, within two bounds:
//! `socket.request.max.bytes` (checked on the size, before a byte of the body is kept) and
//! `connections.max.idle.ms` (the whole request must arrive within it). The buffer grows
//! with the bytes that actually arrived, so a client announcing 100 MiB and sending 10
//! bytes holds 10 bytes of memory.
//!
//! Public under `internals` for examples/wire_floor.rs, the benchmark's floor, which must
//! read and decode requests exactly as the listener does.

use std::io::{self, Read};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind};
use kafka_protocol::protocol::Decodable;

use super::versions::supported_versions;
use crate::deadline::Deadline;

/// Kafka's request header starts with api key, api version and correlation id.
const MIN_REQUEST_BYTES: usize = 8;
/// Bytes read from the socket at a time while a request body arrives.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Why a connection stops reading requests. Every one but `Closed` closes the connection
/// with a log line.
#[derive(Debug)]
pub enum FrameError {
    /// The client closed the connection between requests.
    Closed,
    /// No request started within `connections.max.idle.ms`.
    Idle,
    /// A request that started did not arrive whole within `connections.max.idle.ms`.
    Slow {
        received: usize,
        size: usize,
    },
    /// The client closed the connection inside a request.
    Truncated {
        received: usize,
        size: usize,
    },
    /// The size prefix is over `socket.request.max.bytes` (Kafka's
    /// `InvalidReceiveException`).
    TooLarge {
        size: i64,
        max: usize,
    },
    /// The size prefix cannot hold a request header.
    TooSmall {
        size: i64,
    },
    Io(io::Error),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Closed => write!(f, "closed by the client"),
            FrameError::Idle => write!(f, "idle for connections.max.idle.ms"),
            FrameError::Slow { received, size } => write!(
                f,
                "a request of {size} bytes did not arrive within connections.max.idle.ms ({received} bytes came)"
            ),
            FrameError::Truncated { received, size } => write!(
                f,
                "closed by the client {received} bytes into a request of {size} bytes"
            ),
            FrameError::TooLarge { size, max } => write!(
                f,
                "Invalid receive (size = {size} larger than {max}): over socket.request.max.bytes"
            ),
            FrameError::TooSmall { size } => write!(
                f,
                "Invalid receive (size = {size}): too small for a request header"
            ),
            FrameError::Io(e) => write!(f, "read failed: {e}"),
        }
    }
}

/// A byte source whose reads can be given a deadline (a socket's `SO_RCVTIMEO`).
pub trait TimedRead: Read {
    fn set_read_deadline(&mut self, timeout: Duration) -> io::Result<()>;
}

impl TimedRead for std::net::TcpStream {
    fn set_read_deadline(&mut self, timeout: Duration) -> io::Result<()> {
        // A zero timeout means "block forever" to the socket: one microsecond is the
        // nearest that still times out.
        self.set_read_timeout(Some(timeout.max(Duration::from_micros(1))))
    }
}

/// Reads one whole request of at most `max` bytes; the size prefix is not returned.
pub fn read_frame<R: TimedRead>(
    source: &mut R,
    max: usize,
    idle: Duration,
) -> Result<Vec<u8>, FrameError> {
    let deadline = Deadline::after(idle);
    let mut prefix = [0u8; 4];
    let got = read_until(source, &mut prefix, deadline)?;
    match got {
        0 => return Err(FrameError::Closed),
        4 => {}
        received if deadline.passed() => return Err(FrameError::Slow { received, size: 4 }),
        received => return Err(FrameError::Truncated { received, size: 4 }),
    }
    let size = i64::from(i32::from_be_bytes(prefix));
    check_size(size, max)?;
    let size = size as usize;
    let mut body = Vec::with_capacity(size.min(READ_CHUNK_BYTES));
    while body.len() < size {
        let start = body.len();
        let chunk = (size - start).min(READ_CHUNK_BYTES);
        body.resize(start + chunk, 0);
        let got = read_until(source, &mut body[start..], deadline)?;
        body.truncate(start + got);
        if got < chunk {
            let received = body.len();
            return Err(if deadline.passed() {
                FrameError::Slow { received, size }
            } else {
                FrameError::Truncated { received, size }
            });
        }
    }
    Ok(body)
}

/// Kafka's `NetworkReceive` checks: the size is known before a byte of the body is read.
pub(crate) fn check_size(size: i64, max: usize) -> Result<(), FrameError> {
    if size < MIN_REQUEST_BYTES as i64 {
        return Err(FrameError::TooSmall { size });
    }
    if size > max as i64 {
        return Err(FrameError::TooLarge { size, max });
    }
    Ok(())
}

/// Fills `buf` until it is full, the source ends, or the deadline passes; returns the
/// bytes read. A deadline that passes before the first byte is `Idle`.
fn read_until<R: TimedRead>(
    source: &mut R,
    buf: &mut [u8],
    deadline: Deadline,
) -> Result<usize, FrameError> {
    let mut filled = 0;
    while filled < buf.len() {
        let left = deadline.remaining();
        if left.is_zero() {
            break;
        }
        source.set_read_deadline(left).map_err(FrameError::Io)?;
        match source.read(&mut buf[filled..]) {
            Ok(0) => return Ok(filled),
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                break
            }
            Err(e) => return Err(FrameError::Io(e)),
        }
    }
    if filled == 0 && !buf.is_empty() && deadline.passed() {
        return Err(FrameError::Idle);
    }
    Ok(filled)
}

/// A decoded request.
#[derive(Debug)]
pub struct Request {
    pub api_key: ApiKey,
    pub version: i16,
    pub header: RequestHeader,
    pub body: RequestKind,
}

/// Why a whole frame is not a request kpfs serves.
#[derive(Debug)]
pub enum RequestError {
    /// An API key Kafka does not define, or one kpfs does not serve.
    UnknownApi { api_key: i16, version: i16 },
    /// An ApiVersions request of a version kpfs does not serve: answered with
    /// `UNSUPPORTED_VERSION` and the ranges (KIP-511), not closed.
    ApiVersionsUnsupported { version: i16, correlation_id: i32 },
    /// A served API at a version kpfs does not serve.
    UnsupportedVersion { api_key: ApiKey, version: i16 },
    /// The header or body does not decode at its version.
    Malformed {
        api_key: ApiKey,
        version: i16,
        reason: String,
    },
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestError::UnknownApi { api_key, version } => {
                write!(f, "unknown API key {api_key} (version {version})")
            }
            RequestError::ApiVersionsUnsupported { version, .. } => {
                write!(f, "ApiVersions version {version} is not supported")
            }
            RequestError::UnsupportedVersion { api_key, version } => {
                write!(f, "{api_key:?} version {version} is not supported")
            }
            RequestError::Malformed {
                api_key,
                version,
                reason,
            } => write!(f, "malformed {api_key:?} v{version} request: {reason}"),
        }
    }
}

/// Decodes a whole frame: the header at the version its API and version call for, then the
/// body. Bytes after the body are ignored, as Kafka's parsers ignore them: librdkafka 2.x
/// sends its Metadata request for every topic (v9+) with 3 bytes after the body (the
/// placeholder of its topic count, which it leaves 4 bytes long, reads as the whole body).
pub fn decode_request(frame: Vec<u8>) -> Result<Request, RequestError> {
    let mut buf = Bytes::from(frame);
    // read_frame guarantees MIN_REQUEST_BYTES; a frame from elsewhere is checked anyway.
    if buf.len() < MIN_REQUEST_BYTES {
        return Err(RequestError::UnknownApi {
            api_key: -1,
            version: -1,
        });
    }
    let raw_key = i16::from_be_bytes([buf[0], buf[1]]);
    let version = i16::from_be_bytes([buf[2], buf[3]]);
    let correlation_id = i32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]);
    let Some((api_key, range)) = ApiKey::try_from(raw_key)
        .ok()
        .and_then(|key| supported_versions(key).map(|range| (key, range)))
    else {
        return Err(RequestError::UnknownApi {
            api_key: raw_key,
            version,
        });
    };
    if version < range.min || version > range.max {
        return Err(if api_key == ApiKey::ApiVersions {
            RequestError::ApiVersionsUnsupported {
                version,
                correlation_id,
            }
        } else {
            RequestError::UnsupportedVersion { api_key, version }
        });
    }
    let malformed = |reason: String| RequestError::Malformed {
        api_key,
        version,
        reason,
    };
    let header = RequestHeader::decode(&mut buf, api_key.request_header_version(version))
        .map_err(|e| malformed(format!("header: {e}")))?;
    let body = RequestKind::decode(api_key, &mut buf, version)
        .map_err(|e| malformed(format!("body: {e}")))?;
    Ok(Request {
        api_key,
        version,
        header,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::{
        add_partitions_to_txn_request, alter_configs_request, create_acls_request,
        create_partitions_request, create_topics_request, delete_acls_request,
        delete_records_request, delete_topics_request, describe_configs_request,
        describe_producers_request, describe_topic_partitions_request, fetch_request,
        incremental_alter_configs_request, join_group_request, leave_group_request,
        list_offsets_request, metadata_request, offset_commit_request, offset_delete_request,
        offset_fetch_request, produce_request, sync_group_request, txn_offset_commit_request,
        AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, AlterConfigsRequest, ApiVersionsRequest,
        BrokerId, CreateAclsRequest, CreatePartitionsRequest, CreateTopicsRequest,
        DeleteAclsRequest, DeleteGroupsRequest, DeleteRecordsRequest, DeleteTopicsRequest,
        DescribeAclsRequest, DescribeClusterRequest, DescribeConfigsRequest, DescribeGroupsRequest,
        DescribeProducersRequest, DescribeTopicPartitionsRequest, DescribeTransactionsRequest,
        EndTxnRequest, FetchRequest, FindCoordinatorRequest, GroupId, HeartbeatRequest,
        IncrementalAlterConfigsRequest, InitProducerIdRequest, JoinGroupRequest, LeaveGroupRequest,
        ListGroupsRequest, ListOffsetsRequest, ListTransactionsRequest, MetadataRequest,
        OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest, ProduceRequest, ProducerId,
        RequestKind, SyncGroupRequest, TopicName, TransactionalId, TxnOffsetCommitRequest,
    };
    use kafka_protocol::protocol::{Encodable, StrBytes};
    use proptest::prelude::*;

    use crate::kafka::versions::SERVED;

    /// Every (API, version) kpfs serves.
    fn served_pairs() -> Vec<(ApiKey, i16)> {
        SERVED
            .iter()
            .flat_map(|&(key, min, max)| (min..=max).map(move |version| (key, version)))
            .collect()
    }

    fn text(s: &'static str) -> StrBytes {
        StrBytes::from_static_str(s)
    }

    fn topic_name() -> TopicName {
        TopicName(text("t"))
    }

    fn group_id() -> GroupId {
        GroupId(text("g"))
    }

    /// A request of `key` with its arrays, strings and nullable fields filled in, as far
    /// as `version` has them, so that a fuzzed copy reaches every part of its decoder.
    fn sample(key: ApiKey, version: i16) -> RequestKind {
        let flexible = key.request_header_version(version) >= 2;
        let mut kind = match key {
            ApiKey::Produce => {
                let mut p = produce_request::PartitionProduceData::default();
                p.records = Some(Bytes::from_static(b"records are bytes to the decoder"));
                let mut t = produce_request::TopicProduceData::default();
                t.name = topic_name();
                t.partition_data = vec![p.clone(), p];
                let mut r = ProduceRequest::default();
                r.acks = -1;
                r.timeout_ms = 5000;
                r.topic_data = vec![t];
                RequestKind::Produce(r)
            }
            ApiKey::Fetch => {
                let mut p = fetch_request::FetchPartition::default();
                p.fetch_offset = 5;
                p.partition_max_bytes = 1 << 20;
                let mut t = fetch_request::FetchTopic::default();
                t.topic = topic_name();
                t.partitions = vec![p.clone(), p];
                let mut r = FetchRequest::default();
                r.max_wait_ms = 500;
                r.min_bytes = 1;
                r.max_bytes = 1 << 20;
                r.topics = vec![t];
                RequestKind::Fetch(r)
            }
            ApiKey::ListOffsets => {
                let mut p = list_offsets_request::ListOffsetsPartition::default();
                p.timestamp = -1;
                let mut t = list_offsets_request::ListOffsetsTopic::default();
                t.name = topic_name();
                t.partitions = vec![p];
                let mut r = ListOffsetsRequest::default();
                r.replica_id = BrokerId(-1);
                r.topics = vec![t];
                RequestKind::ListOffsets(r)
            }
            ApiKey::Metadata => {
                let mut t = metadata_request::MetadataRequestTopic::default();
                t.name = Some(topic_name());
                let mut r = MetadataRequest::default();
                r.topics = Some(vec![t.clone(), t]);
                RequestKind::Metadata(r)
            }
            ApiKey::FindCoordinator => {
                let mut r = FindCoordinatorRequest::default();
                if version < 4 {
                    r.key = text("group");
                } else {
                    r.coordinator_keys = vec![text("group"), text("other")];
                }
                RequestKind::FindCoordinator(r)
            }
            ApiKey::ApiVersions => RequestKind::ApiVersions(ApiVersionsRequest::default()),
            ApiKey::CreateTopics => {
                let mut c = create_topics_request::CreatableTopicConfig::default();
                c.name = text("retention.ms");
                c.value = Some(text("1000"));
                let mut t = create_topics_request::CreatableTopic::default();
                t.name = topic_name();
                t.num_partitions = 1;
                t.replication_factor = 1;
                t.configs = vec![c];
                let mut r = CreateTopicsRequest::default();
                r.topics = vec![t];
                r.timeout_ms = 1000;
                RequestKind::CreateTopics(r)
            }
            ApiKey::DeleteTopics => {
                let mut r = DeleteTopicsRequest::default();
                if version < 6 {
                    r.topic_names = vec![topic_name()];
                } else {
                    let mut t = delete_topics_request::DeleteTopicState::default();
                    t.name = Some(topic_name());
                    r.topics = vec![t];
                }
                RequestKind::DeleteTopics(r)
            }
            ApiKey::DeleteRecords => {
                let mut p = delete_records_request::DeleteRecordsPartition::default();
                p.offset = 3;
                let mut t = delete_records_request::DeleteRecordsTopic::default();
                t.name = topic_name();
                t.partitions = vec![p];
                let mut r = DeleteRecordsRequest::default();
                r.topics = vec![t];
                RequestKind::DeleteRecords(r)
            }
            ApiKey::InitProducerId => {
                let mut r = InitProducerIdRequest::default();
                r.transaction_timeout_ms = -1;
                RequestKind::InitProducerId(r)
            }
            ApiKey::DescribeConfigs => {
                let mut res = describe_configs_request::DescribeConfigsResource::default();
                res.resource_type = 2;
                res.resource_name = text("t");
                res.configuration_keys = Some(vec![text("retention.ms")]);
                let mut r = DescribeConfigsRequest::default();
                r.resources = vec![res];
                RequestKind::DescribeConfigs(r)
            }
            ApiKey::AlterConfigs => {
                let mut c = alter_configs_request::AlterableConfig::default();
                c.name = text("retention.ms");
                c.value = Some(text("1000"));
                let mut res = alter_configs_request::AlterConfigsResource::default();
                res.resource_type = 2;
                res.resource_name = text("t");
                res.configs = vec![c];
                let mut r = AlterConfigsRequest::default();
                r.resources = vec![res];
                RequestKind::AlterConfigs(r)
            }
            ApiKey::IncrementalAlterConfigs => {
                let mut c = incremental_alter_configs_request::AlterableConfig::default();
                c.name = text("retention.ms");
                c.value = Some(text("1000"));
                let mut res = incremental_alter_configs_request::AlterConfigsResource::default();
                res.resource_type = 2;
                res.resource_name = text("t");
                res.configs = vec![c];
                let mut r = IncrementalAlterConfigsRequest::default();
                r.resources = vec![res];
                RequestKind::IncrementalAlterConfigs(r)
            }
            ApiKey::DescribeCluster => {
                RequestKind::DescribeCluster(DescribeClusterRequest::default())
            }
            ApiKey::DescribeTopicPartitions => {
                let mut t = describe_topic_partitions_request::TopicRequest::default();
                t.name = topic_name();
                let mut cursor = describe_topic_partitions_request::Cursor::default();
                cursor.topic_name = topic_name();
                let mut r = DescribeTopicPartitionsRequest::default();
                r.topics = vec![t.clone(), t];
                r.response_partition_limit = 2000;
                r.cursor = Some(cursor);
                RequestKind::DescribeTopicPartitions(r)
            }
            ApiKey::JoinGroup => {
                let mut p = join_group_request::JoinGroupRequestProtocol::default();
                p.name = text("range");
                p.metadata = Bytes::from_static(b"subscription");
                let mut r = JoinGroupRequest::default();
                r.group_id = group_id();
                r.session_timeout_ms = 10_000;
                r.rebalance_timeout_ms = 30_000;
                r.member_id = text("member");
                if version >= 5 {
                    r.group_instance_id = Some(text("instance"));
                }
                r.protocol_type = text("consumer");
                r.protocols = vec![p.clone(), p];
                if version >= 8 {
                    r.reason = Some(text("reason"));
                }
                RequestKind::JoinGroup(r)
            }
            ApiKey::SyncGroup => {
                let mut a = sync_group_request::SyncGroupRequestAssignment::default();
                a.member_id = text("member");
                a.assignment = Bytes::from_static(b"assignment");
                let mut r = SyncGroupRequest::default();
                r.group_id = group_id();
                r.generation_id = 1;
                r.member_id = text("member");
                if version >= 3 {
                    r.group_instance_id = Some(text("instance"));
                }
                if version >= 5 {
                    r.protocol_type = Some(text("consumer"));
                    r.protocol_name = Some(text("range"));
                }
                r.assignments = vec![a.clone(), a];
                RequestKind::SyncGroup(r)
            }
            ApiKey::Heartbeat => {
                let mut r = HeartbeatRequest::default();
                r.group_id = group_id();
                r.generation_id = 1;
                r.member_id = text("member");
                if version >= 3 {
                    r.group_instance_id = Some(text("instance"));
                }
                RequestKind::Heartbeat(r)
            }
            ApiKey::LeaveGroup => {
                let mut r = LeaveGroupRequest::default();
                r.group_id = group_id();
                if version < 3 {
                    r.member_id = text("member");
                } else {
                    let mut m = leave_group_request::MemberIdentity::default();
                    m.member_id = text("member");
                    m.group_instance_id = Some(text("instance"));
                    if version >= 5 {
                        m.reason = Some(text("reason"));
                    }
                    r.members = vec![m.clone(), m];
                }
                RequestKind::LeaveGroup(r)
            }
            ApiKey::OffsetCommit => {
                let mut p = offset_commit_request::OffsetCommitRequestPartition::default();
                p.committed_offset = 5;
                p.committed_metadata = Some(text("metadata"));
                let mut t = offset_commit_request::OffsetCommitRequestTopic::default();
                t.name = topic_name();
                t.partitions = vec![p.clone(), p];
                let mut r = OffsetCommitRequest::default();
                r.group_id = group_id();
                r.member_id = text("member");
                if version >= 7 {
                    r.group_instance_id = Some(text("instance"));
                }
                r.topics = vec![t];
                RequestKind::OffsetCommit(r)
            }
            ApiKey::OffsetFetch => {
                let mut r = OffsetFetchRequest::default();
                if version < 8 {
                    let mut t = offset_fetch_request::OffsetFetchRequestTopic::default();
                    t.name = topic_name();
                    t.partition_indexes = vec![0, 1];
                    r.group_id = group_id();
                    r.topics = Some(vec![t]);
                } else {
                    let mut t = offset_fetch_request::OffsetFetchRequestTopics::default();
                    t.name = topic_name();
                    t.partition_indexes = vec![0, 1];
                    let mut g = offset_fetch_request::OffsetFetchRequestGroup::default();
                    g.group_id = group_id();
                    if version >= 9 {
                        g.member_id = Some(text("member"));
                    }
                    g.topics = Some(vec![t]);
                    r.groups = vec![g.clone(), g];
                }
                RequestKind::OffsetFetch(r)
            }
            ApiKey::DescribeGroups => {
                let mut r = DescribeGroupsRequest::default();
                r.groups = vec![group_id(), group_id()];
                RequestKind::DescribeGroups(r)
            }
            ApiKey::ListGroups => {
                let mut r = ListGroupsRequest::default();
                if version >= 4 {
                    r.states_filter = vec![text("Stable")];
                }
                if version >= 5 {
                    r.types_filter = vec![text("classic")];
                }
                RequestKind::ListGroups(r)
            }
            ApiKey::DeleteGroups => {
                let mut r = DeleteGroupsRequest::default();
                r.groups_names = vec![group_id(), group_id()];
                RequestKind::DeleteGroups(r)
            }
            ApiKey::OffsetDelete => {
                let mut t = offset_delete_request::OffsetDeleteRequestTopic::default();
                t.name = topic_name();
                t.partitions = vec![offset_delete_request::OffsetDeleteRequestPartition::default()];
                let mut r = OffsetDeleteRequest::default();
                r.group_id = group_id();
                r.topics = vec![t];
                RequestKind::OffsetDelete(r)
            }
            ApiKey::DescribeProducers => {
                let mut t = describe_producers_request::TopicRequest::default();
                t.name = topic_name();
                t.partition_indexes = vec![0, 1];
                let mut r = DescribeProducersRequest::default();
                r.topics = vec![t.clone(), t];
                RequestKind::DescribeProducers(r)
            }
            ApiKey::DescribeAcls => {
                let mut r = DescribeAclsRequest::default();
                r.resource_type_filter = 2;
                r.resource_name_filter = Some(text("t"));
                r.pattern_type_filter = 3;
                r.principal_filter = Some(text("User:alice"));
                r.host_filter = Some(text("*"));
                r.operation = 3;
                r.permission_type = 3;
                RequestKind::DescribeAcls(r)
            }
            ApiKey::CreateAcls => {
                let mut c = create_acls_request::AclCreation::default();
                c.resource_type = 2;
                c.resource_name = text("t");
                c.resource_pattern_type = 3;
                c.principal = text("User:alice");
                c.host = text("*");
                c.operation = 3;
                c.permission_type = 3;
                let mut r = CreateAclsRequest::default();
                r.creations = vec![c.clone(), c];
                RequestKind::CreateAcls(r)
            }
            ApiKey::DeleteAcls => {
                let mut f = delete_acls_request::DeleteAclsFilter::default();
                f.resource_type_filter = 1;
                f.resource_name_filter = Some(text("t"));
                f.pattern_type_filter = 2;
                f.principal_filter = Some(text("User:alice"));
                f.host_filter = Some(text("*"));
                f.operation = 1;
                f.permission_type = 1;
                let mut r = DeleteAclsRequest::default();
                r.filters = vec![f.clone(), f];
                RequestKind::DeleteAcls(r)
            }
            ApiKey::CreatePartitions => {
                let mut a = create_partitions_request::CreatePartitionsAssignment::default();
                a.broker_ids = vec![BrokerId(1)];
                let mut t = create_partitions_request::CreatePartitionsTopic::default();
                t.name = topic_name();
                t.count = 3;
                t.assignments = Some(vec![a.clone(), a]);
                let mut r = CreatePartitionsRequest::default();
                r.topics = vec![t];
                r.timeout_ms = 1000;
                RequestKind::CreatePartitions(r)
            }
            ApiKey::AddPartitionsToTxn => {
                let mut t = add_partitions_to_txn_request::AddPartitionsToTxnTopic::default();
                t.name = topic_name();
                t.partitions = vec![0, 1];
                let mut r = AddPartitionsToTxnRequest::default();
                r.v3_and_below_transactional_id = TransactionalId(text("tx"));
                r.v3_and_below_producer_id = ProducerId(7);
                r.v3_and_below_topics = vec![t.clone(), t];
                RequestKind::AddPartitionsToTxn(r)
            }
            ApiKey::AddOffsetsToTxn => {
                let mut r = AddOffsetsToTxnRequest::default();
                r.transactional_id = TransactionalId(text("tx"));
                r.producer_id = ProducerId(7);
                r.group_id = GroupId(text("g"));
                RequestKind::AddOffsetsToTxn(r)
            }
            ApiKey::EndTxn => {
                let mut r = EndTxnRequest::default();
                r.transactional_id = TransactionalId(text("tx"));
                r.producer_id = ProducerId(7);
                r.committed = true;
                RequestKind::EndTxn(r)
            }
            ApiKey::TxnOffsetCommit => {
                let mut p = txn_offset_commit_request::TxnOffsetCommitRequestPartition::default();
                p.committed_offset = 5;
                p.committed_metadata = Some(text("m"));
                let mut t = txn_offset_commit_request::TxnOffsetCommitRequestTopic::default();
                t.name = topic_name();
                t.partitions = vec![p.clone(), p];
                let mut r = TxnOffsetCommitRequest::default();
                r.transactional_id = TransactionalId(text("tx"));
                r.group_id = GroupId(text("g"));
                r.producer_id = ProducerId(7);
                r.topics = vec![t];
                if version >= 3 {
                    r.generation_id = 1;
                    r.member_id = text("m-1");
                    r.group_instance_id = Some(text("i"));
                }
                RequestKind::TxnOffsetCommit(r)
            }
            ApiKey::ListTransactions => {
                let mut r = ListTransactionsRequest::default();
                r.state_filters = vec![text("Ongoing")];
                r.producer_id_filters = vec![ProducerId(7)];
                if version >= 1 {
                    r.duration_filter = 1000;
                }
                RequestKind::ListTransactions(r)
            }
            ApiKey::DescribeTransactions => {
                let mut r = DescribeTransactionsRequest::default();
                r.transactional_ids =
                    vec![TransactionalId(text("tx")), TransactionalId(text("ty"))];
                RequestKind::DescribeTransactions(r)
            }
            other => panic!("{other:?} is not served: give it a sample"),
        };
        if flexible {
            // A tagged field kpfs does not know: the decoder must skip it.
            let tag = (99, Bytes::from_static(b"tag"));
            match &mut kind {
                RequestKind::Produce(r) => r.unknown_tagged_fields.extend([tag]),
                RequestKind::Fetch(r) => r.unknown_tagged_fields.extend([tag]),
                RequestKind::Metadata(r) => r.unknown_tagged_fields.extend([tag]),
                _ => {}
            }
        }
        kind
    }

    /// The frame (without its size prefix) of `sample(key, version)`.
    fn sample_frame(key: ApiKey, version: i16) -> Vec<u8> {
        let mut buf = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(7)
            .with_client_id(Some(text("fuzz")))
            .encode(&mut buf, key.request_header_version(version))
            .unwrap();
        sample(key, version)
            .encode(&mut buf, version)
            .unwrap_or_else(|e| panic!("{key:?} v{version}: {e}"));
        buf.to_vec()
    }

    /// A valid header of `key` at `version` and then `body`.
    fn header_then(key: ApiKey, version: i16, body: &[u8]) -> Vec<u8> {
        let mut buf = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(7)
            .encode(&mut buf, key.request_header_version(version))
            .unwrap();
        buf.extend_from_slice(body);
        buf.to_vec()
    }

    /// A frame that starts with a served key and version decodes to that API or is
    /// refused as malformed, nothing else.
    fn decoded_or_malformed(
        frame: Vec<u8>,
        key: ApiKey,
        version: i16,
    ) -> Result<(), TestCaseError> {
        match decode_request(frame) {
            Ok(request) => {
                prop_assert_eq!(request.api_key, key);
                prop_assert_eq!(request.version, version);
            }
            Err(RequestError::Malformed {
                api_key,
                version: v,
                ..
            }) => prop_assert_eq!((api_key, v), (key, version)),
            Err(e) => prop_assert!(false, "{key:?} v{version}: {e}"),
        }
        Ok(())
    }

    #[test]
    fn every_served_request_decodes_whole_and_is_refused_cut_anywhere() {
        for (key, version) in served_pairs() {
            let frame = sample_frame(key, version);
            let request =
                decode_request(frame.clone()).unwrap_or_else(|e| panic!("{key:?} v{version}: {e}"));
            assert_eq!(request.header.correlation_id, 7);
            let mut again = BytesMut::new();
            request.body.encode(&mut again, version).unwrap();
            assert!(
                frame.ends_with(&again),
                "{key:?} v{version}: decoded body encodes differently"
            );
            for cut in 0..frame.len() {
                assert!(
                    decode_request(frame[..cut].to_vec()).is_err(),
                    "{key:?} v{version} cut at {cut} of {} decoded",
                    frame.len()
                );
            }
        }
    }

    /// A byte source with no clock: what it holds, then the end.
    struct Bytes2(io::Cursor<Vec<u8>>);

    impl Read for Bytes2 {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.0.read(buf)
        }
    }

    impl TimedRead for Bytes2 {
        fn set_read_deadline(&mut self, _: Duration) -> io::Result<()> {
            Ok(())
        }
    }

    fn read(bytes: &[u8], max: usize) -> Result<Vec<u8>, FrameError> {
        read_frame(
            &mut Bytes2(io::Cursor::new(bytes.to_vec())),
            max,
            Duration::from_secs(10),
        )
    }

    fn framed(body: &[u8]) -> Vec<u8> {
        let mut out = (body.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(body);
        out
    }

    fn metadata_request(version: i16) -> Vec<u8> {
        let mut buf = BytesMut::new();
        let header = RequestHeader::default()
            .with_request_api_key(ApiKey::Metadata as i16)
            .with_request_api_version(version)
            .with_correlation_id(7);
        header
            .encode(&mut buf, ApiKey::Metadata.request_header_version(version))
            .unwrap();
        MetadataRequest::default()
            .with_topics(None)
            .encode(&mut buf, version)
            .unwrap();
        buf.to_vec()
    }

    #[test]
    fn a_whole_frame_is_returned_without_its_prefix() {
        let body = metadata_request(4);
        assert_eq!(read(&framed(&body), 1024).unwrap(), body);
    }

    #[test]
    fn end_between_frames_is_a_close_and_inside_one_a_truncation() {
        assert!(matches!(read(&[], 1024), Err(FrameError::Closed)));
        assert!(matches!(
            read(&[0, 0], 1024),
            Err(FrameError::Truncated {
                received: 2,
                size: 4
            })
        ));
        let whole = framed(&metadata_request(4));
        assert!(matches!(
            read(&whole[..whole.len() - 1], 1024),
            Err(FrameError::Truncated { .. })
        ));
    }

    #[test]
    fn sizes_over_the_limit_or_under_a_header_are_refused_before_reading_the_body() {
        let huge = i32::MAX.to_be_bytes();
        assert!(matches!(
            read(&huge, 1024),
            Err(FrameError::TooLarge { max: 1024, .. })
        ));
        assert!(matches!(
            read(&(-1i32).to_be_bytes(), 1024),
            Err(FrameError::TooSmall { size: -1 })
        ));
        assert!(matches!(
            read(&framed(&[0; 7]), 1024),
            Err(FrameError::TooSmall { size: 7 })
        ));
    }

    #[test]
    fn a_request_decodes_at_its_version() {
        let request = decode_request(metadata_request(4)).unwrap();
        assert_eq!(request.api_key, ApiKey::Metadata);
        assert_eq!(request.header.correlation_id, 7);
        assert!(matches!(request.body, RequestKind::Metadata(_)));
    }

    #[test]
    fn unknown_keys_and_unsupported_versions_are_refused() {
        let mut unknown = metadata_request(4);
        unknown[0..2].copy_from_slice(&999i16.to_be_bytes());
        assert!(matches!(
            decode_request(unknown),
            Err(RequestError::UnknownApi { api_key: 999, .. })
        ));
        let mut future = metadata_request(4);
        future[2..4].copy_from_slice(&99i16.to_be_bytes());
        assert!(matches!(
            decode_request(future),
            Err(RequestError::UnsupportedVersion { .. })
        ));
        let mut api_versions = metadata_request(4);
        api_versions[0..2].copy_from_slice(&(ApiKey::ApiVersions as i16).to_be_bytes());
        api_versions[2..4].copy_from_slice(&99i16.to_be_bytes());
        assert!(matches!(
            decode_request(api_versions),
            Err(RequestError::ApiVersionsUnsupported {
                version: 99,
                correlation_id: 7
            })
        ));
    }

    #[test]
    fn bytes_after_the_body_are_ignored_as_kafka_does() {
        // librdkafka 2.16's Metadata v12 for every topic, as captured from confluent-kafka's
        // AdminClient.list_topics: header (key 3, v12, correlation id 3, client id
        // "rdkafka", no tags), then its 4-byte topic count placeholder 0 0 0 0, which is a
        // whole body (null topics, no auto-creation, no authorized operations, no tags),
        // then the fields it meant: 1 0 0.
        let mut frame = vec![0, 3, 0, 12, 0, 0, 0, 3, 0, 7];
        frame.extend_from_slice(b"rdkafka");
        frame.extend_from_slice(&[0, 0, 0, 0, 0, 1, 0, 0]);
        let request = decode_request(frame).unwrap();
        assert_eq!(request.header.correlation_id, 3);
        let RequestKind::Metadata(metadata) = request.body else {
            panic!("not a Metadata request: {:?}", request.body);
        };
        assert_eq!(metadata.topics, None);
        assert!(!metadata.allow_auto_topic_creation);
    }

    #[test]
    fn an_array_count_over_the_frame_is_refused_without_allocating_it() {
        // Metadata v0 whose topic count is i32::MAX: upstream kafka-protocol 0.18.0 asked
        // for ~150 GiB here and aborted the process.
        let mut frame = metadata_request(0);
        let at = frame.len() - 4;
        frame[at..].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(matches!(
            decode_request(frame),
            Err(RequestError::Malformed { .. })
        ));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Random bytes after a valid key and version never panic the decoder.
        #[test]
        fn random_bodies_never_panic(
            key in 0i16..80,
            version in 0i16..20,
            body in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let mut frame = key.to_be_bytes().to_vec();
            frame.extend_from_slice(&version.to_be_bytes());
            frame.extend_from_slice(&body);
            let _ = decode_request(frame);
        }

        /// Random bytes after a valid header of every served API and version: decoded as
        /// that API or refused as malformed, never a panic or an allocation sized by a
        /// count read off the wire.
        #[test]
        fn served_requests_with_random_bodies_are_decoded_or_refused(
            (key, version) in proptest::sample::select(served_pairs()),
            body in proptest::collection::vec(any::<u8>(), 0..400),
        ) {
            decoded_or_malformed(header_then(key, version, &body), key, version)?;
        }

        /// A valid request of every served API and version with bytes overwritten,
        /// inserted or cut after its key and version: decoded or refused, never a panic.
        #[test]
        fn mutated_served_requests_are_decoded_or_refused(
            (key, version) in proptest::sample::select(served_pairs()),
            overwrites in proptest::collection::vec((any::<proptest::sample::Index>(), any::<u8>()), 0..6),
            insert in proptest::option::of((any::<proptest::sample::Index>(), proptest::collection::vec(any::<u8>(), 1..8))),
            cut in proptest::option::of(any::<proptest::sample::Index>()),
        ) {
            let mut frame = sample_frame(key, version);
            // The first four bytes name the API and version: leave them be.
            let body = 4..frame.len();
            for (at, byte) in overwrites {
                frame[body.start + at.index(body.len())] = byte;
            }
            if let Some((at, bytes)) = insert {
                let at = 4 + at.index(frame.len() - 3);
                frame.splice(at..at, bytes);
            }
            if let Some(at) = cut {
                // read_frame never returns less than a header's first fields.
                let shortest = MIN_REQUEST_BYTES;
                frame.truncate(shortest + at.index(frame.len() - shortest + 1));
            }
            decoded_or_malformed(frame, key, version)?;
        }

        /// Every prefix of a valid request is refused or decoded, never a panic.
        #[test]
        fn truncated_requests_never_panic(version in 0i16..13, cut in 0usize..64) {
            let whole = metadata_request(version);
            let cut = cut.min(whole.len());
            let _ = decode_request(whole[..cut].to_vec());
            let _ = read(&framed(&whole)[..cut], 1 << 20);
        }

        /// Any byte stream gives a frame or a refusal, never a panic or a frame over max.
        #[test]
        fn random_streams_frame_within_bounds(stream in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(frame) = read(&stream, 32) {
                prop_assert!(frame.len() <= 32);
            }
        }
    }
}
