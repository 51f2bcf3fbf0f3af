# The crash harness at CI size: 10 rounds of kill -9 under concurrent appenders on a
# rolling+retained, a compacted and a plain topic, Kafka producers (acks=all, acks=1,
# idempotent) with an appender on a fourth, appenders of a topic of three partitions
# (keyed through its log, and one per partitions/N/log), a transactional producer on a
# topic of three partitions, and two committing consumers (outside group management and
# as a static member), each followed by remount, ledger verification (acknowledged
# records at their acknowledged offsets; every acknowledged line of the partitioned topic
# once in its log and in its partition's, in order; every committed transaction whole
# and once in cat log and to read_committed, no aborted or open one, a commit in flight
# at the kill all or nothing; no acknowledged commit lost, no committed offset
# backwards), and every 5th round a clean umount and `kpfs check`.
source "$(dirname "$0")/lib.sh"

helper=$KPFS_ROOT/target/debug/examples/crash_appender
[ -x "$helper" ] || fail "no $helper (cargo build --examples first)"
out=$(KPFS=$KPFS CRASH_APPENDER=$helper timeout 300 "$KPFS_ROOT/scripts/crash-harness" --rounds 10 2>&1) ||
    fail "crash harness failed:
$out"
expect_contains "$out" "rounds: 10  kills: 10" "harness summary"
expect_contains "$out" "violations: 0" "harness summary"
# The idempotent producer had a batch in flight at every kill, and every one was
# acknowledged once the daemon was back (a duplicate or appended by the retry).
retried=$(printf '%s\n' "$out" | sed -n "s/.*batch in flight at a kill, retried: \([0-9]*\) appended by the retry, \([0-9]*\) in the log.*/\1 + \2/p")
[ -n "$retried" ] || fail "no line about the idempotent producer's retries:
$out"
expect_eq 10 "$((retried))" "idempotent producer's batches retried after a kill"
# Both committing consumers, outside group management and as a group's member, had
# commits acknowledged (and verify-commits found each at every remount).
acknowledged=': committer [0-9]+: [1-9][0-9]* commits acknowledged, committed offset Some'
for group in crash-outside crash-member; do
    line=$(grep "last $group: " <<<"$out") || fail "no line about the committer of $group:
$out"
    [[ $line =~ $acknowledged ]] ||
        fail "the committer of $group had no commit acknowledged: $line"
done
# The topic of three partitions: the keyed appenders of part/log reached every partition
# (verify-partitions held each line to its key's partition).
line=$(grep "last part: " <<<"$out") || fail "no line about the topic of partitions:
$out"
through='p0 [0-9]+ \(([0-9]+) through log\), p1 [0-9]+ \(([0-9]+) through log\), p2 [0-9]+ \(([0-9]+) through log\)'
[[ $line =~ $through ]] || fail "no per-partition figures: $line"
for n in 1 2 3; do
    [ "${BASH_REMATCH[n]}" -gt 0 ] || fail "partition $((n - 1)) got no line through part/log: $line"
done
# The transactional producer both committed and aborted transactions (verify-txn held
# them to the ledger at every remount).
line=$(grep "last txn: " <<<"$out") || fail "no line about the transactional producer:
$out"
ended='transactions ([0-9]+) committed, ([0-9]+) aborted'
[[ $line =~ $ended ]] || fail "no transaction figures: $line"
[ "${BASH_REMATCH[1]}" -gt 0 ] && [ "${BASH_REMATCH[2]}" -gt 0 ] ||
    fail "the transactional producer did not both commit and abort: $line"
printf '%s\n' "$out" | sed -n '/summary/,$p'
