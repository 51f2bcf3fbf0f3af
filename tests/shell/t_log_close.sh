# When a last line without a newline becomes a record: when the process that wrote it
# closes the file (so close(2) returns a refusal), and at kpfs umount for writers that
# still hold log open. A child closing the copy it inherited leaves the line open. A
# write of such a line that returned is not yet a record: kill -9 of the daemon loses it.
source "$(dirname "$0")/lib.sh"

mount_kpfs
new_data_dir scratch
mkdir "$MNT/t"

# The record is there as soon as the writer's close(2) returned.
printf 'one' >> "$MNT/t/log"
expect_eq "one" "$(cat "$MNT/t/log")" "log right after printf without a newline"

# A child that inherited the descriptor exits (closing its copy) in the middle of the
# parent's line: the line goes on. The parent's close ends it.
python3 - "$MNT/t/log" <<'EOF'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
os.write(fd, b"tw")
pid = os.fork()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
os.write(fd, b"o")
os.close(fd)
EOF
expect_eq $'one\ntwo' "$(cat "$MNT/t/log")" "log after a child closed its copy mid-line"

# close(2) reports the refusal of the line it ends.
mkdir "$MNT/k"
echo "parse.key=true" > "$MNT/k/config"
python3 - "$MNT/k/log" <<'EOF'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
os.write(fd, b"no separator")
try:
    os.close(fd)
except OSError as e:
    assert e.errno == 22, e
else:
    sys.exit("close(2) of a refused line succeeded")
EOF
expect_eq "" "$(cat "$MNT/k/log")" "log after a line refused at close"
expect_contains "$(cat "$MNT/.kpfs/errors")" "k/log: No key separator found on line number 1: 'no separator'" ".kpfs/errors after a refusal at close"

# A writer that keeps log open across kpfs umount: the line it left unterminated becomes
# a record before the daemon closes the data directory.
# hold_open LOG BYTES READY: writes BYTES to LOG, touches READY, keeps LOG open.
hold_open() {
    python3 -c '
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
os.write(fd, sys.argv[2].encode())
open(sys.argv[3], "w").close()
time.sleep(120)' "$@" &
    writer=$!
    wait_until 10 test -e "$3" || fail "the writer did not start"
}
mkdir "$MNT/u"
hold_open "$MNT/u/log" $'done\nfrag' "$scratch/ready-u"
umount_kpfs
kill "$writer" 2>/dev/null || true
wait "$writer" 2>/dev/null || true
remount_kpfs
expect_eq $'done\nfrag' "$(cat "$MNT/u/log")" "log after umount with an open writer"

# kill -9 of the daemon: the complete line of a returned write survives, the line
# without its newline does not (it was not yet a record).
mkdir "$MNT/c"
hold_open "$MNT/c/log" $'kept\nlost' "$scratch/ready-c"
expect_eq "kept" "$(cat "$MNT/c/log")" "log while the writer holds its unterminated line"
pid=$(_kpfs_daemon_pid "$DATA") || fail "no daemon"
kill -9 "$pid"
kill "$writer" 2>/dev/null || true
wait "$writer" 2>/dev/null || true
# kpfs umount detaches a mount whose daemon is gone.
"$KPFS" umount "$MNT" || fail "kpfs umount of the dead mount failed"
remount_kpfs
expect_eq "kept" "$(cat "$MNT/c/log")" "log after kill -9 with an open writer"
umount_kpfs
