# Hostile input at the shell: NUL bytes and invalid UTF-8 round-trip; thousands of
# topics; writes to read-only files, mknod and xattrs refused with a reason; rmdir of a
# topic that is open for reading and writing (and then made again); umount with open
# files; a hand-edited sealed segment; dump-log on random bytes.
source "$(dirname "$0")/lib.sh"

mount_kpfs
mkdir "$MNT/t"

# NUL bytes and invalid UTF-8 are bytes like any other.
printf 'a\0b\nc\377\376d\n\200\n' >>"$MNT/t/log"
expect_eq "$(printf 'a\0b\nc\377\376d\n\200\n' | od -An -c)" "$(od -An -c <"$MNT/t/log")" "bytes read back"

# Many topics.
n=${KPFS_HOSTILE_TOPICS:-10000}
started=$(date +%s)
for i in $(seq 1 "$n"); do mkdir "$MNT/topic-$i"; done
expect_eq $((n + 1)) "$(ls "$MNT" | wc -l)" "ls | wc -l after $n mkdirs"
echo "created $n topics in $(($(date +%s) - started)) s"

# Read-only files: a clear errno and the reason in .kpfs/errors.
expect_errno "Permission denied" "echo x >> '$MNT/t/status'"
expect_rejection "t/status"
seg=$(ls "$MNT/t/segments" | grep '\.log$' | head -n1)
expect_errno "Permission denied" "echo x >> '$MNT/t/segments/$seg'"
expect_rejection "t/segments/$seg"
expect_errno "Permission denied" "echo x >> '$MNT/.kpfs/errors'"
expect_rejection ".kpfs/errors"
expect_errno "Operation not permitted" "mknod '$MNT/t/fifo' p"
expect_rejection "t/fifo"
if command -v setfattr >/dev/null; then
    expect_errno "Operation not permitted" "setfattr -n user.x -v 1 '$MNT/t/log'"
else
    expect_errno "Operation not permitted" "python3 -c \"import os; os.setxattr('$MNT/t/log', 'user.x', b'1')\""
fi
expect_contains "$(cat "$MNT/.kpfs/errors")" "extended attributes are not supported" ".kpfs/errors after setxattr"

# rmdir of a topic with an open reader and an open writer: the removal succeeds; the
# open descriptors then fail with ENOENT (never the deleted records, never a hang, never
# a write acknowledged into the deleted topic), and reach nothing of a new topic of the
# same name. The reader reads with pread, as `less` or `tail -c` position theirs.
mkdir "$MNT/busy"
echo "one" >>"$MNT/busy/log"
exec 3<"$MNT/busy/log" 4>>"$MNT/busy/log"
pread_log="timeout 10 python3 -c 'import os, sys; sys.stdout.buffer.write(os.pread(3, 100, 0))'"
expect_eq "one" "$(bash -c "$pread_log")" "a pread of the open log"
rmdir "$MNT/busy" || fail "rmdir of a topic with open descriptors failed"
[ ! -e "$MNT/busy" ] || fail "busy still exists after rmdir"
expect_errno "No such file or directory" "$pread_log"
expect_errno "No such file or directory" "timeout 10 cat <&3"
status=0
err=$(timeout 10 bash -c 'echo two >&4' 2>&1) || status=$?
[ "$status" -ne 124 ] || fail "write to a deleted topic's open log hung"
# Never acknowledged into files that are gone: the write is refused.
[ "$status" -ne 0 ] || fail "a write to a deleted topic was acknowledged"
expect_contains "$err" "No such file or directory" "error of a write after rmdir"
mkdir "$MNT/busy"
expect_eq "" "$(cat "$MNT/busy/log")" "a new topic of the same name is empty"
echo "new" >>"$MNT/busy/log"
expect_errno "No such file or directory" "$pread_log"
expect_errno "No such file or directory" "echo two >&4"
expect_eq "new" "$(cat "$MNT/busy/log")" "the new topic, after the old descriptors tried it"
exec 3<&- 4>&-

# kpfs umount with files open succeeds within its deadline.
exec 5<"$MNT/t/log" 6>>"$MNT/t/log"
timeout 40 "$KPFS" umount "$MNT" || fail "kpfs umount with open files failed"
exec 5<&- 6>&-
! mountpoint -q "$MNT" || fail "still mounted"

# A hand-edited sealed segment: flip a byte, make recovery scan (no clean marker and no
# recovery point, which would vouch for the segment as Kafka's does), remount.
remount_kpfs
printf 'internal.segment.bytes=300\n' >"$MNT/t/config"
for i in $(seq 1 40); do echo "edit-$i-xxxxxxxxxx" >>"$MNT/t/log"; done
umount_kpfs
first=$(ls "$DATA/t-0/"*.log | head -n1)
[ "$(ls "$DATA/t-0/"*.log | wc -l)" -gt 3 ] || fail "expected several segments"
size=$(stat -c %s "$first")
printf '\x55' | dd of="$first" bs=1 seek=$((size - 5)) conv=notrunc status=none
rm -f "$DATA/.kpfs_cleanshutdown" "$DATA/recovery-point-offset-checkpoint"
remount_kpfs
shown=$(cat "$MNT/t/log" | tr -d '\0' | grep -av '^edit-[0-9]*-x*$' | grep -av '^a' | grep -av '^c' | grep -av $'^\x80' || true)
expect_eq "" "$shown" "lines that are not whole records"
umount_kpfs
out=$("$KPFS" check "$DATA" 2>&1) || fail "kpfs check after recovering a hand-edited segment: $out"

# dump-log on random bytes: non-zero exit, an error message, no panic.
junk=$DATA/00000000000000000000.log
head -c 5000 /dev/urandom >"$junk"
status=0
err=$("$KPFS" dump-log "$junk" --print-data-log 2>&1) || status=$?
[ "$status" -ne 0 ] || fail "dump-log on random bytes succeeded"
case $err in *panicked*) fail "dump-log panicked: $err" ;; esac
rm "$junk"
