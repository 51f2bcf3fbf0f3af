# librdkafka's consumer groups (tests/shell/group_client.py's confluent-kafka member, and
# Debian's kcat -G on librdkafka 2.0.2) on a mount with a Kafka listener: a confluent-kafka
# member and a kcat balanced consumer in one group share four topics and consume every
# record once; kcat stops (leaving the group, committing what it consumed) and the other
# takes its topics over from there. Two confluent-kafka members with the
# cooperative-sticky assignor split the topics too (the assignment is the client's). The
# errors: OffsetFetch of a group nobody knows answers "nothing committed" (None, -1 or
# librdkafka's -1001 as each client spells it) and creates no group; a session timeout
# above group.max.session.timeout.ms is refused with INVALID_SESSION_TIMEOUT, as each
# client reports it.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/group_lib.sh"

command -v kcat >/dev/null || fail "no kcat (Debian's package kcat; .ci/run installs it)"
mount_kpfs_listening "${GROUP_OVERRIDES[@]}"
topics=(k0 k1 k2 k3)
for t in "${topics[@]}"; do mkdir "$MNT/$t"; done
confluent_rows=$(matrix_file "$(client_name confluent-kafka "$PY")" t_kafka_group_clients)
kcat_rows=$(matrix_file "$(client_name kcat)" t_kafka_group_clients)

# --- confluent-kafka and kcat -G in one group.
start_member cf mixed cf k0,k1,k2,k3
start_kcat_member mixed kc "${topics[@]}"
wait_split 30 cf kc
for t in "${topics[@]}"; do produce "$t" 0 29; done
wait_consumed 30 120 cf kc
expect_eq "$(expected_records 29 "${topics[@]}")" "$(consumed cf kc)" "records consumed by cf and kc"
kc_had=$(assigned kc)
wait_until 20 committed_are mixed "$(for t in "${topics[@]}"; do echo "$t 30 ''"; done)" ||
    fail "mixed's committed offsets: $(gc kp-committed mixed)"
stop_member kc
wait_assigned 30 cf "k0 k1 k2 k3"
for t in "${topics[@]}"; do produce "$t" 30 39; done
wait_consumed 30 160 cf kc
expect_eq "$(expected_records 39 "${topics[@]}")" "$(consumed cf kc)" "records consumed by cf and kc, then cf"
for t in $kc_had; do
    expect_eq 30 "$(consumed cf | awk -v t="$t" '$1 == t { print $2; exit }')" \
        "cf's first offset of $t, which kc had committed up to 30"
done
for rows in "$confluent_rows" "$kcat_rows"; do
    matrix_row "$rows" consume-group
    matrix_row "$rows" commit-offsets
done
expect_eq $'mixed STABLE roundrobin members=1\n  cf /127.0.0.1 k0,k1,k2,k3' \
    "$(gc cf-describe mixed)" "confluent-kafka's describe_consumer_groups of mixed"
matrix_row "$confluent_rows" admin-describe-groups
stop_member cf

# --- cooperative-sticky: the client's incremental protocol over the classic group one.
start_member cf sticky s1 k0,k1,k2,k3 cooperative-sticky
start_member cf sticky s2 k0,k1,k2,k3 cooperative-sticky
wait_split 30 s1 s2
wait_consumed 30 160 s1 s2
expect_eq "$(expected_records 39 "${topics[@]}")" "$(consumed s1 s2 | sort -u -k1,1 -k2,2n)" \
    "records consumed by s1 and s2 (at least once)"
expect_contains "$(gc cf-describe sticky)" "sticky STABLE cooperative-sticky members=2" \
    "describe_consumer_groups of sticky"
stop_member s1
wait_assigned 30 s2 "k0 k1 k2 k3"
stop_member s2

# --- OffsetFetch of a group nobody knows: nothing committed, and no group made.
expect_eq "k0 None" "$(gc kp-consumer-committed nobody k0)" "kafka-python's committed() of an unknown group"
expect_eq "k0 -1 ''" "$(gc kp-committed nobody k0)" "kafka-python's list_group_offsets of an unknown group's k0"
expect_eq "" "$(gc kp-committed nobody)" "kafka-python's list_group_offsets of an unknown group"
expect_eq "k0 -1001" "$(gc cf-committed nobody k0)" "confluent-kafka's committed() of an unknown group"
expect_eq "k0 -1001" "$(gc cf-offsets nobody k0)" "confluent-kafka's list_consumer_group_offsets of an unknown group"
expect_eq $'mixed consumer Empty\nsticky consumer Empty' "$(gc kp-list)" "the groups after asking about nobody"

# --- A session timeout above group.max.session.timeout.ms (30000 here).
expect_eq "InvalidSessionTimeoutError [Error 26] InvalidSessionTimeoutError" \
    "$(gc kp-session too-long k0 60000)" "kafka-python joining with a 60 s session"
expect_eq "INVALID_SESSION_TIMEOUT JoinGroup failed: Broker: Invalid session timeout" \
    "$(gc cf-session too-long k0 60000)" "confluent-kafka joining with a 60 s session"
expect_eq "joined" "$(gc kp-session long-enough k0 30000)" "kafka-python joining with a 30 s session"
umount_kpfs
