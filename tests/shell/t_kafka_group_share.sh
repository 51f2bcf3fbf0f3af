# A kafka-python consumer group (tests/shell/group_client.py) on a mount with a Kafka
# listener: two members share four topics (kpfs topics have one partition each, so the
# roundrobin assignor spreads the topics), each consuming its two; one leaves (close():
# LeaveGroup) and the other takes its topics over, starting at the committed offsets, so
# every record is consumed exactly once across the group. Then a member killed with kill -9
# sends no LeaveGroup: it stays in the group until its session times out (not when its
# connections close), then the other member gets its topics and consumes what arrives there.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/group_lib.sh"

mount_kpfs_listening "${GROUP_OVERRIDES[@]}"
topics=(t0 t1 t2 t3)
for t in "${topics[@]}"; do mkdir "$MNT/$t"; done
all=t0,t1,t2,t3

# --- Two members share the work: two topics each, every record once.
start_member kp shared a "$all"
start_member kp shared b "$all"
wait_split 30 a b
for t in "${topics[@]}"; do produce "$t" 0 49; done
wait_consumed 30 200 a b
expect_eq "$(expected_records 49 "${topics[@]}")" "$(consumed a b)" "records consumed by a and b"
for name in a b; do
    got=$(consumed "$name" | cut -d' ' -f1 | sort -u | paste -sd ' ')
    expect_eq "$(assigned "$name")" "$got" "topics $name consumed from"
done
committed_all() { committed_are shared "$(for t in "${topics[@]}"; do echo "$t $1 ''"; done)"; }
wait_until 20 committed_all 50 || fail "shared's committed offsets: $(gc kp-committed shared)"

# --- a leaves; b takes its topics over from the committed offsets: nothing read twice.
a_had=$(assigned a)
stop_member a
[ -e "$MEMBERS/a.closed" ] || fail "a did not close its consumer"
wait_assigned 30 b "t0 t1 t2 t3"
for t in "${topics[@]}"; do produce "$t" 50 79; done
wait_consumed 30 320 a b
expect_eq "$(expected_records 79 "${topics[@]}")" "$(consumed a b)" "records consumed by a, then b"
for t in $a_had; do
    expect_eq 50 "$(consumed b | awk -v t="$t" '$1 == t { print $2; exit }')" \
        "b's first offset of $t, which a had committed up to 50"
done
wait_until 20 committed_all 80 || fail "shared's committed offsets: $(gc kp-committed shared)"
expect_eq $'shared Stable consumer roundrobin members=1\n  b /127.0.0.1 t0,t1,t2,t3' \
    "$(gc kp-describe shared)" "DescribeGroups of shared after a left"

# --- kill -9: c stays a member until its session (1.5 s) times out; then d takes over.
# Topics of their own, empty until both have their share: nothing is consumed during the
# group's first rebalances.
export SESSION_TIMEOUT_MS=1500
fresh=(u0 u1 u2 u3)
for t in "${fresh[@]}"; do mkdir "$MNT/$t"; done
start_member kp crashing c u0,u1,u2,u3
start_member kp crashing d u0,u1,u2,u3
wait_split 30 c d
for t in "${fresh[@]}"; do produce "$t" 0 19; done
wait_consumed 30 80 c d
expect_eq "$(expected_records 19 "${fresh[@]}")" "$(consumed c d)" "records consumed by c and d"
wait_until 20 committed_are crashing "$(for t in "${fresh[@]}"; do echo "$t 20 ''"; done)" ||
    fail "crashing's committed offsets: $(gc kp-committed crashing)"
c_had=$(assigned c)
kill_member c
killed_at=$(date +%s%N)
wait_assigned 30 d "u0 u1 u2 u3"
evicted_ms=$((($(date +%s%N) - killed_at) / 1000000))
# c's last heartbeat was at most 300 ms (its interval) before the kill.
[ "$evicted_ms" -ge 1200 ] || fail "c was evicted ${evicted_ms} ms after kill -9, before its 1500 ms session timed out"
for t in "${fresh[@]}"; do produce "$t" 20 29; done
wait_consumed 30 120 c d
expect_eq "$(expected_records 29 "${fresh[@]}")" "$(consumed c d)" "records consumed by c, then d"
for t in $c_had; do
    expect_eq "$(for i in $(seq 20 29); do echo "$t $i $t-$i"; done)" "$(consumed d | awk -v t="$t" '$1 == t')" \
        "what d consumed of $t, c's topic before the kill"
done
expect_eq $'crashing Stable consumer roundrobin members=1\n  d /127.0.0.1 u0,u1,u2,u3' \
    "$(gc kp-describe crashing)" "DescribeGroups of crashing after c's eviction"
stop_member b
stop_member d
umount_kpfs
