# kafka-python's admin client against a mount with a Kafka listener: CreateTopics makes the
# folder (with its configs) and the partitions asked (three, as describe_topics shows),
# refuses zero partitions and invalid configs in Kafka's words and leaves no folder; DescribeConfigs shows what the mount's `config` and
# `.kpfs/config` files say and IncrementalAlterConfigs changes what they show, with the
# same validators and texts either way; DeleteTopics removes the folder at once (also
# from the kernel's cache) and cuts off descriptors opened before, and a topic removed
# with rmdir leaves the clients' metadata.
source "$(dirname "$0")/lib.sh"

PY=$(kafka_python)
CLIENT=$KPFS_ROOT/tests/shell/kafka_python_client.py
mount_kpfs_listening
rows=$(matrix_file "$(client_name kafka-python "$PY")" t_kafka_admin)

client() {
    local command=$1
    shift
    timeout 60 "$PY" "$CLIENT" "$command" "$BOOTSTRAP" "$@"
}
# the_overrides FILE: the override lines of a config file.
the_overrides() { sed -n '/^# overrides/,/^# defaults/p' "$1" | grep -v '^#' || true; }

# --- CreateTopics.
expect_eq OK "$(client create orders 1 retention.ms=3600000 cleanup.policy=compact,delete)" "create orders"
[ -d "$MNT/orders" ] || fail "no orders folder after CreateTopics: $(ls "$MNT")"
expect_eq $'cleanup.policy=compact,delete\nretention.ms=3600000' "$(the_overrides "$MNT/orders/config" | sort)" \
    "orders/config after CreateTopics"
expect_eq OK "$(client create three 3)" "create with 3 partitions"
[ -d "$MNT/three" ] || fail "no three folder after CreateTopics: $(ls "$MNT")"
expect_eq "$(for p in 0 1 2; do echo "three $p leader=1 epoch=0 replicas=[1] isr=[1] offline=[] NoError"; done)" \
    "$(timeout 60 "$PY" "$KPFS_ROOT/tests/shell/partitions_client.py" kp-describe "$BOOTSTRAP" three)" \
    "three's partitions, described"
refused=$(client create none 0)
expect_contains "$refused" "InvalidPartitionsError" "create with 0 partitions"
expect_contains "$refused" "Number of partitions was set to an invalid non-positive value." "create with 0 partitions"
refused=$(client create badconfig 1 segment.bytes=400)
expect_contains "$refused" "InvalidConfigurationError" "create with segment.bytes=400"
expect_contains "$refused" "Invalid value 400 for configuration segment.bytes: Value must be at least 1048576" \
    "create with segment.bytes=400"
expect_contains "$(client create orders 1)" "TopicAlreadyExistsError" "create of an existing topic"
[ ! -e "$MNT/none" ] && [ ! -e "$MNT/badconfig" ] || fail "a refused topic left a folder: $(ls "$MNT")"
matrix_row "$rows" admin-create-topics

# --- Describe and alter, both ways.
expect_eq $'retention.ms=3600000 (DYNAMIC_TOPIC_CONFIG)\nsegment.bytes=1073741824 (DEFAULT_CONFIG)' \
    "$(client describe topic orders retention.ms segment.bytes)" "describe orders"
# An invalid value is refused in Kafka's words, and nothing of the change applies.
expect_eq "[Error 40] InvalidConfigurationError: Invalid value 400 for configuration segment.bytes: Value must be at least 1048576" \
    "$(client alter topic orders segment.bytes=400 retention.ms=1000)" "alter with an invalid value"
expect_eq "retention.ms=3600000 (DYNAMIC_TOPIC_CONFIG)" "$(client describe topic orders retention.ms)" \
    "retention.ms after the refused change"
# The same value written to the config file is refused with the same text.
expect_errno "Invalid argument" "echo segment.bytes=400 >> '$MNT/orders/config'"
expect_contains "$(cat "$MNT/.kpfs/errors")" \
    "orders/config: Invalid value 400 for configuration segment.bytes: Value must be at least 1048576" ".kpfs/errors"
# A change through the wire shows in the file...
expect_eq OK "$(client alter topic orders segment.bytes=2097152)" "alter segment.bytes"
expect_eq $'cleanup.policy=compact,delete\nretention.ms=3600000\nsegment.bytes=2097152' \
    "$(the_overrides "$MNT/orders/config" | sort)" "orders/config after the wire's change"
# ... and one through the file shows in DescribeConfigs.
echo "max.message.bytes=2000" >>"$MNT/orders/config"
expect_eq $'max.message.bytes=2000 (DYNAMIC_TOPIC_CONFIG)\nsegment.bytes=2097152 (DYNAMIC_TOPIC_CONFIG)' \
    "$(client describe topic orders max.message.bytes segment.bytes)" "describe orders after the file's change"
# The broker, the same way through .kpfs/config: a topic without an override inherits.
echo "log.retention.ms=7200000" >>"$MNT/.kpfs/config"
expect_eq "log.retention.ms=7200000 (DYNAMIC_DEFAULT_BROKER_CONFIG)" \
    "$(client describe broker 1 log.retention.ms)" "describe the broker after .kpfs/config's change"
mkdir "$MNT/inherits"
expect_eq "retention.ms=7200000 (DYNAMIC_DEFAULT_BROKER_CONFIG)" \
    "$(client describe topic inherits retention.ms)" "describe a topic inheriting the broker's value"
matrix_row "$rows" admin-describe-configs
expect_eq OK "$(client alter broker 1 log.cleaner.backoff.ms=20000)" "alter the broker"
expect_contains "$(cat "$MNT/.kpfs/config")" $'\nlog.cleaner.backoff.ms=20000\n' ".kpfs/config after the wire's change"
expect_contains "$(client alter broker 1 log.retention.check.interval.ms=1000)" \
    "Cannot update these configs dynamically: [log.retention.check.interval.ms]" "alter of a static broker config"
matrix_row "$rows" admin-incremental-alter-configs

# --- DeleteTopics and rmdir.
# The folder is gone as soon as DeleteTopics is answered, though the kernel had its entry
# cached a moment before (the mount drops it); a `log` descriptor opened before reads
# nothing more, and a new topic of the name gets none of its records.
exec 3<"$MNT/orders/log"
expect_eq $'OK\ngone' "$(client delete orders "$MNT/orders")" "delete orders"
expect_errno "No such file or directory" "cat <&3"
mkdir "$MNT/orders"
echo "new" >>"$MNT/orders/log"
expect_errno "No such file or directory" "cat <&3"
exec 3<&-
expect_eq "new" "$(cat "$MNT/orders/log")" "orders/log of the new topic"
rmdir "$MNT/orders"
rmdir "$MNT/inherits"
# A topic of three partitions goes whole.
expect_eq $'OK\ngone' "$(client delete three "$MNT/three")" "delete three"
expect_eq "" "$(client list)" "topics after DeleteTopics and rmdir"
matrix_row "$rows" admin-delete-topics

umount_kpfs
