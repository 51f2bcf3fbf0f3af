//! A Kafka cluster as the store behind a mount (`kpfs mount --bootstrap-server`): topics,
//! partitions, appends, `log` streams, configs and groups served by the cluster's brokers
//! through librdkafka (the `rdkafka` crate). Knows nothing of FUSE; shares the line
//! protocol (`crate::lines`) with the local engine, so the same records show as the same
//! lines; reports the engine's error vocabulary, with the cluster's own errors as
//! [`EngineError::Broker`]. docs/ARCHITECTURE.md ("The cluster mount") has the design.

mod batch;
mod configs;
mod direct;
mod enqueue;
mod text;
mod view;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex, RwLock};
use rdkafka::admin::{
    AdminClient, AdminOptions, NewPartitions, NewTopic, TopicReplication, TopicResult,
};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::BaseConsumer;
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
use rdkafka::message::DeliveryResult;
use rdkafka::producer::{Producer, ProducerContext, ThreadedProducer};
use rdkafka::ClientContext;

use crate::deadline::Deadline;
use crate::engine::clock::Clock;
use crate::engine::config::TopicKey;
use crate::engine::groups::GroupError;
use crate::engine::{EngineError, Result, TopicDeletionHook};
use crate::lines::partitioner::KeyPartitioner;
use crate::lines::LineFormat;

use direct::{Connection, Direct};
use enqueue::{enqueue, OutRecord};
use view::TopicView;
pub(crate) use view::{Stream, ViewCursor};

/// How long a metadata or admin request may take before the file operation fails.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a topic list stays fresh: `ls -l` stats every topic, one metadata request.
const METADATA_FRESH: Duration = Duration::from_millis(500);
/// How long a topic this mount created or deleted keeps that state whatever a broker
/// that has not learnt of it yet answers ([`Cluster::settling`]).
const METADATA_SETTLE: Duration = Duration::from_secs(10);
/// A write of this many records or more goes through the producer that lingers: one
/// `cat` write (1 MiB, ten thousand 100-byte lines) is queued in about a millisecond, and
/// a producer that sends at once sends its first records alone and the rest in several
/// requests more, each replicated before it is acknowledged. Lingering 2 ms put the whole
/// write in one request and took `cat >> log` on a three-broker cluster from a median of
/// 81% of kcat's speed to 93% (docs/PERFORMANCE.md); an `echo`, which would only wait the
/// 2 ms, goes through the producer that does not linger.
const BULK_RECORDS: usize = 1000;
const BULK_LINGER_MS: &str = "2";
/// How long an append waits for the producer to learn of a partition just added.
const METADATA_WAIT: Duration = Duration::from_secs(10);
/// The group id of the mount's consumers, which never join it.
const VIEW_GROUP: &str = "kpfs-mount-view";
/// The file of the data directory that keeps each topic's line format.
const LINE_FORMATS_FILE: &str = "cluster-line-formats";
/// Refusals `.kpfs/errors` keeps, as the local mount.
const KEPT_REJECTIONS: usize = 100;

/// What every client of the mount is made with: the bootstrap servers and the client
/// properties of `--command-config`.
pub(crate) struct ClientSettings {
    properties: Vec<(String, String)>,
}

impl ClientSettings {
    /// `bootstrap` as `HOST:PORT[,HOST:PORT...]`; `properties` as Kafka's tools take
    /// them (`--command-config`), passed to librdkafka, whose names for the common ones
    /// (`security.protocol`, `sasl.*`, `ssl.*`, `client.id`) are Kafka's.
    pub(crate) fn new(bootstrap: &str, properties: Vec<(String, String)>) -> ClientSettings {
        let mut all = vec![("bootstrap.servers".to_string(), bootstrap.to_string())];
        all.extend(properties);
        ClientSettings { properties: all }
    }

    fn config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        // A topic is made by mkdir alone: a metadata request of a client that still
        // knows a deleted topic must not make it again on a cluster that auto-creates.
        config.set("allow.auto.create.topics", "false");
        for (key, value) in &self.properties {
            config.set(key, value);
        }
        config
    }

    /// A consumer of assigned partitions: the committed view only (`read_committed`, as
    /// the local mount's `log`), told of each partition's end. librdkafka wants a group id
    /// for assignments; one that never subscribes or commits is never a group on the
    /// cluster.
    fn consumer(&self) -> std::result::Result<BaseConsumer, KafkaError> {
        self.config()
            .set("group.id", VIEW_GROUP)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "true")
            .set("isolation.level", "read_committed")
            .set("auto.offset.reset", "earliest")
            .create()
    }
}

/// A topic's line format, owned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OwnedFormat {
    parse_key: bool,
    key_separator: Vec<u8>,
    null_marker: Option<Vec<u8>>,
}

impl Default for OwnedFormat {
    /// The defaults of the local mount's topic configs (docs/SEMANTICS.md).
    fn default() -> OwnedFormat {
        OwnedFormat {
            parse_key: false,
            key_separator: b"\t".to_vec(),
            null_marker: None,
        }
    }
}

impl OwnedFormat {
    fn as_format(&self) -> LineFormat<'_> {
        LineFormat {
            parse_key: self.parse_key,
            key_separator: &self.key_separator,
            null_marker: self.null_marker.as_deref(),
        }
    }

    /// The `config` lines of what differs from the defaults.
    fn own_lines(&self) -> Vec<(String, String)> {
        let defaults = OwnedFormat::default();
        let mut lines = Vec::new();
        if self.parse_key != defaults.parse_key {
            lines.push((
                TopicKey::ParseKey.name().to_string(),
                self.parse_key.to_string(),
            ));
        }
        if self.key_separator != defaults.key_separator {
            let separator = String::from_utf8_lossy(&self.key_separator).into_owned();
            lines.push((TopicKey::KeySeparator.name().to_string(), separator));
        }
        if let Some(marker) = &self.null_marker {
            let marker = String::from_utf8_lossy(marker).into_owned();
            lines.push((TopicKey::NullMarker.name().to_string(), marker));
        }
        lines
    }

    /// Whether `key` is one of the line format's configs, which the mount keeps.
    fn is_line_config(key: TopicKey) -> bool {
        matches!(
            key,
            TopicKey::ParseKey | TopicKey::KeySeparator | TopicKey::NullMarker
        )
    }

    /// The format with a change's line-protocol edits applied (`replace`: every other
    /// one back to its default).
    fn edited(&self, replace: bool, edits: &[(TopicKey, Option<&str>)]) -> OwnedFormat {
        let mut format = if replace {
            OwnedFormat::default()
        } else {
            self.clone()
        };
        let defaults = OwnedFormat::default();
        for (key, value) in edits {
            match key {
                TopicKey::ParseKey => {
                    format.parse_key = value.is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
                }
                TopicKey::KeySeparator => {
                    format.key_separator =
                        value.map_or(defaults.key_separator.clone(), |v| v.as_bytes().to_vec())
                }
                TopicKey::NullMarker => {
                    format.null_marker = value
                        .filter(|v| !v.is_empty())
                        .map(|v| v.as_bytes().to_vec())
                }
                _ => {}
            }
        }
        format
    }
}

/// Waits for the delivery reports of one write's records.
#[derive(Default)]
struct WriteWait {
    state: Mutex<WriteWaitState>,
    done: Condvar,
}

#[derive(Default)]
struct WriteWaitState {
    delivered: usize,
    /// The first refusal among the reports.
    refusal: Option<EngineError>,
    /// How many records the writer sent, once it sent the last: it is woken when they
    /// are all reported, not for each of a megabyte's ten thousand reports.
    sent: Option<usize>,
}

impl WriteWait {
    fn until_delivered(&self, sent: usize) -> Option<EngineError> {
        let mut state = self.state.lock();
        state.sent = Some(sent);
        while state.delivered < sent {
            self.done.wait(&mut state);
        }
        state.refusal.take()
    }
}

/// The producer's context: each record's report goes to its write's [`WriteWait`].
struct Deliveries;

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = Arc<WriteWait>;

    fn delivery(&self, result: &DeliveryResult<'_>, wait: Arc<WriteWait>) {
        let mut state = wait.state.lock();
        state.delivered += 1;
        if let Err((e, message)) = result {
            use rdkafka::message::Message;
            let action = format!("append to {}-{}", message.topic(), message.partition());
            state.refusal.get_or_insert_with(|| broker_error(action, e));
        }
        if state.sent.is_some_and(|sent| state.delivered >= sent) {
            wait.done.notify_one();
        }
    }
}

/// The clients a mount shares among its topics.
pub(crate) struct ClusterShared {
    settings: Arc<ClientSettings>,
    admin: AdminClient<DefaultClientContext>,
    /// Appends of a few records: sent at once.
    producer: ThreadedProducer<Deliveries>,
    /// Appends of [`BULK_RECORDS`] or more: sent after lingering [`BULK_LINGER_MS`].
    bulk_producer: ThreadedProducer<Deliveries>,
    /// Each topic's line format (`parse.key`, `key.separator`, `null.marker`): kpfs's own
    /// configs, which a cluster does not keep, so the mount keeps them in its data
    /// directory ([`LINE_FORMATS_FILE`]).
    formats: Mutex<BTreeMap<String, OwnedFormat>>,
    formats_file: PathBuf,
    /// The times files show (modification, refusals).
    clock: Arc<dyn Clock>,
    /// The requests librdkafka has no call for.
    direct: Direct,
}

/// The cluster behind a mount.
pub(crate) struct Cluster {
    shared: Arc<ClusterShared>,
    topics: Mutex<BTreeMap<String, Arc<ClusterTopic>>>,
    /// Until when the topic list last fetched is fresh.
    listed: Mutex<Option<Deadline>>,
    /// Topics this mount created (`true`) or deleted (`false`) a moment ago, until when:
    /// each broker learns of the change on its own, and a metadata answer from one that
    /// has not yet must not take a folder just made away (or bring a deleted one back).
    settling: Mutex<BTreeMap<String, (bool, Deadline)>>,
    rejections: Mutex<std::collections::VecDeque<String>>,
    deletion_hook: Mutex<Option<TopicDeletionHook>>,
}

/// What a topic and its partitions share: the cluster, the streams' positions, the line
/// format, whether the topic is gone.
struct TopicLink {
    name: String,
    shared: Arc<ClusterShared>,
    view: Arc<TopicView>,
    format: RwLock<OwnedFormat>,
    deleted: AtomicBool,
}

/// One topic of the cluster, as of the metadata that named it.
pub(crate) struct ClusterTopic {
    link: Arc<TopicLink>,
    partitions: RwLock<Vec<Arc<ClusterPartition>>>,
    next_keyless: AtomicU32,
    modified_ms: AtomicI64,
}

/// One partition of a cluster's topic.
pub(crate) struct ClusterPartition {
    index: u32,
    link: Arc<TopicLink>,
    modified_ms: AtomicI64,
}

/// Kafka's name of an error code: `TOPIC_ALREADY_EXISTS` for librdkafka's (or
/// kafka-protocol's) `TopicAlreadyExists`.
fn kafka_name(code: &impl std::fmt::Debug) -> String {
    let mut name = String::new();
    for (i, c) in format!("{code:?}").chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            name.push('_');
        }
        name.push(c.to_ascii_uppercase());
    }
    name
}

fn code_error(action: String, code: RDKafkaErrorCode) -> EngineError {
    EngineError::Broker {
        action,
        name: kafka_name(&code),
        code: code as i32,
        message: code.to_string(),
    }
}

fn broker_error(action: String, e: &KafkaError) -> EngineError {
    match e.rdkafka_error_code() {
        Some(code) => code_error(action, code),
        None => EngineError::Broker {
            action,
            name: "UNKNOWN_SERVER_ERROR".to_string(),
            code: -1,
            message: e.to_string(),
        },
    }
}

fn admin_options() -> AdminOptions {
    AdminOptions::new()
        .request_timeout(Some(REQUEST_TIMEOUT))
        .operation_timeout(Some(REQUEST_TIMEOUT))
}

/// A metadata answer listed no broker.
fn no_broker() -> EngineError {
    EngineError::Broker {
        action: "list the brokers".to_string(),
        name: "BROKER_NOT_AVAILABLE".to_string(),
        code: 8,
        message: "the metadata lists no broker".to_string(),
    }
}

/// What one topic of a metadata answer says.
struct TopicMetadata {
    partitions: u32,
}

impl ClusterShared {
    /// The cluster's topics and their partition counts; `only` asks for one topic.
    fn metadata(&self, only: Option<&str>) -> Result<BTreeMap<String, TopicMetadata>> {
        let metadata = self
            .admin
            .inner()
            .fetch_metadata(only, REQUEST_TIMEOUT)
            .map_err(|e| broker_error("list topics".to_string(), &e))?;
        Ok(metadata
            .topics()
            .iter()
            // A topic being created shows without partitions for a moment: it is not
            // there until it has them.
            .filter(|t| t.error().is_none() && !t.partitions().is_empty())
            .map(|t| {
                let partitions = t.partitions().len() as u32;
                (t.name().to_string(), TopicMetadata { partitions })
            })
            .collect())
    }

    /// The cluster's brokers by id, with the `host:port` clients reach them at.
    fn brokers(&self) -> Result<BTreeMap<i32, String>> {
        let metadata = self
            .admin
            .inner()
            .fetch_metadata(None, REQUEST_TIMEOUT)
            .map_err(|e| broker_error("list the brokers".to_string(), &e))?;
        Ok(metadata
            .brokers()
            .iter()
            .map(|b| (b.id(), format!("{}:{}", b.host(), b.port())))
            .collect())
    }

    /// A direct connection to the broker with the lowest id, and that id: the broker the
    /// mount shows as "this broker".
    fn connect_first(&self) -> Result<(i32, Connection)> {
        let brokers = self.brokers()?;
        let Some((&id, address)) = brokers.iter().next() else {
            return Err(no_broker());
        };
        Ok((id, self.direct.connect(address)?))
    }

    /// A direct connection to any broker: the first that answers, in id order.
    fn connect_any(&self) -> Result<Connection> {
        let mut failure = None;
        for address in self.brokers()?.values() {
            match self.direct.connect(address) {
                Ok(connection) => return Ok(connection),
                Err(e) => failure = Some(e),
            }
        }
        Err(failure.unwrap_or_else(no_broker))
    }

    /// Each partition's (log start, high watermark).
    fn watermarks(&self, topic: &str, partitions: u32) -> Result<Vec<(i64, i64)>> {
        (0..partitions)
            .map(|p| {
                self.admin
                    .inner()
                    .fetch_watermarks(topic, p as i32, REQUEST_TIMEOUT)
                    .map_err(|e| broker_error(format!("the offsets of {topic}-{p}"), &e))
            })
            .collect()
    }
}

/// Between two metadata requests that wait for the cluster to show a change: nothing
/// local can be waited on, and asking at once again would only load the controller.
#[allow(clippy::disallowed_methods)] // polling a remote cluster, which notifies no one
fn pause_before_asking_again() {
    std::thread::sleep(Duration::from_millis(50));
}

/// The first refusal among an admin request's per-topic results: `engine_refusal` gives
/// the local engine's refusal for the codes it has one for (with its text), the rest are
/// the cluster's.
fn topic_outcome(
    answer: KafkaResult<Vec<TopicResult>>,
    action: &str,
    engine_refusal: impl Fn(RDKafkaErrorCode) -> Option<EngineError>,
) -> Result<()> {
    for result in answer.map_err(|e| broker_error(action.to_string(), &e))? {
        if let Err((_, code)) = result {
            return Err(
                engine_refusal(code).unwrap_or_else(|| code_error(action.to_string(), code))
            );
        }
    }
    Ok(())
}

/// [`LINE_FORMATS_FILE`]'s text: a line per topic, `TOPIC PARSE_KEY SEPARATOR NULL_MARKER`,
/// the bytes in hex (a name or separator may hold any byte but these), `-` for no marker.
fn save_formats(formats: &BTreeMap<String, OwnedFormat>) -> String {
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let mut text = String::from("# each topic's parse.key, key.separator and null.marker (hex), kept by the cluster mount\n");
    for (topic, format) in formats {
        let marker = format.null_marker.as_deref().map_or("-".to_string(), hex);
        text.push_str(&format!(
            "{} {} {} {marker}\n",
            hex(topic.as_bytes()),
            format.parse_key,
            hex(&format.key_separator)
        ));
    }
    text
}

fn load_formats(path: &Path) -> std::result::Result<BTreeMap<String, OwnedFormat>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let unhex = |text: &str| -> Option<Vec<u8>> {
        text.len()
            .is_multiple_of(2)
            .then(|| {
                (0..text.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
                    .collect()
            })
            .flatten()
    };
    let mut formats = BTreeMap::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.starts_with('#'))
    {
        let fields: Vec<&str> = line.split(' ').collect();
        let parsed = match fields[..] {
            [topic, parse_key, separator, marker] => (|| {
                let topic = String::from_utf8(unhex(topic)?).ok()?;
                let format = OwnedFormat {
                    parse_key: parse_key.parse().ok()?,
                    key_separator: unhex(separator)?,
                    null_marker: if marker == "-" {
                        None
                    } else {
                        Some(unhex(marker)?)
                    },
                };
                Some((topic, format))
            })(),
            _ => None,
        };
        let (topic, format) = parsed.ok_or_else(|| {
            format!(
                "{} line {}: {line:?} is not `TOPIC PARSE_KEY SEPARATOR NULL_MARKER` in hex",
                path.display(),
                i + 1
            )
        })?;
        formats.insert(topic, format);
    }
    Ok(formats)
}

/// Waits for an admin request's answer on this thread.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    futures_executor::block_on(future)
}

impl Cluster {
    /// Connects to the cluster; fails unless it answers a metadata request.
    /// `data_dir` keeps what the cluster does not: the topics' line formats.
    pub(crate) fn connect(
        settings: ClientSettings,
        clock: Arc<dyn Clock>,
        data_dir: &Path,
    ) -> std::result::Result<Cluster, String> {
        let formats_file = data_dir.join(LINE_FORMATS_FILE);
        let formats = load_formats(&formats_file)?;
        let settings = Arc::new(settings);
        let admin: AdminClient<DefaultClientContext> =
            settings.config().create().map_err(|e| e.to_string())?;
        let producer = |linger_ms: &str| {
            settings
                .config()
                .set("acks", "all")
                .set("enable.idempotence", "true")
                .set("linger.ms", linger_ms)
                .create_with_context(Deliveries)
                .map_err(|e| e.to_string())
        };
        let (producer, bulk_producer) = (producer("0")?, producer(BULK_LINGER_MS)?);
        admin
            .inner()
            .fetch_metadata(None, REQUEST_TIMEOUT)
            .map_err(|e| {
                format!(
                    "the cluster at {} does not answer: {e}",
                    settings.properties[0].1
                )
            })?;
        let direct = Direct::new(&settings.properties, REQUEST_TIMEOUT);
        Ok(Cluster {
            shared: Arc::new(ClusterShared {
                direct,
                settings,
                admin,
                producer,
                bulk_producer,
                formats: Mutex::new(formats),
                formats_file,
                clock,
            }),
            topics: Mutex::new(BTreeMap::new()),
            listed: Mutex::new(None),
            settling: Mutex::new(BTreeMap::new()),
            rejections: Mutex::new(Default::default()),
            deletion_hook: Mutex::new(None),
        })
    }

    /// Brings the topic table in line with the cluster's metadata (at most every
    /// [`METADATA_FRESH`], unless `now`): new topics get handles, gone ones are dropped
    /// and the deletion hook told.
    fn refresh(&self, now: bool) {
        {
            let mut listed = self.listed.lock();
            if !now && listed.is_some_and(|fresh| !fresh.passed()) {
                return;
            }
            *listed = Some(Deadline::after(METADATA_FRESH));
        }
        let Ok(metadata) = self.shared.metadata(None) else {
            return; // the cluster is unreachable: keep what was known
        };
        let mut gone = Vec::new();
        {
            let mut settling = self.settling.lock();
            settling.retain(|_, (_, until)| !until.passed());
            let mut topics = self.topics.lock();
            topics.retain(|name, topic| {
                let keep = metadata.contains_key(name) || settling.get(name).is_some_and(|s| s.0);
                if !keep {
                    topic.retire();
                    gone.push(name.clone());
                }
                keep
            });
            for (name, meta) in &metadata {
                if settling.get(name).is_some_and(|s| !s.0) {
                    continue;
                }
                self.add_or_grow(&mut topics, name, meta);
            }
        }
        if let Some(hook) = self.deletion_hook.lock().as_ref() {
            for name in gone {
                hook(&name);
            }
        }
    }

    fn add_or_grow(
        &self,
        topics: &mut BTreeMap<String, Arc<ClusterTopic>>,
        name: &str,
        meta: &TopicMetadata,
    ) {
        match topics.get(name) {
            Some(topic) => topic.grow(meta.partitions),
            None => {
                let format = self
                    .shared
                    .formats
                    .lock()
                    .get(name)
                    .cloned()
                    .unwrap_or_default();
                let topic = ClusterTopic::new(name, &self.shared, meta.partitions, format);
                topics.insert(name.to_string(), topic);
            }
        }
    }

    pub(crate) fn topic_names(&self) -> Vec<String> {
        self.refresh(false);
        self.topics.lock().keys().cloned().collect()
    }

    pub(crate) fn topic(&self, name: &str) -> Option<Arc<ClusterTopic>> {
        self.refresh(false);
        self.topics.lock().get(name).cloned()
    }

    /// CreateTopics with the cluster's default partition count and replication factor.
    pub(crate) fn create_topic(&self, name: &str) -> Result<()> {
        let topic = NewTopic::new(name, -1, TopicReplication::Fixed(-1));
        let answer = block_on(self.shared.admin.create_topics([&topic], &admin_options()));
        topic_outcome(answer, &format!("create topic {name}"), |code| {
            (code == RDKafkaErrorCode::TopicAlreadyExists).then(|| EngineError::TopicExists {
                name: name.to_string(),
            })
        })?;
        if self.await_metadata(name, true) {
            return Ok(());
        }
        // The mkdir must not succeed with no folder to show.
        Err(EngineError::Broker {
            action: format!("create topic {name}"),
            name: "REQUEST_TIMED_OUT".to_string(),
            code: 7,
            message: format!(
                "the cluster created the topic, but its metadata did not show it within {} s",
                REQUEST_TIMEOUT.as_secs()
            ),
        })
    }

    /// DeleteTopics of one topic.
    pub(crate) fn delete_topic(&self, name: &str) -> Result<()> {
        let answer = block_on(self.shared.admin.delete_topics(&[name], &admin_options()));
        topic_outcome(answer, &format!("delete topic {name}"), |code| {
            (code == RDKafkaErrorCode::UnknownTopicOrPartition).then(|| EngineError::UnknownTopic {
                name: name.to_string(),
            })
        })?;
        self.await_metadata(name, false);
        if let Some(topic) = self.topics.lock().remove(name) {
            topic.retire();
        }
        Ok(())
    }

    /// Waits until the metadata shows `name` present or absent, so that the `ls` after a
    /// `mkdir` or `rmdir` sees it; false if it did not within [`REQUEST_TIMEOUT`]. The
    /// controller answers CreateTopics before every broker learnt of the topic: on a busy
    /// cluster one broker showed a new topic while the next asked did not, and the mkdir
    /// found no folder. So the answer is kept for [`METADATA_SETTLE`] whatever a lagging
    /// broker says.
    fn await_metadata(&self, name: &str, present: bool) -> bool {
        self.settling.lock().insert(
            name.to_string(),
            (present, Deadline::after(METADATA_SETTLE)),
        );
        let deadline = Deadline::after(REQUEST_TIMEOUT);
        let mut shown = false;
        while !shown && !deadline.passed() {
            if let Ok(metadata) = self.shared.metadata(Some(name)) {
                shown = metadata.contains_key(name) == present;
                if let Some(meta) = metadata.get(name).filter(|_| present) {
                    self.add_or_grow(&mut self.topics.lock(), name, meta);
                }
            }
            if !shown {
                pause_before_asking_again();
            }
        }
        self.refresh(true);
        shown
    }

    pub(crate) fn on_topic_deletion(&self, hook: Option<TopicDeletionHook>) {
        *self.deletion_hook.lock() = hook;
    }

    pub(crate) fn record_rejection(&self, path: &str, reason: &str) {
        let mut rejections = self.rejections.lock();
        if rejections.len() == KEPT_REJECTIONS {
            rejections.pop_front();
        }
        rejections.push_back(text::rejection_line(
            self.shared.clock.now_ms(),
            path,
            reason,
        ));
    }

    pub(crate) fn rejections_text(&self) -> String {
        self.rejections
            .lock()
            .iter()
            .map(|line| format!("{line}\n"))
            .collect()
    }
}

impl ClusterTopic {
    fn new(
        name: &str,
        shared: &Arc<ClusterShared>,
        partitions: u32,
        format: OwnedFormat,
    ) -> Arc<ClusterTopic> {
        let link = Arc::new(TopicLink {
            name: name.to_string(),
            shared: shared.clone(),
            view: Arc::new(TopicView::new(name, shared.settings.clone(), partitions)),
            format: RwLock::new(format),
            deleted: AtomicBool::new(false),
        });
        let topic = Arc::new(ClusterTopic {
            link,
            partitions: RwLock::new(Vec::new()),
            next_keyless: AtomicU32::new(0),
            modified_ms: AtomicI64::new(shared.clock.now_ms()),
        });
        topic.grow(partitions);
        topic
    }

    /// Partitions were added (here or by another client).
    fn grow(&self, count: u32) {
        let mut partitions = self.partitions.write();
        for index in partitions.len() as u32..count {
            partitions.push(Arc::new(ClusterPartition {
                index,
                link: self.link.clone(),
                modified_ms: AtomicI64::new(self.link.shared.clock.now_ms()),
            }));
        }
        self.link.view.set_partitions(count);
    }

    fn retire(&self) {
        self.link.deleted.store(true, Ordering::Release);
        self.link.view.stop();
    }

    pub(crate) fn name(&self) -> &str {
        &self.link.name
    }

    pub(crate) fn check_not_deleted(&self) -> Result<()> {
        self.link.check_not_deleted()
    }

    /// Kafka's internal topics, which only their coordinators write.
    pub(crate) fn is_internal(&self) -> bool {
        matches!(self.name(), "__consumer_offsets" | "__transaction_state")
    }

    pub(crate) fn modified_ms(&self) -> i64 {
        self.modified_ms.load(Ordering::Relaxed)
    }

    pub(crate) fn partition_count(&self) -> u32 {
        self.partitions.read().len() as u32
    }

    pub(crate) fn partition(&self, index: u32) -> Option<Arc<ClusterPartition>> {
        self.partitions.read().get(index as usize).cloned()
    }

    /// CreatePartitions to `count`.
    pub(crate) fn add_partitions(&self, count: u32) -> Result<()> {
        let request = NewPartitions::new(self.name(), count as usize);
        let answer = block_on(
            self.link
                .shared
                .admin
                .create_partitions([&request], &admin_options()),
        );
        topic_outcome(
            answer,
            &format!("add partitions to {}", self.name()),
            |_| None,
        )?;
        self.grow(count);
        Ok(())
    }

    pub(crate) fn stream_len(&self) -> u64 {
        self.link.stream_len(Stream::Topic)
    }

    pub(crate) fn read_log(
        &self,
        cursor: &mut ViewCursor,
        pos: u64,
        len: usize,
    ) -> Result<Vec<u8>> {
        self.link.read(Stream::Topic, cursor, pos, len)
    }

    /// A line without its newline yet can become a record unless keys are parsed and it
    /// is over the limit of what a record may be; the cluster checks sizes at append.
    pub(crate) fn check_unterminated_line(&self, _target: Option<u32>, _len: usize) -> Result<()> {
        self.check_not_deleted()
    }

    /// Produces the lines of `head` then `body`, each one record, to partition `target`
    /// or where Kafka's default partitioner sends them, and waits until the cluster
    /// acknowledged every one (acks=all).
    pub(crate) fn append_lines(&self, target: Option<u32>, head: &[u8], body: &[u8]) -> Result<()> {
        self.check_not_deleted()?;
        let name = self.name();
        if self.is_internal() {
            return Err(EngineError::InternalTopic {
                name: name.to_string(),
                action: crate::engine::InternalTopicAction::Append,
            });
        }
        let partitions = self.partition_count();
        if let Some(p) = target.filter(|&p| p >= partitions) {
            return Err(EngineError::UnknownPartition {
                topic: name.to_string(),
                partition: i64::from(p),
            });
        }
        let format = self.link.format.read().clone();
        let format = format.as_format();
        let mut data = Vec::with_capacity(head.len() + body.len());
        data.extend_from_slice(head);
        data.extend_from_slice(body);
        // Every line ends with its newline: the piece after the last one is empty.
        let lines: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
        let lines = &lines[..lines.len().saturating_sub(1)];
        let mut records = Vec::with_capacity(lines.len());
        for (i, line) in lines.iter().enumerate() {
            let Some(fields) = format.split(line) else {
                return Err(EngineError::MissingKeySeparator {
                    line_number: i + 1,
                    line: crate::engine::excerpt::Excerpt::quoted(line).to_string(),
                });
            };
            records.push(fields);
        }
        let keyless = target.unwrap_or_else(|| {
            self.next_keyless.fetch_add(1, Ordering::Relaxed) % partitions.max(1)
        });
        let by_key = KeyPartitioner::new(partitions.max(1));
        let mut pending: Vec<OutRecord<'_>> = records
            .into_iter()
            .map(|(key, value)| OutRecord {
                partition: match (target, key) {
                    (Some(p), _) => p,
                    (None, Some(key)) => by_key.partition(key),
                    (None, None) => keyless,
                },
                key,
                value,
            })
            .collect();
        let wait = Arc::new(WriteWait::default());
        let metadata_deadline = Deadline::after(METADATA_WAIT);
        let action = || format!("append to {name}");
        let mut sent = 0;
        let mut refusal = None;
        let shared = &self.link.shared;
        let producer = if pending.len() >= BULK_RECORDS {
            &shared.bulk_producer
        } else {
            &shared.producer
        };
        while !pending.is_empty() {
            let refused = match enqueue(producer, name, &pending, &wait) {
                Ok(refused) => refused,
                Err(message) => {
                    refusal = Some(EngineError::Broker {
                        action: action(),
                        name: "UNKNOWN_SERVER_ERROR".to_string(),
                        code: -1,
                        message,
                    });
                    break;
                }
            };
            sent += pending.len() - refused.len();
            match refused
                .iter()
                .find(|(_, code)| *code != RDKafkaErrorCode::UnknownPartition)
            {
                Some(&(_, code)) => refusal = Some(code_error(action(), code)),
                // Partitions added since the producer's metadata was fetched (by this
                // mount's mkdir or another client): fetched again, then their records
                // queued again.
                None if !refused.is_empty() && !metadata_deadline.passed() => {
                    let _ = producer
                        .client()
                        .fetch_metadata(Some(name), REQUEST_TIMEOUT);
                    pause_before_asking_again();
                }
                None => {
                    if let Some(&(_, code)) = refused.first() {
                        refusal = Some(code_error(action(), code));
                    }
                }
            }
            if refusal.is_some() {
                break;
            }
            pending = refused.iter().map(|&(i, _)| pending[i]).collect();
        }
        let refused = wait.until_delivered(sent);
        self.modified_ms
            .store(self.link.shared.clock.now_ms(), Ordering::Relaxed);
        match refusal.or(refused) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Appends are acknowledged by the cluster's in-sync replicas before they return.
    pub(crate) fn sync(&self) -> Result<()> {
        Ok(())
    }
}

impl ClusterPartition {
    pub(crate) fn index(&self) -> u32 {
        self.index
    }

    pub(crate) fn modified_ms(&self) -> i64 {
        self.modified_ms.load(Ordering::Relaxed)
    }
}

impl ClusterPartition {
    pub(crate) fn stream_len(&self) -> u64 {
        self.link.stream_len(Stream::Partition(self.index))
    }

    pub(crate) fn read_log(
        &self,
        cursor: &mut ViewCursor,
        pos: u64,
        len: usize,
    ) -> Result<Vec<u8>> {
        self.link
            .read(Stream::Partition(self.index), cursor, pos, len)
    }

    /// The partition's log start offset, as the cluster reports it.
    pub(crate) fn log_start_offset(&self) -> u64 {
        let (name, p) = (&self.link.name, self.index as i32);
        self.link
            .shared
            .admin
            .inner()
            .fetch_watermarks(name, p, REQUEST_TIMEOUT)
            .map_or(0, |(low, _)| low.max(0) as u64)
    }

    /// DeleteRecords before `offset`.
    pub(crate) fn delete_records_before(&self, offset: u64) -> Result<()> {
        let link = &self.link;
        let mut list = rdkafka::TopicPartitionList::new();
        let action = || format!("delete records of {}-{}", link.name, self.index);
        list.add_partition_offset(
            &link.name,
            self.index as i32,
            rdkafka::Offset::Offset(offset as i64),
        )
        .map_err(|e| broker_error(action(), &e))?;
        let results = block_on(link.shared.admin.delete_records(&list, &admin_options()))
            .map_err(|e| broker_error(action(), &e))?;
        for element in results.elements() {
            if let Err(e) = element.error() {
                return Err(broker_error(action(), &e));
            }
        }
        Ok(())
    }
}

impl TopicLink {
    fn check_not_deleted(&self) -> Result<()> {
        if self.deleted.load(Ordering::Acquire) {
            return Err(EngineError::UnknownTopic {
                name: self.name.clone(),
            });
        }
        Ok(())
    }

    fn stream_len(&self, stream: Stream) -> u64 {
        self.view.len(stream, || self.format.read().clone())
    }

    /// Reads `stream`; its end is where the partitions' high watermarks are.
    fn read(
        &self,
        stream: Stream,
        cursor: &mut ViewCursor,
        pos: u64,
        len: usize,
    ) -> Result<Vec<u8>> {
        self.check_not_deleted()?;
        let ends = || {
            let partitions = self.view.partition_count();
            let marks = self
                .shared
                .watermarks(&self.name, partitions)
                .map_err(|e| e.to_string())?;
            Ok(marks.into_iter().map(|(_, high)| high).collect())
        };
        self.view
            .read(stream, cursor, pos, len, ends, || {
                self.format.read().clone()
            })
            .map_err(|reason| EngineError::Broker {
                action: format!("read {}", self.name),
                name: "UNKNOWN_SERVER_ERROR".to_string(),
                code: -1,
                message: reason,
            })
    }
}

/// A topic's `log` as it stood when `.kpfs/snapshot/TOPIC/log` was opened: the stream up
/// to its length then, read through the topic's view.
pub(crate) struct ClusterCapture {
    link: Arc<TopicLink>,
    size: u64,
    modified_ms: i64,
}

impl ClusterTopic {
    pub(crate) fn capture(&self) -> ClusterCapture {
        ClusterCapture {
            link: self.link.clone(),
            size: self.stream_len(),
            modified_ms: self.link.shared.clock.now_ms(),
        }
    }
}

impl ClusterCapture {
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    pub(crate) fn modified_ms(&self) -> i64 {
        self.modified_ms
    }

    pub(crate) fn read(&self, cursor: &mut ViewCursor, pos: u64, len: usize) -> Result<Vec<u8>> {
        if pos >= self.size {
            return Ok(Vec::new());
        }
        let len = len.min((self.size - pos) as usize);
        let mut bytes = self.link.read(Stream::Topic, cursor, pos, len)?;
        bytes.truncate(len);
        Ok(bytes)
    }
}

impl Cluster {
    /// DeleteGroups of one group.
    pub(crate) fn delete_group(&self, group: &str) -> std::result::Result<(), GroupError> {
        let results = block_on(self.shared.admin.delete_groups(&[group], &admin_options()))
            .map_err(|e| GroupError::CoordinatorNotAvailable {
                reason: e.to_string(),
            })?;
        for result in results {
            match result {
                Ok(_) => {}
                Err((_, RDKafkaErrorCode::NonEmptyGroup)) => {
                    return Err(GroupError::NonEmptyGroup {
                        group: group.to_string(),
                    })
                }
                Err((_, RDKafkaErrorCode::GroupIdNotFound)) => {
                    return Err(GroupError::GroupIdNotFound {
                        group: group.to_string(),
                    })
                }
                Err((_, code)) => {
                    return Err(GroupError::CoordinatorNotAvailable {
                        reason: code.to_string(),
                    })
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::files::write_atomically;

    #[test]
    fn the_line_formats_file_gives_back_what_it_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LINE_FORMATS_FILE);
        assert!(
            load_formats(&path).unwrap().is_empty(),
            "no file: no formats"
        );
        let mut formats = BTreeMap::new();
        formats.insert(
            "orders.v1".to_string(),
            OwnedFormat {
                parse_key: true,
                key_separator: b" \t:".to_vec(),
                null_marker: Some(b"NULL".to_vec()),
            },
        );
        formats.insert("plain".to_string(), OwnedFormat::default());
        write_atomically(&path, save_formats(&formats).as_bytes()).unwrap();
        assert_eq!(load_formats(&path).unwrap(), formats);
        std::fs::write(&path, "6f 7 3a -\n").unwrap();
        let refusal = load_formats(&path).unwrap_err();
        assert!(refusal.contains("line 1"), "{refusal}");
    }
}
