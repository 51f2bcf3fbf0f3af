//! The inode table: which mount path an inode number stands for. Numbers are handed out
//! on lookup and never reused while the daemon runs, so a kernel that still remembers a
//! deleted topic's inode gets ENOENT instead of silently reaching a newer topic of the
//! same name. Thread-safe; one short lock per call.

use std::collections::{HashMap, HashSet};

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

/// `.kpfs/groups`: a directory per consumer group.
pub(crate) const GROUPS_DIR: &str = "groups";

/// `.kpfs/transactions`: a file per transactional id.
pub(crate) const TRANSACTIONS_DIR: &str = "transactions";

/// `.kpfs/snapshot`: a read-only copy of each topic for backups.
pub(crate) const SNAPSHOT_DIR: &str = "snapshot";

/// The files of `.kpfs/groups/GROUP/`, each one table of
/// `kafka-consumer-groups.sh --describe --group GROUP`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum GroupFile {
    /// `--state`.
    State,
    /// `--members --verbose`.
    Members,
    /// `--offsets`.
    Offsets,
}

impl GroupFile {
    pub(crate) const ALL: [GroupFile; 3] =
        [GroupFile::State, GroupFile::Members, GroupFile::Offsets];

    pub(crate) fn name(self) -> &'static str {
        match self {
            GroupFile::State => "state",
            GroupFile::Members => "members",
            GroupFile::Offsets => "offsets",
        }
    }
}

/// The file name that shows group `id` in `.kpfs/groups` (and transactional id `id` in
/// `.kpfs/transactions`): the id with `%` and `/` (and a NUL) written `%XX`, and `.` and
/// `..` written `%2E` and `%2E%2E`, since Kafka's group and transactional ids are any
/// string. `None` for an id no file name can show: the empty id, and one
/// longer than a file name may be.
pub(crate) fn group_file_name(id: &str) -> Option<String> {
    let name = match id {
        "" => return None,
        "." => "%2E".to_string(),
        ".." => "%2E%2E".to_string(),
        _ => {
            let mut name = String::with_capacity(id.len());
            for c in id.chars() {
                match c {
                    '%' | '/' | '\0' => name.push_str(&format!("%{:02X}", c as u32)),
                    c => name.push(c),
                }
            }
            name
        }
    };
    (name.len() <= MAX_NAME_BYTES).then_some(name)
}

/// The group id a `.kpfs/groups` file name shows (or the transactional id a
/// `.kpfs/transactions` one shows), if it is one [`group_file_name`] makes.
pub(crate) fn group_of_file_name(name: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(name.len());
    let mut rest = name.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        if b == b'%' {
            let hex = std::str::from_utf8(tail.get(..2)?).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            rest = &tail[2..];
        } else {
            bytes.push(b);
            rest = tail;
        }
    }
    let id = String::from_utf8(bytes).ok()?;
    // One spelling per group: `%41` or `%2f` name nothing.
    (group_file_name(&id).as_deref() == Some(name)).then_some(id)
}

/// Whether `name` is a temporary file of `sed -i`: `sed` and the six letters or digits
/// `mkstemp` puts in place of its `XXXXXX`. Only such a create in a folder with a config
/// file makes a draft of it: vim's probes for swap, backup and test files (`.config.swp`,
/// `config~`, `4913`) must keep failing, or vim would save by renaming `config` away.
pub(crate) fn is_sed_temporary(name: &str) -> bool {
    name.strip_prefix("sed")
        .is_some_and(|rest| rest.len() == 6 && rest.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// Linux's `NAME_MAX`.
const MAX_NAME_BYTES: usize = 255;

/// `TOPIC/partitions`: a folder per partition.
pub(crate) const PARTITIONS_DIR: &str = "partitions";

/// The folder a per-partition file is in: the topic's own (where `log` and `status` are
/// the topic's, and `segments` and `log_start_offset` partition 0's, as they were when
/// every topic had one partition) or `TOPIC/partitions/N`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Scope {
    Topic(String),
    Partition(String, u32),
}

impl Scope {
    pub(crate) fn topic(&self) -> &str {
        match self {
            Scope::Topic(t) | Scope::Partition(t, _) => t,
        }
    }

    /// The partition of `TOPIC/partitions/N`, `None` for the topic's own folder.
    pub(crate) fn nested_partition(&self) -> Option<u32> {
        match self {
            Scope::Topic(_) => None,
            Scope::Partition(_, n) => Some(*n),
        }
    }

    /// The folder whose name a segment file of this folder's `segments/` has: partition
    /// 0's files are one file each under two names (`TOPIC/segments/F` and
    /// `TOPIC/partitions/0/segments/F`), so they have one node and one inode, as hard
    /// links do, and `du` counts them once.
    pub(crate) fn of_segment_files(&self) -> Scope {
        match self {
            Scope::Partition(t, 0) => Scope::Topic(t.clone()),
            other => other.clone(),
        }
    }

    fn dir(&self) -> Node {
        match self {
            Scope::Topic(t) => Node::TopicDir(t.clone()),
            Scope::Partition(t, n) => Node::PartitionDir(t.clone(), *n),
        }
    }

    fn path(&self) -> String {
        match self {
            Scope::Topic(t) => t.clone(),
            Scope::Partition(t, n) => format!("{t}/{PARTITIONS_DIR}/{n}"),
        }
    }
}

/// One path of the mount. Topic-scoped nodes carry the topic name, per-partition ones
/// the [`Scope`] of their folder.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Node {
    Root,
    ControlDir,
    BrokerConfig,
    Errors,
    Metrics,
    TopicDir(String),
    /// The topic's stream (`TOPIC/log`, every partition's records) or a partition's.
    Log(Scope),
    TopicConfig(String),
    /// The topic's sums and a line per partition, or a partition's own.
    Status(Scope),
    Events(String),
    /// `log_start_offset`: read it, or write an offset to delete the records
    /// before it (Kafka's DeleteRecords).
    LogStart(Scope),
    SegmentsDir(Scope),
    Segment {
        scope: Scope,
        name: String,
    },
    /// `TOPIC/partitions`; `mkdir TOPIC/partitions/N` adds partition N (the next one).
    PartitionsDir(String),
    PartitionDir(String, u32),
    /// `.kpfs/groups`: the consumer groups (Kafka's ListGroups).
    GroupsDir,
    /// `.kpfs/groups/GROUP`, by group id; `rmdir` deletes the group (DeleteGroups).
    GroupDir(String),
    GroupFile {
        group: String,
        file: GroupFile,
    },
    /// `.kpfs/transactions`: the transactional ids (Kafka's ListTransactions).
    TransactionsDir,
    /// `.kpfs/transactions/ID`, by transactional id: `kafka-transactions.sh describe`.
    Transaction(String),
    /// A file `sed -i` made beside a config file, to rename over it: a draft of the
    /// topic's `config` (`topic` `None`: of `.kpfs/config`).
    Draft {
        topic: Option<String>,
        name: String,
    },
    /// `.kpfs/snapshot`: a folder per topic, for `tar` and `rsync`.
    SnapshotDir,
    SnapshotTopicDir(String),
    /// `.kpfs/snapshot/TOPIC/log`: the topic's visible records end to end, as of its
    /// capture, with a size that is exactly what a read returns.
    SnapshotLog(String),
    SnapshotConfig(String),
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
            Node::Log(s) => format!("{}/log", s.path()),
            Node::TopicConfig(t) => format!("{t}/config"),
            Node::Status(s) => format!("{}/status", s.path()),
            Node::Events(t) => format!("{t}/events"),
            Node::LogStart(s) => format!("{}/{LOG_START_FILE}", s.path()),
            Node::SegmentsDir(s) => format!("{}/segments", s.path()),
            Node::Segment { scope, name } => format!("{}/segments/{name}", scope.path()),
            Node::PartitionsDir(t) => format!("{t}/{PARTITIONS_DIR}"),
            Node::PartitionDir(t, n) => Scope::Partition(t.clone(), *n).path(),
            Node::GroupsDir => format!("{CONTROL_DIR}/{GROUPS_DIR}"),
            Node::GroupDir(group) => Node::GroupsDir.child_path(&shown_group(group)),
            Node::GroupFile { group, file } => format!(
                "{CONTROL_DIR}/{GROUPS_DIR}/{}/{}",
                shown_group(group),
                file.name()
            ),
            Node::TransactionsDir => format!("{CONTROL_DIR}/{TRANSACTIONS_DIR}"),
            Node::Transaction(id) => Node::TransactionsDir.child_path(&shown_group(id)),
            Node::Draft { name, .. } => self.parent().child_path(name),
            Node::SnapshotDir => format!("{CONTROL_DIR}/{SNAPSHOT_DIR}"),
            Node::SnapshotTopicDir(t) => Node::SnapshotDir.child_path(t),
            Node::SnapshotLog(t) => format!("{CONTROL_DIR}/{SNAPSHOT_DIR}/{t}/log"),
            Node::SnapshotConfig(t) => format!("{CONTROL_DIR}/{SNAPSHOT_DIR}/{t}/config"),
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
            Node::Root
                | Node::ControlDir
                | Node::TopicDir(_)
                | Node::SegmentsDir(_)
                | Node::PartitionsDir(_)
                | Node::PartitionDir(..)
                | Node::GroupsDir
                | Node::GroupDir(_)
                | Node::TransactionsDir
                | Node::SnapshotDir
                | Node::SnapshotTopicDir(_)
        )
    }

    pub(crate) fn topic(&self) -> Option<&str> {
        match self {
            Node::Root
            | Node::ControlDir
            | Node::BrokerConfig
            | Node::Errors
            | Node::Metrics
            | Node::GroupsDir
            | Node::GroupDir(_)
            | Node::GroupFile { .. }
            | Node::TransactionsDir
            | Node::Transaction(_)
            | Node::SnapshotDir => None,
            Node::Draft { topic, .. } => topic.as_deref(),
            Node::SnapshotTopicDir(t) | Node::SnapshotLog(t) | Node::SnapshotConfig(t) => Some(t),
            Node::TopicDir(t)
            | Node::TopicConfig(t)
            | Node::Events(t)
            | Node::PartitionsDir(t)
            | Node::PartitionDir(t, _) => Some(t),
            Node::Log(s)
            | Node::Status(s)
            | Node::LogStart(s)
            | Node::SegmentsDir(s)
            | Node::Segment { scope: s, .. } => Some(s.topic()),
        }
    }

    /// The partition a node of `TOPIC/partitions/N` is of.
    pub(crate) fn nested_partition(&self) -> Option<u32> {
        match self {
            Node::PartitionDir(_, n) => Some(*n),
            Node::Log(s)
            | Node::Status(s)
            | Node::LogStart(s)
            | Node::SegmentsDir(s)
            | Node::Segment { scope: s, .. } => s.nested_partition(),
            _ => None,
        }
    }

    pub(crate) fn parent(&self) -> Node {
        match self {
            Node::Root | Node::ControlDir | Node::TopicDir(_) => Node::Root,
            Node::BrokerConfig | Node::Errors | Node::Metrics => Node::ControlDir,
            Node::TopicConfig(t) | Node::Events(t) | Node::PartitionsDir(t) => {
                Node::TopicDir(t.clone())
            }
            Node::Log(s) | Node::Status(s) | Node::LogStart(s) | Node::SegmentsDir(s) => s.dir(),
            Node::Segment { scope, .. } => Node::SegmentsDir(scope.clone()),
            Node::PartitionDir(t, _) => Node::PartitionsDir(t.clone()),
            Node::GroupsDir => Node::ControlDir,
            Node::GroupDir(_) => Node::GroupsDir,
            Node::GroupFile { group, .. } => Node::GroupDir(group.clone()),
            Node::TransactionsDir => Node::ControlDir,
            Node::Transaction(_) => Node::TransactionsDir,
            Node::Draft { topic: Some(t), .. } => Node::TopicDir(t.clone()),
            Node::Draft { topic: None, .. } => Node::ControlDir,
            Node::SnapshotDir => Node::ControlDir,
            Node::SnapshotTopicDir(_) => Node::SnapshotDir,
            Node::SnapshotLog(t) | Node::SnapshotConfig(t) => Node::SnapshotTopicDir(t.clone()),
        }
    }

    /// The consumer group of a node under `.kpfs/groups/GROUP`.
    pub(crate) fn group(&self) -> Option<&str> {
        match self {
            Node::GroupDir(group) | Node::GroupFile { group, .. } => Some(group),
            _ => None,
        }
    }

    /// Whether the node is `.kpfs/groups` or in it.
    pub(crate) fn in_groups(&self) -> bool {
        matches!(self, Node::GroupsDir) || self.group().is_some()
    }

    /// The transactional id of `.kpfs/transactions/ID`.
    pub(crate) fn transactional_id(&self) -> Option<&str> {
        match self {
            Node::Transaction(id) => Some(id),
            _ => None,
        }
    }

    /// Whether the node is `.kpfs/transactions` or in it.
    pub(crate) fn in_transactions(&self) -> bool {
        matches!(self, Node::TransactionsDir) || self.transactional_id().is_some()
    }
}

/// A group's (or transactional id's) name in paths; an id no file name can show (which is
/// never listed) is shown as it is, for `.kpfs/errors`.
fn shown_group(group: &str) -> String {
    group_file_name(group).unwrap_or_else(|| group.to_string())
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
        self.forget_where(|node| node.topic() == Some(topic));
    }

    /// Forgets every node of a deleted group, as [`InodeTable::forget_topic`] does.
    pub(crate) fn forget_group(&self, group: &str) {
        self.forget_where(|node| node.group() == Some(group));
    }

    /// Forgets the nodes of the groups not in `present` (deleted through the listener, or
    /// expired with their offsets), so the table stays bounded while clients come and go
    /// with new group ids.
    pub(crate) fn retain_groups(&self, present: &[String]) {
        let present: HashSet<&str> = present.iter().map(String::as_str).collect();
        self.forget_where(|node| node.group().is_some_and(|g| !present.contains(g)));
    }

    /// Forgets the files of the transactional ids not in `present` (expired after
    /// `transactional.id.expiration.ms`), as [`InodeTable::retain_groups`] does for groups.
    pub(crate) fn retain_transactions(&self, present: &[String]) {
        let present: HashSet<&str> = present.iter().map(String::as_str).collect();
        self.forget_where(|node| {
            node.transactional_id()
                .is_some_and(|id| !present.contains(id))
        });
    }

    /// Forgets the segment files of the folder `scope` that are no longer in `present`,
    /// so the table stays bounded while segments roll and retire for months.
    pub(crate) fn retain_segments(&self, scope: &Scope, present: &[String]) {
        self.forget_where(|node| match node {
            Node::Segment { scope: s, name } => s == scope && !present.contains(name),
            _ => false,
        });
    }

    /// Forgets one node (a draft renamed or removed).
    pub(crate) fn forget(&self, node: &Node) {
        self.forget_where(|n| n == node);
    }

    fn forget_where(&self, gone: impl Fn(&Node) -> bool) {
        let mut tables = self.tables.lock();
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
        let log = Node::Log(Scope::Topic("t".into()));
        let first = table.ino(&log);
        assert_eq!(table.ino(&log), first);
        table.forget_topic("t");
        assert_eq!(table.node(first), None);
        assert_ne!(table.ino(&log), first);
    }

    #[test]
    fn retired_segments_leave_the_table() {
        let table = InodeTable::new();
        let seg = |scope: &Scope, name: &str| Node::Segment {
            scope: scope.clone(),
            name: name.into(),
        };
        let (topic, nested) = (Scope::Topic("t".into()), Scope::Partition("t".into(), 0));
        let old = table.ino(&seg(&topic, "a.log"));
        let kept = table.ino(&seg(&topic, "b.log"));
        let other_folder = table.ino(&seg(&nested, "a.log"));
        table.retain_segments(&topic, &["b.log".to_string()]);
        assert_eq!(table.node(old), None);
        assert_eq!(table.node(kept), Some(seg(&topic, "b.log")));
        assert_eq!(table.node(other_folder), Some(seg(&nested, "a.log")));
    }

    #[test]
    fn any_group_id_has_one_file_name_that_reads_back() {
        for (id, name) in [
            ("app", "app"),
            ("team/app", "team%2Fapp"),
            ("50%", "50%25"),
            (".", "%2E"),
            ("..", "%2E%2E"),
            ("...", "..."),
            ("a\0b", "a%00b"),
            ("grüße", "grüße"),
        ] {
            assert_eq!(group_file_name(id).as_deref(), Some(name), "{id:?}");
            assert_eq!(group_of_file_name(name).as_deref(), Some(id), "{name:?}");
        }
        assert_eq!(group_file_name(""), None);
        assert_eq!(group_file_name(&"x".repeat(256)), None);
        assert_eq!(group_file_name(&"/".repeat(86)), None);
        // Other spellings of the same id, and broken escapes, name no group.
        for name in ["%41pp", "team%2fapp", "%", "%2", "%zz", "%FF"] {
            assert_eq!(group_of_file_name(name), None, "{name:?}");
        }
    }

    #[test]
    fn group_nodes_leave_the_table_with_their_group() {
        let table = InodeTable::new();
        let state = |g: &str| Node::GroupFile {
            group: g.into(),
            file: GroupFile::State,
        };
        let gone = table.ino(&Node::GroupDir("a".into()));
        let gone_file = table.ino(&state("a"));
        let kept = table.ino(&state("b"));
        table.retain_groups(&["b".to_string()]);
        assert_eq!(table.node(gone), None);
        assert_eq!(table.node(gone_file), None);
        assert_eq!(table.node(kept), Some(state("b")));
        table.forget_group("b");
        assert_eq!(table.node(kept), None);
        assert_eq!(state("team/app").path(), ".kpfs/groups/team%2Fapp/state");
        assert_eq!(state("x").parent().parent(), Node::GroupsDir);
        assert_eq!(Node::GroupsDir.parent(), Node::ControlDir);
    }

    #[test]
    fn transaction_files_are_escaped_and_leave_the_table_with_their_id() {
        let table = InodeTable::new();
        let gone = table.ino(&Node::Transaction("old".into()));
        let kept = table.ino(&Node::Transaction("app/1".into()));
        let group = table.ino(&Node::GroupDir("old".into()));
        table.retain_transactions(&["app/1".to_string()]);
        assert_eq!(table.node(gone), None);
        assert_eq!(table.node(kept), Some(Node::Transaction("app/1".into())));
        assert_eq!(table.node(group), Some(Node::GroupDir("old".into())));
        assert_eq!(
            Node::Transaction("app/1".into()).path(),
            ".kpfs/transactions/app%2F1"
        );
        assert_eq!(
            Node::Transaction("x".into()).parent().parent(),
            Node::ControlDir
        );
        assert!(Node::TransactionsDir.is_dir() && Node::TransactionsDir.in_transactions());
        assert!(!Node::Transaction("x".into()).is_dir());
        assert_eq!(Node::Transaction("x".into()).topic(), None);
    }

    #[test]
    fn paths_are_relative_to_the_mount() {
        assert_eq!(Node::Root.child_path("t"), "t");
        assert_eq!(Node::Log(Scope::Topic("t".into())).path(), "t/log");
        let nested = Scope::Partition("t".into(), 2);
        assert_eq!(Node::Log(nested.clone()).path(), "t/partitions/2/log");
        assert_eq!(
            Node::Segment {
                scope: nested.clone(),
                name: "x.log".into()
            }
            .path(),
            "t/partitions/2/segments/x.log"
        );
        assert_eq!(
            Node::Status(nested.clone()).parent().parent(),
            Node::PartitionsDir("t".into())
        );
        assert_eq!(
            Node::PartitionsDir("t".into()).parent(),
            Node::TopicDir("t".into())
        );
        assert_eq!(Node::LogStart(nested).topic(), Some("t"));
        assert_eq!(Node::ControlDir.child_path("x"), ".kpfs/x");
        assert_eq!(Node::Metrics.path(), ".kpfs/metrics");
        assert_eq!(Node::Events("t".into()).path(), "t/events");
        assert_eq!(
            Node::Events("t".into()).parent(),
            Node::TopicDir("t".into())
        );
    }
}
