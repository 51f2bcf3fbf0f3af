# shellcheck shell=bash
# The consumer group scenarios of scripts/bench (issue 16), against `kpfs serve` beside a
# single consumer and the wire floor. Sourced by scripts/bench after bench-wire.sh; uses
# its helpers (wire_kpfs_start, wire_floor_start, produce_file, cpu_s, ...), $B, $QUICK
# and $ROUNDS.
#
# W5: a group of GROUP_TOPICS kcat -G consumers reads GROUP_BYTES spread over as many
# topics (kpfs topics have one partition each: one topic per member with the roundrobin
# assignor), beside one kcat -G consumer reading the same topics, and GROUP_TOPICS plain
# kcat -C (no group: the floor has no coordinator) on the wire floor. The members are
# static (group.instance.id): one that is done leaves without a LeaveGroup, so the others'
# assignments stay as they are until they are done too. Timed from the moment every member
# has its assignment (kcat says so on stderr) until the last one has read its topic's last
# record: the join (a rebalance delay) is not the read rate asked about.
# W6: commit latency, scripts/bench-group-commit.py (confluent-kafka, a group member
# committing one offset at a time, synchronously).

GROUP_TOPICS=4
# kpfs serve for the group scenarios: every member joins the first generation (they start
# at once, well within the delay).
GROUP_SERVE=(--override group.initial.rebalance.delay.ms=1000)

group_sizes() {
    if $QUICK; then
        GROUP_BYTES=$((16 << 20))
        GROUP_COMMITS=300
    else
        GROUP_BYTES=$((1 << 30))
        GROUP_COMMITS=5000
    fi
}

# group_member PORT GROUP NAME COUNT OUT TOPIC...: one kcat -G member (static, named NAME)
# that reads COUNT records of the topics and exits; its last "topic offset" line goes to
# OUT.last, its stderr (where it says what it was assigned) to OUT.err, the CPU seconds
# it used to OUT.cpu.
group_member() {
    local port=$1 group=$2 name=$3 count=$4 out=$5
    shift 5
    (
        timeout "$WIRE_DEADLINE_S" kcat -b "127.0.0.1:$port" -G "$group" -c "$count" -f '%t %o\n' \
            -X group.instance.id="$name" -X partition.assignment.strategy=roundrobin \
            -X auto.offset.reset=earliest -X session.timeout.ms=60000 "${WIRE_CONSUMER[@]}" "$@" \
            2>"$out.err" | tail -n 1 >"$out.last"
        times >"$out.times"
    )
    awk 'NR == 2 { split($0, f, /[ ms]+/); print f[1] * 60 + f[2] + f[3] * 60 + f[4] }' \
        "$out.times" >"$out.cpu"
}

# all_assigned OUT...: every member's stderr has its assignment.
all_assigned() {
    local out
    for out in "$@"; do grep -q 'assigned:' "$out.err" 2>/dev/null || return 1; done
}

# group_read PORT PID DIR GROUP MEMBERS N: MEMBERS members of GROUP read the topics g0.. of
# N records each (a member reads N * GROUP_TOPICS / MEMBERS); appends to DIR/rows the
# seconds from the last assignment to the last record, the clients' CPU seconds and the
# server's (PID) over that time.
group_read() {
    local port=$1 pid=$2 dir=$3 group=$4 members=$5 n=$6 i t0 t1 s0 s1 rc=0
    local -a topics=() outs=() pids=()
    for ((i = 0; i < GROUP_TOPICS; i++)); do topics+=("g$i"); done
    mkdir -p "$dir/$group"
    for ((i = 0; i < members; i++)); do
        outs+=("$dir/$group/m$i")
        group_member "$port" "$group" "$group-m$i" $((n * GROUP_TOPICS / members)) "$dir/$group/m$i" \
            "${topics[@]}" &
        pids+=($!)
    done
    wait_for 60 "the members of $group to get their assignments" all_assigned "${outs[@]}"
    t0=$(date +%s%N) s0=$(cpu_s "$pid")
    for i in "${pids[@]}"; do wait "$i" || rc=$?; done
    t1=$(date +%s%N) s1=$(cpu_s "$pid")
    [ "$rc" -eq 0 ] || return "$rc"
    expect_group_read "$dir/$group" "$members" "$n"
    echo "$(calc "($t1 - $t0) / 1e9" 6) $(cat "$dir/$group"/*.cpu | awk '{ s += $1 } END { print s }') $(calc "$s1 - $s0" 2)" \
        >>"$dir/rows"
}

# expect_group_read DIR MEMBERS N: every topic's last record was read (by one member each
# when there are as many members as topics).
expect_group_read() {
    local want got
    if [ "$2" -eq "$GROUP_TOPICS" ]; then
        want=$(for ((i = 0; i < GROUP_TOPICS; i++)); do echo "g$i $(($3 - 1))"; done)
        got=$(cat "$1"/*.last | sort)
    else
        want="$(($3 - 1))"
        got=$(awk '{ print $2 }' "$1"/*.last)
    fi
    if [ "$got" != "$want" ]; then
        log "bench: the members' last records are '$got', expected '$want'"
        return 1
    fi
}

# floor_read PORT DIR N: GROUP_TOPICS kcat -C at once, a topic each (no group), against the
# floor; appends the seconds until the last one is done and their CPU seconds to DIR/rows.
floor_read() {
    local port=$1 dir=$2 n=$3 i t0 t1 rc=0
    local -a pids=()
    mkdir -p "$dir/c"
    t0=$(date +%s%N)
    for ((i = 0; i < GROUP_TOPICS; i++)); do
        (wire_timed "$dir/c/$i.cpu" consume_all "$port" "g$i" "$n" "$dir/c/$i.last" >/dev/null) &
        pids+=($!)
    done
    for i in "${pids[@]}"; do wait "$i" || rc=$?; done
    t1=$(date +%s%N)
    [ "$rc" -eq 0 ] || return "$rc"
    for ((i = 0; i < GROUP_TOPICS; i++)); do expect_last_offset "$dir/c/$i.last" "$n"; done
    echo "$(calc "($t1 - $t0) / 1e9" 6) $(cat "$dir"/c/*.cpu | awk '{ s += $1 } END { print s }')" >>"$dir/rows"
}

# group_warm_up PORT: one consumer of a group of its own reads a record: the offsets topic
# exists before the measured members start, as on any broker that served a group before.
# The first FindCoordinator creates it, and members racing it may be told
# COORDINATOR_NOT_AVAILABLE and join after the first generation formed: a rebalance (and,
# with static members that are done, a wait for them) the measurement is not about.
group_warm_up() {
    timeout 60 kcat -b "127.0.0.1:$1" -G kpfs-bench-warm-up -c 1 -X auto.offset.reset=earliest g0 \
        >/dev/null 2>&1
}

# group_produce PORT IN: IN's lines as records to each of the topics g0.., all at once.
group_produce() {
    local i rc=0
    local -a pids=()
    for ((i = 0; i < GROUP_TOPICS; i++)); do
        produce_file "$1" "g$i" "$2" &
        pids+=($!)
    done
    for i in "${pids[@]}"; do wait "$i" || rc=$?; done
    return "$rc"
}

# Wire scenario W5: a group of GROUP_TOPICS consumers, one consumer, and the floor.
scenario_wire_group() {
    wire_sizes
    group_sizes
    local dir=$B/wire_group in n r port pid
    in=$(input_file $((GROUP_BYTES / GROUP_TOPICS)) $((WIRE_RECORD_BYTES + 1)))
    n=$(wire_records "$(stat -c %s "$in")")
    mkdir -p "$dir"
    wire_kpfs_start "$dir/kpfs" "${GROUP_SERVE[@]}"
    port=$(cat "$dir/kpfs/port") pid=$(cat "$dir/kpfs/server.pid")
    log "kcat -P of $GROUP_TOPICS topics of $n records"
    group_produce "$port" "$in"
    group_warm_up "$port"
    # Each setup goes first in some rounds (see scenario_wire_stream).
    for ((r = 1; r <= ROUNDS; r++)); do
        log "round $r of $ROUNDS: a group of $GROUP_TOPICS, one consumer"
        if ((r % 2)); then
            group_read "$port" "$pid" "$dir/group" "group-$r" "$GROUP_TOPICS" "$n"
            group_read "$port" "$pid" "$dir/single" "single-$r" 1 "$n"
        else
            group_read "$port" "$pid" "$dir/single" "single-$r" 1 "$n"
            group_read "$port" "$pid" "$dir/group" "group-$r" "$GROUP_TOPICS" "$n"
        fi
        log "  group ${GROUP_TOPICS}: $(tail -n 1 "$dir/group/rows"); single: $(tail -n 1 "$dir/single/rows") (s, client CPU s, server CPU s)"
    done
    wire_stop "$dir/kpfs"
    wire_floor_start "$dir/floor"
    port=$(cat "$dir/floor/port")
    group_produce "$port" "$in"
    for ((r = 1; r <= ROUNDS; r++)); do
        floor_read "$port" "$dir/floor" "$n"
    done
    wire_stop "$dir/floor"
    local mb best g s f ge se
    mb=$(calc "$n * $GROUP_TOPICS * $WIRE_RECORD_BYTES / 1e6" 6)
    # best ROWS: the fastest round's line.
    best() { sort -g -k 1,1 "$1" | head -n 1; }
    read -r -a g <<<"$(best "$dir/group/rows")"
    read -r -a s <<<"$(best "$dir/single/rows")"
    read -r -a f <<<"$(best "$dir/floor/rows")"
    local gr sr fr
    gr=$(calc "$mb / ${g[0]}") sr=$(calc "$mb / ${s[0]}") fr=$(calc "$mb / ${f[0]}")
    row "W5 group of $GROUP_TOPICS consumers (kcat -G) MB/s, $GROUP_TOPICS topics of $(size $((GROUP_BYTES / GROUP_TOPICS)))$(rounds)" \
        "$gr" "$sr one consumer (kcat -G); $fr floor ($GROUP_TOPICS kcat -C, clients' CPU ${f[1]} s)" \
        "$(calc "100 * $gr / $sr" 0)%" "-" "info"
    # Per core used: the MB read for each CPU second the server and the clients spent.
    ge=$(calc "$mb / (${g[1]} + ${g[2]})") se=$(calc "$mb / (${s[1]} + ${s[2]})")
    row "W5 MB per CPU second (server + clients: group ${g[2]} + ${g[1]} s, one consumer ${s[2]} + ${s[1]} s)" \
        "$ge" "$se one consumer" "$(calc "100 * $ge / $se" 0)%" ">= 80% of one consumer" \
        "$(verdict "$ge >= 0.8 * $se")"
}

# Wire scenario W6: synchronous commits, one at a time, by a group member.
scenario_wire_commit() {
    wire_sizes
    group_sizes
    local dir=$B/wire_commit port figures
    mkdir -p "$dir"
    wire_kpfs_start "$dir/kpfs" "${GROUP_SERVE[@]}"
    port=$(cat "$dir/kpfs/port")
    # The topic exists before the consumer subscribes (a consumer's Metadata creates none).
    kcat -b "127.0.0.1:$port" -L -t kpfs-bench-commit >/dev/null
    figures=$("$(scripts/python-venv)" scripts/bench-group-commit.py "127.0.0.1:$port" "$GROUP_COMMITS" |
        awk '{ v[$1] = $2 } END { print v["p50_ms:"], v["p99_ms:"], v["max_ms:"] }')
    wire_stop "$dir/kpfs"
    local -a k
    read -r -a k <<<"$figures"
    row "W6 commit latency p50/p99 ms, confluent-kafka commit(asynchronous=False), $GROUP_COMMITS commits" \
        "${k[0]}/${k[1]}" "-" "-" "p99 < 10" "$(verdict "${k[1]} < 10")"
}
