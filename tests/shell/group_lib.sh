# Consumer group members for the t_kafka_group*.sh tests: source after lib.sh, then
# mount_kpfs_listening "${GROUP_OVERRIDES[@]}". Members are tests/shell/group_client.py
# processes in the background reporting through files in $MEMBERS (see its docstring);
# kcat's balanced consumer (-G) reports through its stdout and stderr there too.

PY=$(kafka_python)
GROUP_CLIENT=$KPFS_ROOT/tests/shell/group_client.py
new_data_dir MEMBERS
# Fast rebalances and short sessions, so that a test waits seconds, not Kafka's minutes:
# the first rebalance of an empty group waits 100 ms for more members (Kafka: 3 s), and a
# session may be as short as 500 ms (Kafka: 6 s); the maximum is lowered from Kafka's 30
# minutes so that a timeout above it is cheap to ask for.
GROUP_OVERRIDES=(
    --override group.initial.rebalance.delay.ms=100
    --override group.min.session.timeout.ms=500
    --override group.max.session.timeout.ms=30000
)
declare -A MEMBER_PIDS=()

_group_cleanup() {
    local pid
    for pid in "${MEMBER_PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
    _kpfs_cleanup
}
trap _group_cleanup EXIT

# gc COMMAND ARGS...: a one-shot command of group_client.py against the listener.
gc() {
    local command=$1
    shift
    timeout 60 "$PY" "$GROUP_CLIENT" "$command" "$BOOTSTRAP" "$@"
}

# start_member KIND GROUP NAME TOPIC,... [ARGS...]: a member (KIND kp: kafka-python, cf:
# confluent-kafka) in the background.
start_member() {
    local kind=$1 group=$2 name=$3
    shift 3
    "$PY" "$GROUP_CLIENT" "$kind-member" "$BOOTSTRAP" "$group" "$MEMBERS" "$name" "$@" \
        2>"$MEMBERS/$name.err" &
    MEMBER_PIDS[$name]=$!
}

# start_kcat_member GROUP NAME TOPIC...: kcat's balanced consumer, printing "topic offset
# value" lines (unbuffered: -u), committing every 100 ms, with the roundrobin assignor and the session of
# the other members.
start_kcat_member() {
    local group=$1 name=$2
    shift 2
    kcat -b "$BOOTSTRAP" -G "$group" -u -f '%t %o %s\n' -X client.id="$name" \
        -X partition.assignment.strategy=roundrobin -X auto.offset.reset=earliest \
        -X session.timeout.ms=3000 -X heartbeat.interval.ms=300 -X auto.commit.interval.ms=100 \
        "$@" >"$MEMBERS/$name.records" 2>"$MEMBERS/$name.err" &
    MEMBER_PIDS[$name]=$!
}

# kcat_assigned NAME: the topics of kcat's last "assigned:" rebalance line, sorted,
# space-separated (its stderr says "Group G rebalanced (memberid M): assigned: t0 [0], t2 [0]").
kcat_assigned() {
    sed -n 's/.*rebalanced (memberid .*): assigned: //p' "$MEMBERS/$1.err" | tail -n 1 |
        tr ',' '\n' | sed 's/^ *//; s/ \[.*//' | sort | paste -sd ' '
}

# assigned NAME: the member's assigned topics (kcat's or group_client.py's).
assigned() {
    if [ -e "$MEMBERS/$1.assigned" ]; then cat "$MEMBERS/$1.assigned"; else kcat_assigned "$1"; fi
}

# assigned_is NAME TOPICS: the member's assignment is TOPICS (sorted, space-separated).
assigned_is() { [ "$(assigned "$1")" == "$2" ]; }

# wait_assigned SECONDS NAME TOPICS: fails the test unless the member has TOPICS in time.
wait_assigned() {
    wait_until "$1" assigned_is "$2" "$3" ||
        fail "$2's assignment is '$(assigned "$2")', not '$3' after $1 s; its stderr: $(tail -n 5 "$MEMBERS/$2.err")"
}

# shares_split NAME...: every member has a share of the same size of the topics, and the
# shares are disjoint.
shares_split() {
    local name all="" n=0 size=""
    for name in "$@"; do
        local mine
        mine=$(assigned "$name")
        [ -n "$mine" ] || return 1
        if [ -z "$size" ]; then size=$(wc -w <<<"$mine"); fi
        [ "$(wc -w <<<"$mine")" -eq "$size" ] || return 1
        all+=" $mine"
        n=$((n + size))
    done
    [ "$(tr ' ' '\n' <<<"$all" | sed '/^$/d' | sort -u | wc -l)" -eq "$n" ]
}
# wait_split SECONDS NAME...: fails the test unless shares_split holds in time.
wait_split() {
    local seconds=$1
    shift
    wait_until "$seconds" shares_split "$@" ||
        fail "the assignments of $* are not an even split after $seconds s: $(for n in "$@"; do printf '%s: [%s] ' "$n" "$(assigned "$n")"; done)"
}

# stop_member NAME: SIGTERM, which closes the consumer as a user's Ctrl-C would (kcat
# and group_client.py both leave the group then); waits for it to exit.
stop_member() {
    local name=$1 pid=${MEMBER_PIDS[$1]}
    kill -TERM "$pid"
    wait_until 30 bash -c "! kill -0 $pid" || fail "$name still runs 30 s after it was told to stop"
    wait "$pid" || fail "$name exited with status $?: $(tail -n 5 "$MEMBERS/$name.err")"
    unset "MEMBER_PIDS[$name]"
}

# kill_member NAME: kill -9, as a crash: no LeaveGroup, no commit.
kill_member() {
    local pid=${MEMBER_PIDS[$1]}
    kill -9 "$pid"
    wait "$pid" 2>/dev/null || true
    unset "MEMBER_PIDS[$1]"
}

# consumed NAME...: the members' records, sorted ("topic offset value" lines).
consumed() {
    local name
    for name in "$@"; do cat "$MEMBERS/$name.records"; done | sort -k1,1 -k2,2n
}
consumed_count_is() { [ "$(consumed "${@:2}" | wc -l)" -eq "$1" ]; }

# wait_consumed SECONDS COUNT NAME...: waits until the members have consumed COUNT records
# between them.
wait_consumed() {
    local seconds=$1 count=$2
    shift 2
    wait_until "$seconds" consumed_count_is "$count" "$@" ||
        fail "members $* consumed $(consumed "$@" | wc -l) records, not $count, in $seconds s"
}

# produce TOPIC FROM TO: appends records "TOPIC-I" for I in FROM..TO through the mount, one
# write, so they get offsets FROM..TO of an empty topic's numbering.
produce() {
    local topic=$1 i
    for ((i = $2; i <= $3; i++)); do echo "$topic-$i"; done >>"$MNT/$topic/log"
}

# expected_records TO TOPIC...: what consuming offsets 0..TO of each topic gives.
expected_records() {
    local to=$1 topic i
    shift
    for topic in "$@"; do
        for ((i = 0; i <= to; i++)); do echo "$topic $i $topic-$i"; done
    done | sort -k1,1 -k2,2n
}

# committed_are GROUP LINES: the group's committed offsets, as kp-committed prints them.
committed_are() { [ "$(gc kp-committed "$1")" == "$2" ]; }
