# A user other than root mounts, uses and unmounts kpfs: that needs read and write access
# to /dev/fuse and the setuid fusermount3 of the fuse3 package (.ci/run installs it).
# Without them, or with --allow-other but no user_allow_other in /etc/fuse.conf, the
# mount fails saying what is missing and how to fix it.
source "$(dirname "$0")/lib.sh"

[ "$(id -u)" -eq 0 ] || fail "needs root (it creates the test user)"
command -v fusermount3 >/dev/null || fail "needs fusermount3: apt-get install fuse3 (.ci/run does)"

U=kpfs-test-$$
FUSE_MODE=$(stat -c %a /dev/fuse)
new_data_dir HOME_DIR # the user's home: its copy of kpfs and its data dir
new_mountpoint MNT
DATA=$HOME_DIR/data
non_root_cleanup() {
    chmod "$FUSE_MODE" /dev/fuse
    _kpfs_cleanup # unmounts (as root), kills the daemon, removes the directories
    userdel "$U" 2>/dev/null || true
}
trap non_root_cleanup EXIT

useradd --system --no-create-home --home-dir "$HOME_DIR" --shell /usr/sbin/nologin "$U"
KPFS_DATA_DIRS+=("$DATA") # so cleanup finds (and kills) its daemon
chown "$U:" "$HOME_DIR" "$MNT"
chmod 755 "$HOME_DIR"
# The checkout may sit where the user cannot read (e.g. /root): the user gets a copy.
install -m 755 "$KPFS" "$HOME_DIR/kpfs"
as_user() { runuser -u "$U" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$HOME_DIR" "$@"; }
as_user mkdir "$DATA"
user_kpfs() { as_user "$HOME_DIR/kpfs" "$@"; }
user_mount() { user_kpfs mount "$MNT" --data-dir "$DATA" "$@"; }

# /dev/fuse closed to the user: says so and how to open it.
chmod 600 /dev/fuse
err=$(user_mount 2>&1) && fail "mounted without access to /dev/fuse"
expect_contains "$err" "this user cannot open /dev/fuse" "mount error without /dev/fuse access"
expect_contains "$err" "chmod 0666 /dev/fuse" "mount error without /dev/fuse access"
chmod 666 /dev/fuse

# No fusermount3 (FUSERMOUNT_PATH is where fuser looks first): says to install fuse3.
err=$(runuser -u "$U" -- env -i PATH=/usr/bin:/bin FUSERMOUNT_PATH=/nonexistent/fusermount3 \
    "$HOME_DIR/kpfs" mount "$MNT" --data-dir "$DATA" 2>&1) && fail "mounted without fusermount3"
expect_contains "$err" "needs the setuid helper fusermount3" "mount error without fusermount3"
expect_contains "$err" "apt-get install fuse3" "mount error without fusermount3"

# --allow-other needs user_allow_other in /etc/fuse.conf (Debian ships it commented out).
if ! grep -qx 'user_allow_other' /etc/fuse.conf 2>/dev/null; then
    err=$(user_mount --allow-other 2>&1) && fail "--allow-other mounted without user_allow_other"
    expect_contains "$err" "needs the line user_allow_other in /etc/fuse.conf" "mount error with --allow-other"
fi

# The supported way: mount, use, unmount as the user.
user_mount || fail "non-root mount failed"
as_user mountpoint -q "$MNT" || fail "$MNT is not a mount point"
grep -q " $MNT .* - fuse .*user_id=$(id -u "$U")," /proc/self/mountinfo || fail "not mounted for the user: $(grep " $MNT " /proc/self/mountinfo)"
as_user mkdir "$MNT/t"
as_user bash -c "echo first >>'$MNT/t/log'; printf 'second\nthird\n' >>'$MNT/t/log'"
expect_eq $'first\nsecond\nthird' "$(as_user cat "$MNT/t/log")" "log read by the user"
as_user bash -c "echo retention.ms=600000 >'$MNT/t/config'"
expect_contains "$(as_user cat "$MNT/t/config")" "retention.ms=600000" "config"
expect_eq "log_end_offset: 3" "$(as_user grep '^log_end_offset:' "$MNT/t/status")" "status"
# Root is not let in without --allow-other, as for any FUSE mount of another user.
! cat "$MNT/t/log" >/dev/null 2>&1 || fail "root read a mount made without --allow-other"

# A killed daemon leaves a dead mount; the user's next mount detaches it (fusermount3 -u,
# since umount2 is root's) and the data is all there.
pid=$(_kpfs_daemon_pid "$DATA") || fail "no daemon"
[ "$(stat -c %U "/proc/$pid")" == "$U" ] || fail "the daemon does not run as $U"
kill -9 "$pid"
wait_until 10 bash -c "! kill -0 $pid 2>/dev/null" || fail "daemon survived kill -9"
user_mount || fail "non-root remount after kill -9 failed"
expect_eq $'first\nsecond\nthird' "$(as_user cat "$MNT/t/log")" "log after kill -9 and a remount"

user_kpfs umount "$MNT" || fail "non-root kpfs umount failed"
! as_user mountpoint -q "$MNT" || fail "$MNT still mounted after kpfs umount"
! _kpfs_daemon_pid "$DATA" >/dev/null || fail "the daemon still runs after kpfs umount"
[ -e "$DATA/.kpfs_cleanshutdown" ] || fail "no clean shutdown marker after kpfs umount"
