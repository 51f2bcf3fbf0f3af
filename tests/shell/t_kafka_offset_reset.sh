# Retention removes offsets a consumer asks for: Fetch answers OFFSET_OUT_OF_RANGE, and the
# client's auto.offset.reset decides (kcat and kafka-python): earliest resumes at the new
# log start, latest at the log end, none reports the error. Size retention
# (retention.bytes=1) removes every segment but the active one, so the log start settles
# at the active segment's base offset.
source "$(dirname "$0")/lib.sh"

PY=$(kafka_python)
CLIENT=$KPFS_ROOT/tests/shell/kafka_python_client.py
mount_kpfs_listening --override log.retention.check.interval.ms=200
new_data_dir scratch

T=$MNT/expiring
mkdir "$T"
# Segments of at most 150 bytes (the test-only config without Kafka's 1 MiB floor): a
# batch of five lines is about 120, so each write below starts a new segment.
echo "internal.segment.bytes=150" >"$T/config"
for first in 0 5 10; do
    seq "$first" $((first + 4)) | sed 's/^/record-/' >"$scratch/five"
    cat "$scratch/five" >>"$T/log" # one write(2): one batch
done
expect_eq $'00000000000000000000.log\n00000000000000000005.log\n00000000000000000010.log' \
    "$(ls "$T/segments" | grep '\.log$')" "segments before retention"
# Offset 2 is there: a consumer positioned on it reads it.
expect_eq "$(printf "2 None b'record-2'\nposition 3")" \
    "$(timeout 60 "$PY" "$CLIENT" consume "$BOOTSTRAP" expiring 2 1)" "kafka-python at offset 2 before retention"

echo "retention.bytes=1" >>"$T/config"
log_start_is() { [ "$(status_field expiring log_start_offset)" == "$1" ]; }
wait_until 20 log_start_is 10 || fail "size retention left log start $(status_field expiring log_start_offset)"

# kc_from OFFSET RESET: what kcat's simple consumer prints from OFFSET to the end.
kc_from() {
    timeout 30 kcat -b "$BOOTSTRAP" -q -C -t expiring -o "$1" -e -X "auto.offset.reset=$2" -f '%o %s\n'
}
expect_eq $'10 record-10\n11 record-11\n12 record-12\n13 record-13\n14 record-14' \
    "$(kc_from 2 earliest)" "kcat from the removed offset 2, auto.offset.reset=earliest"
expect_eq "" "$(kc_from 2 latest)" "kcat from the removed offset 2, auto.offset.reset=latest"

expect_eq "$(printf "10 None b'record-10'\nposition 11")" \
    "$(timeout 60 "$PY" "$CLIENT" consume "$BOOTSTRAP" expiring 2 1 earliest)" \
    "kafka-python from the removed offset 2, auto_offset_reset=earliest"
status=0
err=$(timeout 60 "$PY" "$CLIENT" consume "$BOOTSTRAP" expiring 2 1 none 2>&1) || status=$?
expect_eq 1 "$status" "exit status of kafka-python from offset 2 with auto_offset_reset=none"
expect_contains "$err" "OffsetOutOfRangeError" "kafka-python from offset 2 with auto_offset_reset=none"
# latest: the consumer is placed at the log end, so only what is appended after that
# arrives. It waits for one record; the test appends once the consumer's position exists,
# which the listener cannot show, so it appends until the consumer has one.
timeout 60 "$PY" "$CLIENT" consume "$BOOTSTRAP" expiring 2 1 latest >"$scratch/latest" &
latest=$!
appended=15
while kill -0 "$latest" 2>/dev/null && [ "$appended" -lt 200 ]; do
    echo "record-$appended" >>"$T/log"
    appended=$((appended + 1))
    sleep 0.1 # pacing the appends, not waiting for luck: the result holds for any timing
done
wait "$latest" || fail "kafka-python with auto_offset_reset=latest got nothing: $(cat "$scratch/latest")"
got=$(head -n1 "$scratch/latest")
[[ $got =~ ^([0-9]+)\ None\ b\'record-([0-9]+)\'$ ]] || fail "kafka-python with latest got '$got'"
[ "${BASH_REMATCH[1]}" == "${BASH_REMATCH[2]}" ] && [ "${BASH_REMATCH[1]}" -ge 15 ] ||
    fail "kafka-python with latest got '$got': not one appended after the reset"

umount_kpfs
