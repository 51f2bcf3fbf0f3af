# Apache Kafka 4.3.1 itself for the shell tests: its tools (from scripts/kafka-dist, which
# installs them into target/kafka-4.3.1 once) and a real broker to hold kpfs's answers
# against. Source after lib.sh.
#
#   $KAFKA_BIN     Kafka's bin/ (kafka-topics.sh, kafka-configs.sh, ...)
#   start_kafka_broker [KEY=VALUE...]
#                  a one-node KRaft broker (broker and controller in one JVM, node.id 1)
#                  on a free loopback port, its own log dir formatted by kafka-storage.sh;
#                  each KEY=VALUE is a line of its server.properties (e.g.
#                  log.retention.check.interval.ms=1000). Returns once it serves, with
#                  $KAFKA_BOOTSTRAP (host:port), $KAFKA_LOG_DIRS (its log.dirs: the
#                  transcripts' /tmp/kafka-logs) and $KAFKA_PID set. Stopped at exit.
#                  KAFKA_FEATURES (an array of NAME=LEVEL) sets feature levels at
#                  format time (kafka-storage.sh format --feature), e.g.
#                  transaction.version=0 for the classic transaction protocol (Kafka
#                  4.3.1's default is 2).
#   stop_kafka_broker
#                  SIGTERM (Kafka's controlled shutdown), SIGKILL after 30 s.
#   start_kafka_cluster N [KEY=VALUE...]
#                  a real cluster of N nodes (node.id 1..N), each broker and controller in
#                  one JVM, the N controllers a static KRaft quorum (controller.quorum.voters),
#                  on free loopback ports, with replication factor N for new and internal
#                  topics and min.insync.replicas=2 (kafka_node_properties); each KEY=VALUE is
#                  a line of every node's server.properties. Returns once every broker is
#                  unfenced, with $KAFKA_CLUSTER_BOOTSTRAP (every broker's host:port, comma-
#                  separated) and, per node N, ${KAFKA_CLUSTER_PIDS[N]} (empty while it is
#                  down), ${KAFKA_CLUSTER_PORTS[N]} and ${KAFKA_CLUSTER_DIRS[N]} (its
#                  server.properties, kafka-logs/ and node.out). Killed at exit.
#   launch_kafka_cluster N [KEY=VALUE...]; ...; kafka_cluster_wait
#                  the same in two steps, for a test with other work to do while the
#                  JVMs start ($KAFKA_CLUSTER_BOOTSTRAP is set at launch).
#   kafka_cluster_kill NODE [SIGNAL]
#                  kills node NODE (SIGKILL unless SIGNAL says otherwise: TERM is a
#                  controlled shutdown) and returns once it is gone.
#   kafka_cluster_start NODE
#                  starts node NODE again on its ports and log dir (after kafka_cluster_kill)
#                  and returns once its broker is unfenced.
#   kafka_cluster_leader TOPIC PARTITION
#                  prints the node id of the partition's leader, as kafka-topics.sh
#                  --describe shows it (-1 or none while it has no leader).
#   stop_kafka_cluster
#                  SIGTERM to every node at once, SIGKILL to those left after 30 s.
#   start_kpfs_and_kafka [KEY=VALUE...]
#                  `kpfs serve` and a Kafka broker with the same broker configs (kpfs's
#                  --override, Kafka's server.properties) and KAFKA_FEATURES's
#                  transaction.version on both (kpfs serve --feature), for side-by-side
#                  tests: sets $KPFS_LOGS (kpfs's data dir) and $KPFS_BOOTSTRAP beside
#                  start_kafka_broker's.

# shellcheck source=scripts/kafka-broker.sh
. "$KPFS_ROOT/scripts/kafka-broker.sh"

KAFKA_HOME=${KAFKA_HOME:-$("$KPFS_ROOT/scripts/kafka-dist")} || fail "scripts/kafka-dist failed"
KAFKA_BIN=$KAFKA_HOME/bin
[ -x "$KAFKA_BIN/kafka-server-start.sh" ] || fail "no Kafka at $KAFKA_HOME (scripts/kafka-dist installs it)"
KAFKA_PID=
KAFKA_BROKER_DIRS=()
KAFKA_CLUSTER_BOOTSTRAP=
KAFKA_CLUSTER_PIDS=()
KAFKA_CLUSTER_PORTS=()
KAFKA_CLUSTER_DIRS=()
KAFKA_FEATURES=()
# The tools' and the test broker's JVMs, quicker to start (C1 only, serial GC): what they
# print and answer is the same. scripts/bench measures Kafka with its own flags instead.
export KAFKA_JVM_PERFORMANCE_OPTS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xshare:auto -Djava.awt.headless=true"

_kafka_alive() { [ -n "$KAFKA_PID" ] && kill -0 "$KAFKA_PID" 2>/dev/null; }
_kafka_gone() { ! _kafka_alive; }

stop_kafka_broker() {
    _kafka_alive || { KAFKA_PID=; return 0; }
    kill -TERM "$KAFKA_PID" 2>/dev/null || true
    if ! wait_until 30 _kafka_gone; then
        echo "kafka_lib: broker $KAFKA_PID still runs 30 s after SIGTERM; SIGKILL" >&2
        kill -KILL "$KAFKA_PID" 2>/dev/null || true
        wait_until 10 _kafka_gone || true
    fi
    wait "$KAFKA_PID" 2>/dev/null || true
    KAFKA_PID=
}

_kafka_cleanup() {
    local d n
    stop_kafka_broker
    # No controlled shutdown at exit: the cluster's data goes with its directory.
    for n in "${!KAFKA_CLUSTER_PIDS[@]}"; do
        [ -z "${KAFKA_CLUSTER_PIDS[n]}" ] || kafka_cluster_kill "$n" KILL
    done
    for d in "${KAFKA_BROKER_DIRS[@]}"; do rm -rf "$d"; done
}
# lib.sh's trap, after the broker's: both run whatever the test's end.
trap '_kafka_cleanup; _kpfs_cleanup' EXIT

_kafka_started() { grep -q 'Kafka Server started' "$1"; }

start_kafka_broker() {
    local dir props attempt port cport t0 feature features=()
    [ -z "$KAFKA_PID" ] || fail "start_kafka_broker: a broker already runs ($KAFKA_PID)"
    dir=$(mktemp -d /tmp/kpfs-kafka.XXXXXX)
    KAFKA_BROKER_DIRS+=("$dir")
    KAFKA_LOG_DIRS=$dir/kafka-logs
    props=$dir/server.properties
    for feature in "${KAFKA_FEATURES[@]}"; do features+=(--feature "$feature"); done
    for attempt in 1 2 3 4 5; do
        random_port port
        random_port cport
        [ "$port" != "$cport" ] || continue
        kafka_broker_properties "$port" "$cport" "$KAFKA_LOG_DIRS" "$@" >"$props"
        rm -rf "$KAFKA_LOG_DIRS" "$dir/logs"
        LOG_DIR=$dir/logs "$KAFKA_BIN/kafka-storage.sh" format --standalone \
            -t "$(kafka_uuid)" -c "$props" "${features[@]}" >"$dir/format.out" 2>&1 ||
            fail "kafka-storage.sh format failed: $(cat "$dir/format.out")"
        t0=$(date +%s%N)
        LOG_DIR=$dir/logs KAFKA_HEAP_OPTS=${KAFKA_BROKER_HEAP_OPTS:--Xmx512M -Xms512M} \
            "$KAFKA_BIN/kafka-server-start.sh" "$props" >"$dir/broker.out" 2>&1 &
        KAFKA_PID=$!
        if wait_until 60 is_listening "$port" && wait_until 60 _kafka_started "$dir/broker.out"; then
            KAFKA_BOOTSTRAP=127.0.0.1:$port
            KAFKA_START_MS=$((($(date +%s%N) - t0) / 1000000))
            KAFKA_BROKER_OUT=$dir/broker.out
            return
        fi
        if grep -q 'Address already in use' "$dir/broker.out"; then
            stop_kafka_broker
            continue
        fi
        tail -n 30 "$dir/broker.out" >&2
        stop_kafka_broker
        fail "the Kafka broker did not start in 60 s (log above; $dir/broker.out)"
    done
    fail "the Kafka broker found no free port in $attempt attempts"
}

_kafka_node_alive() {
    local pid=${KAFKA_CLUSTER_PIDS[$1]:-}
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}
_kafka_node_gone() { ! _kafka_node_alive "$1"; }

# _kafka_node_launch NODE: starts the node's JVM, its console output in node.out (the
# previous start's kept as node.out.prev).
_kafka_node_launch() {
    local dir=${KAFKA_CLUSTER_DIRS[$1]}
    [ ! -f "$dir/node.out" ] || mv "$dir/node.out" "$dir/node.out.prev"
    LOG_DIR=$dir/logs KAFKA_HEAP_OPTS=${KAFKA_CLUSTER_HEAP_OPTS:--Xmx320M -Xms320M} \
        "$KAFKA_BIN/kafka-server-start.sh" "$dir/server.properties" >"$dir/node.out" 2>&1 &
    KAFKA_CLUSTER_PIDS[$1]=$!
    # Out of the job table, so that a kill -9 is not reported as "Killed" on stderr (bash
    # still reaps it, which _kafka_node_gone sees).
    disown "$!"
}

# _kafka_node_wait NODE: waits for the node's broker to be unfenced (what "Kafka Server
# started" follows in KRaft), failing with its log's tail after 90 s or at its death.
_kafka_node_wait() {
    local dir=${KAFKA_CLUSTER_DIRS[$1]} deadline=$(($(date +%s) + 90))
    until _kafka_started "$dir/node.out"; do
        if ! _kafka_node_alive "$1" || [ "$(date +%s)" -ge "$deadline" ]; then
            tail -n 30 "$dir/node.out" >&2
            fail "Kafka node $1 did not start (log above; $dir/node.out)"
        fi
        sleep 0.2
    done
}

launch_kafka_cluster() {
    local n=$1 i dir voters= bootstrap= ports=() id
    shift
    [ -z "$KAFKA_CLUSTER_BOOTSTRAP" ] || fail "launch_kafka_cluster: a cluster already runs"
    # 2N distinct free ports: a client and a controller listener per node. Another process
    # may take one before the node binds it; node.out then says so.
    while [ "${#ports[@]}" -lt $((2 * n)) ]; do
        random_port i
        case " ${ports[*]} " in *" $i "*) ;; *) ports+=("$i") ;; esac
    done
    for i in $(seq 1 "$n"); do
        KAFKA_CLUSTER_PORTS[i]=${ports[2 * i - 2]}
        voters+=${voters:+,}$i@127.0.0.1:${ports[2 * i - 1]}
        bootstrap+=${bootstrap:+,}127.0.0.1:${KAFKA_CLUSTER_PORTS[i]}
    done
    id=$(kafka_uuid)
    for i in $(seq 1 "$n"); do
        dir=$(mktemp -d /tmp/kpfs-kafka-node$i.XXXXXX)
        KAFKA_BROKER_DIRS+=("$dir")
        KAFKA_CLUSTER_DIRS[i]=$dir
        kafka_node_properties "$i" "${KAFKA_CLUSTER_PORTS[i]}" "${ports[2 * i - 1]}" \
            "$dir/kafka-logs" "controller.quorum.voters=$voters" "$n" "$@" >"$dir/server.properties"
        LOG_DIR=$dir/logs "$KAFKA_BIN/kafka-storage.sh" format -t "$id" \
            -c "$dir/server.properties" >"$dir/format.out" 2>&1 ||
            fail "kafka-storage.sh format of node $i failed: $(cat "$dir/format.out")"
    done
    # All at once: a controller waits for a majority of the quorum to elect a leader.
    for i in $(seq 1 "$n"); do _kafka_node_launch "$i"; done
    KAFKA_CLUSTER_BOOTSTRAP=$bootstrap
}

kafka_cluster_wait() {
    local n
    for n in "${!KAFKA_CLUSTER_PIDS[@]}"; do _kafka_node_wait "$n"; done
}

start_kafka_cluster() {
    launch_kafka_cluster "$@"
    kafka_cluster_wait
}

kafka_cluster_kill() {
    local pid=${KAFKA_CLUSTER_PIDS[$1]:-}
    [ -n "$pid" ] || fail "kafka_cluster_kill: node $1 does not run"
    kill "-${2:-KILL}" "$pid" 2>/dev/null || true
    wait_until 60 _kafka_node_gone "$1" || fail "Kafka node $1 ($pid) still runs 60 s after SIG${2:-KILL}"
    KAFKA_CLUSTER_PIDS[$1]=
}

kafka_cluster_start() {
    [ -z "${KAFKA_CLUSTER_PIDS[$1]:-}" ] || fail "kafka_cluster_start: node $1 runs already"
    _kafka_node_launch "$1"
    _kafka_node_wait "$1"
}

kafka_cluster_leader() {
    "$KAFKA_BIN/kafka-topics.sh" --bootstrap-server "$KAFKA_CLUSTER_BOOTSTRAP" --describe \
        --topic "$1" 2>/dev/null |
        awk -F '\t' -v p="Partition: $2" '$3 == p { sub("Leader: ", "", $4); print $4 }'
}

stop_kafka_cluster() {
    local n
    for n in "${!KAFKA_CLUSTER_PIDS[@]}"; do
        [ -z "${KAFKA_CLUSTER_PIDS[n]}" ] || kill -TERM "${KAFKA_CLUSTER_PIDS[n]}" 2>/dev/null || true
    done
    for n in "${!KAFKA_CLUSTER_PIDS[@]}"; do
        [ -n "${KAFKA_CLUSTER_PIDS[n]}" ] || continue
        if ! wait_until 30 _kafka_node_gone "$n"; then
            echo "kafka_lib: node $n still runs 30 s after SIGTERM; SIGKILL" >&2
        fi
        kafka_cluster_kill "$n" KILL
    done
    KAFKA_CLUSTER_BOOTSTRAP=
}

start_kpfs_and_kafka() {
    local c overrides=()
    new_data_dir KPFS_LOGS
    KPFS_DATA_DIRS+=("$KPFS_LOGS.log")
    for c in "$@"; do overrides+=(--override "$c"); done
    for c in "${KAFKA_FEATURES[@]}"; do
        [[ $c != transaction.version=* ]] || overrides+=(--feature "$c")
    done
    serve_kpfs_listening "$KPFS_LOGS.log" "$KPFS_LOGS" "${overrides[@]}"
    KPFS_BOOTSTRAP=$BOOTSTRAP
    start_kafka_broker "$@"
    echo "Kafka broker started in $KAFKA_START_MS ms"
}
