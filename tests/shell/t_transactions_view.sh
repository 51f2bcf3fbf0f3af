# Transactions as the mount shows them: .kpfs/transactions lists the transactional ids
# (Kafka's ListTransactions, as kafka-transactions.sh list prints them), and each id's file
# is what kafka-transactions.sh describe --transactional-id ID prints, byte for byte but
# for TransactionDurationMs (the time between the two reads): committed ids of
# tests/clients/java/KpfsTransactions.java, then a transaction tests/clients/java/
# KpfsTxnHold.java holds open over two topics and __consumer_offsets (its partitions in
# the order Kafka's tool prints them), then aborts. The rest of .kpfs/transactions is
# read-only, with a reason in .kpfs/errors.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/kafka_lib.sh"

new_data_dir scratch
javac -Xlint:all -Werror -d "$scratch/classes" -cp "$KAFKA_HOME/libs/*" \
    "$KPFS_ROOT/tests/clients/java/KpfsTransactions.java" \
    "$KPFS_ROOT/tests/clients/java/KpfsTxnHold.java" || fail "javac of the Java clients failed"
JAVA_CP=$KAFKA_HOME/libs/*:$scratch/classes
mount_kpfs_listening
TDIR=$MNT/.kpfs/transactions

expect_contains "$(ls "$MNT/.kpfs")" "transactions" "ls .kpfs"
expect_eq "" "$(ls "$TDIR")" "ls .kpfs/transactions before any transaction"

# stable: a describe table with its TransactionDurationMs cell (column 8 of the row) out.
stable() { awk -F'\t' 'BEGIN { OFS = "\t" } NR == 2 { $8 = "-" } { print }'; }
# duration: the TransactionDurationMs cell.
duration() { awk -F'\t' 'NR == 2 { gsub(/ /, "", $8); print $8 }'; }
# same_as_kafka ID WHAT: .kpfs/transactions/ID (read first) against kafka-transactions.sh
# describe (run next): every byte the same but the duration, which is the time since the
# transaction started on each one's clock: kpfs's when the file was opened, the tool's
# when it printed. Prints the file.
same_as_kafka() {
    local id=$1 what=$2 file tool
    file=$(cat "$TDIR/$id"; echo .)
    tool=$("$KAFKA_BIN/kafka-transactions.sh" --bootstrap-server "$BOOTSTRAP" describe \
        --transactional-id "$id"; echo .) || fail "kafka-transactions.sh describe $id failed: $tool"
    expect_eq "$(stable <<<"${tool%.}")" "$(stable <<<"${file%.}")" "$what: the file against kafka-transactions.sh describe"
    # The tab after the last cell and the newline that ends each line are Kafka's too.
    expect_eq "${#tool}" "${#file}" "$what: the lengths of the file and of the tool's output"
    local file_ms tool_ms
    file_ms=$(duration <<<"${file%.}")
    tool_ms=$(duration <<<"${tool%.}")
    if [ "$file_ms" != None ] || [ "$tool_ms" != None ]; then
        [[ $file_ms =~ ^[0-9]+$ && $tool_ms =~ ^[0-9]+$ ]] ||
            fail "$what: TransactionDurationMs is no count of ms: file $file_ms, tool $tool_ms"
        # On one clock (not kpfs's alone moved) the tool, reading later, counts more.
        [ -n "${KPFS_DAEMON_CLOCK:-}" ] || [ "$file_ms" -le "$tool_ms" ] ||
            fail "$what: the file's duration $file_ms ms is past the tool's later $tool_ms ms"
    fi
    printf '%s' "${file%.}"
}
# cell N TEXT: the row's cell N without its padding.
cell() { awk -F'\t' -v n="$1" 'NR == 2 { gsub(/ +$/, "", $n); print $n }' <<<"$2"; }

# --- Committed transactions of two ids.
timeout 180 java -cp "$JAVA_CP" KpfsTransactions basic "$BOOTSTRAP" "$DATA" >"$scratch/basic.out" 2>&1 ||
    { tail -n 40 "$scratch/basic.out" >&2; fail "KpfsTransactions basic failed"; }
expect_eq $'java-txn\njava-txn-open' "$(ls "$TDIR")" "ls .kpfs/transactions"
"$KAFKA_BIN/kafka-transactions.sh" --bootstrap-server "$BOOTSTRAP" list >"$scratch/list.out" 2>&1 ||
    fail "kafka-transactions.sh list failed: $(cat "$scratch/list.out")"
expect_eq "$(tail -n +2 "$scratch/list.out" | awk '{ print $1 }' | sort)" "$(ls "$TDIR")" \
    "the ids of kafka-transactions.sh list and of ls .kpfs/transactions"
text=$(same_as_kafka java-txn "java-txn")
expect_eq "CompleteCommit" "$(cell 5 "$text")" "java-txn's TransactionState"
# The coordinator is the node (node.id 1); a completed transaction has no partitions.
expect_eq "1" "$(cell 1 "$text")" "java-txn's CoordinatorId"
expect_eq "" "$(cell 9 "$text")" "java-txn's TopicPartitions"
same_as_kafka java-txn-open "java-txn-open" >/dev/null
size=$(stat -c %s "$TDIR/java-txn")
expect_eq "$size" "$(cat "$TDIR/java-txn" | wc -c)" "java-txn's st_size against what cat reads"

# --- A transaction held open over orders-0, refunds-0 and __consumer_offsets-0.
mkdir "$MNT/orders" "$MNT/refunds"
coproc HOLD { timeout 300 java -cp "$JAVA_CP" KpfsTxnHold "$BOOTSTRAP" held-txn held-group orders refunds 2>&1; }
holder=$HOLD_PID
# Its pipes under names of their own: bash drops HOLD once the holder exits.
exec {hold_out}<&"${HOLD[0]}" {hold_in}>&"${HOLD[1]}"
trap 'kill "$holder" 2>/dev/null || true; _kpfs_cleanup' EXIT
out=
while IFS= read -r -t 120 -u "$hold_out" line; do
    out+=$line$'\n'
    [ "$line" != open ] || break
done
[ "$line" == open ] || fail "KpfsTxnHold opened no transaction: $out"
expect_eq $'held-txn\njava-txn\njava-txn-open' "$(ls "$TDIR")" "ls .kpfs/transactions with held-txn"
text=$(same_as_kafka held-txn "the open held-txn")
expect_eq "Ongoing" "$(cell 5 "$text")" "held-txn's TransactionState"
expect_eq "__consumer_offsets-0,refunds-0,orders-0" "$(cell 9 "$text")" \
    "held-txn's TopicPartitions, in the order of Kafka's tool"
[[ $(cell 7 "$text") =~ ^[0-9]+$ ]] || fail "held-txn has no start time: $text"
started=$(cell 7 "$text")

echo abort >&"$hold_in"
exec {hold_in}>&-
while IFS= read -r -t 120 -u "$hold_out" line; do
    out+=$line$'\n'
done
wait "$holder" || fail "KpfsTxnHold failed: $out"
expect_contains "$out" $'\naborted\n' "KpfsTxnHold's output"
text=$(same_as_kafka held-txn "the aborted held-txn")
expect_eq "CompleteAbort $started" "$(cell 5 "$text") $(cell 7 "$text")" \
    "held-txn's TransactionState and start time once aborted"
expect_eq "" "$(cell 9 "$text")" "held-txn's TopicPartitions once aborted"

# --- Read-only, with a reason in .kpfs/errors.
expect_errno "Permission denied" "echo x > '$TDIR/java-txn'"
expect_rejection ".kpfs/transactions/java-txn"
expect_contains "$(cat "$MNT/.kpfs/errors")" ".kpfs/transactions/java-txn: .kpfs/transactions is read-only: " \
    "the reason in .kpfs/errors"
expect_errno "Operation not permitted" "touch '$TDIR/new-txn'"
expect_rejection ".kpfs/transactions/new-txn"
expect_errno "Operation not permitted" "rm -f '$TDIR/held-txn'"
expect_rejection ".kpfs/transactions/held-txn"
expect_errno "Operation not permitted" "mv '$TDIR/java-txn' '$TDIR/renamed'"
expect_errno "Operation not permitted" "mkdir '$TDIR/dir'"
expect_rejection ".kpfs/transactions/dir"
expect_errno "No such file or directory" "cat '$TDIR/no-such-txn'"
expect_eq $'held-txn\njava-txn\njava-txn-open' "$(ls "$TDIR")" "ls .kpfs/transactions after the refusals"
