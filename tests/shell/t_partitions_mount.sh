# Topics of several partitions through the mount, with the shell's tools:
# 1. `mkdir` makes num.partitions partitions (partition directories T-N with one topic
#    id); `T/partitions/N/` has log, segments, status, log_start_offset; `mkdir` of the
#    next number adds one, anything else and `rmdir` are refused with a reason.
# 2. `echo >> T/log` sends a keyed line to the partition Kafka's default partitioner
#    picks (asked of kafka-python's murmur2), the lines of keyless writes to one partition
#    per write, in turn; `T/partitions/N/log` is partition N alone; `cat T/log` is every
#    record once in the order appended, and `tail -f T/log` follows appends to any
#    partition.
# 3. The seed's retention demo: retention.bytes is per partition, so with unequal
#    traffic the busy partition deletes while the quiet ones keep everything.
# 4. The seed's jitter lesson: without segment.jitter.ms 12 partitions written together
#    roll together; with it, their rolls spread out.
# 5. Per-partition metrics and status lines.
# 6. The topic's log of a compacted topic of 3 partitions, across rolls and cleaning:
#    `tail -f` saw every record once in append order, small reads give what `cat` gives,
#    and the latest value of every key is there.
# 7. A group's committed offsets per partition (a Kafka client commits them): a row per
#    partition in .kpfs/groups/G/offsets, as kafka-consumer-groups.sh --describe has, a
#    consumer_group line per partition in status, the lag per partition in metrics.
source "$(dirname "$0")/lib.sh"

mount_kpfs --override num.partitions=3 --override log.retention.check.interval.ms=300 \
    --override log.segment.delete.delay.ms=60000 --override log.cleaner.backoff.ms=300
new_data_dir scratch

T=$MNT/orders
mkdir "$T"
expect_eq $'0\n1\n2' "$(ls "$T/partitions")" "ls orders/partitions"
expect_eq $'log\nlog_start_offset\nsegments\nstatus' "$(ls "$T/partitions/1")" "ls orders/partitions/1"
expect_eq $'orders-0\norders-1\norders-2' "$(ls "$DATA" | grep '^orders-')" "partition directories"
ids=$(grep -h "^topic_id: " "$T"/partitions/*/segments/partition.metadata | sort -u | wc -l)
expect_eq 1 "$ids" "one topic id in every partition.metadata"
expect_eq "partitions: 3" "$(grep '^partitions:' "$T/status")" "status"

# 2. Keyed lines go to their key's partition, as a Java or kafka-python producer sends
# them; kafka-python's own murmur2 says where.
printf 'parse.key=true\nkey.separator=:\n' > "$T/config"
py=$(kafka_python)
keys=(alice bob carol dave erin frank grace heidi)
for k in "${keys[@]}"; do echo "$k:v1" >> "$T/log"; done
for k in "${keys[@]}"; do
    want=$("$py" -c 'import sys
from kafka.partitioner.default import murmur2
print((murmur2(sys.argv[1].encode()) & 0x7fffffff) % 3)' "$k")
    grep -qx "$k:v1" "$T/partitions/$want/log" || fail "$k is not in partition $want: $(grep -l "^$k:" "$T"/partitions/*/log)"
done
expect_eq "$(printf '%s:v1\n' "${keys[@]}")" "$(cat "$T/log")" "cat log: every record once, in append order"
total=0
for n in 0 1 2; do total=$((total + $(wc -l < "$T/partitions/$n/log"))); done
expect_eq 8 "$total" "records over the partitions"

# Keyless writes: each write's lines to one partition, successive writes in turn.
K=$MNT/keyless
mkdir "$K"
for n in 1 2 3 4 5 6; do echo "line$n" >> "$K/log"; done
for n in 0 1 2; do
    expect_eq 2 "$(wc -l < "$K/partitions/$n/log")" "keyless records in partition $n"
done
printf 'a1\na2\na3\n' > "$scratch/three"
cat "$scratch/three" >> "$K/log" # one write(2): one partition
expect_eq 3 "$(grep -l '^a1$' "$K"/partitions/*/log | xargs grep -c '^a[123]$')" "a write's lines stay together"
echo direct >> "$K/partitions/2/log"
expect_eq direct "$(tail -n 1 "$K/partitions/2/log")" "an append to partitions/2/log"
expect_eq direct "$(tail -n 1 "$K/log")" "the topic's log ends with it"

# tail -f on the topic's log follows appends to any partition.
tail -n 0 -f "$K/log" > "$scratch/followed" 2>&1 &
follower=$!
sleep 1.2 # scenario time: tail's first poll of the size
for n in 0 1 2; do echo "followed$n" >> "$K/partitions/$n/log"; done
three_followed() { [ "$(grep -c '^followed' "$scratch/followed")" -eq 3 ]; }
wait_until 10 three_followed || fail "tail -f saw: $(cat "$scratch/followed")"
kill "$follower"
expect_eq $'followed0\nfollowed1\nfollowed2' "$(cat "$scratch/followed")" "tail -f order"

# 1 again: adding and refusing partitions.
mkdir "$K/partitions/3"
expect_eq $'0\n1\n2\n3' "$(ls "$K/partitions")" "after mkdir partitions/3"
[ -d "$DATA/keyless-3" ] || fail "no partition directory keyless-3"
expect_errno "Invalid argument" "mkdir '$K/partitions/5'"
expect_contains "$(tail -n 1 "$MNT/.kpfs/errors")" \
    "keyless/partitions/5: partitions are added one at a time: keyless has 4 partitions, and mkdir keyless/partitions/4 adds the next" ".kpfs/errors"
expect_errno "Operation not permitted" "rmdir '$K/partitions/3'"
expect_contains "$(tail -n 1 "$MNT/.kpfs/errors")" "partitions are never removed, as in Kafka" ".kpfs/errors"
expect_errno "File exists" "mkdir '$K/partitions/0'"
expect_errno "Invalid argument" "echo 1 > '$K/log_start_offset'"
expect_contains "$(tail -n 1 "$MNT/.kpfs/errors")" \
    "keyless has 4 partitions: write the offset to keyless/partitions/N/log_start_offset of partition N" ".kpfs/errors"
echo 1 > "$K/partitions/0/log_start_offset"
expect_eq 1 "$(cat "$K/partitions/0/log_start_offset")" "partition 0's log start"

# 3. retention.bytes per partition: 40 records to partition 1, 2 to the others, in
# segments of about 200 bytes (kpfs's internal.segment.bytes, for demos).
R=$MNT/imbalance
mkdir "$R"
printf 'retention.bytes=600\ninternal.segment.bytes=200\n' > "$R/config"
for ((i = 0; i < 40; i++)); do echo "busy-record-$i" >> "$R/partitions/1/log"; done
for n in 0 2; do for i in 0 1; do echo "quiet-record-$i" >> "$R/partitions/$n/log"; done; done
# Trimmed to retention.bytes, give or take the segment that would take it below.
busy_trimmed() {
    [ "$(metric 'kpfs_log_size_bytes{topic="imbalance",partition="1"}')" -le 800 ]
}
wait_until 15 busy_trimmed || fail "partition 1 was not trimmed: $(cat "$R/partitions/1/status")"
for n in 0 2; do
    expect_eq 0 "$(cat "$R/partitions/$n/log_start_offset")" "log start of quiet partition $n"
    expect_eq 2 "$(wc -l < "$R/partitions/$n/log")" "records of quiet partition $n"
    ! ls "$R/partitions/$n/segments" | grep -q '\.deleted$' || fail "partition $n deleted segments"
done
ls "$R/partitions/1/segments" | grep -q '\.log\.deleted$' || fail "no .deleted segment in partition 1"
expect_eq "$(grep -c . "$R/partitions/1/log")" "$(($(metric 'kpfs_log_end_offset{topic="imbalance",partition="1"}') - $(cat "$R/partitions/1/log_start_offset")))" "partition 1's records"
grep -q '^partition: 1 log_start_offset=[1-9]' "$R/status" || fail "status: $(cat "$R/status")"
metric 'kpfs_log_num_log_segments{topic="imbalance",partition="2"}' >/dev/null || fail "no segment count of partition 2"

# 4. Twelve partitions written together: when does each roll? The first append after
# segment.ms (less the segment's jitter) from its first record rolls it.
roll_ticks() { # TOPIC: the tick (of 0.25 s) at which each partition rolled, sorted
    local t=$MNT/$1 tick n
    declare -A rolled=()
    for n in $(seq 0 11); do echo first >> "$t/partitions/$n/log"; done
    for ((tick = 1; tick <= 28 && ${#rolled[@]} < 12; tick++)); do
        sleep 0.25 # scenario time: the ticks of the demo
        for n in $(seq 0 11); do
            [ -n "${rolled[$n]:-}" ] && continue
            echo more >> "$t/partitions/$n/log"
            [ "$(ls "$t/partitions/$n/segments" | grep -c '\.log$')" -gt 1 ] && rolled[$n]=$tick
        done
    done
    [ ${#rolled[@]} -eq 12 ] || fail "$1: only ${#rolled[@]} partitions rolled"
    printf '%s\n' "${rolled[@]}" | sort -n | uniq
}
for topic in steady jittered; do mkdir "$MNT/$topic"; done
printf 'segment.ms=4000\nsegment.jitter.ms=0\n' > "$MNT/steady/config"
printf 'segment.ms=4000\nsegment.jitter.ms=3000\n' > "$MNT/jittered/config"
for topic in steady jittered; do
    for n in $(seq 3 11); do mkdir "$MNT/$topic/partitions/$n"; done
done
spread() { echo $(($(tail -n 1 <<< "$1") - $(head -n 1 <<< "$1"))); }
steady=$(roll_ticks steady)
jittered=$(roll_ticks jittered)
# Ticks apart: at most one without jitter (the partitions' first records were not
# written at one instant), a second or more with a jitter of up to 3 s.
[ "$(spread "$steady")" -le 1 ] || fail "without jitter the partitions rolled at ticks: $steady"
[ "$(spread "$jittered")" -ge 4 ] || fail "with jitter the partitions rolled at ticks: $jittered"

# 6. Compaction across the partitions of a topic, while tail -f follows its log.
C=$MNT/compacted
mkdir "$C"
printf 'cleanup.policy=compact\nparse.key=true\nkey.separator=:\ninternal.segment.bytes=300\nmin.cleanable.dirty.ratio=0.01\n' > "$C/config"
tail -n +1 -f "$C/log" > "$scratch/compacted-followed" 2>&1 &
follower=$!
for round in 1 2 3 4 5 6; do
    for k in 0 1 2 3 4 5 6 7 8 9; do echo "key$k:round$round" >> "$C/log"; done
done
appended=$(for round in 1 2 3 4 5 6; do for k in 0 1 2 3 4 5 6 7 8 9; do echo "key$k:round$round"; done; done)
compacted() { [ "$(grep -c . "$C/log")" -lt 60 ]; }
wait_until 20 compacted || fail "nothing compacted: $(cat "$C"/partitions/*/status | grep -E '^(cleaner|dirty)')"
# What tail -f read is what the log held as it read: records the cleaner removed before
# it got there are gone, the latest value of each key never is.
all_latest_followed() { [ "$(grep -c ':round6$' "$scratch/compacted-followed")" -eq 10 ]; }
wait_until 10 all_latest_followed || fail "tail -f saw: $(cat "$scratch/compacted-followed")"
kill "$follower"
printf '%s\n' "$appended" > "$scratch/appended"
# Each line tail -f printed comes later in the append order than the one before it: no
# record twice, none out of order.
awk 'NR == FNR { line[++n] = $0; next }
    { while (i < n && line[++i] != $0) {} if (line[i] != $0) { print "not in order: " $0; bad = 1; exit } }
    END { exit bad }' "$scratch/appended" "$scratch/compacted-followed" ||
    fail "tail -f output is not the append order: $(cat "$scratch/compacted-followed")"
expect_eq "$(cat "$C/log")" "$(dd if="$C/log" bs=7 2>/dev/null)" "reads of 7 bytes against cat"
for k in 0 1 2 3 4 5 6 7 8 9; do
    expect_eq "key$k:round6" "$(grep "^key$k:" "$C/log" | tail -n 1)" "latest value of key$k"
done
umount_kpfs

# 7. Partition N gets N + 1 records, and the group commits offset N of each.
mount_kpfs_listening --override num.partitions=3
GT=$MNT/grouped
mkdir "$GT"
for n in 0 1 2; do for ((i = 0; i <= n; i++)); do echo "p$n-$i" >> "$GT/partitions/$n/log"; done; done
"$py" - "$BOOTSTRAP" <<'PY' || fail "the commit failed"
import sys
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata
consumer = KafkaConsumer(bootstrap_servers=sys.argv[1], group_id="per-partition", enable_auto_commit=False)
consumer.commit({TopicPartition("grouped", p): OffsetAndMetadata(p, "", -1) for p in range(3)})
consumer.close()
PY
expect_eq $'grouped 0 0 1 1\ngrouped 1 1 2 1\ngrouped 2 2 3 1' \
    "$(tail -n +2 "$MNT/.kpfs/groups/per-partition/offsets" | awk '{ print $2, $3, $4, $5, $6 }' | sort)" \
    "the group's offsets, a row per partition"
expect_eq "$(printf 'consumer_group: per-partition partition=%d committed_offset=%d lag=1\n' 0 0 1 1 2 2)" \
    "$(grep '^consumer_group: ' "$GT/status")" "the status lines of the group"
expect_eq 1 "$(metric 'kpfs_consumer_group_lag{group="per-partition",topic="grouped",partition="2"}')" \
    "the lag of partition 2"
umount_kpfs
