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
#                  transaction.version=0 for the transaction protocol kpfs serves.
#   stop_kafka_broker
#                  SIGTERM (Kafka's controlled shutdown), SIGKILL after 30 s.
#   start_kpfs_and_kafka [KEY=VALUE...]
#                  `kpfs serve` and a Kafka broker with the same broker configs (kpfs's
#                  --override, Kafka's server.properties), for side-by-side tests: sets
#                  $KPFS_LOGS (kpfs's data dir) and $KPFS_BOOTSTRAP beside start_kafka_broker's.

# shellcheck source=scripts/kafka-broker.sh
. "$KPFS_ROOT/scripts/kafka-broker.sh"

KAFKA_HOME=${KAFKA_HOME:-$("$KPFS_ROOT/scripts/kafka-dist")} || fail "scripts/kafka-dist failed"
KAFKA_BIN=$KAFKA_HOME/bin
[ -x "$KAFKA_BIN/kafka-server-start.sh" ] || fail "no Kafka at $KAFKA_HOME (scripts/kafka-dist installs it)"
KAFKA_PID=
KAFKA_BROKER_DIRS=()
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
    local d
    stop_kafka_broker
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

start_kpfs_and_kafka() {
    local c overrides=()
    new_data_dir KPFS_LOGS
    KPFS_DATA_DIRS+=("$KPFS_LOGS.log")
    for c in "$@"; do overrides+=(--override "$c"); done
    serve_kpfs_listening "$KPFS_LOGS.log" "$KPFS_LOGS" "${overrides[@]}"
    KPFS_BOOTSTRAP=$BOOTSTRAP
    start_kafka_broker "$@"
    echo "Kafka broker started in $KAFKA_START_MS ms"
}
