# `kpfs mount` opens a Kafka listener only when `listeners` is set: a plain mount listens
# on no port; with `--override listeners=PLAINTEXT://127.0.0.1:PORT` the port is open
# while mounted and closed after umount. The listener lists show in .kpfs/config and
# cannot change there (Kafka changes them only per broker); a port already taken fails
# the mount with nothing mounted.
source "$(dirname "$0")/lib.sh"

# daemon_ports: the TCP ports the mount's daemon listens on (none: empty).
daemon_ports() {
    local pid
    pid=$(_kpfs_daemon_pid "$DATA") || fail "no daemon for $DATA"
    ss -ltnpH | awk -v p="pid=$pid," 'index($0, p) { print $4 }'
}

mount_kpfs
expect_eq "" "$(daemon_ports)" "ports a plain mount listens on"
expect_contains "$(cat "$MNT/.kpfs/config")" "# listeners is unset (read-only)" ".kpfs/config"
[ -e "$DATA/meta.properties" ] || fail "no meta.properties after a mount"
cluster_id=$(sed -n 's/^cluster.id=//p' "$DATA/meta.properties")
umount_kpfs

for attempt in 1 2 3 4 5; do
    random_port PORT
    status=0
    err=$("$KPFS" mount "$MNT" --data-dir "$DATA" \
        --override "listeners=PLAINTEXT://127.0.0.1:$PORT" 2>&1) || status=$?
    [ "$status" -eq 0 ] && break
    expect_contains "$err" "Address already in use" "kpfs mount with a listener"
done
expect_eq 0 "$status" "exit status of kpfs mount with a listener"
mountpoint -q "$MNT" || fail "$MNT is not mounted"
# Listening when `kpfs mount` returns: the daemon reports ready after the listener started.
expect_eq "127.0.0.1:$PORT" "$(daemon_ports)" "ports the mount listens on"
exec 3<>"/dev/tcp/127.0.0.1/$PORT" || fail "cannot connect to 127.0.0.1:$PORT"
exec 3>&-
config=$(cat "$MNT/.kpfs/config")
expect_contains "$config" "# listeners=PLAINTEXT://127.0.0.1:$PORT (STATIC_BROKER_CONFIG, read-only)" ".kpfs/config"
expect_contains "$config" "# max.connections=2147483647 (DEFAULT_CONFIG)" ".kpfs/config"
expect_contains "$config" "# node.id=1 (DEFAULT_CONFIG, read-only)" ".kpfs/config"
expect_eq "$cluster_id" "$(sed -n 's/^cluster.id=//p' "$DATA/meta.properties")" "cluster.id after a remount"

# The listener lists are per-broker configs: not at the cluster level .kpfs/config is.
expect_errno "Invalid argument" "echo listeners=PLAINTEXT://127.0.0.1:1 >> '$MNT/.kpfs/config'"
expect_contains "$(cat "$MNT/.kpfs/errors")" \
    "Cannot update these configs at default cluster level, broker id must be specified: [listeners]" ".kpfs/errors"
expect_errno "Invalid argument" "echo num.partitions=1 >> '$MNT/.kpfs/config'"
expect_contains "$(cat "$MNT/.kpfs/errors")" \
    "Cannot update these configs dynamically: [num.partitions]" ".kpfs/errors"
# max.connections is dynamic, as in Kafka.
echo max.connections=100 >> "$MNT/.kpfs/config"
expect_contains "$(cat "$MNT/.kpfs/config")" $'# overrides\nmax.connections=100\n' ".kpfs/config"

# A second mount asking for the same port fails whole: nothing mounted, its data
# directory released.
new_data_dir data2
new_mountpoint mnt2
status=0
err=$("$KPFS" mount "$mnt2" --data-dir "$data2" \
    --override "listeners=PLAINTEXT://127.0.0.1:$PORT" 2>&1) || status=$?
expect_eq 2 "$status" "exit status of a mount on a taken port"
expect_contains "$err" "cannot listen on 127.0.0.1:$PORT: Address already in use" "mount on a taken port"
! mountpoint -q "$mnt2" || fail "$mnt2 got mounted without its listener"
wait_until 10 flock -n "$data2/kpfs.lock" true || fail "$data2 is still locked"

umount_kpfs
! is_listening "$PORT" || fail "port $PORT still listening after umount"
[ -e "$DATA/.kpfs_cleanshutdown" ] || fail "no clean-shutdown marker after umount"
