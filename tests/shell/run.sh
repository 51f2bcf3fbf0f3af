#!/usr/bin/env bash
# Runs every tests/shell/t_*.sh (or the ones named as arguments), one process each, and
# prints PASS/FAIL per file and a final "N passed, M failed". Needs root and /dev/fuse.
set -uo pipefail
cd "$(dirname "$0")"
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(t_*.sh)
passed=0
failed=0
for t in "${tests[@]}"; do
    out=$(bash "$t" 2>&1)
    if [ $? -eq 0 ]; then
        echo "PASS $t"
        passed=$((passed + 1))
    else
        echo "FAIL $t"
        printf '%s\n' "$out" | tail -n 30 | sed 's/^/    /'
        failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
