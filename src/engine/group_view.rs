//! What the mount shows of consumer groups: the three tables of
//! `kafka-consumer-groups.sh --describe --group GROUP` (`--state`, `--members --verbose`,
//! `--offsets`; Kafka's `ConsumerGroupCommand`, column for column and width for width) for
//! `.kpfs/groups/GROUP/`, and the lag that the offsets table, `.kpfs/metrics` and a topic's
//! `status` show: the partition's log end offset minus the group's committed offset, as
//! that command's LAG column computes it.

use std::fmt::Write;

use super::groups::{GroupDescription, MemberDescription};
use super::{Engine, Partition, Topic};

/// `ConsumerGroupCommand.MISSING_COLUMN_VALUE`.
pub(crate) const MISSING: &str = "-";
/// The narrowest a variable-width column of the tables gets (`maxGroupLen = 15` ...).
const MIN_COLUMN: usize = 15;

/// One committed offset of a group, beside the partition's log end offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PartitionLag {
    pub(crate) topic: String,
    pub(crate) partition: i32,
    pub(crate) committed: i64,
    /// `None` when the partition does not exist (its topic was deleted): Kafka's
    /// `Unknown` log offset.
    pub(crate) log_end_offset: Option<i64>,
}

impl PartitionLag {
    /// `ConsumerGroupCommand.getLag`: none for a committed -1 or an unknown log end; a
    /// committed offset past the log end (records deleted and the topic recreated) gives
    /// a negative lag, as Kafka prints it.
    pub(crate) fn lag(&self) -> Option<i64> {
        lag(Some(self.committed), self.log_end_offset)
    }
}

fn lag(committed: Option<i64>, log_end_offset: Option<i64>) -> Option<i64> {
    let committed = committed.filter(|&c| c != -1)?;
    log_end_offset.map(|end| end - committed)
}

impl Engine {
    /// The log end offset of a partition, `None` if it does not exist.
    fn partition_end(&self, topic: &str, partition: i32) -> Option<i64> {
        let partition = self
            .topic(topic)?
            .partition(u32::try_from(partition).ok()?)?;
        Some(i64::try_from(partition.log().log_end_offset()).unwrap_or(i64::MAX))
    }

    /// Every committed offset of `group` with its partition's log end offset, by topic
    /// and partition; `None` for an unknown group.
    pub(crate) fn group_lags(&self, group: &str) -> Option<Vec<PartitionLag>> {
        let mut committed = self.groups().committed_offsets(group)?;
        committed.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        Some(
            committed
                .into_iter()
                .map(|c| PartitionLag {
                    log_end_offset: self.partition_end(&c.topic, c.partition),
                    topic: c.topic,
                    partition: c.partition,
                    committed: c.offset,
                })
                .collect(),
        )
    }

    /// A partition's `status` file (`TOPIC/partitions/N/status`, and `TOPIC/status` of a
    /// topic of one partition), with a `consumer_group` line for every group that
    /// committed an offset of it: the offset and the lag behind the log end the file
    /// shows.
    pub fn partition_status_text(&self, partition: &Partition) -> String {
        let index = i32::try_from(partition.index()).unwrap_or(i32::MAX);
        let committed = self
            .groups()
            .committed_to_partition(partition.name(), index);
        partition.status_text_with(|log_end| {
            let end = i64::try_from(log_end).unwrap_or(i64::MAX);
            committed
                .into_iter()
                .map(|(group, offset)| {
                    let lag =
                        lag(Some(offset), Some(end)).map_or(MISSING.into(), |l| l.to_string());
                    (
                        "consumer_group",
                        format!("{group} committed_offset={offset} lag={lag}"),
                    )
                })
                .collect()
        })
    }

    /// A topic's `status` file. A topic of one partition shows its partition's (as kpfs
    /// always has); one of several sums them, then has a line per partition, then the
    /// consumer groups' offsets and lag per partition.
    pub fn topic_status_text(&self, topic: &Topic) -> String {
        let partitions = topic.partitions();
        let mut out = if partitions.len() == 1 {
            self.partition_status_text(&partitions[0])
        } else {
            topic.status_sums()
        };
        out.push_str(&format!("partitions: {}\n", partitions.len()));
        for p in partitions.iter() {
            out.push_str(&format!("partition: {}\n", p.status_summary()));
        }
        if partitions.len() > 1 {
            for p in partitions.iter() {
                let index = i32::try_from(p.index()).unwrap_or(i32::MAX);
                let end = i64::try_from(p.log().log_end_offset()).unwrap_or(i64::MAX);
                for (group, offset) in self.groups().committed_to_partition(topic.name(), index) {
                    let lag =
                        lag(Some(offset), Some(end)).map_or(MISSING.into(), |l| l.to_string());
                    out.push_str(&format!(
                        "consumer_group: {group} partition={index} committed_offset={offset} lag={lag}\n"
                    ));
                }
            }
        }
        out
    }

    /// The group's entry as `.kpfs/groups/GROUP/`, or `None` when there is no such group.
    fn described_group(&self, group: &str) -> Option<GroupDescription> {
        let description = self.groups().describe_group(group);
        (description.state != super::groups::GroupState::Dead).then_some(description)
    }

    /// `.kpfs/groups/GROUP/state`: `--describe --state`'s table, then the generation and
    /// the protocol type, which kpfs adds as two more columns.
    pub(crate) fn group_state_text(&self, group: &str) -> Option<String> {
        let d = self.described_group(group)?;
        Some(state_table(&d, &self.coordinator_text()))
    }

    /// `.kpfs/groups/GROUP/members`: `--describe --members --verbose`'s table.
    pub(crate) fn group_members_text(&self, group: &str) -> Option<String> {
        Some(members_table(&self.described_group(group)?))
    }

    /// `.kpfs/groups/GROUP/offsets`: `--describe --offsets`'s table.
    pub(crate) fn group_offsets_text(&self, group: &str) -> Option<String> {
        let d = self.described_group(group)?;
        let lags = self.group_lags(group).unwrap_or_default();
        Some(offsets_table(&d, &lags, |t, p| self.partition_end(t, p)))
    }

    /// The COORDINATOR (ID) column: `host:port  (node id)` as the Kafka listener
    /// advertises itself (FindCoordinator's answer); `-` on a mount without a listener.
    fn coordinator_text(&self) -> String {
        let Some(settings) = self.listener_settings() else {
            return MISSING.to_string();
        };
        let host = settings
            .advertised_host()
            .unwrap_or_else(|e| format!("({e})"));
        format!(
            "{host}:{}  ({})",
            settings.advertised.port, settings.node_id
        )
    }
}

/// Java's `%-Ns`: `text`, then spaces up to `width` characters.
fn pad(out: &mut String, text: &str, width: usize) {
    let _ = write!(out, "{text:<width$}");
}

/// One row of a table: every cell but the last padded to its width and followed by a
/// space, as Kafka's format strings (`"%-15s %-15s %s"`) lay them out.
fn row(out: &mut String, cells: &[(&str, usize)], last: &str) {
    for (text, width) in cells {
        pad(out, text, *width);
        out.push(' ');
    }
    out.push_str(last);
    out.push('\n');
}

pub(crate) fn state_table(d: &GroupDescription, coordinator: &str) -> String {
    // Kafka sizes the GROUP column by the coordinator's text and the coordinator's
    // column at 25 (`printStates`); the same here, so the columns fall where they do
    // there.
    let first = coordinator.chars().count().max(25);
    let generation = d.generation_id.to_string();
    let members = d.members.len().to_string();
    let mut out = String::new();
    for (group, coordinator, strategy, state, members, generation, protocol_type) in [
        (
            "GROUP",
            "COORDINATOR (ID)",
            "ASSIGNMENT-STRATEGY",
            "STATE",
            "#MEMBERS",
            "GENERATION",
            "PROTOCOL-TYPE",
        ),
        (
            d.group_id.as_str(),
            coordinator,
            d.protocol.as_str(),
            d.state.name(),
            members.as_str(),
            generation.as_str(),
            d.protocol_type.as_str(),
        ),
    ] {
        row(
            &mut out,
            &[
                (group, first),
                (coordinator, 25),
                (strategy, 20),
                (state, 15),
                (members, 10),
                (generation, 12),
            ],
            protocol_type,
        );
    }
    out
}

/// A member's decoded assignment (empty when it is not Kafka's consumer protocol).
fn assigned(member: &MemberDescription) -> &[(String, Vec<i32>)] {
    member.assigned.as_deref().unwrap_or_default()
}

/// The ASSIGNMENT column: `topic(0,1), other(0)`, as Kafka's tool printed it up to 3.7
/// (`ConsumerGroupCommand.scala`); its Java rewrite prints `(0,1), (0)` without the
/// topics, which with one partition per topic would say nothing.
fn assignment_text(member: &MemberDescription) -> String {
    let mut topics: Vec<String> = assigned(member)
        .iter()
        .filter(|(_, partitions)| !partitions.is_empty())
        .map(|(topic, partitions)| {
            let mut partitions: Vec<String> = partitions.iter().map(i32::to_string).collect();
            // Kafka sorts them as strings.
            partitions.sort();
            format!("{topic}({})", partitions.join(","))
        })
        .collect();
    if topics.is_empty() {
        return MISSING.to_string();
    }
    topics.sort();
    topics.join(", ")
}

fn partition_count(member: &MemberDescription) -> usize {
    assigned(member).iter().map(|(_, p)| p.len()).sum()
}

pub(crate) fn members_table(d: &GroupDescription) -> String {
    let width = |least: usize, of: &dyn Fn(&MemberDescription) -> usize| {
        d.members.iter().map(of).fold(least, usize::max)
    };
    let group = width(MIN_COLUMN, &|_| d.group_id.chars().count());
    let consumer = width(MIN_COLUMN, &|m| m.member_id.chars().count());
    let instance = width(17, &|m| {
        m.group_instance_id.as_deref().unwrap_or("").chars().count()
    });
    let host = width(MIN_COLUMN, &|m| m.client_host.chars().count());
    let client = width(MIN_COLUMN, &|m| m.client_id.chars().count());
    // GROUP-INSTANCE-ID only when a member has one, as Kafka does.
    let with_instance = d.members.iter().any(|m| {
        m.group_instance_id
            .as_deref()
            .is_some_and(|i| !i.is_empty())
    });
    let line = |out: &mut String, cells: [&str; 6], last: &str| {
        let mut widths = vec![(cells[0], group), (cells[1], consumer)];
        if with_instance {
            widths.push((cells[2], instance));
        }
        widths.extend([(cells[3], host), (cells[4], client), (cells[5], 15)]);
        row(out, &widths, last);
    };
    let mut out = String::new();
    line(
        &mut out,
        [
            "GROUP",
            "CONSUMER-ID",
            "GROUP-INSTANCE-ID",
            "HOST",
            "CLIENT-ID",
            "#PARTITIONS",
        ],
        "ASSIGNMENT",
    );
    for m in &d.members {
        line(
            &mut out,
            [
                &d.group_id,
                &m.member_id,
                m.group_instance_id.as_deref().unwrap_or(""),
                &m.client_host,
                &m.client_id,
                &partition_count(m).to_string(),
            ],
            &assignment_text(m),
        );
    }
    out
}

/// One row of the offsets table (Kafka's `PartitionAssignmentState`).
struct OffsetRow<'a> {
    topic: &'a str,
    partition: i32,
    committed: Option<i64>,
    log_end_offset: Option<i64>,
    member: Option<&'a MemberDescription>,
}

pub(crate) fn offsets_table(
    d: &GroupDescription,
    lags: &[PartitionLag],
    partition_end: impl Fn(&str, i32) -> Option<i64>,
) -> String {
    let committed_of = |topic: &str, partition: i32| {
        lags.iter()
            .find(|l| l.topic == topic && l.partition == partition)
            .map(|l| l.committed)
    };
    // Kafka's `collectGroupsOffsets`: the members with partitions, most partitions first,
    // each partition with the committed offset if any; then the committed partitions no
    // member has, without a consumer.
    let mut members: Vec<&MemberDescription> = d
        .members
        .iter()
        .filter(|m| partition_count(m) > 0)
        .collect();
    members.sort_by_key(|m| std::cmp::Reverse(partition_count(m)));
    let mut rows = Vec::new();
    for member in members {
        let mut partitions: Vec<(&str, i32)> = assigned(member)
            .iter()
            .flat_map(|(t, ps)| ps.iter().map(move |&p| (t.as_str(), p)))
            .collect();
        partitions.sort();
        rows.extend(partitions.into_iter().map(|(topic, partition)| OffsetRow {
            topic,
            partition,
            committed: committed_of(topic, partition),
            log_end_offset: partition_end(topic, partition),
            member: Some(member),
        }));
    }
    for l in lags {
        let assigned = rows
            .iter()
            .any(|r| r.member.is_some() && r.topic == l.topic && r.partition == l.partition);
        if !assigned {
            rows.push(OffsetRow {
                topic: &l.topic,
                partition: l.partition,
                committed: Some(l.committed),
                log_end_offset: l.log_end_offset,
                member: None,
            });
        }
    }
    let width = |of: &dyn Fn(&OffsetRow) -> usize| rows.iter().map(of).fold(MIN_COLUMN, usize::max);
    let member_text = |r: &OffsetRow, of: fn(&MemberDescription) -> &str| -> String {
        r.member.map_or(MISSING, of).to_string()
    };
    let group = width(&|_| d.group_id.chars().count());
    let topic = width(&|r| r.topic.chars().count());
    let consumer = width(&|r| member_text(r, |m| &m.member_id).chars().count());
    let host = width(&|r| member_text(r, |m| &m.client_host).chars().count());
    let line = |out: &mut String, cells: [&str; 8], last: &str| {
        row(
            out,
            &[
                (cells[0], group),
                (cells[1], topic),
                (cells[2], 10),
                (cells[3], 15),
                (cells[4], 15),
                (cells[5], 15),
                (cells[6], consumer),
                (cells[7], host),
            ],
            last,
        );
    };
    let mut out = String::new();
    line(
        &mut out,
        [
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
        ],
        "CLIENT-ID",
    );
    let or_missing = |v: Option<i64>| v.map_or(MISSING.to_string(), |v| v.to_string());
    for r in &rows {
        line(
            &mut out,
            [
                &d.group_id,
                r.topic,
                &r.partition.to_string(),
                &or_missing(r.committed),
                &or_missing(r.log_end_offset),
                &or_missing(lag(r.committed, r.log_end_offset)),
                &member_text(r, |m| &m.member_id),
                &member_text(r, |m| &m.client_host),
            ],
            &member_text(r, |m| &m.client_id),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::groups::GroupState;

    fn member(
        id: &str,
        host: &str,
        client: &str,
        assigned: &[(&str, &[i32])],
    ) -> MemberDescription {
        MemberDescription {
            member_id: id.into(),
            group_instance_id: None,
            client_id: client.into(),
            client_host: host.into(),
            metadata: Vec::new(),
            assignment: Vec::new(),
            assigned: Some(
                assigned
                    .iter()
                    .map(|(t, ps)| (t.to_string(), ps.to_vec()))
                    .collect(),
            ),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 10_000,
        }
    }

    fn group(members: Vec<MemberDescription>) -> GroupDescription {
        GroupDescription {
            group_id: "g".into(),
            state: GroupState::Stable,
            protocol_type: "consumer".into(),
            protocol: "range".into(),
            generation_id: 3,
            leader: members.first().map(|m| m.member_id.clone()),
            members,
            state_since_ms: 0,
        }
    }

    #[test]
    fn the_state_table_is_kafkas_with_two_more_columns() {
        let d = group(vec![member("m1", "/127.0.0.1", "c1", &[])]);
        let text = state_table(&d, "localhost:9092  (1)");
        let lines: Vec<&str> = text.lines().collect();
        // Kafka's "%-25s %-25s %-20s %-15s %s", then kpfs's columns.
        assert_eq!(
            lines[0],
            format!(
                "{:<25} {:<25} {:<20} {:<15} {:<10} {:<12} PROTOCOL-TYPE",
                "GROUP",
                "COORDINATOR (ID)",
                "ASSIGNMENT-STRATEGY",
                "STATE",
                "#MEMBERS",
                "GENERATION"
            )
        );
        assert_eq!(
            lines[1],
            format!(
                "{:<25} {:<25} {:<20} {:<15} {:<10} {:<12} consumer",
                "g", "localhost:9092  (1)", "range", "Stable", "1", "3"
            )
        );
    }

    #[test]
    fn members_show_their_assignment_by_topic_and_the_instance_id_only_when_set() {
        let mut d = group(vec![
            member("m1", "/127.0.0.1", "c1", &[("b", &[0]), ("a", &[0])]),
            member("m2", "/127.0.0.1", "c2", &[]),
        ]);
        let text = members_table(&d);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            format!(
                "{:<15} {:<15} {:<15} {:<15} {:<15} ASSIGNMENT",
                "GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"
            )
        );
        assert!(
            lines[1].ends_with("2               a(0), b(0)"),
            "{}",
            lines[1]
        );
        assert!(lines[2].ends_with("0               -"), "{}", lines[2]);
        d.members[1].group_instance_id = Some("static-1".into());
        let text = members_table(&d);
        assert!(text.starts_with(&format!(
            "{:<15} {:<15} {:<17} ",
            "GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID"
        )));
        assert!(text.contains(" static-1          /127.0.0.1 "), "{text}");
    }

    #[test]
    fn offsets_list_assigned_partitions_then_the_committed_ones_nobody_has() {
        let d = group(vec![
            member("m1", "/127.0.0.1", "c1", &[("t", &[0])]),
            member("m2", "/127.0.0.2", "c2", &[("u", &[0]), ("v", &[0])]),
        ]);
        let lags = vec![
            PartitionLag {
                topic: "gone".into(),
                partition: 0,
                committed: 4,
                log_end_offset: None,
            },
            PartitionLag {
                topic: "t".into(),
                partition: 0,
                committed: 7,
                log_end_offset: Some(10),
            },
        ];
        let ends = |t: &str, _| match t {
            "t" => Some(10),
            "u" => Some(5),
            _ => None,
        };
        let text = offsets_table(&d, &lags, ends);
        let cells: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            cells,
            [
                vec![
                    "GROUP",
                    "TOPIC",
                    "PARTITION",
                    "CURRENT-OFFSET",
                    "LOG-END-OFFSET",
                    "LAG",
                    "CONSUMER-ID",
                    "HOST",
                    "CLIENT-ID"
                ],
                // m2 has more partitions: first. Nothing committed for u and v yet.
                vec!["g", "u", "0", "-", "5", "-", "m2", "/127.0.0.2", "c2"],
                vec!["g", "v", "0", "-", "-", "-", "m2", "/127.0.0.2", "c2"],
                vec!["g", "t", "0", "7", "10", "3", "m1", "/127.0.0.1", "c1"],
                vec!["g", "gone", "0", "4", "-", "-", "-", "-", "-"],
            ]
        );
        // Kafka's widths: PARTITION 10, the offsets 15, the rest at least 15.
        assert!(text.starts_with(&format!(
            "{:<15} {:<15} {:<10} {:<15} {:<15} {:<15} {:<15} {:<15} CLIENT-ID\n",
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST"
        )));
    }

    #[test]
    fn lag_is_the_log_end_minus_the_committed_offset() {
        assert_eq!(lag(Some(3), Some(10)), Some(7));
        assert_eq!(lag(Some(12), Some(10)), Some(-2));
        assert_eq!(lag(Some(-1), Some(10)), None);
        assert_eq!(lag(Some(3), None), None);
        assert_eq!(lag(None, Some(10)), None);
    }
}
