# docs/SCALING.md's move of an app from kpfs to a Kafka cluster with MirrorMaker 2: a
# consumer group reads half of a topic on kpfs and commits; MirrorMaker 2 (Kafka 4.3.1's
# connect-mirror-maker.sh, dedicated mode) copies the topic with its configs into a real
# 3-broker Kafka 4.3.1 cluster and translates the group's committed offsets there
# (checkpoints, sync.group.offsets.enabled); the same app, given the cluster's bootstrap
# servers, resumes where the translated offsets say and reads every remaining record.
#
# What is asserted of the offsets, from MirrorMaker 2's code (MirrorCheckpointTask,
# OffsetSyncStore.translateDownstream): a group committed at upstream offset O is
# translated to S.downstream + 1 (S.downstream when S.upstream == O), S the newest offset
# sync at or below O that the checkpoint task's OffsetSyncStore kept. That store keeps
# syncs exponentially spaced back from the newest, so how many records the group reads
# again depends on how far O is behind the end when MirrorMaker 2 runs; it never skips
# one. With a new target topic and identity names, downstream offsets equal upstream
# ones. So per partition: the translated offset T is at most O (none lost), T - 1 is the
# upstream offset of an offset sync MirrorMaker 2 wrote (or T == O, at a sync), and the
# app on the cluster reads exactly the offsets T..end once each: the records it reads
# twice are those of [T, O), and no others.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/kafka_lib.sh"

PY=$(kafka_python)
APP=("$PY" "$KPFS_ROOT/tests/shell/move_client.py")
N=600
HALF=300
TOPIC=orders
GROUP=billing
started=$(date +%s)

# The cluster's JVMs start while kpfs's side is prepared. A group joins at once
# (group.initial.rebalance.delay.ms=0), as it does on kpfs, to keep the test short.
launch_kafka_cluster 3 group.initial.rebalance.delay.ms=0

new_data_dir scratch
new_data_dir kpfs_dir
serve_kpfs_listening "$scratch/kpfs.log" "$kpfs_dir" --override group.initial.rebalance.delay.ms=0
KPFS_BOOTSTRAP=$BOOTSTRAP
kpfs_pid=$SERVE_PID

# The app on kpfs: a topic of three partitions with overrides that must move with it (and
# kpfs's own parse.key, which must not), N records, and a group that reads half of them and commits.
expect_eq OK "$("${APP[@]}" create "$KPFS_BOOTSTRAP" "$TOPIC" 3 \
    retention.ms=1209600000 cleanup.policy=compact max.message.bytes=500000 parse.key=true)" \
    "create on kpfs"
"${APP[@]}" produce "$KPFS_BOOTSTRAP" "$TOPIC" "$N" >"$scratch/ends"
expect_eq 3 "$(wc -l <"$scratch/ends")" "partitions produced to"
expect_eq "$N" "$(awk '{ s += $2 } END { print s }' "$scratch/ends")" "records on kpfs"
"${APP[@]}" consume "$KPFS_BOOTSTRAP" "$TOPIC" "$GROUP" "$HALF" >"$scratch/first"
grep -v '^committed ' "$scratch/first" >"$scratch/first.records"
grep '^committed ' "$scratch/first" | cut -d' ' -f2- >"$scratch/upstream.committed"
expect_eq "$HALF" "$(wc -l <"$scratch/first.records")" "records the app read on kpfs"

kafka_cluster_wait
echo "cluster of 3 up $(($(date +%s) - started)) s after the start: $KAFKA_CLUSTER_BOOTSTRAP"

# MirrorMaker 2, one way: kpfs -> cluster, with its defaults elsewhere. Those write into
# the source too: the offset syncs, and (through a second herder, cluster -> kpfs, whose
# Connect worker keeps its config, offset and status topics there) heartbeats. kpfs is one
# broker: each of those topics gets one replica, as on a one-broker Kafka.
# IdentityReplicationPolicy keeps the names (orders, not kpfs.orders), so the app needs
# no change but its bootstrap servers; the cost is that MirrorMaker 2 can no longer tell
# a mirrored topic from a local one, which only matters to flows in both directions.
cat >"$scratch/mm2.properties" <<EOF
clusters = kpfs, cluster
kpfs.bootstrap.servers = $KPFS_BOOTSTRAP
cluster.bootstrap.servers = $KAFKA_CLUSTER_BOOTSTRAP
kpfs->cluster.enabled = true
kpfs->cluster.topics = $TOPIC
kpfs->cluster.groups = $GROUP
replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy
replication.factor = 3
kpfs->cluster.offset-syncs.topic.replication.factor = 1
cluster->kpfs.heartbeats.topic.replication.factor = 1
kpfs.config.storage.replication.factor = 1
kpfs.offset.storage.replication.factor = 1
kpfs.status.storage.replication.factor = 1
sync.group.offsets.enabled = true
sync.group.offsets.interval.seconds = 1
emit.checkpoints.interval.seconds = 1
refresh.topics.interval.seconds = 5
refresh.groups.interval.seconds = 5
sync.topic.configs.interval.seconds = 5
offset.lag.max = 10
cluster.offset.flush.interval.ms = 1000
# Connect finds its plugins by their manifests, not by scanning every jar: a quicker start.
kpfs.plugin.discovery = service_load
cluster.plugin.discovery = service_load
EOF
# Connect's logging, with each offset translation's reasons (at DEBUG) for a failure's
# message.
sed 's/^    Logger:$/&\n      - name: org.apache.kafka.connect.mirror.OffsetSyncStore\n        level: DEBUG/' \
    "$KAFKA_HOME/config/connect-log4j2.yaml" >"$scratch/mm2-log4j2.yaml"
LOG_DIR=$scratch/mm2-logs KAFKA_HEAP_OPTS="-Xms128M -Xmx384M" \
    KAFKA_LOG4J_OPTS="-Dlog4j2.configurationFile=$scratch/mm2-log4j2.yaml" \
    "$KAFKA_BIN/connect-mirror-maker.sh" "$scratch/mm2.properties" >"$scratch/mm2.out" 2>&1 &
mm2_pid=$!
mm2_alive() { kill -0 "$mm2_pid" 2>/dev/null; }
mm2_gone() { ! mm2_alive; }
trap 'kill -KILL "$mm2_pid" 2>/dev/null || true; _kafka_cleanup; _kpfs_cleanup' EXIT

# Mirrored: the cluster's end offsets are kpfs's. Translated: the group has an offset on
# the cluster for each partition MirrorMaker 2 can translate it in.
cluster_ends() {
    "$PY" - "$KAFKA_CLUSTER_BOOTSTRAP" "$TOPIC" <<'PYEOF'
import sys
from kafka import KafkaConsumer, TopicPartition
c = KafkaConsumer(bootstrap_servers=sys.argv[1])
parts = c.partitions_for_topic(sys.argv[2]) or set()
ends = c.end_offsets([TopicPartition(sys.argv[2], p) for p in parts])
for tp in sorted(ends, key=lambda t: t.partition):
    print(tp.partition, ends[tp])
c.close()
PYEOF
}
cluster_group_offsets() {
    "$PY" - "$KAFKA_CLUSTER_BOOTSTRAP" "$GROUP" <<'PYEOF'
import sys
from kafka import KafkaAdminClient
a = KafkaAdminClient(bootstrap_servers=sys.argv[1])
offsets = a.list_group_offsets(sys.argv[2])[sys.argv[2]]
for tp in sorted(offsets, key=lambda t: t.partition):
    print(tp.partition, offsets[tp].offset)
a.close()
PYEOF
}
mirrored() {
    mm2_alive || fail "MirrorMaker 2 exited: $(tail -n 30 "$scratch/mm2.out")"
    [ "$(cluster_ends 2>/dev/null)" == "$(cat "$scratch/ends")" ]
}
# The partitions MirrorMaker 2 can translate the group's offset of: those where an offset
# sync at or below it was written (a sync is queued for a partition's first record, but a
# later one replaces it while ten are in flight: a group at offset 0 may have none). Once
# every partition has the sync of its last record (MirrorMaker 2 sends it at the latest
# with its next offset commit), the offset-syncs topic is complete.
read_syncs() {
    "${APP[@]}" offset-syncs "$KPFS_BOOTSTRAP" mm2-offset-syncs.cluster.internal >"$scratch/syncs"
}
syncs_complete() {
    local p end
    read_syncs || return 1
    while read -r p end; do
        grep -q "^$TOPIC $p $((end - 1)) " "$scratch/syncs" || return 1
    done <"$scratch/ends"
}
translatable() {
    awk -v t="$TOPIC" 'NR == FNR { committed[$1] = $2; next }
        $1 == t && $3 <= committed[$2] { ok[$2] = 1 }
        END { for (p in ok) print p }' "$scratch/upstream.committed" "$scratch/syncs" | sort -n
}
translated() {
    mm2_alive || fail "MirrorMaker 2 exited: $(tail -n 30 "$scratch/mm2.out")"
    syncs_complete && [ "$(cluster_group_offsets 2>/dev/null | cut -d' ' -f1)" == "$(translatable)" ]
}
wait_until 120 mirrored || fail "the cluster's $TOPIC is not kpfs's after 120 s: $(cluster_ends 2>&1)
$(grep -E 'ERROR|WARN' "$scratch/mm2.out" | tail -n 20)"
echo "mirrored $(($(date +%s) - started)) s after the start"
wait_until 60 translated || fail "the offsets of $GROUP on the cluster are not for partitions $(translatable | paste -sd' ') after 60 s: $(cluster_group_offsets 2>&1)
$(grep -E 'ERROR|WARN|translateDownstream' "$scratch/mm2.out" | tail -n 20)"
echo "translated $(($(date +%s) - started)) s after the start"

# The herder that writes into kpfs ran there as a Connect worker: its heartbeats are in.
heartbeats() {
    "$PY" - "$KPFS_BOOTSTRAP" <<'PYEOF'
import sys
from kafka import KafkaConsumer, TopicPartition
c = KafkaConsumer(bootstrap_servers=sys.argv[1])
tp = TopicPartition("heartbeats", 0)
print(c.end_offsets([tp])[tp])
c.close()
PYEOF
}
heartbeats_in() { [ "$(heartbeats 2>/dev/null)" -gt 0 ]; }
wait_until 30 heartbeats_in || fail "no heartbeats in kpfs after 30 s: $(heartbeats 2>&1)"

# The move's cut-over: MirrorMaker 2 stops (SIGTERM: its shutdown hook stops the
# herders), so the group's offsets on the cluster are final.
kill -TERM "$mm2_pid"
wait_until 60 mm2_gone || fail "MirrorMaker 2 still runs 60 s after SIGTERM"

# The topic on the cluster: three partitions of three replicas each, and kpfs's overrides.
describe=$("$KAFKA_BIN/kafka-topics.sh" --bootstrap-server "$KAFKA_CLUSTER_BOOTSTRAP" --describe --topic "$TOPIC")
expect_contains "$describe" "PartitionCount: 3	ReplicationFactor: 3" "kafka-topics.sh --describe on the cluster"
[ "$(grep -c 'Replicas: [123],[123],[123]	' <<<"$describe")" -eq 3 ] ||
    fail "not every partition has three replicas: $describe"
configs=$("$KAFKA_BIN/kafka-configs.sh" --bootstrap-server "$KAFKA_CLUSTER_BOOTSTRAP" --describe \
    --entity-type topics --entity-name "$TOPIC")
for c in retention.ms=1209600000 cleanup.policy=compact max.message.bytes=500000; do
    expect_contains "$configs" "$c" "the cluster's configs of $TOPIC"
done
# kpfs's own parse.key (how the mount renders the topic's log) stays behind: DescribeConfigs
# lists it only when named, so MirrorMaker 2 never sees it (a Kafka broker would refuse it).
case $configs in *parse.key*) fail "parse.key reached the cluster: $configs" ;; esac

# The group on the cluster, as kafka-consumer-groups.sh shows it: an offset per partition,
# at most the one committed on kpfs, one past an offset sync MirrorMaker 2 wrote.
groups=$("$KAFKA_BIN/kafka-consumer-groups.sh" --bootstrap-server "$KAFKA_CLUSTER_BOOTSTRAP" \
    --describe --group "$GROUP" 2>&1)
echo "$groups"
awk -v t="$TOPIC" '$2 == t { print $3, $4 }' <<<"$groups" | sort -n >"$scratch/translated"
expect_eq "$(translatable | paste -sd' ')" "$(cut -d' ' -f1 "$scratch/translated" | paste -sd' ')" \
    "partitions with offsets on the cluster"
# A partition without one starts, as the app's auto.offset.reset says, at the earliest
# offset: 0, the mirror being a new topic.
duplicates=0
while read -r p upstream; do
    translated=$(awk -v p="$p" '$1 == p { print $2 }' "$scratch/translated")
    if [ -z "$translated" ]; then
        translated=0
        echo "partition $p: committed $upstream on kpfs, none on the cluster (no offset sync at or below it)"
    else
        [ "$translated" -le "$upstream" ] ||
            fail "partition $p: translated to $translated, past $upstream committed on kpfs"
        if [ "$translated" -ne "$upstream" ] || ! grep -q "^$TOPIC $p $upstream " "$scratch/syncs"; then
            grep -q "^$TOPIC $p $((translated - 1)) " "$scratch/syncs" ||
                fail "partition $p: $translated is not one past an offset sync (kpfs's offset $upstream): $(grep "^$TOPIC $p " "$scratch/syncs" | head -n 20)"
        fi
        echo "partition $p: committed $upstream on kpfs, $translated on the cluster"
    fi
    echo "$p $translated" >>"$scratch/from"
    duplicates=$((duplicates + upstream - translated))
done <"$scratch/upstream.committed"

# The same app, pointed at the cluster: it reads from the translated offsets to the end.
"${APP[@]}" consume "$KAFKA_CLUSTER_BOOTSTRAP" "$TOPIC" "$GROUP" >"$scratch/second"
grep -v '^committed ' "$scratch/second" >"$scratch/second.records"
# Per partition, exactly the offsets translated..end, each once, with kpfs's keys and values.
for p in 0 1 2; do
    from=$(awk -v p="$p" '$1 == p { print $2 }' "$scratch/from")
    end=$(awk -v p="$p" '$1 == p { print $2 }' "$scratch/ends")
    expect_eq "$(seq "$from" $((end - 1)) | paste -sd' ')" \
        "$(awk -v p="$p" '$1 == p { print $2 }' "$scratch/second.records" | paste -sd' ')" \
        "offsets of partition $p the app read on the cluster"
done
awk '$3 != "key-" substr($4, 7) { bad = 1 } END { exit bad }' "$scratch/second.records" ||
    fail "a record on the cluster has another key than its value's"
# Nothing lost: both halves hold every record; twice only those of [translated, committed).
expect_eq "$N" "$(cat "$scratch/first.records" "$scratch/second.records" | cut -d' ' -f3 | sort -u | wc -l)" \
    "distinct records read on kpfs and on the cluster"
expect_eq "$duplicates" "$(cat "$scratch/first.records" "$scratch/second.records" | cut -d' ' -f3 | sort | uniq -d | wc -l)" \
    "records read twice"
echo "read twice: $duplicates of $N (MirrorMaker 2's translation); none lost; $(($(date +%s) - started)) s"

kill -TERM "$kpfs_pid"
wait "$kpfs_pid" || fail "kpfs serve did not stop cleanly: $(tail -n 20 "$scratch/kpfs.log")"
