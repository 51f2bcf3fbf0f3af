# The seed's size-retention demo: retention.bytes=300 with a long retention.ms; four
# batches of five records, rolled apart by segment.ms=3000, leave only segment 15 (the
# active one may exceed retention.bytes) and Kafka's partition files; the seed's
# `ls *.deleted | wc -l` counts 11 (segments 0, 5, 10 with 3 + 4 + 4 files: 5 and 10 have
# producer snapshots); segment.bytes=400 is refused with Kafka's text.
source "$(dirname "$0")/lib.sh"

# file.delete.delay.ms (log.segment.delete.delay.ms) outlasts the demo (segment 0 goes
# about 7 s before segment 10, 13 s less than the delay), so all 11 `.deleted` files are there at once.
mount_kpfs --override log.retention.check.interval.ms=500 \
    --override log.segment.delete.delay.ms=20000 --override log.cleaner.backoff.ms=500
new_data_dir scratch # a temp dir that cleanup removes

T=$MNT/retention-size-demo
mkdir "$T"
expect_errno "Invalid argument" "echo segment.bytes=400 > '$T/config'"
expect_eq "retention-size-demo/config: Invalid value 400 for configuration segment.bytes: Value must be at least 1048576" \
    "$(tail -n 2 "$MNT/.kpfs/errors" | head -n 1 | cut -d' ' -f2-)" "error for segment.bytes=400"
printf 'retention.ms=600000\nretention.bytes=300\nsegment.bytes=1048576\nsegment.ms=3000\n' > "$scratch/cmd"
cat "$scratch/cmd" > "$T/config"
for kv in retention.ms=600000 retention.bytes=300 segment.bytes=1048576 segment.ms=3000; do
    grep -qx "$kv" "$T/config" || fail "$kv not in config"
done

# batch N: records 5N..5N+4, one write(2) (and so one batch) each, like the console
# producer.
batch() {
    local n
    exec 3>>"$T/log"
    for ((n = $1 * 5; n < $1 * 5 + 5; n++)); do printf 'batch%d-record%d\n' "$1" "$n" >&3; done
    exec 3>&-
}
batch 0
for b in 1 2 3; do
    sleep 3.5 # scenario time: let segment.ms (3 s) pass so this batch rolls a new segment
    batch "$b"
done
expect_eq "active_segment_base_offset: 15" "$(grep '^active_segment_base_offset:' "$T/status")" "status after 4 batches"

# What a Kafka 4.x partition directory holds, and only that.
live() { ls "$T/segments" | grep -v '\.deleted$'; }
only15() {
    [ "$(live)" == "$(printf '%s\n' 00000000000000000015.{index,log,snapshot,timeindex} \
        leader-epoch-checkpoint partition.metadata)" ]
}
wait_until 15 only15 || fail "segments/ (live): $(live | tr '\n' ' ')"
deleted() { ls "$T/segments" | grep '\.deleted$'; }
eleven_deleted() { [ "$(deleted | wc -l)" -eq 11 ]; }
wait_until 10 eleven_deleted || fail "segments/ (.deleted): $(deleted | tr '\n' ' ')"
expect_eq "$(printf '%s.deleted\n' 00000000000000000000.{index,log,timeindex} \
    00000000000000000005.{index,log,snapshot,timeindex} \
    00000000000000000010.{index,log,snapshot,timeindex})" "$(deleted)" ".deleted files"
expect_eq $'0\n1\n0 15' "$(cat "$T/segments/leader-epoch-checkpoint")" "leader-epoch-checkpoint"
grep -Eq '^topic_id: [A-Za-z0-9_-]{22}$' "$T/segments/partition.metadata" ||
    fail "partition.metadata: $(cat "$T/segments/partition.metadata")"
expect_eq "log_start_offset: 15" "$(grep '^log_start_offset:' "$T/status")" "status"
expect_eq "segments_deleted_size: 3" "$(grep '^segments_deleted_size:' "$T/status")" "status"
expect_eq "segments_deleted_time: 0" "$(grep '^segments_deleted_time:' "$T/status")" "status"
size15=$(stat -c %s "$T/segments/00000000000000000015.log")
[ "$size15" -gt 300 ] || fail "segment 15 is only $size15 bytes; the demo needs it above retention.bytes"
expect_eq "size_bytes: $size15" "$(grep '^size_bytes:' "$T/status")" "status"
expect_eq "$(seq 15 19 | sed 's/^/batch3-record/')" "$(cat "$T/log")" "cat log"

none_deleted() { ! ls "$T/segments" | grep -q '\.deleted$'; }
wait_until 45 none_deleted || fail ".deleted files not removed: $(ls "$T/segments" | tr '\n' ' ')"
umount_kpfs
