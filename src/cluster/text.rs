//! The texts a cluster mount shows: `status`, `config`, `.kpfs/groups/`, `.kpfs/metrics`,
//! built from the cluster's answers (metadata, offsets, DescribeConfigs, DescribeGroups,
//! OffsetFetch) in the local mount's layouts, with the engine's renderers where the
//! layout is Kafka's tool's.

use std::fmt::Write;

use rdkafka::admin::{ConfigSource, ResourceSpecifier};
use rdkafka::consumer::Consumer;

use super::{
    admin_options, block_on, broker_error, code_error, Cluster, ClusterPartition, ClusterShared,
    ClusterTopic, Stream, TopicLink, REQUEST_TIMEOUT,
};
use crate::engine::group_view::{self, PartitionLag, MISSING};
use crate::engine::groups::subscription::assigned_partitions;
use crate::engine::groups::{GroupDescription, GroupState, MemberDescription};
use crate::engine::metrics::Family;
use crate::engine::Result;

pub(super) use crate::engine::rejection_line;

/// The header lines of a rendered config file, as the local mount writes them.
const OVERRIDES_HEADER: &str = "# overrides\n";
const DEFAULTS_HEADER: &str = "# defaults\n";

fn source_name(source: &ConfigSource) -> &'static str {
    match source {
        ConfigSource::Unknown => "UNKNOWN",
        ConfigSource::DynamicTopic => "DYNAMIC_TOPIC_CONFIG",
        ConfigSource::DynamicBroker => "DYNAMIC_BROKER_CONFIG",
        ConfigSource::DynamicDefaultBroker => "DYNAMIC_DEFAULT_BROKER_CONFIG",
        ConfigSource::StaticBroker => "STATIC_BROKER_CONFIG",
        ConfigSource::Default => "DEFAULT_CONFIG",
    }
}

impl ClusterShared {
    /// DescribeConfigs of one resource: (name, value, source) in the cluster's order.
    pub(super) fn describe(
        &self,
        resource: ResourceSpecifier<'_>,
    ) -> Result<Vec<(String, Option<String>, ConfigSource)>> {
        let action = || format!("describe the configs of {resource:?}");
        let results = block_on(self.admin.describe_configs([&resource], &admin_options()))
            .map_err(|e| broker_error(action(), &e))?;
        let mut entries = Vec::new();
        for result in results {
            let resource = result.map_err(|code| code_error(action(), code))?;
            for entry in resource.entries {
                let value = if entry.is_sensitive {
                    None
                } else {
                    entry.value
                };
                entries.push((entry.name, value, entry.source));
            }
        }
        Ok(entries)
    }
}

/// A config file's text: the overrides (`overridden` sources) as `key=value` lines, then
/// every other config as a comment with its value and source; `own` are kpfs's own lines
/// (the line format of a topic) added to the overrides.
pub(super) fn config_file(
    entries: &[(String, Option<String>, ConfigSource)],
    overridden: &[ConfigSource],
    own: &[(String, String)],
) -> String {
    let mut out = String::from(OVERRIDES_HEADER);
    for (name, value) in own {
        let _ = writeln!(out, "{name}={value}");
    }
    let is_override = |source: &ConfigSource| overridden.contains(source);
    for (name, value, _) in entries.iter().filter(|(_, _, s)| is_override(s)) {
        let _ = writeln!(out, "{name}={}", value.as_deref().unwrap_or_default());
    }
    out.push_str(DEFAULTS_HEADER);
    for (name, value, source) in entries.iter().filter(|(_, _, s)| !is_override(s)) {
        let from = source_name(source);
        match value {
            Some(value) => {
                let _ = writeln!(out, "# {name}={value} ({from})");
            }
            None => {
                let _ = writeln!(out, "# {name} is unset ({from})");
            }
        }
    }
    out
}

/// The header of the partition table of `status`.
const PARTITION_HEADER: &str =
    "partition  leader  replicas  isr  log_start_offset  log_end_offset  log_bytes_measured\n";

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
        out.push('\n');
        out.push_str(PARTITION_HEADER);
        let list = |ids: &[i32]| ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
        for p in topic.partitions() {
            if only.is_some_and(|only| only as i32 != p.id()) {
                continue;
            }
            let (start, end) = self
                .shared
                .admin
                .inner()
                .fetch_watermarks(name, p.id(), REQUEST_TIMEOUT)
                .map_or((MISSING.to_string(), MISSING.to_string()), |(l, h)| {
                    (l.to_string(), h.to_string())
                });
            let measured = self.stream_len(Stream::Partition(p.id() as u32));
            let _ = writeln!(
                out,
                "{}  {}  {}  {}  {start}  {end}  {measured}",
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

    /// `config`: the cluster's DescribeConfigs of the topic, and the line format.
    pub(crate) fn config_text(&self) -> String {
        let link = &self.link;
        let format = link.format.read().clone();
        match link.shared.describe(ResourceSpecifier::Topic(&link.name)) {
            Ok(entries) => {
                config_file(&entries, &[ConfigSource::DynamicTopic], &format.own_lines())
            }
            Err(e) => format!("# the cluster did not answer: {e}\n"),
        }
    }
}

impl Cluster {
    /// `.kpfs/config`: the configs of the broker the metadata answer came from.
    pub(crate) fn broker_config_text(&self) -> String {
        let broker = self
            .shared
            .admin
            .inner()
            .fetch_metadata(None, REQUEST_TIMEOUT)
            .map(|m| m.orig_broker_id());
        let described = broker
            .map_err(|e| broker_error("describe the brokers".to_string(), &e))
            .and_then(|id| self.shared.describe(ResourceSpecifier::Broker(id)));
        match described {
            Ok(entries) => config_file(
                &entries,
                &[
                    ConfigSource::DynamicBroker,
                    ConfigSource::DynamicDefaultBroker,
                ],
                &[],
            ),
            Err(e) => format!("# the cluster did not answer: {e}\n"),
        }
    }

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
    /// start and end offsets, as its brokers report them) and the bytes of `log` measured.
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
        let mut measured = Family::new(
            "kpfs_cluster_log_bytes_measured",
            "gauge",
            "Bytes of the partition's `log` stream this mount has learned the positions of.",
        );
        let topics: Vec<_> = self.topics.lock().values().cloned().collect();
        for topic in topics {
            let name = topic.name();
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
                measured.add(&labels, topic.link.stream_len(Stream::Partition(p)));
            }
        }
        let mut out = String::new();
        for family in [start, end, measured] {
            family.render(&mut out);
        }
        out
    }
}
