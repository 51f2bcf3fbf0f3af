# Transactions with Apache Kafka's Java client (kafka-clients 4.3.1) against `kpfs serve`:
# tests/clients/java/KpfsTransactions.java commits and aborts, read_committed and
# read_uncommitted consumers read what Kafka's would, and an open transaction holds
# read_committed readers back until its commit. Kafka's own kafka-transactions.sh lists
# and describes the transactional ids, and kafka-dump-log.sh reads kpfs's markers and
# .txnindex. Then a consume-transform-produce loop with sendOffsetsToTransaction is killed
# with SIGKILL mid-way, kpfs too, both restarted: every input record's output appears
# exactly once. It writes the Java client's `transactions` row of the client matrix.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/kafka_lib.sh"

new_data_dir scratch
new_data_dir DATA
rows=$(matrix_file java-kafka-clients-4.3.1 t_kafka_transactions)
javac -Xlint:all -Werror -d "$scratch/classes" -cp "$KAFKA_HOME/libs/*" \
    "$KPFS_ROOT/tests/clients/java/KpfsTransactions.java" || fail "javac KpfsTransactions.java failed"
TXN_CLIENT=(java -cp "$KAFKA_HOME/libs/*:$scratch/classes" KpfsTransactions)
K=$KAFKA_BIN

serve_kpfs_listening "$scratch/serve.log" "$DATA"
timeout 180 "${TXN_CLIENT[@]}" basic "$BOOTSTRAP" "$DATA" >"$scratch/basic.out" 2>&1 ||
    { tail -n 40 "$scratch/basic.out" >&2; fail "KpfsTransactions basic failed"; }
grep '^ok: ' "$scratch/basic.out"

# Kafka's tools on what kpfs keeps.
"$K/kafka-transactions.sh" --bootstrap-server "$BOOTSTRAP" list >"$scratch/list.out" 2>&1 ||
    fail "kafka-transactions.sh list failed: $(cat "$scratch/list.out")"
expect_contains "$(cat "$scratch/list.out")" "TransactionalId" "kafka-transactions.sh list's header"
expect_eq "CompleteCommit" "$(awk '$1 == "java-txn" { print $4 }' "$scratch/list.out")" \
    "java-txn's state as kafka-transactions.sh list prints it ($(cat "$scratch/list.out"))"
"$K/kafka-transactions.sh" --bootstrap-server "$BOOTSTRAP" describe --transactional-id java-txn \
    >"$scratch/describe.out" 2>&1 || fail "kafka-transactions.sh describe failed: $(cat "$scratch/describe.out")"
expect_contains "$(cat "$scratch/describe.out")" "CompleteCommit" "kafka-transactions.sh describe"
"$K/kafka-dump-log.sh" --deep-iteration --files "$DATA/txn-basic-0/00000000000000000000.log" >"$scratch/dump.out" 2>&1 ||
    fail "kafka-dump-log.sh failed: $(cat "$scratch/dump.out")"
expect_eq 4 "$(grep -c 'isTransactional: true isControl: true' "$scratch/dump.out")" "marker batches Kafka's tool reads (three of java-txn, one of java-txn-open)"
expect_eq 1 "$(grep -c 'endTxnMarker: ABORT coordinatorEpoch: 0' "$scratch/dump.out")" "ABORT markers"
expect_eq 3 "$(grep -c 'endTxnMarker: COMMIT coordinatorEpoch: 0' "$scratch/dump.out")" \
    "COMMIT markers (two of java-txn, one of java-txn-open)"
"$K/kafka-dump-log.sh" --files "$DATA/txn-basic-0/00000000000000000000.txnindex" >"$scratch/txnindex.out" 2>&1 ||
    fail "kafka-dump-log.sh of the .txnindex failed: $(cat "$scratch/txnindex.out")"
expect_contains "$(cat "$scratch/txnindex.out")" "firstOffset: 11 lastOffset: 16 lastStableOffset: 17" \
    "the aborted transaction as Kafka's tool reads kpfs's .txnindex"

# Consume-transform-produce, SIGKILLed mid-way with kpfs, then restarted.
N=60
timeout 120 "${TXN_CLIENT[@]}" seed "$BOOTSTRAP" ctp-in "$N" >"$scratch/seed.out" 2>&1 ||
    fail "seeding ctp-in failed: $(tail -n 20 "$scratch/seed.out")"
"${TXN_CLIENT[@]}" transform "$BOOTSTRAP" ctp-in ctp-out >"$scratch/transform1.out" 2>&1 &
worker=$!
wait_until 60 grep -q '^committed 20$' "$scratch/transform1.out" ||
    fail "the transformer committed no 21 records in 60 s: $(tail -n 20 "$scratch/transform1.out")"
kill -9 "$worker" "$SERVE_PID"
wait "$worker" 2>/dev/null || true
wait "$SERVE_PID" 2>/dev/null || true
committed_before=$(grep -c '^committed ' "$scratch/transform1.out")
serve_kpfs_listening "$scratch/serve2.log" "$DATA"
timeout 240 "${TXN_CLIENT[@]}" transform "$BOOTSTRAP" ctp-in ctp-out >"$scratch/transform2.out" 2>&1 ||
    { tail -n 40 "$scratch/transform2.out" >&2; fail "the restarted transformer failed"; }
timeout 120 "${TXN_CLIENT[@]}" verify "$BOOTSTRAP" ctp-in ctp-out "$N" >"$scratch/verify.out" 2>&1 ||
    { cat "$scratch/verify.out" >&2; fail "exactly-once verification failed"; }
grep '^ok: ' "$scratch/verify.out"
echo "killed after $committed_before commits; the restarted transformer went on from the group's offset"
matrix_row "$rows" transactions pass "commit, abort, read_committed; consume-transform-produce exactly once across kill -9 of the client and kpfs"
