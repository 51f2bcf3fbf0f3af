//! The Rust half of `scripts/crash-harness`: appenders that keep a ledger of the writes
//! kpfs acknowledged, and the verifier that holds a `cat log` against those ledgers.
//!
//! ```text
//! crash_appender append LOG STATE_DIR ID [--keys N] [--max N] [--pause-us N]
//! crash_appender produce ADDRESS TOPIC STATE_DIR ID [--acks all|1] [--idempotent [--lose-an-answer]] [--max N] [--pause-us N]
//! crash_appender verify KIND CAT_FILE STATE_DIR IDS [--keys N] [--offsets START END]
//! crash_appender verify-partitions CAT_DIR STATE_DIR KEYED_IDS ID:P,... --keys N --partition-offsets S-E,...
//! crash_appender txn ADDRESS TOPIC PARTITIONS STATE_DIR ID [--max N] [--pause-us N]
//! crash_appender verify-txn ADDRESS TOPIC PARTITIONS CAT_FILE STATE_DIR ID
//! crash_appender commit ADDRESS GROUP TOPICS STATE_DIR ID [--member] [--max N] [--pause-us N]
//! crash_appender verify-commits ADDRESS GROUP TOPICS STATE_DIR ID
//! ```
//!
//! Every line is a pure function of (appender id, sequence number, key count), so the
//! verifier can tell a torn or foreign line from a real one by rebuilding it exactly.
//! `append` writes one line per write(2) to LOG; after each write returned the full
//! length it adds the sequence number to `STATE_DIR/ID.acked`. The first failed write
//! (the daemon was killed under it) may or may not have reached the log, so its sequence
//! number goes to `ID.maybe` and the appender stops. A later run of the same id continues
//! after the highest number in either file, so sequence numbers are never reused.
//!
//! `produce` is a Kafka client of kpfs's listener at ADDRESS (kafka-protocol's messages
//! and record batches, one Produce in flight, each a batch of 1-8 lines as records, in any
//! of the five codecs, at Produce v3, v7, v9 or v12). For each acknowledged record it
//! adds the sequence number to `ID.acked` and `SEQ OFFSET` to `ID.offsets`: the offset
//! the response gave. When the connection fails (the daemon was killed), a plain producer
//! marks its batch in flight as maybe and stops. An `--idempotent` one (an id from
//! InitProducerId, sequence numbers in its batches) reconnects instead, within a minute,
//! and sends the same batch again, as a Kafka producer retries: the answer must be success
//! (the original offsets when the batch had been appended before the kill), so every batch
//! it sent ends up acknowledged, none maybe; any error code fails it (exit status 1). With
//! `--lose-an-answer` it stops reading answers at a moment of its own choosing: it sends
//! one more batch and leaves the answer unread until the connection closes (the daemon
//! was killed), then retries that batch: the answer must be its original offsets, from the
//! producer state the daemon rebuilt after the crash.
//!
//! `verify` KINDs: `keep` (no retention: every acknowledged line exactly once, in
//! order), `delete` (retention may remove a prefix: from each appender's first visible
//! line on, every acknowledged line exactly once, in order) and `compact` (per key, the
//! last value in the log is the latest acknowledged one or a later maybe). In every kind
//! a visible line must be whole, must be acknowledged or maybe, and each appender's lines
//! must appear in increasing sequence order. For `keep` with `--offsets`, a record a
//! producer was told is at offset O must be line O - START of the log. It prints one
//! summary line and exits 1 after listing the first violations.
//!
//! `verify-partitions` holds a topic of several partitions, nothing ever removed, against
//! the ledgers of keyed appenders of its `log` (KEYED_IDS: the default partitioner sends
//! each line to `murmur2(key) % partitions`, Kafka's murmur2 rebuilt here) and of
//! appenders of one partition's `partitions/P/log` each (`ID:P`). CAT_DIR holds `log`
//! (`cat TOPIC/log`) and `P.log` (`cat TOPIC/partitions/P/log`). Every acknowledged line
//! must be in `log` exactly once and in its partition's log; a partition's log holds
//! only its own lines, each appender's in the order they were acknowledged, its offsets
//! exactly its lines; and `log` is every partition's lines exactly once, each partition's
//! in that partition's order, each appender's in the order they were acknowledged.
//!
//! `txn` is the transactional producer `crash-txn-ID` of a topic of PARTITIONS partitions:
//! FindCoordinator (TRANSACTION), InitProducerId with its transactional id (retried while
//! the coordinator aborts what a previous run left open), then transaction number 0, 1,
//! 2... (after every number the ledger holds): AddPartitionsToTxn of every partition, one
//! or two transactional Produces of 0-3 records per partition (a partition may stay
//! empty and still get its marker), an optional `--pause-us`, and EndTxn, which aborts
//! about one in three (a pure function of ID and the number) and commits the rest. Each
//! record's text names its transaction, whether it was to commit and its partition. The
//! ledger `ID.txns` notes `T begin` before the first request, `T produced P BASE N` per
//! acknowledged partition, `T ending` before EndTxn is sent and `T ended` once answered;
//! when the connection fails (the daemon was killed) it says in which request and stops,
//! and any error code fails it (exit status 1). `verify-txn` holds CAT_FILE (`cat
//! TOPIC/log` of the mount) and a `read_committed` Fetch of each partition (filtering
//! aborted transactions as Kafka's consumer does) against that ledger: every committed
//! transaction's records, once, in order, each partition's at the offsets its Produce
//! was answered with; no record of an aborted transaction or of one whose commit was never
//! sent (open at a kill: hidden while open, aborted by the next InitProducerId); one whose
//! commit was in flight at a kill whole or absent, in every partition, and as at the first
//! verification after that kill (`ID.txn-outcomes`); the mount and the Fetch the same
//! records; and a `read_uncommitted` Fetch every acknowledged record at its offset, aborted
//! ones too.
//!
//! `commit` is a committing consumer of kpfs's group coordinator at ADDRESS: it commits
//! commit number 1, 2, 3... as the offset of partition 0 of every topic of TOPICS (comma-
//! separated) in one OffsetCommit, with the metadata `cID-N`, one commit in flight, and
//! adds N to `ID.acked` once the answer says every partition is committed. Without
//! `--member` it commits as a consumer outside group management does (generation -1, no
//! member id, the group Empty); with it, it first joins GROUP as the static member
//! `crash-ID` (JoinGroup, SyncGroup as its leader, assigning itself the topics) and
//! commits as that member with its generation, joining again when the answer says the
//! group rebalanced. When the connection fails (the daemon was killed), the commit in
//! flight goes to `ID.maybe` and it stops. A later run continues after the highest number
//! acknowledged, in flight or fetched. `verify-commits` fetches GROUP's committed offsets
//! (OffsetFetch) and holds them against the ledgers: one commit, whole (every topic at
//! the same N, with its metadata); no acknowledged commit lost (N >= the last acknowledged
//! one); nothing invented (N is the last acknowledged one or one in flight at a kill after
//! it); never backwards (N >= what the previous verification fetched, kept in
//! `ID.fetched`).
#![allow(
    clippy::disallowed_methods,
    reason = "pauses between appends so a kill lands mid-stream; a producer's record timestamps and reconnection deadline are real time"
)]

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::net::TcpStream;
use std::ops::Range;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, ApiKey, BrokerId, ConsumerProtocolAssignment,
    ConsumerProtocolSubscription, EndTxnRequest, FetchRequest, FindCoordinatorRequest, GroupId,
    InitProducerIdRequest, JoinGroupRequest, ListOffsetsRequest, OffsetCommitRequest,
    OffsetFetchRequest, ProduceRequest, RequestHeader, ResponseHeader, SyncGroupRequest, TopicName,
    TransactionalId,
};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

fn usage() -> ExitCode {
    eprintln!(
        "usage: crash_appender append LOG STATE_DIR ID [--keys N] [--max N] [--pause-us N]\n       \
         crash_appender produce ADDRESS TOPIC STATE_DIR ID [--acks all|1] [--idempotent [--lose-an-answer]] [--max N] [--pause-us N]\n       \
         crash_appender verify keep|delete|compact CAT_FILE STATE_DIR ID,ID,... [--keys N] [--offsets START END]\n       \
         crash_appender verify-partitions CAT_DIR STATE_DIR ID,ID,... ID:P,ID:P,... --keys N --partition-offsets S-E,S-E,...\n       \
         crash_appender txn ADDRESS TOPIC PARTITIONS STATE_DIR ID [--max N] [--pause-us N]\n       \
         crash_appender verify-txn ADDRESS TOPIC PARTITIONS CAT_FILE STATE_DIR ID\n       \
         crash_appender commit ADDRESS GROUP TOPIC,... STATE_DIR ID [--member] [--max N] [--pause-us N]\n       \
         crash_appender verify-commits ADDRESS GROUP TOPIC,... STATE_DIR ID"
    );
    ExitCode::from(2)
}

/// A cheap, stable mix so padding and keys vary from line to line.
fn mix(id: u32, seq: u64) -> u64 {
    let mut x = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(id).wrapping_mul(0xBF58_476D);
    x ^= x >> 31;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 29)
}

fn key_of(id: u32, seq: u64, keys: u32) -> u32 {
    (mix(id, seq) % u64::from(keys.max(1))) as u32
}

/// The line (without newline) appender `id` writes as number `seq`. The padding length
/// varies so batches and segment boundaries fall at ever different byte positions.
fn line(id: u32, seq: u64, keys: Option<u32>) -> String {
    let h = mix(id, seq);
    let body = format!("a{id}-{seq:010}-{}", padding(h, 48));
    match keys {
        Some(k) => format!("a{id}k{:03}:{body}", key_of(id, seq, k)),
        None => body,
    }
}

/// Up to `max - 1` letters drawn from `h`.
fn padding(h: u64, max: u64) -> String {
    (0..h % max)
        .map(|i| char::from(b'a' + ((h >> (i % 60)) as u8 % 26)))
        .collect()
}

/// Parses (id, seq) out of a line; the caller compares with [`line`] to reject anything
/// that merely looks similar.
fn parse(text: &str, keyed: bool) -> Option<(u32, u64)> {
    let body = if keyed { text.split_once(':')?.1 } else { text };
    let rest = body.strip_prefix('a')?;
    let (id, rest) = rest.split_once('-')?;
    let (seq, _) = rest.split_once('-')?;
    Some((id.parse().ok()?, seq.parse().ok()?))
}

fn read_seqs(path: &Path) -> Vec<u64> {
    let Ok(file) = File::open(path) else {
        return Vec::new();
    };
    BufReader::new(file)
        .lines()
        .map(|l| l.expect("read ledger"))
        .filter(|l| !l.is_empty())
        .map(|l| l.parse().expect("ledger lines are sequence numbers"))
        .collect()
}

/// A producer's `SEQ OFFSET` ledger.
fn read_offsets(path: &Path) -> Vec<(u64, u64)> {
    let Ok(file) = File::open(path) else {
        return Vec::new();
    };
    BufReader::new(file)
        .lines()
        .map(|l| l.expect("read ledger"))
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (seq, offset) = l.split_once(' ').expect("ledger lines are SEQ OFFSET");
            (
                seq.parse().expect("a sequence number"),
                offset.parse().expect("an offset"),
            )
        })
        .collect()
}

struct Flags {
    keys: Option<u32>,
    max: u64,
    pause_us: u64,
    offsets: Option<(u64, u64)>,
    /// `--partition-offsets S-E,...`: each partition's log start and end offsets.
    partition_offsets: Option<Vec<(u64, u64)>>,
    acks: i16,
    idempotent: bool,
    lose_an_answer: bool,
    member: bool,
}

fn flags(args: &[String]) -> Option<Flags> {
    let mut f = Flags {
        keys: None,
        max: u64::MAX,
        pause_us: 0,
        offsets: None,
        partition_offsets: None,
        acks: -1,
        idempotent: false,
        lose_an_answer: false,
        member: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--keys" => f.keys = Some(it.next()?.parse().ok()?),
            "--max" => f.max = it.next()?.parse().ok()?,
            "--pause-us" => f.pause_us = it.next()?.parse().ok()?,
            "--offsets" => f.offsets = Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?)),
            "--partition-offsets" => {
                let list: Option<Vec<(u64, u64)>> = it
                    .next()?
                    .split(',')
                    .map(|r| {
                        let (start, end) = r.split_once('-')?;
                        Some((start.parse().ok()?, end.parse().ok()?))
                    })
                    .collect();
                f.partition_offsets = Some(list?);
            }
            "--acks" => {
                f.acks = match it.next()?.as_str() {
                    "all" => -1,
                    "1" => 1,
                    _ => return None,
                }
            }
            "--idempotent" => f.idempotent = true,
            "--lose-an-answer" => f.lose_an_answer = true,
            "--member" => f.member = true,
            _ => return None,
        }
    }
    Some(f)
}

fn state_file(dir: &Path, id: u32, what: &str) -> PathBuf {
    dir.join(format!("{id}.{what}"))
}

/// After the highest sequence number a previous run acknowledged or attempted.
fn next_seq(state: &Path, id: u32) -> u64 {
    read_seqs(&state_file(state, id, "acked"))
        .into_iter()
        .chain(read_seqs(&state_file(state, id, "maybe")))
        .max()
        .map_or(0, |m| m + 1)
}

fn open_state(p: &Path) -> File {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(p)
        .unwrap_or_else(|e| panic!("open {}: {e}", p.display()))
}

fn append(log: &Path, state: &Path, id: u32, f: &Flags) -> ExitCode {
    let acked_path = state_file(state, id, "acked");
    let maybe_path = state_file(state, id, "maybe");
    let start = next_seq(state, id);
    let mut acked = BufWriter::new(open_state(&acked_path));
    let mut out = match OpenOptions::new().append(true).open(log) {
        Ok(f) => f,
        Err(e) => {
            println!("appender {id}: open failed: {e}");
            return ExitCode::SUCCESS;
        }
    };
    let mut seq = start;
    let mut count = 0u64;
    let stopped = loop {
        if count == f.max {
            break "reached --max".to_string();
        }
        let mut text = line(id, seq, f.keys);
        text.push('\n');
        // One write(2) per line: a line is either acknowledged whole or not at all.
        match out.write(text.as_bytes()) {
            Ok(n) if n == text.len() => {
                writeln!(acked, "{seq}").expect("write ledger");
                count += 1;
                seq += 1;
            }
            result => {
                let why = match result {
                    Ok(n) => format!("short write of {n} of {} bytes", text.len()),
                    Err(e) => e.to_string(),
                };
                writeln!(open_state(&maybe_path), "{seq}").expect("write maybe file");
                break why;
            }
        }
        if f.pause_us > 0 {
            std::thread::sleep(Duration::from_micros(f.pause_us));
        }
    };
    acked.flush().expect("flush ledger");
    println!("appender {id}: {count} acked from {start}, stopped: {stopped}");
    ExitCode::SUCCESS
}

/// A Kafka client connection: one request at a time.
struct Wire {
    stream: TcpStream,
    correlation_id: i32,
}

impl Wire {
    fn connect(address: &str) -> io::Result<Wire> {
        let stream = TcpStream::connect(address)?;
        // A killed daemon's socket ends at once; this only bounds a hung one.
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        stream.set_nodelay(true)?;
        Ok(Wire {
            stream,
            correlation_id: 0,
        })
    }

    /// Sends `request` and reads its response; an I/O error means the connection failed
    /// (a response that does not decode is a bug and panics).
    fn call<R: Request>(&mut self, version: i16, request: &R) -> io::Result<R::Response> {
        self.send(version, request)?;
        self.receive::<R>(version)
    }

    fn send<R: Request>(&mut self, version: i16, request: &R) -> io::Result<()> {
        self.correlation_id += 1;
        let key = ApiKey::try_from(R::KEY).expect("a known API");
        let mut buf = BytesMut::new();
        buf.put_i32(0);
        RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation_id)
            .with_client_id(Some(StrBytes::from_static_str("crash-producer")))
            .encode(&mut buf, key.request_header_version(version))
            .expect("encode a request header");
        request.encode(&mut buf, version).expect("encode a request");
        let size = (buf.len() - 4) as i32;
        buf[..4].copy_from_slice(&size.to_be_bytes());
        self.stream.write_all(&buf)
    }

    /// The response to the request sent last.
    fn receive<R: Request>(&mut self, version: i16) -> io::Result<R::Response> {
        let key = ApiKey::try_from(R::KEY).expect("a known API");
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size)?;
        let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
        self.stream.read_exact(&mut body)?;
        let mut body = Bytes::from(body);
        let header = ResponseHeader::decode(&mut body, key.response_header_version(version))
            .expect("decode a response header");
        assert_eq!(header.correlation_id, self.correlation_id);
        let response = R::Response::decode(&mut body, version).expect("decode a response");
        assert_eq!(body.remaining(), 0, "bytes after the {key:?} response");
        Ok(response)
    }

    /// Sends `request` and leaves its answer unread until the server's end of the
    /// connection closes (the harness kills the daemon): to the server, an answer lost
    /// with the crash of a batch it had appended.
    fn send_and_lose_the_answer<R: Request>(
        &mut self,
        version: i16,
        request: &R,
    ) -> io::Result<R::Response> {
        self.send(version, request)?;
        let mut poll = libc::pollfd {
            fd: self.stream.as_raw_fd(),
            events: libc::POLLRDHUP,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the call; the stream keeps the descriptor open.
        let ready = unsafe { libc::poll(&mut poll, 1, 60_000) };
        if ready < 0 {
            return Err(io::Error::last_os_error());
        }
        Err(io::Error::other(if ready == 0 {
            "its answer left unread, and the connection still open after 60 s"
        } else {
            "its answer left unread until the connection closed"
        }))
    }
}

/// An idempotent producer's identity (`-1`s for a plain producer) and its next sequence.
struct ProducerId {
    id: i64,
    epoch: i16,
    next_sequence: i32,
}

const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];
const PRODUCE_VERSIONS: [i16; 4] = [3, 7, 9, 12];

/// The batch of lines `seq..seq + count` of producer `id`, one record each.
fn produced_batch(id: u32, seq: u64, count: u64, producer: &ProducerId) -> Bytes {
    // A plain producer's batch has base sequence -1.
    let sequence = if producer.id < 0 {
        -1
    } else {
        producer.next_sequence
    };
    record_batch(
        (0..count).map(|i| line(id, seq + i, None)),
        (producer.id, producer.epoch),
        sequence,
        false,
        CODECS[(mix(id, seq) % CODECS.len() as u64) as usize],
    )
}

/// One record batch of `values` from `producer` (id, epoch), its first record at
/// `sequence`, part of the producer's transaction when `transactional`.
fn record_batch(
    values: impl Iterator<Item = String>,
    (producer_id, producer_epoch): (i64, i16),
    sequence: i32,
    transactional: bool,
    compression: Compression,
) -> Bytes {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_millis() as i64;
    let records: Vec<Record> = values
        .enumerate()
        .map(|(i, value)| Record {
            transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The encoder keeps records in one batch while offset - sequence holds.
            sequence: sequence + i as i32,
            timestamp: now,
            key: None,
            value: Some(Bytes::from(value)),
            headers: IndexMap::new(),
        })
        .collect();
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(&mut buf, &records, &options).expect("encode a record batch");
    buf.freeze()
}

/// A Produce of one batch to each of `partitions` (index, records) of `topic`.
fn produce_request(topic: &str, acks: i16, partitions: Vec<(i32, Bytes)>) -> ProduceRequest {
    let mut data = TopicProduceData::default();
    data.name = TopicName(str_bytes(topic));
    data.partition_data = partitions
        .into_iter()
        .map(|(index, records)| {
            let mut partition = PartitionProduceData::default();
            partition.index = index;
            partition.records = Some(records);
            partition
        })
        .collect();
    let mut request = ProduceRequest::default();
    request.acks = acks;
    request.timeout_ms = 30_000;
    request.topic_data = vec![data];
    request
}

/// The partition's error code and base offset in a Produce response.
fn produce_outcome(response: &kafka_protocol::messages::ProduceResponse) -> (i16, i64) {
    let p = &response.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// The topic's log end offset (ListOffsets, latest).
fn log_end_offset(wire: &mut Wire, topic: &str) -> io::Result<i64> {
    let mut partition = ListOffsetsPartition::default();
    partition.timestamp = -1;
    let mut t = ListOffsetsTopic::default();
    t.name = TopicName(StrBytes::from_string(topic.to_string()));
    t.partitions = vec![partition];
    let mut request = ListOffsetsRequest::default();
    request.replica_id = BrokerId(-1);
    request.topics = vec![t];
    let response = wire.call(7, &request)?;
    let p = &response.topics[0].partitions[0];
    assert_eq!(p.error_code, 0, "ListOffsets of {topic}");
    Ok(p.offset)
}

/// Connects again and again until `deadline` (the daemon is being mounted again).
fn reconnect(address: &str, deadline: Instant) -> io::Result<Wire> {
    loop {
        match Wire::connect(address) {
            Ok(wire) => return Ok(wire),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

fn produce(address: &str, topic: &str, state: &Path, id: u32, f: &Flags) -> ExitCode {
    let start = next_seq(state, id);
    let mut acked = BufWriter::new(open_state(&state_file(state, id, "acked")));
    let mut offsets = BufWriter::new(open_state(&state_file(state, id, "offsets")));
    let mut wire = match Wire::connect(address) {
        Ok(wire) => wire,
        Err(e) => {
            println!("producer {id}: connect failed: {e}");
            return ExitCode::SUCCESS;
        }
    };
    let mut producer = ProducerId {
        id: -1,
        epoch: -1,
        next_sequence: 0,
    };
    if f.idempotent {
        let mut request = InitProducerIdRequest::default();
        request.transactional_id = None;
        request.transaction_timeout_ms = -1;
        match wire.call(4, &request) {
            Ok(r) if r.error_code == 0 => {
                producer.id = r.producer_id.0;
                producer.epoch = r.producer_epoch;
            }
            Ok(r) => {
                println!(
                    "producer {id}: InitProducerId failed: error code {}",
                    r.error_code
                );
                return ExitCode::FAILURE;
            }
            Err(e) => {
                println!("producer {id}: InitProducerId failed: {e}");
                return ExitCode::SUCCESS;
            }
        }
    }
    let mut seq = start;
    let mut count = 0u64;
    let mut batches = 0usize;
    let mut failed = false;
    // When to stop reading answers (--lose-an-answer): 0.1-1.6 s in, so the harness's
    // kill (0.2-2 s in) comes sometimes after, sometimes before.
    let mut lose_at = f
        .lose_an_answer
        .then(|| Instant::now() + Duration::from_millis(100 + mix(id, start) % 1500));
    let stopped = loop {
        if count >= f.max {
            break "reached --max".to_string();
        }
        let n = 1 + mix(id, seq) % 8;
        let request = produce_request(
            topic,
            f.acks,
            vec![(0, produced_batch(id, seq, n, &producer))],
        );
        let version = PRODUCE_VERSIONS[batches % PRODUCE_VERSIONS.len()];
        batches += 1;
        let sent = match lose_at {
            Some(at) if Instant::now() >= at => {
                lose_at = None;
                wire.send_and_lose_the_answer(version, &request)
            }
            _ => wire.call(version, &request),
        };
        let (answer, retried) = match sent {
            Ok(response) => (produce_outcome(&response), None),
            Err(e) if f.idempotent => {
                // Kafka's producer retries the batch as it was, same id and sequence,
                // until delivery.timeout.ms: the first attempts may reach the killed
                // daemon's listening socket while the kernel tears it down.
                let deadline = Instant::now() + Duration::from_secs(60);
                let response = loop {
                    // The log end before the retry tells a duplicate (answered with its
                    // offsets below it) from a batch the retry appended.
                    let attempt = reconnect(address, deadline).and_then(|w| {
                        wire = w;
                        let end = log_end_offset(&mut wire, topic)?;
                        Ok((end, wire.call(version, &request)?))
                    });
                    match attempt {
                        Ok(response) => break Ok(response),
                        Err(again) if Instant::now() >= deadline => break Err(again),
                        Err(_) => std::thread::sleep(Duration::from_millis(50)),
                    }
                };
                match response {
                    Ok((end, response)) => {
                        let outcome = produce_outcome(&response);
                        let how = if outcome.1 < end {
                            "it was in the log: a duplicate, answered with its offsets"
                        } else {
                            "appended by the retry"
                        };
                        (
                            outcome,
                            Some(format!("{e}; retried after reconnecting: {how}")),
                        )
                    }
                    Err(again) => {
                        failed = true;
                        break format!("{e}; the retries failed until: {again}");
                    }
                }
            }
            Err(e) => {
                let mut maybe = open_state(&state_file(state, id, "maybe"));
                for s in seq..seq + n {
                    writeln!(maybe, "{s}").expect("write maybe file");
                }
                break e.to_string();
            }
        };
        match answer {
            (0, base) if base >= 0 => {
                for i in 0..n {
                    writeln!(acked, "{}", seq + i).expect("write ledger");
                    writeln!(offsets, "{} {}", seq + i, base as u64 + i).expect("write ledger");
                }
                count += n;
                seq += n;
                producer.next_sequence += n as i32;
            }
            (code, base) => {
                // The batch is not acknowledged; with a plain producer it may still be
                // in the log (maybe). An idempotent one must never get here.
                let mut maybe = open_state(&state_file(state, id, "maybe"));
                for s in seq..seq + n {
                    writeln!(maybe, "{s}").expect("write maybe file");
                }
                failed = f.idempotent;
                break format!("error code {code} (base offset {base})");
            }
        }
        if let Some(how) = retried {
            break how;
        }
        if f.pause_us > 0 {
            std::thread::sleep(Duration::from_micros(f.pause_us));
        }
    };
    acked.flush().expect("flush ledger");
    offsets.flush().expect("flush ledger");
    println!("producer {id}: {count} acked from {start}, stopped: {stopped}");
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Whether producer `id` aborts its transaction number `txn` (one in three, the rest commit).
fn aborts(id: u32, txn: u64) -> bool {
    mix(id, txn).is_multiple_of(3)
}

/// Record `i` of transactional producer `id`'s transaction `txn` in partition `p`: its
/// text names the transaction, what it was to end with, and the partition.
fn txn_line(id: u32, txn: u64, p: usize, i: u32) -> String {
    let intent = if aborts(id, txn) { "abort" } else { "commit" };
    let h = mix(id ^ ((p as u32) << 20), (txn << 8) | u64::from(i));
    format!("t{id}-{txn:08}-{intent}-p{p}-{i:02}-{}", padding(h, 32))
}

/// Parses (id, txn, partition, index) out of a transactional record; the caller compares
/// with [`txn_line`].
fn parse_txn(text: &str) -> Option<(u32, u64, usize, u32)> {
    let mut fields = text.strip_prefix('t')?.split('-');
    let id = fields.next()?.parse().ok()?;
    let txn = fields.next()?.parse().ok()?;
    let _intent = fields.next()?;
    let p = fields.next()?.strip_prefix('p')?.parse().ok()?;
    let i = fields.next()?.parse().ok()?;
    Some((id, txn, p, i))
}

/// The Produce requests of transaction `txn`: one or two, each with 0-3 records for each
/// partition (at least one record in all), as (partition, record indices). A partition
/// may get none: it is in the transaction all the same, and gets its marker.
fn txn_plan(id: u32, txn: u64, partitions: usize) -> Vec<Vec<(usize, Range<u32>)>> {
    let requests = 1 + (mix(id, txn) >> 8) % 2;
    let mut next = vec![0u32; partitions];
    let mut plan = Vec::new();
    for r in 0..requests {
        let mut request = Vec::new();
        for (p, next) in next.iter_mut().enumerate() {
            let h = mix(id.wrapping_add(1 + (r as u32) * 8 + p as u32), txn);
            let mut n = (h % 4) as u32;
            if r == 0 && n == 0 && p == (txn % partitions as u64) as usize {
                n = 1;
            }
            if n > 0 {
                request.push((p, *next..*next + n));
                *next += n;
            }
        }
        if !request.is_empty() {
            plan.push(request);
        }
    }
    plan
}

/// How many records transaction `txn` has in each partition.
fn txn_counts(id: u32, txn: u64, partitions: usize) -> Vec<u32> {
    let mut counts = vec![0; partitions];
    for (p, indices) in txn_plan(id, txn, partitions).into_iter().flatten() {
        counts[p] = counts[p].max(indices.end);
    }
    counts
}

/// What `transact` did with one transaction, from its ledger `ID.txns`.
#[derive(Default)]
struct TxnLedger {
    /// Each acknowledged Produce of its records: (partition, base offset, record count).
    produced: Vec<(usize, u64, u32)>,
    /// EndTxn was sent.
    ending: bool,
    /// EndTxn was answered: the transaction is committed or aborted, as [`aborts`] says.
    ended: bool,
}

fn read_txn_ledger(path: &Path) -> BTreeMap<u64, TxnLedger> {
    let mut ledger: BTreeMap<u64, TxnLedger> = BTreeMap::new();
    let Ok(file) = File::open(path) else {
        return ledger;
    };
    for l in BufReader::new(file).lines() {
        let l = l.expect("read ledger");
        let fields: Vec<&str> = l.split(' ').collect();
        let number = |i: usize| -> u64 {
            fields[i]
                .parse()
                .unwrap_or_else(|_| panic!("ledger line {l:?}"))
        };
        let txn = ledger.entry(number(0)).or_default();
        match fields[1] {
            "begin" => {}
            "produced" => txn
                .produced
                .push((number(2) as usize, number(3), number(4) as u32)),
            "ending" => txn.ending = true,
            "ended" => txn.ended = true,
            _ => panic!("ledger line {l:?}"),
        }
    }
    ledger
}

/// CONCURRENT_TRANSACTIONS: the coordinator is still ending the id's last transaction
/// (InitProducerId aborting one a kill left open); a Kafka producer retries.
const CONCURRENT_TRANSACTIONS: i16 = 51;

/// Calls until the answer's code (`code_of`) is other than COORDINATOR_LOAD_IN_PROGRESS,
/// COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR or CONCURRENT_TRANSACTIONS, which a Kafka
/// client retries after a backoff. `Ok(Err(..))`: refused with another code.
fn call_retrying<R: Request>(
    wire: &mut Wire,
    version: i16,
    request: &R,
    code_of: impl Fn(&R::Response) -> i16,
) -> io::Result<Result<R::Response, String>> {
    let key = ApiKey::try_from(R::KEY).expect("a known API");
    for _ in 0..200 {
        let response = wire.call(version, request)?;
        match code_of(&response) {
            0 => return Ok(Ok(response)),
            code if RETRIABLE_ERRORS.contains(&code) || code == CONCURRENT_TRANSACTIONS => {
                std::thread::sleep(RETRY_BACKOFF);
            }
            code => return Ok(Err(format!("{key:?} answered error code {code}"))),
        }
    }
    Ok(Err(format!("{key:?} still retriable after 200 tries")))
}

/// Why a transactional producer stopped: the connection failed in `phase` (the daemon
/// was killed), or a request was refused (a bug: the harness fails).
enum TxnStop {
    Killed(&'static str, io::Error),
    Refused(String),
}

/// Looks the transaction coordinator of `transactional_id` up and takes its producer id
/// and epoch, as a Kafka producer's `initTransactions` does: the epoch bump fences the
/// previous run, and the transaction it left open is aborted.
fn init_transactions(wire: &mut Wire, transactional_id: &str) -> Result<ProducerId, TxnStop> {
    let mut lookup = FindCoordinatorRequest::default();
    lookup.key = str_bytes(transactional_id);
    lookup.key_type = 1;
    call_retrying(wire, 3, &lookup, |r| r.error_code)
        .map_err(|e| TxnStop::Killed("FindCoordinator", e))?
        .map_err(TxnStop::Refused)?;
    let mut request = InitProducerIdRequest::default();
    request.transactional_id = Some(TransactionalId(str_bytes(transactional_id)));
    request.transaction_timeout_ms = 60_000;
    let r = call_retrying(wire, 4, &request, |r| r.error_code)
        .map_err(|e| TxnStop::Killed("InitProducerId", e))?
        .map_err(TxnStop::Refused)?;
    Ok(ProducerId {
        id: r.producer_id.0,
        epoch: r.producer_epoch,
        next_sequence: 0,
    })
}

/// A transactional producer between its transactions.
struct TxnProducer {
    wire: Wire,
    id: u32,
    transactional_id: String,
    producer: ProducerId,
    topic: String,
    /// Each partition's next sequence number.
    sequences: Vec<i32>,
    ledger: File,
}

/// Runs transaction `txn` to its end, noting each step in the ledger before the request
/// that could make it visible is sent, and each answer after it came.
fn run_txn(p: &mut TxnProducer, txn: u64, pause: Duration) -> Result<(), TxnStop> {
    let TxnProducer {
        wire,
        id,
        transactional_id,
        producer,
        topic,
        sequences,
        ledger,
    } = p;
    let (id, topic) = (*id, topic.as_str());
    let mut note = |text: String| {
        ledger
            .write_all(format!("{txn} {text}\n").as_bytes())
            .expect("write the ledger");
    };
    note("begin".to_string());
    let transactional = TransactionalId(str_bytes(transactional_id.as_str()));
    let mut add = AddPartitionsToTxnRequest::default();
    add.v3_and_below_transactional_id = transactional.clone();
    add.v3_and_below_producer_id = kafka_protocol::messages::ProducerId(producer.id);
    add.v3_and_below_producer_epoch = producer.epoch;
    let mut added = AddPartitionsToTxnTopic::default();
    added.name = TopicName(str_bytes(topic));
    added.partitions = (0..sequences.len() as i32).collect();
    add.v3_and_below_topics = vec![added];
    let code_of = |r: &kafka_protocol::messages::AddPartitionsToTxnResponse| {
        r.results_by_topic_v3_and_below
            .iter()
            .flat_map(|t| &t.results_by_partition)
            .map(|p| p.partition_error_code)
            .find(|&c| c != 0)
            .unwrap_or(r.error_code)
    };
    call_retrying(wire, 3, &add, code_of)
        .map_err(|e| TxnStop::Killed("AddPartitionsToTxn", e))?
        .map_err(TxnStop::Refused)?;
    for (n, batches) in txn_plan(id, txn, sequences.len()).into_iter().enumerate() {
        let partitions = batches
            .iter()
            .map(|(p, indices)| {
                let batch = record_batch(
                    indices.clone().map(|i| txn_line(id, txn, *p, i)),
                    (producer.id, producer.epoch),
                    sequences[*p],
                    true,
                    CODECS[(mix(id, txn + *p as u64) % CODECS.len() as u64) as usize],
                );
                (*p as i32, batch)
            })
            .collect();
        let mut request = produce_request(topic, -1, partitions);
        request.transactional_id = Some(transactional.clone());
        let version = PRODUCE_VERSIONS[(txn as usize + n) % PRODUCE_VERSIONS.len()];
        let response = wire
            .call(version, &request)
            .map_err(|e| TxnStop::Killed("Produce", e))?;
        for (p, indices) in &batches {
            let answer = response.responses[0]
                .partition_responses
                .iter()
                .find(|r| r.index == *p as i32)
                .map(|r| (r.error_code, r.base_offset));
            let Some((0, base)) = answer.filter(|&(_, base)| base >= 0) else {
                return Err(TxnStop::Refused(format!(
                    "Produce v{version} of transaction {txn} to partition {p} answered {answer:?}"
                )));
            };
            note(format!("produced {p} {base} {}", indices.len()));
            sequences[*p] += indices.len() as i32;
        }
    }
    if !pause.is_zero() {
        std::thread::sleep(pause);
    }
    note("ending".to_string());
    let mut end = EndTxnRequest::default();
    end.transactional_id = transactional;
    end.producer_id = kafka_protocol::messages::ProducerId(producer.id);
    end.producer_epoch = producer.epoch;
    end.committed = !aborts(id, txn);
    let response = wire
        .call(3, &end)
        .map_err(|e| TxnStop::Killed("EndTxn", e))?;
    if response.error_code != 0 {
        return Err(TxnStop::Refused(format!(
            "EndTxn of transaction {txn} answered error code {}",
            response.error_code
        )));
    }
    note("ended".to_string());
    Ok(())
}

/// `transact`: the transactional producer `crash-txn-ID` of the listener at ADDRESS.
fn transact(
    address: &str,
    topic: &str,
    partitions: usize,
    state: &Path,
    id: u32,
    f: &Flags,
) -> ExitCode {
    let ledger_path = state_file(state, id, "txns");
    let start = read_txn_ledger(&ledger_path)
        .keys()
        .next_back()
        .map_or(0, |t| t + 1);
    let transactional_id = format!("crash-txn-{id}");
    let mut wire = match Wire::connect(address) {
        Ok(wire) => wire,
        Err(e) => {
            println!("transactional producer {id}: connect failed: {e}");
            return ExitCode::SUCCESS;
        }
    };
    let mut txn = start;
    let mut ended = 0u64;
    let stop = init_transactions(&mut wire, &transactional_id).and_then(|producer| {
        let mut p = TxnProducer {
            wire,
            id,
            transactional_id,
            producer,
            topic: topic.to_string(),
            sequences: vec![0; partitions],
            ledger: open_state(&ledger_path),
        };
        while ended < f.max {
            run_txn(&mut p, txn, Duration::from_micros(f.pause_us))?;
            ended += 1;
            txn += 1;
        }
        Ok(())
    });
    let (stopped, code) = match stop {
        Ok(()) => ("reached --max".to_string(), ExitCode::SUCCESS),
        Err(TxnStop::Killed(phase, e)) => (format!("in {phase}: {e}"), ExitCode::SUCCESS),
        Err(TxnStop::Refused(why)) => (why, ExitCode::FAILURE),
    };
    println!(
        "transactional producer {id}: {ended} transactions ended from {start}, stopped: {stopped}"
    );
    code
}

/// A partition's records (offset, value) from its log start on, as a consumer at that
/// isolation level reads them (Fetch v11): to the high watermark, or for `read_committed`
/// the last stable offset. A `read_committed` reading drops the
/// aborted transactions' records as Kafka's consumer does (`CompletedFetch`): the
/// response lists each aborted transaction's producer and first offset, and that
/// producer's transactional records are skipped from there to its ABORT marker.
fn fetch_partition(
    wire: &mut Wire,
    topic: &str,
    partition: usize,
    read_committed: bool,
) -> io::Result<Result<Vec<(u64, String)>, String>> {
    let mut records = Vec::new();
    let mut offset = 0i64;
    loop {
        let mut fetch = FetchPartition::default();
        fetch.partition = partition as i32;
        fetch.fetch_offset = offset;
        fetch.partition_max_bytes = 1 << 20;
        fetch.current_leader_epoch = -1;
        fetch.log_start_offset = -1;
        let mut t = FetchTopic::default();
        t.topic = TopicName(str_bytes(topic));
        t.partitions = vec![fetch];
        let mut request = FetchRequest::default();
        request.replica_id = BrokerId(-1);
        request.max_bytes = 1 << 26;
        request.isolation_level = i8::from(read_committed);
        request.session_epoch = -1;
        request.topics = vec![t];
        let response = wire.call(11, &request)?;
        let data = &response.responses[0].partitions[0];
        if response.error_code != 0 || data.error_code != 0 {
            return Ok(Err(format!(
                "Fetch at offset {offset} answered error codes {} and {}",
                response.error_code, data.error_code
            )));
        }
        let end = if read_committed {
            data.last_stable_offset
        } else {
            data.high_watermark
        };
        offset = offset.max(data.log_start_offset);
        if offset >= end {
            return Ok(Ok(records));
        }
        let mut aborted: Vec<(i64, i64)> = data
            .aborted_transactions
            .iter()
            .flatten()
            .map(|a| (a.first_offset, a.producer_id.0))
            .collect();
        aborted.sort_unstable();
        let mut aborted = aborted.into_iter().peekable();
        let mut aborting = BTreeSet::new();
        let mut next = offset;
        let mut bytes = data.records.as_deref().unwrap_or_default();
        // Whole batches only: a response may end inside one, as Kafka's may.
        while bytes.len() >= 12 {
            let size = 12 + i32::from_be_bytes(bytes[8..12].try_into().expect("4 bytes")) as usize;
            if bytes.len() < size {
                break;
            }
            let mut batch = &bytes[..size];
            bytes = &bytes[size..];
            let set = match RecordBatchDecoder::decode(&mut batch) {
                Ok(set) => set,
                Err(e) => {
                    return Ok(Err(format!(
                        "a batch at offset {offset} does not decode: {e}"
                    )))
                }
            };
            for r in set.records {
                next = next.max(r.offset + 1);
                while let Some((_, pid)) = aborted.next_if(|&(first, _)| first <= r.offset) {
                    aborting.insert(pid);
                }
                if r.control {
                    let abort_marker = r
                        .key
                        .as_deref()
                        .is_some_and(|k| k.get(2..4) == Some(&[0, 0]));
                    if abort_marker {
                        aborting.remove(&r.producer_id);
                    }
                    continue;
                }
                if r.offset < offset
                    || r.offset >= end
                    || (read_committed && r.transactional && aborting.contains(&r.producer_id))
                {
                    continue;
                }
                let value = r.value.as_deref().unwrap_or_default();
                records.push((r.offset as u64, String::from_utf8_lossy(value).into_owned()));
            }
        }
        if next == offset {
            return Ok(Err(format!(
                "Fetch at offset {offset}, below {end}, returned no whole batch"
            )));
        }
        offset = next;
    }
}

/// What a transaction's fate must be, from the producer's ledger.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum TxnFate {
    /// EndTxn(commit) answered: every record visible, once, at its acknowledged offset.
    Committed,
    /// EndTxn(abort) answered: none visible.
    Aborted,
    /// EndTxn(commit) in flight at a kill: all visible or none.
    Unknown,
    /// No EndTxn(commit) ever sent (open at a kill, or its abort in flight): none visible.
    Open,
}

/// `verify-txn`: transactional producer `id`'s records in the mount's `cat TOPIC/log`
/// (CAT_FILE) and in a `read_committed` and a `read_uncommitted` Fetch of each partition,
/// against its ledger.
fn verify_txn(
    address: &str,
    topic: &str,
    partitions: usize,
    cat: &Path,
    state: &Path,
    id: u32,
) -> ExitCode {
    let ledger = read_txn_ledger(&state_file(state, id, "txns"));
    let fate = |txn: u64| -> Option<TxnFate> {
        let l = ledger.get(&txn)?;
        Some(match (l.ending, l.ended, aborts(id, txn)) {
            (_, true, false) => TxnFate::Committed,
            (_, true, true) => TxnFate::Aborted,
            (true, false, false) => TxnFate::Unknown,
            _ => TxnFate::Open,
        })
    };
    let violations: RefCell<Vec<String>> = RefCell::default();
    let violate = |v: String| {
        let mut violations = violations.borrow_mut();
        if violations.len() < 20 {
            violations.push(v);
        }
    };
    // A record's (txn, partition, index), if it is whole and of a transaction begun.
    let identify = |source: &str, text: &str| -> Option<(u64, usize, u32)> {
        let parsed = parse_txn(text).filter(|&(pid, txn, p, i)| {
            pid == id && p < partitions && txn_line(id, txn, p, i) == text
        });
        match parsed {
            Some((_, txn, _, _)) if !ledger.contains_key(&txn) => {
                violate(format!(
                    "{source}: {text:?} of transaction {txn}, never begun"
                ));
                None
            }
            Some((_, txn, p, i)) => Some((txn, p, i)),
            None => {
                violate(format!(
                    "{source}: {text:?} is no record the producer wrote"
                ));
                None
            }
        }
    };
    let bytes = std::fs::read(cat).unwrap_or_else(|e| panic!("read {}: {e}", cat.display()));
    if !bytes.is_empty() && !bytes.ends_with(b"\n") {
        violate("log does not end with a newline (a torn last line)".to_string());
    }
    let body = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
    let mut in_log: Vec<Vec<(u64, u32)>> = vec![Vec::new(); partitions];
    for raw in (!bytes.is_empty())
        .then(|| body.split(|&b| b == b'\n'))
        .into_iter()
        .flatten()
    {
        if let Some((txn, p, i)) = identify("log", &String::from_utf8_lossy(raw)) {
            in_log[p].push((txn, i));
        }
    }
    let mut committed_reads = Vec::new();
    let mut uncommitted_reads = Vec::new();
    let fetched = Wire::connect(address).and_then(|mut wire| {
        for p in 0..partitions {
            for (read_committed, reads) in [
                (true, &mut committed_reads),
                (false, &mut uncommitted_reads),
            ] {
                match fetch_partition(&mut wire, topic, p, read_committed)? {
                    Ok(records) => reads.push(records),
                    Err(e) => {
                        violate(format!("partition {p}: {e}"));
                        reads.push(Vec::new());
                    }
                }
            }
        }
        Ok(())
    });
    if let Err(e) = fetched {
        println!("VIOLATION txn: fetching {topic} failed: {e}");
        return ExitCode::FAILURE;
    }
    // Where each acknowledged Produce put each record, whatever its transaction's fate.
    let mut acknowledged: BTreeMap<(u64, usize, u32), u64> = BTreeMap::new();
    for (&txn, l) in &ledger {
        let mut next = vec![0u32; partitions];
        for &(p, base, n) in &l.produced {
            for k in 0..n {
                acknowledged.insert((txn, p, next[p] + k), base + u64::from(k));
            }
            next[p] += n;
        }
    }
    let mut read_committed: Vec<Vec<(u64, u32)>> = Vec::new();
    let mut offsets_checked = 0usize;
    for (p, records) in committed_reads.iter().enumerate() {
        let mut shown = Vec::new();
        for (offset, text) in records {
            let source = format!("read_committed partition {p} offset {offset}");
            let Some((txn, q, i)) = identify(&source, text) else {
                continue;
            };
            if q != p {
                violate(format!("{source}: {text:?} belongs in partition {q}"));
            }
            if let Some(&want) = acknowledged.get(&(txn, q, i)) {
                offsets_checked += 1;
                if want != *offset {
                    violate(format!(
                        "{source}: {text:?} was acknowledged at offset {want}"
                    ));
                }
            }
            shown.push((txn, i));
        }
        read_committed.push(shown);
    }
    // Every acknowledged record is in the log (read_uncommitted), aborted ones too.
    let mut hidden = 0usize;
    for (p, records) in uncommitted_reads.iter().enumerate() {
        let mut at: BTreeMap<(u64, usize, u32), u64> = BTreeMap::new();
        for (offset, text) in records {
            let source = format!("read_uncommitted partition {p} offset {offset}");
            if let Some(record) = identify(&source, text) {
                if at.insert(record, *offset).is_some() {
                    violate(format!("{source}: {text:?} is in the log twice"));
                }
                if matches!(fate(record.0), Some(TxnFate::Aborted | TxnFate::Open)) {
                    hidden += 1;
                }
            }
        }
        for (record, want) in acknowledged.iter().filter(|(r, _)| r.1 == p) {
            offsets_checked += 1;
            if at.get(record) != Some(want) {
                violate(format!(
                    "read_uncommitted partition {p}: record {record:?} was acknowledged at offset {want}, the log has it at {:?}",
                    at.get(record)
                ));
            }
        }
    }
    // The transactions shown, and each must be one that may be.
    let shown: BTreeSet<u64> = in_log
        .iter()
        .chain(&read_committed)
        .flatten()
        .map(|&(txn, _)| txn)
        .collect();
    for &txn in &shown {
        match fate(txn) {
            Some(TxnFate::Committed | TxnFate::Unknown) => {}
            other => violate(format!(
                "transaction {txn} ({other:?}) is visible: its records must never be"
            )),
        }
    }
    // Each partition shows exactly the shown transactions' records, in order, in the
    // mount and to read_committed alike: a transaction is whole or absent.
    for p in 0..partitions {
        let want: Vec<(u64, u32)> = shown
            .iter()
            .flat_map(|&txn| (0..txn_counts(id, txn, partitions)[p]).map(move |i| (txn, i)))
            .collect();
        for (source, got) in [("log", &in_log[p]), ("read_committed", &read_committed[p])] {
            if *got != want {
                let at = want
                    .iter()
                    .zip(got)
                    .position(|(a, b)| a != b)
                    .unwrap_or(want.len().min(got.len()));
                violate(format!(
                    "partition {p} in {source}: {} records (txn, index), {} wanted; first difference at {at}: {:?} where {:?} was wanted",
                    got.len(),
                    want.len(),
                    got.get(at),
                    want.get(at)
                ));
            }
        }
    }
    // A commit in flight at a kill keeps the outcome the first verification after it saw.
    let outcomes_path = state_file(state, id, "txn-outcomes");
    let seen: BTreeMap<u64, bool> = std::fs::read_to_string(&outcomes_path)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let (txn, visible) = l.split_once(' ').expect("TXN visible|hidden");
            (
                txn.parse().expect("a transaction number"),
                visible == "visible",
            )
        })
        .collect();
    let mut outcomes = open_state(&outcomes_path);
    let (mut applied, mut not_applied) = (0, 0);
    for &txn in ledger
        .keys()
        .filter(|&&t| fate(t) == Some(TxnFate::Unknown))
    {
        let visible = shown.contains(&txn);
        if visible {
            applied += 1;
        } else {
            not_applied += 1;
        }
        match seen.get(&txn) {
            Some(&before) if before != visible => violate(format!(
                "transaction {txn}, its commit in flight at a kill, was {} and is now {}",
                if before { "visible" } else { "hidden" },
                if visible { "visible" } else { "hidden" }
            )),
            Some(_) => {}
            None => writeln!(
                outcomes,
                "{txn} {}",
                if visible { "visible" } else { "hidden" }
            )
            .expect("write outcomes"),
        }
    }
    let count = |want: TxnFate| ledger.keys().filter(|&&t| fate(t) == Some(want)).count();
    let per_partition: Vec<String> = in_log
        .iter()
        .enumerate()
        .map(|(p, shown)| format!("p{p} {}", shown.len()))
        .collect();
    println!(
        "txn: {} lines visible ({}), transactions {} committed, {} aborted, {} open at a kill, commit in flight at a kill {applied} applied {not_applied} not; {offsets_checked} acknowledged offsets checked, {hidden} records of aborted or open transactions hidden, {} violations",
        in_log.iter().map(Vec::len).sum::<usize>(),
        per_partition.join(", "),
        count(TxnFate::Committed),
        count(TxnFate::Aborted),
        count(TxnFate::Open),
        violations.borrow().len()
    );
    let violations = violations.into_inner();
    if violations.is_empty() {
        return ExitCode::SUCCESS;
    }
    for v in &violations {
        println!("VIOLATION txn: {v}");
    }
    ExitCode::FAILURE
}

struct Appender {
    acked: BTreeSet<u64>,
    maybe: BTreeSet<u64>,
    /// Sequence numbers seen in the log, in log order.
    visible: Vec<u64>,
}

fn verify(kind: &str, cat: &Path, state: &Path, ids: &[u32], f: &Flags) -> ExitCode {
    let keyed = kind == "compact";
    let keys = if keyed {
        Some(f.keys.unwrap_or(1))
    } else {
        None
    };
    let mut apps: BTreeMap<u32, Appender> = ids
        .iter()
        .map(|&id| {
            let app = Appender {
                acked: read_seqs(&state_file(state, id, "acked"))
                    .into_iter()
                    .collect(),
                maybe: read_seqs(&state_file(state, id, "maybe"))
                    .into_iter()
                    .collect(),
                visible: Vec::new(),
            };
            (id, app)
        })
        .collect();
    let mut violations: Vec<String> = Vec::new();
    let mut violate = |v: String| {
        if violations.len() < 20 {
            violations.push(v);
        }
    };
    let bytes = std::fs::read(cat).unwrap_or_else(|e| panic!("read {}: {e}", cat.display()));
    if !bytes.is_empty() && !bytes.ends_with(b"\n") {
        violate("the log does not end with a newline (a torn last line)".to_string());
    }
    // Last visible (seq) per (id, key), for compaction.
    let mut last_of_key: BTreeMap<(u32, u32), u64> = BTreeMap::new();
    let mut lines = 0u64;
    // (appender, seq) of each line in log order, for the offsets producers were given.
    let mut at_line: Vec<Option<(u32, u64)>> = Vec::new();
    let body = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
    let records = (!bytes.is_empty()).then(|| body.split(|&b| b == b'\n'));
    for (n, raw) in records.into_iter().flatten().enumerate() {
        lines += 1;
        let text = String::from_utf8_lossy(raw);
        let parsed = parse(&text, keyed).filter(|&(id, seq)| line(id, seq, keys) == text);
        at_line.push(parsed);
        let Some((id, seq)) = parsed else {
            violate(format!(
                "line {}: not a line any appender wrote: {text:?}",
                n + 1
            ));
            continue;
        };
        let Some(app) = apps.get_mut(&id) else {
            violate(format!("line {}: unknown appender {id}: {text:?}", n + 1));
            continue;
        };
        if let Some(&prev) = app.visible.last() {
            if seq <= prev {
                violate(format!(
                    "line {}: appender {id} seq {seq} after seq {prev} (duplicate or reordered)",
                    n + 1
                ));
            }
        }
        if !app.acked.contains(&seq) && !app.maybe.contains(&seq) {
            violate(format!(
                "line {}: appender {id} seq {seq} was never attempted or acknowledged",
                n + 1
            ));
        }
        app.visible.push(seq);
        if let Some(k) = keys {
            last_of_key.insert((id, key_of(id, seq, k)), seq);
        }
    }
    let mut acked_total = 0usize;
    let mut maybe_total = 0usize;
    let mut maybe_present = 0usize;
    let mut expected_present = 0usize;
    for (&id, app) in &apps {
        acked_total += app.acked.len();
        maybe_total += app.maybe.len();
        let visible: BTreeSet<u64> = app.visible.iter().copied().collect();
        maybe_present += app.maybe.intersection(&visible).count();
        match kind {
            "keep" | "delete" => {
                let from = match (kind, app.visible.first()) {
                    ("keep", _) => 0,
                    (_, Some(&first)) => first,
                    // Retention took every line of this appender: nothing to hold it to.
                    (_, None) => u64::MAX,
                };
                for &seq in app.acked.range(from..) {
                    expected_present += 1;
                    if !visible.contains(&seq) {
                        violate(format!(
                            "appender {id}: acknowledged seq {seq} ({:?}) is missing (first visible seq {from})",
                            line(id, seq, keys)
                        ));
                    }
                }
            }
            _ => {
                let k = keys.expect("compact is keyed");
                let mut latest: BTreeMap<u32, u64> = BTreeMap::new();
                for &seq in &app.acked {
                    latest.insert(key_of(id, seq, k), seq);
                }
                for (key, want) in latest {
                    expected_present += 1;
                    match last_of_key.get(&(id, key)) {
                        Some(&got) if got == want => {}
                        Some(&got) if got > want && app.maybe.contains(&got) => {}
                        Some(&got) => violate(format!(
                            "appender {id} key {key}: last value in the log is seq {got}, latest acknowledged is seq {want}"
                        )),
                        None => violate(format!(
                            "appender {id} key {key}: latest acknowledged seq {want} is gone (no value at all)"
                        )),
                    }
                }
            }
        }
    }
    let mut offsets_checked = 0usize;
    if let (Some((start, _)), "keep") = (f.offsets, kind) {
        // Nothing is ever removed from a `keep` log: line i is offset start + i, so a
        // record a producer was told is at offset o must be line o - start.
        for &id in ids {
            for (seq, offset) in read_offsets(&state_file(state, id, "offsets")) {
                offsets_checked += 1;
                let got = offset
                    .checked_sub(start)
                    .and_then(|i| at_line.get(usize::try_from(i).ok()?).copied().flatten());
                if got != Some((id, seq)) {
                    violate(format!(
                        "producer {id}: seq {seq} was acknowledged at offset {offset}, where the log has {got:?}"
                    ));
                }
            }
        }
    }
    if let Some((start, end)) = f.offsets {
        // Neither retention (whole segments) nor a crash may leave a hole in the offsets of
        // a log that is never compacted: offsets [start, end) are exactly the lines shown.
        if kind != "compact" && end.checked_sub(start) != Some(lines) {
            violate(format!(
                "status says offsets [{start}, {end}) but the log shows {lines} lines"
            ));
        }
        if kind == "compact" && end < lines {
            violate(format!(
                "status log_end_offset {end} is below the {lines} lines shown"
            ));
        }
    }
    println!(
        "{kind}: {lines} lines visible, {acked_total} acked in total, {expected_present} required present, {offsets_checked} acknowledged offsets checked, maybe {maybe_present}/{maybe_total} present, {} violations",
        violations.len()
    );
    if violations.is_empty() {
        return ExitCode::SUCCESS;
    }
    for v in &violations {
        println!("VIOLATION {kind}: {v}");
    }
    ExitCode::FAILURE
}

/// Kafka's `Utils.murmur2`, transcribed from the Java (signed 32-bit arithmetic, `>>>`
/// as a logical shift, the tail's `switch` falling through): the engine's partitioner is
/// private to the crate, and the verifier should not trust it anyway.
fn murmur2(data: &[u8]) -> i32 {
    let m: i32 = 0x5bd1_e995;
    let ushr = |x: i32, n: u32| ((x as u32) >> n) as i32;
    let mut h = (0x9747_b28c_u32 as i32) ^ data.len() as i32;
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        let mut k = i32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        k = k.wrapping_mul(m);
        k ^= ushr(k, 24);
        k = k.wrapping_mul(m);
        h = h.wrapping_mul(m);
        h ^= k;
    }
    let tail = words.remainder();
    if tail.len() >= 3 {
        h ^= i32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= i32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= i32::from(tail[0]);
        h = h.wrapping_mul(m);
    }
    h ^= ushr(h, 13);
    h = h.wrapping_mul(m);
    h ^= ushr(h, 15);
    h
}

/// The partition Kafka's default partitioner picks for `key`:
/// `toPositive(murmur2(key)) % partitions`.
fn partition_of_key(key: &str, partitions: usize) -> usize {
    (murmur2(key.as_bytes()) & 0x7fff_ffff) as usize % partitions
}

/// The key of appender `id`'s line `seq` (what [`line`] puts before the `:`).
fn key_text(id: u32, seq: u64, keys: u32) -> String {
    format!("a{id}k{:03}", key_of(id, seq, keys))
}

/// `verify-partitions`: a topic of several partitions (nothing ever removed), written by
/// keyed appenders through its `log` (`keyed`: each line to its key's partition) and by
/// appenders each to one partition's `partitions/P/log` (`direct`), all with `keys`
/// keys. `CAT_DIR/log` is `cat TOPIC/log`, `CAT_DIR/P.log` is `cat
/// TOPIC/partitions/P/log`, `offsets` each partition's log start and end offsets. Holds:
/// every line whole and acknowledged or maybe; in each partition's log only the lines
/// that belong there (the key's partition, or the one written to), each appender's in
/// increasing sequence order, its offsets [start, end) exactly the lines shown, every
/// acknowledged line of the partition present once; and the topic's `log` is every
/// partition's lines exactly once (each partition's, in its own order) with each
/// appender's lines in the order they were acknowledged: kill -9 loses nothing the page
/// cache holds, so no run of the stream order is lost and no record moved.
fn verify_partitions(
    cats: &Path,
    state: &Path,
    keyed: &[u32],
    direct: &[(u32, usize)],
    keys: u32,
    offsets: &[(u64, u64)],
) -> ExitCode {
    let partitions = offsets.len();
    let partition_of = |id: u32, seq: u64| -> usize {
        match direct.iter().find(|&&(d, _)| d == id) {
            Some(&(_, p)) => p,
            None => partition_of_key(&key_text(id, seq, keys), partitions),
        }
    };
    let ids: Vec<u32> = keyed
        .iter()
        .copied()
        .chain(direct.iter().map(|&(id, _)| id))
        .collect();
    let ledgers: BTreeMap<u32, (BTreeSet<u64>, BTreeSet<u64>)> = ids
        .iter()
        .map(|&id| {
            let acked = read_seqs(&state_file(state, id, "acked"))
                .into_iter()
                .collect();
            let maybe = read_seqs(&state_file(state, id, "maybe"))
                .into_iter()
                .collect();
            (id, (acked, maybe))
        })
        .collect();
    let mut violations: Vec<String> = Vec::new();
    let mut violate = |v: String| {
        if violations.len() < 20 {
            violations.push(v);
        }
    };
    // The (appender, seq) of each line of a `cat` output, checked line by line: whole,
    // an appender's, acknowledged or maybe, each appender's in increasing order.
    let mut read_cat = |name: &str| -> Vec<(u32, u64)> {
        let path = cats.join(name);
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        if !bytes.is_empty() && !bytes.ends_with(b"\n") {
            violate(format!(
                "{name}: does not end with a newline (a torn last line)"
            ));
        }
        let mut last: BTreeMap<u32, u64> = BTreeMap::new();
        let mut out = Vec::new();
        let body = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
        let lines = (!bytes.is_empty()).then(|| body.split(|&b| b == b'\n'));
        for (n, raw) in lines.into_iter().flatten().enumerate() {
            let text = String::from_utf8_lossy(raw);
            let Some((id, seq)) =
                parse(&text, true).filter(|&(id, seq)| line(id, seq, Some(keys)) == text)
            else {
                violate(format!(
                    "{name} line {}: not a line any appender wrote: {text:?}",
                    n + 1
                ));
                continue;
            };
            let Some((acked, maybe)) = ledgers.get(&id) else {
                violate(format!(
                    "{name} line {}: unknown appender {id}: {text:?}",
                    n + 1
                ));
                continue;
            };
            if !acked.contains(&seq) && !maybe.contains(&seq) {
                violate(format!(
                    "{name} line {}: appender {id} seq {seq} was never attempted or acknowledged",
                    n + 1
                ));
            }
            if let Some(prev) = last.insert(id, seq).filter(|&prev| seq <= prev) {
                violate(format!(
                    "{name} line {}: appender {id} seq {seq} after seq {prev} (duplicate or reordered)",
                    n + 1
                ));
            }
            out.push((id, seq));
        }
        out
    };
    let topic = read_cat("log");
    let per_partition: Vec<Vec<(u32, u64)>> = (0..partitions)
        .map(|p| read_cat(&format!("{p}.log")))
        .collect();
    let mut counts = Vec::new();
    for (p, shown) in per_partition.iter().enumerate() {
        for &(id, seq) in shown {
            let want = partition_of(id, seq);
            if want != p {
                violate(format!(
                    "partitions/{p}/log: appender {id} seq {seq} belongs in partition {want}"
                ));
            }
        }
        let (start, end) = offsets[p];
        if end.checked_sub(start) != Some(shown.len() as u64) {
            violate(format!(
                "partitions/{p}/status says offsets [{start}, {end}) but its log shows {} lines",
                shown.len()
            ));
        }
        // The topic's `log` holds this partition's lines, in this partition's order.
        let in_topic: Vec<(u32, u64)> = topic
            .iter()
            .copied()
            .filter(|&(id, seq)| partition_of(id, seq) == p)
            .collect();
        if &in_topic != shown {
            let at = in_topic.iter().zip(shown).position(|(a, b)| a != b);
            violate(format!(
                "log holds {} lines of partition {p}, partitions/{p}/log {}; first difference at its line {:?}",
                in_topic.len(),
                shown.len(),
                at.map(|i| i + 1)
            ));
        }
        let through_log = shown.iter().filter(|(id, _)| keyed.contains(id)).count();
        counts.push(format!("p{p} {} ({through_log} through log)", shown.len()));
    }
    let visible: BTreeSet<(u32, u64)> = topic.iter().copied().collect();
    let mut acked_total = 0;
    let mut maybe_total = 0;
    let mut maybe_present = 0;
    for (&id, (acked, maybe)) in &ledgers {
        acked_total += acked.len();
        maybe_total += maybe.len();
        maybe_present += maybe
            .iter()
            .filter(|&&s| visible.contains(&(id, s)))
            .count();
        for &seq in acked {
            if !visible.contains(&(id, seq)) {
                violate(format!(
                    "appender {id}: acknowledged seq {seq} ({:?}, partition {}) is missing from log",
                    line(id, seq, Some(keys)),
                    partition_of(id, seq)
                ));
            }
        }
    }
    println!(
        "partitions: {} lines visible in log, {}; {acked_total} acked in total, all required present, maybe {maybe_present}/{maybe_total} present, {} violations",
        topic.len(),
        counts.join(", "),
        violations.len()
    );
    if violations.is_empty() {
        return ExitCode::SUCCESS;
    }
    for v in &violations {
        println!("VIOLATION partitions: {v}");
    }
    ExitCode::FAILURE
}

/// A consumer protocol message (a subscription or an assignment) as the group APIs carry
/// it: its version, then the message at that version.
fn consumer_protocol<M: Encodable>(version: i16, message: &M) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(version);
    message
        .encode(&mut buf, version)
        .expect("encode a consumer protocol message");
    buf.freeze()
}

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// Whom a commit comes from: a member of a generation, or (generation -1, no member id)
/// a consumer outside group management.
struct Membership {
    generation: i32,
    member_id: StrBytes,
    instance_id: Option<StrBytes>,
}

/// ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS: the member must join again.
const REJOIN_ERRORS: [i16; 3] = [22, 25, 27];
/// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR: a Kafka
/// client backs off and tries again (the request did nothing).
const RETRIABLE_ERRORS: [i16; 3] = [14, 15, 16];
const RETRY_BACKOFF: Duration = Duration::from_millis(50);

/// Joins `group` as the static member `crash-ID` and, as its leader, assigns itself every
/// topic. `Ok(Err(..))`: the coordinator refused (a bug: the harness fails).
fn join(
    wire: &mut Wire,
    group: &str,
    topics: &[&str],
    id: u32,
) -> io::Result<Result<Membership, String>> {
    let instance = str_bytes(&format!("crash-{id}"));
    let mut subscription = ConsumerProtocolSubscription::default();
    subscription.topics = topics.iter().map(|t| str_bytes(t)).collect();
    let mut protocol = JoinGroupRequestProtocol::default();
    protocol.name = StrBytes::from_static_str("range");
    protocol.metadata = consumer_protocol(0, &subscription);
    let mut request = JoinGroupRequest::default();
    request.group_id = GroupId(str_bytes(group));
    request.session_timeout_ms = 10_000;
    request.rebalance_timeout_ms = 10_000;
    request.group_instance_id = Some(instance.clone());
    request.protocol_type = StrBytes::from_static_str("consumer");
    request.protocols = vec![protocol];
    let mut assignment = ConsumerProtocolAssignment::default();
    assignment.assigned_partitions = topics
        .iter()
        .map(|t| {
            let mut partition = TopicPartition::default();
            partition.topic = TopicName(str_bytes(t));
            partition.partitions = vec![0];
            partition
        })
        .collect();
    for _ in 0..20 {
        let joined = wire.call(5, &request)?;
        match joined.error_code {
            0 => {}
            code if REJOIN_ERRORS.contains(&code) => continue,
            code if RETRIABLE_ERRORS.contains(&code) => {
                std::thread::sleep(RETRY_BACKOFF);
                continue;
            }
            code => return Ok(Err(format!("JoinGroup: error code {code}"))),
        }
        let mut sync = SyncGroupRequest::default();
        sync.group_id = request.group_id.clone();
        sync.generation_id = joined.generation_id;
        sync.member_id = joined.member_id.clone();
        sync.group_instance_id = Some(instance.clone());
        if joined.leader == joined.member_id {
            let mut own = SyncGroupRequestAssignment::default();
            own.member_id = joined.member_id.clone();
            own.assignment = consumer_protocol(0, &assignment);
            sync.assignments = vec![own];
        }
        let synced = wire.call(3, &sync)?;
        match synced.error_code {
            0 => {
                return Ok(Ok(Membership {
                    generation: joined.generation_id,
                    member_id: joined.member_id,
                    instance_id: Some(instance),
                }))
            }
            code if REJOIN_ERRORS.contains(&code) => continue,
            code => return Ok(Err(format!("SyncGroup: error code {code}"))),
        }
    }
    Ok(Err("no generation completed in 20 joins".to_string()))
}

/// Commit number `n`'s OffsetCommit: offset n of every topic's partition 0, metadata cID-N.
fn commit_request(
    group: &str,
    topics: &[&str],
    id: u32,
    n: u64,
    membership: &Membership,
) -> OffsetCommitRequest {
    let mut request = OffsetCommitRequest::default();
    request.group_id = GroupId(str_bytes(group));
    request.generation_id_or_member_epoch = membership.generation;
    request.member_id = membership.member_id.clone();
    request.group_instance_id = membership.instance_id.clone();
    request.retention_time_ms = -1;
    request.topics = topics
        .iter()
        .map(|t| {
            let mut partition = OffsetCommitRequestPartition::default();
            partition.partition_index = 0;
            partition.committed_offset = n as i64;
            partition.committed_leader_epoch = -1;
            partition.committed_metadata = Some(str_bytes(&format!("c{id}-{n}")));
            let mut topic = OffsetCommitRequestTopic::default();
            topic.name = TopicName(str_bytes(t));
            topic.partitions = vec![partition];
            topic
        })
        .collect();
    request
}

/// OffsetCommit versions taken in turn: outside group management v2 (with a retention
/// time), v5 and v8; as a static member v7 and v8 (group instance ids came with v7).
const COMMIT_VERSIONS: [i16; 3] = [2, 5, 8];
const MEMBER_COMMIT_VERSIONS: [i16; 2] = [7, 8];

fn commit(
    address: &str,
    group: &str,
    topics: &[&str],
    state: &Path,
    id: u32,
    f: &Flags,
) -> ExitCode {
    // Numbered from 1 (-1 is "nothing committed"), after every number used before.
    let after_fetched = read_seqs(&state_file(state, id, "fetched"))
        .into_iter()
        .max()
        .map_or(0, |m| m + 1);
    let start = next_seq(state, id).max(after_fetched).max(1);
    let mut acked = BufWriter::new(open_state(&state_file(state, id, "acked")));
    let mut wire = match Wire::connect(address) {
        Ok(wire) => wire,
        Err(e) => {
            println!("committer {id}: connect failed: {e}");
            return ExitCode::SUCCESS;
        }
    };
    // As a Kafka consumer does first (the coordinator creates `__consumer_offsets` then).
    let mut lookup = FindCoordinatorRequest::default();
    lookup.key = str_bytes(group);
    match wire.call(3, &lookup) {
        Ok(r) if r.error_code == 0 => {}
        Ok(r) => {
            println!(
                "committer {id}: FindCoordinator answered error code {}",
                r.error_code
            );
            return ExitCode::FAILURE;
        }
        Err(e) => {
            println!("committer {id}: FindCoordinator failed: {e}");
            return ExitCode::SUCCESS;
        }
    }
    let outside = || Membership {
        generation: -1,
        member_id: StrBytes::default(),
        instance_id: None,
    };
    let mut membership = outside();
    let mut joins = 0usize;
    let mut retried = 0usize;
    let mut n = start;
    let mut count = 0u64;
    let mut commits = 0usize;
    let mut failed = false;
    let stopped = loop {
        if f.member && membership.generation < 0 {
            joins += 1;
            match join(&mut wire, group, topics, id) {
                Ok(Ok(joined)) => membership = joined,
                Ok(Err(refused)) => {
                    failed = true;
                    break refused;
                }
                // Nothing in flight: a join is no commit.
                Err(e) => break format!("joining: {e}"),
            }
        }
        if count >= f.max {
            break "reached --max".to_string();
        }
        let version = if f.member {
            MEMBER_COMMIT_VERSIONS[commits % MEMBER_COMMIT_VERSIONS.len()]
        } else {
            COMMIT_VERSIONS[commits % COMMIT_VERSIONS.len()]
        };
        commits += 1;
        let response = match wire.call(version, &commit_request(group, topics, id, n, &membership))
        {
            Ok(response) => response,
            Err(e) => {
                writeln!(open_state(&state_file(state, id, "maybe")), "{n}")
                    .expect("write maybe file");
                break e.to_string();
            }
        };
        let codes: BTreeSet<i16> = response
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
            .collect();
        if codes == BTreeSet::from([0]) {
            writeln!(acked, "{n}").expect("write ledger");
            count += 1;
            n += 1;
        } else if f.member && codes.iter().all(|c| REJOIN_ERRORS.contains(c)) {
            // Refused whole: nothing of it was written. The same number goes again.
            membership = outside();
        } else if codes.iter().all(|c| RETRIABLE_ERRORS.contains(c)) {
            retried += 1;
            std::thread::sleep(RETRY_BACKOFF);
        } else {
            failed = true;
            break format!("OffsetCommit v{version} answered error codes {codes:?}");
        }
        if f.pause_us > 0 {
            std::thread::sleep(Duration::from_micros(f.pause_us));
        }
    };
    acked.flush().expect("flush ledger");
    println!(
        "committer {id}: {count} commits acked from {start}, {joins} joins, {retried} retried, stopped: {stopped}"
    );
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn verify_commits(address: &str, group: &str, topics: &[&str], state: &Path, id: u32) -> ExitCode {
    let acked: BTreeSet<u64> = read_seqs(&state_file(state, id, "acked"))
        .into_iter()
        .collect();
    let maybe: BTreeSet<u64> = read_seqs(&state_file(state, id, "maybe"))
        .into_iter()
        .collect();
    let fetched_path = state_file(state, id, "fetched");
    let before = read_seqs(&fetched_path).into_iter().max();
    let mut request = OffsetFetchRequest::default();
    request.group_id = GroupId(str_bytes(group));
    request.topics = Some(
        topics
            .iter()
            .map(|t| {
                let mut topic = OffsetFetchRequestTopic::default();
                topic.name = TopicName(str_bytes(t));
                topic.partition_indexes = vec![0];
                topic
            })
            .collect(),
    );
    let response = match Wire::connect(address).and_then(|mut wire| wire.call(6, &request)) {
        Ok(response) => response,
        Err(e) => {
            println!("VIOLATION committer {id}: OffsetFetch of {group} failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut violations = Vec::new();
    if response.error_code != 0 {
        violations.push(format!(
            "OffsetFetch answered error code {}",
            response.error_code
        ));
    }
    let fetched: BTreeSet<(i64, String)> = response
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| {
            if p.error_code != 0 {
                violations.push(format!("a partition answered error code {}", p.error_code));
            }
            let metadata = p.metadata.as_deref().unwrap_or_default().to_string();
            (p.committed_offset, metadata)
        })
        .collect();
    let last_acked = acked.last().copied();
    let mut got = None;
    match fetched.iter().collect::<Vec<_>>().as_slice() {
        [(-1, _)] if last_acked.is_none() => {}
        [(offset, metadata)] => {
            let n = u64::try_from(*offset).ok();
            got = n;
            if *metadata != format!("c{id}-{offset}") {
                violations.push(format!("offset {offset} has the metadata {metadata:?}"));
            }
            if n < last_acked {
                violations.push(format!(
                    "acknowledged commit {} lost: the committed offset is {offset}",
                    last_acked.unwrap_or_default()
                ));
            } else if n != last_acked && !n.is_some_and(|n| maybe.contains(&n)) {
                violations.push(format!(
                    "committed offset {offset} was neither the last acknowledged ({last_acked:?}) nor in flight at a kill"
                ));
            }
            if n < before {
                violations.push(format!(
                    "committed offset {offset} moved backwards from {}",
                    before.unwrap_or_default()
                ));
            }
        }
        several => violations.push(format!(
            "the topics' offsets are not one commit's: {several:?}"
        )),
    }
    if let Some(n) = got {
        writeln!(open_state(&fetched_path), "{n}").expect("write the fetched ledger");
    }
    let in_flight = match got {
        Some(n) if maybe.contains(&n) => "the commit in flight at the kill was applied",
        _ if maybe.last() > last_acked.as_ref() => {
            "the commit in flight at the kill was not applied"
        }
        _ => "no commit in flight at the kill",
    };
    println!(
        "committer {id}: {} commits acknowledged, committed offset {got:?} (last acknowledged {last_acked:?}), {in_flight}, {} violations",
        acked.len(),
        violations.len()
    );
    for v in &violations {
        println!("VIOLATION committer {id}: {v}");
    }
    if violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("append") if args.len() >= 4 => {
            let (Ok(id), Some(f)) = (args[3].parse::<u32>(), flags(&args[4..])) else {
                return usage();
            };
            append(Path::new(&args[1]), Path::new(&args[2]), id, &f)
        }
        Some("produce") if args.len() >= 5 => {
            let (Ok(id), Some(f)) = (args[4].parse::<u32>(), flags(&args[5..])) else {
                return usage();
            };
            produce(&args[1], &args[2], Path::new(&args[3]), id, &f)
        }
        Some("txn") if args.len() >= 6 => {
            let (Ok(partitions), Ok(id), Some(f)) = (
                args[3].parse::<usize>(),
                args[5].parse::<u32>(),
                flags(&args[6..]),
            ) else {
                return usage();
            };
            transact(&args[1], &args[2], partitions, Path::new(&args[4]), id, &f)
        }
        Some("verify-txn") if args.len() == 7 => {
            let (Ok(partitions), Ok(id)) = (args[3].parse::<usize>(), args[6].parse::<u32>())
            else {
                return usage();
            };
            verify_txn(
                &args[1],
                &args[2],
                partitions,
                Path::new(&args[4]),
                Path::new(&args[5]),
                id,
            )
        }
        Some("commit") if args.len() >= 6 => {
            let (Ok(id), Some(f)) = (args[5].parse::<u32>(), flags(&args[6..])) else {
                return usage();
            };
            let topics: Vec<&str> = args[3].split(',').collect();
            commit(&args[1], &args[2], &topics, Path::new(&args[4]), id, &f)
        }
        Some("verify-commits") if args.len() == 6 => {
            let Ok(id) = args[5].parse::<u32>() else {
                return usage();
            };
            let topics: Vec<&str> = args[3].split(',').collect();
            verify_commits(&args[1], &args[2], &topics, Path::new(&args[4]), id)
        }
        Some("verify-partitions") if args.len() >= 5 => {
            let keyed: Option<Vec<u32>> = args[3].split(',').map(|s| s.parse().ok()).collect();
            let direct: Option<Vec<(u32, usize)>> = args[4]
                .split(',')
                .map(|s| {
                    let (id, p) = s.split_once(':')?;
                    Some((id.parse().ok()?, p.parse().ok()?))
                })
                .collect();
            let (Some(keyed), Some(direct), Some(f)) = (keyed, direct, flags(&args[5..])) else {
                return usage();
            };
            let (Some(keys), Some(offsets)) = (f.keys, f.partition_offsets.as_deref()) else {
                return usage();
            };
            verify_partitions(
                Path::new(&args[1]),
                Path::new(&args[2]),
                &keyed,
                &direct,
                keys,
                offsets,
            )
        }
        Some("verify") if args.len() >= 5 => {
            let ids: Option<Vec<u32>> = args[4].split(',').map(|s| s.parse().ok()).collect();
            let (Some(ids), Some(f)) = (ids, flags(&args[5..])) else {
                return usage();
            };
            if !matches!(args[1].as_str(), "keep" | "delete" | "compact") {
                return usage();
            }
            verify(&args[1], Path::new(&args[2]), Path::new(&args[3]), &ids, &f)
        }
        _ => usage(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kafka's `UtilsTest.testMurmur2` vectors, and the empty input.
    #[test]
    fn murmur2_is_kafkas() {
        let cases: [(&str, i32); 5] = [
            ("21", -973_932_308),
            ("foobar", -790_332_482),
            ("a-little-bit-long-string", -985_981_536),
            ("abc", 479_470_107),
            ("", 275_646_681),
        ];
        for (data, want) in cases {
            assert_eq!(murmur2(data.as_bytes()), want, "murmur2({data:?})");
        }
    }

    #[test]
    fn lines_parse_back() {
        for seq in [0, 1, 99, 123_456_789] {
            for keys in [None, Some(20)] {
                let l = line(3, seq, keys);
                assert_eq!(parse(&l, keys.is_some()), Some((3, seq)), "{l}");
            }
        }
    }
}
