# `kpfs mount --bootstrap-server` over a real Apache Kafka 4.3.1 cluster of three brokers
# (KRaft, replication factor 3, min.insync.replicas=2): the same tree as the local mount,
# served by the cluster. Kafka's own tools check each side: appends through the mount
# read by kafka-console-consumer.sh (partition per key as Kafka's default partitioner),
# records of kafka-console-producer.sh read through the mount, `tail -f` of the mount
# with no line lost or repeated while the partition leader's broker is killed with
# kill -9 and later restarted, the config files against kafka-configs.sh, status's sizes
# against kafka-log-dirs.sh, consumer groups against kafka-consumer-groups.sh,
# transactions against kafka-transactions.sh, mkdir/rmdir against kafka-topics.sh, and a
# client producing beside the mount's writer.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/kafka_lib.sh"

started=$(date +%s)
launch_kafka_cluster 3 group.initial.rebalance.delay.ms=0
new_data_dir scratch
kafka_cluster_wait
echo "cluster of 3 up $(($(date +%s) - started)) s after the start: $KAFKA_CLUSTER_BOOTSTRAP"
B=$KAFKA_CLUSTER_BOOTSTRAP
PY=$(kafka_python)

# lines_at_least N FILE [PATTERN]: FILE has N lines (matching PATTERN) or more.
lines_at_least() { [ "$(grep -c -- "${3:-}" "$2")" -ge "$1" ]; }

# --command-config takes client properties as Kafka's tools do; one the client does not
# know fails the mount with its name, and nothing is mounted.
printf 'client.id=kpfs-cluster-test\nbogus.property=1\n' >"$scratch/bad.properties"
new_data_dir bad_data
new_mountpoint bad_mnt
err=$("$KPFS" mount "$bad_mnt" --data-dir "$bad_data" --bootstrap-server "$B" \
    --command-config "$scratch/bad.properties" 2>&1) && fail "a mount with bogus.property succeeded"
expect_contains "$err" "bogus.property" "kpfs mount's refusal of an unknown client property"
! mountpoint -q "$bad_mnt" || fail "$bad_mnt is mounted after a refused mount"

printf 'client.id=kpfs-cluster-test\nrequest.timeout.ms=20000\n' >"$scratch/client.properties"
mount_kpfs --bootstrap-server "$B" --command-config "$scratch/client.properties"
[ -d "$MNT/.kpfs" ] || fail "no .kpfs in the cluster mount"

# mkdir is CreateTopics with the cluster's defaults: 1 partition, replication factor 3.
mkdir "$MNT/orders"
described=$("$KAFKA_BIN/kafka-topics.sh" --bootstrap-server "$B" --describe --topic orders)
expect_contains "$described" "PartitionCount: 1" "kafka-topics.sh --describe orders"
expect_contains "$described" "ReplicationFactor: 3" "kafka-topics.sh --describe orders"
expect_eq "config events log log_start_offset partitions status" "$(ls "$MNT/orders" | xargs)" \
    "a cluster topic's files (no segments/: the brokers keep them)"
expect_errno "File exists" "mkdir '$MNT/orders'"

# A topic of three partitions made by Kafka's tool shows up, with its partitions.
"$KAFKA_BIN/kafka-topics.sh" --bootstrap-server "$B" --create --topic clicks --partitions 3 >/dev/null
wait_until 10 test -d "$MNT/clicks" || fail "clicks made by kafka-topics.sh does not show"
expect_eq "0 1 2" "$(ls "$MNT/clicks/partitions" | xargs)" "partitions of clicks"

# Appends through the mount, keyed: each record where Kafka's default partitioner sends
# its key, as kafka-console-consumer.sh reports it.
printf 'parse.key=true\nkey.separator=:\n' >>"$MNT/clicks/config"
for k in alice bob carol dave erin frank; do echo "$k:clicked-$k" >>"$MNT/clicks/log"; done
"$KAFKA_BIN/kafka-console-consumer.sh" --bootstrap-server "$B" --topic clicks --from-beginning \
    --max-messages 6 --timeout-ms 30000 --formatter-property print.key=true --formatter-property print.partition=true \
    --formatter-property key.separator=: 2>/dev/null | sed 's/^Partition://' | sort >"$scratch/consumed"
# Kafka's producer on the same keys picks the same partitions.
printf 'alice:x\nbob:x\ncarol:x\ndave:x\nerin:x\nfrank:x\n' |
    "$KAFKA_BIN/kafka-console-producer.sh" --bootstrap-server "$B" --topic clicks \
        --reader-property parse.key=true --reader-property key.separator=: >/dev/null 2>&1
"$KAFKA_BIN/kafka-console-consumer.sh" --bootstrap-server "$B" --topic clicks --from-beginning \
    --max-messages 12 --timeout-ms 30000 --formatter-property print.key=true --formatter-property print.partition=true \
    --formatter-property key.separator=: 2>/dev/null | sed 's/^Partition://' >"$scratch/all"
for k in alice bob carol dave erin frank; do
    mine=$(awk -F: -v k="$k" '$2 == k && $3 != "x" { print $1 }' "$scratch/all")
    java=$(awk -F: -v k="$k" '$2 == k && $3 == "x" { print $1 }' "$scratch/all")
    [ -n "$mine" ] || fail "the consumer did not get $k's record from the mount"
    expect_eq "$java" "$mine" "partition of key $k: Kafka's producer against the mount"
done
expect_eq 6 "$(wc -l <"$scratch/consumed")" "records appended through the mount"

# ... and the reverse: what Kafka's producer wrote, read through the mount, per partition
# and in the topic's stream.
wait_until 30 lines_at_least 12 "$MNT/clicks/log" || fail "clicks/log has $(wc -l <"$MNT/clicks/log") lines, not 12"
expect_eq "$(grep -c ':x$' "$MNT/clicks/log")" 6 "the console producer's records in clicks/log"
for p in 0 1 2; do
    want=$(awk -F: -v p="$p" '$1 == p { print $2 ":" $3 }' "$scratch/all")
    expect_eq "$want" "$(cat "$MNT/clicks/partitions/$p/log")" "clicks/partitions/$p/log"
done
# A keyless line on a topic that parses keys is the console producer's refusal.
expect_errno "Invalid argument" "echo no-separator >>'$MNT/clicks/log'"
expect_contains "$(cat "$MNT/.kpfs/errors")" "No key separator found on line number 1" ".kpfs/errors"

# A bulk write: `cat` of 3 MiB of keyed lines, a thousand records and more per write(2)
# (the producer that lingers, cluster/mod.rs BULK_RECORDS), queued a write at a time.
# Every record once, in write order within each partition, each key in one partition.
"$KAFKA_BIN/kafka-topics.sh" --bootstrap-server "$B" --create --topic bulk --partitions 3 >/dev/null
wait_until 10 test -d "$MNT/bulk" || fail "bulk made by kafka-topics.sh does not show"
printf 'parse.key=true\nkey.separator=:\n' >>"$MNT/bulk/config"
python3 -c '
import sys
with open(sys.argv[1], "w") as f:
    for i in range(30000):
        f.write(f"k{i % 97}:{i:090d}\n")
' "$scratch/bulk"
cat "$scratch/bulk" >>"$MNT/bulk/log" || fail "cat >> bulk/log failed"
for p in 0 1 2; do
    kcat -C -b "$B" -t bulk -p "$p" -e -q -f '%k:%s\n' >"$scratch/bulk.$p" 2>/dev/null ||
        fail "kcat -C of bulk partition $p failed"
    cmp "$scratch/bulk.$p" "$MNT/bulk/partitions/$p/log" ||
        fail "bulk/partitions/$p/log differs from what kcat consumed of partition $p"
    # Within a partition, the records in the order of the write.
    sort -t: -k2 "$scratch/bulk.$p" | cmp -s - "$scratch/bulk.$p" ||
        fail "bulk partition $p is not in write order"
done
expect_eq "$(sort "$scratch/bulk" | md5sum)" "$(sort "$scratch"/bulk.[012] | md5sum)" \
    "the records of bulk's partitions against the lines written"
expect_eq 97 "$(cut -d: -f1 "$scratch"/bulk.[012] | sort -u | wc -l)" "keys of bulk"
expect_eq 97 "$(for p in 0 1 2; do cut -d: -f1 "$scratch/bulk.$p" | sort -u; done | wc -l)" \
    "keys of bulk counted per partition (each key in one)"

# A topic larger than the lines the mount keeps (32 MiB): read whole while the mount
# learns its positions, then again, when its older lines are fetched from the cluster
# again; both byte for byte what kcat produced, every line distinct.
python3 -c '
import sys
with open(sys.argv[1], "w") as f:
    for i in range(420000):
        f.write(f"{i:099d}\n")
' "$scratch/big"
"$KAFKA_BIN/kafka-topics.sh" --bootstrap-server "$B" --create --topic big --partitions 2 >/dev/null
kcat -P -b "$B" -t big -p 1 -X acks=all <"$scratch/big" 2>/dev/null || fail "kcat -P of big failed"
wait_until 10 test -d "$MNT/big" || fail "big does not show in the mount"
cmp "$scratch/big" "$MNT/big/log" || fail "big/log differs from what kcat produced"
cmp "$scratch/big" "$MNT/big/partitions/1/log" || fail "big/partitions/1/log read again differs"
cmp "$scratch/big" "$MNT/big/log" || fail "big/log read again differs"
expect_eq "" "$(cat "$MNT/big/partitions/0/log")" "big/partitions/0/log"

# Configs: written through the mount, seen by kafka-configs.sh, and the reverse; the
# cluster's own refusal of a bad value changes nothing.
echo retention.ms=3600000 >>"$MNT/orders/config"
expect_contains "$("$KAFKA_BIN/kafka-configs.sh" --bootstrap-server "$B" --describe --topic orders)" \
    "retention.ms=3600000" "kafka-configs.sh after a write to orders/config"
"$KAFKA_BIN/kafka-configs.sh" --bootstrap-server "$B" --alter --topic orders \
    --add-config max.message.bytes=200000 >/dev/null
expect_contains "$(cat "$MNT/orders/config")" "max.message.bytes=200000" "orders/config"
expect_contains "$(cat "$MNT/orders/config")" "retention.ms=3600000" "orders/config"
expect_errno "Invalid argument" "echo retention.ms=soon >>'$MNT/orders/config'"
expect_contains "$(cat "$MNT/orders/config")" "retention.ms=3600000" "orders/config after a refusal"
# A change names only the keys it sets (IncrementalAlterConfigs): another writer's
# override stays. `>` makes the lines the whole set: an override left out is deleted; a
# refused rewrite deletes nothing.
echo segment.ms=7200000 >>"$MNT/orders/config"
topic_configs() { "$KAFKA_BIN/kafka-configs.sh" --bootstrap-server "$B" --describe --topic orders; }
for config in retention.ms=3600000 max.message.bytes=200000 segment.ms=7200000; do
    expect_contains "$(topic_configs)" "$config" "kafka-configs.sh after segment.ms was added through the mount"
done
grep -v '^max.message.bytes=' "$MNT/orders/config" >"$scratch/orders.config"
cat "$scratch/orders.config" >"$MNT/orders/config"
lacks_max_message_bytes() { ! topic_configs | grep -q max.message.bytes=200000; }
wait_until 10 lacks_max_message_bytes || fail "max.message.bytes stays on the cluster after a rewrite without it"
expect_errno "Invalid argument" "printf 'retention.ms=soon\\n' >'$MNT/orders/config'"
for config in retention.ms=3600000 segment.ms=7200000; do
    expect_contains "$(topic_configs)" "$config" "kafka-configs.sh after a refused rewrite"
done

# .kpfs/config: the cluster-wide default broker configs (kafka-configs.sh --entity-default)
# and, after "# per-broker overrides", those of the broker with the lowest id.
broker_configs() { "$KAFKA_BIN/kafka-configs.sh" --bootstrap-server "$B" --describe --entity-type brokers "$@"; }
echo log.cleaner.threads=2 >>"$MNT/.kpfs/config"
expect_contains "$(broker_configs --entity-default)" "log.cleaner.threads=2" \
    "kafka-configs.sh --entity-default after a write to .kpfs/config"
printf '# per-broker overrides\nlog.cleaner.backoff.ms=20000\n' >>"$MNT/.kpfs/config"
expect_contains "$(broker_configs --entity-name 1)" "log.cleaner.backoff.ms=20000" \
    "kafka-configs.sh --entity-name 1 after a per-broker line in .kpfs/config"
"$KAFKA_BIN/kafka-configs.sh" --bootstrap-server "$B" --alter --entity-type brokers --entity-default \
    --add-config log.retention.ms=86400000 >/dev/null
level_of() { # the section of .kpfs/config a key=value line is in: default or broker
    awk -v line="$1" '/^# per-broker overrides$/ { level = "broker" } /^# defaults$/ { exit }
        $0 == line { print level ? level : "default" }' "$MNT/.kpfs/config"
}
shows_at() { [ "$(level_of "$2")" == "$1" ]; }
wait_until 10 shows_at default log.retention.ms=86400000 || fail ".kpfs/config lacks the default log.retention.ms kafka-configs.sh set"
wait_until 10 shows_at broker log.cleaner.backoff.ms=20000 || fail ".kpfs/config lacks broker 1's log.cleaner.backoff.ms"
expect_eq default "$(level_of log.cleaner.threads=2)" "the level of log.cleaner.threads in .kpfs/config"
# The cluster's own rule refuses a rewrite without min.insync.replicas (Kafka 4's ELR),
# with its text; neither level changes.
expect_errno "Invalid argument" "printf '# overrides\\n' >'$MNT/.kpfs/config'"
expect_contains "$(cat "$MNT/.kpfs/errors")" "Cluster-level min.insync.replicas cannot be removed while ELR is enabled" \
    ".kpfs/errors after a rewrite of .kpfs/config without min.insync.replicas"
expect_contains "$(broker_configs --entity-default)" "log.cleaner.threads=2" "the default level after a refused rewrite"
expect_contains "$(broker_configs --entity-name 1)" "log.cleaner.backoff.ms=20000" "broker 1 after a refused rewrite"

# tail -f through the mount while the partition's leader is killed with kill -9 and
# restarted: every line once, in order. The mount's writer and Kafka's producer write to
# the same topic meanwhile.
N=600
leader=$(kafka_cluster_leader orders 0)
tail -n +1 -f "$MNT/orders/log" >"$scratch/tail" 2>&1 &
tail_pid=$!
(
    # Paced, so the leader's death and return fall in the middle of the stream.
    for i in $(seq 1 "$N"); do echo "m-$i" >>"$MNT/orders/log" || exit 1; sleep 0.02; done
) &
writer=$!
wait_until 60 lines_at_least 20 "$scratch/tail" '^m-' || fail "tail -f shows $(grep -c '^m-' "$scratch/tail") lines after 60 s"
echo "killing the leader of orders-0, node $leader, after $(grep -c '^m-' "$scratch/tail") lines"
kafka_cluster_kill "$leader"
seq 1 50 | sed 's/^/java-/' |
    "$KAFKA_BIN/kafka-console-producer.sh" --bootstrap-server "$B" --topic orders \
        --producer-property acks=all >/dev/null 2>&1 || fail "the console producer failed with a broker down"
wait_until 120 lines_at_least 300 "$scratch/tail" '^m-' || fail "tail -f stalled at $(grep -c '^m-' "$scratch/tail") lines with node $leader down"
kafka_cluster_start "$leader"
echo "node $leader back after $(grep -c '^m-' "$scratch/tail") lines"
wait "$writer" || fail "an append through the mount failed"
wait_until 60 lines_at_least $((N + 50)) "$scratch/tail" || fail "tail -f shows $(wc -l <"$scratch/tail") lines, not $((N + 50))"
kill "$tail_pid"
expect_eq "$(seq 1 "$N" | sed 's/^/m-/')" "$(grep '^m-' "$scratch/tail")" "the mount's lines in tail -f, in order, once each"
expect_eq "$(seq 1 50 | sed 's/^/java-/')" "$(grep '^java-' "$scratch/tail")" "the console producer's lines in tail -f"
expect_eq "$(cat "$scratch/tail")" "$(cat "$MNT/orders/log")" "orders/log read again"
"$KAFKA_BIN/kafka-console-consumer.sh" --bootstrap-server "$B" --topic orders --from-beginning \
    --max-messages $((N + 50)) --timeout-ms 30000 2>/dev/null | sort >"$scratch/orders.kafka"
expect_eq "$(sort "$scratch/tail")" "$(cat "$scratch/orders.kafka")" "orders as Kafka's consumer reads it (no duplicate from the idempotent producer)"
expect_contains "$(cat "$MNT/orders/status")" "log_end_offset" "orders/status"

# Groups: a consumer group's committed offsets and lag, as kafka-consumer-groups.sh.
"$KAFKA_BIN/kafka-console-consumer.sh" --bootstrap-server "$B" --topic clicks --group readers \
    --from-beginning --max-messages 12 --timeout-ms 30000 >/dev/null 2>&1
wait_until 10 test -d "$MNT/.kpfs/groups/readers" || fail "group readers does not show"
offsets=$(cat "$MNT/.kpfs/groups/readers/offsets")
for p in 0 1 2; do
    end=$(awk -F: -v p="$p" '$1 == p' "$scratch/all" | wc -l)
    row=$(awk -v p="$p" '$2 == "clicks" && $3 == p { print $4, $5, $6 }' <<<"$offsets")
    expect_eq "$end $end 0" "$row" "readers' offset, end and lag of clicks-$p"
done
for p in 0 1 2; do
    end=$(awk -F: -v p="$p" '$1 == p' "$scratch/all" | wc -l)
    expect_eq "$end" "$(metric "kpfs_log_end_offset{topic=\"clicks\",partition=\"$p\"}")" \
        "kpfs_log_end_offset of clicks-$p in .kpfs/metrics"
done
rmdir "$MNT/.kpfs/groups/readers"
expect_eq "" "$("$KAFKA_BIN/kafka-consumer-groups.sh" --bootstrap-server "$B" --list 2>/dev/null | grep -x readers)" \
    "kafka-consumer-groups.sh --list after rmdir"

# status: each partition's size on its leader's disk, as kafka-log-dirs.sh reports it.
"$KAFKA_BIN/kafka-log-dirs.sh" --bootstrap-server "$B" --describe --topic-list clicks |
    grep '^{' >"$scratch/log-dirs.json"
status=$(cat "$MNT/clicks/status")
total=0
for p in 0 1 2; do
    leader=$(kafka_cluster_leader clicks "$p")
    size=$("$PY" -c '
import json, sys
brokers = json.load(open(sys.argv[1]))["brokers"]
print(sum(p["size"] for b in brokers if b["broker"] == int(sys.argv[2])
          for d in b["logDirs"] for p in d["partitions"] if p["partition"] == sys.argv[3]))
' "$scratch/log-dirs.json" "$leader" "clicks-$p")
    [ "$size" -gt 0 ] || fail "kafka-log-dirs.sh shows clicks-$p empty on node $leader"
    expect_eq "$leader $size" "$(awk -v p="$p" '$1 == p && NF == 8 { print $2, $7 }' <<<"$status")" \
        "the leader and size_bytes of clicks-$p in clicks/status"
    expect_eq "$size" "$(awk '$1 == "size_bytes:" { print $2 }' "$MNT/clicks/partitions/$p/status")" \
        "size_bytes in clicks/partitions/$p/status"
    expect_eq "$size" "$(metric "kpfs_log_size_bytes{topic=\"clicks\",partition=\"$p\"}")" \
        "kpfs_log_size_bytes of clicks-$p in .kpfs/metrics"
    total=$((total + size))
done
expect_contains "$status" "size_bytes: $total" "clicks/status's total size"

# .kpfs/transactions/: the cluster's transactional ids, each as kafka-transactions.sh
# describe prints it (the duration column is the time of the asking).
mkdir "$MNT/txns"
"$PY" "$KPFS_ROOT/tests/shell/confluent_client.py" transactional "$B" mover-txn txns >"$scratch/txn.out" 2>&1 ||
    fail "the transactional producer failed: $(cat "$scratch/txn.out")"
wait_until 10 test -e "$MNT/.kpfs/transactions/mover-txn" || fail ".kpfs/transactions/ lacks mover-txn"
expect_eq mover-txn "$(ls "$MNT/.kpfs/transactions")" "ls .kpfs/transactions"
without_duration() { awk -F'\t' '{ $8 = ""; for (i = 1; i <= NF; i++) sub(/ +$/, "", $i); print }' OFS='|'; }
expect_eq "$("$KAFKA_BIN/kafka-transactions.sh" --bootstrap-server "$B" describe --transactional-id mover-txn | without_duration)" \
    "$(without_duration <"$MNT/.kpfs/transactions/mover-txn")" ".kpfs/transactions/mover-txn beside kafka-transactions.sh describe"
expect_contains "$(cat "$MNT/.kpfs/transactions/mover-txn")" "CompleteAbort" ".kpfs/transactions/mover-txn's state"
[ ! -e "$MNT/.kpfs/transactions/no-such-id" ] || fail ".kpfs/transactions/no-such-id exists"

# mkdir TOPIC/partitions/N is CreatePartitions; rmdir TOPIC is DeleteTopics.
mkdir "$MNT/orders/partitions/1"
expect_contains "$("$KAFKA_BIN/kafka-topics.sh" --bootstrap-server "$B" --describe --topic orders)" \
    "PartitionCount: 2" "orders after mkdir orders/partitions/1"
echo to-p1 >>"$MNT/orders/partitions/1/log"
wait_until 30 grep -qx to-p1 "$MNT/orders/partitions/1/log" || fail "orders/partitions/1/log lacks its append"
rmdir "$MNT/orders"
wait_until 10 test ! -e "$MNT/orders" || fail "orders still shows after rmdir"
expect_eq "" "$("$KAFKA_BIN/kafka-topics.sh" --bootstrap-server "$B" --list | grep -x orders)" \
    "kafka-topics.sh --list after rmdir orders"

# The line format is the mount's to keep: a remount of the same data directory has it.
umount_kpfs
remount_kpfs --bootstrap-server "$B"
expect_contains "$(cat "$MNT/clicks/config")" "parse.key=true" "clicks/config after a remount"
echo "gina:after-remount" >>"$MNT/clicks/log"
wait_until 30 grep -qx "gina:after-remount" "$MNT/clicks/log" || fail "clicks/log lacks the keyed line appended after the remount"
umount_kpfs
echo "ok: cluster mount in $(($(date +%s) - started)) s"
