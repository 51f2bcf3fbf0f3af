# Issue 24's crash image: after a kill -9, two entries past the valid ones of a segment's
# .index and 104 bytes of garbage after its last batch. `kpfs check` names the damage; the
# next mount cuts the log back to its 80 records and rebuilds the index as the whole file,
# so dump-log shows only the rebuilt entries and `kpfs check` finds nothing, mounted or
# not; the cut is in the topic's `events`, in its `status` and in `.kpfs/errors`.
source "$(dirname "$0")/lib.sh"

mount_kpfs
mkdir "$MNT/c"
echo index.interval.bytes=77 >>"$MNT/c/config"
for i in $(seq 1 80); do printf 'rec-%06d\n' "$i" >>"$MNT/c/log"; done
expected=$(cat "$MNT/c/log")
pid=$(_kpfs_daemon_pid "$DATA") || fail "no daemon"
kill -9 "$pid"
wait_until 10 eval '! _kpfs_daemon_pid "$DATA"' || fail "the daemon survived kill -9"
"$KPFS" umount "$MNT" || fail "kpfs umount of the dead mount failed"

segment=$DATA/c-0/00000000000000000000
expect_eq 6240 "$(stat -c %s "$segment.log")" "the .log after 80 records"
last=$("$KPFS" dump-log "$segment.index" | tail -n 1)
expect_eq "offset: 79 position: 6162" "$last" "the last index entry"
# The two entries go right after the 79 valid ones, into the preallocated zeroes.
printf '\x7f\xff\xff\xf0\x00\x00\x10\x00\x7f\xff\xff\xf1\x00\x00\x20\x00' |
    dd of="$segment.index" bs=8 seek=79 conv=notrunc status=none
head -c 104 /dev/zero | tr '\0' '\245' >>"$segment.log"
status=0
report=$("$KPFS" check "$DATA" 2>&1) || status=$?
[ "$status" -ne 0 ] || fail "kpfs check passed the damaged image: $report"
expect_contains "$report" "00000000000000000000.index: byte 632: Index offset 2147483632 points to position 4096, not after the previous entry's position 6162" "kpfs check"
expect_contains "$report" "00000000000000000000.index: byte 640: Index offset 2147483633 points to position 8192" "kpfs check"
expect_contains "$report" "00000000000000000000.log: position 6240: " "kpfs check"

remount_kpfs
expect_eq "$expected" "$(cat "$MNT/c/log")" "c/log after the recovery"
expect_eq 6240 "$(stat -c %s "$segment.log")" "the .log after the recovery"
dump=$("$KPFS" dump-log "$segment.index")
expect_eq "offset: 79 position: 6162" "$(tail -n 1 <<<"$dump")" "the last index entry after the recovery"
expect_eq 79 "$(grep -c '^offset: ' <<<"$dump")" "index entries after the recovery"
"$KPFS" check "$DATA" >/dev/null || fail "kpfs check of the recovered, mounted data dir: $("$KPFS" check "$DATA" 2>&1)"
cut="00000000000000000000.log cut at position 6240 (104 bytes cut: "
expect_contains "$(cat "$MNT/c/events")" " recovery $cut" "c/events"
expect_contains "$(status_field c last_recovery)" "$cut" "last_recovery in c/status"
expect_contains "$(status_field c last_recovery)" "the log now ends at offset 80, 0 later segment(s) deleted" "last_recovery in c/status"
expect_contains "$(cat "$MNT/.kpfs/errors")" " c/segments/00000000000000000000.log: recovery: cut at position 6240 (104 bytes cut: " ".kpfs/errors"
echo "rec-000081" >>"$MNT/c/log"
expect_eq "rec-000081" "$(tail -n 1 "$MNT/c/log")" "an append after the recovery"

umount_kpfs
expect_eq 80 "$("$KPFS" dump-log "$segment.index" | grep -c '^offset: ')" "index entries after the unmount"
"$KPFS" check "$DATA" >/dev/null || fail "kpfs check after the unmount: $("$KPFS" check "$DATA" 2>&1)"
# Nothing was cut at this mount: the line is the last recovery's, and it is gone.
remount_kpfs
expect_eq "" "$(status_field c last_recovery)" "last_recovery after a clean remount"
umount_kpfs
