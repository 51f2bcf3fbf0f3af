#!/usr/bin/env bash
# The cluster scenario of scripts/bench (issue 28): `kpfs mount --bootstrap-server` over a
# three-broker Apache Kafka 4.3.1 cluster (KRaft, replication factor 3,
# min.insync.replicas=2, as tests/shell/t_cluster_mount.sh starts it), beside kcat against
# the same cluster in the same run:
#   C1 append: `cat FILE >> TOPIC/log` (one write(2) of 1 MiB at a time, each answered
#      when the cluster acknowledged it) against `kcat -P` of the same lines (librdkafka's
#      pipelined producer), both idempotent with acks=all, each to a topic of its own
#   C2 read: `cat TOPIC/log` of a topic the mount has not read yet (its positions learned
#      as it goes) against `kcat -C -e` of the same topic
#   C3 latency of one `echo >> log` (open, write, close) against one
#      kafka-producer-perf-test.sh record at a time (the Java producer's send, awaited
#      before the next at a low rate), p50 and p99
# Run by scripts/bench (scenario `cluster`) as its own process: the cluster comes from the
# shell tests' library, which stops it and unmounts at exit. Prints `key: value` lines.
#
#   KPFS=target/release/kpfs scripts/bench-cluster.sh BYTES ROUNDS ECHOES
set -euo pipefail
BYTES=${1:?BYTES} ROUNDS=${2:?ROUNDS} ECHOES=${3:?ECHOES}
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=tests/shell/lib.sh
. "$root/tests/shell/lib.sh"
# shellcheck source=tests/shell/kafka_lib.sh
. "$root/tests/shell/kafka_lib.sh"

seconds_of() {
    local start end
    start=$(date +%s%N)
    "$@"
    end=$(date +%s%N)
    awk -v ns=$((end - start)) 'BEGIN { printf "%.3f", ns / 1e9 }'
}

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

launch_kafka_cluster 3
new_data_dir work
python3 -c "
import sys
line = b'x' * 99 + b'\n'
with open(sys.argv[1], 'wb') as f:
    f.write(line * (int(sys.argv[2]) // 100))
" "$work/lines" "$BYTES"
records=$(wc -l <"$work/lines")
kafka_cluster_wait
B=$KAFKA_CLUSTER_BOOTSTRAP
mount_kpfs --bootstrap-server "$B"

kcat_produce() { kcat -P -b "$B" -t "$1" -X acks=all -X enable.idempotence=true -X linger.ms=5 <"$work/lines"; }
mount_append() { cat "$work/lines" >>"$MNT/$1/log"; }
kcat_consume() { [ "$(kcat -C -b "$B" -t "$1" -e -q | wc -l)" -eq "$records" ]; }
mount_read() { [ "$(wc -l <"$MNT/$1/log")" -eq "$records" ]; }

# Brokers just started run their JIT's first code, and whichever appends first pays for
# it: with the order alternating over 3 rounds, the mount went first twice (two runs of
# one build gave C1 82% and 73%; with this warm-up 96% and 97%). One untimed append of
# each kind warms them.
mkdir "$MNT/warm-m"
"$KAFKA_BIN/kafka-topics.sh" --bootstrap-server "$B" --create --topic warm-k >/dev/null
mount_append warm-m
kcat_produce warm-k

appends_k=() appends_c=() reads_k=() reads_c=()
for r in $(seq 1 "$ROUNDS"); do
    mkdir "$MNT/m$r"
    "$KAFKA_BIN/kafka-topics.sh" --bootstrap-server "$B" --create --topic "k$r" >/dev/null
    # Alternating which goes first, so that neither always meets a warmer cluster.
    if [ $((r % 2)) -eq 1 ]; then
        appends_k+=("$(seconds_of mount_append "m$r")") appends_c+=("$(seconds_of kcat_produce "k$r")")
    else
        appends_c+=("$(seconds_of kcat_produce "k$r")") appends_k+=("$(seconds_of mount_append "m$r")")
    fi
    # A topic the mount has not looked at: kcat's records, read both ways.
    wait_until 30 test -d "$MNT/k$r" || fail "k$r does not show in the mount"
    if [ $((r % 2)) -eq 1 ]; then
        reads_k+=("$(seconds_of mount_read "k$r")") reads_c+=("$(seconds_of kcat_consume "k$r")")
    else
        reads_c+=("$(seconds_of kcat_consume "k$r")") reads_k+=("$(seconds_of mount_read "k$r")")
    fi
done
echo "records: $records"
echo "append_mount_s: $(median "${appends_k[@]}")"
echo "append_kcat_s: $(median "${appends_c[@]}")"
echo "read_mount_s: $(median "${reads_k[@]}")"
echo "read_kcat_s: $(median "${reads_c[@]}")"

# C3: one record at a time, each awaited.
mkdir "$MNT/echo"
python3 - "$MNT/echo/log" "$ECHOES" <<'EOF'
import sys, time
path, n = sys.argv[1], int(sys.argv[2])
line = b"y" * 99 + b"\n"
took = []
for _ in range(n):
    start = time.perf_counter()
    with open(path, "ab") as f:
        f.write(line)
    took.append(time.perf_counter() - start)
took.sort()
print(f"echo_p50_ms: {took[len(took) // 2] * 1000:.2f}")
print(f"echo_p99_ms: {took[min(len(took) - 1, int(len(took) * 0.99))] * 1000:.2f}")
EOF
"$KAFKA_BIN/kafka-topics.sh" --bootstrap-server "$B" --create --topic java-latency >/dev/null
# 50 records a second: each send is acknowledged (a few ms) long before the next starts.
"$KAFKA_BIN/kafka-producer-perf-test.sh" --topic java-latency --num-records "$ECHOES" \
    --record-size 100 --throughput 50 \
    --producer-props "bootstrap.servers=$B" acks=all linger.ms=0 >"$work/java.log" 2>&1 ||
    fail "kafka-producer-perf-test.sh failed: $(tail -n 3 "$work/java.log")"
# Its last line: "N records sent, ..., X ms 50th, Y ms 95th, Z ms 99th, W ms 99.9th."
awk '/ms 50th/ { for (i = 1; i <= NF; i++) { if ($(i + 1) == "ms" && $(i + 2) == "50th,") p50 = $i
    if ($(i + 1) == "ms" && $(i + 2) == "99th,") p99 = $i } }
    END { print "java_p50_ms: " p50; print "java_p99_ms: " p99 }' "$work/java.log"
umount_kpfs
