# Committed offsets are durable (tests/shell/group_client.py's clients on a mount with a
# Kafka listener): what an OffsetCommit acknowledged, from a group's member or from outside
# group management, is there after kill -9 of the daemon and a remount, and after a clean
# umount and mount, as OffsetFetch (kafka-python's committed() and list_group_offsets,
# confluent-kafka's list_consumer_group_offsets) and ListGroups report it; a member that
# joins the group again resumes at the committed offsets.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/group_lib.sh"

mount_kpfs_listening "${GROUP_OVERRIDES[@]}"
listener=(--override "listeners=PLAINTEXT://127.0.0.1:$PORT" "${GROUP_OVERRIDES[@]}")
for t in d0 d1; do
    mkdir "$MNT/$t"
    produce "$t" 0 9
done

# A member consumes everything and commits; another group commits from outside.
start_member kp members m d0,d1
wait_consumed 30 20 m
wait_until 20 committed_are members $'d0 10 \'\'\nd1 10 \'\'' ||
    fail "members' committed offsets: $(gc kp-committed members)"
stop_member m
expect_eq OK "$(gc kp-commit outside d0=3 d1=7)" "kafka-python committing outside group management"

# check_committed WHEN: every client reads both groups' offsets as committed.
check_committed() {
    expect_eq $'d0 10 \'\'\nd1 10 \'\'' "$(gc kp-committed members)" "members' offsets $1"
    expect_eq $"d0 3 'kp-commit'"$'\n'$"d1 7 'kp-commit'" "$(gc kp-committed outside)" "outside's offsets $1"
    expect_eq $'d0 3\nd1 7' "$(gc kp-consumer-committed outside d0 d1)" "kafka-python's committed() of outside $1"
    expect_eq $'d0 3\nd1 7' "$(gc cf-offsets outside)" "confluent-kafka's offsets of outside $1"
    expect_eq $'members consumer Empty\noutside - Empty' "$(gc kp-list)" "the groups $1"
}
check_committed "before the crash"

# --- kill -9 of the daemon, then mount again (kpfs mount detaches the dead mount).
pid=$(_kpfs_daemon_pid "$DATA") || fail "no daemon for $DATA"
kill -9 "$pid"
wait_until 10 bash -c "! kill -0 $pid 2>/dev/null" || fail "the daemon outlived kill -9"
remount_kpfs "${listener[@]}"
wait_until 10 is_listening "$PORT" || fail "no listener on $PORT after the remount"
check_committed "after kill -9 and a remount"

# The member resumes where the group left off: only what came since.
produce d0 10 14
start_member kp members m2 d0,d1
wait_consumed 30 5 m2
expect_eq "$(for i in 10 11 12 13 14; do echo "d0 $i d0-$i"; done)" "$(consumed m2)" "what m2 consumed"
wait_until 20 committed_are members $'d0 15 \'\'\nd1 10 \'\'' ||
    fail "members' committed offsets: $(gc kp-committed members)"
stop_member m2

# --- A clean umount and mount keep them too.
umount_kpfs
remount_kpfs "${listener[@]}"
wait_until 10 is_listening "$PORT" || fail "no listener on $PORT after the remount"
expect_eq $'d0 15 \'\'\nd1 10 \'\'' "$(gc kp-committed members)" "members' offsets after a clean remount"
expect_eq $"d0 3 'kp-commit'"$'\n'$"d1 7 'kp-commit'" "$(gc kp-committed outside)" "outside's offsets after a clean remount"
umount_kpfs
