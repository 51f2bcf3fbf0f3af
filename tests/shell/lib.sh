# Helpers for kpfs shell tests; source this file first. Tests behave like a user at a
# shell and never sleep for luck: every wait is a poll with a deadline.
#
#   KPFS   the binary under test (default: target/debug/kpfs of this checkout)
#
# After mount_kpfs: $MNT is the mount point, $DATA the data directory.

set -euo pipefail

KPFS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# Go's own installs put it in /usr/local/go, which a non-login shell's PATH may lack (the
# sarama and franz-go tests need it).
command -v go >/dev/null || PATH=$PATH:/usr/local/go/bin
KPFS=${KPFS:-$KPFS_ROOT/target/debug/kpfs}
case $KPFS in /*) ;; *) KPFS=$PWD/$KPFS ;; esac
[ -x "$KPFS" ] || { echo "FAIL: no kpfs binary at $KPFS (cargo build first)" >&2; exit 1; }

# On a libfaketime clock (run.sh --clock sets FAKETIME for everything, --daemon-clock
# KPFS_DAEMON_CLOCK for kpfs alone), every kpfs this test starts, and the daemon it
# re-executes, runs through a wrapper that keeps its monotonic clock real: faked, the
# daemon's timed waits stall (retention, group timers and shutdown never come), while
# Python's and librdkafka's sleeps need it faked (see run.sh).
if [ -n "${KPFS_DAEMON_CLOCK:-}${FAKETIME:-}" ]; then
    _kpfs_binary=$KPFS
    KPFS=$(mktemp /tmp/kpfs-on-clock.XXXXXX)
    printf '#!/bin/sh\nLD_PRELOAD=%s FAKETIME="${FAKETIME:-%s}" FAKETIME_DONT_FAKE_MONOTONIC=1 exec %s "$@"\n' \
        "$(compgen -G '/usr/lib/*/faketime/libfaketime.so.1' | head -n1)" "${KPFS_DAEMON_CLOCK:-}" \
        "'$_kpfs_binary'" >"$KPFS"
    chmod +x "$KPFS"
fi

KPFS_MOUNTS=()
KPFS_DATA_DIRS=()
MNT=
DATA=

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# wait_until SECONDS CMD...: polls CMD until it succeeds; returns 1 at the deadline.
wait_until() {
    local deadline=$(($(date +%s%N) + $1 * 1000000000))
    shift
    until "$@" >/dev/null 2>&1; do
        [ "$(date +%s%N)" -lt "$deadline" ] || return 1
        sleep 0.05
    done
}

# elapsed_ms_since T_NS MS: succeeds once MS ms have passed since T_NS (date +%s%N).
elapsed_ms_since() { [ $((($(date +%s%N) - $1) / 1000000)) -ge "$2" ]; }

# expect_eq EXPECTED GOT [WHAT]
expect_eq() {
    [ "$1" == "$2" ] && return 0
    printf 'FAIL: %s differs\n--- expected\n%s\n--- got\n%s\n---\n' "${3:-value}" "$1" "$2" >&2
    exit 1
}

# expect_contains HAYSTACK NEEDLE [WHAT]
expect_contains() {
    case $1 in *"$2"*) return 0 ;; esac
    printf 'FAIL: %s lacks "%s"\n--- got\n%s\n---\n' "${3:-text}" "$2" "$1" >&2
    exit 1
}

# expect_errno STRERROR 'SHELL COMMAND': the command must fail and say STRERROR
# (e.g. "Operation not permitted") on stderr.
expect_errno() {
    local want=$1 cmd=$2 err status=0
    err=$(bash -c "$cmd" 2>&1 >/dev/null) || status=$?
    [ "$status" -ne 0 ] || fail "'$cmd' succeeded; expected \"$want\""
    expect_contains "$err" "$want" "stderr of '$cmd'"
}

# expect_rejection PATH: .kpfs/errors of $MNT names PATH.
expect_rejection() {
    expect_contains "$(cat "$MNT/.kpfs/errors")" " $1: " ".kpfs/errors"
}

# metric SERIES: the value of one sample of $MNT/.kpfs/metrics, SERIES written exactly as
# the file has it (name and labels), e.g. metric 'kpfs_log_end_offset{topic="t",partition="0"}'.
metric() {
    awk -v s="$1" '$1 == s { print $2; found = 1 } END { exit !found }' "$MNT/.kpfs/metrics"
}

# metric_is SERIES VALUE: succeeds when the sample has that value (for wait_until).
metric_is() {
    [ "$(metric "$1")" == "$2" ]
}

# status_field TOPIC FIELD: the value of "FIELD: value" in $MNT/TOPIC/status.
status_field() {
    sed -n "s/^$2: //p" "$MNT/$1/status"
}

# _kpfs_daemon_pid DATA_DIR: prints the pid of the daemon holding DATA_DIR, if it runs.
# A zombie counts as gone: the daemon's parent exited, and whoever inherited it may be
# slow to reap.
_kpfs_daemon_pid() {
    local pid state
    pid=$(head -n1 "$1/kpfs.lock" 2>/dev/null) || return 1
    [ -n "$pid" ] || return 1
    state=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -c1) || return 1
    case $state in "" | Z | X) return 1 ;; esac
    echo "$pid"
}

_kpfs_cleanup() {
    local m d pid
    for m in "${KPFS_MOUNTS[@]}"; do
        if mountpoint -q "$m" 2>/dev/null; then
            timeout 35 "$KPFS" umount "$m" >/dev/null 2>&1 || umount -l "$m" 2>/dev/null || true
        fi
        # A dead mount (ENOTCONN) is not a mountpoint to `mountpoint -q`; detach anyway.
        umount -l "$m" 2>/dev/null || true
    done
    for d in "${KPFS_DATA_DIRS[@]}"; do
        if pid=$(_kpfs_daemon_pid "$d"); then kill -9 "$pid" 2>/dev/null || true; fi
    done
    # rmdir, never rm -rf: a mount point that is somehow still mounted must not be emptied.
    for m in "${KPFS_MOUNTS[@]}"; do rmdir "$m" 2>/dev/null || true; done
    for d in "${KPFS_DATA_DIRS[@]}"; do rm -rf "$d"; done
    if [ -n "${_kpfs_binary:-}" ]; then rm -f "$KPFS"; fi
}
trap _kpfs_cleanup EXIT

# new_mountpoint VAR: sets VAR to a fresh empty directory that cleanup will unmount and
# remove. (A variable, not stdout: registration must not happen in a subshell.)
new_mountpoint() {
    local m
    m=$(mktemp -d /tmp/kpfs-mnt.XXXXXX)
    KPFS_MOUNTS+=("$m")
    printf -v "$1" '%s' "$m"
}

# new_data_dir VAR: sets VAR to a fresh data directory that cleanup will remove.
new_data_dir() {
    local d
    d=$(mktemp -d /tmp/kpfs-data.XXXXXX)
    KPFS_DATA_DIRS+=("$d")
    printf -v "$1" '%s' "$d"
}

# mount_kpfs [ARGS...]: mounts a fresh data dir at a fresh mount point ($DATA, $MNT).
mount_kpfs() {
    new_data_dir DATA
    new_mountpoint MNT
    remount_kpfs "$@"
}

# remount_kpfs [ARGS...]: mounts $DATA at $MNT again (after umount_kpfs).
remount_kpfs() {
    "$KPFS" mount "$MNT" --data-dir "$DATA" "$@" || fail "kpfs mount $MNT failed"
    wait_until 10 mountpoint -q "$MNT" || fail "$MNT is not a mount point after 10 s"
}

# umount_kpfs: unmounts $MNT and checks the daemon is gone.
umount_kpfs() {
    "$KPFS" umount "$MNT" || fail "kpfs umount $MNT failed"
    ! mountpoint -q "$MNT" || fail "$MNT is still mounted after kpfs umount"
    ! _kpfs_daemon_pid "$DATA" >/dev/null || fail "the daemon of $DATA still runs"
}

# on_clock FAKETIME CMD...: runs CMD with Debian's libfaketime (package faketime) telling
# it the time FAKETIME says: "+400d" a year ahead, "@2026-12-01 19:20:00" a clock that
# starts then (per process: a daemon's keeps going from it). The monotonic clock is left
# alone: faked from an "@" start it stalls the daemon's timed waits (its cleaner never
# wakes). For kpfs only: Python's and librdkafka's sleeps need it faked (see run.sh).
# Without the faketime wrapper, which waits for every process it started, a daemon
# included (see run.sh for what that wrapper gives).
on_clock() {
    local lib
    lib=$(compgen -G '/usr/lib/*/faketime/libfaketime.so.1' | head -n1) \
        || fail "no libfaketime.so.1 (apt-get install faketime; scripts/setup does)"
    LD_PRELOAD=$lib FAKETIME=$1 FAKETIME_DONT_FAKE_MONOTONIC=1 "${@:2}"
}

# listening_on PORT: the local addresses TCP sockets listen on at PORT (none: empty).
listening_on() {
    ss -ltnH "sport = :$1" | awk '{ print $4 }'
}

is_listening() {
    [ -n "$(listening_on "$1")" ]
}

# random_port VAR: sets VAR to a random high port nothing listens on now. Someone may
# take it before kpfs binds it: callers retry with another on "Address already in use".
random_port() {
    local p
    while :; do
        p=$((20000 + RANDOM % 40000))
        is_listening "$p" || break
    done
    printf -v "$1" '%s' "$p"
}

# serve_kpfs LOG ARGS...: starts `kpfs serve ARGS...` in the background, stderr to LOG,
# and sets SERVE_PID. The data directory's cleanup kills it if the test does not.
serve_kpfs() {
    local log=$1
    shift
    # Emptied here, before the background start: a test that polls the log for this
    # start's lines must not find an earlier start's (the redirection below empties it
    # only once the new process runs).
    : >"$log"
    "$KPFS" serve "$@" 2>"$log" &
    SERVE_PID=$!
}

# mount_kpfs_listening [ARGS...]: mount_kpfs with a Kafka listener on a free loopback port:
# sets $PORT and $BOOTSTRAP (host:port for clients). Another port when someone takes the
# chosen one before kpfs binds it.
mount_kpfs_listening() {
    local attempt err status
    new_data_dir DATA
    new_mountpoint MNT
    for attempt in 1 2 3 4 5; do
        random_port PORT
        status=0
        err=$("$KPFS" mount "$MNT" --data-dir "$DATA" \
            --override "listeners=PLAINTEXT://127.0.0.1:$PORT" "$@" 2>&1) || status=$?
        if [ "$status" -eq 0 ]; then
            wait_until 10 mountpoint -q "$MNT" || fail "$MNT is not a mount point after 10 s"
            BOOTSTRAP=127.0.0.1:$PORT
            return
        fi
        expect_contains "$err" "Address already in use" "kpfs mount with a listener"
    done
    fail "kpfs mount found no free port in $attempt attempts"
}

# serve_kpfs_listening LOG DATA_DIR [ARGS...]: serve_kpfs on DATA_DIR with a listener on a
# free loopback port; returns once it listens, with $PORT, $BOOTSTRAP and $SERVE_PID set.
serve_kpfs_listening() {
    local log=$1 dir=$2 attempt
    shift 2
    for attempt in 1 2 3 4 5; do
        random_port PORT
        serve_kpfs "$log" --data-dir "$dir" --override "listeners=PLAINTEXT://127.0.0.1:$PORT" "$@"
        if wait_until 10 is_listening "$PORT"; then
            BOOTSTRAP=127.0.0.1:$PORT
            return
        fi
        wait "$SERVE_PID" || true
        expect_contains "$(cat "$log")" "Address already in use" "kpfs serve's stderr"
    done
    fail "kpfs serve found no free port in $attempt attempts"
}

# kafka_python: the venv's python with Kafka clients (KPFS_PYTHON, else scripts/python-venv
# makes it), checked to import kafka-python and confluent-kafka.
kafka_python() {
    local py=${KPFS_PYTHON:-$("$KPFS_ROOT/scripts/python-venv")}
    "$py" -c 'import kafka, confluent_kafka' ||
        fail "$py lacks kafka-python or confluent-kafka (scripts/python-venv installs them)"
    echo "$py"
}

# The client matrix (docs/KAFKA-PROTOCOL.md's table, scripts/client-matrix): a client test
# writes SCENARIO<TAB>RESULT<TAB>NOTE rows to $KPFS_CLIENT_MATRIX_DIR/CLIENT.tsv, or, when
# several tests share a client, each to CLIENT+TEST.tsv (scripts/client-matrix merges them).
# matrix_file CLIENT [TEST]: prints that file's path, emptied for this run.
matrix_file() {
    local dir=${KPFS_CLIENT_MATRIX_DIR:-$KPFS_ROOT/target/client-matrix}
    mkdir -p "$dir"
    : >"$dir/$1${2:++$2}.tsv"
    echo "$dir/$1${2:++$2}.tsv"
}

# matrix_row FILE SCENARIO [RESULT [NOTE]]: appends one row (RESULT pass by default) to a
# file of matrix_file; a test writes a pass only once the scenario's checks passed.
matrix_row() {
    printf '%s\t%s\t%s\n' "$2" "${3:-pass}" "${4:-}" >>"$1"
}

# client_name kcat|kafka-python|confluent-kafka [PYTHON]: the client and its version, as
# the matrix names it (e.g. kcat-1.7.1); the Python clients' from PYTHON's venv.
client_name() {
    case $1 in
        kcat) echo "kcat-$(kcat -V | sed -n 's/^Version \([^ ]*\) .*/\1/p')" ;;
        kafka-python) echo "kafka-python-$("$2" -c 'import kafka; print(kafka.__version__)')" ;;
        confluent-kafka) echo "confluent-kafka-$("$2" -c 'import confluent_kafka; print(confluent_kafka.__version__)')" ;;
        *) fail "client_name: no client $1" ;;
    esac
}
