# A full disk: the data directory on a 4 MiB tmpfs. Appending until write(2) fails with
# ENOSPC must leave only whole, acknowledged lines in the log; the topic then refuses
# writes with EIO and says why in status (the poisoning rule: no write may land after a
# hole); after space is freed and the mount is redone, writes resume and `kpfs check`
# is clean.
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
remount_kpfs

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
expect_contains "$(cat "$MNT/t/status")" "write_state: refusing writes until remount: " "status after ENOSPC"
expect_errno "Input/output error" "echo more >> '$MNT/t/log'"
expect_contains "$(cat "$MNT/.kpfs/errors")" "refuses writes until remount" ".kpfs/errors after ENOSPC"
# Other topics are not poisoned, only refused by the full disk itself, if at all.
expect_contains "$(cat "$MNT/filler/status")" "write_state: ok" "filler status"

# Free space, remount: writes resume and the data directory checks clean.
rmdir "$MNT/filler"
umount_kpfs
mount -o remount,size=16m "$DATA" || fail "cannot grow the tmpfs"
out=$("$KPFS" check "$DATA" 2>&1) || fail "kpfs check after ENOSPC: $out"
remount_kpfs
echo "after-remount" >>"$MNT/t/log" || fail "write after remount"
expect_eq "$(cat "$ledger"; echo after-remount)" "$(cat "$MNT/t/log")" "log after remount"
expect_contains "$(cat "$MNT/t/status")" "write_state: ok" "status after remount"
umount_kpfs
out=$("$KPFS" check "$DATA" 2>&1) || fail "kpfs check after remount: $out"
