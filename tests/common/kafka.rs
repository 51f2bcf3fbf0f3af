//! A Kafka listener on a throw-away engine, and a client speaking kafka-protocol's
//! messages over a real socket to it (tests/kafka_wire.rs, tests/kafka_load.rs).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, FetchRequest, MetadataRequest, ProduceRequest, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use kpfs::engine::format::{decode_batch, BatchBuilder};
use kpfs::engine::{BrokerConfig, Engine, EngineOptions, ManualClock};
use kpfs::kafka::{Listener, ListenerConfig, ListenerHandle};

pub const MAX_REQUEST: usize = 1 << 20;

pub struct Broker {
    pub engine: Arc<Engine>,
    /// The engine's clock: nothing moves it but the test (no background threads run, so
    /// the group coordinator's timers fire when the test advances it and ticks).
    pub clock: Arc<ManualClock>,
    listener: Option<ListenerHandle>,
    /// What [`Broker::restart`] opens again.
    overrides: Vec<(String, String)>,
    config: ListenerConfig,
    dir: tempfile::TempDir,
}

impl Broker {
    pub fn start() -> Broker {
        Broker::start_with(|_| {})
    }

    pub fn start_with(adjust: impl FnOnce(&mut ListenerConfig)) -> Broker {
        Broker::start_configured(&[], adjust)
    }

    /// A broker whose engine has the broker configs `overrides` (as `--override`).
    pub fn start_configured(
        overrides: &[(&str, &str)],
        adjust: impl FnOnce(&mut ListenerConfig),
    ) -> Broker {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(super::T0));
        let overrides: Vec<(String, String)> = overrides
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut config = ListenerConfig {
            bind: "127.0.0.1:0".parse().unwrap(),
            advertised_host: "127.0.0.1".into(),
            advertised_port: 0,
            node_id: 1,
            cluster_id: "kpfs-test-cluster".into(),
            socket_request_max_bytes: MAX_REQUEST,
            max_connections: 100,
            connections_max_idle_ms: 60_000,
            auto_create_topics: true,
            max_request_partition_size_limit: 2000,
            delete_topic_enable: true,
        };
        adjust(&mut config);
        Broker::serve(dir, overrides, config, clock)
    }

    pub fn addr(&self) -> SocketAddr {
        self.listener.as_ref().unwrap().local_addr()
    }

    pub fn client(&self) -> Client {
        Client::connect(self.addr())
    }

    /// Shuts the listener down (as `kpfs umount` does before the engine closes).
    pub fn stop_listener(&mut self) {
        if let Some(listener) = self.listener.take() {
            listener.shutdown();
        }
    }

    /// Closes the listener and the engine, then opens both again on the same data
    /// directory (a remount), with the same broker configs and clock.
    pub fn restart(mut self) -> Broker {
        let dir = std::mem::replace(&mut self.dir, tempfile::tempdir().unwrap());
        let overrides = std::mem::take(&mut self.overrides);
        let (config, clock) = (self.config.clone(), self.clock.clone());
        // Dropping closes the engine and lets go of the data directory's lock.
        drop(self);
        Broker::serve(dir, overrides, config, clock)
    }

    /// Opens the engine on `dir` and its listener.
    fn serve(
        dir: tempfile::TempDir,
        overrides: Vec<(String, String)>,
        config: ListenerConfig,
        clock: Arc<ManualClock>,
    ) -> Broker {
        let engine = Arc::new(
            Engine::open(
                dir.path(),
                BrokerConfig::load(None, &overrides).unwrap(),
                clock.clone(),
                EngineOptions::default(),
            )
            .unwrap(),
        );
        let listener = Listener::start(engine.clone(), config.clone()).unwrap();
        Broker {
            engine,
            clock,
            listener: Some(listener),
            overrides,
            config,
            dir,
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.stop_listener();
        self.engine.shutdown().unwrap();
    }
}

pub struct Client {
    pub stream: TcpStream,
    pub correlation_id: i32,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        Client {
            stream,
            correlation_id: 0,
        }
    }

    pub fn frame<R: Request>(&mut self, version: i16, request: &R) -> Vec<u8> {
        self.correlation_id += 1;
        let key = ApiKey::try_from(R::KEY).unwrap();
        let mut buf = BytesMut::new();
        buf.put_i32(0);
        RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation_id)
            .with_client_id(Some(StrBytes::from_static_str("kpfs-test")))
            .encode(&mut buf, key.request_header_version(version))
            .unwrap();
        request.encode(&mut buf, version).unwrap();
        let size = (buf.len() - 4) as i32;
        buf[..4].copy_from_slice(&size.to_be_bytes());
        buf.to_vec()
    }

    pub fn send<R: Request>(&mut self, version: i16, request: &R) -> R::Response {
        let frame = self.frame(version, request);
        self.stream.write_all(&frame).unwrap();
        let key = ApiKey::try_from(R::KEY).unwrap();
        let mut body = self.read_response().expect("a response");
        let header =
            ResponseHeader::decode(&mut body, key.response_header_version(version)).unwrap();
        assert_eq!(header.correlation_id, self.correlation_id);
        let response = R::Response::decode(&mut body, version).unwrap();
        assert_eq!(body.remaining(), 0, "bytes after the {key:?} response");
        response
    }

    /// The next response frame, or `None` once the server closed the connection.
    pub fn read_response(&mut self) -> Option<Bytes> {
        let mut size = [0u8; 4];
        match self.stream.read_exact(&mut size) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return None,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return None,
            Err(e) => panic!("reading a response: {e}"),
        }
        let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
        self.stream.read_exact(&mut body).unwrap();
        Some(Bytes::from(body))
    }

    /// The server closed this connection (within the read timeout).
    pub fn is_closed(&mut self) -> bool {
        let mut byte = [0u8; 1];
        match self.stream.read(&mut byte) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }
}

pub fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

pub fn batch(values: &[(Option<&str>, &str)]) -> Bytes {
    let mut builder = BatchBuilder::new(0);
    for (i, (key, value)) in values.iter().enumerate() {
        builder.push(
            i as u64,
            super::T0,
            key.map(str::as_bytes),
            Some(value.as_bytes()),
        );
    }
    Bytes::from(builder.finish(None, None))
}

/// A Produce request of `records` to partition 0 of `topic`, with acks=all.
pub fn produce_request(topic: &str, records: Bytes) -> ProduceRequest {
    let mut partition = PartitionProduceData::default();
    partition.index = 0;
    partition.records = Some(records);
    let mut data = TopicProduceData::default();
    data.name = name(topic);
    data.partition_data = vec![partition];
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.timeout_ms = 5000;
    request.topic_data = vec![data];
    request
}

pub fn produce(client: &mut Client, version: i16, topic: &str, records: Bytes) -> (i16, i64) {
    let response = client.send(version, &produce_request(topic, records));
    let p = &response.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

pub fn metadata(client: &mut Client, version: i16, topic: &str, create: bool) -> i16 {
    let mut t = MetadataRequestTopic::default();
    t.name = Some(name(topic));
    let mut request = MetadataRequest::default();
    request.topics = Some(vec![t]);
    request.allow_auto_topic_creation = create;
    let response = client.send(version, &request);
    assert_eq!(response.brokers.len(), 1);
    response.topics[0].error_code
}

pub fn fetch(
    client: &mut Client,
    version: i16,
    topic: &str,
    offset: i64,
    wait_ms: i32,
) -> (i16, Bytes) {
    let mut partition = FetchPartition::default();
    partition.partition = 0;
    partition.fetch_offset = offset;
    partition.partition_max_bytes = 1 << 20;
    let mut t = FetchTopic::default();
    t.topic = name(topic);
    t.partitions = vec![partition];
    let mut request = FetchRequest::default();
    request.max_wait_ms = wait_ms;
    request.min_bytes = 1;
    request.max_bytes = 1 << 20;
    request.topics = vec![t];
    let response = client.send(version, &request);
    let p = &response.responses[0].partitions[0];
    (p.error_code, p.records.clone().unwrap_or_default())
}

pub fn values_of(mut records: Bytes) -> Vec<String> {
    let mut out = Vec::new();
    while records.has_remaining() {
        let (header, batch) = decode_batch(&records).unwrap();
        out.extend(
            batch
                .into_iter()
                .map(|r| String::from_utf8(r.value.unwrap()).unwrap()),
        );
        records.advance(header.size);
    }
    out
}

/// The listener's log lines, kept from the first [`logged_about`] call on: the tests check
/// that a closed connection says why.
fn captured_log() -> &'static Mutex<Vec<u8>> {
    static LOG: OnceLock<&'static Mutex<Vec<u8>>> = OnceLock::new();
    LOG.get_or_init(|| {
        let log: &'static Mutex<Vec<u8>> = Box::leak(Box::new(Mutex::new(Vec::new())));
        let writer = move || CapturedLog(log);
        tracing_subscriber::fmt()
            .with_writer(writer)
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .try_init()
            .expect("no other tracing subscriber in the Kafka tests");
        log
    })
}

struct CapturedLog(&'static Mutex<Vec<u8>>);

impl Write for CapturedLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Starts keeping the listener's log lines (call before the connections to check).
pub fn capture_log() {
    captured_log();
}

/// The log lines kept so far that name `peer` (the listener logs a connection by its
/// client's address).
pub fn logged_about(peer: SocketAddr) -> Vec<String> {
    let needle = format!("peer={peer}");
    String::from_utf8_lossy(&captured_log().lock().unwrap())
        .lines()
        .filter(|line| line.contains(&needle))
        .map(str::to_string)
        .collect()
}
