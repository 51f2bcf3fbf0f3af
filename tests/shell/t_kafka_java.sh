# Apache Kafka's Java client, kafka-clients 4.3.1 (the jars scripts/kafka-dist installs),
# against `kpfs serve`: tests/clients/java/KpfsJavaClient.java, compiled here, runs the
# producer with its defaults and each codec, a consumer group of two, and the AdminClient
# calls kpfs serves, each scenario a row of the client matrix
# (target/client-matrix/java-kafka-clients-4.3.1.tsv). Then Kafka's own
# kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh move 200000 records through
# it, every one acknowledged and consumed. A scenario that fails fails the test; the ones
# kpfs cannot serve are `unsupported` with their reason, and exactly those in UNSUPPORTED.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/kafka_lib.sh"

CLIENT=java-kafka-clients-4.3.1
# Scenario -> why kpfs cannot serve it (docs/KAFKA-PROTOCOL.md).
declare -A UNSUPPORTED=(
    [consume-group-consumer-protocol]="KIP-848's ConsumerGroupHeartbeat is not served"
    [admin-describe-log-dirs]="DescribeLogDirs is not served"
    [admin-describe-metadata-quorum]="DescribeQuorum: kpfs has no KRaft quorum"
)
SCENARIOS=(produce produce-idempotent consume-from-beginning produce-compressed-gzip
    produce-compressed-snappy produce-compressed-lz4 produce-compressed-zstd produce-too-large
    produce-unknown-topic produce-acks consume-group commit-offsets consume-from-offset
    consume-offsets-for-times consume-group-auto-commit
    consume-group-static admin-create-topics admin-list-topics admin-describe-topics
    admin-describe-configs admin-alter-configs admin-list-offsets admin-delete-records
    admin-list-groups admin-describe-groups admin-list-group-offsets admin-alter-group-offsets
    admin-delete-group-offsets admin-delete-groups admin-describe-cluster
    admin-describe-features admin-acls admin-describe-producers admin-create-partitions
    admin-list-transactions "${!UNSUPPORTED[@]}"
    admin-delete-topics)
PERF_RECORDS=200000

matrix_dir=${KPFS_CLIENT_MATRIX_DIR:-$KPFS_ROOT/target/client-matrix}
mkdir -p "$matrix_dir"
matrix=$matrix_dir/$CLIENT.tsv
: >"$matrix"

new_data_dir scratch
new_data_dir DATA
t0=$(date +%s%N)
javac -Xlint:all -Werror -d "$scratch/classes" -cp "$KAFKA_HOME/libs/*" \
    "$KPFS_ROOT/tests/clients/java/KpfsJavaClient.java" || fail "javac KpfsJavaClient.java failed"
echo "compiled in $((($(date +%s%N) - t0) / 1000000)) ms"

# Auto-creation off: the producer's unknown-topic check needs a topic that stays unknown.
# No initial rebalance delay, as Kafka's own config/server.properties for development.
serve_kpfs_listening "$scratch/serve.log" "$DATA" \
    --override auto.create.topics.enable=false --override group.initial.rebalance.delay.ms=0

t0=$(date +%s%N)
status=0
timeout 180 java -cp "$KAFKA_HOME/libs/*:$scratch/classes" KpfsJavaClient "$BOOTSTRAP" "$DATA" "$matrix" \
    >"$scratch/java.out" 2>&1 || status=$?
echo "KpfsJavaClient ran in $((($(date +%s%N) - t0) / 1000000)) ms, exit $status"
grep -E $'^[a-z0-9-]+ +(pass|fail|unsupported) ' "$scratch/java.out" || true
if [ "$status" -ne 0 ]; then
    tail -n 60 "$scratch/java.out" >&2
    fail "KpfsJavaClient exited $status (above; every scenario's row is in $matrix)"
fi

# Every scenario ran once, and the unsupported ones are exactly UNSUPPORTED.
expect_eq "$(printf '%s\n' "${SCENARIOS[@]}" | sort)" "$(cut -f1 "$matrix" | sort)" "the scenarios in $matrix"
expect_eq "" "$(awk -F'\t' '$2 == "fail"' "$matrix")" "failed scenarios"
expect_eq "$(printf '%s\n' "${!UNSUPPORTED[@]}" | sort)" \
    "$(awk -F'\t' '$2 == "unsupported" { print $1 }' "$matrix" | sort)" "unsupported scenarios"

# Kafka's perf tools: every record acknowledged, then every one consumed.
K=$KAFKA_BIN
"$K/kafka-topics.sh" --bootstrap-server "$BOOTSTRAP" --create --topic java-perf >"$scratch/create.out" 2>&1 ||
    fail "kafka-topics.sh --create failed: $(cat "$scratch/create.out")"
status=0
timeout 120 "$K/kafka-producer-perf-test.sh" --topic java-perf --num-records "$PERF_RECORDS" --record-size 100 \
    --throughput -1 --producer-props "bootstrap.servers=$BOOTSTRAP" >"$scratch/producer-perf.out" 2>&1 || status=$?
summary=$(tail -n 1 "$scratch/producer-perf.out")
echo "kafka-producer-perf-test.sh: $summary"
if [ "$status" -eq 0 ] && [[ $summary == "$PERF_RECORDS records sent, "* ]] &&
    ! grep -q -i 'exception\|error' "$scratch/producer-perf.out"; then
    printf 'producer-perf-test\tpass\t%s\n' "$summary" >>"$matrix"
else
    printf 'producer-perf-test\tfail\texit %s: %s\n' "$status" "$summary" >>"$matrix"
    cat "$scratch/producer-perf.out" >&2
    fail "kafka-producer-perf-test.sh did not send $PERF_RECORDS records"
fi
end=$(timeout 60 "$K/kafka-get-offsets.sh" --bootstrap-server "$BOOTSTRAP" --topic java-perf --time -1 2>&1) || true
expect_eq "java-perf:0:$PERF_RECORDS" "$end" "the end offset after kafka-producer-perf-test.sh"

status=0
timeout 120 "$K/kafka-consumer-perf-test.sh" --bootstrap-server "$BOOTSTRAP" --topic java-perf \
    --num-records "$PERF_RECORDS" --timeout 30000 >"$scratch/consumer-perf.out" 2>&1 || status=$?
echo "kafka-consumer-perf-test.sh:"
cat "$scratch/consumer-perf.out"
# start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, ...
consumed=$(awk -F', *' 'NR == 2 { print $3 " MB, " $5 " records" }' "$scratch/consumer-perf.out")
if [ "$status" -eq 0 ] && [ "$consumed" == "19.0735 MB, $PERF_RECORDS records" ]; then
    printf 'consumer-perf-test\tpass\t%s\n' "$(sed -n 2p "$scratch/consumer-perf.out")" >>"$matrix"
else
    printf 'consumer-perf-test\tfail\texit %s: %s\n' "$status" "$consumed" >>"$matrix"
    fail "kafka-consumer-perf-test.sh consumed $consumed, not all $PERF_RECORDS records (exit $status)"
fi

kill -TERM "$SERVE_PID"
wait "$SERVE_PID" || fail "kpfs serve exited $? after SIGTERM"
expect_eq "" "$(grep -E ' (WARN|ERROR) ' "$scratch/serve.log" || true)" "warnings in kpfs serve's log"
