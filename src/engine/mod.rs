//! The storage engine: topics, logs, segments, indexes, retention, the cleaner and
//! recovery. It knows nothing of FUSE; the `fs` layer maps paths and handles onto it.

pub(crate) mod append_watch;
pub(crate) mod batch_validation;
pub(crate) mod cleaned_txns;
pub mod cleaner;
pub mod cleaner_manager;
pub(crate) mod clock;
pub mod codec;
pub(crate) mod config;
pub(crate) mod dump_findings;
pub(crate) mod error;
pub(crate) mod events;
pub(crate) mod excerpt;
pub(crate) mod files;
pub mod format;
pub(crate) mod group_view;
pub mod groups;
pub(crate) mod index;
pub mod inspect;
pub(crate) mod keyed_batches;
pub(crate) mod limits;
pub mod log;
pub(crate) mod log_loader;
pub(crate) mod log_start_checkpoint;
pub(crate) mod metadata_files;
pub(crate) mod metrics;
pub(crate) mod newlines;
pub mod offset_map;
pub(crate) mod parallel;
pub mod partition;
pub mod produce;
pub(crate) mod producer_ids;
pub mod producer_state;
pub(crate) mod retention;
pub(crate) mod schema;
pub mod segment;
pub mod stream_index;
pub(crate) mod stream_order;
pub mod topic;
pub mod topic_capture;
pub(crate) mod topic_core;
pub mod topic_partition;
pub mod transactions;
pub mod txn_index;
pub(crate) mod txn_view;
pub mod upgrade;

use std::collections::{BTreeMap, VecDeque};
use std::fs;
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use files::{read_offset_checkpoint, write_offset_checkpoint};
use format::DELETING_SUFFIX;
use limits::{
    MAX_BACKGROUND_WAIT_MS, MAX_FILE_NAME_BYTES, MAX_OFFSET_MAP_BYTES, MAX_REJECTIONS,
    MIN_OFFSET_MAP_BYTES, PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS, SCHEDULER_TICK_MS,
};
use log_loader::Durability;
use log_start_checkpoint::LogStartCheckpoint;
use parking_lot::{Mutex, RwLock};

pub use append_watch::AppendWatch;
pub(crate) use clock::format_time_ms;
#[cfg(any(test, feature = "internals"))]
pub use clock::ManualClock;
pub use clock::{Clock, SystemClock};
use config::GroupConfigs;
#[cfg(feature = "internals")]
pub use config::TopicOverrides;
pub use config::{BrokerConfig, ListenerSettings};
pub(crate) use config::{ConfigChange, ConfigError, ConfigScope};
#[cfg(feature = "internals")]
pub use error::OffsetRequest;
pub use error::{EngineError, InternalTopicAction, Result};
pub use format::{
    CLEANER_CHECKPOINT_FILE, CLEAN_SHUTDOWN_FILE, DYNAMIC_BROKER_CONFIG_FILE, GROUP_CONFIG_FILE,
    RECOVERY_CHECKPOINT_FILE,
};
pub(crate) use format::{DAEMON_LOG_FILE, LOCK_FILE};
pub use groups::GroupCoordinator;
pub(crate) use limits::MAX_TOPIC_NAME_CHARS;
#[cfg(feature = "internals")]
pub use partition::FetchOutcome;
#[cfg(feature = "internals")]
pub use partition::LogCapture;
#[cfg(any(test, feature = "internals"))]
pub use partition::CAPTURE_GRACE_MS;
pub use partition::{FetchedRange, Isolation, OffsetQuery};
pub use partition::{LogCursor, Partition};
pub(crate) use topic::check_partition_count;
use topic::TopicPlace;
pub use topic::{Topic, TopicCursor};
pub use topic_capture::{TopicCapture, TopicCaptureCursor};
pub(crate) use topic_partition::parse_partition_number;
pub use topic_partition::TopicPartition;
pub use transactions::{TransactionCoordinator, TxnOrGroupError};

/// Kafka's `LocalLog.logDeleteDirName`: `TOPIC-N.<unique id>-delete`, with the topic cut
/// short so the name fits [`MAX_FILE_NAME_BYTES`] (a 249-character topic would not). The
/// id is the deletion time in ms (Kafka's is a UUID); nothing reads the name back but the
/// `-delete` suffix.
fn delete_dir_name(topic: &str, partition: u32, unique_id: i64) -> String {
    let suffix = format!("-{partition}.{unique_id}{DELETING_SUFFIX}");
    // Topic names are ASCII (validate_topic_name), so any byte count is a char boundary.
    let kept = topic.len().min(MAX_FILE_NAME_BYTES - suffix.len());
    format!("{}{suffix}", &topic[..kept])
}

/// A line of `.kpfs/errors`: `<UTC time> <path>: <reason>`, on one line.
pub(crate) fn rejection_line(now_ms: i64, path: &str, reason: &str) -> String {
    format!(
        "{} {path}: {}",
        format_time_ms(now_ms),
        reason.replace('\n', " ")
    )
}

/// Closes every topic, [`SHUTDOWN_CLOSE_THREADS`] at a time: a close is a few fsyncs of
/// files no other topic shares, so with 10,000 topics one after the other the fsync
/// latency alone outlasted `kpfs umount`'s wait; the disk takes them concurrently.
fn close_topics(topics: &BTreeMap<String, Arc<Topic>>) -> Result<()> {
    let all: Vec<&Arc<Topic>> = topics.values().collect();
    let per_thread = all.len().div_ceil(limits::SHUTDOWN_CLOSE_THREADS).max(1);
    std::thread::scope(|scope| {
        let closers: Vec<_> = all
            .chunks(per_thread)
            .map(|chunk| scope.spawn(move || chunk.iter().try_for_each(|t| t.close())))
            .collect();
        closers
            .into_iter()
            .map(|c| c.join().expect("a topic close does not panic"))
            .collect::<Result<Vec<()>>>()
    })?;
    Ok(())
}

/// Options that are not Kafka configs.
#[derive(Clone, Debug, Default)]
pub struct EngineOptions {
    /// Start the retention, deletion and flush threads (the daemon does; tests drive
    /// `run_retention_once` / `run_deletions_once` themselves).
    pub background_threads: bool,
    /// The finalized `transaction.version` (0 to 2; Kafka's `kafka-storage.sh format
    /// --feature`), `None` for Kafka 4.3.1's default, 2.
    pub transaction_version: Option<i16>,
}

/// Files renamed `.deleted`, removed once the clock passes `due_ms`.
#[derive(Debug)]
struct PendingDeletion {
    due_ms: i64,
    partition: TopicPartition,
    files: Vec<PathBuf>,
}

struct Inner {
    data_dir: PathBuf,
    throttler: cleaner::Throttler,
    /// Cleaner threads that died from a panic (Kafka's DeadThreadCount).
    dead_cleaner_threads: std::sync::atomic::AtomicU64,
    clock: Arc<dyn Clock>,
    broker: Arc<RwLock<BrokerConfig>>,
    /// Why the dynamic broker config in force is not yet in its file (the disk was full
    /// when it changed); saved as soon as there is space.
    unsaved_broker: Mutex<Option<String>>,
    /// Every group's config overrides (Kafka's `GroupConfig`), as in [`GROUP_CONFIG_FILE`].
    group_configs: RwLock<GroupConfigs>,
    topics: RwLock<BTreeMap<String, Arc<Topic>>>,
    rejections: Mutex<VecDeque<String>>,
    deletions: Mutex<Vec<PendingDeletion>>,
    /// Held for the engine's lifetime: the data directory lock.
    _lock_file: fs::File,
    /// The data directory's `meta.properties`: its cluster id stays for its life.
    meta: metadata_files::MetaProperties,
    closed: Mutex<bool>,
    /// Recovery points as last written to [`RECOVERY_CHECKPOINT_FILE`], and when.
    recovery_checkpoint: Mutex<(BTreeMap<TopicPartition, u64>, i64)>,
    /// InitProducerId's ids, never reused (`producer_ids`).
    producer_ids: Mutex<producer_ids::ProducerIds>,
    /// When the scheduler last looked for expired producers.
    producer_expiry_checked_ms: Mutex<i64>,
    /// `log-start-offset-checkpoint`, shared with the topics (DeleteRecords writes it).
    log_starts: Arc<LogStartCheckpoint>,
    /// Consumer groups, kept in the internal topic `__consumer_offsets`.
    groups: GroupCoordinator,
    /// Held while FindCoordinator makes `__consumer_offsets` or `__transaction_state`
    /// ready.
    internal_topic_creation: Mutex<()>,
    /// Transactions, kept in the internal topic `__transaction_state`.
    transactions: TransactionCoordinator,
}

/// Told the name of each topic the engine deletes, after the deletion (see
/// [`Engine::on_topic_deletion`]).
pub type TopicDeletionHook = Box<dyn Fn(&str) + Send + Sync>;

/// An open data directory.
pub struct Engine {
    inner: Arc<Inner>,
    stop: Mutex<Option<Sender<()>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    cleaners: Mutex<CleanerThreads>,
    topic_deletion_hook: RwLock<Option<TopicDeletionHook>>,
}

/// The running log cleaner threads (Kafka's `LogCleaner`), stopped and started again
/// as a whole when their configuration changes.
#[derive(Default)]
struct CleanerThreads {
    /// Dropped to stop them.
    stop: Option<Sender<()>>,
    handles: Vec<JoinHandle<()>>,
    /// The broker configuration they were started with.
    config: Option<BrokerConfig>,
}

impl CleanerThreads {
    fn start(inner: &Arc<Inner>, config: BrokerConfig) -> CleanerThreads {
        // Kafka counts the dead threads among the running ones: new threads, none dead.
        inner
            .dead_cleaner_threads
            .store(0, std::sync::atomic::Ordering::Relaxed);
        let (tx, rx) = crossbeam_channel::bounded::<()>(0);
        let settings = CleanerSettings::of(&config);
        let handles = (0..config.cleaner_threads().max(1))
            .map(|i| {
                let inner = inner.clone();
                let stop = rx.clone();
                std::thread::Builder::new()
                    .name(format!("kpfs-log-cleaner-thread-{i}"))
                    .spawn(move || cleaner_loop(&inner, &stop, settings))
                    .expect("spawn cleaner thread")
            })
            .collect();
        CleanerThreads {
            stop: Some(tx),
            handles,
            config: Some(config),
        }
    }

    /// Stops the threads: each finishes or abandons its pass at its next read.
    fn stop(&mut self) {
        self.stop.take();
        for t in self.handles.drain(..) {
            let _ = t.join();
        }
        self.config = None;
    }
}

/// What one cleaner thread is built with, fixed until the threads restart.
#[derive(Clone, Copy, Debug)]
struct CleanerSettings {
    /// `log.cleaner.dedupe.buffer.size / log.cleaner.threads`, at least 1 MiB.
    map_bytes: usize,
    map_load_factor: f64,
    /// `log.cleaner.io.buffer.size / log.cleaner.threads / 2`: each of the read and
    /// write buffers.
    io_buffer_bytes: usize,
}

impl CleanerSettings {
    fn of(broker: &BrokerConfig) -> CleanerSettings {
        let threads = i64::from(broker.cleaner_threads().max(1));
        let per_thread = broker.cleaner_dedupe_buffer_size() / threads;
        CleanerSettings {
            map_bytes: per_thread.clamp(MIN_OFFSET_MAP_BYTES, MAX_OFFSET_MAP_BYTES) as usize,
            map_load_factor: broker.cleaner_io_buffer_load_factor(),
            io_buffer_bytes: (i64::from(broker.cleaner_io_buffer_size()) / threads / 2) as usize,
        }
    }

    fn new_offset_map(&self) -> offset_map::OffsetMap {
        offset_map::OffsetMap::new(self.map_bytes, self.map_load_factor)
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("data_dir", &self.inner.data_dir)
            .finish()
    }
}

/// Kafka's topic name rules (`Topic.validate` as its controller calls it, whose texts
/// these are), plus kpfs's reserved `.kpfs`.
pub(crate) fn validate_topic_name(name: &str) -> Result<()> {
    let invalid = |reason: &str| {
        Err(EngineError::InvalidTopicName {
            reason: reason.to_string(),
        })
    };
    if name.is_empty() {
        return invalid("the empty string is not allowed");
    }
    if name == "." || name == ".." {
        return invalid(&format!("'{name}' is not allowed"));
    }
    if name.chars().count() > MAX_TOPIC_NAME_CHARS {
        return invalid(&format!(
            "the length of '{name}' is longer than the max allowed length {MAX_TOPIC_NAME_CHARS}"
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return invalid(&format!(
            "'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
        ));
    }
    if name == ".kpfs" {
        return invalid("the name .kpfs is reserved for kpfs's own files");
    }
    Ok(())
}

/// Kafka's `Topic.hasCollision`: metric names do not tell '.' from '_'.
fn topic_names_collide(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .all(|(x, y)| x == y || (matches!(x, b'.' | b'_') && matches!(y, b'.' | b'_')))
}

/// What `kafka-topics.sh --create` prints for a name with '.' or '_' (`TopicCommand`); a
/// warning, not a refusal.
pub(crate) fn topic_name_warning(name: &str) -> Option<&'static str> {
    name.contains(['.', '_']).then_some(
        "Due to limitations in metric names, topics with a period ('.') or underscore ('_') \
         could collide. To avoid issues it is best to use either, but not both.",
    )
}

/// `f` of every item, on up to one thread per core, in the order of `items`.
fn in_parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(items.len());
    if threads <= 1 {
        return items.iter().map(f).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<(usize, R)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break done };
                        done.push((i, f(item)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| {
                w.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    results.sort_unstable_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

/// Takes the data directory's lock and writes this process's pid in it (`kpfs umount`
/// finds the daemon by it); held while the file stays open.
pub(crate) fn take_lock(data_dir: &Path) -> Result<fs::File> {
    let path = data_dir.join(LOCK_FILE);
    let mut file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| EngineError::io(format!("open {}", path.display()), e))?;
    // SAFETY: flock on a valid, owned file descriptor has no memory effects.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Err(EngineError::DataDirLocked {
                path: data_dir.to_path_buf(),
            });
        }
        return Err(EngineError::io(format!("lock {}", path.display()), err));
    }
    file.set_len(0)
        .and_then(|_| writeln!(file, "{}", std::process::id()))
        .map_err(|e| EngineError::io(format!("write {}", path.display()), e))?;
    Ok(file)
}

impl Engine {
    /// The engine unit tests open: the default broker config on `clock`.
    #[cfg(test)]
    pub(crate) fn open_for_test(data_dir: &Path, clock: Arc<dyn Clock>) -> Engine {
        Engine::open(
            data_dir,
            BrokerConfig::defaults(),
            clock,
            EngineOptions::default(),
        )
        .unwrap()
    }

    /// Opens (creating if missing) a data directory, takes its lock, recovers every topic.
    pub fn open(
        data_dir: &Path,
        broker: BrokerConfig,
        clock: Arc<dyn Clock>,
        options: EngineOptions,
    ) -> Result<Engine> {
        if !data_dir.exists() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(data_dir)
                .map_err(|e| EngineError::io(format!("create {}", data_dir.display()), e))?;
        }
        let lock_file = take_lock(data_dir)?;
        upgrade::prepare_for_open(data_dir)?;
        let meta =
            metadata_files::load_meta_properties(data_dir, broker.node_id(), clock.now_ms())?;
        let marker = data_dir.join(CLEAN_SHUTDOWN_FILE);
        let clean_shutdown = marker.exists();
        if clean_shutdown {
            // Removed at once, so a crash while loading counts as unclean (KAFKA-10471).
            fs::remove_file(&marker)
                .map_err(|e| EngineError::io(format!("remove {}", marker.display()), e))?;
            files::sync_dir(data_dir)?;
        }
        let dynamic_path = data_dir.join(DYNAMIC_BROKER_CONFIG_FILE);
        log_loader::remove_stale_temporary(&dynamic_path);
        log_loader::remove_stale_temporary(&data_dir.join(CLEANER_CHECKPOINT_FILE));
        let recovery_path = data_dir.join(RECOVERY_CHECKPOINT_FILE);
        log_loader::remove_stale_temporary(&recovery_path);
        let recovery_points = read_offset_checkpoint(&recovery_path);
        let log_starts = Arc::new(LogStartCheckpoint::load(data_dir));
        let mut broker = match read_if_present(&dynamic_path)? {
            Some(text) => broker.with_dynamic_properties(&text)?,
            None => broker,
        };
        if broker.ensure_cluster_min_insync_replicas() {
            files::write_atomically(&dynamic_path, broker.dynamic_properties().as_bytes())?;
        }
        let group_configs_path = data_dir.join(GROUP_CONFIG_FILE);
        log_loader::remove_stale_temporary(&group_configs_path);
        let group_configs = match read_if_present(&group_configs_path)? {
            Some(text) => GroupConfigs::from_properties(&text)?,
            None => GroupConfigs::default(),
        };
        let broker = Arc::new(RwLock::new(broker));
        let mut topics = BTreeMap::new();
        // `.kpfs/errors` starts with what recovery cut: data lost, said where users look.
        let mut rejections = VecDeque::new();
        let mut entries: Vec<_> = fs::read_dir(data_dir)
            .map_err(|e| EngineError::io(format!("list {}", data_dir.display()), e))?
            .filter_map(|e| e.ok())
            .collect();
        entries.sort_by_key(|e| e.file_name());
        log_loader::finish_interrupted_kpfs_folder_deletions(data_dir);
        let mut found: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        for entry in entries {
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if !entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                continue;
            }
            if log_loader::finish_interrupted_topic_deletion(&name, &entry.path()) {
                continue;
            }
            let Some(tp) = TopicPartition::parse_dir_name(&name) else {
                continue;
            };
            if validate_topic_name(&tp.topic).is_err() {
                tracing::warn!(dir = %name, "ignoring a directory that is not a valid partition directory");
                continue;
            }
            found.entry(tp.topic).or_default().push(tp.partition);
        }
        let mut to_open: Vec<(String, u32)> = Vec::new();
        for (topic_name, mut partitions) in found {
            partitions.sort_unstable();
            // Partitions are 0..n; a directory past a missing one (left by hand, or by a
            // deletion that failed half way) is not opened, and said so where users look.
            let count = partitions
                .iter()
                .enumerate()
                .take_while(|(i, p)| *i as u32 == **p)
                .count() as u32;
            for stray in &partitions[count as usize..] {
                let dir = TopicPartition::new(&topic_name, *stray).dir_name();
                tracing::warn!(%dir, "not opening a partition directory: its topic lacks partition {count}");
                rejections.push_back(rejection_line(
                    clock.now_ms(),
                    &dir,
                    &format!("not opened: partition {count} of {topic_name} is missing, and a topic's partitions are 0..n"),
                ));
            }
            if count > 0 {
                to_open.push((topic_name, count));
            }
        }
        let open_one = |(topic_name, count): &(String, u32)| {
            let place = TopicPlace {
                data_dir,
                broker: broker.clone(),
                clock: clock.clone(),
                log_starts: log_starts.clone(),
            };
            Topic::open(topic_name, *count, place, |tp| {
                if clean_shutdown {
                    Durability::CleanShutdown
                } else {
                    Durability::RecoveryPoint(recovery_points.get(tp).copied().unwrap_or(0))
                }
            })
        };
        // Topics open independently (each its own files; what they share is read-only or
        // locked), so a mount of many partitions opens them on every core. Results are
        // taken in name order: the first failure is the one a sequential open would meet.
        for ((topic_name, _), opened) in to_open.iter().zip(in_parallel(&to_open, open_one)) {
            let (topic, reports) = opened?;
            for (tp, report) in &reports {
                if *report != Default::default() {
                    tracing::info!(partition = %tp, ?report, "recovered partition");
                }
                for cut in &report.truncated {
                    let path = if topic.partition_count() == 1 {
                        format!("{topic_name}/segments/{}", cut.file)
                    } else {
                        format!(
                            "{topic_name}/partitions/{}/segments/{}",
                            tp.partition, cut.file
                        )
                    };
                    rejections.push_back(rejection_line(
                        clock.now_ms(),
                        &path,
                        &format!("recovery: {}", cut.describe()),
                    ));
                }
            }
            topics.insert(topic_name.clone(), Arc::new(topic));
        }
        rejections.drain(..rejections.len().saturating_sub(MAX_REJECTIONS));
        load_cleaner_checkpoints(data_dir, &topics);
        let producer_ids = producer_ids::ProducerIds::open(data_dir)?;
        let groups = GroupCoordinator::open(
            topics
                .get(groups::OFFSETS_TOPIC)
                .and_then(|t: &Arc<Topic>| t.partition(0)),
            clock.clone(),
            broker.clone(),
        )?;
        let transactions = TransactionCoordinator::open(
            topics
                .get(transactions::TRANSACTION_STATE_TOPIC)
                .and_then(|t: &Arc<Topic>| t.partition(0)),
            clock.clone(),
            broker.clone(),
            options
                .transaction_version
                .unwrap_or(transactions::DEFAULT_TRANSACTION_VERSION),
        )?;
        let now_ms = clock.now_ms();
        tracing::info!(data_dir = %data_dir.display(), topics = topics.len(), clean_shutdown, "opened data directory");
        let engine = Engine {
            inner: Arc::new(Inner {
                data_dir: data_dir.to_path_buf(),
                throttler: cleaner::Throttler::default(),
                dead_cleaner_threads: Default::default(),
                clock,
                broker,
                unsaved_broker: Mutex::new(None),
                group_configs: RwLock::new(group_configs),
                topics: RwLock::new(topics),
                rejections: Mutex::new(rejections),
                deletions: Mutex::new(Vec::new()),
                _lock_file: lock_file,
                meta,
                closed: Mutex::new(false),
                recovery_checkpoint: Mutex::new((recovery_points, now_ms)),
                producer_ids: Mutex::new(producer_ids),
                producer_expiry_checked_ms: Mutex::new(now_ms),
                log_starts,
                groups,
                internal_topic_creation: Mutex::new(()),
                transactions,
            }),
            stop: Mutex::new(None),
            threads: Mutex::new(Vec::new()),
            cleaners: Mutex::new(CleanerThreads::default()),
            topic_deletion_hook: RwLock::new(None),
        };
        // Transactions a crash left prepared get their markers before anyone reads.
        engine
            .inner
            .transactions
            .complete_prepared(engine.inner.as_ref());
        if options.background_threads {
            engine.start_threads();
        }
        Ok(engine)
    }

    fn start_threads(&self) {
        let (tx, rx) = crossbeam_channel::bounded::<()>(0);
        *self.stop.lock() = Some(tx);
        let mut threads = self.threads.lock();
        let inner = self.inner.clone();
        let stop = rx.clone();
        threads.push(
            std::thread::Builder::new()
                .name("kpfs-retention".into())
                .spawn(move || retention_loop(&inner, &stop))
                .expect("spawn retention thread"),
        );
        let broker = self.inner.broker.read().clone();
        if broker.cleaner_enable() {
            *self.cleaners.lock() = CleanerThreads::start(&self.inner, broker);
        }
        let inner = self.inner.clone();
        threads.push(
            std::thread::Builder::new()
                .name("kpfs-scheduler".into())
                .spawn(move || scheduler_loop(&inner, &rx))
                .expect("spawn scheduler thread"),
        );
    }

    /// Stops background threads, flushes and closes every topic and marks the data
    /// directory cleanly closed. Idempotent.
    pub fn shutdown(&self) -> Result<()> {
        let mut closed = self.inner.closed.lock();
        if *closed {
            return Ok(());
        }
        // Dropping the sender wakes every background thread.
        self.stop.lock().take();
        self.cleaners.lock().stop();
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        if self.inner.unsaved_broker.lock().is_some() {
            let broker = self.inner.broker.read();
            save_broker_config(&self.inner, &broker)?;
            if let Some(reason) = self.inner.unsaved_broker.lock().as_ref() {
                tracing::error!(%reason, "closing with dynamic broker configs that could not be saved; they are lost");
            }
        }
        close_topics(&self.inner.topics.read())?;
        save_recovery_checkpoint(&self.inner, &self.inner.topics.read())?;
        let marker = self.inner.data_dir.join(CLEAN_SHUTDOWN_FILE);
        fs::write(&marker, b"{\"version\":0}\n")
            .map_err(|e| EngineError::io(format!("write {}", marker.display()), e))?;
        files::sync_dir(&self.inner.data_dir)?;
        *closed = true;
        tracing::info!(data_dir = %self.inner.data_dir.display(), "closed cleanly");
        Ok(())
    }

    /// Kafka's cluster id, drawn when the data directory was first opened and kept in
    /// its `meta.properties`.
    pub fn cluster_id(&self) -> &str {
        &self.inner.meta.cluster_id
    }

    #[cfg(test)]
    pub(crate) fn data_dir(&self) -> &Path {
        &self.inner.data_dir
    }

    pub(crate) fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    /// Topic names, sorted.
    /// Kafka's InitProducerId for an idempotent producer (no transactional id): a
    /// producer id never handed out before, durably, and epoch 0. Kafka answers a
    /// request without a transactional id with a new id whatever id and epoch it names,
    /// so this takes none.
    // The Kafka listener (src/kafka) calls it; until it is built in, only tests do.
    pub fn init_producer_id(&self) -> Result<(i64, i16)> {
        let id = self.inner.producer_ids.lock().next_id()?;
        Ok((id, 0))
    }

    /// The group coordinator.
    pub fn groups(&self) -> &GroupCoordinator {
        &self.inner.groups
    }

    /// Kafka's FindCoordinator for a group: the offsets topic `__consumer_offsets`
    /// exists from then on (created compacted, with `offsets.topic.segment.bytes`
    /// segments, as Kafka creates it on first use).
    /// Answers only once the coordinator holds the topic: until then a group request
    /// would find no place for its records. Concurrent first lookups wait for one
    /// creation, and a creation that failed half way (the topic made, its configs not
    /// set) is finished by the next lookup.
    pub fn ensure_offsets_topic(&self) -> Result<()> {
        self.ensure_internal_topic(
            groups::OFFSETS_TOPIC,
            || self.inner.groups.has_offsets_topic(),
            Self::init_offsets_topic,
        )
    }

    /// The same for the transaction coordinator's `__transaction_state` (created at the
    /// first transactional FindCoordinator or InitProducerId, compacted, uncompressed,
    /// with `transaction.state.log.segment.bytes` segments, as Kafka's
    /// `TransactionStateManager` creates it).
    pub fn ensure_transaction_state_topic(&self) -> Result<()> {
        self.ensure_internal_topic(
            transactions::TRANSACTION_STATE_TOPIC,
            || self.inner.transactions.has_log(),
            Self::init_transaction_state_topic,
        )
    }

    fn ensure_internal_topic(
        &self,
        name: &str,
        ready: impl Fn() -> bool,
        init: impl Fn(&Self, &Arc<Topic>) -> Result<()>,
    ) -> Result<()> {
        let _one_at_a_time = self.inner.internal_topic_creation.lock();
        if ready() {
            return Ok(());
        }
        let topic = match self.topic(name) {
            Some(topic) => topic,
            None => match self.create_topic(name, 1) {
                // create_topic set it up.
                Ok(_) => return Ok(()),
                Err(EngineError::TopicExists { name }) => self
                    .topic(&name)
                    .ok_or(EngineError::UnknownTopic { name })?,
                Err(e) => return Err(e),
            },
        };
        init(self, &topic)
    }

    fn init_transaction_state_topic(&self, topic: &Arc<Topic>) -> Result<()> {
        let segment_bytes = self
            .inner
            .broker
            .read()
            .transaction_settings()
            .log_segment_bytes;
        let settings = format!(
            "cleanup.policy=compact\ncompression.type=uncompressed\nsegment.bytes={segment_bytes}\n"
        );
        topic.apply_config_change(&ConfigChange::from_text(ConfigScope::Topic, &settings)?)?;
        let partition = topic.partition(0).expect("a topic has partition 0");
        self.inner.transactions.set_log(partition);
        tracing::info!(
            "created the transaction log {}",
            transactions::TRANSACTION_STATE_TOPIC
        );
        Ok(())
    }

    /// Makes a new `__consumer_offsets` what Kafka makes it, whoever created it (the
    /// coordinator, `mkdir` or CreateTopics), and hands it to the coordinator.
    fn init_offsets_topic(&self, topic: &Arc<Topic>) -> Result<()> {
        let segment_bytes = self.inner.broker.read().offsets_topic_segment_bytes();
        let settings = format!(
            "cleanup.policy=compact\ncompression.type=producer\nsegment.bytes={segment_bytes}\n"
        );
        topic.apply_config_change(&ConfigChange::from_text(ConfigScope::Topic, &settings)?)?;
        let partition = topic.partition(0).expect("a topic has partition 0");
        self.inner.groups.set_offsets_topic(partition);
        tracing::info!("created the offsets topic {}", groups::OFFSETS_TOPIC);
        Ok(())
    }

    pub fn topic_names(&self) -> Vec<String> {
        self.inner.topics.read().keys().cloned().collect()
    }

    /// A handle to wait for appends with (long-poll Fetch): see [`AppendWatch`].
    pub fn append_watch(&self) -> AppendWatch {
        AppendWatch::default()
    }

    pub fn topic(&self, name: &str) -> Option<Arc<Topic>> {
        self.inner.topics.read().get(name).cloned()
    }

    /// The partitions a topic created without a count gets: `num.partitions`.
    pub fn default_partitions(&self) -> u32 {
        self.inner.broker.read().num_partitions()
    }

    /// Creates topic `name` with `partitions` partitions (Kafka's CreateTopics).
    pub fn create_topic(&self, name: &str, partitions: u32) -> Result<Arc<Topic>> {
        validate_topic_name(name)?;
        check_partition_count(partitions)?;
        let internal = [groups::OFFSETS_TOPIC, transactions::TRANSACTION_STATE_TOPIC];
        if internal.contains(&name) && partitions != 1 {
            return Err(EngineError::InternalTopic {
                name: name.to_string(),
                action: InternalTopicAction::AddPartitions,
            });
        }
        let mut topics = self.inner.topics.write();
        if topics.contains_key(name) {
            return Err(EngineError::TopicExists {
                name: name.to_string(),
            });
        }
        // Kafka's controller (`validateNewTopicNames`) names one colliding topic; data
        // directories from before this check may hold several, so the first is named.
        if let Some(existing) = topics.keys().find(|t| topic_names_collide(t, name)) {
            return Err(EngineError::TopicCollision {
                name: name.to_string(),
                existing: existing.clone(),
            });
        }
        // A topic of the same name deleted earlier may still have recovery points in
        // the file: they must not vouch for this topic's unsynced records, so the file is
        // rewritten without them before the topic exists. (Only then: a rewrite per mkdir
        // would make creating n topics cost n^2.)
        if self
            .inner
            .recovery_checkpoint
            .lock()
            .0
            .keys()
            .any(|tp| tp.topic == name)
        {
            save_recovery_checkpoint(&self.inner, &topics)?;
        }
        // Nor may it start where a deleted namesake's DeleteRecords left off (the entry
        // outlives a crash between the deletion and its removal).
        self.inner.log_starts.forget(name)?;
        let place = TopicPlace {
            data_dir: &self.inner.data_dir,
            broker: self.inner.broker.clone(),
            clock: self.inner.clock.clone(),
            log_starts: self.inner.log_starts.clone(),
        };
        let (topic, _) = Topic::open(name, partitions, place, |_| Durability::CleanShutdown)?;
        files::sync_dir(&self.inner.data_dir)?;
        let topic = Arc::new(topic);
        topics.insert(name.to_string(), topic.clone());
        drop(topics);
        tracing::info!(topic = name, partitions, "created topic");
        if name == groups::OFFSETS_TOPIC {
            self.init_offsets_topic(&topic)?;
        } else if name == transactions::TRANSACTION_STATE_TOPIC {
            self.init_transaction_state_topic(&topic)?;
        }
        Ok(topic)
    }

    /// Deletes a topic and its data. Open readers keep their file handles. Until its
    /// last partition directory is renamed `-delete` the topic stays whole and listed,
    /// so a failed delete leaves it as it was; after the rename it is gone for good (a
    /// `-delete` directory the removal leaves is removed at the next open).
    pub fn delete_topic(&self, name: &str) -> Result<()> {
        let mut topics = self.inner.topics.write();
        let Some(topic) = topics.get(name).cloned() else {
            return Err(EngineError::UnknownTopic {
                name: name.to_string(),
            });
        };
        topic.refuse_internal(InternalTopicAction::Delete)?;
        let now = self.inner.clock.now_ms();
        let data_dir = &self.inner.data_dir;
        let retired =
            topic.retire(|partition| data_dir.join(delete_dir_name(name, partition, now)))?;
        topics.remove(name);
        self.inner
            .deletions
            .lock()
            .retain(|d| d.partition.topic != name);
        let removed = files::sync_dir(&self.inner.data_dir).and_then(|()| {
            retired.iter().try_for_each(|dir| {
                fs::remove_dir_all(dir)
                    .map_err(|e| EngineError::io(format!("remove {}", dir.display()), e))
            })
        });
        if let Err(e) = removed {
            tracing::warn!(topic = name, error = %e, "deleted topic; its files go at the next open");
        }
        if let Err(e) = self.inner.log_starts.forget(name) {
            tracing::warn!(topic = name, error = %e, "deleted topic; its log start entries go when a topic of that name is created");
        }
        // Long-poll fetches waiting on it look again, and find it gone.
        topic.append_signal().appended();
        tracing::info!(topic = name, "deleted topic");
        // Outside the lock: the hook may wait for others (the kernel, for the mount).
        drop(topics);
        if let Some(hook) = &*self.topic_deletion_hook.read() {
            hook(name);
        }
        Ok(())
    }

    /// Sets (or with `None`, removes) who hears of topic deletions, whoever asks for
    /// them (`rmdir`, DeleteTopics): the mount drops what the kernel cached of the
    /// topic's folder, which the engine knows nothing of.
    pub fn on_topic_deletion(&self, hook: Option<TopicDeletionHook>) {
        *self.topic_deletion_hook.write() = hook;
    }

    /// `.kpfs/config`: the dynamic overrides as `key=value` lines, every other broker
    /// config as a comment with its value and source, then any warning as a comment.
    pub(crate) fn broker_config_text(&self) -> String {
        let mut text = self.inner.broker.read().render();
        for warning in self.broker_config_warnings() {
            text.push_str(&format!("# warning: {warning}\n"));
        }
        text
    }

    /// The Kafka listener's broker configs as they are now (`None`: `listeners` unset);
    /// read again after a dynamic update to follow `max.connections`.
    pub fn listener_settings(&self) -> Option<ListenerSettings> {
        self.inner.broker.read().listener_settings()
    }

    #[cfg(any(test, feature = "internals"))]
    pub fn broker_config(&self) -> BrokerConfig {
        self.inner.broker.read().clone()
    }

    /// The broker configs of one level with their values and sources, as Kafka's
    /// `DescribeConfigs` of a broker resource.
    pub(crate) fn describe_broker_config(
        &self,
        level: config::BrokerLevel,
    ) -> Vec<config::DescribedConfig> {
        self.inner.broker.read().describe(level)
    }

    /// The configs a topic created now with `change` (a topic change) would have, as
    /// [`Topic::describe_config`]: what Kafka's CreateTopics with `validate_only` lists.
    pub(crate) fn describe_new_topic_config(
        &self,
        change: &ConfigChange,
    ) -> Result<Vec<config::DescribedConfig>> {
        let broker = self.inner.broker.read();
        Ok(config::TopicOverrides::default()
            .apply_change(change, &broker)?
            .describe(&broker))
    }

    /// A whole command to `.kpfs/config` (`key=value` lines of dynamic broker configs)
    /// that changes the keys it names; all or nothing.
    #[cfg(feature = "internals")]
    pub fn update_broker_config(&self, text: &[u8]) -> Result<()> {
        use config::ConfigError;
        let text = std::str::from_utf8(text).map_err(|_| ConfigError::NotText)?;
        self.apply_broker_change(&ConfigChange::from_text(ConfigScope::Broker, text)?)
    }

    /// Whether `change` would apply now, without applying it (see
    /// `Topic::check_config_change`).
    pub(crate) fn check_broker_change(&self, change: &ConfigChange) -> Result<()> {
        self.inner.broker.read().apply_change(change)?;
        Ok(())
    }

    /// Applies what one open-to-close of `.kpfs/config` wrote: all of it or nothing. On
    /// a full disk it applies in memory and is saved as soon as there is space
    /// ([`Engine::broker_config_warnings`] says so meanwhile).
    pub(crate) fn apply_broker_change(&self, change: &ConfigChange) -> Result<()> {
        {
            let mut broker = self.inner.broker.write();
            let updated = broker.apply_change(change)?;
            if updated != *broker || self.inner.unsaved_broker.lock().is_some() {
                save_broker_config(&self.inner, &updated)?;
            }
            *broker = updated;
        }
        for t in self.inner.topics.read().values() {
            t.refresh_config();
        }
        self.reconfigure_cleaner();
        Ok(())
    }

    /// A group's configs with their values and sources, as Kafka's `DescribeConfigs` of a
    /// group resource: for any group id, existing or not.
    pub(crate) fn describe_group_config(&self, group: &str) -> Vec<config::DescribedConfig> {
        let broker = self.inner.broker.read();
        self.inner.group_configs.read().describe(group, &broker)
    }

    /// Applies a group change (its lines are group configs) to `group`'s overrides, all
    /// of it or nothing, and saves every group's overrides; with `validate_only` checks it
    /// only. Kafka keeps them in its metadata log beside the broker's dynamic configs, for
    /// any group id and past the group's deletion; kpfs keeps them in
    /// [`GROUP_CONFIG_FILE`] beside [`DYNAMIC_BROKER_CONFIG_FILE`].
    pub(crate) fn apply_group_change(
        &self,
        group: &str,
        change: &ConfigChange,
        validate_only: bool,
    ) -> Result<()> {
        let broker = self.inner.broker.read();
        let mut configs = self.inner.group_configs.write();
        let updated = configs.apply_change(group, change, &broker)?;
        if validate_only || updated == *configs {
            return Ok(());
        }
        files::write_atomically(
            &self.inner.data_dir.join(GROUP_CONFIG_FILE),
            updated.properties().as_bytes(),
        )?;
        *configs = updated;
        Ok(())
    }

    /// What a `.kpfs/config` write brought that does not do what it seems: shown in
    /// `.kpfs/config` and reported in `.kpfs/errors`.
    pub(crate) fn broker_config_warnings(&self) -> Vec<String> {
        self.inner
            .unsaved_broker
            .lock()
            .iter()
            .map(|reason| {
                format!(
                    "the dynamic broker configs in force are not saved yet ({reason}): kpfs saves them as soon as there is space; until then a crash or an unmount loses them"
                )
            })
            .collect()
    }

    /// Kafka's `LogCleaner.reconfigure`: when a config the cleaner threads were built
    /// with changed, they are stopped (a pass in progress ends at its next read) and
    /// started again, so the thread count, offset map and buffers follow at once.
    fn reconfigure_cleaner(&self) {
        let mut cleaners = self.cleaners.lock();
        let Some(running) = &cleaners.config else {
            return;
        };
        let broker = self.inner.broker.read().clone();
        if !broker.cleaner_reconfigured_since(running) {
            return;
        }
        tracing::info!(
            threads = broker.cleaner_threads(),
            "cleaner configuration changed; restarting the log cleaner threads"
        );
        cleaners.stop();
        *cleaners = CleanerThreads::start(&self.inner, broker);
    }

    /// How many log cleaner threads run now.
    #[cfg(feature = "internals")]
    pub fn cleaner_thread_count(&self) -> usize {
        self.cleaners.lock().handles.len()
    }

    /// Remembers a refused operation for `.kpfs/errors`.
    pub(crate) fn record_rejection(&self, path: &str, reason: &str) {
        let line = rejection_line(self.inner.clock.now_ms(), path, reason);
        tracing::info!(path, reason, "refused");
        let mut r = self.inner.rejections.lock();
        if r.len() == MAX_REJECTIONS {
            r.pop_front();
        }
        r.push_back(line);
    }

    /// `.kpfs/errors`: recent refused operations, newest last, one per line.
    pub(crate) fn rejections_text(&self) -> String {
        let r = self.inner.rejections.lock();
        let mut out = String::new();
        for line in r.iter() {
            out.push_str(line);
            out.push('\n');
        }
        out
    }

    /// One retention pass over topics whose policy does not contain `compact` (those get
    /// retention from the cleaner loop, as in Kafka). Returns segments deleted.
    #[cfg(any(test, feature = "internals"))]
    pub fn run_retention_once(&self) -> usize {
        retention_pass(&self.inner, |t| !t.config().cleanup_policy.compact)
    }

    /// Retention for topics with `compact` in their policy (the cleaner loop's step).
    #[cfg(feature = "internals")]
    pub fn run_compacted_retention_once(&self) -> usize {
        retention_pass(&self.inner, |t| t.config().cleanup_policy.compact)
    }

    /// Physically removes `.deleted` files whose `file.delete.delay.ms` has passed.
    #[cfg(feature = "internals")]
    pub fn run_deletions_once(&self) -> usize {
        run_deletions(&self.inner)
    }

    /// One cleaner iteration with a map sized from the broker config: clean the
    /// filthiest compacted topic, if any is due. Returns the topic and the pass figures.
    #[cfg(any(test, feature = "internals"))]
    pub fn run_cleaner_once(&self) -> Option<(String, cleaner::PassStats)> {
        let settings = CleanerSettings::of(&self.inner.broker.read());
        let mut map = settings.new_offset_map();
        clean_filthiest(&self.inner, &mut map, settings.io_buffer_bytes, &|| false)
    }

    /// One cleaner iteration with the caller's map (tests use tiny maps).
    #[cfg(any(test, feature = "internals"))]
    pub fn run_cleaner_once_with(
        &self,
        map: &mut offset_map::OffsetMap,
    ) -> Option<(String, cleaner::PassStats)> {
        let settings = CleanerSettings::of(&self.inner.broker.read());
        clean_filthiest(&self.inner, map, settings.io_buffer_bytes, &|| false)
    }

    /// The scheduler's flush duties at once (tests drive them this way): Kafka's
    /// `flush-log` for every topic that rolled, then the recovery-point checkpoint.
    #[cfg(feature = "internals")]
    pub fn run_flush_once(&self) -> Result<()> {
        for t in all_partitions(&self.inner) {
            t.flush_rolled_segments()?;
        }
        save_recovery_checkpoint(&self.inner, &self.inner.topics.read())
    }

    /// Cleaner threads that died (see the log for why); a reconfiguration of the cleaner
    /// replaces them.
    pub(crate) fn dead_cleaner_threads(&self) -> u64 {
        self.inner
            .dead_cleaner_threads
            .load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Kafka's `grabFilthiestCompactedLog` + `cleanLog` + `doneCleaning`.
fn clean_filthiest(
    inner: &Inner,
    map: &mut offset_map::OffsetMap,
    io_buffer_bytes: usize,
    stop_requested: &dyn Fn() -> bool,
) -> Option<(String, cleaner::PassStats)> {
    let now = inner.clock.now_ms();
    let mut checkpoints_reset = false;
    let best = {
        let mut best: Option<(f64, Arc<Partition>)> = None;
        for t in all_partitions(inner) {
            let config = t.config();
            if !config.cleanup_policy.compact {
                continue;
            }
            if !t.cleaner.is_idle() {
                continue;
            }
            let snap = t.log().snapshot();
            let checkpoint = t.cleaner.checkpoint();
            let lso = t.log().last_stable_offset();
            let view = cleaner::cleaner_view((&snap, lso), checkpoint, &config, now);
            if checkpoint.is_some_and(|c| c != view.first_dirty_offset) {
                // An invalid checkpoint is replaced by the offset cleaning starts from,
                // in memory and in the file.
                if t.cleaner
                    .force_update_checkpoint(checkpoint, view.first_dirty_offset)
                {
                    checkpoints_reset = true;
                    let partition = t.log().partition();
                    if let Some(warning) =
                        cleaner::invalid_checkpoint_warning(&snap, checkpoint, &config, partition)
                    {
                        tracing::warn!(partition, "{warning}");
                        t.record_event("checkpoint", &warning);
                    }
                }
            }
            if view.eligible(&config) && best.as_ref().is_none_or(|(r, _)| view.ratio() > *r) {
                best = Some((view.ratio(), t));
            }
        }
        best
    };
    if checkpoints_reset {
        if let Err(e) = save_cleaner_checkpoints(inner) {
            tracing::error!(error = %e, "writing the cleaner checkpoint failed");
        }
    }
    let (_, topic) = best?;
    if !topic.cleaner.try_claim() {
        return None;
    }
    let max_io = inner.broker.read().cleaner_io_max_bytes_per_second();
    let make_durable_below = |offset: u64| checkpoint_recovery_point_through(inner, &topic, offset);
    let mut res = cleaner::CleanerResources {
        map,
        throttler: &inner.throttler,
        max_io_bytes_per_second: max_io,
        io_buffer_bytes,
        stop_requested,
        make_durable_below: &make_durable_below,
    };
    #[allow(clippy::disallowed_methods)] // pass duration is a real-time measurement
    let started = std::time::Instant::now();
    let mut deleted = Vec::new();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let config = topic.config();
        let checkpoint = topic.cleaner.checkpoint();
        cleaner::clean(
            topic.log(),
            &config,
            checkpoint,
            &mut res,
            now,
            &mut deleted,
        )
    }));
    let name = topic.log().partition().to_string();
    // Groups swapped before a failure are replaced all the same.
    let due = now.saturating_add(topic.config().file_delete_delay_ms);
    inner
        .deletions
        .lock()
        .extend(deleted.into_iter().map(|d| PendingDeletion {
            due_ms: due,
            partition: topic.topic_partition(),
            files: d.files,
        }));
    let result = match outcome {
        Ok(r) => r,
        Err(_) => Err(EngineError::CleanerPanicked),
    };
    match result {
        Ok(mut stats) => {
            #[allow(clippy::disallowed_methods)] // as `started`
            let elapsed = started.elapsed();
            stats.elapsed_ms = elapsed.as_millis() as u64;
            tracing::info!(partition = %name, ?stats, "cleaned");
            topic.record_event(
                "clean",
                &format!(
                    "offsets [{}, {}){}: records kept {} removed {}, tombstones kept {} removed {} (delete horizon for newly kept tombstones {}), segments replaced {}, bytes read {} written {}, map utilization {:.1}%",
                    stats.first_dirty_offset,
                    stats.end_offset,
                    if stats.partial { " (partial: the offset map filled up)" } else { "" },
                    stats.records_retained,
                    stats.records_read - stats.records_retained,
                    stats.tombstones_retained,
                    stats.tombstones_removed,
                    format_time_ms(now.saturating_add(topic.config().delete_retention_ms)),
                    stats.segments_replaced,
                    stats.bytes_read,
                    stats.bytes_written,
                    stats.buffer_utilization * 100.0
                ),
            );
            topic.cleaner.done_cleaning(&stats);
            if let Err(e) = save_cleaner_checkpoints(inner) {
                tracing::error!(error = %e, "writing the cleaner checkpoint failed");
            }
            Some((name, stats))
        }
        Err(EngineError::CleanAborted { reason }) => {
            tracing::info!(partition = %name, %reason, "cleaning aborted");
            topic.cleaner.aborted();
            None
        }
        Err(e) => {
            tracing::error!(partition = %name, error = %e, "cleaning failed; marking the partition uncleanable");
            topic.record_event("uncleanable", &e.to_string());
            topic.cleaner.mark_uncleanable(e.to_string());
            None
        }
    }
}

fn load_cleaner_checkpoints(data_dir: &Path, topics: &BTreeMap<String, Arc<Topic>>) {
    for (tp, offset) in read_offset_checkpoint(&data_dir.join(CLEANER_CHECKPOINT_FILE)) {
        if let Some(p) = topics
            .get(&tp.topic)
            .and_then(|t| t.partition(tp.partition))
        {
            p.cleaner.load_checkpoint(offset);
        }
    }
}

/// Every partition of every topic, as they are now.
fn all_partitions(inner: &Inner) -> Vec<Arc<Partition>> {
    partitions_of(&inner.topics.read())
}

fn partitions_of(topics: &BTreeMap<String, Arc<Topic>>) -> Vec<Arc<Partition>> {
    topics
        .values()
        .flat_map(|t| t.partitions().iter().cloned().collect::<Vec<_>>())
        .collect()
}

fn save_cleaner_checkpoints(inner: &Inner) -> Result<()> {
    let entries: BTreeMap<TopicPartition, u64> = all_partitions(inner)
        .iter()
        .filter_map(|p| Some((p.topic_partition(), p.cleaner.checkpoint()?)))
        .collect();
    write_offset_checkpoint(&inner.data_dir.join(CLEANER_CHECKPOINT_FILE), &entries)
}

/// Makes every record of `topic` below `offset` durable (Kafka's `flush-log` for the
/// rolled segments, when its recovery point is not there yet) and makes sure the
/// recovery-point checkpoint file says so.
fn checkpoint_recovery_point_through(inner: &Inner, topic: &Partition, offset: u64) -> Result<()> {
    if topic.recovery_point() < offset {
        topic.flush_rolled_segments()?;
    }
    let written = inner
        .recovery_checkpoint
        .lock()
        .0
        .get(&topic.topic_partition())
        .copied();
    if written.is_none_or(|w| w < offset) {
        save_recovery_checkpoint(inner, &inner.topics.read())?;
    }
    debug_assert!(topic.recovery_point() >= offset);
    Ok(())
}

/// Writes every topic's recovery point, unless the file already says exactly that.
/// Deleted topics drop out of the file here; until then their entries are harmless,
/// since `create_topic` rewrites the file before a new topic of the same name could use
/// one.
fn save_recovery_checkpoint(inner: &Inner, topics: &BTreeMap<String, Arc<Topic>>) -> Result<()> {
    let points: BTreeMap<TopicPartition, u64> = partitions_of(topics)
        .iter()
        .map(|p| (p.topic_partition(), p.recovery_point()))
        .collect();
    let mut written = inner.recovery_checkpoint.lock();
    if written.0 != points {
        write_offset_checkpoint(&inner.data_dir.join(RECOVERY_CHECKPOINT_FILE), &points)?;
        written.0 = points;
    }
    written.1 = inner.clock.now_ms();
    Ok(())
}

/// A settings file's text, `None` if there is none.
fn read_if_present(path: &Path) -> Result<Option<String>> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(EngineError::io(format!("read {}", path.display()), e)),
    }
}

/// Writes the dynamic broker overrides to their file, or, out of space, remembers why
/// (see [`files::write_or_defer`]).
fn save_broker_config(inner: &Inner, broker: &BrokerConfig) -> Result<()> {
    files::write_or_defer(
        &inner.data_dir.join(DYNAMIC_BROKER_CONFIG_FILE),
        broker.dynamic_properties().as_bytes(),
        &inner.unsaved_broker,
    )
}

/// Saves what a full disk kept in memory only: the dynamic broker config and, per
/// topic, its overrides and stream start.
fn save_unsaved(inner: &Inner) {
    if inner.unsaved_broker.lock().is_some() {
        let broker = inner.broker.read();
        if let Err(e) = save_broker_config(inner, &broker) {
            tracing::error!(error = %e, "writing the dynamic broker config failed");
        }
    }
    let topics: Vec<Arc<Topic>> = inner.topics.read().values().cloned().collect();
    for t in topics {
        t.save_unsaved();
    }
}

/// Kafka's `CleanerThread.doWork`: clean the filthiest log, then retention for compacted
/// topics, then back off when there was nothing to clean.
fn cleaner_loop(inner: &Inner, stop: &Receiver<()>, settings: CleanerSettings) {
    let mut map = settings.new_offset_map();
    let stop_requested = || stop.try_recv() != Err(crossbeam_channel::TryRecvError::Empty);
    loop {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let cleaned =
                clean_filthiest(inner, &mut map, settings.io_buffer_bytes, &stop_requested)
                    .is_some();
            retention_pass(inner, |t| t.config().cleanup_policy.compact);
            cleaned
        }));
        let cleaned = match outcome {
            Ok(c) => c,
            Err(_) => {
                inner
                    .dead_cleaner_threads
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tracing::error!("a log cleaner thread died from a panic");
                return;
            }
        };
        // Read first: holding the broker config lock through the wait would stall every
        // `.kpfs/config` write for up to log.cleaner.backoff.ms.
        let backoff_ms = inner.broker.read().cleaner_backoff_ms();
        if !cleaned && wait_or_stop(stop, backoff_ms) {
            return;
        }
        if cleaned && stop_requested() {
            return;
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.stop.lock().take();
        self.cleaners.lock().stop();
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
    }
}

fn retention_pass(inner: &Inner, select: impl Fn(&Partition) -> bool) -> usize {
    let topics = all_partitions(inner);
    let mut deleted = 0;
    for topic in topics.iter().filter(|t| select(t)) {
        match topic.run_retention() {
            Ok(steps) => {
                let due = inner
                    .clock
                    .now_ms()
                    .saturating_add(topic.config().file_delete_delay_ms);
                let mut q = inner.deletions.lock();
                for step in steps {
                    for seg in step.segments {
                        deleted += 1;
                        q.push(PendingDeletion {
                            due_ms: due,
                            partition: topic.topic_partition(),
                            files: seg.files,
                        });
                    }
                }
            }
            Err(e) => {
                tracing::error!(partition = topic.log().partition(), error = %e, "retention failed")
            }
        }
    }
    if deleted > 0 {
        run_deletions(inner);
        let topics: Vec<Arc<Topic>> = inner.topics.read().values().cloned().collect();
        for t in topics {
            if let Err(e) = t.forget_deleted_runs() {
                tracing::warn!(topic = t.name(), error = %e, "rewriting the stream order failed; it keeps the runs of deleted records");
            }
        }
    }
    deleted
}

fn run_deletions(inner: &Inner) -> usize {
    let now = inner.clock.now_ms();
    let due: Vec<PendingDeletion> = {
        let mut q = inner.deletions.lock();
        let (due, rest): (Vec<_>, Vec<_>) = q.drain(..).partition(|d| d.due_ms <= now);
        *q = rest;
        due
    };
    for d in &due {
        if let Err(e) = log::remove_files(&d.files) {
            tracing::error!(partition = %d.partition, error = %e, "removing deleted segment files failed");
        } else {
            tracing::info!(partition = %d.partition, files = ?d.files, "removed deleted segment files");
            let partition = inner
                .topics
                .read()
                .get(&d.partition.topic)
                .and_then(|t| t.partition(d.partition.partition));
            if let Some(t) = partition {
                let names: Vec<String> = d
                    .files
                    .iter()
                    .filter_map(|f| f.file_name().map(|n| n.to_string_lossy().into_owned()))
                    .collect();
                t.record_event(
                    "remove",
                    &format!("file.delete.delay.ms passed: removed {}", names.join(" ")),
                );
            }
        }
    }
    due.len()
}

/// Waits for `ms` of real time or the stop signal; true when stopping.
fn wait_or_stop(stop: &Receiver<()>, ms: i64) -> bool {
    let wait = Duration::from_millis(ms.clamp(1, MAX_BACKGROUND_WAIT_MS) as u64);
    !matches!(
        stop.recv_timeout(wait),
        Err(crossbeam_channel::RecvTimeoutError::Timeout)
    )
}

fn retention_loop(inner: &Inner, stop: &Receiver<()>) {
    loop {
        let interval = inner.broker.read().retention_check_interval_ms();
        if wait_or_stop(stop, interval) {
            return;
        }
        retention_pass(inner, |t| !t.config().cleanup_policy.compact);
    }
}

/// Removes due `.deleted` files, applies `flush.ms`, flushes rolled segments (Kafka's
/// `flush-log` task) and checkpoints recovery points every
/// `log.flush.offset.checkpoint.interval.ms`.
fn scheduler_loop(inner: &Inner, stop: &Receiver<()>) {
    loop {
        if wait_or_stop(stop, SCHEDULER_TICK_MS) {
            return;
        }
        run_deletions(inner);
        save_unsaved(inner);
        for t in all_partitions(inner) {
            if let Err(e) = t.maybe_flush_by_time() {
                tracing::error!(partition = t.log().partition(), error = %e, "flush failed");
            }
            if let Err(e) = t.flush_rolled_segments() {
                tracing::error!(partition = t.log().partition(), error = %e, "flushing rolled segments failed");
            }
            t.expire_capture();
        }
        run_recovery_checkpoint_if_due(inner);
        run_producer_expiry_if_due(inner);
        inner.groups.tick();
        inner.transactions.tick(inner);
    }
}

/// Kafka's `PeriodicProducerExpirationCheck`: every partition forgets its producers idle
/// for `producer.id.expiration.ms`.
fn run_producer_expiry_if_due(inner: &Inner) {
    let now = inner.clock.now_ms();
    {
        let mut last = inner.producer_expiry_checked_ms.lock();
        if now.saturating_sub(*last) < PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS {
            return;
        }
        *last = now;
    }
    for t in all_partitions(inner) {
        t.remove_expired_producers();
    }
}

fn run_recovery_checkpoint_if_due(inner: &Inner) {
    let interval = inner.broker.read().flush_offset_checkpoint_interval_ms();
    let last = inner.recovery_checkpoint.lock().1;
    if inner.clock.now_ms().saturating_sub(last) < interval {
        return;
    }
    let topics = inner.topics.read();
    if let Err(e) = save_recovery_checkpoint(inner, &topics) {
        tracing::error!(error = %e, "writing the recovery point checkpoint failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_in_parallel_comes_back_in_order() {
        let items: Vec<u64> = (0..1000).collect();
        let squares = in_parallel(&items, |n| n * n);
        assert_eq!(squares, items.iter().map(|n| n * n).collect::<Vec<_>>());
        assert!(in_parallel(&[] as &[u64], |n| *n).is_empty());
    }

    #[test]
    fn times_format_as_utc() {
        assert_eq!(format_time_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            format_time_ms(1_764_430_000_123),
            "2025-11-29T15:26:40.123Z"
        );
    }

    #[test]
    fn delete_dir_names_cut_the_topic_to_fit_a_file_name() {
        let now = 1_764_430_000_123;
        assert_eq!(delete_dir_name("t", 0, now), "t-0.1764430000123-delete");
        assert_eq!(delete_dir_name("t", 11, now), "t-11.1764430000123-delete");
        for partition in [0, 9_999] {
            for len in [1, 232, 233, 240, MAX_TOPIC_NAME_CHARS] {
                let topic = "a".repeat(len);
                let name = delete_dir_name(&topic, partition, now);
                assert!(name.len() <= MAX_FILE_NAME_BYTES, "{len}: {}", name.len());
                let suffix = format!("-{partition}.1764430000123-delete");
                assert!(name.ends_with(&suffix));
                assert!(topic.starts_with(name.strip_suffix(&suffix).unwrap()));
            }
            assert_eq!(
                delete_dir_name(&"a".repeat(MAX_TOPIC_NAME_CHARS), partition, now).len(),
                MAX_FILE_NAME_BYTES
            );
        }
    }

    #[test]
    fn cleaner_threads_split_the_buffers_as_kafka() {
        let broker = |pairs: &[(&str, &str)]| {
            let pairs: Vec<(String, String)> = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            BrokerConfig::load(None, &pairs).unwrap()
        };
        let defaults = CleanerSettings::of(&BrokerConfig::defaults());
        assert_eq!(defaults.io_buffer_bytes, 262_144);
        assert_eq!(defaults.map_bytes, 134_217_728);
        assert_eq!(defaults.map_load_factor, 0.9);
        let two = CleanerSettings::of(&broker(&[
            ("log.cleaner.threads", "2"),
            ("log.cleaner.io.buffer.size", "1000000"),
            ("log.cleaner.dedupe.buffer.size", "10000000"),
            ("log.cleaner.io.buffer.load.factor", "0.5"),
        ]));
        assert_eq!(two.io_buffer_bytes, 250_000);
        assert_eq!(two.map_bytes, 5_000_000);
        assert_eq!(two.map_load_factor, 0.5);
    }

    #[test]
    fn topic_names_follow_kafka() {
        assert!(validate_topic_name("orders.v1_x-2").is_ok());
        for bad in ["", ".", "..", "a/b", "a b", ".kpfs", "ü"] {
            assert!(validate_topic_name(bad).is_err(), "{bad:?}");
        }
        assert!(validate_topic_name(&"a".repeat(249)).is_ok());
        assert!(validate_topic_name(&"a".repeat(250)).is_err());
    }

    #[test]
    fn names_collide_when_they_differ_only_in_dots_and_underscores() {
        assert!(topic_names_collide("my.topic", "my_topic"));
        assert!(topic_names_collide("woo.bar_foo", "woo.bar.foo"));
        assert!(topic_names_collide("a_b", "a_b"));
        assert!(!topic_names_collide("my.topic", "my-topic"));
        assert!(!topic_names_collide("a.b", "a.bc"));
        assert!(!topic_names_collide("ab", "a_"));
        assert_eq!(topic_name_warning("orders-v1"), None);
        for name in ["my.topic", "my_topic"] {
            assert!(topic_name_warning(name)
                .is_some_and(|w| w.starts_with("Due to limitations in metric names")));
        }
    }
}
