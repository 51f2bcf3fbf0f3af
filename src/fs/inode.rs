//! The inode table: which mount path an inode number stands for. Numbers are handed out
//! on lookup and never reused while the daemon runs, so a kernel that still remembers a
//! deleted topic's inode gets ENOENT instead of silently reaching a newer topic of the
//! same name. Thread-safe; one short lock per call.

use std::collections::HashMap;

use parking_lot::Mutex;

/// The kernel's fixed inode number for the mount root.
pub(crate) const ROOT_INO: u64 = 1;
const CONTROL_DIR_INO: u64 = 2;
const BROKER_CONFIG_INO: u64 = 3;
const ERRORS_INO: u64 = 4;
const FIRST_DYNAMIC_INO: u64 = 5;

/// The file of a topic folder that shows and moves its log start offset.
pub(crate) const LOG_START_FILE: &str = "log_start_offset";

/// The reserved control directory in the root.
pub(crate) const CONTROL_DIR: &str = ".kpfs";

/// One path of the mount. Topic-scoped nodes carry the topic name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Node {
    Root,
    ControlDir,
    BrokerConfig,
    Errors,
    Metrics,
    TopicDir(String),
    Log(String),
    TopicConfig(String),
    Status(String),
    Events(String),
    /// `TOPIC/log_start_offset`: read it, or write an offset to delete the records
    /// before it (Kafka's DeleteRecords).
    LogStart(String),
    SegmentsDir(String),
    Segment {
        topic: String,
        name: String,
    },
}

impl Node {
    /// The path relative to the mount point, as `.kpfs/errors` shows it.
    pub(crate) fn path(&self) -> String {
        match self {
            Node::Root => ".".to_string(),
            Node::ControlDir => CONTROL_DIR.to_string(),
            Node::BrokerConfig => format!("{CONTROL_DIR}/config"),
            Node::Errors => format!("{CONTROL_DIR}/errors"),
            Node::Metrics => format!("{CONTROL_DIR}/metrics"),
            Node::TopicDir(t) => t.clone(),
            Node::Log(t) => format!("{t}/log"),
            Node::TopicConfig(t) => format!("{t}/config"),
            Node::Status(t) => format!("{t}/status"),
            Node::Events(t) => format!("{t}/events"),
            Node::LogStart(t) => format!("{t}/{LOG_START_FILE}"),
            Node::SegmentsDir(t) => format!("{t}/segments"),
            Node::Segment { topic, name } => format!("{topic}/segments/{name}"),
        }
    }

    /// The path of `name` inside this node.
    pub(crate) fn child_path(&self, name: &str) -> String {
        match self {
            Node::Root => name.to_string(),
            other => format!("{}/{name}", other.path()),
        }
    }

    pub(crate) fn is_dir(&self) -> bool {
        matches!(
            self,
            Node::Root | Node::ControlDir | Node::TopicDir(_) | Node::SegmentsDir(_)
        )
    }

    pub(crate) fn topic(&self) -> Option<&str> {
        match self {
            Node::Root | Node::ControlDir | Node::BrokerConfig | Node::Errors | Node::Metrics => {
                None
            }
            Node::TopicDir(t)
            | Node::Log(t)
            | Node::TopicConfig(t)
            | Node::Status(t)
            | Node::Events(t)
            | Node::LogStart(t)
            | Node::SegmentsDir(t) => Some(t),
            Node::Segment { topic, .. } => Some(topic),
        }
    }

    pub(crate) fn parent(&self) -> Node {
        match self {
            Node::Root | Node::ControlDir | Node::TopicDir(_) => Node::Root,
            Node::BrokerConfig | Node::Errors | Node::Metrics => Node::ControlDir,
            Node::Log(t)
            | Node::TopicConfig(t)
            | Node::Status(t)
            | Node::Events(t)
            | Node::LogStart(t)
            | Node::SegmentsDir(t) => Node::TopicDir(t.clone()),
            Node::Segment { topic, .. } => Node::SegmentsDir(topic.clone()),
        }
    }
}

struct Tables {
    by_ino: HashMap<u64, Node>,
    by_node: HashMap<Node, u64>,
    next_ino: u64,
}

pub(crate) struct InodeTable {
    tables: Mutex<Tables>,
}

impl Default for InodeTable {
    fn default() -> Self {
        Self::new()
    }
}

impl InodeTable {
    pub(crate) fn new() -> InodeTable {
        let fixed = [
            (ROOT_INO, Node::Root),
            (CONTROL_DIR_INO, Node::ControlDir),
            (BROKER_CONFIG_INO, Node::BrokerConfig),
            (ERRORS_INO, Node::Errors),
        ];
        let by_ino: HashMap<u64, Node> = fixed.iter().cloned().collect();
        let by_node = fixed.into_iter().map(|(ino, node)| (node, ino)).collect();
        InodeTable {
            tables: Mutex::new(Tables {
                by_ino,
                by_node,
                next_ino: FIRST_DYNAMIC_INO,
            }),
        }
    }

    pub(crate) fn node(&self, ino: u64) -> Option<Node> {
        self.tables.lock().by_ino.get(&ino).cloned()
    }

    /// The inode number of `node`, allocating one on first sight.
    pub(crate) fn ino(&self, node: &Node) -> u64 {
        let mut tables = self.tables.lock();
        if let Some(&ino) = tables.by_node.get(node) {
            return ino;
        }
        let ino = tables.next_ino;
        tables.next_ino += 1;
        tables.by_ino.insert(ino, node.clone());
        tables.by_node.insert(node.clone(), ino);
        ino
    }

    /// Forgets every node of a deleted topic so its numbers can never reach a new topic
    /// with the same name.
    pub(crate) fn forget_topic(&self, topic: &str) {
        let mut tables = self.tables.lock();
        let Tables {
            by_ino, by_node, ..
        } = &mut *tables;
        by_node.retain(|node, _| node.topic() != Some(topic));
        by_ino.retain(|_, node| node.topic() != Some(topic));
    }

    /// Forgets the segment files of `topic` that are no longer in `present`, so the table
    /// stays bounded while segments roll and retire for months.
    pub(crate) fn retain_segments(&self, topic: &str, present: &[String]) {
        let mut tables = self.tables.lock();
        let gone = |node: &Node| match node {
            Node::Segment { topic: t, name } => t == topic && !present.contains(name),
            _ => false,
        };
        let Tables {
            by_ino, by_node, ..
        } = &mut *tables;
        by_node.retain(|node, _| !gone(node));
        by_ino.retain(|_, node| !gone(node));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recreated_topic_gets_fresh_inode_numbers() {
        let table = InodeTable::new();
        let log = Node::Log("t".into());
        let first = table.ino(&log);
        assert_eq!(table.ino(&log), first);
        table.forget_topic("t");
        assert_eq!(table.node(first), None);
        assert_ne!(table.ino(&log), first);
    }

    #[test]
    fn retired_segments_leave_the_table() {
        let table = InodeTable::new();
        let seg = |name: &str| Node::Segment {
            topic: "t".into(),
            name: name.into(),
        };
        let old = table.ino(&seg("a.log"));
        let kept = table.ino(&seg("b.log"));
        table.retain_segments("t", &["b.log".to_string()]);
        assert_eq!(table.node(old), None);
        assert_eq!(table.node(kept), Some(seg("b.log")));
    }

    #[test]
    fn paths_are_relative_to_the_mount() {
        assert_eq!(Node::Root.child_path("t"), "t");
        assert_eq!(Node::Log("t".into()).path(), "t/log");
        assert_eq!(Node::ControlDir.child_path("x"), ".kpfs/x");
        assert_eq!(Node::Metrics.path(), ".kpfs/metrics");
        assert_eq!(Node::Events("t".into()).path(), "t/events");
        assert_eq!(
            Node::Events("t".into()).parent(),
            Node::TopicDir("t".into())
        );
    }
}
