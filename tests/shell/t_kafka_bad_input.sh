# Bad bytes on the mount's Kafka listener end only their own connection, each with a
# line in kpfs.log saying why, and the mount is unaffected: the daemon still serves
# `echo >>` and `cat`, and nothing else was appended.
source "$(dirname "$0")/lib.sh"

new_data_dir DATA
new_mountpoint MNT
for attempt in 1 2 3 4 5; do
    random_port PORT
    status=0
    err=$("$KPFS" mount "$MNT" --data-dir "$DATA" \
        --override "listeners=PLAINTEXT://127.0.0.1:$PORT" 2>&1) || status=$?
    [ "$status" -eq 0 ] && break
    expect_contains "$err" "Address already in use" "kpfs mount with a listener"
done
expect_eq 0 "$status" "exit status of kpfs mount with a listener"
wait_until 10 mountpoint -q "$MNT" || fail "$MNT is not a mount point after 10 s"
mkdir "$MNT/t"
echo before >>"$MNT/t/log"

# send_and_wait_close WHAT BYTES: sends BYTES (printf format) on a new connection and
# waits for the listener to close it. Bash's printf writes once per line, and a 0x0a byte
# is a line end: the listener may close the connection after the first write, so a later
# write may fail with EPIPE. That failure is the expected outcome, not the test's, so it
# runs where SIGPIPE is ignored and its error is dropped.
send_and_wait_close() {
    exec 3<>"/dev/tcp/127.0.0.1/$PORT" || fail "cannot connect to 127.0.0.1:$PORT"
    (
        trap '' PIPE
        printf "$2" >&3
    ) 2>/dev/null || true
    local status=0
    timeout 10 cat <&3 >/dev/null 2>&1 || status=$?
    exec 3>&-
    [ "$status" -ne 124 ] || fail "$1: the connection is still open after 10 s"
}

send_and_wait_close "an HTTP request" 'GET / HTTP/1.1\r\nHost: x\r\n\r\n'
# A whole request header of API key 999, version 0, correlation id 7, no client id.
send_and_wait_close "an unknown API key" '\x00\x00\x00\x0a\x03\xe7\x00\x00\x00\x00\x00\x07\xff\xff'
# Metadata (key 3) at version 99.
send_and_wait_close "an unsupported version" '\x00\x00\x00\x0a\x00\x03\x00\x63\x00\x00\x00\x07\xff\xff'
# A size under a request header's first fields.
send_and_wait_close "a 4-byte request" '\x00\x00\x00\x04\x00\x00\x00\x00'

for reason in "Invalid receive (size = 1195725856 larger than 104857600)" \
    "unknown API key 999 (version 0)" "Metadata version 99 is not supported" \
    "Invalid receive (size = 4): too small for a request header"; do
    grep "closing Kafka connection" "$DATA/kpfs.log" | grep -qF "$reason" ||
        fail "no 'closing Kafka connection' line in kpfs.log saying '$reason'"
done

# The mount is unaffected, and none of it was appended.
echo after >>"$MNT/t/log"
expect_eq $'before\nafter' "$(cat "$MNT/t/log")" "t/log"
expect_eq 2 "$(status_field t log_end_offset)" "t's log_end_offset"
is_listening "$PORT" || fail "the listener stopped"
umount_kpfs
