# `kpfs serve`: the engine and the Kafka listener without a mount. It listens on the
# configured address only while it runs, holds the data directory's lock like a mount,
# writes meta.properties once (the cluster id kept across restarts), and stops cleanly
# on SIGTERM or SIGINT: port released, lock released, clean-shutdown marker written.
source "$(dirname "$0")/lib.sh"

new_data_dir DATA
log=$DATA.serve.log
KPFS_DATA_DIRS+=("$log")

# Start on a free port, another one if it is taken before kpfs binds it.
for attempt in 1 2 3 4 5; do
    random_port PORT
    serve_kpfs "$log" --data-dir "$DATA" --override "listeners=PLAINTEXT://127.0.0.1:$PORT"
    wait_until 10 is_listening "$PORT" && break
    wait "$SERVE_PID" || true
    expect_contains "$(cat "$log")" "Address already in use" "kpfs serve's stderr"
done
expect_eq "127.0.0.1:$PORT" "$(listening_on "$PORT")" "the address kpfs serve listens on"
expect_contains "$(cat "$log")" "serving $DATA to Kafka clients" "kpfs serve's stderr"
# Nothing was mounted: no FUSE mount names this data directory.
! grep -q " $DATA " /proc/self/mountinfo || fail "kpfs serve mounted something"
exec 3<>"/dev/tcp/127.0.0.1/$PORT" || fail "cannot connect to 127.0.0.1:$PORT"
exec 3>&-

# meta.properties as Kafka's KRaft broker writes it.
meta=$(cat "$DATA/meta.properties")
expect_eq "#" "$(head -n1 <<<"$meta")" "meta.properties' first line"
[[ $(sed -n 2p <<<"$meta") =~ ^#[A-Z][a-z]{2}\ [A-Z][a-z]{2}\ [0-9]{2}\ [0-9:]{8}\ UTC\ [0-9]{4}$ ]] ||
    fail "meta.properties' second line is not a date: $(sed -n 2p <<<"$meta")"
cluster_id=$(sed -n 's/^cluster.id=//p' <<<"$meta")
[[ $cluster_id =~ ^[A-Za-z0-9_-]{22}$ ]] || fail "cluster.id '$cluster_id' is not a Kafka Uuid"
expect_contains "$meta" $'node.id=1\nversion=1' "meta.properties"

# A second kpfs on the same data directory is refused and binds nothing.
random_port other_port
status=0
err=$(timeout 20 "$KPFS" serve --data-dir "$DATA" \
    --override "listeners=PLAINTEXT://127.0.0.1:$other_port" 2>&1) || status=$?
expect_eq 2 "$status" "exit status of a second serve of $DATA"
expect_contains "$err" "data directory $DATA is in use by another kpfs process" "second serve"
! is_listening "$other_port" || fail "the refused serve listens on $other_port"
new_mountpoint mnt
status=0
err=$("$KPFS" mount "$mnt" --data-dir "$DATA" 2>&1) || status=$?
expect_eq 2 "$status" "exit status of a mount of a served data directory"
expect_contains "$err" "in use by another kpfs process" "mount of a served data directory"

# SIGTERM: a clean stop.
kill -TERM "$SERVE_PID"
status=0
wait "$SERVE_PID" || status=$?
expect_eq 0 "$status" "kpfs serve's exit status after SIGTERM"
! is_listening "$PORT" || fail "port $PORT still listening after kpfs serve stopped"
expect_contains "$(cat "$log")" "clean shutdown" "kpfs serve's stderr"
[ -e "$DATA/.kpfs_cleanshutdown" ] || fail "no clean-shutdown marker after SIGTERM"
flock -n "$DATA/kpfs.lock" true || fail "the data directory's lock is still held"

# Restarted: the same cluster id; SIGINT (Ctrl-C) stops it cleanly too. An empty host
# listens on every interface, which kpfs warns about: PLAINTEXT has no authentication.
for attempt in 1 2 3 4 5; do
    random_port PORT
    serve_kpfs "$log" --data-dir "$DATA" --override "listeners=PLAINTEXT://:$PORT"
    wait_until 10 is_listening "$PORT" && break
    wait "$SERVE_PID" || true
done
expect_eq "0.0.0.0:$PORT" "$(listening_on "$PORT")" "the address of an empty listener host"
expect_contains "$(cat "$log")" "accepts PLAINTEXT connections from other machines" "warning"
expect_eq "$cluster_id" "$(sed -n 's/^cluster.id=//p' "$DATA/meta.properties")" "cluster.id after a restart"
kill -INT "$SERVE_PID"
status=0
wait "$SERVE_PID" || status=$?
expect_eq 0 "$status" "kpfs serve's exit status after SIGINT"
! is_listening "$PORT" || fail "port $PORT still listening after SIGINT"
[ -e "$DATA/.kpfs_cleanshutdown" ] || fail "no clean-shutdown marker after SIGINT"

# Refusals before anything listens, in Kafka's words (or kpfs's, for what it does not serve).
refused() {
    local status=0 err
    err=$(timeout 20 "$KPFS" serve --data-dir "$DATA" "$@" 2>&1) || status=$?
    expect_eq 2 "$status" "exit status of kpfs serve $*"
    printf '%s' "$err"
}
expect_contains "$(refused --override node.id=2)" \
    "Stored node id 1 doesn't match previous node id 2 in $DATA/meta.properties" "node.id=2"
expect_contains "$(refused --override "listeners=SSL://127.0.0.1:$PORT")" \
    "kpfs serves PLAINTEXT listeners only, not SSL: TLS and SASL authentication are out of scope for now" "SSL"
expect_contains "$(refused --override listeners=localhost:9092)" \
    "Error creating broker listeners from 'localhost:9092': Unable to parse localhost:9092 to a broker endpoint" "no protocol"
expect_contains "$(refused --override num.partitions=10001)" \
    "num.partitions must be at most 10000: a kpfs topic has at most 10000 partitions" "num.partitions=10001"
! is_listening "$PORT" || fail "a refused serve listens on $PORT"
expect_eq "$cluster_id" "$(sed -n 's/^cluster.id=//p' "$DATA/meta.properties")" "cluster.id after refusals"

# Without `listeners`, kpfs serve listens on Kafka's port on the loopback interface only.
# Another program may hold 9092 on this machine: then only that is checked.
status=0
serve_kpfs "$log" --data-dir "$DATA"
if wait_until 10 grep -q "serving $DATA" "$log"; then
    expect_contains "$(listening_on 9092)" "127.0.0.1:9092" "kpfs serve's default listener"
    kill -TERM "$SERVE_PID"
    wait "$SERVE_PID" || status=$?
    expect_eq 0 "$status" "exit status after SIGTERM"
else
    wait "$SERVE_PID" || status=$?
    expect_eq 2 "$status" "exit status of kpfs serve with 9092 taken"
    expect_contains "$(cat "$log")" "cannot listen on 127.0.0.1:9092: Address already in use" "stderr"
fi
