# .kpfs/metrics against what the mount itself shows after scripted workloads: segment
# counts, sizes and offsets against segments/ and the records written; deletions by
# reason after time and size retention; refused records by reason; the cleaner's
# counters and gauges after a compaction pass.
source "$(dirname "$0")/lib.sh"

# Short retention checks and delete delays so the scenario takes seconds, not minutes;
# a short cleaner backoff so an idle cleaner looks again soon.
mount_kpfs --override log.retention.check.interval.ms=500 \
    --override log.segment.delete.delay.ms=2000 \
    --override log.cleaner.backoff.ms=500

metrics=$(cat "$MNT/.kpfs/metrics")
expect_contains "$metrics" "# TYPE kpfs_log_cleaner_dead_thread_count gauge" "metrics"
expect_eq 0 "$(metric kpfs_log_cleaner_dead_thread_count)" "dead cleaner threads"
expect_eq 0 "$(metric kpfs_log_cleaner_manager_uncleanable_partitions_count)" "uncleanable"
# Every sample line belongs to a family declared just above it.
awk '/^# TYPE / { t = $3; next } /^#/ { next } { n = $1; sub(/\{.*/, "", n); if (n != t) { print "undeclared: " $0; exit 1 } }' \
    "$MNT/.kpfs/metrics" || fail "a sample without its # TYPE line"

# --- segment counts, sizes and offsets --------------------------------------------
# Each echo is one batch; internal.segment.bytes (no 1 MiB floor) makes a few batches
# fill a segment, so six appends leave several segments.
mkdir "$MNT/seg"
echo "internal.segment.bytes=200" > "$MNT/seg/config"
for i in 1 2 3 4 5 6; do echo "r$i" >> "$MNT/seg/log"; done
logs=("$MNT"/seg/segments/*.log)
[ ${#logs[@]} -ge 3 ] || fail "expected at least 3 segments, got ${#logs[@]}"
expect_eq ${#logs[@]} "$(metric 'kpfs_log_num_log_segments{topic="seg",partition="0"}')" "segment count"
expect_eq "$(status_field seg segment_count)" ${#logs[@]} "status segment_count"
bytes=$(stat -c %s "${logs[@]}" | awk '{ s += $1 } END { print s }')
expect_eq "$bytes" "$(metric 'kpfs_log_size_bytes{topic="seg",partition="0"}')" "size vs segments/*.log"
expect_eq 0 "$(metric 'kpfs_log_start_offset{topic="seg",partition="0"}')" "log start offset"
expect_eq 6 "$(metric 'kpfs_log_end_offset{topic="seg",partition="0"}')" "log end offset"
expect_eq 6 "$(metric 'kpfs_appended_records_total{topic="seg",partition="0"}')" "appended records"
expect_eq "$bytes" "$(metric 'kpfs_appended_bytes_total{topic="seg",partition="0"}')" "appended bytes"
active=$(basename "${logs[-1]}" .log)
expect_eq "$((10#$active))" "$(status_field seg active_segment_base_offset)" "active segment"

# --- size retention -----------------------------------------------------------------
# retention.bytes below the total: the oldest segments go while the excess still covers
# a whole segment.
mkdir "$MNT/size"
echo "internal.segment.bytes=200" > "$MNT/size/config"
for i in 1 2 3 4 5 6; do echo "r$i" >> "$MNT/size/log"; done
sizes=($(stat -c %s "$MNT"/size/segments/*.log))
bases=($(cd "$MNT/size/segments" && ls *.log | sed 's/\.log$//'))
total=0
for s in "${sizes[@]}"; do total=$((total + s)); done
limit=$((sizes[-1] + 10))
excess=$((total - limit))
expected=0
expected_start=0
for i in "${!sizes[@]}"; do
    [ $((excess - sizes[i])) -ge 0 ] || break
    excess=$((excess - sizes[i]))
    expected=$((expected + 1))
    expected_start=$((10#${bases[i + 1]}))
done
[ "$expected" -ge 1 ] || fail "the scenario should delete at least one segment by size"
echo "retention.bytes=$limit" >> "$MNT/size/config"
wait_until 10 metric_is 'kpfs_segments_deleted_total{topic="size",partition="0",reason="size"}' "$expected" ||
    fail "size deletions: want $expected, metric says $(metric 'kpfs_segments_deleted_total{topic="size",partition="0",reason="size"}')"
expect_eq 0 "$(metric 'kpfs_segments_deleted_total{topic="size",partition="0",reason="time"}')" "time deletions of size"
expect_eq "$expected_start" "$(metric 'kpfs_log_start_offset{topic="size",partition="0"}')" "log start after size retention"
expect_eq $((${#sizes[@]} - expected)) "$(metric 'kpfs_log_num_log_segments{topic="size",partition="0"}')" "segments after size retention"
expect_eq 6 "$(metric 'kpfs_log_end_offset{topic="size",partition="0"}')" "log end after size retention"

# --- time retention -----------------------------------------------------------------
mkdir "$MNT/time"
echo "internal.segment.bytes=200" > "$MNT/time/config"
for i in 1 2 3; do echo "r$i" >> "$MNT/time/log"; done
before=$(ls "$MNT"/time/segments/*.log | wc -l)
expect_eq 2 "$before" "segments of time before retention"
echo "retention.ms=1000" >> "$MNT/time/config"
# Every segment, the active one included, expires: all are deleted after an empty
# active segment is rolled at the log end.
wait_until 10 metric_is 'kpfs_segments_deleted_total{topic="time",partition="0",reason="time"}' 2 ||
    fail "time deletions: $(metric 'kpfs_segments_deleted_total{topic="time",partition="0",reason="time"}')"
expect_eq 3 "$(metric 'kpfs_log_start_offset{topic="time",partition="0"}')" "log start after time retention"
expect_eq 3 "$(metric 'kpfs_log_end_offset{topic="time",partition="0"}')" "log end after time retention"
expect_eq 1 "$(metric 'kpfs_log_num_log_segments{topic="time",partition="0"}')" "segments after time retention"
expect_eq 0 "$(metric 'kpfs_log_size_bytes{topic="time",partition="0"}')" "size after time retention"
expect_eq 0 "$(metric 'kpfs_segments_deleted_total{topic="time",partition="0",reason="size"}')" "size deletions of time"

# --- refused records ----------------------------------------------------------------
mkdir "$MNT/refuse"
printf 'cleanup.policy=compact\nmax.message.bytes=150\n' > "$MNT/refuse/config"
expect_errno "Invalid argument" "echo keyless >> '$MNT/refuse/log'"
# All records of a refused write are refused.
expect_errno "Invalid argument" "printf 'x\ny\n' >> '$MNT/refuse/log'"
expect_eq 3 "$(metric 'kpfs_refused_records_total{topic="refuse",partition="0",reason="keyless_compacted"}')" "keyless refusals"
# One write of one 101-byte line, a 179-byte batch: the engine refuses it before
# looking for a key.
long=$(head -c 100 /dev/zero | tr '\0' x)
expect_errno "File too large" "printf '%s\\n' $long >> '$MNT/refuse/log'"
expect_eq 1 "$(metric 'kpfs_refused_records_total{topic="refuse",partition="0",reason="too_large"}')" "too_large refusals"
expect_eq 3 "$(metric 'kpfs_refused_records_total{topic="refuse",partition="0",reason="keyless_compacted"}')" "keyless after too_large"
printf 'cleanup.policy=delete\nparse.key=true\n' >> "$MNT/refuse/config"
expect_errno "Invalid argument" "echo no-separator >> '$MNT/refuse/log'"
expect_eq 1 "$(metric 'kpfs_refused_records_total{topic="refuse",partition="0",reason="invalid"}')" "invalid refusals"
expect_eq 0 "$(metric 'kpfs_appended_records_total{topic="refuse",partition="0"}')" "appends of refuse"

# --- compaction -----------------------------------------------------------------------
mkdir "$MNT/comp"
printf 'cleanup.policy=compact\nparse.key=true\nkey.separator=:\nmin.cleanable.dirty.ratio=0.01\ninternal.segment.bytes=200\n' > "$MNT/comp/config"
echo "a:1" >> "$MNT/comp/log"
echo "a:2" >> "$MNT/comp/log"
expect_eq 0 "$(metric kpfs_log_cleaner_manager_max_dirty_percent)" "dirty percent with only an active segment"
echo "a:3" >> "$MNT/comp/log"
# Segment 0 (a:1, a:2) is closed and dirty now; the cleaner removes a:1 on its next look.
wait_until 10 metric_is 'kpfs_records_removed_by_compaction_total{topic="comp",partition="0"}' 1 ||
    fail "records removed by compaction: $(metric 'kpfs_records_removed_by_compaction_total{topic="comp",partition="0"}')"
expect_eq 0 "$(metric 'kpfs_tombstones_removed_total{topic="comp",partition="0"}')" "tombstones removed"
recopy=$(metric kpfs_log_cleaner_recopy_percent)
[ "$recopy" -gt 0 ] && [ "$recopy" -lt 100 ] || fail "recopy percent after dropping one of two records: $recopy"
expect_eq 0 "$(metric kpfs_log_cleaner_manager_max_dirty_percent)" "dirty percent after the pass"
expect_contains "$(status_field comp last_clean)" "removed 1 records (0 tombstones)" "status last_clean"

umount_kpfs
