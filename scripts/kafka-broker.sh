# shellcheck shell=bash
# A one-node KRaft Apache Kafka broker's configuration, shared by the shell tests
# (tests/shell/kafka_lib.sh) and scripts/bench (scripts/bench-kafka.sh), so that both run
# the same broker. Sourced; defines functions only.

# kafka_broker_properties PORT CONTROLLER_PORT LOG_DIRS [KEY=VALUE...]: a server.properties
# on stdout for one node (broker and controller in one JVM, node.id 1) listening on
# 127.0.0.1:PORT (clients) and :CONTROLLER_PORT (KRaft), keeping its logs in LOG_DIRS,
# with Kafka's defaults but for replication factors of 1 (one node); each KEY=VALUE is a
# line of its own after those.
kafka_broker_properties() {
    local port=$1 cport=$2 log_dirs=$3 line
    shift 3
    echo "process.roles=broker,controller"
    echo "node.id=1"
    echo "controller.quorum.bootstrap.servers=127.0.0.1:$cport"
    echo "listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport"
    echo "advertised.listeners=PLAINTEXT://127.0.0.1:$port"
    echo "inter.broker.listener.name=PLAINTEXT"
    echo "controller.listener.names=CONTROLLER"
    echo "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
    echo "log.dirs=$log_dirs"
    echo "num.partitions=1"
    echo "offsets.topic.replication.factor=1"
    echo "share.coordinator.state.topic.replication.factor=1"
    echo "share.coordinator.state.topic.min.isr=1"
    echo "transaction.state.log.replication.factor=1"
    echo "transaction.state.log.min.isr=1"
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
