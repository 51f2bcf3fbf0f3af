//! The floor for kpfs's wire benchmarks (scripts/bench, the `wire` scenarios): a Kafka
//! listener built as kpfs's is, over no storage. It frames, decodes and encodes with the
//! listener's own code (`kpfs::kafka::frame` and `response`, kafka-protocol's messages) and
//! has the same threads: an acceptor, and one thread per connection that reads a whole
//! request, answers it and only then reads the next, with the same socket options. Produce is
//! acknowledged at once: the batches are kept in memory as they arrived (the request's
//! buffer, not a copy; no file, no validation beyond the batch header) so that Fetch can
//! serve them, written from memory with `writev`. Whatever kpfs costs above this is the
//! engine's; whatever this costs is the client's, TCP's and the protocol's.
//!
//! ```text
//! cargo run --release --features internals --example wire_floor -- ADDRESS [PORT_FILE]
//! ```
//! With PORT_FILE, the bound port is written there once the floor listens (so ADDRESS can
//! have port 0). Serves ApiVersions as the listener does (the same versions, the group
//! APIs included), FindCoordinator with the listener's code but no coordinator
//! (`COORDINATOR_NOT_AVAILABLE`: the benchmark's consumers assign their partitions and
//! commit nothing), Metadata (every asked-for topic exists, with one
//! partition), Produce, Fetch (with long poll), ListOffsets (earliest and latest) and
//! InitProducerId; any other request closes its connection with a line on stderr. Memory grows with what is produced: the benchmark
//! sizes its runs for that. Runs until killed.
#![allow(
    clippy::disallowed_methods,
    reason = "a floor has no engine clock: long-poll deadlines are real time, as the listener's"
)]

use std::collections::HashMap;
use std::io::{self, IoSlice, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, InitProducerIdResponse, ListOffsetsRequest,
    ListOffsetsResponse, MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse,
    ProducerId, RequestKind, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use kpfs::engine::format::decode_header;
use kpfs::kafka::frame::{decode_request, read_frame, FrameError};
use kpfs::kafka::response::{encode_response, framed_response, records_marker, splice_records};
use kpfs::kafka::{api_versions, find_coordinator};
use parking_lot::{Condvar, Mutex};

/// Kafka's defaults, which kpfs keeps: `socket.request.max.bytes`,
/// `connections.max.idle.ms`.
const REQUEST_MAX_BYTES: usize = 100 * 1024 * 1024;
const IDLE: Duration = Duration::from_secs(600);
/// As the listener's connection threads (src/kafka/mod.rs).
const CONNECTION_STACK_BYTES: usize = 256 * 1024;
const NODE_ID: i32 = 1;

/// One topic's partition: the produced batches, in order.
#[derive(Default)]
struct Log {
    batches: Vec<Kept>,
    next_offset: u64,
}

/// A produced batch with the offsets the floor gave it (its bytes keep the producer's
/// base offset; Fetch writes `base` in front of the rest).
struct Kept {
    base: u64,
    last: u64,
    bytes: Bytes,
}

#[derive(Default)]
struct Partition {
    log: Mutex<Log>,
    appended: Condvar,
}

struct Floor {
    address: SocketAddr,
    topics: Mutex<HashMap<String, Arc<Partition>>>,
    next_producer_id: AtomicI64,
}

impl Floor {
    /// Every topic exists: the first mention creates it.
    fn partition(&self, topic: &str) -> Arc<Partition> {
        self.topics
            .lock()
            .entry(topic.to_string())
            .or_default()
            .clone()
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let address: SocketAddr = args
        .next()
        .expect("usage: wire_floor ADDRESS [PORT_FILE]")
        .parse()
        .expect("an address such as 127.0.0.1:9093");
    let socket = TcpListener::bind(address).expect("bind the floor's address");
    let floor = Arc::new(Floor {
        address: socket.local_addr().expect("the bound address"),
        topics: Mutex::new(HashMap::new()),
        next_producer_id: AtomicI64::new(1000),
    });
    if let Some(port_file) = args.next() {
        // Whole or absent for a reader that polls it: written aside, then renamed.
        let aside = format!("{port_file}.tmp");
        std::fs::write(&aside, format!("{}\n", floor.address.port()))
            .and_then(|()| std::fs::rename(&aside, &port_file))
            .expect("write the port file");
    }
    eprintln!("wire_floor: listening on {}", floor.address);
    for accepted in socket.incoming() {
        let stream = match accepted {
            Ok(stream) => stream,
            Err(e) => {
                eprintln!("wire_floor: accept: {e}");
                continue;
            }
        };
        let floor = floor.clone();
        std::thread::Builder::new()
            .stack_size(CONNECTION_STACK_BYTES)
            .spawn(move || serve(&floor, stream))
            .expect("start a connection thread");
    }
}

fn serve(floor: &Floor, mut stream: TcpStream) {
    if let Err(e) = stream
        .set_nodelay(true)
        .and_then(|()| stream.set_write_timeout(Some(IDLE)))
    {
        eprintln!("wire_floor: socket setup: {e}");
        return;
    }
    let reason = loop {
        let frame = match read_frame(&mut stream, REQUEST_MAX_BYTES, IDLE) {
            Ok(frame) => frame,
            Err(FrameError::Closed) => return,
            Err(e) => break e.to_string(),
        };
        let request = match decode_request(frame) {
            Ok(request) => request,
            Err(e) => break e.to_string(),
        };
        let (api_key, version) = (request.api_key, request.version);
        let correlation_id = request.header.correlation_id;
        let body = match request.body {
            RequestKind::ApiVersions(_) => ResponseKind::ApiVersions(api_versions(0)),
            RequestKind::FindCoordinator(r) => {
                ResponseKind::FindCoordinator(find_coordinator(&r, version, |_| {
                    Err("the wire floor has no coordinator".into())
                }))
            }
            RequestKind::Metadata(r) => ResponseKind::Metadata(metadata(floor, &r)),
            RequestKind::Produce(r) => match produce(floor, r) {
                Some(response) => ResponseKind::Produce(response),
                // acks=0: Kafka answers nothing.
                None => continue,
            },
            RequestKind::Fetch(r) => match fetch(floor, &r, version, correlation_id) {
                Ok(response) => match write_all(&mut stream, response) {
                    Ok(()) => continue,
                    Err(e) if client_gone(&e) => return,
                    Err(e) => break format!("write: {e}"),
                },
                Err(e) => break e.to_string(),
            },
            RequestKind::ListOffsets(r) => {
                ResponseKind::ListOffsets(list_offsets(floor, &r, version))
            }
            RequestKind::InitProducerId(_) => {
                let mut response = InitProducerIdResponse::default();
                response.producer_id =
                    ProducerId(floor.next_producer_id.fetch_add(1, Ordering::Relaxed));
                ResponseKind::InitProducerId(response)
            }
            other => break format!("{other:?}: not served by the floor"),
        };
        let written = framed_response(api_key, version, correlation_id, &body)
            .and_then(|frame| stream.write_all(&frame));
        match written {
            Ok(()) => {}
            Err(e) if client_gone(&e) => return,
            Err(e) => break format!("write: {e}"),
        }
    };
    eprintln!("wire_floor: closing a connection: {reason}");
}

/// The client closed first (e.g. a consumer leaving while its Fetch waited): nothing
/// wrong with the connection to report.
fn client_gone(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
    )
}

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn metadata(floor: &Floor, request: &MetadataRequest) -> MetadataResponse {
    let mut broker = MetadataResponseBroker::default();
    broker.node_id = BrokerId(NODE_ID);
    broker.host = str_bytes(&floor.address.ip().to_string());
    broker.port = i32::from(floor.address.port());
    let mut response = MetadataResponse::default();
    response.brokers = vec![broker];
    response.cluster_id = Some(str_bytes("wire-floor"));
    response.controller_id = BrokerId(NODE_ID);
    let names: Vec<String> = match &request.topics {
        Some(topics) if !topics.is_empty() => topics
            .iter()
            .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
            .collect(),
        _ => floor.topics.lock().keys().cloned().collect(),
    };
    response.topics = names
        .into_iter()
        .map(|name| {
            floor.partition(&name);
            let mut partition = MetadataResponsePartition::default();
            partition.leader_id = BrokerId(NODE_ID);
            partition.replica_nodes = vec![BrokerId(NODE_ID)];
            partition.isr_nodes = vec![BrokerId(NODE_ID)];
            let mut topic = MetadataResponseTopic::default();
            topic.name = Some(TopicName(str_bytes(&name)));
            topic.partitions = vec![partition];
            topic
        })
        .collect();
    response
}

/// Offsets for each partition's batches, which stay as the client sent them.
fn produce(floor: &Floor, request: ProduceRequest) -> Option<ProduceResponse> {
    let mut response = ProduceResponse::default();
    for topic_data in request.topic_data {
        let partition = floor.partition(&topic_data.name.0);
        let mut out = TopicProduceResponse::default();
        out.name = topic_data.name;
        for data in topic_data.partition_data {
            let mut result = PartitionProduceResponse::default();
            result.index = data.index;
            result.log_append_time_ms = -1;
            match append(&partition, data.records.unwrap_or_default()) {
                Some(base_offset) => result.base_offset = base_offset as i64,
                None => {
                    result.base_offset = -1;
                    result.error_code = ResponseError::CorruptMessage.code();
                }
            }
            out.partition_responses.push(result);
        }
        response.responses.push(out);
    }
    (request.acks != 0).then_some(response)
}

/// The batches of `records` at the partition's next offsets: the first one's base
/// offset, or `None` when the batch headers do not add up.
fn append(partition: &Partition, mut records: Bytes) -> Option<u64> {
    let mut batches = Vec::new();
    let mut count = 0;
    while !records.is_empty() {
        let header = decode_header(&records).ok()?;
        if header.size > records.len() {
            return None;
        }
        let records_in_batch = header.last_offset() - header.base_offset + 1;
        batches.push((count, records_in_batch, records.split_to(header.size)));
        count += records_in_batch;
    }
    let mut log = partition.log.lock();
    let base = log.next_offset;
    log.batches
        .extend(batches.into_iter().map(|(delta, n, bytes)| Kept {
            base: base + delta,
            last: base + delta + n - 1,
            bytes,
        }));
    log.next_offset += count;
    partition.appended.notify_all();
    Some(base)
}

/// A Fetch response, framed, with its records as slices of the kept batches.
struct FetchOut {
    pieces: Vec<Bytes>,
    /// Per partition with records: each batch's base offset and bytes.
    records: Vec<Vec<([u8; 8], Bytes)>>,
}

/// Each asked-for partition from its offset, whole batches up to the byte limits; when
/// fewer than `min_bytes` are there, waits up to `max_wait_ms` for an append to the first
/// asked-for topic (the benchmark's consumers ask for one).
fn fetch(
    floor: &Floor,
    request: &FetchRequest,
    version: i16,
    correlation_id: i32,
) -> io::Result<FetchOut> {
    let deadline = Instant::now() + Duration::from_millis(request.max_wait_ms.max(0) as u64);
    let (response, records) = loop {
        let (response, records) = fetch_once(floor, request);
        let bytes: usize = records.iter().flatten().map(|(_, b)| b.len()).sum();
        let now = Instant::now();
        let Some(first) = request.topics.first() else {
            break (response, records);
        };
        if bytes as i64 >= i64::from(request.min_bytes) || now >= deadline {
            break (response, records);
        }
        let partition = floor.partition(&first.topic.0);
        let mut log = partition.log.lock();
        let seen = log.next_offset;
        while log.next_offset == seen {
            if partition
                .appended
                .wait_until(&mut log, deadline)
                .timed_out()
            {
                break;
            }
        }
    };
    let body = ResponseKind::Fetch(response);
    let mut encoded = encode_response(ApiKey::Fetch, version, correlation_id, &body)?;
    let lens: Vec<u64> = records
        .iter()
        .map(|p| p.iter().map(|(_, b)| b.len() as u64).sum())
        .collect();
    let mut pieces = splice_records(encoded.split_off(4).freeze(), version, &lens)?;
    let size: usize =
        pieces.iter().map(Bytes::len).sum::<usize>() + lens.iter().sum::<u64>() as usize;
    let mut first = BytesMut::from(&(size as i32).to_be_bytes()[..]);
    first.extend_from_slice(&pieces[0]);
    pieces[0] = first.freeze();
    Ok(FetchOut { pieces, records })
}

type Batches = Vec<([u8; 8], Bytes)>;

fn fetch_once(floor: &Floor, request: &FetchRequest) -> (FetchResponse, Vec<Batches>) {
    let mut left = request.max_bytes.max(0) as usize;
    let mut records = Vec::new();
    let mut response = FetchResponse::default();
    for asked in &request.topics {
        let partition = floor.partition(&asked.topic.0);
        let mut out = FetchableTopicResponse::default();
        out.topic = asked.topic.clone();
        for p in &asked.partitions {
            let mut data = PartitionData::default();
            data.partition_index = p.partition;
            data.preferred_read_replica = BrokerId(-1);
            data.records = Some(Bytes::new());
            let log = partition.log.lock();
            data.high_watermark = log.next_offset as i64;
            data.last_stable_offset = log.next_offset as i64;
            if p.fetch_offset < 0 || p.fetch_offset as u64 > log.next_offset {
                data.error_code = ResponseError::OffsetOutOfRange.code();
            } else {
                let offset = p.fetch_offset as u64;
                // From the batch holding `offset`: the first that ends at or after it.
                let from = log.batches.partition_point(|b| b.last < offset);
                let mut taken = Vec::new();
                let mut max = left.min(p.partition_max_bytes.max(0) as usize);
                for kept in &log.batches[from..] {
                    // Kafka returns at least one whole batch, whatever the limits.
                    if !taken.is_empty() && kept.bytes.len() > max {
                        break;
                    }
                    max = max.saturating_sub(kept.bytes.len());
                    left = left.saturating_sub(kept.bytes.len());
                    taken.push((kept.base.to_be_bytes(), kept.bytes.clone()));
                }
                if !taken.is_empty() {
                    data.records = Some(records_marker(records.len()));
                    records.push(taken);
                }
            }
            out.partitions.push(data);
        }
        response.responses.push(out);
    }
    (response, records)
}

/// The framed response: the pieces around the records, and each batch as its base offset
/// and the rest of its bytes, in as few `writev` calls as the kernel allows.
fn write_all(stream: &mut TcpStream, out: FetchOut) -> io::Result<()> {
    let mut slices = Vec::with_capacity(out.pieces.len() + 2 * out.records.len());
    let mut pieces = out.pieces.iter();
    for batches in &out.records {
        slices.extend(pieces.next().map(|p| IoSlice::new(p)));
        for (base, batch) in batches {
            slices.push(IoSlice::new(base));
            slices.push(IoSlice::new(&batch[8..]));
        }
    }
    slices.extend(pieces.map(|p| IoSlice::new(p)));
    let mut slices = &mut slices[..];
    while !slices.is_empty() {
        match stream.write_vectored(slices) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut slices, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn list_offsets(floor: &Floor, request: &ListOffsetsRequest, version: i16) -> ListOffsetsResponse {
    const LATEST: i64 = -1;
    const EARLIEST: i64 = -2;
    let mut response = ListOffsetsResponse::default();
    for asked in &request.topics {
        let partition = floor.partition(&asked.name.0);
        let log = partition.log.lock();
        let mut out = ListOffsetsTopicResponse::default();
        out.name = asked.name.clone();
        for p in &asked.partitions {
            let mut result = ListOffsetsPartitionResponse::default();
            result.partition_index = p.partition_index;
            result.timestamp = -1;
            result.offset = match p.timestamp {
                EARLIEST => log.batches.first().map_or(log.next_offset, |b| b.base) as i64,
                LATEST => log.next_offset as i64,
                _ => -1,
            };
            if version >= 4 {
                result.leader_epoch = 0;
            }
            out.partitions.push(result);
        }
        response.topics.push(out);
    }
    response
}
