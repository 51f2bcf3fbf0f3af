# The crash harness at CI size: 20 rounds of kill -9 under concurrent appenders on a
# rolling+retained, a compacted and a plain topic, each followed by remount, ledger
# verification, and every 5th round a clean umount and `kpfs check`.
source "$(dirname "$0")/lib.sh"

helper=$KPFS_ROOT/target/debug/examples/crash_appender
[ -x "$helper" ] || fail "no $helper (cargo build --examples first)"
out=$(KPFS=$KPFS CRASH_APPENDER=$helper timeout 300 "$KPFS_ROOT/scripts/crash-harness" --rounds 20 2>&1) ||
    fail "crash harness failed:
$out"
expect_contains "$out" "rounds: 20  kills: 20" "harness summary"
expect_contains "$out" "violations: 0" "harness summary"
printf '%s\n' "$out" | sed -n '/summary/,$p'
