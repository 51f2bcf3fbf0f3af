# confluent-kafka (librdkafka 2.16, idempotent) produces gzip, snappy, lz4 and zstd batches
# through a mount's Kafka listener: under compression.type=producer they are stored as
# sent (dump-log names the codec and the producer), `cat log` renders their records, and
# kcat (librdkafka 2.0.2) and kafka-python fetch them back; a topic with its own
# compression.type stores a producer's batch recompressed in it; confluent-kafka's
# AdminClient lists the topics, and their and the cluster's authorized operations.
source "$(dirname "$0")/lib.sh"

PY=$(kafka_python)
CONFLUENT=$KPFS_ROOT/tests/shell/confluent_client.py
mount_kpfs_listening
rows=$(matrix_file "$(client_name confluent-kafka "$PY")" t_kafka_codecs)

count=200
# expected CODEC: the records confluent_client.py sends, as cat prints them.
expected() { for i in $(seq 0 $((count - 1))); do echo "$1 record $i of a compressible payload $(printf 'x%.0s' {1..40})"; done; }
# batch_fields TOPIC: codec and producer of each batch, from dump-log, one line each.
batch_fields() {
    "$KPFS" dump-log "$MNT/$1/segments/00000000000000000000.log" |
        sed -n 's/.*producerId: \([-0-9]*\) .* compresscodec: \([a-z0-9]*\) .*/\2 producer=\1/p' | sort -u
}

for codec in gzip snappy lz4 zstd; do
    expect_eq "delivered $count offsets 0..$((count - 1))" \
        "$(timeout 60 "$PY" "$CONFLUENT" produce "$BOOTSTRAP" "$codec" "$codec" "$count")" "confluent-kafka producing $codec"
    expect_eq "$(expected "$codec")" "$(cat "$MNT/$codec/log")" "cat log of the $codec batches"
    fields=$(batch_fields "$codec")
    [[ $fields =~ ^$codec\ producer=[0-9]+$ ]] || fail "$codec topic's batches (codec, producer): $fields"
    expect_eq "$(expected "$codec")" "$(timeout 30 kcat -b "$BOOTSTRAP" -q -C -t "$codec" -o beginning -e)" \
        "kcat reading the $codec batches"
    matrix_row "$rows" "produce-compressed-$codec"
done
# Its producer is idempotent (confluent_client.py): the batches above carry producer ids.
matrix_row "$rows" produce-idempotent
last=$(timeout 60 "$PY" "$KPFS_ROOT/tests/shell/kafka_python_client.py" consume "$BOOTSTRAP" zstd $((count - 1)) 1)
expect_eq "$(printf "%s None b'%s'\nposition %s" $((count - 1)) "$(expected zstd | tail -n1)" "$count")" \
    "$last" "kafka-python reading the zstd batch's last record"

# A topic whose compression.type is zstd stores a gzip producer's records in zstd batches.
mkdir "$MNT/recompressed"
echo "compression.type=zstd" >"$MNT/recompressed/config"
timeout 60 "$PY" "$CONFLUENT" produce "$BOOTSTRAP" recompressed gzip "$count" >/dev/null
expect_eq "$(expected gzip)" "$(cat "$MNT/recompressed/log")" "cat log of the recompressed topic"
[[ $(batch_fields recompressed) =~ ^zstd\ producer=[0-9]+$ ]] ||
    fail "recompressed topic's batches: $(batch_fields recompressed)"

# confluent-kafka's AdminClient lists them (its Metadata request carries bytes after the
# body, which Kafka ignores).
expect_eq $'gzip\nlz4\nrecompressed\nsnappy\nzstd' \
    "$(timeout 60 "$PY" "$CONFLUENT" topics "$BOOTSTRAP")" "confluent-kafka's list_topics"
matrix_row "$rows" admin-list-topics
# Asked for authorized operations, it gets every one Kafka supports on the resource, as
# from a Kafka without an authorizer.
expect_eq $'topic 8: ALTER ALTER_CONFIGS CREATE DELETE DESCRIBE DESCRIBE_CONFIGS READ WRITE\ncluster 7: ALTER ALTER_CONFIGS CLUSTER_ACTION CREATE DESCRIBE DESCRIBE_CONFIGS IDEMPOTENT_WRITE' \
    "$(timeout 60 "$PY" "$CONFLUENT" operations "$BOOTSTRAP" gzip)" "confluent-kafka's authorized operations"
matrix_row "$rows" admin-describe-topics
matrix_row "$rows" admin-describe-cluster

umount_kpfs
