//! The texts a cluster mount shows: `status`, `config`, `.kpfs/groups/`, `.kpfs/metrics`,
//! built from the cluster's answers (metadata, offsets, DescribeConfigs, DescribeGroups,
//! OffsetFetch) in the local mount's layouts, with the engine's renderers where the
//! layout is Kafka's tool's.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write;

use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::{
    DescribeLogDirsRequest, DescribeTransactionsRequest, FindCoordinatorRequest,
    ListTransactionsRequest, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::metadata::MetadataPartition;

use rdkafka::consumer::Consumer;

use super::{
    broker_error, Cluster, ClusterPartition, ClusterShared, ClusterTopic, Stream, TopicLink,
    REQUEST_TIMEOUT,
};
use crate::engine::group_view::{self, PartitionLag, MISSING};
use crate::engine::groups::subscription::assigned_partitions;
use crate::engine::groups::{GroupDescription, GroupState, MemberDescription};
use crate::engine::metrics::Family;
use crate::engine::transactions::{TxnDescription, TxnStatus};
use crate::engine::txn_view::describe_table;
use crate::engine::Result;

pub(super) use crate::engine::rejection_line;

/// The header of the partition table of `status`.
const PARTITION_HEADER: &str = "partition  leader  replicas  isr  log_start_offset  log_end_offset  size_bytes  log_bytes_measured\n";

/// What the brokers' log directories hold: each replica's bytes by (topic, broker,
/// partition), and the brokers that did not say, with why.
struct ReplicaSizes {
    bytes: HashMap<(String, i32, i32), i64>,
    unanswered: Vec<String>,
}

impl ReplicaSizes {
    /// The bytes of `topic`'s partition on its leader.
    fn of_leader(&self, topic: &str, partition: &MetadataPartition) -> Option<i64> {
        self.bytes
            .get(&(topic.to_string(), partition.leader(), partition.id()))
            .copied()
    }
}

impl ClusterShared {
    /// DescribeLogDirs on every broker (what `kafka-log-dirs.sh --describe` asks), of
    /// `only`'s partitions or of every topic: the size of each replica, a future replica
    /// (one moving between directories) left out.
    fn replica_sizes(&self, only: Option<(&str, &[i32])>) -> ReplicaSizes {
        let mut sizes = ReplicaSizes {
            bytes: HashMap::new(),
            unanswered: Vec::new(),
        };
        let brokers = match self.brokers() {
            Ok(brokers) => brokers,
            Err(e) => {
                sizes.unanswered.push(e.to_string());
                return sizes;
            }
        };
        let request =
            DescribeLogDirsRequest::default().with_topics(only.map(|(topic, partitions)| {
                vec![DescribableLogDirTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                    .with_partitions(partitions.to_vec())]
            }));
        for (id, address) in brokers {
            let answer = self.direct.connect(&address).and_then(|mut connection| {
                let answer = connection.call(&request)?;
                connection.check("describe the log dirs", answer.error_code, None)?;
                Ok(answer)
            });
            let answer = match answer {
                Ok(answer) => answer,
                Err(e) => {
                    sizes.unanswered.push(format!("broker {id}: {e}"));
                    continue;
                }
            };
            for dir in answer.results.iter().filter(|dir| dir.error_code == 0) {
                for t in &dir.topics {
                    for p in t.partitions.iter().filter(|p| !p.is_future_key) {
                        let replica = (t.name.0.to_string(), id, p.partition_index);
                        *sizes.bytes.entry(replica).or_default() += p.partition_size;
                    }
                }
            }
        }
        sizes
    }
}

impl TopicLink {
    /// The status text's head and a table line for each partition `only` lets through.
    fn status(&self, only: Option<u32>) -> String {
        let name = &self.name;
        let mut out = format!("topic: {name}\nbackend: Kafka cluster\n");
        let metadata = self
            .shared
            .admin
            .inner()
            .fetch_metadata(Some(name), REQUEST_TIMEOUT);
        let metadata = match metadata {
            Ok(metadata) => metadata,
            Err(e) => {
                let _ = writeln!(
                    out,
                    "error: {}",
                    broker_error(format!("describe {name}"), &e)
                );
                return out;
            }
        };
        let Some(topic) = metadata.topics().iter().find(|t| t.name() == name) else {
            return out;
        };
        let _ = writeln!(out, "partitions: {}", topic.partitions().len());
        if only.is_none() {
            let _ = writeln!(
                out,
                "log bytes measured: {}",
                self.stream_len(Stream::Topic)
            );
        }
        let shown: Vec<i32> = topic
            .partitions()
            .iter()
            .map(|p| p.id())
            .filter(|&id| only.is_none_or(|only| only as i32 == id))
            .collect();
        let sizes = self.shared.replica_sizes(Some((name, &shown)));
        let leader_size = |p: &MetadataPartition| sizes.of_leader(name, p);
        let total: Option<i64> = topic
            .partitions()
            .iter()
            .filter(|p| shown.contains(&p.id()))
            .map(leader_size)
            .sum();
        let _ = writeln!(
            out,
            "size_bytes: {}",
            total.map_or(MISSING.to_string(), |total| total.to_string())
        );
        for reason in &sizes.unanswered {
            let _ = writeln!(out, "size_bytes_unknown: {reason}");
        }
        out.push('\n');
        out.push_str(PARTITION_HEADER);
        let list = |ids: &[i32]| ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
        for p in topic
            .partitions()
            .iter()
            .filter(|p| shown.contains(&p.id()))
        {
            let (start, end) = self
                .shared
                .admin
                .inner()
                .fetch_watermarks(name, p.id(), REQUEST_TIMEOUT)
                .map_or((MISSING.to_string(), MISSING.to_string()), |(l, h)| {
                    (l.to_string(), h.to_string())
                });
            let measured = self.stream_len(Stream::Partition(p.id() as u32));
            let size = leader_size(p).map_or(MISSING.to_string(), |size| size.to_string());
            let _ = writeln!(
                out,
                "{}  {}  {}  {}  {start}  {end}  {size}  {measured}",
                p.id(),
                p.leader(),
                list(p.replicas()),
                list(p.isr())
            );
        }
        out
    }
}

impl ClusterPartition {
    /// `partitions/N/status`: the topic's head and this partition's line.
    pub(crate) fn status_text(&self) -> String {
        self.link.status(Some(self.index))
    }
}

impl ClusterTopic {
    /// `status`: the topic, then a line per partition with its leader, replicas, in-sync
    /// replicas, log start and end offsets and the bytes of `log` the mount has measured.
    pub(crate) fn status_text(&self) -> String {
        self.link.status(None)
    }
}

impl Cluster {
    pub(crate) fn group_ids(&self) -> Vec<String> {
        match self
            .shared
            .admin
            .inner()
            .fetch_group_list(None, REQUEST_TIMEOUT)
        {
            Ok(list) => {
                let mut ids: Vec<String> =
                    list.groups().iter().map(|g| g.name().to_string()).collect();
                ids.sort();
                ids
            }
            Err(_) => Vec::new(),
        }
    }

    fn describe_group(&self, group: &str) -> Option<GroupDescription> {
        let list = self
            .shared
            .admin
            .inner()
            .fetch_group_list(Some(group), REQUEST_TIMEOUT)
            .ok()?;
        let info = list.groups().iter().find(|g| g.name() == group)?;
        let state = match info.state() {
            "Empty" => GroupState::Empty,
            "PreparingRebalance" => GroupState::PreparingRebalance,
            "CompletingRebalance" => GroupState::CompletingRebalance,
            "Stable" => GroupState::Stable,
            _ => return None,
        };
        let members = info
            .members()
            .iter()
            .map(|m| {
                let assignment = m.assignment().unwrap_or_default().to_vec();
                MemberDescription {
                    member_id: m.id().to_string(),
                    group_instance_id: None,
                    client_id: m.client_id().to_string(),
                    client_host: m.client_host().to_string(),
                    metadata: m.metadata().unwrap_or_default().to_vec(),
                    assigned: assigned_partitions(&assignment),
                    assignment,
                    session_timeout_ms: 0,
                    rebalance_timeout_ms: 0,
                }
            })
            .collect();
        Some(GroupDescription {
            group_id: group.to_string(),
            state,
            protocol_type: info.protocol_type().to_string(),
            protocol: info.protocol().to_string(),
            generation_id: -1,
            leader: None,
            members,
            state_since_ms: 0,
        })
    }

    pub(crate) fn group_state_text(&self, group: &str) -> Option<String> {
        Some(group_view::state_table(
            &self.describe_group(group)?,
            MISSING,
        ))
    }

    pub(crate) fn group_members_text(&self, group: &str) -> Option<String> {
        Some(group_view::members_table(&self.describe_group(group)?))
    }

    /// `offsets`: the group's committed offsets (OffsetFetch of every partition of every
    /// topic) beside the partitions' ends.
    pub(crate) fn group_offsets_text(&self, group: &str) -> Option<String> {
        let description = self.describe_group(group)?;
        let consumer: rdkafka::consumer::BaseConsumer = self
            .shared
            .settings
            .config()
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .create()
            .ok()?;
        let metadata = self
            .shared
            .admin
            .inner()
            .fetch_metadata(None, REQUEST_TIMEOUT)
            .ok()?;
        let mut all = rdkafka::TopicPartitionList::new();
        for topic in metadata.topics() {
            for p in topic.partitions() {
                all.add_partition(topic.name(), p.id());
            }
        }
        let committed = consumer.committed_offsets(all, REQUEST_TIMEOUT).ok()?;
        let mut lags = Vec::new();
        for element in committed.elements() {
            if let Some(offset) = element.offset().to_raw().filter(|&o| o >= 0) {
                lags.push(PartitionLag {
                    topic: element.topic().to_string(),
                    partition: element.partition(),
                    committed: offset,
                    log_end_offset: self.high_watermark(element.topic(), element.partition()),
                });
            }
        }
        Some(group_view::offsets_table(&description, &lags, |t, p| {
            self.high_watermark(t, p)
        }))
    }

    fn high_watermark(&self, topic: &str, partition: i32) -> Option<i64> {
        self.shared
            .admin
            .inner()
            .fetch_watermarks(topic, partition, REQUEST_TIMEOUT)
            .ok()
            .map(|(_, high)| high)
    }

    /// `.kpfs/metrics`: the local mount's families a cluster answers (each partition's log
    /// start and end offsets and its leader's size, as its brokers report them) and the
    /// bytes of `log` measured.
    pub(crate) fn metrics_text(&self) -> String {
        let mut start = Family::new(
            "kpfs_log_start_offset",
            "gauge",
            "First offset still in the log (kafka.log:type=Log,name=LogStartOffset), as the cluster reports it.",
        );
        let mut end = Family::new(
            "kpfs_log_end_offset",
            "gauge",
            "The high watermark (kafka.log:type=Log,name=LogEndOffset of the leader, less what is not replicated yet), as the cluster reports it.",
        );
        let mut size = Family::new(
            "kpfs_log_size_bytes",
            "gauge",
            "Bytes of the partition's leader replica on its broker's disk (kafka.log:type=Log,name=Size), as DescribeLogDirs reports it.",
        );
        let mut measured = Family::new(
            "kpfs_cluster_log_bytes_measured",
            "gauge",
            "Bytes of the partition's `log` stream this mount has learned the positions of.",
        );
        let sizes = self.shared.replica_sizes(None);
        let leaders = self
            .shared
            .admin
            .inner()
            .fetch_metadata(None, REQUEST_TIMEOUT)
            .ok();
        let topics: Vec<_> = self.topics.lock().values().cloned().collect();
        for topic in topics {
            let name = topic.name();
            let described = leaders
                .as_ref()
                .and_then(|m| m.topics().iter().find(|t| t.name() == name));
            for p in 0..topic.partition_count() {
                let partition = p.to_string();
                let labels = [("topic", name), ("partition", partition.as_str())];
                let marks =
                    self.shared
                        .admin
                        .inner()
                        .fetch_watermarks(name, p as i32, REQUEST_TIMEOUT);
                if let Ok((low, high)) = marks {
                    start.add(&labels, low);
                    end.add(&labels, high);
                }
                let metadata =
                    described.and_then(|t| t.partitions().iter().find(|m| m.id() == p as i32));
                if let Some(bytes) = metadata.and_then(|m| sizes.of_leader(name, m)) {
                    size.add(&labels, bytes);
                }
                measured.add(&labels, topic.link.stream_len(Stream::Partition(p)));
            }
        }
        let mut out = String::new();
        for family in [start, end, size, measured] {
            family.render(&mut out);
        }
        out
    }
}

/// `kafka-transactions.sh`'s key type of FindCoordinator for a transactional id.
const TRANSACTION_COORDINATOR: i8 = 1;
/// FindCoordinator's first version with a list of keys (KIP-699).
const BATCHED_FIND_COORDINATOR: i16 = 4;
/// DescribeTransactions' answer for an id its coordinator does not know.
const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;

impl Cluster {
    /// `.kpfs/transactions/`: the transactional ids each broker's coordinator lists
    /// (ListTransactions of every state, as `kafka-transactions.sh list`), in name order;
    /// a broker that does not answer lists nothing.
    pub(crate) fn transactional_ids(&self) -> Vec<String> {
        let Ok(brokers) = self.shared.brokers() else {
            return Vec::new();
        };
        let mut ids = BTreeSet::new();
        for address in brokers.values() {
            let listed = self
                .shared
                .direct
                .connect(address)
                .and_then(|mut connection| connection.call(&ListTransactionsRequest::default()));
            if let Some(answer) = listed.ok().filter(|answer| answer.error_code == 0) {
                ids.extend(
                    answer
                        .transaction_states
                        .into_iter()
                        .map(|state| state.transactional_id.0.to_string()),
                );
            }
        }
        ids.into_iter().collect()
    }

    /// `.kpfs/transactions/ID`: the table `kafka-transactions.sh describe` prints, from the
    /// id's coordinator (FindCoordinator, then DescribeTransactions there); `None` for an id
    /// the coordinator does not know, the cluster's error as a comment when it fails.
    pub(crate) fn transaction_text(&self, transactional_id: &str) -> Option<String> {
        self.describe_transaction(transactional_id)
            .unwrap_or_else(|e| Some(format!("# the cluster did not answer: {e}\n")))
    }

    fn describe_transaction(&self, transactional_id: &str) -> Result<Option<String>> {
        let mut any = self.shared.connect_any()?;
        let key = StrBytes::from_string(transactional_id.to_string());
        let version = any.version::<FindCoordinatorRequest>()?;
        let request = FindCoordinatorRequest::default().with_key_type(TRANSACTION_COORDINATOR);
        let request = if version >= BATCHED_FIND_COORDINATOR {
            request.with_coordinator_keys(vec![key.clone()])
        } else {
            request.with_key(key.clone())
        };
        let found = any.call_at(&request, version)?;
        // Before version 4 the answer is its top-level fields, from then on a list.
        let (code, message, node, host, port) = match found.coordinators.first() {
            Some(c) => (c.error_code, &c.error_message, c.node_id.0, &c.host, c.port),
            None => (
                found.error_code,
                &found.error_message,
                found.node_id.0,
                &found.host,
                found.port,
            ),
        };
        any.check("find the coordinator", code, message.as_ref())?;
        let mut coordinator = self.shared.direct.connect(&format!("{host}:{port}"))?;
        let request = DescribeTransactionsRequest::default()
            .with_transactional_ids(vec![TransactionalId(key)]);
        let answer = coordinator.call(&request)?;
        let Some(state) = answer.transaction_states.into_iter().next() else {
            return Ok(None);
        };
        if state.error_code == TRANSACTIONAL_ID_NOT_FOUND {
            return Ok(None);
        }
        coordinator.check("describe the transaction", state.error_code, None)?;
        let description = TxnDescription {
            transactional_id: transactional_id.to_string(),
            // The tool's `TransactionState.parse`: a name it does not know is Unknown.
            state: TxnStatus::from_name(&state.transaction_state).unwrap_or(TxnStatus::Dead),
            timeout_ms: state.transaction_timeout_ms,
            start_ms: state.transaction_start_time_ms,
            producer_id: state.producer_id.0,
            producer_epoch: state.producer_epoch,
            partitions: state
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|&p| (t.topic.0.to_string(), p)))
                .collect(),
        };
        Ok(Some(describe_table(
            &description,
            node,
            self.shared.clock.now_ms(),
        )))
    }
}
