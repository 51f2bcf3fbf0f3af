# kafka-python (tests/shell/kafka_python_client.py, in the venv) against a mount with a
# Kafka listener: it consumes what `echo >>` appended, also from an offset inside a batch;
# its producer with the default settings (idempotent, acks=all) lands in `cat log` with
# its producer id and sequences, which the producer-state snapshot keeps; a batch sent
# again (on the same connection, and after the connection dropped before the answer) is
# answered with its first offsets and stored once, a sequence gap is refused; a
# transactional producer (kafka-python's and confluent-kafka's) commits a transaction and
# aborts one, and a read_committed consumer of the same client, like `cat log`, sees the
# committed records alone. (Consumer groups have tests of their own: t_kafka_group_*.sh.)
source "$(dirname "$0")/lib.sh"

PY=$(kafka_python)
CLIENT=$KPFS_ROOT/tests/shell/kafka_python_client.py
mount_kpfs_listening
new_data_dir scratch
rows=$(matrix_file "$(client_name kafka-python "$PY")" t_kafka_python)
confluent_rows=$(matrix_file "$(client_name confluent-kafka "$PY")" t_kafka_python)

# client COMMAND ARGS...: the script against the listener, bounded in time.
client() {
    local command=$1
    shift
    timeout 60 "$PY" "$CLIENT" "$command" "$BOOTSTRAP" "$@"
}

# --- echo >> log, then a consumer without a group.
mkdir "$MNT/echoed"
echo "echo line 0" >>"$MNT/echoed/log"
printf 'batch line %s\n' 1 2 3 4 >"$scratch/four"
cat "$scratch/four" >>"$MNT/echoed/log" # one batch, offsets 1 to 4
expect_eq "$(printf "0 None b'echo line 0'\n"; for i in 1 2 3 4; do printf "%s None b'batch line %s'\n" "$i" "$i"; done; echo "position 5")" \
    "$(client consume echoed 0 5)" "kafka-python consuming the echoed lines"
matrix_row "$rows" consume-from-beginning
expect_eq "$(printf "3 None b'batch line 3'\n4 None b'batch line 4'\nposition 5")" \
    "$(client consume echoed 3 2)" "kafka-python consuming from offset 3, inside the batch 1..4"
matrix_row "$rows" consume-from-offset

# --- KafkaProducer's defaults: idempotent, acks=all. The topic is created by its Metadata.
produced=$(client produce from-python 20)
expect_eq "$(seq 0 19)" "$(head -n 20 <<<"$produced")" "offsets the producer was told"
producer_id=$(sed -n 's/^producer_id //p' <<<"$produced")
[[ $producer_id =~ ^[0-9]+$ ]] || fail "the producer has no producer id: $produced"
expect_eq "$(for i in $(seq 0 19); do echo "value-$i"; done)" "$(cat "$MNT/from-python/log")" "cat log of the producer's records"
matrix_row "$rows" produce-idempotent
# parse.key applies to the records appended after it: the producer's lines stay as they
# were, and their keys show in dump-log.
echo "parse.key=true" >"$MNT/from-python/config"
expect_eq "$(printf 'value-%s\n' 0 19)" "$(sed -n '1p;20p' "$MNT/from-python/log")" \
    "cat log after parse.key=true"
expect_contains "$("$KPFS" dump-log --print-data-log "$MNT/from-python/segments/00000000000000000000.log")" \
    "key: key-19 payload: value-19" "dump-log --print-data-log"
dump=$("$KPFS" dump-log "$MNT/from-python/segments/00000000000000000000.log")
batches=$(grep -c '^baseOffset:' <<<"$dump")
expect_eq "$batches" "$(grep -c "producerId: $producer_id producerEpoch: 0 " <<<"$dump")" \
    "batches carrying the producer id"
expect_contains "$dump" "baseOffset: 0 lastOffset: " "dump-log"
expect_contains "$dump" "baseSequence: 0 " "dump-log"
expect_contains "$dump" "lastSequence: 19 " "dump-log"

# --- A retried batch is stored once.
mkdir "$MNT/retried"
echo "before the producer" >>"$MNT/retried/log"
expect_eq $'first error=0 base_offset=1\nsame-connection-retry error=0 base_offset=1\nreconnected-retry error=0 base_offset=4\nnext error=0 base_offset=5\ngap error=45 base_offset=-1' \
    "$(client retry retried)" "answers to the retried batches (45: OUT_OF_ORDER_SEQUENCE_NUMBER)"
expect_eq "$(echo "before the producer"; for i in 0 1 2 3 4; do echo "retried-$i"; done)" \
    "$(cat "$MNT/retried/log")" "cat log after the retries"
expect_eq 6 "$(status_field retried log_end_offset)" "log end after the retries"

# --- Transactions: each client's transactional producer commits "committed-0..2" (offsets
# 0-2, its COMMIT marker at 3) and aborts "aborted-0..1" (4-5, the ABORT marker at 6); its
# read_committed consumer gets the committed three and ends at the log end, past the
# aborted records and the markers; `cat log` shows the same three lines.
CONFLUENT=$KPFS_ROOT/tests/shell/confluent_client.py
# kpfs.log so far: the retries above drop a connection with an answer unread, which the
# kernel may turn into a reset kpfs warns of; the transactions' lines are those after.
log_mark=$(wc -l <"$DATA/kpfs.log")
committed_view=$'initialized\ncommitted 0 1 2\naborted 4 5\n0 b\'committed-0\'\n1 b\'committed-1\'\n2 b\'committed-2\'\nposition 7'
expect_eq "$committed_view" "$(client transactional tx-python tx-python)" \
    "kafka-python's transactions and its read_committed consumer"
expect_eq "$committed_view" "$(timeout 60 "$PY" "$CONFLUENT" transactional "$BOOTSTRAP" tx-confluent tx-confluent)" \
    "confluent-kafka's transactions and its read_committed consumer"
for topic in tx-python tx-confluent; do
    expect_eq "$(printf 'committed-%s\n' 0 1 2)" "$(cat "$MNT/$topic/log")" "cat log of $topic"
    expect_eq 7 "$(status_field "$topic" log_end_offset)" "log end of $topic (five records, two markers)"
done
! tail -n +"$((log_mark + 1))" "$DATA/kpfs.log" | grep -E ' (WARN|ERROR) ' ||
    fail "kpfs.log has warnings or errors about the transactional clients (above)"
matrix_row "$rows" transactions pass "init_transactions, commit and abort; a read_committed consumer sees the committed records"
matrix_row "$confluent_rows" transactions pass "init_transactions, commit and abort; a read_committed consumer sees the committed records"

# --- The producers' state outlives the mount: the snapshot written at the clean close
# has the idempotent producers.
umount_kpfs
snapshots=("$DATA/from-python-0/"*.snapshot)
[ -e "${snapshots[0]}" ] || fail "no producer snapshot in $DATA/from-python-0: $(ls "$DATA/from-python-0")"
expect_contains "$("$KPFS" dump-log "${snapshots[-1]}")" "producerId: $producer_id producerEpoch: 0" "the producer snapshot"
