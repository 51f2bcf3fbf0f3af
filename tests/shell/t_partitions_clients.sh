# Topics of several partitions through real clients (kafka-python, confluent-kafka, kcat;
# tests/shell/partitions_client.py drives the Python ones), each command run against kpfs
# serve and against a real Apache Kafka 4.3.1 broker at once (side_by_side.sh), both
# with num.partitions=4: what Kafka prints is checked against what it must be, and kpfs
# must print the same.
#
# 1. Both AdminClients create topics of 3 and 12 partitions, and of num_partitions -1
#    (the broker's num.partitions); describe shows every partition led by the node, with
#    its replicas and ISR. CreatePartitions takes 3 to 5 and refuses 2 and 5 in Kafka's
#    words; a producer writes to the new partition 4.
# 2. kcat produces to explicit partitions (-P -p N), consumes each (-C -p N) and all of
#    them (-C), is told a partition past the last is unknown, and lists the metadata (-L).
# 3. The default partitioners (kafka-python's; confluent-kafka's murmur2_random) put keyed
#    records in the partitions Kafka's Java producer picks: the table is computed each run
#    by kafka-clients' own code (tests/clients/java/PartitionForKey.java), no broker asked.
# 4. Consumer groups of three (kafka-python with the range and the roundrobin assignor,
#    confluent-kafka with cooperative-sticky) over six partitions: two partitions each, 60
#    records consumed once across the group and committed; one member leaves, the other
#    two own three each and consume the next 60; kafka-consumer-groups.sh --describe.
# 5. ListOffsets per partition (kafka-python, kafka-get-offsets.sh), DeleteRecords on one
#    partition (kafka-delete-records.sh, kafka-python) leaving the others as they were.
#
# Client matrix rows for kpfs: partitions-* of kafka-python, confluent-kafka and kcat.
#
#   PARTITIONS_ONLY_KAFKA=1   (for development) runs every check on the Kafka broker
#                             alone: no kpfs, no comparison, no matrix rows.
# shellcheck shell=bash disable=SC2016 # $BOOTSTRAP and $K in both's command lines: each side's
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/kafka_lib.sh"
source "$(dirname "$0")/side_by_side.sh"

command -v kcat >/dev/null || fail "no kcat (Debian's package kcat; .ci/run installs it)"
PY=$(kafka_python)
K=$KAFKA_BIN
new_data_dir W
t_start=$(date +%s)
# Differences kpfs is known to have (none yet: every one is a defect).
declare -A KNOWN=()

# Groups without the initial rebalance delay, and sessions as short as the members' 3 s
# (Kafka's minimum is 6 s).
BROKER_CONFIGS=(num.partitions=4 group.initial.rebalance.delay.ms=0 group.min.session.timeout.ms=500)
if [ -n "${PARTITIONS_ONLY_KAFKA:-}" ]; then
    SIDES=(kafka)
    start_kafka_broker "${BROKER_CONFIGS[@]}"
else
    start_kpfs_and_kafka "${BROKER_CONFIGS[@]}"
fi

# pc: partitions_client.py in a command line of `both` (which sets $BOOTSTRAP per side).
pc="$PY $KPFS_ROOT/tests/shell/partitions_client.py"

# kafka_says NAME EXPECTED: Kafka's output of check NAME is EXPECTED, then "exit 0".
kafka_says() {
    expect_eq "$2"$'\nexit 0' "$(cat "$W/$1.kafka")" "Kafka's output of $1"
}

# kp_described TOPIC N, cf_described TOPIC N: what kp-describe and cf-describe print of a
# topic of N partitions on a one-node cluster (node 1: Kafka's node.id, kpfs's default).
kp_described() {
    local p
    for ((p = 0; p < $2; p++)); do
        echo "$1 $p leader=1 epoch=0 replicas=[1] isr=[1] offline=[] NoError"
    done
}
cf_described() {
    local p prefix
    for prefix in "" "described: "; do
        for ((p = 0; p < $2; p++)); do echo "$prefix$1 $p leader=1 replicas=[1] isr=[1]"; done
    done
}

# --- 1. Create, describe, add partitions.
both create-kafka-python "$pc kp-create \$BOOTSTRAP kp3:3 kp12:12 kpdef:-1 && $pc kp-describe \$BOOTSTRAP kp3 kp12 kpdef"
kafka_says create-kafka-python "$(printf '%s NoError None\n' kp12 kp3 kpdef
    kp_described kp3 3
    kp_described kp12 12
    kp_described kpdef 4)"
both create-confluent-kafka "$pc cf-create \$BOOTSTRAP cf3:3 cf12:12 cfdef:-1 && $pc cf-describe \$BOOTSTRAP cf3 cf12 cfdef"
kafka_says create-confluent-kafka "$(printf '%s OK\n' cf12 cf3 cfdef
    cf_described cf3 3
    cf_described cf12 12
    cf_described cfdef 4)"
# The topics of the checks below, each of the partitions it needs.
both create-topics-for-the-rest "$pc kp-create \$BOOTSTRAP kc3:3 dr3:3 range6:6 roundrobin6:6 sticky6:6"
kafka_says create-topics-for-the-rest "$(printf '%s NoError None\n' dr3 kc3 range6 roundrobin6 sticky6)"

both add-kafka-python "$pc kp-add \$BOOTSTRAP kp3 5 && $pc kp-add \$BOOTSTRAP kp3 2 && $pc kp-add \$BOOTSTRAP kp3 5 &&
    $pc kp-describe \$BOOTSTRAP kp3 && $pc kp-produce-to \$BOOTSTRAP kp3 4 new-a new-b"
kafka_says add-kafka-python "kp3 NoError None
kp3 InvalidPartitionsError The topic kp3 currently has 5 partition(s); 2 would not be an increase.
kp3 InvalidPartitionsError Topic already has 5 partition(s).
$(kp_described kp3 5)
4 0
4 1"
both add-confluent-kafka "$pc cf-add \$BOOTSTRAP cf3 5 && $pc cf-add \$BOOTSTRAP cf3 2 && $pc cf-add \$BOOTSTRAP cf3 5 &&
    $pc cf-describe \$BOOTSTRAP cf3"
kafka_says add-confluent-kafka "cf3 OK
cf3 INVALID_PARTITIONS The topic cf3 currently has 5 partition(s); 2 would not be an increase.
cf3 INVALID_PARTITIONS Topic already has 5 partition(s).
$(cf_described cf3 5)"

# --- 2. kcat: explicit partitions, all partitions, a partition past the last, metadata.
both kcat-produce-explicit 'for p in 0 1 2; do
        printf "p%s-a\np%s-b\n" $p $p | kcat -b $BOOTSTRAP -q -P -t kc3 -p $p || exit
    done
    for p in 0 1 2; do kcat -b $BOOTSTRAP -q -C -t kc3 -p $p -o beginning -e -f "%p %o %s\n"; done'
kcat_records=$(for p in 0 1 2; do printf '%s 0 p%s-a\n%s 1 p%s-b\n' $p $p $p $p; done)
kafka_says kcat-produce-explicit "$kcat_records"
# Without -p kcat reads the partitions concurrently: their interleaving is its own.
both kcat-consume-all 'kcat -b $BOOTSTRAP -q -C -t kc3 -o beginning -e -f "%p %o %s\n" | sort'
kafka_says kcat-consume-all "$kcat_records"
both kcat-unknown-partition 'printf "past the last\n" | kcat -b $BOOTSTRAP -P -t kc3 -p 3'
expect_eq $'% Delivery failed for message: Local: Unknown partition\nexit 1' \
    "$(cat "$W/kcat-unknown-partition.kafka")" "Kafka's output of kcat-unknown-partition"
both kcat-metadata 'kcat -b $BOOTSTRAP -L -t kc3'
kafka_says kcat-metadata "Metadata for kc3 (from broker 1: BOOTSTRAP/1):
 1 brokers:
  broker 1 at BOOTSTRAP (controller)
 1 topics:
  topic \"kc3\" with 3 partitions:
$(for p in 0 1 2; do echo "    partition $p, leader 1, replicas: 1, isrs: 1"; done)"

# --- 3. The default partitioner against the Java producer's, computed here.
keys=$(seq -f 'key-%g' 0 19)
# shellcheck disable=SC2086 # one argument a key
java_table=$(java $KAFKA_JVM_PERFORMANCE_OPTS -cp "$KAFKA_HOME/libs/*" \
    "$KPFS_ROOT/tests/clients/java/PartitionForKey.java" 12 $keys) || fail "PartitionForKey.java failed"
expect_eq 20 "$(wc -l <<<"$java_table")" "keys in the Java producer's table"
expected_keyed=$(awk '{ print $1, "told=" $2, "stored=" $2 }' <<<"$java_table")
# 20 keys over 12 partitions hit more than a few: a table of one partition proves nothing.
[ "$(awk '{ print $2 }' <<<"$java_table" | sort -u | wc -l)" -ge 8 ] || fail "the keys hit few partitions: $java_table"
both keyed-kafka-python "$pc kp-keyed \$BOOTSTRAP kp12 20"
kafka_says keyed-kafka-python "$expected_keyed"
both keyed-confluent-kafka "$pc cf-keyed \$BOOTSTRAP cf12 20"
kafka_says keyed-confluent-kafka "$expected_keyed"

# --- 4. Consumer groups over six partitions.
# group_says NAME SPREAD_OF_THREE SPREAD_OF_TWO MEMBER_LETTERS: Kafka's output of a group
# check: the shares, the records and commits, then kafka-consumer-groups.sh's rows, each
# partition's member (letters in order of first appearance, "?" when the assignor's
# choice depends on member ids).
group_says() {
    local name=$1 group=$2 topic=$3 letters p
    read -ra letters <<<"$6"
    kafka_says "$name" "three members: $4
  consumed 60 records, 60 distinct, 60 of the 60 produced, 0 others
  committed: 0=10 1=10 2=10 3=10 4=10 5=10
two members: $5
  consumed 60 records, 60 distinct, 60 of the 60 produced, 0 others
  committed: 0=20 1=20 2=20 3=20 4=20 5=20
  kafka-consumer-groups.sh --describe: GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
$(for p in 0 1 2 3 4 5; do echo "    $group $topic $p 20 20 0 member-${letters[p]} /127.0.0.1 client-${letters[p]}"; done)
  exit 0"
}
both group-kafka-python-range "$pc group \$BOOTSTRAP kp range range6 range-group \$K"
group_says group-kafka-python-range range-group range6 "[0, 1] [2, 3] [4, 5]" "[0, 1, 2] [3, 4, 5]" "a a a b b b"
both group-kafka-python-roundrobin "$pc group \$BOOTSTRAP kp roundrobin roundrobin6 roundrobin-group \$K"
group_says group-kafka-python-roundrobin roundrobin-group roundrobin6 "[0, 3] [1, 4] [2, 5]" "[0, 2, 4] [1, 3, 5]" "a b a b a b"
both group-confluent-kafka-sticky "$pc group \$BOOTSTRAP cf cooperative-sticky sticky6 sticky-group \$K"
group_says group-confluent-kafka-sticky sticky-group sticky6 "2 2 2 partitions" \
    "3 3 partitions, each keeping its own: True" "? ? ? ? ? ?"

# --- 5. ListOffsets and DeleteRecords per partition: 4, 6 and 2 records in dr3's three.
both list-offsets-kafka-python "$pc kp-produce-to \$BOOTSTRAP dr3 0 a b c d >/dev/null &&
    $pc kp-produce-to \$BOOTSTRAP dr3 1 a b c d e f >/dev/null && $pc kp-produce-to \$BOOTSTRAP dr3 2 a b >/dev/null &&
    $pc kp-offsets \$BOOTSTRAP dr3"
kafka_says list-offsets-kafka-python $'dr3 0 0 4\ndr3 1 0 6\ndr3 2 0 2'
both list-offsets-tool '$K/kafka-get-offsets.sh --bootstrap-server $BOOTSTRAP --topic dr3 --time earliest &&
    $K/kafka-get-offsets.sh --bootstrap-server $BOOTSTRAP --topic dr3 --time latest'
kafka_says list-offsets-tool $'dr3:0:0\ndr3:1:0\ndr3:2:0\ndr3:0:4\ndr3:1:6\ndr3:2:2'

echo '{"partitions": [{"topic": "dr3", "partition": 1, "offset": 3}], "version": 1}' >"$W/delete-records.json"
both delete-records-tool "\$K/kafka-delete-records.sh --bootstrap-server \$BOOTSTRAP --offset-json-file $W/delete-records.json"
kafka_says delete-records-tool $'Executing records delete operation\nRecords delete operation completed:\npartition: dr3-1\tlow_watermark: 3'
both delete-records-kafka-python "$pc kp-delete-records \$BOOTSTRAP dr3 2 1 && $pc kp-offsets \$BOOTSTRAP dr3 &&
    $pc kp-read \$BOOTSTRAP dr3 0 && $pc kp-read \$BOOTSTRAP dr3 1 && $pc kp-read \$BOOTSTRAP dr3 2"
kafka_says delete-records-kafka-python "dr3 2 low_watermark=1 NoError
dr3 0 0 4
dr3 1 3 6
dr3 2 1 2
0 0 a
0 1 b
0 2 c
0 3 d
1 3 d
1 4 e
1 5 f
2 1 b"
both delete-records-offsets-tool '$K/kafka-get-offsets.sh --bootstrap-server $BOOTSTRAP --topic dr3 --time earliest'
kafka_says delete-records-offsets-tool $'dr3:0:0\ndr3:1:3\ndr3:2:1'

echo "checks: ${#CHECKS[@]} in $(($(date +%s) - t_start)) s"
if [ -n "${PARTITIONS_ONLY_KAFKA:-}" ]; then
    echo "PARTITIONS_ONLY_KAFKA: Kafka's answers checked, kpfs not asked"
    exit 0
fi

# --- The client matrix: a scenario passes when each of its checks printed on kpfs what
# it printed on Kafka; a group check's first phase (up to the first commit) is the
# spread, the rest the rebalance.
phase() { # phase 1|2 FILE
    if [ "$1" == 1 ]; then sed -n '1,/^  committed:/p' "$2"; else sed '1,/^  committed:/d' "$2"; fi
}
# scenario_row FILE SCENARIO CHECK[@PHASE]...: one matrix row.
scenario_row() {
    local file=$1 scenario=$2 check differing=()
    shift 2
    for check in "$@"; do
        case $check in
            *@[12]) cmp -s <(phase "${check##*@}" "$W/${check%@*}.kafka") <(phase "${check##*@}" "$W/${check%@*}.kpfs") ||
                differing+=("$check") ;;
            *) [ -z "${DIFFERS[$check]:-}" ] || differing+=("$check") ;;
        esac
    done
    if [ "${#differing[@]}" -eq 0 ]; then
        matrix_row "$file" "$scenario"
    else
        matrix_row "$file" "$scenario" fail "differs from Kafka 4.3.1: ${differing[*]}"
    fi
}
kp_rows=$(matrix_file "$(client_name kafka-python "$PY")" t_partitions_clients)
cf_rows=$(matrix_file "$(client_name confluent-kafka "$PY")" t_partitions_clients)
kcat_rows=$(matrix_file "$(client_name kcat)" t_partitions_clients)
scenario_row "$kp_rows" partitions-create create-kafka-python create-topics-for-the-rest
scenario_row "$kp_rows" partitions-add add-kafka-python
scenario_row "$kp_rows" partitions-default-partitioner keyed-kafka-python
scenario_row "$kp_rows" partitions-group-spread group-kafka-python-range@1 group-kafka-python-roundrobin@1
scenario_row "$kp_rows" partitions-group-rebalance group-kafka-python-range@2 group-kafka-python-roundrobin@2
scenario_row "$kp_rows" partitions-list-offsets list-offsets-kafka-python
scenario_row "$kp_rows" partitions-delete-records delete-records-kafka-python
scenario_row "$cf_rows" partitions-create create-confluent-kafka
scenario_row "$cf_rows" partitions-add add-confluent-kafka
scenario_row "$cf_rows" partitions-default-partitioner keyed-confluent-kafka
scenario_row "$cf_rows" partitions-group-spread group-confluent-kafka-sticky@1
scenario_row "$cf_rows" partitions-group-rebalance group-confluent-kafka-sticky@2
scenario_row "$kcat_rows" partitions-produce-explicit kcat-produce-explicit kcat-consume-all kcat-unknown-partition
scenario_row "$kcat_rows" partitions-metadata kcat-metadata

side_by_side_verdict
