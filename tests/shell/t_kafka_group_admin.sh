# The group admin APIs through kafka-python's KafkaAdminClient and confluent-kafka's
# AdminClient (tests/shell/group_client.py) on a mount with a Kafka listener: ListGroups,
# DescribeGroups (members, client ids, hosts and assignments as the clients decode them),
# committed offsets listed, altered and deleted (OffsetCommit outside the group, OffsetDelete),
# DeleteGroups; each refused with Kafka's error while the group has members (NON_EMPTY_GROUP,
# UNKNOWN_MEMBER_ID, GROUP_SUBSCRIBED_TO_TOPIC) and done once it is empty; the mount's
# .kpfs/groups/ shows what the clients report.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/group_lib.sh"

mount_kpfs_listening "${GROUP_OVERRIDES[@]}"
kp_rows=$(matrix_file "$(client_name kafka-python "$PY")" t_kafka_group_admin)
cf_rows=$(matrix_file "$(client_name confluent-kafka "$PY")" t_kafka_group_admin)
for t in a0 a1; do
    mkdir "$MNT/$t"
    produce "$t" 0 9
done

# --- An active group of two kafka-python members (roundrobin over the member ids, which
# start with the client ids: m1 gets a0, m2 a1) and a group that only commits offsets.
start_member kp active m1 a0,a1
start_member kp active m2 a0,a1
wait_assigned 30 m1 a0
wait_assigned 30 m2 a1
wait_consumed 30 20 m1 m2
expect_eq OK "$(gc kp-commit idle a0=5 a1=7)" "kafka-python committing outside group management"
matrix_row "$kp_rows" consume-group

expect_eq $'active consumer Stable\nidle - Empty' "$(gc kp-list)" "kafka-python's list_groups"
expect_eq $'active STABLE\nidle EMPTY' "$(gc cf-list)" "confluent-kafka's list_consumer_groups"
expect_eq $'active Stable consumer roundrobin members=2\n  m1 /127.0.0.1 a0\n  m2 /127.0.0.1 a1' \
    "$(gc kp-describe active)" "kafka-python's describe_groups of active"
expect_eq $'active STABLE roundrobin members=2\n  m1 /127.0.0.1 a0\n  m2 /127.0.0.1 a1' \
    "$(gc cf-describe active)" "confluent-kafka's describe_consumer_groups of active"
# An unknown group: DescribeGroups v6 (kafka-python's) answers GROUP_ID_NOT_FOUND, earlier
# versions (librdkafka's v5) a Dead group without members, as Kafka 4.1 does.
expect_eq $'idle Empty - - members=0\nnobody error [Error 69] GroupIdNotFoundError: Group nobody not found.' \
    "$(gc kp-describe idle nobody)" "kafka-python's describe_groups of an empty and an unknown group"
expect_eq $'idle EMPTY - members=0\nnobody DEAD - members=0' "$(gc cf-describe idle nobody)" \
    "confluent-kafka's describe_consumer_groups of an empty and an unknown group"
for rows in "$kp_rows" "$cf_rows"; do
    matrix_row "$rows" admin-list-groups
    matrix_row "$rows" admin-describe-groups
done

expect_eq $"a0 5 'kp-commit'"$'\n'$"a1 7 'kp-commit'" "$(gc kp-committed idle)" "kafka-python's list_group_offsets of idle"
expect_eq $'a0 5\na1 7' "$(gc cf-offsets idle)" "confluent-kafka's list_consumer_group_offsets of idle"
wait_until 20 committed_are active $'a0 10 \'\'\na1 10 \'\'' ||
    fail "active's committed offsets: $(gc kp-committed active)"
expect_eq $'a0 10\na1 10' "$(gc cf-offsets active)" "confluent-kafka's list_consumer_group_offsets of active"
matrix_row "$kp_rows" commit-offsets
matrix_row "$kp_rows" admin-list-group-offsets
matrix_row "$cf_rows" admin-list-group-offsets

# The mount's view (kafka-consumer-groups.sh's tables in .kpfs/groups/GROUP/) agrees.
view=$MNT/.kpfs/groups
expect_eq $'active\nidle' "$(ls "$view")" "ls .kpfs/groups"
expect_eq "active roundrobin Stable 2 consumer" \
    "$(sed -n 2p "$view/active/state" | awk '{ print $1, $4, $5, $6, $8 }')" ".kpfs/groups/active/state"
expect_eq $'active m1 /127.0.0.1 1 a0(0)\nactive m2 /127.0.0.1 1 a1(0)' \
    "$(tail -n +2 "$view/active/members" | awk '{ print $1, $4, $3, $5, $6 }' | sort)" ".kpfs/groups/active/members"
expect_eq $'idle a0 0 5 10 5\nidle a1 0 7 10 3' \
    "$(tail -n +2 "$view/idle/offsets" | awk '{ print $1, $2, $3, $4, $5, $6 }' | sort)" ".kpfs/groups/idle/offsets"

# --- What an active group refuses.
expect_eq "active NonEmptyGroupError" "$(gc kp-delete active)" "kafka-python's delete_groups of active"
expect_eq "active NON_EMPTY_GROUP" "$(gc cf-delete active)" "confluent-kafka's delete_consumer_groups of active"
expect_eq "a0 UnknownMemberIdError" "$(gc kp-alter active a0=1)" "kafka-python's alter_group_offsets of active"
expect_eq "a0 UNKNOWN_MEMBER_ID" "$(gc cf-alter active a0=1)" "confluent-kafka's alter_consumer_group_offsets of active"
expect_eq "a0 GroupSubscribedToTopicError" "$(gc kp-delete-offsets active a0)" \
    "kafka-python's delete_group_offsets of a topic active consumes"
wait_until 20 committed_are active $'a0 10 \'\'\na1 10 \'\'' ||
    fail "active's committed offsets after the refusals: $(gc kp-committed active)"

# --- Once its members left, the group is Empty and every change is taken.
stop_member m1
stop_member m2
expect_eq $'active consumer Empty\nidle - Empty' "$(gc kp-list)" "kafka-python's list_groups once active is empty"
expect_eq "active Empty consumer - members=0" "$(gc kp-describe active)" "kafka-python's describe_groups of the empty active"
expect_eq "a0 NoError" "$(gc kp-alter active a0=3)" "kafka-python's alter_group_offsets of the empty active"
expect_eq "a1 4" "$(gc cf-alter active a1=4)" "confluent-kafka's alter_consumer_group_offsets of the empty active"
expect_eq $'a0 3\na1 4' "$(gc cf-offsets active)" "list_consumer_group_offsets after the alters"
expect_eq "a0 NoError" "$(gc kp-delete-offsets active a0)" "kafka-python's delete_group_offsets of the empty active"
expect_eq "a1 4 ''" "$(gc kp-committed active)" "active's committed offsets after OffsetDelete of a0"
expect_eq "GroupIdNotFoundError" "$(gc kp-delete-offsets nobody a0)" "delete_group_offsets of an unknown group"

expect_eq "idle OK" "$(gc cf-delete idle)" "confluent-kafka's delete_consumer_groups of idle"
expect_eq $'active OK\nnobody GroupIdNotFoundError' "$(gc kp-delete active nobody)" \
    "kafka-python's delete_groups of active and an unknown group"
expect_eq "" "$(gc kp-list)" "kafka-python's list_groups after the deletions"
expect_eq "" "$(ls "$view")" "ls .kpfs/groups after the deletions"
matrix_row "$kp_rows" admin-delete-groups
matrix_row "$cf_rows" admin-delete-groups
expect_eq "" "$(gc kp-committed active)" "active's committed offsets after DeleteGroups"
umount_kpfs
