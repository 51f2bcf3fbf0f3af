# shellcheck shell=bash
# Helpers for scripts/bench: one temporary directory that owns every mount, daemon and
# file a run makes (so cleanup can find them all even after a scenario failed half way),
# timing, float arithmetic and the results table.
#
# Scenarios run in subshells, so whatever cleanup must know is kept in files under $B,
# never in shell variables.

KPFS=target/release/kpfs
FLOOR=target/release/examples/fuse_floor
BENCH_IO=target/release/examples/bench_io
# How long a mount may take to come up or go away before the run counts as broken.
MOUNT_DEADLINE_S=60

# bench_init: makes $B and arranges for everything in it to be torn down on exit.
bench_init() {
    B=$(mktemp -d "${TMPDIR:-/tmp}/kpfs-bench.XXXXXX")
    : >"$B/pids"
    : >"$B/rows"
    trap bench_cleanup EXIT
    # Signals end the run through `exit`, so the EXIT trap still unmounts everything.
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

log() { printf '%s\n' "$*" >&2; }

# calc EXPR [DECIMALS]: EXPR evaluated by awk, printed with DECIMALS places (default 1).
calc() { awk "BEGIN { printf \"%.${2:-1}f\", ($1) }"; }
# holds COND: awk's verdict on a numeric condition, as an exit status.
holds() { awk "BEGIN { exit !($1) }"; }
# verdict COND: pass or miss.
verdict() { if holds "$1"; then echo pass; else echo miss; fi; }
mib() { calc "$1 / 1048576" 1; }
# least NUMBER..., most NUMBER...: the smallest and the largest.
least() { printf '%s\n' "$@" | sort -g | head -n 1; }
most() { printf '%s\n' "$@" | sort -g | tail -n 1; }
# median NUMBER...: the middle value (the mean of the two middle ones for an even count).
median() {
    printf '%s\n' "$@" | sort -g |
        awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# wait_for SECONDS DESCRIPTION CMD...: polls CMD until it succeeds or time runs out.
wait_for() {
    local deadline=$(($(date +%s) + $1)) what=$2
    shift 2
    until "$@"; do
        if [ "$(date +%s)" -ge "$deadline" ]; then
            log "bench: timed out waiting for $what"
            return 1
        fi
        sleep 0.02
    done
}

is_live() { mountpoint -q "$1" && ls "$1" >/dev/null 2>&1; }
is_gone() { ! kill -0 "$1" 2>/dev/null; }

# seconds CMD...: wall time of CMD in seconds. The previous step's dirty pages are
# written back first, so no step pays for another's writeback.
seconds() {
    sync
    elapsed "$@"
}

# elapsed CMD...: wall time of CMD in seconds, with no writeback first. For steps that
# delete what they wrote before the next one runs: on this VM a step that follows the
# writeback of a GiB runs up to 4x slower for a few seconds (the host is still busy),
# whatever it is, so the stream scenario never makes the kernel write its data back.
elapsed() {
    local t0 t1
    t0=$(date +%s%N)
    "$@" >&2
    t1=$(date +%s%N)
    calc "($t1 - $t0) / 1e9" 6
}

append_file() { cat "$1" >>"$2"; }
read_file() { cat "$1" >/dev/null; }

# parallel_append SRC DEST...: one `cat SRC >> DEST` process per DEST, all at once.
parallel_append() {
    local src=$1 pid rc=0
    local -a pids=()
    shift
    for dest in "$@"; do
        cat "$src" >>"$dest" &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do
        wait "$pid" || rc=$?
    done
    return "$rc"
}

# input_file BYTES [LINE_BYTES]: path of a file of BYTES/LINE_BYTES numbered lines of
# LINE_BYTES bytes (default 100), made once a run.
input_file() {
    local line_bytes=${2:-100}
    local path="$B/input-$1-$line_bytes"
    if [ ! -e "$path" ]; then
        "$BENCH_IO" lines "$path.tmp" "$1" "$line_bytes" >/dev/null
        mv "$path.tmp" "$path"
    fi
    echo "$path"
}

# kpfs_mount MNT DATA [ARGS...]: mounts and returns once `ls MNT` works.
kpfs_mount() {
    local mnt=$1 data=$2
    shift 2
    mkdir -p "$mnt"
    "$KPFS" mount "$mnt" --data-dir "$data" "$@" >&2
    wait_for "$MOUNT_DEADLINE_S" "kpfs at $mnt" is_live "$mnt"
}

kpfs_umount() { "$KPFS" umount "$1" >&2; }

# kpfs_pid MNT: the daemon serving MNT (the foreground process `kpfs mount` started).
kpfs_pid() { pgrep -f -- "kpfs mount $1 --foreground" | head -n 1; }

# proc_kib PID FIELD: a /proc/PID/status memory figure (VmRSS, VmHWM) in KiB.
proc_kib() { awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"; }

# topic_offset MNT TOPIC: the topic's log end offset, i.e. how many records it holds.
topic_offset() { sed -n 's/^log_end_offset: //p' "$1/$2/status"; }

# expect_records MNT TOPIC N: fails the scenario unless the topic holds N records.
expect_records() {
    local got
    got=$(topic_offset "$1" "$2")
    if [ "$got" != "$3" ]; then
        log "bench: $2 holds $got records, expected $3"
        return 1
    fi
}

# floor_start MNT SOURCE_BYTES [SINKS]: the FUSE floor, in the background until floor_stop.
floor_start() {
    mkdir -p "$1"
    "$FLOOR" "$1" "$2" "${3:-1}" >/dev/null 2>&1 &
    echo "$!" >>"$B/pids"
    echo "$!" >"$1.pid"
    wait_for "$MOUNT_DEADLINE_S" "the FUSE floor at $1" is_live "$1"
}

floor_stop() {
    local pid
    pid=$(cat "$1.pid")
    kill "$pid"
    wait_for "$MOUNT_DEADLINE_S" "the FUSE floor to exit" is_gone "$pid"
}

# ours PID DIR: PID is a process we started for DIR: its command line names a path under
# DIR (a recorded pid may since have been reused by an unrelated process).
ours() { tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline" | grep -qF "$2/"; }

# release DIR: unmounts every mount under DIR, stops what serves them, removes DIR.
release() {
    local dir=$1 mnt pid
    [ -d "$dir" ] || return 0
    while read -r pid; do
        if [ -n "$pid" ] && ours "$pid" "$dir"; then kill "$pid" 2>/dev/null || true; fi
    done <"$B/pids"
    # Deepest first, so nested mounts come off before their parents.
    awk -v d="$dir/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r |
        while read -r mnt; do
            timeout 40 "$KPFS" umount "$mnt" >/dev/null 2>&1 || umount -l "$mnt" 2>/dev/null || true
        done
    for pid in $(pgrep -f -- "$dir/" || true); do
        if [ "$pid" != $$ ] && ours "$pid" "$dir"; then kill -9 "$pid" 2>/dev/null || true; fi
    done
    # Never remove files through a mount that is still attached.
    if awk -v d="$dir/" 'index($2, d) == 1 { found = 1 } END { exit !found }' /proc/self/mounts; then
        log "bench: mounts under $dir remain; leaving it in place"
        return 1
    fi
    rm -rf "$dir"
}

bench_cleanup() {
    [ -n "${B:-}" ] && release "$B"
}

# row SCENARIO KPFS BASELINE RATIO TARGET RESULT: one line of the results table.
row() {
    local IFS=$'\t'
    echo "$*" >>"$B/rows"
}

# print_table: the rows as an aligned Markdown table (readable in a terminal too).
print_table() {
    {
        printf 'scenario\tkpfs\tbaseline\tratio\ttarget\tresult\n'
        printf -- '-\t-\t-\t-\t-\t-\n'
        cat "$B/rows"
    } | awk -F'\t' '
        { for (i = 1; i <= NF; i++) { cell[NR, i] = $i; if (length($i) > w[i]) w[i] = length($i) } }
        END {
            for (r = 1; r <= NR; r++) {
                line = "|"
                for (i = 1; i <= 6; i++) {
                    c = cell[r, i]
                    if (r == 2) { c = ""; while (length(c) < w[i]) c = c "-" }
                    line = line sprintf(" %-" w[i] "s |", c)
                }
                print line
            }
        }'
}

# machine: one paragraph on what the figures were measured on.
machine() {
    local cpu mem fs commit
    cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
    mem=$(awk '$1 == "MemTotal:" { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
    fs=$(findmnt -n -o FSTYPE,SOURCE --target "$B" 2>/dev/null || df -T "$B" | awk 'NR == 2 { print $2, $1 }')
    fs=$(tr -s ' ' <<<"$fs")
    commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
    # The generated section itself does not make a tree dirty.
    if [ -n "$(git status --porcelain -- . ':!docs/PERFORMANCE.md' 2>/dev/null)" ]; then
        commit="$commit (with uncommitted changes)"
    fi
    printf '%s CPUs (%s), %s RAM, kernel %s, data on %s, %s, commit %s, %s.\n' \
        "$(nproc)" "$cpu" "$mem" "$(uname -r)" "$fs" "$(rustc --version 2>/dev/null | cut -d' ' -f1-2)" \
        "$commit" "$(date -u '+%Y-%m-%d %H:%M UTC')"
}
