# kafka-dump-log.sh (Kafka 4.3.1's DumpLogSegments) beside `kpfs dump-log`, on kpfs's
# partition files and on a real Kafka 4.3.1 broker's after the same workload: the same
# stdout and stderr, byte for byte, for every option, over every kind of batch kpfs
# writes (plain lines, keyed records, tombstones with their delete horizons, each codec,
# idempotent producers, cleaned segments, __consumer_offsets), on a mount's files (lines
# appended with the shell) and on transactions (batches, COMMIT and ABORT markers,
# .txnindex files, producer snapshots of open transactions) that kpfs's engine writes.
# Then the files themselves: the same records produced to both with the same client give
# the same segment and index bytes but for what must differ (CRCs, timestamps, producer
# ids and epochs, and the record timestamp deltas of a batch with a delete horizon, which
# replaced its base timestamp).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/kafka_lib.sh"

K=$KAFKA_BIN
new_data_dir W
t_start=$(date +%s)

# Both brokers: a quick cleaner, so that the compacted topic is cleaned within seconds.
BROKER_CONFIGS=(log.cleaner.backoff.ms=200 group.initial.rebalance.delay.ms=0)
start_kpfs_and_kafka "${BROKER_CONFIGS[@]}"

# index.interval.bytes=1: an index entry for every batch but each segment's first, so
# that the index checks have entries to check.
# batched keeps the default interval: its segment's only batch of three records gets no
# entry, so Kafka's tool reads the preallocated zero entry as one (offset 0, position 0)
# and reports the batch there as ending elsewhere.
TOPICS=(lines keyed gzip snappy lz4 zstd compacted batched)
workload() { # workload BOOTSTRAP LOGS: the same commands on one broker
    local b=$1 logs=$2 t dir pids=() p
    P() { "$K/kafka-console-producer.sh" --bootstrap-server "$b" "$@"; }
    for t in "${TOPICS[@]}"; do
        local configs=(--config index.interval.bytes=1)
        [ "$t" != batched ] || configs=()
        [ "$t" != compacted ] || configs+=(--config cleanup.policy=compact --config segment.ms=2000
            --config min.cleanable.dirty.ratio=0.01 --config delete.retention.ms=86400000)
        "$K/kafka-topics.sh" --bootstrap-server "$b" --create --topic "$t" --partitions 1 "${configs[@]}" >/dev/null &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || { echo "a topic's creation failed"; return 1; }; done
    pids=()
    # The topics but the compacted one, each in the background (JVMs start slowly).
    # One batch per line (--sync, no linger): several batches, so several index entries;
    # then the group's commit of them, for __consumer_offsets.
    { printf 'line-%s\n' 1 2 3 4 5 | P --topic lines --sync --command-property linger.ms=0 &&
        "$K/kafka-console-consumer.sh" --bootstrap-server "$b" --topic lines --group dumper --from-beginning \
            --max-messages 5 >/dev/null 2>&1; } &
    pids+=($!)
    printf 'k1:v1\nk2:v2\nk1:NULL\n' | P --topic keyed --sync --command-property linger.ms=0 \
        --property parse.key=true --property key.separator=: --property null.marker=NULL &
    pids+=($!)
    for codec in gzip snappy lz4 zstd; do
        # A batch of three records (the console producer lingers), compressed.
        printf "$codec-%s\n" a b c | P --topic "$codec" --compression-codec "$codec" &
        pids+=($!)
    done
    printf 'b-%s\n' 1 2 3 | P --topic batched &
    pids+=($!)
    # The compacted topic: three keys twice, a tombstone, then a record in a new segment
    # after segment.ms, so that the first segment is cleaned (the tombstone keeps its
    # delete horizon, a day ahead so that no later pass drops it; the overwritten records
    # go).
    printf 'a:1\nb:1\nc:1\na:2\nb:2\n' | P --topic compacted --sync --command-property linger.ms=0 \
        --property parse.key=true --property key.separator=:
    printf 'c:NULL\n' | P --topic compacted --property parse.key=true --property key.separator=: \
        --property null.marker=NULL
    dir=$logs/compacted-0
    # A produce once segment.ms passed rolls the segment (both roll on the append).
    local t0
    t0=$(date +%s%N)
    wait_until 10 elapsed_ms_since "$t0" 2200
    printf 'd:1\n' | P --topic compacted --property parse.key=true --property key.separator=:
    rolled() { [ "$(ls "$dir" | grep -c '\.log$')" -ge 2 ]; }
    wait_until 30 rolled || { echo "compacted-0 did not roll: $(ls "$dir")"; return 1; }
    # kpfs's own dump reads either side's files, and starts quicker than a JVM.
    cleaned() { "$KPFS" dump-log "$dir/00000000000000000000.log" |
        grep -q '^baseOffset: .* deleteHorizonMs: OptionalLong\['; }
    wait_until 60 cleaned || { echo "compacted-0 was not cleaned: $("$KPFS" dump-log "$dir"/*.log)"; return 1; }
    for p in "${pids[@]}"; do wait "$p" || { echo "a producer or the consumer failed"; return 1; }; done
}
workload "$KPFS_BOOTSTRAP" "$KPFS_LOGS" >"$W/kpfs.workload" 2>&1 &
p1=$!
workload "$KAFKA_BOOTSTRAP" "$KAFKA_LOG_DIRS" >"$W/kafka.workload" 2>&1 &
p2=$!
wait "$p1" || fail "the workload on kpfs failed: $(tail -20 "$W/kpfs.workload")"
wait "$p2" || fail "the workload on Kafka failed: $(tail -20 "$W/kafka.workload")"
t_workload=$(date +%s)
# The files are read while both serve (nothing writes any more): the active segments'
# indexes are preallocated then, as a running broker's are.

# files LOGS: every file kafka-dump-log.sh reads in the workload's partition directories.
files() {
    local t f
    for t in "${TOPICS[@]}"; do
        for f in "$1/$t-0"/*.{log,index,timeindex,snapshot}; do [ ! -e "$f" ] || echo "$f"; done
    done
}
CHECKS=0
DIFFS=()
# compare NAME FILES OPTIONS...: both tools on the same files (comma-separated), stdout
# then stderr. Where Kafka's tool stops with an exception (its message, Java's stack
# trace, exit 1), kpfs stops with the same message as its error (kpfs: FILE: message,
# exit 2; docs/FORMAT.md): both are made "stopped: message".
compare() {
    local name=$1 files=$2
    shift 2
    CHECKS=$((CHECKS + 1))
    { "$K/kafka-dump-log.sh" --files "$files" "$@" 2>&1 || echo "exit $?"; } |
        sed -E -e 's/^Exception in thread "main" [A-Za-z0-9_.$]+: /stopped: /' -e '/^\tat /d' -e 's/^exit 1$/exit/' \
            >"$W/$name.kafka"
    { "$KPFS" dump-log --files "$files" "$@" 2>&1 || echo "exit $?"; } |
        sed -E -e 's#^kpfs: [^:]+: #stopped: #' -e 's/^exit 2$/exit/' >"$W/$name.kpfs"
    cmp -s "$W/$name.kafka" "$W/$name.kpfs" || DIFFS+=("$name")
}
for side in kpfs kafka; do
    case $side in kpfs) logs=$KPFS_LOGS ;; kafka) logs=$KAFKA_LOG_DIRS ;; esac
    all=$(files "$logs" | paste -sd,)
    [ -n "$all" ] || fail "no partition files in $logs"
    compare "$side-plain" "$all"
    compare "$side-deep" "$all" --deep-iteration
    compare "$side-data" "$all" --print-data-log
    # The time indexes apart: Kafka's check stops at the first preallocated one with
    # entries (its last entry, zero, is "less than the first timestamp").
    compare "$side-sanity" "$(files "$logs" | grep -v '\.timeindex$' | paste -sd,)" --index-sanity-check
    compare "$side-sanity-time" "$(files "$logs" | grep '\.timeindex$' | paste -sd,)" --index-sanity-check
    compare "$side-verify" "$(files "$logs" | grep -E '\.(index|timeindex)$' | paste -sd,)" --verify-index-only
    compare "$side-max-bytes" "$(files "$logs" | grep '\.log$' | paste -sd,)" --deep-iteration --max-bytes 300
    offsets=$(ls "$logs"/__consumer_offsets-*/00000000000000000000.log | while read -r f; do
        [ "$(stat -c %s "$f")" -eq 0 ] || echo "$f"; done | paste -sd,)
    [ -n "$offsets" ] || fail "$side: no __consumer_offsets segment holds the group's commits"
    compare "$side-offsets-decoder" "$offsets" --offsets-decoder
done
# The batches only a mount writes: lines appended with the shell, keyless and keyed
# (kpfs's parse.key, key.separator and null.marker topic configs), a tombstone among them.
mount_kpfs
mkdir "$MNT/shell-lines" "$MNT/shell-keyed"
echo index.interval.bytes=1 >"$MNT/shell-lines/config"
printf 'index.interval.bytes=1\nparse.key=true\nkey.separator=:\nnull.marker=NULL\n' >"$MNT/shell-keyed/config"
for i in 1 2 3; do printf 'a line %s\nand another\n' "$i" >>"$MNT/shell-lines/log"; done
printf 'k1:v1\nk2:v2\n' >>"$MNT/shell-keyed/log"
printf 'k1:NULL\n' >>"$MNT/shell-keyed/log"
shell_files=$(for f in "$DATA"/shell-{lines,keyed}-0/*.{log,index,timeindex}; do echo "$f"; done | paste -sd,)
compare mount-plain "$shell_files"
compare mount-data "$shell_files" --print-data-log
compare mount-verify "$(tr , '\n' <<<"$shell_files" | grep -v '\.log$' | paste -sd,)" --verify-index-only
grep -q "^offset: [1-9][0-9]* position: [1-9]" "$W/mount-plain.kafka" || fail "mount: no index entries dumped"
# Transactions, which no client can make on kpfs yet (it has no transaction coordinator):
# examples/txn_files writes them through the engine, markers as a coordinator would.
txn_writer=$KPFS_ROOT/target/debug/examples/txn_files
[ -x "$txn_writer" ] || fail "no $txn_writer (cargo build --examples --features internals first)"
new_data_dir TXN
"$txn_writer" "$TXN"
txn_files=$(for f in "$TXN"/txn-0/*.{log,index,timeindex,txnindex,snapshot}; do echo "$f"; done | paste -sd,)
compare txn-plain "$txn_files"
compare txn-data "$txn_files" --print-data-log
compare txn-sanity "$txn_files" --index-sanity-check
grep -q " isTransactional: true isControl: true " "$W/txn-plain.kafka" || fail "txn: no marker dumped"
grep -q " endTxnMarker: ABORT coordinatorEpoch: 3$" "$W/txn-data.kafka" || fail "txn: no ABORT record dumped"
grep -q "^version: 0 producerId: 3000 firstOffset: 8 lastOffset: 11 lastStableOffset: 10$" "$W/txn-plain.kafka" ||
    fail "txn: no aborted transaction dumped"
grep -q " currentTxnFirstOffset: OptionalLong\[13\] " "$W/txn-plain.kafka" || fail "txn: no open transaction dumped"
for name in "${DIFFS[@]}"; do
    echo "kpfs dump-log differs from kafka-dump-log.sh in $name (< Kafka, > kpfs):" >&2
    diff "$W/$name.kafka" "$W/$name.kpfs" >&2 || true
done
[ "${#DIFFS[@]}" -eq 0 ] || fail "kpfs dump-log differs from kafka-dump-log.sh: ${DIFFS[*]}"
# The checks had something to check: index entries, delete horizons, each codec, gaps.
for side in kpfs kafka; do
    grep -q "^offset: [1-9][0-9]* position: [1-9]" "$W/$side-plain.kafka" || fail "$side: no index entries dumped"
    grep -q "deleteHorizonMs: OptionalLong\[" "$W/$side-plain.kafka" || fail "$side: no delete horizon"
    for codec in gzip snappy lz4 zstd; do
        grep -q "compresscodec: $codec " "$W/$side-plain.kafka" || fail "$side: no $codec batch"
    done
    grep -q "^Non-consecutive offsets in " "$W/$side-deep.kafka" || fail "$side: no offset gap after cleaning"
    grep -q '"type":"1"' "$W/$side-offsets-decoder.kafka" || fail "$side: no committed offset decoded"
    grep -q "^  Index offset: 0, log offset: 2$" "$W/$side-plain.kafka" || fail "$side: no index mismatch"
    grep -q "^Indexed offset: 0, found log offset: 2$" "$W/$side-plain.kafka" || fail "$side: no time index miss"
done
t_dumps=$(date +%s)
stop_kafka_broker
kill -TERM "$SERVE_PID"
wait "$SERVE_PID" || true

# --- The files themselves. masked FILE: its batches with what must differ between two
# brokers zeroed (partition leader epoch aside, which both start at 0): CRC, base and max
# timestamps (a delete horizon is the base timestamp), producer id and epoch.
masked() {
    python3 - "$1" <<'EOF'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
if sys.argv[1].endswith(".log"):
    def varint_end(at):
        while data[at] & 0x80:
            at += 1
        return at + 1
    pos = 0
    while pos + 61 <= len(data):
        size = int.from_bytes(data[pos + 8:pos + 12], "big") + 12
        for start, end in ((17, 21), (27, 43), (43, 53)):
            data[pos + start:pos + end] = bytes(end - start)
        # A delete horizon is the base timestamp: the records' timestamp deltas follow it.
        if data[pos + 22] & 0x40 and not data[pos + 22] & 0x07:
            at = pos + 61
            for _ in range(int.from_bytes(data[pos + 57:pos + 61], "big")):
                length_end = varint_end(at)
                delta_at = length_end + 1
                delta_end = varint_end(delta_at)
                data[delta_at:delta_end] = bytes(delta_end - delta_at)
                # The record's length (zigzag varint) is what follows it.
                n, shift = 0, 0
                for b in data[at:length_end]:
                    n |= (b & 0x7F) << shift
                    shift += 7
                at = length_end + ((n >> 1) ^ -(n & 1))
        pos += size
else:
    # An active segment's index is preallocated on both sides: its entries only.
    data = data.rstrip(b"\0")
sys.stdout.write(data.hex() + "\n")
EOF
}
for f in lines-0/00000000000000000000.log keyed-0/00000000000000000000.log compacted-0/00000000000000000000.log \
    lines-0/00000000000000000000.index compacted-0/00000000000000000000.index; do
    CHECKS=$((CHECKS + 1))
    a=$(masked "$KAFKA_LOG_DIRS/$f")
    [ "$a" != "" ] || fail "Kafka's $f is empty"
    expect_eq "$a" "$(masked "$KPFS_LOGS/$f")" "$f's bytes on Kafka (expected) and kpfs (got), masked"
done
echo "$CHECKS checks; workload $((t_workload - t_start)) s, dumps $((t_dumps - t_workload)) s, total $(($(date +%s) - t_start)) s"
