//! [`TopicPartition`]: which partition of which topic, and the partition directory's name
//! (`TOPIC-N`, Kafka's `UnifiedLog.logDirName`), read back as Kafka's
//! `UnifiedLog.parseTopicPartitionName` does: the partition is what follows the last `-`,
//! so a topic may itself contain `-` and digits (`orders-2024-0` is partition 0 of
//! `orders-2024`).

use std::fmt;

/// Partition `partition` of `topic`; shown as Kafka shows a `TopicPartition`: `topic-N`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: u32,
}

impl TopicPartition {
    pub fn new(topic: &str, partition: u32) -> TopicPartition {
        TopicPartition {
            topic: topic.to_string(),
            partition,
        }
    }

    /// The partition directory's name, and the name of its kpfs folder.
    pub(crate) fn dir_name(&self) -> String {
        self.to_string()
    }

    /// The partition a directory name stands for; `None` for a name without `-N` (the
    /// partition a decimal number without sign or leading zeros, as Kafka writes it).
    pub(crate) fn parse_dir_name(name: &str) -> Option<TopicPartition> {
        let (topic, partition) = name.rsplit_once('-')?;
        if topic.is_empty() {
            return None;
        }
        Some(TopicPartition::new(
            topic,
            parse_partition_number(partition)?,
        ))
    }
}

/// A partition number written as Kafka writes one: a decimal without sign or leading
/// zeros, so each partition has one spelling.
pub(crate) fn parse_partition_number(text: &str) -> Option<u32> {
    let canonical = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    canonical.then(|| text.parse().ok()).flatten()
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_names_split_at_the_last_dash() {
        let tp = |name| TopicPartition::parse_dir_name(name);
        assert_eq!(tp("orders-0"), Some(TopicPartition::new("orders", 0)));
        assert_eq!(
            tp("orders-2024-11"),
            Some(TopicPartition::new("orders-2024", 11))
        );
        assert_eq!(tp("x-0-0"), Some(TopicPartition::new("x-0", 0)));
        for not_a_partition in ["orders", "orders-", "-0", "orders-01", "orders-+1", "t-1x"] {
            assert_eq!(tp(not_a_partition), None, "{not_a_partition}");
        }
        let t = TopicPartition::new("a.b_c", 7);
        assert_eq!(tp(&t.dir_name()), Some(t));
    }
}
