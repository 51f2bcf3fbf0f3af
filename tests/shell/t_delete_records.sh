# The mount's kafka-delete-records.sh: an offset written to TOPIC/log_start_offset deletes
# the records before it. `cat log` skips them at once, the file never
# shrinks, a remount keeps the new start (log-start-offset-checkpoint), retention then
# removes the segments wholly below it, and bad offsets are refused in Kafka's words.
source "$(dirname "$0")/lib.sh"

mount_kpfs --override log.retention.check.interval.ms=500
mkdir "$MNT/t"
printf 'r0\nr1\nr2\n' >> "$MNT/t/log"
# Two segments: once the first batch is older than segment.ms, the next append rolls.
echo "segment.ms=1" > "$MNT/t/config"
since=$(date +%s%3N)
wait_until 5 bash -c "[ \$(date +%s%3N) -gt $((since + 1)) ]" || fail "the clock did not move"
printf 'r3\nr4\n' | cat >> "$MNT/t/log" # one write (bash's printf writes per line)
echo "segment.ms=604800000" > "$MNT/t/config"
expect_eq "2" "$(status_field t segment_count)" "segments"
expect_eq "0" "$(cat "$MNT/t/log_start_offset")" "log_start_offset before"
size=$(stat -c %s "$MNT/t/log")

echo 3 > "$MNT/t/log_start_offset"
expect_eq "3" "$(cat "$MNT/t/log_start_offset")" "log_start_offset after"
expect_eq $'r3\nr4' "$(cat "$MNT/t/log")" "cat log after deleting records"
expect_eq "$size" "$(stat -c %s "$MNT/t/log")" "st_size of log (never shrinks)"
expect_eq "3" "$(status_field t log_start_offset)" "status"

# A lower offset changes nothing (Kafka never moves the start back).
echo 1 > "$MNT/t/log_start_offset"
expect_eq "3" "$(cat "$MNT/t/log_start_offset")" "log_start_offset after a lower offset"

# Past the high watermark (the log end): ERANGE and Kafka's text.
expect_errno "Numerical result out of range" "echo 6 > '$MNT/t/log_start_offset'"
expect_contains "$(cat "$MNT/.kpfs/errors")" \
    "t/log_start_offset: Cannot increment the log start offset to 6 of partition t-0 since it is larger than the high watermark 5" \
    ".kpfs/errors"
expect_errno "Invalid argument" "echo five > '$MNT/t/log_start_offset'"
expect_rejection "t/log_start_offset"

# A compacted topic keeps its records: Kafka's policy refusal.
mkdir "$MNT/c"
printf 'cleanup.policy=compact\nparse.key=true\n' > "$MNT/c/config"
printf 'k\tv\n' >> "$MNT/c/log"
expect_errno "Operation not permitted" "echo 1 > '$MNT/c/log_start_offset'"
expect_contains "$(cat "$MNT/.kpfs/errors")" \
    "Records of partition c-0 can not be deleted due to the configured policy" ".kpfs/errors"

# printf without a newline: the offset applies at close.
printf 4 > "$MNT/t/log_start_offset"
expect_eq "r4" "$(cat "$MNT/t/log")" "cat log after printf 4"
expect_eq $'0\n1\nt 0 4' "$(cat "$DATA/log-start-offset-checkpoint")" "log-start-offset-checkpoint"

umount_kpfs
remount_kpfs
expect_eq "4" "$(cat "$MNT/t/log_start_offset")" "log_start_offset after remount"
expect_eq "r4" "$(cat "$MNT/t/log")" "cat log after remount"

# Retention's log-start rule removes the segment wholly below the start (0: records 0-2),
# not the one the start is in. Its check runs every 500 ms, so it may have run before the
# remount (whose counters start at 0): what is left on disk is what tells.
deleted_below_start() { [ "$(ls "$MNT/t/segments" | grep '\.log$')" == 00000000000000000003.log ]; }
wait_until 60 deleted_below_start ||
    fail "retention did not delete the segment below the log start: $(cat "$MNT/t/status")"
expect_eq "r4" "$(cat "$MNT/t/log")" "cat log after retention"
expect_eq "1" "$(status_field t segment_count)" "segments after retention"
umount_kpfs
