# Backing up a mount with tar and rsync (docs/SEMANTICS.md, "Backing up a mount"). The live
# `log` of a topic that lost records is larger than what reads return (its size is the
# stream end, for tail -f), so tar pads it and rsync fails on it; .kpfs/snapshot/TOPIC/log
# holds the same records end to end with an exact size. On a topic with retention gaps
# (whole segments and a log start inside one) and a compacted one: tar and rsync exit 0,
# what they copied equals `cat log`, a second rsync copies nothing, and appends during a
# backup do not break it.
source "$(dirname "$0")/lib.sh"

mount_kpfs --override log.retention.check.interval.ms=200 --override log.cleaner.backoff.ms=200 \
    --override log.segment.delete.delay.ms=200
new_data_dir W # scratch: copies and archives
SNAP=$MNT/.kpfs/snapshot

# after_ms MS: returns once MS ms of wall time have passed (rolls by segment.ms).
after_ms() {
    local since
    since=$(date +%s%3N)
    wait_until 5 bash -c "[ \$(date +%s%3N) -gt $((since + $1)) ]" || fail "the clock did not move"
}

# --- retained: three rounds of 20 records, one segment each; retention.bytes of the
# last segment's size deletes the first two, and a log start inside the third cuts 3
# more records.
mkdir "$MNT/retained"
echo segment.ms=100 >"$MNT/retained/config"
for round in 1 2 3; do
    printf "round$round-record-%02d\n" $(seq 1 20) >"$W/round"
    cat "$W/round" >>"$MNT/retained/log"
    [ "$round" -eq 3 ] || after_ms 100
done
expect_eq 3 "$(status_field retained segment_count)" "segments of retained"
segment=$(stat -c %s "$MNT/retained/segments/00000000000000000040.log")
echo "retention.bytes=$segment" >>"$MNT/retained/config"
wait_until 10 bash -c "[ \"\$(cat '$MNT/retained/log_start_offset')\" == 40 ]" ||
    fail "retention kept the first segments: log start $(cat "$MNT/retained/log_start_offset")"
echo 43 >"$MNT/retained/log_start_offset"

# --- compacted: five keys written four times; the cleaner keeps one value per key of the
# segments before the active one.
mkdir "$MNT/compacted"
printf 'cleanup.policy=compact\nparse.key=true\nkey.separator=:\nmin.cleanable.dirty.ratio=0.01\nsegment.ms=100\n' \
    >"$MNT/compacted/config"
for n in 1 2 3 4; do
    printf "k%d:value-$n\n" 1 2 3 4 5 >"$W/round"
    cat "$W/round" >>"$MNT/compacted/log"
done
after_ms 100
echo k1:latest >>"$MNT/compacted/log"
cleaned() { grep -q 'clean offsets \[0, 20)' "$MNT/compacted/events"; }
wait_until 20 cleaned || fail "no cleaning pass: $(cat "$MNT/compacted/events")"

# Each copy's `log` is the topic's `cat log`; its size is that, below the live size.
for t in retained compacted; do
    cat "$MNT/$t/log" >"$W/$t.cat"
    visible=$(stat -c %s "$W/$t.cat")
    [ "$visible" -lt "$(stat -c %s "$MNT/$t/log")" ] || fail "$t/log has no gap"
    expect_eq "$visible" "$(stat -c %s "$SNAP/$t/log")" "size of .kpfs/snapshot/$t/log"
    cmp "$W/$t.cat" "$SNAP/$t/log" || fail ".kpfs/snapshot/$t/log differs from cat $t/log"
done
expect_eq "$(printf 'round3-record-%02d\n' $(seq 4 20))" "$(cat "$SNAP/retained/log")" "retained"
# The active segment (k1:latest) is never cleaned, so k1's value-4 stays below it.
expect_eq "$(printf 'k%d:value-4\n' 1 2 3 4 5)"$'\nk1:latest' "$(cat "$SNAP/compacted/log")" \
    "compacted: the latest value of each key in the cleaned segment"

# The live tree is what tar cannot copy: it pads the missing bytes and exits 1.
status=0
err=$(tar -C "$MNT" -cf "$W/live.tar" retained/log 2>&1) || status=$?
expect_eq 1 "$status" "tar of the live log"
expect_contains "$err" "File shrank by" "tar of the live log"

# --- tar
status=0
err=$(tar -C "$SNAP" -cf "$W/backup.tar" retained compacted 2>&1) || status=$?
expect_eq "0:" "$status:$err" "tar's exit status and stderr"
mkdir "$W/x"
tar -C "$W/x" -xf "$W/backup.tar"
for t in retained compacted; do
    cmp "$W/$t.cat" "$W/x/$t/log" || fail "the tar of $t/log differs from cat log"
    cmp "$MNT/$t/config" "$W/x/$t/config" || fail "the tar of $t/config differs"
done

# --- rsync, then again: nothing changed, nothing is copied.
status=0
err=$(rsync -a "$SNAP/" "$W/dst/" 2>&1) || status=$?
expect_eq "0:" "$status:$err" "rsync's exit status and stderr"
for t in retained compacted; do
    cmp "$W/$t.cat" "$W/dst/$t/log" || fail "the rsync of $t/log differs from cat log"
done
expect_eq "" "$(rsync -ai "$SNAP/" "$W/dst/")" "what a second rsync changes"

# --- appends during a backup: each copy is the topic at one moment, a prefix of what
# the log holds after, in whole lines.
mkdir "$MNT/busy"
seq -f 'busy-line-%06g' 1 200000 >>"$MNT/busy/log"
: >"$W/appending"
(while [ -e "$W/appending" ]; do echo appended-during-the-backup >>"$MNT/busy/log"; done) &
appender=$!
wait_until 10 grep -q appended-during-the-backup "$MNT/busy/log" || fail "the appender did not start"
status=0
err=$(tar -C "$SNAP" -cf "$W/busy.tar" busy 2>&1) || status=$?
expect_eq "0:" "$status:$err" "tar during appends"
status=0
err=$(rsync -a "$SNAP/busy/" "$W/busy-rsync/" 2>&1) || status=$?
expect_eq "0:" "$status:$err" "rsync during appends"
rm "$W/appending"
wait "$appender"
mkdir "$W/busy-x"
tar -C "$W/busy-x" -xf "$W/busy.tar"
cat "$MNT/busy/log" >"$W/busy.cat"
for copy in "$W/busy-x/busy/log" "$W/busy-rsync/log"; do
    size=$(stat -c %s "$copy")
    [ "$size" -gt 0 ] && [ "$size" -le "$(stat -c %s "$W/busy.cat")" ] || fail "$copy has $size bytes"
    cmp -n "$size" "$copy" "$W/busy.cat" || fail "$copy is not a prefix of the log"
    expect_eq "" "$(tail -c 1 "$copy" | tr -d '\n')" "the last byte of $copy"
done

umount_kpfs
