# A full disk: the data directory on a 4 MiB tmpfs. Appending until write(2) fails with
# ENOSPC must leave only whole, acknowledged lines in the log. Nothing of the failed
# write was stored, so the topic is not poisoned: it refuses writes with ENOSPC only while
# the disk is full. The operator gets space back by lowering retention on the full disk:
# config changes (a change of rendering too) apply in memory at once (status, .kpfs/config
# and .kpfs/errors say they are not saved yet), retention deletes, the changes are saved,
# and writes resume without a remount. No .tmp file is left behind, and `kpfs check` is
# clean.
source "$(dirname "$0")/lib.sh"

# Not registered with new_data_dir: lib.sh's cleanup would rm -rf it while mounted.
DATA=$(mktemp -d /tmp/kpfs-data.XXXXXX)
mount -t tmpfs -o size=4m tmpfs "$DATA" || fail "cannot mount a tmpfs on $DATA"
tmpfs_cleanup() {
    _kpfs_cleanup
    umount -l "$DATA" 2>/dev/null || true
    rmdir "$DATA" 2>/dev/null || true
}
trap tmpfs_cleanup EXIT
new_mountpoint MNT
remount_kpfs --override log.retention.check.interval.ms=200

mkdir "$MNT/filler" "$MNT/t"
printf '%s\n' internal.segment.bytes=65536 segment.index.bytes=4096 >"$MNT/t/config"
printf '%s\n' internal.segment.bytes=65536 segment.index.bytes=4096 >"$MNT/filler/config"
# 1.5 MiB in another topic, to be freed later.
head -n 8000 < <(yes "$(printf "f%.0s" $(seq 1 200))") >>"$MNT/filler/log"

# One line per write, each remembered once acknowledged, until the disk is full.
ledger=$(mktemp)
KPFS_DATA_DIRS+=("$ledger")
err=$(
    exec 3>>"$MNT/t/log"
    i=0
    pad=$(printf 'x%.0s' $(seq 1 50))
    while :; do
        l="line-$i-${pad:0:$((i % 50))}"
        # The first failure is the interesting one: a retry would only see the EIO of
        # the poisoned topic.
        if ! e=$(printf '%s\n' "$l" 2>&1 >&3); then
            echo "$e"
            exit 0
        fi
        echo "$l" >>"$ledger"
        i=$((i + 1))
        [ "$i" -lt 200000 ] || exit 1
    done
) || fail "the disk never filled up"
expect_contains "$err" "No space left on device" "the failing write"
acked=$(wc -l <"$ledger")
[ "$acked" -gt 1000 ] || fail "only $acked lines fit"

# Nothing torn, nothing lost: the log is exactly the acknowledged lines.
expect_eq "$(cat "$ledger")" "$(cat "$MNT/t/log")" "log after ENOSPC"
# Not poisoned: the next write is refused for the same reason, and stores nothing.
expect_contains "$(cat "$MNT/t/status")" "write_state: ok" "status after ENOSPC"
expect_errno "No space left on device" "echo more >> '$MNT/t/log'"
expect_eq "$(cat "$ledger")" "$(cat "$MNT/t/log")" "log after a second ENOSPC"
expect_contains "$(cat "$MNT/filler/status")" "write_state: ok" "filler status"

no_tmp() { [ -z "$(find "$DATA" -name '*.tmp')" ]; }
# Config writes work on the full disk: applied in memory, saved when there is space.
echo "log.segment.delete.delay.ms=0" >>"$MNT/.kpfs/config" || fail "broker config write on a full disk"
expect_contains "$(cat "$MNT/.kpfs/config")" "# warning: the dynamic broker configs in force are not saved yet" ".kpfs/config on a full disk"
expect_contains "$(cat "$MNT/.kpfs/errors")" ".kpfs/config: warning: the dynamic broker configs in force are not saved yet" ".kpfs/errors"
wait_until 5 no_tmp || fail "a .tmp file stays behind: $(find "$DATA" -name '*.tmp')"
# A change of rendering: the bytes of t's earlier lines wait in memory.
echo "null.marker=NIL" >>"$MNT/t/config" || fail "a rendering change on a full disk"
expect_contains "$(cat "$MNT/t/status")" "the renderings of earlier lines are not saved yet" "t's status on a full disk"
# Lowering retention last: its check (every 200 ms) frees the space that the checks above
# need to stay full.
echo "retention.ms=1" >>"$MNT/filler/config" || fail "lowering retention on a full disk"
expect_contains "$(cat "$MNT/.kpfs/errors")" "filler/config: warning: the overrides in force are not saved yet" ".kpfs/errors"
# Retention (every 200 ms) deletes filler's segments, removed at once (delay 0); the
# space comes back, the changes are saved and the warnings go.
saved() {
    ! grep -q "not saved yet" "$MNT/filler/status" &&
        ! grep -q "not saved yet" "$MNT/t/status" &&
        ! grep -q "^unsaved: " "$MNT/filler/status" &&
        ! grep -q "^# warning: " "$MNT/.kpfs/config"
}
wait_until 20 saved || fail "configs never saved: $(grep -E 'saved|unsaved' "$MNT/filler/status"; tail -n 3 "$MNT/.kpfs/config")"
expect_eq "" "$(cat "$MNT/filler/log")" "filler after retention"
no_tmp || fail "a .tmp file stays behind: $(find "$DATA" -name '*.tmp')"

# Writes to t resume without a remount.
echo "after-space" >>"$MNT/t/log" || fail "write after space came back"
expect_eq "$(cat "$ledger"; echo after-space)" "$(cat "$MNT/t/log")" "log after space came back"

# Everything persisted and checks clean; filler's stream position (the size of its
# emptied log) was saved once there was space.
filler_size=$(stat -c %s "$MNT/filler/log")
umount_kpfs
out=$("$KPFS" check "$DATA" 2>&1) || fail "kpfs check after ENOSPC: $out"
remount_kpfs
grep -qx "retention.ms=1" "$MNT/filler/config" || fail "filler's retention.ms lost: $(head -n 5 "$MNT/filler/config")"
grep -qx "log.segment.delete.delay.ms=0" "$MNT/.kpfs/config" || fail "broker change lost"
grep -q "^until=" "$DATA/kpfs-topics/t-0/renderings" || fail "t's renderings not saved: $(cat "$DATA/kpfs-topics/t-0/renderings")"
expect_eq "$filler_size" "$(stat -c %s "$MNT/filler/log")" "size of filler's log after remount"
echo "after-remount" >>"$MNT/t/log" || fail "write after remount"
expect_eq "$(cat "$ledger"; echo after-space; echo after-remount)" "$(cat "$MNT/t/log")" "log after remount"
umount_kpfs
out=$("$KPFS" check "$DATA" 2>&1) || fail "kpfs check after remount: $out"

# Large writes (1 MiB each, 64-byte lines, so each is whole lines): the one the disk
# cannot hold is refused whole, and nothing of it stays in the segment.
remount_kpfs
mkdir "$MNT/big"
input=$(mktemp)
KPFS_DATA_DIRS+=("$input")
head -c 8M < <(yes "$(printf 'b%.0s' $(seq 1 63))") >"$input"
expect_errno "No space left on device" "dd if='$input' of='$MNT/big/log' bs=1M oflag=append conv=notrunc status=none"
size=$(stat -c %s "$MNT/big/log")
[ $((size % (1 << 20))) -eq 0 ] || fail "big's log holds $size bytes: not whole writes"
cmp -s -n "$size" "$input" "$MNT/big/log" || fail "big's log is not the writes that succeeded"
expect_contains "$(cat "$MNT/big/status")" "write_state: ok" "big's status after ENOSPC"
umount_kpfs
out=$("$KPFS" check "$DATA" 2>&1) || fail "kpfs check after a large write hit ENOSPC: $out"
