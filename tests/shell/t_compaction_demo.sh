# The seed's compaction demo: three rounds of keys a,b,c with segment rolls between them
# and a tombstone for a compact to b,c of round 2, the tombstone and round 3 in segments
# 0 and 7; a 4th round then drops the superseded values and the expired tombstone.
source "$(dirname "$0")/lib.sh"

mount_kpfs --override log.retention.check.interval.ms=500 \
    --override log.segment.delete.delay.ms=2000 --override log.cleaner.backoff.ms=500
new_data_dir scratch # a temp dir that cleanup removes

T=$MNT/compact-demo
mkdir "$T"
printf '%s\n' cleanup.policy=compact segment.bytes=1048576 segment.ms=3000 \
    min.cleanable.dirty.ratio=0.01 delete.retention.ms=3000 parse.key=true key.separator=: \
    > "$scratch/cmd"
cat "$scratch/cmd" > "$T/config"
while read -r kv; do grep -qx "$kv" "$T/config" || fail "$kv not in config"; done < "$scratch/cmd"
expect_eq "cleanup_policy: compact" "$(grep '^cleanup_policy:' "$T/status")" "status"

produce_round() {
    for k in a b c; do printf '%s:round%s-value-for-%s\n' "$k" "$1" "$k"; done >> "$T/log"
}

produce_round 1
sleep 4 # scenario time: past segment.ms, so the next append rolls
produce_round 2
sleep 4 # scenario time: past segment.ms
echo "null.marker=NULL" >> "$T/config"
printf 'a:NULL\n' >> "$T/log"
sleep 4 # scenario time: past segment.ms
produce_round 3

# The seed's listing: what a Kafka partition directory holds, not .deleted files. The
# snapshots of segments 3 and 6 went with them when the cleaner merged them into 0.
live() { ls "$T/segments" | grep -v '\.deleted$'; }
want_log=$'b:round2-value-for-b\nc:round2-value-for-c\na:NULL\na:round3-value-for-a\nb:round3-value-for-b\nc:round3-value-for-c'
want_segs=$(printf '%s\n' 00000000000000000000.{index,log,timeindex} \
    00000000000000000007.{index,log,snapshot,timeindex} leader-epoch-checkpoint partition.metadata)
compacted() { [ "$(cat "$T/log")" == "$want_log" ] && [ "$(live)" == "$want_segs" ]; }
if ! wait_until 20 compacted; then
    expect_eq "$want_log" "$(cat "$T/log")" "cat log after the cleaner"
    expect_eq "$want_segs" "$(live)" "segments/ after the cleaner"
fi
expect_eq "log_start_offset: 0" "$(grep '^log_start_offset:' "$T/status")" "status"
expect_eq "log_end_offset: 10" "$(grep '^log_end_offset:' "$T/status")" "status"
expect_eq "active_segment_base_offset: 7" "$(grep '^active_segment_base_offset:' "$T/status")" "status"

# Round 4 rolls segment 7; the next pass drops b,c of round 2 and, its delete horizon
# (delete.retention.ms=3000 after the pass that first saw it) being past, the tombstone.
sleep 4 # scenario time: past segment.ms and the tombstone's delete.retention.ms
produce_round 4
want_log=$'a:round3-value-for-a\nb:round3-value-for-b\nc:round3-value-for-c\na:round4-value-for-a\nb:round4-value-for-b\nc:round4-value-for-c'
log_is() { [ "$(cat "$T/log")" == "$1" ]; }
wait_until 20 log_is "$want_log" || expect_eq "$want_log" "$(cat "$T/log")" "cat log after round 4"

# A record without a key is refused on a compacted topic, in Kafka's words.
echo "parse.key=false" >> "$T/config"
expect_errno "Invalid argument" "echo x >> '$T/log'"
expect_eq "compact-demo/log: Compacted topic cannot accept message without key in topic partition compact-demo-0" \
    "$(tail -n 1 "$MNT/.kpfs/errors" | cut -d' ' -f2-)" "error for a keyless record"
# parse.key applies to the records appended after it: the lines already in log keep
# their keys.
expect_eq "$want_log" "$(cat "$T/log")" "cat log with parse.key=false after the keyless refusal"
echo "parse.key=true" >> "$T/config"
expect_eq "$want_log" "$(cat "$T/log")" "cat log after the keyless refusal"

# dump-log prints Kafka's kafka-dump-log.sh lines for v2 batches, field for field.
dump=$("$KPFS" dump-log --print-data-log "$T/segments/00000000000000000000.log")
batch='^baseOffset: [0-9]+ lastOffset: [0-9]+ count: [0-9]+ baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong(\.empty|\[[0-9]+\]) position: [0-9]+ CreateTime: [0-9]+ size: [0-9]+ magic: 2 compresscodec: none crc: [0-9]+ isvalid: true$'
record='^\| offset: [0-9]+ CreateTime: [0-9]+ keySize: 1 valueSize: (-1|[0-9]+) sequence: -1 headerKeys: \[\]( key: [abc])?( payload: .*)?$'
grep -q '^baseOffset' <<<"$dump" || fail "no batch line in: $dump"
bad=$(grep -vE "^(Dumping |Log starting offset: 0$)" <<<"$dump" | grep -vE "$batch" | grep -vE "$record" || true)
expect_eq "" "$bad" "dump-log lines that are not Kafka v2 batch or record lines"
umount_kpfs
