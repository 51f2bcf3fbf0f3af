# shellcheck shell=bash
# A KRaft Apache Kafka broker's configuration, shared by the shell tests
# (tests/shell/kafka_lib.sh: one node, or a cluster of three) and scripts/bench
# (scripts/bench-kafka.sh), so that all run the same broker. Sourced; defines functions only.

# kafka_broker_properties PORT CONTROLLER_PORT LOG_DIRS [KEY=VALUE...]: a server.properties
# on stdout for one node (broker and controller in one JVM, node.id 1) listening on
# 127.0.0.1:PORT (clients) and :CONTROLLER_PORT (KRaft), keeping its logs in LOG_DIRS,
# with Kafka's defaults but for replication factors of 1 (one node); each KEY=VALUE is a
# line of its own after those.
kafka_broker_properties() {
    local port=$1 cport=$2 log_dirs=$3
    shift 3
    kafka_node_properties 1 "$port" "$cport" "$log_dirs" \
        "controller.quorum.bootstrap.servers=127.0.0.1:$cport" 1 "$@"
}

# kafka_node_properties NODE_ID PORT CONTROLLER_PORT LOG_DIRS QUORUM RF [KEY=VALUE...]: the
# same for node NODE_ID of a cluster whose controllers QUORUM names (a
# controller.quorum.bootstrap.servers= or controller.quorum.voters= line) and whose
# internal topics have RF replicas. Above one replica, the cluster's own defaults are
# those of a production cluster of three: new topics get RF replicas and acks=all needs
# two of them in sync (min.insync.replicas=2), so one node may be down.
kafka_node_properties() {
    local id=$1 port=$2 cport=$3 log_dirs=$4 quorum=$5 rf=$6 min_isr=1 line
    shift 6
    [ "$rf" -le 1 ] || min_isr=2
    echo "process.roles=broker,controller"
    echo "node.id=$id"
    echo "$quorum"
    echo "listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport"
    echo "advertised.listeners=PLAINTEXT://127.0.0.1:$port"
    echo "inter.broker.listener.name=PLAINTEXT"
    echo "controller.listener.names=CONTROLLER"
    echo "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
    echo "log.dirs=$log_dirs"
    echo "num.partitions=1"
    if [ "$rf" -gt 1 ]; then
        echo "default.replication.factor=$rf"
        echo "min.insync.replicas=$min_isr"
    fi
    echo "offsets.topic.replication.factor=$rf"
    echo "share.coordinator.state.topic.replication.factor=$rf"
    echo "share.coordinator.state.topic.min.isr=$min_isr"
    echo "transaction.state.log.replication.factor=$rf"
    echo "transaction.state.log.min.isr=$min_isr"
    for line in "$@"; do echo "$line"; done
}

# kafka_uuid: a random Kafka Uuid as kafka-storage.sh random-uuid prints it (16 bytes in
# URL-safe base64 without padding, never starting with '-'), without a JVM's start.
kafka_uuid() {
    local id
    while :; do
        id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
        case $id in -*) ;; *) break ;; esac
    done
    echo "$id"
}
