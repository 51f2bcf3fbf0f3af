# kcat (Debian's, librdkafka 2.0.2) and the shell on the same topics through a mount with
# a Kafka listener: what kcat produces is in `cat log` and `tail -f log` (with acks 0, 1
# and all; keys, null keys and values, headers and binary values rendered as
# docs/SEMANTICS.md says; a keyless record to a compacted topic refused), what `echo >>`
# appends kcat consumes, also from an offset inside a batch and while it waits at the end
# of the log; a topic kcat produces to is created and appears in the mount, and one made
# with mkdir is in kcat's metadata.
source "$(dirname "$0")/lib.sh"

command -v kcat >/dev/null || fail "no kcat (Debian's package kcat; .ci/run installs it)"
mount_kpfs_listening
new_data_dir scratch
rows=$(matrix_file "$(client_name kcat)" t_kafka_kcat)

# kc ARGS...: kcat against the mount's listener, bounded in time, quiet about its progress.
kc() { timeout 30 kcat -b "$BOOTSTRAP" -q "$@"; }
log_has_lines() { [ "$(wc -l <"$MNT/$1/log")" -eq "$2" ]; }

# --- kcat produce, then cat: a topic made by the first produce (Metadata's auto-creation).
printf 'first\nsecond with spaces\nthird\n' | kc -P -t made-by-kcat
[ -d "$MNT/made-by-kcat" ] || fail "kcat's topic is not a folder of the mount: $(ls "$MNT")"
expect_eq $'first\nsecond with spaces\nthird' "$(cat "$MNT/made-by-kcat/log")" "cat log after kcat -P"
expect_eq 3 "$(status_field made-by-kcat log_end_offset)" "log end after kcat -P"

# tail -f follows what kcat produces.
tail -n +1 -f "$MNT/made-by-kcat/log" >"$scratch/followed" &
follower=$!
printf 'fourth\nfifth\n' | kc -P -t made-by-kcat
followed_all() { [ "$(cat "$scratch/followed")" == $'first\nsecond with spaces\nthird\nfourth\nfifth' ]; }
wait_until 10 followed_all || fail "tail -f of kcat's topic: $(cat "$scratch/followed")"
kill "$follower"
wait "$follower" 2>/dev/null || true

# --- acks 0, 1 and all: each set of records is there once. With acks=0 kcat has no answer
# to wait for, so the records are polled for.
mkdir "$MNT/acks"
for acks in 0 1 all; do
    printf 'acks=%s record %s\n' "$acks" 1 "$acks" 2 | kc -P -t acks -X "acks=$acks"
done
wait_until 10 log_has_lines acks 6 || fail "acks topic: $(cat "$MNT/acks/log")"
expect_eq $'acks=0 record 1\nacks=0 record 2\nacks=1 record 1\nacks=1 record 2\nacks=all record 1\nacks=all record 2' \
    "$(cat "$MNT/acks/log")" "records produced with acks 0, 1 and all"

# --- Keys, null keys and values, headers, binary values. The topic renders keys with ':'
# and nulls as NULL; kcat's -Z sends an empty key or value as null.
mkdir "$MNT/kinds"
printf 'parse.key=true\nkey.separator=:\nnull.marker=NULL\n' >"$MNT/kinds/config"
printf 'k1|v1\nk2|\n|keyless value\nk4|with:separator\n' |
    kc -P -t kinds -K '|' -Z -H trace=abc -H origin=kcat
# A value of every byte value, newlines included, as one record: kcat sends a file as one
# message. cat prints its bytes as they are (and its key and separator before them).
for i in $(seq 0 255); do printf "\\$(printf %03o "$i")"; done >"$scratch/binary"
kc -P -t kinds -k binkey "$scratch/binary"
# An empty key (without -Z) and a value of two lines, delimited by a byte it lacks.
printf '|two\nlines\x1e' | kc -P -t kinds -K '|' -D '\x1e'
{
    printf 'k1:v1\nk2:NULL\nNULL:keyless value\nk4:with:separator\nbinkey:'
    cat "$scratch/binary"
    printf '\n:two\nlines\n'
} >"$scratch/expected"
cat "$MNT/kinds/log" >"$scratch/got"
cmp "$scratch/expected" "$scratch/got" || fail "cat log of kinds: $(od -c "$scratch/got" | head -20)"
# The headers are stored (dump-log lists their keys) but cat shows none.
dump=$("$KPFS" dump-log "$MNT/kinds/segments/00000000000000000000.log" --deep-iteration)
expect_contains "$dump" "offset: 0 CreateTime:" "dump-log of kinds"
expect_eq 4 "$(grep -c 'headerKeys: \[trace,origin\]' <<<"$dump")" "records with both headers in dump-log"
expect_contains "$dump" "keySize: 2 valueSize: -1" "dump-log of the null value"
expect_contains "$dump" "keySize: -1 valueSize: 13" "dump-log of the null key"
expect_contains "$dump" "keySize: 6 valueSize: 256" "dump-log of the binary value"
expect_contains "$dump" "keySize: 0 valueSize: 9" "dump-log of the empty key"
# And kcat reads the same records back: nulls as null, headers as sent, binary intact.
expect_eq $'0 k1 v1 trace=abc,origin=kcat\n1 k2 NULL trace=abc,origin=kcat\n2 NULL keyless value trace=abc,origin=kcat\n3 k4 with:separator trace=abc,origin=kcat' \
    "$(kc -C -t kinds -o beginning -c 4 -Z -f '%o %k %s %h\n')" "kcat -C of kinds"
kc -C -t kinds -o 4 -c 1 -f '%s' >"$scratch/binary-back"
cmp "$scratch/binary" "$scratch/binary-back" || fail "kcat read back another binary value"
matrix_row "$rows" produce

# A keyless record on a compacted topic is refused (INVALID_RECORD, which librdkafka
# words as below) and appends nothing; a keyed one is taken.
mkdir "$MNT/compacted"
echo "cleanup.policy=compact" >"$MNT/compacted/config"
status=0
err=$(echo "no key" | timeout 30 kcat -b "$BOOTSTRAP" -P -t compacted 2>&1) || status=$?
expect_eq 1 "$status" "exit status of kcat -P of a keyless record to a compacted topic"
expect_contains "$err" "Delivery failed for message: Broker: Broker failed to validate record" "kcat's stderr"
echo "k:v" | kc -P -t compacted -K :
expect_eq v "$(cat "$MNT/compacted/log")" "cat log of the compacted topic"

# --- echo >> log, then kcat's simple consumer (-C -t: no group).
mkdir "$MNT/echoed"
for i in 0 1 2; do echo "echo line $i" >>"$MNT/echoed/log"; done
# One write(2) of five lines: one batch, offsets 3 to 7.
printf 'batch line %s\n' 3 4 5 6 7 >"$scratch/five"
cat "$scratch/five" >>"$MNT/echoed/log"
expect_eq "$(for i in 0 1 2; do echo "$i echo line $i"; done; for i in 3 4 5 6 7; do echo "$i batch line $i"; done)" \
    "$(kc -C -t echoed -o beginning -e -f '%o %s\n')" "kcat -C of the echoed lines"
matrix_row "$rows" consume-from-beginning
# From offset 5, inside the batch 3..7: Fetch returns the whole batch, kcat skips 3 and 4.
expect_eq $'5 batch line 5\n6 batch line 6\n7 batch line 7' \
    "$(kc -C -t echoed -o 5 -e -f '%o %s\n')" "kcat -C -o 5 (inside a batch)"
matrix_row "$rows" consume-from-offset
# A consumer waiting at the end of the log gets what echo appends at once (long poll).
kc -C -t echoed -o 8 -c 1 -f '%o %s\n' >"$scratch/waiting" &
waiting=$!
# kcat has asked for offset 8 once the listener holds a Fetch for it; there is no sign
# of that outside, so the test appends after kcat has its metadata: either way the record
# must arrive, and long before the 30 s bound.
echo "appended while kcat waits" >>"$MNT/echoed/log"
wait "$waiting" || fail "kcat waiting at offset 8 failed or timed out"
expect_eq "8 appended while kcat waits" "$(cat "$scratch/waiting")" "what the waiting kcat got"

# --- A topic made with mkdir is in kcat's metadata, with one partition led by node 1.
mkdir "$MNT/made-by-mkdir"
meta=$(kc -L -t made-by-mkdir)
expect_contains "$meta" 'topic "made-by-mkdir" with 1 partitions:' "kcat -L"
expect_contains "$meta" "partition 0, leader 1, replicas: 1, isrs: 1" "kcat -L"
all=$(kc -L)
for t in acks compacted echoed kinds made-by-kcat made-by-mkdir; do
    expect_contains "$all" "topic \"$t\" with 1 partitions" "kcat -L of every topic"
done

umount_kpfs
