# The log cleaner as an operator drives it: cleaner configs written to .kpfs/config apply
# at once (Kafka's LogCleaner.reconfigure restarts the threads with a new offset map),
# emptied batches are kept only where a cleaning round ends, and an invalid
# cleaner-offset-checkpoint entry is rewritten within a backoff.
source "$(dirname "$0")/lib.sh"

mount_kpfs --override log.cleaner.backoff.ms=200
BROKER=$MNT/.kpfs/config

# cleaner_threads: how many kpfs-log-cleaner-thread-N threads the daemon runs (the kernel
# keeps 15 characters of a thread name).
cleaner_threads() {
    local pid
    pid=$(_kpfs_daemon_pid "$DATA") || fail "no daemon for $DATA"
    cat /proc/"$pid"/task/*/comm | grep -c '^kpfs-log-cleane' || true
}
# passes TOPIC: the offset ranges of its cleaning passes, one per line.
passes() { grep -o 'clean offsets \[[0-9]*, [0-9]*)' "$MNT/$1/events" | cut -d' ' -f3- || true; }

# --- log.cleaner.threads and the offset map follow .kpfs/config at once.
expect_eq 1 "$(cleaner_threads)" "cleaner threads at mount"
echo log.cleaner.threads=2 >"$BROKER"
expect_eq 2 "$(cleaner_threads)" "cleaner threads after log.cleaner.threads=2"
# 1048577 bytes make 43,690 map slots; at a load factor of 0.00004 the map holds 1 key.
printf 'log.cleaner.threads=1\nlog.cleaner.dedupe.buffer.size=1048577\nlog.cleaner.io.buffer.load.factor=0.00004\n' >"$BROKER"
expect_eq 1 "$(cleaner_threads)" "cleaner threads after log.cleaner.threads=1"
mkdir "$MNT/keys"
printf 'cleanup.policy=compact\nparse.key=true\nkey.separator=:\nmin.cleanable.dirty.ratio=0.01\nsegment.ms=1000\n' \
    >"$MNT/keys/config"
printf '0:a\n1:b\n0:c\n1:d\n0:e\n' >>"$MNT/keys/log"
sleep 1.1 # scenario time: past segment.ms, so the next append rolls
echo 2:f >>"$MNT/keys/log"
# One key per pass, as Kafka does with such a map (before the fix: one pass [0, 5)).
all_passed() { passes keys | grep -qx '\[4, 5)'; }
wait_until 20 all_passed || fail "no pass reached offset 5: $(passes keys | tr '\n' ' ')"
expect_eq $'[0, 1)\n[1, 2)\n[2, 3)\n[3, 4)\n[4, 5)' "$(passes keys)" "passes with a one-key map"

# --- Only the batch that ends the cleaning round is kept empty: segments 0 and 5 of 16
# keyless lines are cleaned down to nothing, segment 10 keeps one empty batch.
mkdir "$MNT/empty"
echo internal.segment.bytes=410 >"$MNT/empty/config"
for i in $(seq -w 1 16); do echo "line-$i" >>"$MNT/empty/log"; done
bases() { ls "$MNT/empty/segments" | sed -n 's/^0*\([0-9][0-9]*\)\.log$/\1/p' | sort -n | tr '\n' ' '; }
expect_eq "0 5 10 15 " "$(bases)" "segments of 16 lines"
size=$(stat -c %s "$MNT/empty/log")
printf 'cleanup.policy=compact\nmin.cleanable.dirty.ratio=0.01\n' >>"$MNT/empty/config"
cleaned() { [ "$(passes empty)" == "[0, 15)" ]; }
wait_until 20 cleaned || fail "no pass [0, 15): $(passes empty)"
check_emptied() {
    local seg=$MNT/empty/segments what=$1
    expect_eq "0 5 10 15 " "$(bases)" "segments $what"
    expect_eq "0 0" "$(stat -c %s "$seg/00000000000000000000.log" "$seg/00000000000000000005.log" | tr '\n' ' ' | sed 's/ $//')" \
        "sizes of segments 0 and 5 $what"
    expect_eq "baseOffset: 14 lastOffset: 14 count: 0" \
        "$("$KPFS" dump-log "$seg/00000000000000000010.log" | grep -o 'baseOffset: .* count: [0-9]*')" \
        "batches of segment 10 $what"
    expect_eq "line-16" "$(cat "$MNT/empty/log")" "log $what"
    expect_eq "log_end_offset: 16" "$(grep '^log_end_offset:' "$MNT/empty/status")" "status $what"
    expect_eq "$size" "$(stat -c %s "$MNT/empty/log")" "size of log $what"
}
check_emptied "after the pass"
# A crash keeps it all: the gaps lie below the recovery point the pass checkpointed.
kill -9 "$(_kpfs_daemon_pid "$DATA")"
wait_until 10 bash -c "! kill -0 $(head -n1 "$DATA/kpfs.lock") 2>/dev/null" || fail "daemon survived kill -9"
remount_kpfs --override log.cleaner.backoff.ms=200
check_emptied "after kill -9 and a remount"
umount_kpfs

# --- An invalid cleaner-offset-checkpoint entry is rewritten within a backoff, so kpfs
# check is healthy afterwards.
printf '0\n2\nempty 0 16\nkeys 0 200\n' >"$DATA/cleaner-offset-checkpoint"
out=$("$KPFS" check "$DATA" 2>&1) && fail "kpfs check accepted a checkpoint beyond the log end"
expect_contains "$out" "cleaner offset 200 of partition keys-0 is beyond its log end offset 6" "kpfs check"
remount_kpfs --override log.cleaner.backoff.ms=200
rewritten() { ! grep -q '^keys 0 200$' "$DATA/cleaner-offset-checkpoint"; }
wait_until 5 rewritten || fail "checkpoint not rewritten: $(cat "$DATA/cleaner-offset-checkpoint")"
expect_contains "$(cat "$MNT/keys/events")" \
    "checkpoint The last checkpoint dirty offset for partition keys-0 is 200, which is larger than the log end offset 6. Resetting to the log start offset 0." \
    "events of keys"
umount_kpfs
out=$("$KPFS" check "$DATA" 2>&1) || fail "kpfs check after the rewrite: $out"
