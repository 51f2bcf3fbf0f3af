# One open-to-close of a config file is one change, as users read a config file: every
# line is checked as it arrives (a bad one fails its write at once), the change applies
# at close or not at all, `>` makes the lines the whole set of overrides and `>>` changes
# only the keys named. What `cat config` prints, written back, sets exactly the overrides
# it showed, and saving in vim works and leaves nothing in .kpfs/errors.
source "$(dirname "$0")/lib.sh"
command -v vim >/dev/null || fail "vim is not installed (.ci/run installs it)"

mount_kpfs
new_data_dir scratch # a temp dir that cleanup removes
export HOME=$scratch # vim's swap, backup and viminfo files go here, not on the mount
mkdir "$MNT/t"
CONFIG=$MNT/t/config
ERRORS=$MNT/.kpfs/errors

overrides() { sed -n '/^# overrides$/,/^# defaults$/p' "$1" | grep -v '^#' || true; }
errors_since() { tail -n +"$(($1 + 1))" "$ERRORS"; }
error_count() { wc -l <"$ERRORS"; }

# The issue's repro: bash's printf writes once per line. The bad line fails its write
# (bash prints the error) and nothing of the change applies.
n=$(error_count)
err=$(printf 'retention.ms=600000\nretention.bytes=300\nsegment.bytes=400\nsegment.ms=3000\n' 2>&1 >"$CONFIG") && fail "a bad line was accepted"
expect_contains "$err" "write error: Invalid argument" "bash's printf"
expect_eq "" "$(overrides "$CONFIG")" "overrides after a refused change"
expect_contains "$(errors_since "$n")" "t/config: Invalid value 400 for configuration segment.bytes: Value must be at least 1048576"
expect_contains "$(errors_since "$n")" "t/config: nothing of this change applied: line 3 of 4 was refused"

# The checks across keys run at every write on the config in force plus the lines so
# far, so bash reports the line that makes the config invalid (it never reports a
# close's error): Kafka's text in .kpfs/errors, nothing of the change applied.
n=$(error_count)
err=$(printf 'min.compaction.lag.ms=5000\nmax.compaction.lag.ms=1000\n' 2>&1 >"$CONFIG") && fail "a cross-key conflict was accepted"
expect_contains "$err" "write error: Invalid argument" "bash's printf of a cross-key conflict"
expect_eq "" "$(overrides "$CONFIG")" "overrides after a cross-key conflict"
expect_contains "$(errors_since "$n")" "t/config: conflict topic config setting min.compaction.lag.ms (5000) > max.compaction.lag.ms (1000)"
expect_contains "$(errors_since "$n")" "t/config: nothing of this change applied: line 2 of 2 was refused"
# The same lines in one write(2) (python, cat) are refused by that write.
out=$(python3 - "$CONFIG" <<'EOF'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
try:
    os.write(fd, b"min.compaction.lag.ms=5000\nmax.compaction.lag.ms=1000\n")
    print("written")
except OSError as e:
    print(e.strerror)
try:
    os.close(fd)
except OSError as e:
    print("close:", e.strerror)
EOF
)
expect_eq $'Invalid argument\nclose: Invalid argument' "$out" "a multi-line write that conflicts across keys"
# Lines apply in order: the valid end state is reached by writing the loosening line
# first, and a write may pass through a conflict its own later line resolves.
printf 'max.compaction.lag.ms=1000\nmin.compaction.lag.ms=500\n' >"$CONFIG"
expect_eq $'max.compaction.lag.ms=1000\nmin.compaction.lag.ms=500' "$(overrides "$CONFIG")" "ordered lines"
printf 'min.compaction.lag.ms=5000\nmax.compaction.lag.ms=9000\n' | cat >"$CONFIG"
expect_eq $'max.compaction.lag.ms=9000\nmin.compaction.lag.ms=5000' "$(overrides "$CONFIG")" "one write through a conflict"
: >"$CONFIG"
# The broker's cleaner rules too (Kafka's LogCleaner.validateReconfiguration and
# KafkaConfig's per-thread dedupe buffer).
BROKER=$MNT/.kpfs/config
n=$(error_count)
err=$(echo log.cleaner.threads=3 2>&1 >>"$BROKER") && fail "tripling the cleaner threads was accepted"
expect_contains "$err" "write error: Invalid argument" "echo of log.cleaner.threads=3"
expect_contains "$(errors_since "$n")" ".kpfs/config: Log cleaner threads cannot be increased to more than double the current value 1"
err=$(echo log.cleaner.dedupe.buffer.size=1048576 2>&1 >>"$BROKER") && fail "a 1 MiB dedupe buffer for one thread was accepted"
expect_contains "$err" "write error: Invalid argument" "echo of log.cleaner.dedupe.buffer.size=1048576"
expect_contains "$(errors_since "$n")" ".kpfs/config: log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread."
# The one override of a new data directory: the cluster's min.insync.replicas (Kafka's ELR).
expect_eq "min.insync.replicas=1" "$(overrides "$BROKER")" ".kpfs/config overrides after the refusals"

# Valid lines in one write each: nothing applies before the close, which applies them
# all; a reader meanwhile sees the config as it was.
out=$(python3 - "$CONFIG" <<'EOF'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC)
os.write(fd, b"retention.ms=600000\n")
os.write(fd, b"segment.ms=3000\n")
before = open(sys.argv[1]).read()
os.close(fd)
after = open(sys.argv[1]).read()
print("retention.ms=600000" in before, "retention.ms=600000\nsegment.ms=3000\n" in after)
EOF
)
expect_eq "False True" "$out" "config read before and after the close"

# `>>` changes the keys it names, `>` replaces the overrides.
echo "flush.ms=7" >>"$CONFIG"
expect_eq $'flush.ms=7\nretention.ms=600000\nsegment.ms=3000' "$(overrides "$CONFIG")" "after >>"
echo "-segment.ms" >>"$CONFIG"
expect_eq $'flush.ms=7\nretention.ms=600000' "$(overrides "$CONFIG")" "after >> -key"
echo "retention.ms=1000" >"$CONFIG"
expect_eq "retention.ms=1000" "$(overrides "$CONFIG")" "after >"

# A value longer than 8 KiB arriving in two writes is one line.
long=$(head -c 20000 /dev/zero | tr '\0' 'v')
python3 - "$CONFIG" "$long" <<'EOF'
import os, sys
line = ("null.marker=" + sys.argv[2] + "\n").encode()
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
os.write(fd, line[:8192])
os.write(fd, line[8192:])
os.close(fd)
EOF
expect_eq "null.marker=$long" "$(grep '^null.marker=' "$CONFIG")" "a 20 KB value written in two pieces"
echo "-null.marker" >>"$CONFIG"

# A child that inherits the descriptor and exits closes it mid-change: the change waits
# for the writer's own close.
{
    echo "segment.ms=3000"
    /bin/true # forked: its exit closes the inherited descriptor
    expect_eq "retention.ms=1000" "$(overrides "$CONFIG")" "overrides mid-change" >&2
    echo "flush.ms=8"
} >>"$CONFIG"
expect_eq $'flush.ms=8\nretention.ms=1000\nsegment.ms=3000' "$(overrides "$CONFIG")" "after the group's close"

# Round trip: defaults are comments with their source, so a saved copy written back sets
# exactly the saved overrides, and defaults keep following the broker.
expect_contains "$(cat "$CONFIG")" "# file.delete.delay.ms=60000 (DEFAULT_CONFIG:log.segment.delete.delay.ms=60000)"
cat "$CONFIG" >"$scratch/saved"
printf 'retention.ms=5\ncleanup.policy=compact\n' >"$CONFIG"
cat "$scratch/saved" >"$CONFIG"
expect_eq "$(cat "$scratch/saved")" "$(cat "$CONFIG")" "config after cat saved > config"
echo "log.segment.delete.delay.ms=5000" >>"$MNT/.kpfs/config"
expect_contains "$(cat "$CONFIG")" "# file.delete.delay.ms=5000 (DYNAMIC_DEFAULT_BROKER_CONFIG:log.segment.delete.delay.ms=5000)"
expect_eq $'flush.ms=8\nretention.ms=1000\nsegment.ms=3000' "$(overrides "$CONFIG")" "overrides after the broker change"

# .kpfs/config round-trips too: only dynamic overrides are live lines.
cat "$BROKER" >"$scratch/broker"
echo "log.cleaner.backoff.ms=999" >>"$BROKER"
cat "$scratch/broker" >"$BROKER"
expect_eq "$(cat "$scratch/broker")" "$(cat "$BROKER")" ".kpfs/config after cat saved > .kpfs/config"

# sed -i writes a temporary sedXXXXXX beside the file and renames it over the file: the
# temporary is a draft of the config, checked as it is written and applied, whole, by
# the rename. A refused edit changes nothing, sed fails and removes its temporary.
sed -i 's/^retention.ms=1000$/retention.ms=1500/' "$CONFIG" || fail "sed -i on a topic config failed"
expect_eq $'flush.ms=8\nretention.ms=1500\nsegment.ms=3000' "$(overrides "$CONFIG")" "after sed -i"
sed -i -e '/^flush.ms=/d' -e 's/^# \(delete.retention.ms\)=[0-9]*.*/\1=1234/' "$CONFIG" || fail "sed -i deleting a line failed"
expect_eq $'delete.retention.ms=1234\nretention.ms=1500\nsegment.ms=3000' "$(overrides "$CONFIG")" "after sed -i deleted and uncommented"
n=$(error_count)
err=$(sed -i 's/^segment.ms=3000$/segment.bytes=400/' "$CONFIG" 2>&1) && fail "sed -i saved an invalid value"
expect_contains "$err" "Invalid argument" "sed's error"
expect_eq $'delete.retention.ms=1234\nretention.ms=1500\nsegment.ms=3000' "$(overrides "$CONFIG")" "after a refused sed -i"
expect_contains "$(errors_since "$n")" "Invalid value 400 for configuration segment.bytes: Value must be at least 1048576"
expect_eq "" "$(ls "$MNT/t" | grep '^sed' || true)" "sed temporaries left in the topic folder"
sed -i '/^# overrides$/a log.cleaner.backoff.ms=777' "$BROKER" || fail "sed -i on .kpfs/config failed"
expect_eq $'log.cleaner.backoff.ms=777\nlog.segment.delete.delay.ms=5000\nmin.insync.replicas=1' "$(overrides "$BROKER")" ".kpfs/config after sed -i"
n=$(error_count)
err=$(sed -i '/^# overrides$/a log.cleaner.threads=3' "$BROKER" 2>&1) && fail "sed -i tripled the cleaner threads"
expect_contains "$err" "Invalid argument" "sed's error on .kpfs/config"
expect_contains "$(errors_since "$n")" "Log cleaner threads cannot be increased to more than double the current value 1"
expect_eq $'log.cleaner.backoff.ms=777\nlog.segment.delete.delay.ms=5000\nmin.insync.replicas=1' "$(overrides "$BROKER")" ".kpfs/config after a refused sed -i"
expect_eq "" "$(ls "$MNT/.kpfs" | grep '^sed' || true)" "sed temporaries left in .kpfs"
echo "-log.cleaner.backoff.ms" >>"$BROKER"
printf 'flush.ms=8\nretention.ms=1000\nsegment.ms=3000\n' >"$CONFIG"

# vim: every way it saves (swap file probe, truncate and write in 8 KiB pieces, chmod,
# ACL) works, and nothing but what the change itself brings lands in .kpfs/errors.
n=$(error_count)
vim -es -c '%s/^retention.ms=1000$/retention.ms=2000/' -c 'wq' "$CONFIG" || fail "vim :wq failed"
expect_eq $'flush.ms=8\nretention.ms=2000\nsegment.ms=3000' "$(overrides "$CONFIG")" "after vim"
vim -es -c 'g/^flush.ms=/d' -c 'wq' "$CONFIG" || fail "vim :wq failed"
expect_eq $'retention.ms=2000\nsegment.ms=3000' "$(overrides "$CONFIG")" "after vim deleted a line"
vim -es -c 'wq' "$CONFIG" || fail "vim :wq of an unchanged file failed"
ex -s -c "1a|null.marker=$long" -c 'x' "$CONFIG" || fail "ex :x failed"
expect_eq "null.marker=$long" "$(grep '^null.marker=' "$CONFIG")" "a 20 KB value saved by ex"
bad=$(errors_since "$n" | grep -v ': warning: segment.ms .* is above retention.ms' || true)
expect_eq "" "$bad" ".kpfs/errors after saving in vim"
# A save vim cannot do is reported by vim.
n=$(error_count)
vim -es -c '%s/^segment.ms=3000$/segment.bytes=400/' -c 'wq' "$CONFIG" && fail "vim saved an invalid value"
expect_contains "$(errors_since "$n")" "t/config: Invalid value 400 for configuration segment.bytes"
expect_eq $'null.marker='"$long"$'\nretention.ms=2000\nsegment.ms=3000' "$(overrides "$CONFIG")" "after the refused vim save"

# `truncate -s 0` by path removes every override at once.
truncate -s 0 "$CONFIG"
expect_eq "" "$(overrides "$CONFIG")" "after truncate -s 0"

# Every change persists across a remount.
printf 'retention.ms=4321\nmax.message.bytes=2000\n' >"$CONFIG"
umount_kpfs
remount_kpfs
expect_eq $'max.message.bytes=2000\nretention.ms=4321' "$(overrides "$CONFIG")" "overrides after remount"
umount_kpfs
