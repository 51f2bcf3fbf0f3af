# TOPIC/events and the diagnostics in TOPIC/status answer "what happened and why":
# rolls (size, time), retention deletions with their arithmetic, removals after the
# delete delay, cleaning passes and the tombstone's life, refused appends; status says
# when the oldest segment goes, why compaction is not due, the cleaner state, last pass.
source "$(dirname "$0")/lib.sh"

# Short retention checks, delete delays and cleaner backoff keep the scenario to seconds.
mount_kpfs --override log.retention.check.interval.ms=500 \
    --override log.segment.delete.delay.ms=2000 \
    --override log.cleaner.backoff.ms=500

events() { cat "$MNT/$1/events"; }
has_event() { grep -q -- "$2" "$MNT/$1/events"; }
# ms since the epoch of an event line's leading UTC timestamp.
event_ms() { date -u -d "$(cut -d' ' -f1 <<<"$1")" +%s%3N; }

# --- rolls ----------------------------------------------------------------------------
mkdir "$MNT/rolls"
printf 'internal.segment.bytes=200\nsegment.ms=1000\n' > "$MNT/rolls/config"
for i in 1 2 3; do echo "r$i" >> "$MNT/rolls/log"; done
expect_contains "$(events rolls)" \
    " roll new segment at offset 2: reason=size: the active segment plus the incoming batch would exceed the segment size 200" \
    "events after filling a segment"
# Let segment.ms pass over the active segment; the next append rolls it.
sleep 1.2 # scenario time: segment.ms is 1000
echo "r4" >> "$MNT/rolls/log"
expect_contains "$(events rolls)" " roll new segment at offset 3: reason=time: the segment's first record is older than segment.ms 1000" \
    "events after segment.ms"
expect_eq 2 "$(grep -c ' roll ' "$MNT/rolls/events")" "roll events"

# --- time retention, a whole log in its active segment ---------------------------------
mkdir "$MNT/tdel"
echo "r1" >> "$MNT/tdel/log"
echo "r2" >> "$MNT/tdel/log"
echo "retention.ms=1500" > "$MNT/tdel/config"
expect_contains "$(status_field tdel retention_oldest_segment)" "segment 0: by time once its largest timestamp" "status"
expect_contains "$(status_field tdel retention_oldest_segment)" "is older than retention.ms 1500: at " "status"
expect_contains "$(status_field tdel retention_note)" "all records are in the active segment" "status"
wait_until 10 has_event tdel " delete segment 0 cause=time" || fail "no time deletion: $(events tdel)"
line=$(grep " delete segment 0 cause=time" "$MNT/tdel/events")
age=$(sed -n 's/.* is \([0-9]*\) ms old, more than retention.ms 1500.*/\1/p' <<<"$line")
[ -n "$age" ] && [ "$age" -gt 1500 ] || fail "deletion age not above retention.ms: $line"
# The age is the retention check's time minus the largest timestamp; the event is
# stamped just after that check.
largest=$(sed -n 's/.*largest timestamp \([0-9]*\) .*/\1/p' <<<"$line")
lag=$(($(event_ms "$line") - largest - age))
[ "$lag" -ge 0 ] && [ "$lag" -lt 1000 ] || fail "event at $(event_ms "$line"), check at $((largest + age)): $line"
expect_contains "$line" "renamed .deleted, removed after file.delete.delay.ms 2000" "delete event"
expect_contains "$(events tdel)" " roll new segment at offset 2: reason=retention" "roll before deleting the active segment"
wait_until 10 has_event tdel " remove file.delete.delay.ms passed: removed 00000000000000000000.log.deleted" ||
    fail "no removal: $(events tdel)"
removed=$(grep " remove " "$MNT/tdel/events")
waited=$(($(event_ms "$removed") - $(event_ms "$line")))
[ "$waited" -ge 2000 ] || fail "removed $waited ms after the deletion, before the 2000 ms delay"
[ ! -e "$MNT/tdel/segments/00000000000000000000.log.deleted" ] || fail ".deleted file still listed"
expect_contains "$(status_field tdel retention_oldest_segment)" "the log is empty" "status after retention"

# --- size retention with its arithmetic ----------------------------------------------
mkdir "$MNT/sdel"
echo "internal.segment.bytes=200" > "$MNT/sdel/config"
for i in 1 2 3 4 5 6; do echo "r$i" >> "$MNT/sdel/log"; done
first=$(stat -c %s "$MNT/sdel/segments/00000000000000000000.log")
total=$(stat -c %s "$MNT"/sdel/segments/*.log | awk '{ s += $1 } END { print s }')
limit=$((total - first))
expect_eq "off (retention.bytes=-1)" "$(status_field sdel retention_size)" "retention_size before"
echo "retention.bytes=$limit" >> "$MNT/sdel/config"
wait_until 10 has_event sdel " delete segment 0 cause=size" || fail "no size deletion: $(events sdel)"
expect_contains "$(events sdel)" \
    "segment 0 cause=size: partition is $first bytes over retention.bytes $limit (total $total) and $first - $first segment bytes >= 0" \
    "size deletion arithmetic"
expect_eq 1 "$(grep -c ' delete ' "$MNT/sdel/events")" "size deletions"
expect_contains "$(status_field sdel retention_size)" "partition $limit bytes vs retention.bytes $limit: " "retention_size after"
expect_contains "$(status_field sdel retention_size)" "goes when the excess 0 reaches its size" "retention_size after"

# --- compaction, tombstones and refused appends -------------------------------------
mkdir "$MNT/comp"
printf 'cleanup.policy=compact\nparse.key=true\nkey.separator=:\nnull.marker=NULL\nmin.cleanable.dirty.ratio=1\ninternal.segment.bytes=200\ndelete.retention.ms=1000\n' > "$MNT/comp/config"
expect_contains "$(status_field comp retention)" "retention.ms and retention.bytes have no effect" "status of a compact topic"
echo "a:1" >> "$MNT/comp/log"
echo "a:NULL" >> "$MNT/comp/log"
expect_contains "$(status_field comp compaction_due)" "no: nothing cleanable: dirty records are only in the active segment" "compaction_due, one segment"
echo "b:1" >> "$MNT/comp/log"
expect_eq "1.0000" "$(status_field comp dirty_ratio)" "dirty ratio"
expect_eq "no: dirty ratio 1.0000 is not above min.cleanable.dirty.ratio 1" "$(status_field comp compaction_due)" "compaction_due at ratio 1"
expect_eq idle "$(status_field comp cleaner_state)" "cleaner_state"
expect_eq 0 "$(status_field comp cleaner_passes)" "cleaner passes before"
! has_event comp " clean " || fail "cleaned although not due: $(events comp)"

echo "min.cleanable.dirty.ratio=0.01" >> "$MNT/comp/config"
wait_until 10 has_event comp " clean offsets \[0, 2)" || fail "no cleaning pass: $(events comp)"
expect_contains "$(events comp)" "records kept 1 removed 1, tombstones kept 1 removed 0" "first pass keeps the tombstone"
expect_contains "$(status_field comp last_clean)" "removed 1 records (0 tombstones), kept 1 tombstones" "last_clean"
expect_eq 1 "$(status_field comp cleaner_passes)" "cleaner passes after"
expect_eq "a:NULL" "$(head -n1 "$MNT/comp/log")" "the tombstone is still readable"
# Let delete.retention.ms pass over the tombstone, then make the next pass due.
sleep 1.1 # scenario time: delete.retention.ms is 1000
echo "b:2" >> "$MNT/comp/log"
echo "b:3" >> "$MNT/comp/log"
wait_until 10 has_event comp "tombstones kept 0 removed 1" || fail "tombstone not removed: $(events comp)"
! grep -q "^a:" "$MNT/comp/log" || fail "key a is still in the log: $(cat "$MNT/comp/log")"

expect_errno "Invalid argument" "echo keyless >> '$MNT/comp/log'"
expect_contains "$(events comp)" " refused-append No key separator found on line number 1: 'keyless'" "refused append"

umount_kpfs
