//! What the mount shows of transactions: `.kpfs/transactions/ID`, the table
//! `kafka-transactions.sh describe --transactional-id ID` prints for the id (Kafka's
//! `TransactionsCommand.DescribeTransactionsCommand` and `ToolsUtils.prettyPrintTable`,
//! character for character), from the coordinator's DescribeTransactions answer and the
//! engine clock at the time of the rendering, which stands for the tool's clock.

use super::dump_findings::java_hash_set_order;
use super::transactions::{TxnDescription, TxnStatus};
use super::Engine;

/// `DescribeTransactionsCommand.HEADERS`.
const HEADERS: [&str; 9] = [
    "CoordinatorId",
    "TransactionalId",
    "ProducerId",
    "ProducerEpoch",
    "TransactionState",
    "TransactionTimeoutMs",
    "CurrentTransactionStartTimeMs",
    "TransactionDurationMs",
    "TopicPartitions",
];

/// What the tool prints for a transaction without a start time (`OptionalLong.empty()`).
const NONE: &str = "None";

impl Engine {
    /// The transactional ids ListTransactions lists (every state and producer), in name
    /// order (`.kpfs/transactions/`'s).
    pub(crate) fn transactional_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .list_transactions(&[], &[])
            .into_iter()
            .map(|listing| listing.transactional_id)
            .collect();
        ids.sort();
        ids
    }

    /// `.kpfs/transactions/ID`: `kafka-transactions.sh describe`'s header line and row,
    /// or `None` for an unknown id (the tool's TRANSACTIONAL_ID_NOT_FOUND). The
    /// coordinator is this node (`node.id`), as FindCoordinator answers.
    pub(crate) fn transaction_text(&self, transactional_id: &str) -> Option<String> {
        let description = self.describe_transaction(transactional_id).ok()?;
        let coordinator = self.inner.broker.read().node_id();
        Some(describe_table(
            &description,
            coordinator,
            self.clock().now_ms(),
        ))
    }
}

/// The TransactionState column: the admin client's `TransactionState.parse` of the
/// state's name, whose enum has no `Dead` (`UNKNOWN`).
fn state_text(state: TxnStatus) -> &'static str {
    match state {
        TxnStatus::Dead => "Unknown",
        other => other.name(),
    }
}

/// The tool's header and row for `d`, `now_ms` its `time.milliseconds()`.
pub(crate) fn describe_table(d: &TxnDescription, coordinator: i32, now_ms: i64) -> String {
    // DescribeTransactionsHandler: a negative start time is none.
    let (start, duration) = if d.start_ms < 0 {
        (NONE.to_string(), NONE.to_string())
    } else {
        (
            d.start_ms.to_string(),
            now_ms.wrapping_sub(d.start_ms).to_string(),
        )
    };
    let partitions: Vec<String> = java_hash_set_order(&d.partitions)
        .into_iter()
        .map(|(topic, partition)| format!("{topic}-{partition}"))
        .collect();
    let row = [
        coordinator.to_string(),
        d.transactional_id.clone(),
        d.producer_id.to_string(),
        d.producer_epoch.to_string(),
        state_text(d.state).to_string(),
        d.timeout_ms.to_string(),
        start,
        duration,
        partitions.join(","),
    ];
    pretty_print_table(&HEADERS, &[row.iter().map(String::as_str).collect()])
}

/// Java's `String.length()`: UTF-16 code units, what the tool pads by.
fn java_length(s: &str) -> usize {
    s.encode_utf16().count()
}

/// `ToolsUtils.prettyPrintTable`: each column as wide as its widest cell (the header's
/// included), each cell padded with spaces to its column's width and followed by a tab
/// (the last too), each line ended by `println`.
fn pretty_print_table(headers: &[&str], rows: &[Vec<&str>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| java_length(h)).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(java_length(cell));
        }
    }
    let mut out = String::new();
    for line in std::iter::once(headers).chain(rows.iter().map(Vec::as_slice)) {
        for (cell, width) in line.iter().zip(&widths) {
            out.push_str(cell);
            out.extend(std::iter::repeat_n(
                ' ',
                width.saturating_sub(java_length(cell)),
            ));
            out.push('\t');
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn description(state: TxnStatus, start_ms: i64, partitions: &[(&str, i32)]) -> TxnDescription {
        TxnDescription {
            transactional_id: "java-txn".into(),
            state,
            timeout_ms: 60_000,
            start_ms,
            producer_id: 0,
            producer_epoch: 0,
            partitions: partitions
                .iter()
                .map(|(t, p)| (t.to_string(), *p))
                .collect(),
        }
    }

    #[test]
    fn the_table_is_kafkas_header_and_row_tab_separated_and_padded() {
        let d = description(
            TxnStatus::Ongoing,
            1_700_000_000_000,
            &[("orders", 0), ("refunds", 0)],
        );
        let text = describe_table(&d, 1, 1_700_000_001_234);
        // Every column as wide as its header, but the last: its cell is 18 wide.
        assert_eq!(
            text,
            "CoordinatorId\tTransactionalId\tProducerId\tProducerEpoch\tTransactionState\t\
             TransactionTimeoutMs\tCurrentTransactionStartTimeMs\tTransactionDurationMs\t\
             TopicPartitions   \t\n\
             1            \tjava-txn       \t0         \t0            \tOngoing         \t\
             60000               \t1700000000000                \t1234                 \t\
             refunds-0,orders-0\t\n"
        );
    }

    #[test]
    fn a_transaction_without_a_start_time_shows_none() {
        let d = description(TxnStatus::Empty, -1, &[]);
        let text = describe_table(&d, 7, 5);
        let row: Vec<&str> = text.lines().nth(1).unwrap().split('\t').collect();
        assert_eq!(
            row.iter().map(|c| c.trim_end()).collect::<Vec<_>>(),
            ["7", "java-txn", "0", "0", "Empty", "60000", "None", "None", "", ""]
        );
        // The empty last column is padded to its header.
        assert_eq!(row[8], " ".repeat("TopicPartitions".len()));
        assert_eq!(state_text(TxnStatus::Dead), "Unknown");
        assert_eq!(state_text(TxnStatus::CompleteCommit), "CompleteCommit");
    }

    #[test]
    fn columns_widen_to_their_longest_cell_in_utf16_units() {
        let table = pretty_print_table(&["A", "B"], &[vec!["grüße😀", "x"]]);
        // "grüße😀" is 7 UTF-16 units (the emoji two): no padding after it.
        assert_eq!(table, "A      \tB\t\ngrüße😀\tx\t\n");
    }

    fn joined(partitions: &[(String, i32)]) -> String {
        java_hash_set_order(partitions)
            .into_iter()
            .map(|(t, p)| format!("{t}-{p}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    #[test]
    fn partitions_come_in_java_hash_set_order() {
        // What Java 17 prints for a HashSet<TopicPartition> (kafka-clients 4.3.1) filled
        // in these orders.
        let owned = |v: Vec<(&str, i32)>| -> Vec<(String, i32)> {
            v.into_iter().map(|(t, p)| (t.to_string(), p)).collect()
        };
        assert_eq!(
            joined(&owned(vec![
                ("__consumer_offsets", 0),
                ("txn-a", 0),
                ("txn-b", 0)
            ])),
            "__consumer_offsets-0,txn-a-0,txn-b-0"
        );
        let many = owned((0..20).map(|p| ("t", p)).collect());
        assert_eq!(
            joined(&many),
            "t-19,t-18,t-17,t-16,t-15,t-14,t-13,t-12,t-11,t-10,t-9,t-8,t-7,t-6,t-5,t-4,t-3,t-2,t-1,t-0"
        );
        let mixed = owned(
            ["alpha", "beta", "grüße"]
                .into_iter()
                .flat_map(|t| (0..5).map(move |p| (t, p)))
                .collect(),
        );
        assert_eq!(
            joined(&mixed),
            "beta-3,beta-2,beta-4,alpha-4,alpha-2,grüße-1,alpha-3,grüße-2,alpha-0,grüße-3,\
             alpha-1,grüße-4,grüße-0,beta-1,beta-0"
        );
        // Ten in one bin of 16: the ninth makes Java grow the table to 32 instead of
        // making the bin a tree, which splits the bin in two.
        let one_bin = owned(
            [5, 21, 37, 53, 69, 85, 101, 117, 133, 149]
                .into_iter()
                .map(|p| ("t", p))
                .collect(),
        );
        assert_eq!(
            joined(&one_bin),
            "t-21,t-53,t-85,t-117,t-149,t-5,t-37,t-69,t-101,t-133"
        );
    }
}
