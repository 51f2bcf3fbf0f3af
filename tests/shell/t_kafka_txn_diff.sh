# Transactions held against a real Apache Kafka 4.3.1 broker (kafka_lib.sh): one
# deterministic transactional workload (tests/clients/java/KpfsTxnDiff.java: commits and
# aborts of two transactional ids over two partitions between plain and idempotent
# writes, an abort across a segment roll, a transaction aborted by its timeout whose
# producer then writes and commits, a group's offsets sent in committed, aborted and open
# transactions) runs on both at once, and what each broker keeps and answers is compared:
#
# - while two transactions are open, while one is, and at the end: ListOffsets' earliest
#   offset, high watermark and last stable offset (READ_COMMITTED), READ_COMMITTED
#   Fetches' aborted_transactions, last_stable_offset and batches, a READ_UNCOMMITTED
#   Fetch, OffsetFetch of the group's offsets with and without require_stable
#   (kafka_txn_diff.py, raw requests), and kafka-transactions.sh list, describe and
#   describe-producers;
# - at the end, what read_committed and read_uncommitted consumers read and the timed-out
#   producer's error (the workload's output), the partition directories' segment files,
#   kafka-dump-log.sh of the .txnindex files and of the segments (--deep-iteration
#   --print-data-log: batches, markers, producer ids, epochs, sequences), kpfs's own
#   dump-log of kpfs's files against Kafka's tool on the same files, the group's
#   committed offsets, and kafka-dump-log.sh --transaction-log-decoder of
#   __transaction_state (every transition of every transactional id, in Kafka's records).
#
# Both run at transaction.version TXN_DIFF_LEVEL: Kafka 4.3.1's default, 2 (KIP-890 part
# 2: partitions and offsets join a transaction at the producer's first write, every
# commit and abort bumps the epoch), unless set (t_kafka_txn_diff_tv0.sh: 0, the classic
# protocol). Every difference kpfs still has is in KNOWN below with its reason; the test
# fails on one not listed, and on a listed one that went away.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/kafka_lib.sh"
source "$(dirname "$0")/side_by_side.sh"

K=$KAFKA_BIN
PY=$(kafka_python)
new_data_dir W
t_start=$(date +%s)

declare -A KNOWN=()

javac -Xlint:all -Werror -d "$W/classes" -cp "$KAFKA_HOME/libs/*" \
    "$KPFS_ROOT/tests/clients/java/KpfsTxnDiff.java" "$KPFS_ROOT/tests/clients/java/KpfsToolRunner.java" ||
    fail "javac KpfsTxnDiff.java KpfsToolRunner.java failed"

# The topic's segments roll at this many bytes, so that transaction T3 (aborted) spans
# partition 0's first two segments.
SEGMENT_BYTES=1000
TXN_DIFF_LEVEL=${TXN_DIFF_LEVEL:-2}
KAFKA_FEATURES=(transaction.version="$TXN_DIFF_LEVEL")
echo "transaction.version $TXN_DIFF_LEVEL"
# Timed-out transactions looked for twice a second (Kafka's default: every 10 s);
# __transaction_state and __consumer_offsets in one partition each, as kpfs keeps them
# (Kafka's 50 take it seconds to make, and would put the group's offsets in another).
start_kpfs_and_kafka transaction.abort.timed.out.transaction.cleanup.interval.ms=500 \
    transaction.state.log.num.partitions=1 offsets.topic.num.partitions=1
t_brokers=$(date +%s)

# Record timestamps an hour back, the same on both sides (no retention acts on them): the
# batches, their CRCs included, are then the same bytes. A time past BROKER_TIME (ten
# minutes before the run) is a broker's clock: a marker's timestamp, a transaction's start.
T0=$((($(date +%s) - 3600) * 1000))
BROKER_TIME=$((T0 + 3600000 - 600000))

WORKERS=()
for side in kafka kpfs; do
    mkdir "$W/sync-$side"
    case $side in kafka) boot=$KAFKA_BOOTSTRAP ;; kpfs) boot=$KPFS_BOOTSTRAP ;; esac
    java -DsegmentBytes="$SEGMENT_BYTES" -cp "$KAFKA_HOME/libs/*:$W/classes" KpfsTxnDiff \
        "$boot" "$W/sync-$side" "$T0" >"$W/workload.$side.out" 2>"$W/workload.$side.err" &
    WORKERS+=($!)
done
trap 'for p in "${WORKERS[@]}"; do kill "$p" 2>/dev/null || true; done; _kafka_cleanup; _kpfs_cleanup' EXIT

# txn_normalise SIDE: what must differ between the two brokers made the same: their
# bootstrap addresses and log directories; the broker's clock (a number of 13 digits past
# BROKER_TIME: a marker's timestamp, a transaction's start time), and the CRC of a
# control batch and of a __transaction_state batch, which covers its timestamp; the
# duration kafka-transactions.sh describe
# works out from a transaction's start time (kept after its end); the runs
# of spaces kafka-transactions.sh pads its columns with (their widths follow the
# durations' digits).
txn_normalise() {
    local boot logs
    case $1 in
        kafka) boot=$KAFKA_BOOTSTRAP logs=$KAFKA_LOG_DIRS ;;
        kpfs) boot=$KPFS_BOOTSTRAP logs=$KPFS_LOGS ;;
    esac
    perl -pe "s#\Q$logs\E#LOGS#g; s#\Q$boot\E#BOOTSTRAP#g;"' s/\b(\d{13})\b/$1 > '"$BROKER_TIME"' ? "T" : $1/ge;
        $ts = /__transaction_state/ if /^Dumping /;
        s/crc: \d+/crc: C/ if /isControl: true/ || $ts;
        s/^(\S+\s+\S+\s+\S+\s+\S+\s+\S+\s+\S+\s+T\s+)\d+/$1D/ if /^\d+\s/;
        s/ {2,}/ /g'
}

# findings_sorted: kafka-dump-log.sh's findings after its last file ("Non-consecutive
# offsets in FILE" and the lines under it, and the like) in the order of their files'
# names: it prints them in the order of a Java HashMap keyed by each file's absolute
# path, which is not the same in two log directories.
findings_sorted() {
    perl -e 'my (@out, @blocks); my $in = 0;
        while (<STDIN>) {
            if (/^(Non-consecutive offsets in |Mismatches in :|Found .* in :|The following indexed offsets)/) { $in = 1; push @blocks, $_; next }
            if ($in && /^ /) { $blocks[-1] .= $_; next }
            if ($in && /^exit \d+$/) { print sort @blocks; @blocks = (); $in = 0 }
            print;
        }
        print sort @blocks;'
}

PENDING=()
PIDS=()
# start_check NAME CMDLINE: CMDLINE on both sides at once, in the background
# (side_by_side.sh's run_side); finish_checks compares.
start_check() {
    local side
    for side in kafka kpfs; do
        run_side "$side" "$W/$1.$side.raw" "" "$2" &
        PIDS+=($!)
    done
    PENDING+=("$1")
}
# tool_check NAME CLASS ARG...: Kafka's tool CLASS (the class its bin/ script runs) with
# ARGs on both sides, each ARG evaluated on each side (its $BOOTSTRAP, $LOGS): queued for
# finish_checks, which runs a side's tools in one JVM (KpfsToolRunner.java: a JVM's start
# is most of what each tool costs, and the test runs two dozen).
TOOL_RUNS=()
tool_check() {
    local side arg line
    for side in kafka kpfs; do
        line="$1"$'\t'"$2"
        for arg in "${@:3}"; do
            line+=$'\t'"$(env $(side_env "$side") bash -c "echo \"$arg\"")"
        done
        TOOL_RUNS+=("$side $line")
    done
    PENDING+=("$1")
}
finish_checks() {
    local name side run
    for side in kafka kpfs; do
        mkdir -p "$W/tools-$side"
        # shellcheck disable=SC2086 # the JVM's options, split into words
        for run in "${TOOL_RUNS[@]}"; do
            [ "${run%% *}" != "$side" ] || printf '%s\n' "${run#* }"
        done | java $KAFKA_JVM_PERFORMANCE_OPTS -Dlog4j2.configurationFile="$KAFKA_HOME/config/tools-log4j2.yaml" \
            -cp "$KAFKA_HOME/libs/*:$W/classes" KpfsToolRunner "$W/tools-$side" >"$W/tools-$side.out" 2>&1 &
        PIDS+=($!)
    done
    wait "${PIDS[@]}" || fail "a check failed to run: $(tail -n 20 "$W"/tools-*.out)"
    for name in "${PENDING[@]}"; do
        for side in kafka kpfs; do
            [ -e "$W/$name.$side.raw" ] || mv "$W/tools-$side/$name.raw" "$W/$name.$side.raw"
            txn_normalise "$side" <"$W/$name.$side.raw" | findings_sorted >"$W/$name.$side.n"
        done
        compare "$name" "$W/$name.kafka.n" "$W/$name.kpfs.n"
    done
    PENDING=()
    PIDS=()
    TOOL_RUNS=()
}
TXN=org.apache.kafka.tools.TransactionsCommand
DUMP=org.apache.kafka.tools.DumpLogSegments
# measure LABEL [TOOL_CHECK...]: the raw-request checks of kafka_txn_diff.py under LABEL,
# and kafka-transactions.sh's: each TOOL_CHECK is list, describe-ID or producers-pN.
# Started in the background; finish_measures compares.
measure() {
    local label=$1 check
    shift
    mkdir -p "$W/wire"
    "$PY" "$KPFS_ROOT/tests/shell/kafka_txn_diff.py" "$label" "$KAFKA_BOOTSTRAP" "$KPFS_BOOTSTRAP" "$W/wire" txd 2 \
        >"$W/wire.$label.out" 2>&1 &
    PIDS+=($!)
    WIRE_LABELS+=("$label")
    for check in "$@"; do
        case $check in
            list) tool_check "$label-list" $TXN --bootstrap-server '$BOOTSTRAP' list ;;
            describe-*) tool_check "$label-$check" $TXN --bootstrap-server '$BOOTSTRAP' describe --transactional-id "${check#describe-}" ;;
            producers-p*) tool_check "$label-describe-$check" $TXN --bootstrap-server '$BOOTSTRAP' describe-producers --topic txd --partition "${check#producers-p}" ;;
        esac
    done
}
WIRE_LABELS=()
# finish_measures: finish_checks, then kafka_txn_diff.py's checks compared.
finish_measures() {
    local label name
    finish_checks
    for label in "${WIRE_LABELS[@]}"; do
        [ -s "$W/wire/$label.names" ] || fail "kafka_txn_diff.py $label failed: $(tail -n 20 "$W/wire.$label.out")"
        for name in $(cat "$W/wire/$label.names"); do compare "$name" "$W/wire/$name.kafka" "$W/wire/$name.kpfs"; done
    done
    WIRE_LABELS=()
}
at_checkpoint() {
    grep -qx "checkpoint $1" "$W/workload.kafka.out" && grep -qx "checkpoint $1" "$W/workload.kpfs.out"
}
# checkpoint NAME TOOL_CHECK...: measure at the workload's checkpoint NAME.
checkpoint() {
    wait_until 90 at_checkpoint "$1" ||
        fail "the workload did not reach checkpoint $1 on both sides in 90 s: $(tail -n 5 "$W"/workload.*.err)"
    measure "$@"
    finish_measures
    touch "$W/sync-kafka/$1.go" "$W/sync-kpfs/$1.go"
}

# T4 (txd-b) and T5 (txd-a) open.
checkpoint open list describe-txd-a describe-txd-b producers-p0 producers-p1
# T4 committed, T5 open alone (on partition 1).
checkpoint one-open describe-txd-b producers-p0 producers-p1
for side in 0 1; do
    wait "${WORKERS[$side]}" ||
        fail "the workload failed on side $side: $(tail -n 30 "$W"/workload.*.err)"
done
t_workload=$(date +%s)
compare workload "$W/workload.kafka.out" "$W/workload.kpfs.out"
measure end list describe-txd-a describe-txd-b describe-txd-timeout producers-p0 producers-p1
start_check segment-files 'cd $LOGS && ls txd-0 txd-1'
tool_check dump-txnindex $DUMP --files '$(ls $LOGS/txd-*/*.txnindex | paste -sd,)'
tool_check dump-segments $DUMP --deep-iteration --print-data-log --files '$(ls $LOGS/txd-*/*.log | paste -sd,)'
tool_check dump-txnstate $DUMP --transaction-log-decoder --files '$(ls $LOGS/__transaction_state-0/*.log | paste -sd,)'
finish_measures
# kpfs's own dump-log of kpfs's files against Kafka's tool on the same files (above):
# the same paths, so nothing to sort.
for f in txnindex segments; do
    opts=
    [ $f == segments ] && opts="--deep-iteration --print-data-log"
    # shellcheck disable=SC2086
    "$KPFS" dump-log $opts --files "$(ls "$KPFS_LOGS"/txd-*/*."${f/segments/log}" | paste -sd,)" \
        >"$W/kpfs-dump-$f.kpfs.raw" 2>"$W/kpfs-dump-$f.kpfs.err" ||
        fail "kpfs dump-log of the $f failed: $(tail "$W/kpfs-dump-$f.kpfs.err")"
    cat "$W/kpfs-dump-$f.kpfs.err" >>"$W/kpfs-dump-$f.kpfs.raw"
    # Kafka's tool's output without the exit line KpfsToolRunner adds.
    sed '$d' "$W/dump-$f.kpfs.raw" >"$W/kpfs-dump-$f.kafka.raw"
    compare "kpfs-dump-$f" "$W/kpfs-dump-$f.kafka.raw" "$W/kpfs-dump-$f.kpfs.raw"
done
t_checks=$(date +%s)

# The test has teeth only if the workload did what it says: two transactions open at the
# first checkpoint, T3's abort indexed in the segment after the roll, the timed-out
# producer fenced, the offsets of the committed transactions committed (not the aborted
# one's), the transaction log at the level's value version (at level 2 with the
# transactions' client version in it, and markers at the bumped epochs).
expect_eq 2 "$(grep -cw Ongoing "$W/open-list.kafka.n")" "transactions open at the first checkpoint"
expect_contains "$(cat "$W/dump-txnindex.kafka.n")" "00000000000000000013.txnindex
version: 0 producerId: 1 firstOffset: 9 lastOffset: 17 lastStableOffset: 18" "Kafka's .txnindex entries"
expect_contains "$(cat "$W/workload.kafka.out")" "txd-timeout: commit after the timeout: " "the workload's output"
expect_contains "$(cat "$W/workload.kafka.out")" "txd-group offsets: {txd-0=OffsetAndMetadata{offset=2, leaderEpoch=null, metadata='m2'}, txd-1=OffsetAndMetadata{offset=3, leaderEpoch=null, metadata='m3'}}" "the group's offsets"
case $TXN_DIFF_LEVEL in
    0) expect_eq 0 "$(grep -c '"version":"1"' "$W/dump-txnstate.kafka.n")" "TransactionLogValue v1 records at level 0" ;;
    2)
        expect_eq 0 "$(grep -c '"version":"0"' "$W/dump-txnstate.kafka.n")" "TransactionLogValue v0 records at level 2"
        expect_contains "$(cat "$W/dump-txnstate.kafka.n")" '"transactionStatus":4,"transactionPartitions":[],"transactionLastUpdateTimestampMs":T,"transactionStartTimestampMs":T,"clientTransactionVersion":2' "a TV2 commit in the transaction log"
        expect_contains "$(cat "$W/dump-segments.kafka.n")" "producerId: 1 producerEpoch: 1 partitionLeaderEpoch: 0 isTransactional: true isControl: true" "txd-a's first commit marker at the bumped epoch"
        ;;
esac
[ "$(grep -c '^Dumping .*txd-0/.*\.log' "$W/dump-segments.kafka.n")" -ge 2 ] ||
    fail "partition 0 did not roll: $(grep '^Dumping' "$W/dump-segments.kafka.n")"

stop_kafka_broker
kill -TERM "$SERVE_PID"
wait "$SERVE_PID" || true
side_by_side_verdict
echo "${#CHECKS[@]} side-by-side checks, ${#KNOWN[@]} known differences; brokers $((t_brokers - t_start)) s, workload $((t_workload - t_brokers)) s, checks $((t_checks - t_workload)) s more, total $(($(date +%s) - t_start)) s"
