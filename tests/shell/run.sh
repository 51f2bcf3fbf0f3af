#!/usr/bin/env bash
# Runs every tests/shell/t_*.sh (or the ones named as arguments), one process each, and
# prints PASS/FAIL per file and a final "N passed, M failed". Needs root and /dev/fuse.
#
#   tests/shell/run.sh [--clock FAKETIME | --daemon-clock FAKETIME] [t_NAME.sh...]
#
# --clock runs the tests, and everything they start, on a clock libfaketime moves
# (e.g. --clock +400d: a year ahead), to prove that no test depends on the day it runs.
# --daemon-clock moves only kpfs's (tests/shell/lib.sh), for the tests whose clients
# libfaketime breaks: librdkafka's timed waits do not wake under it (confluent-kafka's
# idempotent producer and kcat's group members hang), so those clients keep the
# machine's clock.
set -uo pipefail
cd "$(dirname "$0")"
if [ "${1:-}" == --daemon-clock ]; then
    [ $# -ge 2 ] || { echo "usage: $0 [--clock FAKETIME | --daemon-clock FAKETIME] [t_NAME.sh...]" >&2; exit 2; }
    export KPFS_DAEMON_CLOCK=$2
    echo "kpfs on a clock moved by $2"
    shift 2
elif [ "${1:-}" == --clock ]; then
    [ $# -ge 2 ] || { echo "usage: $0 [--clock FAKETIME | --daemon-clock FAKETIME] [t_NAME.sh...]" >&2; exit 2; }
    command -v faketime >/dev/null || { echo "no faketime: apt-get install faketime (scripts/setup does)" >&2; exit 2; }
    # Under Debian's faketime wrapper rather than LD_PRELOAD alone: libfaketime 0.9.10
    # shares its state through a semaphore that the first process to load it creates and
    # removes at its exit, so a forked subshell that exits would leave every later process
    # an error on stderr; the wrapper's semaphore lives until the last process under it
    # ends. The monotonic clock moves with it (FAKETIME_DONT_FAKE_MONOTONIC=1 breaks
    # libfaketime's absolute-time sleeps: Python's time.sleep fails with EINVAL), except
    # kpfs's (lib.sh).
    exec faketime -f "$2" bash run.sh "${@:3}"
fi
[ -z "${FAKETIME:-}" ] || echo "on a clock at $(date -u '+%Y-%m-%d %H:%M:%S') UTC (FAKETIME=$FAKETIME)"
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(t_*.sh)
passed=0
failed=0
# Each test's wall time is printed beside its verdict: CI's budget is shared by every
# test, and a test that grows shows where.
for t in "${tests[@]}"; do
    started=$SECONDS
    out=$(bash "$t" 2>&1)
    status=$?
    took="($((SECONDS - started)) s)"
    if [ $status -eq 0 ]; then
        echo "PASS $t $took"
        passed=$((passed + 1))
    else
        echo "FAIL $t $took"
        printf '%s\n' "$out" | tail -n 60 | sed 's/^/    /'
        failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
