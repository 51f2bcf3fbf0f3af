//! A topic: its name and id, its configuration (overrides resolved over the broker's),
//! the gate that orders appends with a change of rendering, its `events`, and its
//! partitions, each a [`Partition`] with a log of its own (Kafka's `UnifiedLog` per
//! `TopicPartition`). What every partition reads of its topic is the [`TopicCore`] they
//! share; the topic's `log` file shows every partition's records in the order they
//! were appended, kept by the [`stream_order`](super::stream_order).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::append_watch::AppendSignal;
use super::clock::Clock;
use super::config::{BrokerConfig, ConfigChange, DescribedConfig, TopicConfig, TopicOverrides};
use super::error::BatchSize;
use super::error::{EngineError, InternalTopicAction, Result};
use super::events::EventLog;
use super::files::write_or_defer;
use super::format::{decode_header, kpfs_topic_dir, STREAM_ORDER_FILE, TOPIC_CONFIG_FILE};
use super::keyed_batches::{Builder, KeyedBuild, Part, PartRef};
use super::limits::{KEYED_BATCH_BYTES_KEPT, MAX_PARTITIONS, PARSED_RECORDS_KEPT};
use super::log::{
    append_batch_limit, first_oversized_record, AppendInfo, OpenReport, PendingRecord, ProducedBy,
    TxnMarkerWrite, WriteBytes, WriteRecords,
};
use super::log_loader::{remove_stale_temporary, Durability};
use super::log_start_checkpoint::LogStartCheckpoint;
use super::metadata_files::Uuid;
use super::parallel;
use super::partition::protocol::{count_lines, parse_lines, PARSED};
use super::partition::{LineRendering, LogCursor, Partition, Replay};
use super::produce::ProduceOutcome;
use super::stream_order::{PartitionEnd, PlannedAppend, Run, StreamOrder};
use super::topic_core::TopicCore;
use super::topic_partition::TopicPartition;
use crate::lines::partitioner::KeyPartitioner;

/// Where a topic's partitions live and how they open.
pub(crate) struct TopicPlace<'a> {
    pub(crate) data_dir: &'a Path,
    pub(crate) broker: Arc<RwLock<BrokerConfig>>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) log_starts: Arc<LogStartCheckpoint>,
}

/// The directory of partition `partition` of `topic` in `data_dir` (`DATA_DIR/TOPIC-N`).
pub(crate) fn partition_dir(data_dir: &Path, topic: &str, partition: u32) -> PathBuf {
    data_dir.join(TopicPartition::new(topic, partition).dir_name())
}

pub struct Topic {
    core: Arc<TopicCore>,
    /// Partitions `0..n`, in order; replaced whole when partitions are added, so a reader
    /// holds a consistent list.
    partitions: RwLock<Arc<Vec<Arc<Partition>>>>,
    data_dir: PathBuf,
    /// Held while partitions are added, so two additions do not make the same one.
    growth: Mutex<()>,
    /// The order of the records of several partitions in the topic's `log`; `None` for
    /// a topic of one partition, whose `log` is that partition's. Its lock is the
    /// topic's append lock: every append to a topic of several partitions holds it
    /// (after the rendering gate), so the runs follow the appends.
    order: Mutex<Option<StreamOrder>>,
    /// The end of the topic's `log` stream while it has several partitions.
    merged_end: AtomicU64,
    /// The partition the next keyless write to the topic's `log` goes to (modulo the
    /// count): successive writes take the partitions in turn.
    keyless_turn: AtomicU32,
}

/// Where one open handle of a topic's `log` is: the run it reads and the partition
/// cursor that reads it.
#[derive(Debug, Default)]
pub struct TopicCursor {
    positioned: bool,
    /// Whether the handle reads through the topic's runs (a topic of several
    /// partitions) rather than partition 0 directly.
    merged: bool,
    /// Kernel offset the next sequential read will ask for.
    next_pos: u64,
    replay: Replay,
    /// The topic position where the run being read starts, its partition and first
    /// offset.
    run_pos: u64,
    partition: u32,
    run_first_offset: u64,
    /// The partition's cursor; its kernel offsets start at the partition position where
    /// the run was entered and grow by the bytes it returned.
    inner: LogCursor,
    inner_pos: u64,
    /// The other partitions' cursors and kernel offsets, each where its partition's last
    /// run was read to. A partition's next run goes on from there, so the change of
    /// partition at every run costs nothing, where a fresh cursor would walk (and
    /// decompress) the partition's batches from a stream-index entry to the run's start.
    parked: BTreeMap<u32, (LogCursor, u64)>,
}

impl std::fmt::Debug for Topic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Topic")
            .field("name", &self.core.name)
            .field("partitions", &self.partition_count())
            .finish()
    }
}

/// Points `cursor` at the start of `run`, the one after the run it read (or, with its
/// partition cursors forgotten, any run).
fn enter_run(cursor: &mut TopicCursor, run: Run) {
    let mut left = std::mem::take(&mut cursor.inner);
    if left.is_positioned() {
        left.park();
        cursor
            .parked
            .insert(cursor.partition, (left, cursor.inner_pos));
    }
    cursor.run_pos = run.topic_pos;
    cursor.partition = run.partition;
    cursor.run_first_offset = run.first_offset;
    // Read run after run, a partition's cursor stops where its runs' records end: its
    // next records are the next run's, after markers only, which no run places.
    match cursor.parked.remove(&run.partition) {
        Some((inner, pos)) if inner.next_offset() <= run.first_offset => {
            cursor.inner = inner;
            cursor.inner_pos = pos;
        }
        _ => cursor.inner_pos = run.partition_pos,
    }
}

/// Forgets the partition cursors, before the reader moves other than run after run.
fn forget_cursors(cursor: &mut TopicCursor) {
    cursor.inner = LogCursor::default();
    cursor.parked.clear();
}

impl Topic {
    /// Opens the topic `name` whose partition directories `0..count` are in the data
    /// directory (creating those missing: a new topic, or partitions being added), each
    /// recovered as `durability` says for it. Returns every partition's open report.
    pub(crate) fn open(
        name: &str,
        count: u32,
        place: TopicPlace<'_>,
        durability: impl Fn(&TopicPartition) -> Durability,
    ) -> Result<(Topic, Vec<(TopicPartition, OpenReport)>)> {
        let config_path =
            kpfs_topic_dir(&partition_dir(place.data_dir, name, 0)).join(TOPIC_CONFIG_FILE);
        remove_stale_temporary(&config_path);
        let overrides = match std::fs::read_to_string(&config_path) {
            Ok(text) => TopicOverrides::from_properties(&text)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => TopicOverrides::default(),
            Err(e) => {
                return Err(EngineError::io(
                    format!("read {}", config_path.display()),
                    e,
                ))
            }
        };
        let config = place.broker.read().resolve_topic(&overrides);
        let core = Arc::new(TopicCore {
            name: name.to_string(),
            broker: place.broker,
            overrides: RwLock::new(overrides),
            unsaved_overrides: Mutex::new(None),
            config: RwLock::new(Arc::new(config)),
            rendering_gate: RwLock::new(()),
            clock: place.clock,
            events: EventLog::default(),
            log_starts: place.log_starts,
            append_signal: AppendSignal::default(),
            config_path,
        });
        let topic = Topic {
            core,
            partitions: RwLock::new(Arc::new(Vec::new())),
            data_dir: place.data_dir.to_path_buf(),
            growth: Mutex::new(()),
            order: Mutex::new(None),
            merged_end: AtomicU64::new(0),
            keyless_turn: AtomicU32::new(0),
        };
        // After a clean shutdown every file was fsynced as it is.
        let synced = durability(&TopicPartition::new(name, 0)) == Durability::CleanShutdown;
        let reports = topic.open_partitions(count, synced, durability)?;
        Ok((topic, reports))
    }

    /// Opens partitions from the current count up to `count`, appending them to the list;
    /// `synced`: the topic's files are durable as they are (see [`StreamOrder::open`]).
    fn open_partitions(
        &self,
        count: u32,
        synced: bool,
        durability: impl Fn(&TopicPartition) -> Durability,
    ) -> Result<Vec<(TopicPartition, OpenReport)>> {
        let mut list = Vec::clone(&self.partitions.read());
        let mut reports = Vec::new();
        let mut topic_id: Option<Uuid> = list.first().map(|p| p.log().topic_id());
        for index in list.len() as u32..count {
            let tp = TopicPartition::new(&self.core.name, index);
            let dir = partition_dir(&self.data_dir, &self.core.name, index);
            let (partition, report) =
                Partition::open(self.core.clone(), index, &dir, durability(&tp), topic_id)?;
            let id = partition.log().topic_id();
            if topic_id.is_some_and(|t| t != id) {
                tracing::warn!(partition = %tp, "partition.metadata names another topic id than partition 0's");
            }
            topic_id.get_or_insert(id);
            list.push(Arc::new(partition));
            reports.push((tp, report));
        }
        if list.len() > 1 {
            let ends = partition_ends(&list);
            let order = StreamOrder::open(&self.order_path(), &ends, synced, |p, pos| {
                list[p as usize].offset_at_stream_pos(pos)
            })?;
            self.merged_end.store(order.end(), Ordering::Release);
            *self.order.lock() = Some(order);
        }
        *self.partitions.write() = Arc::new(list);
        Ok(reports)
    }

    /// `stream-order`, in partition 0's kpfs folder beside `topic.properties`.
    fn order_path(&self) -> PathBuf {
        self.core.config_path.with_file_name(STREAM_ORDER_FILE)
    }

    /// Kafka's CreatePartitions: the topic grows to `count` partitions (partitions are
    /// only ever added), the new ones empty and carrying the topic's id. The listener's
    /// CreatePartitions calls it (and the mount's `mkdir TOPIC/partitions/N`).
    pub fn add_partitions(&self, count: u32) -> Result<()> {
        let _one_at_a_time = self.growth.lock();
        let current = self.check_add_partitions(count)?;
        // No append may run while the order of the partitions' records is set up.
        let _no_appends = self.core.rendering_gate.write();
        // The new partitions are empty; the order file was written while the topic
        // served, so it is not known to be durable.
        self.open_partitions(count, false, |_| Durability::CleanShutdown)?;
        super::files::sync_dir(&self.data_dir)?;
        self.core.record_event(
            "partitions",
            &format!("added partitions {current}..{count}: the topic has {count} partitions"),
        );
        tracing::info!(topic = %self.core.name, from = current, to = count, "added partitions");
        Ok(())
    }

    /// What [`Topic::add_partitions`] would refuse of growing to `count` partitions, in
    /// its order (a CreatePartitions with `validate_only` asks only this); the count the
    /// topic has otherwise.
    pub fn check_add_partitions(&self, count: u32) -> Result<u32> {
        self.core
            .refuse_internal(InternalTopicAction::AddPartitions)?;
        let current = self.partition_count();
        if count < current {
            return Err(EngineError::PartitionsDecrease {
                name: self.core.name.clone(),
                current,
                requested: count,
            });
        }
        if count == current {
            return Err(EngineError::PartitionsUnchanged { current });
        }
        check_partition_count(count)?;
        self.check_not_deleted()?;
        Ok(current)
    }

    /// Refuses whatever is asked of a topic that was deleted (through a handle or a
    /// reference taken before): its partitions are retired together, partition 0 last.
    pub fn check_not_deleted(&self) -> Result<()> {
        self.partition_list()[0].log().check_not_deleted()
    }

    pub(crate) fn name(&self) -> &str {
        &self.core.name
    }

    /// Kafka's topic id, which every partition's `partition.metadata` carries.
    pub fn id(&self) -> Uuid {
        self.partition_list()[0].log().topic_id()
    }

    /// The partitions `0..n`, in order, as they are now.
    pub fn partitions(&self) -> Arc<Vec<Arc<Partition>>> {
        self.partitions.read().clone()
    }

    fn partition_list(&self) -> Arc<Vec<Arc<Partition>>> {
        self.partitions()
    }

    pub fn partition(&self, index: u32) -> Option<Arc<Partition>> {
        self.partitions.read().get(index as usize).cloned()
    }

    pub fn partition_count(&self) -> u32 {
        self.partitions.read().len() as u32
    }

    /// The effective configuration now.
    pub fn config(&self) -> Arc<TopicConfig> {
        self.core.config()
    }

    /// Whether the topic is Kafka's internal `__consumer_offsets`, written only by the
    /// group coordinator.
    pub fn is_internal(&self) -> bool {
        self.core.is_internal()
    }

    pub(crate) fn refuse_internal(&self, action: InternalTopicAction) -> Result<()> {
        self.core.refuse_internal(action)
    }

    pub(crate) fn append_signal(&self) -> &AppendSignal {
        &self.core.append_signal
    }

    /// Moves on with every append to any partition (and at the topic's deletion): a
    /// long-poll fetch compares it with what it saw
    /// ([`AppendWatch`](crate::engine::AppendWatch)).
    pub fn append_generation(&self) -> u64 {
        self.core.append_signal.generation()
    }

    /// The topic's config warnings (`status`, `.kpfs/errors` after a config write).
    pub(crate) fn config_warnings(&self) -> Vec<String> {
        self.core.config_warnings()
    }

    /// Re-resolves the effective config after a broker config change.
    pub(crate) fn refresh_config(&self) {
        // Overrides before the broker config, the order of a topic config change: the
        // other order can deadlock with it behind a waiting broker config writer.
        let overrides = self.core.overrides.read();
        let resolved = self.core.broker.read().resolve_topic(&overrides);
        *self.core.config.write() = Arc::new(resolved);
    }

    /// The `config` file: every effective topic config as `key=value`.
    pub fn config_text(&self) -> String {
        self.core
            .overrides
            .read()
            .render_effective(&self.core.broker.read())
    }

    /// Every topic config with its value and source, as Kafka's `DescribeConfigs`.
    pub(crate) fn describe_config(&self) -> Vec<DescribedConfig> {
        self.core
            .overrides
            .read()
            .describe(&self.core.broker.read())
    }

    /// A whole command to `config` (`key=value`, `-key`, blank and `#` lines) that
    /// changes the keys it names; all or nothing.
    #[cfg(any(test, feature = "internals"))]
    pub fn update_config(&self, text: &[u8]) -> Result<()> {
        use super::config::{ConfigError, ConfigScope};
        let text = std::str::from_utf8(text).map_err(|_| ConfigError::NotText)?;
        self.apply_config_change(&ConfigChange::from_text(ConfigScope::Topic, text)?)
    }

    /// Whether `change` would apply now, without applying it: the checks a write to
    /// `config` runs on the lines so far, so the write that makes the config invalid
    /// fails rather than only the close (which shells do not report).
    pub(crate) fn check_config_change(&self, change: &ConfigChange) -> Result<()> {
        self.core
            .overrides
            .read()
            .apply_change(change, &self.core.broker.read())?;
        Ok(())
    }

    /// Applies what one open-to-close of `config` wrote: all of it, or nothing when a
    /// line was refused or a check across keys fails. On a full disk the change applies
    /// in memory and is saved as soon as there is space (a warning says so meanwhile):
    /// lowering retention is how an operator gets space back.
    pub(crate) fn apply_config_change(&self, change: &ConfigChange) -> Result<()> {
        // Through a handle opened before a deletion: the config file it would write is
        // that of whatever topic has the name now.
        self.check_not_deleted()?;
        let partitions = self.partition_list();
        let core = &self.core;
        let mut overrides = core.overrides.write();
        let broker = core.broker.read();
        let updated = overrides.apply_change(change, &broker)?;
        let resolved = broker.resolve_topic(&updated);
        let replaced = LineRendering::of(&core.config());
        // A change of rendering waits for the appends under way and records, in every
        // partition, the offset up to which the old one rendered its records.
        let _no_appends = if LineRendering::of(&resolved) != replaced {
            let gate = core.rendering_gate.write();
            for p in partitions.iter() {
                p.remember_rendering(replaced.clone())?;
            }
            Some(gate)
        } else {
            None
        };
        if updated != *overrides || core.unsaved_overrides.lock().is_some() {
            self.save_overrides(&updated)?;
        }
        *overrides = updated;
        *core.config.write() = Arc::new(resolved);
        Ok(())
    }

    /// Writes `overrides` to the topic's `topic.properties`, or, out of space, remembers
    /// why (see [`write_or_defer`]).
    fn save_overrides(&self, overrides: &TopicOverrides) -> Result<()> {
        let core = &self.core;
        let deferred = core.unsaved_overrides.lock().is_some();
        write_or_defer(
            &core.config_path,
            overrides.to_properties().as_bytes(),
            &core.unsaved_overrides,
        )?;
        if deferred && core.unsaved_overrides.lock().is_none() {
            core.record_event(
                "config",
                &format!("saved {TOPIC_CONFIG_FILE}, kept in memory only while the disk was full"),
            );
        }
        Ok(())
    }

    /// Saves what a full disk kept in memory only: the overrides, and each partition's
    /// rendering timeline and leader-epoch checkpoint. Called on the scheduler's tick and
    /// at close; a failure leaves it for the next call.
    pub(crate) fn save_unsaved(&self) {
        if self.core.unsaved_overrides.lock().is_some() {
            let overrides = self.core.overrides.write();
            if let Err(e) = self.save_overrides(&overrides) {
                tracing::error!(topic = %self.core.name, error = %e, "writing the topic config failed");
            }
        }
        for p in self.partition_list().iter() {
            p.save_unsaved();
        }
    }

    /// Appends the lines of one write to the topic's `log`: each record goes where the
    /// producer's default partitioner sends it ([`partitioner`](crate::lines::partitioner)),
    /// all or nothing per partition. Returns the number of records appended. (For tests
    /// and tools: the mount appends through [`Topic::append_lines_after`].)
    #[cfg(any(test, feature = "internals"))]
    pub fn append_lines(&self, data: &[u8]) -> Result<u64> {
        Ok(self.append_lines_info(data)?.records)
    }

    /// [`Topic::append_lines`], returning what was appended, summed over partitions.
    #[cfg(any(test, feature = "internals"))]
    pub fn append_lines_info(&self, data: &[u8]) -> Result<AppendInfo> {
        self.append_write(None, WriteBytes::new(data))
    }

    /// [`Topic::append_lines`] of `head` followed by `body`, as one write, to partition
    /// `target` (`TOPIC/partitions/N/log`) or through the partitioner (`None`): `head`
    /// holds complete lines (an earlier write's unterminated line, finished by this one),
    /// so a writer need not copy `body` behind it.
    pub fn append_lines_after(&self, target: Option<u32>, head: &[u8], body: &[u8]) -> Result<u64> {
        assert!(
            head.is_empty() || head.ends_with(b"\n"),
            "the head of a write holds complete lines"
        );
        Ok(self
            .append_write(target, WriteBytes { head, body })?
            .records)
    }

    /// The partition a write without a target starts with, and whose name a refusal of
    /// the whole write carries: the keyless turn, taken by this write.
    fn take_turn(&self, count: u32) -> u32 {
        self.keyless_turn.fetch_add(1, Ordering::Relaxed) % count
    }

    /// The partition an unterminated line of `TOPIC/log` is checked against before its
    /// newline arrives (the next keyless turn), or `target`'s.
    pub fn partition_for_line(&self, target: Option<u32>) -> Result<Arc<Partition>> {
        let partitions = self.partition_list();
        let index = target
            .unwrap_or_else(|| self.keyless_turn.load(Ordering::Relaxed) % partitions.len() as u32);
        self.partition_or_unknown(&partitions, index)
    }

    fn partition_or_unknown(
        &self,
        partitions: &[Arc<Partition>],
        index: u32,
    ) -> Result<Arc<Partition>> {
        partitions
            .get(index as usize)
            .cloned()
            .ok_or_else(|| EngineError::UnknownPartition {
                topic: self.core.name.clone(),
                partition: i64::from(index),
            })
    }

    fn append_write(&self, target: Option<u32>, data: WriteBytes<'_>) -> Result<AppendInfo> {
        let partitions = self.partition_list();
        let count = partitions.len() as u32;
        let lead = match target {
            Some(index) => self.partition_or_unknown(&partitions, index)?,
            None if count == 1 => partitions[0].clone(),
            None => partitions[self.take_turn(count) as usize].clone(),
        };
        let lines = || count_lines(data.head) + count_lines(data.body);
        if let Err(e) = self.core.refuse_internal(InternalTopicAction::Append) {
            lead.note_refused_append(&e, lines());
            return Err(e);
        }
        let _rendering = self.core.rendering_gate.read();
        let config = self.core.config();
        if !(config.parse_key || config.cleanup_policy.compact) {
            // Without keys every line is a record whose value is the line: nothing to
            // parse but the lengths, and the whole write goes to one partition.
            if data.is_empty() {
                return Ok(AppendInfo::default());
            }
            let max = config.max_message_bytes.max(0) as u64;
            if let Some(batch) = first_oversized_record(data, WriteRecords::Plain, max) {
                let e = EngineError::RecordTooLarge {
                    partition: lead.log().partition().to_string(),
                    size: BatchSize::Exactly(batch),
                    max,
                };
                lead.note_refused_append(&e, lines());
                return Err(e);
            }
            return self.append_to(&partitions, &lead, data, WriteRecords::Plain, &config);
        }
        PARSED.with_borrow_mut(|records| {
            records.clear();
            let partition = lead.log().partition();
            let parsed = parse_lines(data.head, 0, &config, partition, records).and_then(|()| {
                parse_lines(data.body, data.head.len(), &config, partition, records)
            });
            let appended = match parsed {
                Err(e) => {
                    lead.note_refused_append(&e, lines());
                    Err(e)
                }
                Ok(()) if records.is_empty() => Ok(AppendInfo::default()),
                Ok(()) if target.is_some() || count == 1 => self.append_to(
                    &partitions,
                    &lead,
                    data,
                    WriteRecords::Parsed(records),
                    &config,
                ),
                Ok(()) => self.append_keyed(&partitions, &lead, data, records, &config),
            };
            // One write of a million empty lines should not pin 32 MiB for good.
            records.shrink_to(PARSED_RECORDS_KEPT);
            appended
        })
    }

    /// The records of a write with keys, each to its key's partition (a null key to
    /// `lead`, the write's keyless turn), one append per partition in the order of their
    /// first records, their batches built in one pass over the write, a large write's
    /// by two threads at once ([`KeyedBuild`]).
    fn append_keyed(
        &self,
        partitions: &[Arc<Partition>],
        lead: &Arc<Partition>,
        data: WriteBytes<'_>,
        records: &[PendingRecord],
        config: &TopicConfig,
    ) -> Result<AppendInfo> {
        let count = partitions.len() as u32;
        let partitioner = KeyPartitioner::new(count);
        let lead_index = lead.index();
        let target_of = |r: &PendingRecord| match usize::try_from(r.key_len) {
            Ok(len) => partitioner.partition(data.slice(r.line_start, r.line_start + len)),
            Err(_) => lead_index,
        };
        let mut order = self.order.lock();
        let order = order
            .as_mut()
            .expect("a write spans partitions only in a topic of several");
        // Under the append lock, which every append to the topic's partitions takes: each
        // partition's records get their times in the order of its appends.
        let now = self.core.clock.now_ms();
        KEYED.with_borrow_mut(|keyed| {
            keyed.build(
                data,
                records,
                count,
                target_of,
                now,
                append_batch_limit(config),
            );
            let write_order = keyed.in_write_order();
            // A write refused for a record, or for a partition that takes no writes, is
            // refused whole: no partition gets its part.
            let checked = write_order.iter().try_for_each(|&at| {
                let part = keyed.part(at);
                let partition = &partitions[part.partition as usize];
                let log = partition.log();
                let checked = log
                    .check_takes_writes()
                    .and_then(|()| log.check_built_fit_segment(part.batches(), config));
                if let Err(e) = &checked {
                    partition.note_refused_append(e, records.len() as u64);
                }
                checked
            });
            let total = checked.and_then(|()| {
                self.append_parts(order, partitions, keyed, &write_order, config, now)
            });
            keyed.shrink(KEYED_BATCH_BYTES_KEPT, PARSED_RECORDS_KEPT);
            total
        })
    }

    /// The appends of a keyed write, one per part, under the topic's append lock
    /// (`order`): their runs first, with one write, each at the position its records will
    /// take (a record's stream bytes are its line's), in `write_order`; then the appends,
    /// each builder's parts on the thread that built them, at once when there are two
    /// ([`parallel::join`]); each partition's append takes its own writer lock and files.
    /// Readers of the topic's `log` wait on the lock, so they see all of the write or
    /// none of it.
    fn append_parts(
        &self,
        order: &mut StreamOrder,
        partitions: &[Arc<Partition>],
        keyed: &mut KeyedBuild,
        write_order: &[PartRef],
        config: &TopicConfig,
        now: i64,
    ) -> Result<AppendInfo> {
        // Under the append lock: every append to the topic's partitions takes it, so
        // their ends stay where they are read until these appends move them.
        let plan = |part: &Part| PlannedAppend {
            partition: part.partition,
            end: partition_end(&partitions[part.partition as usize]),
            stream_len: part.stream_len(),
        };
        let (here, there) = keyed.parts();
        let here_plans: Vec<PlannedAppend> = here.iter().map(plan).collect();
        let there_plans: Vec<PlannedAppend> = there.iter().map(plan).collect();
        let planned: Vec<PlannedAppend> = write_order
            .iter()
            .map(|&(builder, index)| match builder {
                Builder::Here => here_plans[index],
                Builder::There => there_plans[index],
            })
            .collect();
        let log_end = |p: u32| partitions[p as usize].log().log_end_offset();
        let first = order.before_appends(&planned, log_end)?;
        let append = |parts: &mut [Part], plans: &[PlannedAppend]| -> Result<AppendInfo> {
            let mut total = AppendInfo::default();
            for (part, plan) in parts.iter_mut().zip(plans) {
                let partition = &partitions[part.partition as usize];
                let info = partition.append_built(part.batches(), config, now)?;
                // Invariant 12: the records took the stream bytes their run placed.
                assert_eq!(
                    partition.log().stream_end(),
                    plan.end.stream_end + plan.stream_len,
                    "an append takes the stream bytes its run was placed with"
                );
                total.absorb(info);
            }
            Ok(total)
        };
        let (mine, theirs) = if there.is_empty() {
            (append(here, &here_plans), Ok(AppendInfo::default()))
        } else {
            parallel::join(|| append(here, &here_plans), || append(there, &there_plans))
        };
        let last = planned.last().expect("a keyed write has records").partition;
        order.after_appends(first, log_end, partitions[last as usize].log().stream_end());
        self.merged_end.store(order.end(), Ordering::Release);
        let mut total = mine?;
        total.absorb(theirs?);
        Ok(total)
    }

    /// Appends to `partition`, under the topic's append lock when it has several
    /// partitions, so the run that places the records is written before them.
    fn append_to(
        &self,
        partitions: &[Arc<Partition>],
        partition: &Partition,
        data: WriteBytes<'_>,
        records: WriteRecords<'_>,
        config: &TopicConfig,
    ) -> Result<AppendInfo> {
        self.in_order(partitions, partition, || {
            partition.append_records(data, records, config)
        })
    }

    /// Runs `append` (an append to `partition`) in the topic's order of appends.
    fn in_order<T>(
        &self,
        partitions: &[Arc<Partition>],
        partition: &Partition,
        append: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        let mut order = self.order.lock();
        let Some(order) = order.as_mut() else {
            return append();
        };
        let log_end = |p: u32| partitions[p as usize].log().log_end_offset();
        order.before_append(partition.index(), partition_end(partition), log_end)?;
        let result = append();
        order.after_append(partition.log().stream_end());
        self.merged_end.store(order.end(), Ordering::Release);
        result
    }

    /// Kafka's Produce to partition `partition`: see [`Partition::append_produced_gated`].
    /// A transactional batch is refused unless its producer's transaction is open here
    /// already ([`Topic::append_produced_in_txn`] is the coordinator-verified append).
    pub fn append_produced(&self, partition: u32, records: &[u8]) -> Result<ProduceOutcome> {
        self.append_produced_with(partition, records, false)
    }

    /// Kafka's Produce of a batch whose partition the transaction coordinator verified is
    /// in its producer's transaction (Kafka's `VerificationGuard`, KIP-890).
    pub fn append_produced_in_txn(&self, partition: u32, records: &[u8]) -> Result<ProduceOutcome> {
        self.append_produced_with(partition, records, true)
    }

    fn append_produced_with(
        &self,
        partition: u32,
        records: &[u8],
        txn_verified: bool,
    ) -> Result<ProduceOutcome> {
        let origin = ProducedBy {
            coordinator: false,
            txn_verified,
        };
        let partitions = self.partition_list();
        let target = self.partition_or_unknown(&partitions, partition)?;
        if let Err(e) = self.core.refuse_internal(InternalTopicAction::Append) {
            let count = decode_header(records).map_or(0, |h| u64::from(h.record_count));
            target.note_refused_append(&e, count);
            return Err(e);
        }
        let _rendering = self.core.rendering_gate.read();
        self.in_order(&partitions, &target, || {
            target.append_produced_gated(records, origin)
        })
    }

    /// Kafka's WriteTxnMarkers for partition `partition`: see
    /// [`Partition::append_txn_marker`]. Returns the marker's offset.
    pub fn append_txn_marker(&self, partition: u32, marker: &TxnMarkerWrite) -> Result<u64> {
        let partitions = self.partition_list();
        let target = self.partition_or_unknown(&partitions, partition)?;
        let _rendering = self.core.rendering_gate.read();
        self.in_order(&partitions, &target, || target.append_txn_marker(marker))
    }

    /// The size of `log`: the end of the topic's stream a reader sees, which stops at the
    /// first record of the oldest open transaction of any partition. Never decreases.
    pub fn stream_len(&self) -> u64 {
        let partitions = self.partition_list();
        let order = self.order.lock();
        let Some(order) = order.as_ref() else {
            return partitions[0].stream_len();
        };
        let end = self.merged_end.load(Ordering::Acquire);
        partitions
            .iter()
            .filter_map(|p| {
                let (offset, pos) = p.log().unstable_from()?;
                order.topic_pos_of(p.index(), offset, pos)
            })
            .fold(end, u64::min)
    }

    /// Reads up to `len` bytes of the topic's `log` at kernel offset `pos`: every
    /// partition's records in the order they were appended. Never blocks; returns an
    /// empty vector at the end.
    pub fn read_log(&self, cursor: &mut TopicCursor, pos: u64, len: usize) -> Result<Vec<u8>> {
        let partitions = self.partition_list();
        if self.order.lock().is_none() {
            return partitions[0].read_log(&mut cursor.inner, pos, len);
        }
        if !cursor.merged && cursor.inner.is_positioned() {
            // The handle read the topic while it had one partition, whose stream the
            // first run continues: its cursor goes on in that run.
            cursor.merged = true;
            cursor.positioned = true;
            cursor.next_pos = pos;
            cursor.run_pos = 0;
            cursor.partition = 0;
            cursor.run_first_offset = 0;
            cursor.inner_pos = pos;
        }
        cursor.merged = true;
        let mut out = Vec::new();
        let mut from = pos;
        if cursor.positioned {
            match cursor.replay.serve(pos, len, cursor.next_pos, &mut out) {
                Some(true) => return Ok(out),
                Some(false) => from = cursor.next_pos,
                None => {}
            }
        }
        if !cursor.positioned || from != cursor.next_pos {
            self.reposition(cursor, from);
        }
        while out.len() < len {
            let (current, limit, next) = self.run_bounds(&partitions, cursor);
            if let Some(run) = current.filter(|r| {
                (r.partition, r.first_offset) != (cursor.partition, cursor.run_first_offset)
            }) {
                // The run the cursor is in placed nothing and an append to another
                // partition replaced it in place (`StreamOrder::push_run`): the cursor,
                // at its start, goes on in the run that replaced it.
                enter_run(cursor, run);
                continue;
            }
            cursor.inner.limit = Some(limit);
            let partition = &partitions[cursor.partition as usize];
            let bytes = partition.read_log(&mut cursor.inner, cursor.inner_pos, len - out.len())?;
            cursor.inner_pos += bytes.len() as u64;
            out.extend_from_slice(&bytes);
            if out.len() >= len {
                break;
            }
            if cursor.inner.next_offset() < limit {
                // The run's partition shows no more yet (an open transaction): its
                // records, and every later run's, come when it commits.
                break;
            }
            // The run is read to its end: the next one goes on.
            let Some(next) = next else { break };
            debug_assert!(
                next.topic_pos > cursor.run_pos,
                "runs start at increasing positions"
            );
            if current.is_none() {
                // The run was forgotten: the reader jumps to the first run kept.
                forget_cursors(cursor);
            }
            enter_run(cursor, next);
        }
        cursor.next_pos = pos + out.len() as u64;
        cursor.replay.remember(pos, &out);
        Ok(out)
    }

    /// Points the cursor at the run holding topic position `pos`, at the partition
    /// position that corresponds to it.
    fn reposition(&self, cursor: &mut TopicCursor, pos: u64) {
        let order = self.order.lock();
        let order = order
            .as_ref()
            .expect("a topic of several partitions has an order");
        let (_, run) = order.locate(pos);
        cursor.positioned = true;
        cursor.next_pos = pos;
        forget_cursors(cursor);
        enter_run(cursor, run);
        cursor.inner_pos = run.partition_pos + pos.saturating_sub(run.topic_pos);
    }

    /// The run that starts at the cursor's run position now (`None` once forgotten),
    /// where the cursor's run ends (the offset its records end before; for the last run,
    /// its partition's log end now, so records appended meanwhile to a run started
    /// meanwhile are not taken for this one's) and the run after it.
    fn run_bounds(
        &self,
        partitions: &[Arc<Partition>],
        cursor: &TopicCursor,
    ) -> (Option<Run>, u64, Option<Run>) {
        let order = self.order.lock();
        let order = order
            .as_ref()
            .expect("a topic of several partitions has an order");
        match order.run_at(cursor.run_pos) {
            Some((i, run)) => {
                let limit = if run.end_offset == u64::MAX {
                    partitions[run.partition as usize].log().log_end_offset()
                } else {
                    run.end_offset
                };
                (Some(run), limit, order.run(i + 1))
            }
            // Its records were deleted and the run forgotten: the stream goes on at the
            // first run kept.
            None => (None, 0, order.run(order.locate(cursor.run_pos).0)),
        }
    }

    /// Forgets the runs whose records retention or DeleteRecords removed from every
    /// partition they place.
    pub(crate) fn forget_deleted_runs(&self) -> Result<()> {
        let partitions = self.partition_list();
        match self.order.lock().as_mut() {
            Some(order) => {
                order.forget_deleted(|p| partitions[p as usize].log().log_start_offset())
            }
            None => Ok(()),
        }
    }

    /// The sums at the top of the `status` of a topic of several partitions: each
    /// counter of a partition's `status`, added over the partitions, the open
    /// transactions of every partition, and the topic's config warnings.
    pub(crate) fn status_sums(&self) -> String {
        use std::sync::atomic::Ordering::Relaxed;
        let partitions = self.partition_list();
        let sum = |f: &dyn Fn(&Partition) -> u64| partitions.iter().map(|p| f(p)).sum::<u64>();
        let config = self.config();
        let policy = match (config.cleanup_policy.compact, config.cleanup_policy.delete) {
            (true, true) => "compact,delete",
            (true, false) => "compact",
            (false, true) => "delete",
            (false, false) => "",
        };
        let mut out = format!("topic: {}\n", self.core.name);
        let mut line = |k: &str, v: String| out.push_str(&format!("{k}: {v}\n"));
        line(
            "size_bytes",
            sum(&|p| p.log().snapshot().segments.iter().map(|s| s.size()).sum()).to_string(),
        );
        line(
            "segment_count",
            sum(&|p| p.log().snapshot().segments.len() as u64).to_string(),
        );
        line("cleanup_policy", policy.to_string());
        line("stream_bytes", self.stream_len().to_string());
        line(
            "appended_records",
            sum(&|p| p.stats.appended_records.load(Relaxed)).to_string(),
        );
        line(
            "reader_skips",
            sum(&|p| p.stats.reader_skips.load(Relaxed)).to_string(),
        );
        line(
            "segments_deleted_time",
            sum(&|p| p.stats.segments_deleted_time.load(Relaxed)).to_string(),
        );
        line(
            "segments_deleted_size",
            sum(&|p| p.stats.segments_deleted_size.load(Relaxed)).to_string(),
        );
        line(
            "segments_deleted_log_start",
            sum(&|p| p.stats.segments_deleted_log_start.load(Relaxed)).to_string(),
        );
        let poisoned: Vec<String> = partitions
            .iter()
            .filter_map(|p| {
                Some(format!(
                    "{}: {}",
                    p.log().partition(),
                    p.log().poison_reason()?
                ))
            })
            .collect();
        if poisoned.is_empty() {
            line("write_state", "ok".into());
        } else {
            line(
                "write_state",
                format!("refusing writes until remount: {}", poisoned.join("; ")),
            );
        }
        for p in partitions.iter() {
            for txn in p.open_transactions() {
                line("open_transaction", format!("partition={} {txn}", p.index()));
            }
        }
        for warning in self.core.config_warnings() {
            line("config_warning", warning);
        }
        out
    }

    /// The `events` file: recent actions of every partition, newest last.
    pub fn events_text(&self) -> String {
        self.core.events.text()
    }

    /// Makes every record appended so far durable, in every partition, and the order
    /// that places them.
    pub fn sync(&self) -> Result<()> {
        self.partition_list().iter().try_for_each(|p| p.sync())?;
        self.sync_order()
    }

    fn sync_order(&self) -> Result<()> {
        match self.order.lock().as_ref() {
            Some(order) => order.sync(),
            None => Ok(()),
        }
    }

    /// Wall-clock ms of the last append to any partition (mtime of `log`).
    pub(crate) fn modified_ms(&self) -> i64 {
        self.partition_list()
            .iter()
            .map(|p| p.modified_ms())
            .max()
            .unwrap_or(0)
    }

    pub(crate) fn close(&self) -> Result<()> {
        self.save_unsaved();
        if let Some(reason) = self.core.unsaved_overrides.lock().as_ref() {
            tracing::error!(topic = %self.core.name, %reason, "closing with config overrides that could not be saved; they are lost");
        }
        self.partition_list().iter().try_for_each(|p| p.close())?;
        self.sync_order()
    }

    /// Renames every partition directory for deletion (`to` names the one of partition
    /// N), highest partition first, so a failure half way leaves partitions `0..k`,
    /// a topic the next open finds whole; returns the directories to remove.
    pub(crate) fn retire(&self, to: impl Fn(u32) -> PathBuf) -> Result<Vec<PathBuf>> {
        let mut retired = Vec::new();
        for p in self.partition_list().iter().rev() {
            retired.extend(p.log().retire_dir(&to(p.index()))?);
        }
        Ok(retired)
    }
}

/// Where a partition's stream and log end now.
fn partition_end(partition: &Partition) -> PartitionEnd {
    PartitionEnd {
        stream_end: partition.log().stream_end(),
        log_end_offset: partition.log().log_end_offset(),
    }
}

fn partition_ends(partitions: &[Arc<Partition>]) -> Vec<PartitionEnd> {
    partitions.iter().map(|p| partition_end(p)).collect()
}

thread_local! {
    /// A keyed write's batches, their buffers reused from write to write as [`PARSED`]'s
    /// records are.
    static KEYED: std::cell::RefCell<KeyedBuild> = std::cell::RefCell::new(KeyedBuild::default());
}

/// Kafka's rule for a partition count (`ReplicationControlManager`): at least one; and
/// kpfs's bound, which keeps every partition directory name a file name.
pub(crate) fn check_partition_count(count: u32) -> Result<()> {
    if count == 0 || count > MAX_PARTITIONS {
        return Err(EngineError::InvalidPartitionCount { count });
    }
    Ok(())
}
