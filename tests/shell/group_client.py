"""Consumer groups through kafka-python and confluent-kafka against a kpfs listener, for the
tests/shell/t_kafka_group*.sh client tests.

Usage: group_client.py COMMAND BOOTSTRAP ARGS...

Members (run in the background by the tests, one process each):
  kp-member GROUP DIR NAME TOPIC,...   a kafka-python KafkaConsumer subscribed to the
        topics in GROUP with the roundrobin assignor (kpfs topics have one partition each:
        the range assignor would give every topic to one member), no auto-commit; see
        "The member's files" below.
  cf-member GROUP DIR NAME TOPIC,... [ASSIGNOR]  the same with confluent-kafka's Consumer
        (partition.assignment.strategy ASSIGNOR, default roundrobin).
  The member's files, all in DIR: NAME.records gets one "topic offset value" line per
  record consumed, written before the records' offsets are committed (synchronously,
  after each poll: "process, then commit"); NAME.assigned is rewritten with the sorted
  assigned topics (one line, space-separated) whenever the assignment changes. SIGTERM
  makes the member close the consumer (leaving the group: LeaveGroup) and exit, writing
  NAME.closed. The environment's SESSION_TIMEOUT_MS and HEARTBEAT_INTERVAL_MS set the
  member's session timeout and heartbeat interval (defaults 3000 and 300). An error ends
  it with the error's name and text on stderr.

One-shot commands (print what the client reports, one fact a line, sorted):
  kp-committed GROUP [TOPIC...]   KafkaAdminClient.list_group_offsets (every committed
        partition, or the named topics' partition 0): "topic offset metadata" lines.
  kp-consumer-committed GROUP TOPIC...  KafkaConsumer(group_id=GROUP).committed of each
        topic's partition 0: "topic offset" (None when nothing is committed).
  kp-commit GROUP TOPIC=OFFSET...  a KafkaConsumer outside group management (assign, no
        subscribe) commits the offsets with metadata "kp-commit"; prints OK or the error.
  kp-session GROUP TOPIC SESSION_MS  a kafka-python member with that session timeout:
        prints the error its poll raises (or "joined" when it got in).
  kp-list                     KafkaAdminClient.list_groups: "group protocol_type state"
        ("-" for the empty protocol type of a group that only commits offsets).
  kp-describe GROUP...        describe_groups: "group state protocol_type protocol
        members=N", then per member "  client_id host topics" (the assignment decoded).
  kp-delete GROUP...          delete_groups: "group OK" or "group ErrorName".
  kp-alter GROUP TOPIC=OFFSET...  alter_group_offsets: "topic ErrorName" (NoError: done).
  kp-delete-offsets GROUP TOPIC...  delete_group_offsets: "topic ErrorName", or the error
        it raises for the whole request.
  cf-committed GROUP TOPIC...  confluent Consumer(group.id=GROUP).committed of each topic's
        partition 0: "topic offset" (-1001 is librdkafka's OFFSET_INVALID: none).
  cf-session GROUP TOPIC SESSION_MS  a confluent-kafka member with that session timeout:
        prints the first error its poll reports (or "joined").
  cf-list                     AdminClient.list_consumer_groups: "group state" lines.
  cf-describe GROUP...        describe_consumer_groups: "group state assignor
        members=N", then per member "  client_id host topics".
  cf-delete GROUP...          delete_consumer_groups: "group OK" or the error.
  cf-offsets GROUP [TOPIC...]  list_consumer_group_offsets: "topic offset" lines.
  cf-alter GROUP TOPIC=OFFSET...  alter_consumer_group_offsets: "topic offset" as answered,
        or the error.

Every wait is bounded by a timeout.
"""

import functools
import os
import signal
import sys
import time

TIMEOUT_S = 15


def atomically(path, text):
    with open(path + ".tmp", "w") as out:
        out.write(text)
    os.replace(path + ".tmp", path)


def topic_offsets(settings):
    """TOPIC=OFFSET arguments as (topic, offset) pairs."""
    return [(topic, int(offset)) for topic, offset in (s.split("=", 1) for s in settings)]


def session_settings():
    return int(os.environ.get("SESSION_TIMEOUT_MS", "3000")), int(
        os.environ.get("HEARTBEAT_INTERVAL_MS", "300")
    )


class MemberFiles:
    """The files a member reports through (see the module's docstring)."""

    def __init__(self, directory, name):
        self.base = os.path.join(directory, name)
        self.records = open(self.base + ".records", "a")
        self.assigned = None
        self.stop = False
        signal.signal(signal.SIGTERM, self.stopped)

    def note_assignment(self, topics):
        topics = sorted(topics)
        if topics != self.assigned:
            self.assigned = topics
            atomically(self.base + ".assigned", " ".join(topics) + "\n")

    def processed(self, lines):
        if lines:
            self.records.write("".join(lines))
            self.records.flush()

    def stopped(self, *_):
        self.stop = True

    def closed(self):
        self.records.close()
        open(self.base + ".closed", "w").close()


def kp_consumer(bootstrap, group, **settings):
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    session, heartbeat = session_settings()
    config = dict(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        partition_assignment_strategy=[RoundRobinPartitionAssignor],
        session_timeout_ms=session,
        heartbeat_interval_ms=heartbeat,
        # A member that stops polling is evicted after this; the tests' members poll
        # every 200 ms.
        max_poll_interval_ms=10_000,
        request_timeout_ms=TIMEOUT_S * 1000,
    )
    config.update(settings)
    return KafkaConsumer(**config)


def kp_member(bootstrap, group, directory, name, topics):
    from kafka.errors import CommitFailedError

    files = MemberFiles(directory, name)
    consumer = kp_consumer(bootstrap, group, client_id=name)
    consumer.subscribe(topics.split(","))
    while not files.stop:
        batches = consumer.poll(timeout_ms=200)
        files.note_assignment(tp.topic for tp in consumer.assignment())
        files.processed(
            f"{tp.topic} {r.offset} {r.value.decode()}\n"
            for tp, records in sorted(batches.items())
            for r in records
        )
        if batches:
            try:
                consumer.commit()
            except CommitFailedError as error:
                # Their records will be consumed again, which the test reports.
                print(f"{name}: commit failed: {error}", file=sys.stderr)
    consumer.close()
    files.closed()


def kp_admin(bootstrap):
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_S * 1000)


def kp_committed(bootstrap, group, *topics):
    from kafka import TopicPartition

    partitions = [TopicPartition(t, 0) for t in topics] or None
    offsets = kp_admin(bootstrap).list_group_offsets({group: partitions})[group]
    for tp, committed in sorted(offsets.items()):
        print(tp.topic, committed.offset, repr(committed.metadata))


def kp_consumer_committed(bootstrap, group, *topics):
    from kafka import TopicPartition

    consumer = kp_consumer(bootstrap, group)
    for topic in topics:
        print(topic, consumer.committed(TopicPartition(topic, 0)))
    consumer.close()


def kp_commit(bootstrap, group, *settings):
    from kafka import TopicPartition
    from kafka.structs import OffsetAndMetadata

    offsets = {
        TopicPartition(t, 0): OffsetAndMetadata(o, "kp-commit", -1)
        for t, o in topic_offsets(settings)
    }
    consumer = kp_consumer(bootstrap, group)
    consumer.assign(list(offsets))
    try:
        consumer.commit(offsets)
        print("OK")
    except Exception as error:  # what the client raises is the subject
        print(type(error).__name__, error)
    consumer.close()


def kp_session(bootstrap, group, topic, session_ms):
    consumer = kp_consumer(
        bootstrap, group, session_timeout_ms=int(session_ms), heartbeat_interval_ms=100
    )
    consumer.subscribe([topic])
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while not consumer.assignment():
            if time.monotonic() > deadline:
                sys.exit(f"neither joined nor refused within {TIMEOUT_S} s")
            consumer.poll(timeout_ms=200)
        print("joined")
    except Exception as error:
        print(type(error).__name__, error)
    consumer.close()


def kp_list(bootstrap):
    for group in sorted(kp_admin(bootstrap).list_groups(), key=lambda g: g["group_id"]):
        print(group["group_id"], group["protocol_type"] or "-", group.get("group_state", "?"))


def kp_describe(bootstrap, *groups):
    described = kp_admin(bootstrap).describe_groups(list(groups))
    for group in groups:
        d = described[group]
        if d["error"]:
            print(group, "error", d["error"])
            continue
        print(group, d["group_state"], d["protocol_type"] or "-", d["protocol_data"] or "-",
              f"members={len(d['members'])}")
        lines = []
        for m in d["members"]:
            # kafka-python decodes the assignment, then turns it into a dict.
            assignment = m["member_assignment"] or {"assigned_partitions": []}
            topics = sorted(p["topic"] for p in assignment["assigned_partitions"])
            lines.append(f"  {m['client_id']} {m['client_host']} {','.join(topics) or '-'}")
        for line in sorted(lines):
            print(line)


def kp_delete(bootstrap, *groups):
    for group, outcome in sorted(kp_admin(bootstrap).delete_groups(list(groups)).items()):
        print(group, outcome)


def kp_alter(bootstrap, group, *settings):
    from kafka import TopicPartition
    from kafka.structs import OffsetAndMetadata

    offsets = {
        TopicPartition(t, 0): OffsetAndMetadata(o, "", None) for t, o in topic_offsets(settings)
    }
    for tp, error in sorted(kp_admin(bootstrap).alter_group_offsets(group, offsets).items()):
        print(tp.topic, error.__name__)


def kp_delete_offsets(bootstrap, group, *topics):
    from kafka import TopicPartition

    try:
        outcome = kp_admin(bootstrap).delete_group_offsets(
            group, [TopicPartition(t, 0) for t in topics]
        )
    except Exception as error:
        print(type(error).__name__)
        return
    for tp, error in sorted(outcome.items()):
        print(tp.topic, error.__name__)


def cf_consumer(bootstrap, group, **settings):
    from confluent_kafka import Consumer

    session, heartbeat = session_settings()
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "partition.assignment.strategy": "roundrobin",
        "session.timeout.ms": session,
        "heartbeat.interval.ms": heartbeat,
        "max.poll.interval.ms": 10_000,
    }
    config.update(settings)
    return Consumer(config)


def cf_member(bootstrap, group, directory, name, topics, assignor="roundrobin"):
    from confluent_kafka import KafkaException

    files = MemberFiles(directory, name)
    consumer = cf_consumer(
        bootstrap, group, **{"client.id": name, "partition.assignment.strategy": assignor}
    )
    consumer.subscribe(topics.split(","))
    while not files.stop:
        messages = consumer.consume(num_messages=500, timeout=0.2)
        files.note_assignment(tp.topic for tp in consumer.assignment())
        lines = []
        for m in messages:
            if m.error():
                sys.exit(f"{name}: {m.error()}")
            lines.append(f"{m.topic()} {m.offset()} {m.value().decode()}\n")
        files.processed(lines)
        if messages:
            try:
                consumer.commit(asynchronous=False)
            except KafkaException as error:
                print(f"{name}: commit failed: {error}", file=sys.stderr)
    consumer.close()
    files.closed()


def cf_committed(bootstrap, group, *topics):
    from confluent_kafka import TopicPartition

    consumer = cf_consumer(bootstrap, group)
    for tp in consumer.committed([TopicPartition(t, 0) for t in topics], timeout=TIMEOUT_S):
        print(tp.topic, tp.offset)
    consumer.close()


def cf_session(bootstrap, group, topic, session_ms):
    from confluent_kafka import KafkaException

    consumer = cf_consumer(
        bootstrap,
        group,
        **{
            "session.timeout.ms": int(session_ms),
            "heartbeat.interval.ms": 100,
            "max.poll.interval.ms": int(session_ms),
        },
    )
    consumer.subscribe([topic])
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while not consumer.assignment():
            if time.monotonic() > deadline:
                sys.exit(f"neither joined nor refused within {TIMEOUT_S} s")
            message = consumer.poll(0.2)
            if message is not None and message.error():
                print(message.error().name(), message.error().str())
                break
        else:
            print("joined")
    except KafkaException as error:
        print(error.args[0].name(), error.args[0].str())
    consumer.close()


@functools.cache
def cf_admin(bootstrap):
    """One AdminClient, kept: one garbage-collected never completes its futures."""
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


class Failed(Exception):
    """An admin call failed; the error is printed already."""


def cf_reported(future):
    """The future's result; raises Failed after printing the error the client reports."""
    try:
        return future.result(timeout=TIMEOUT_S)
    except Exception as error:
        kafka_error = error.args[0] if error.args else error
        name = kafka_error.name() if hasattr(kafka_error, "name") else type(error).__name__
        print(name)
        raise Failed from error


def cf_list(bootstrap):
    listed = cf_reported(cf_admin(bootstrap).list_consumer_groups())
    for group in sorted(listed.valid, key=lambda g: g.group_id):
        print(group.group_id, group.state.name)
    for error in listed.errors:
        print("error", error)


def cf_describe(bootstrap, *groups):
    futures = cf_admin(bootstrap).describe_consumer_groups(list(groups))
    for group in groups:
        try:
            d = cf_reported(futures[group])
        except Failed:
            continue
        print(group, d.state.name, d.partition_assignor or "-", f"members={len(d.members)}")
        lines = sorted(
            f"  {m.client_id} {m.host} "
            + (",".join(sorted(tp.topic for tp in m.assignment.topic_partitions)) or "-")
            for m in d.members
        )
        for line in lines:
            print(line)


def cf_delete(bootstrap, *groups):
    futures = cf_admin(bootstrap).delete_consumer_groups(list(groups))
    for group in groups:
        print(group, end=" ")
        try:
            cf_reported(futures[group])
            print("OK")
        except Failed:
            pass


def cf_offsets(bootstrap, group, *topics):
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    partitions = [TopicPartition(t, 0) for t in topics] or None
    futures = cf_admin(bootstrap).list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, partitions)]
    )
    answer = cf_reported(futures[group])
    for tp in sorted(answer.topic_partitions, key=lambda tp: tp.topic):
        print(tp.topic, tp.offset)


def cf_alter(bootstrap, group, *settings):
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    partitions = [TopicPartition(t, 0, o) for t, o in topic_offsets(settings)]
    futures = cf_admin(bootstrap).alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, partitions)]
    )
    answer = cf_reported(futures[group])
    for tp in sorted(answer.topic_partitions, key=lambda tp: tp.topic):
        print(tp.topic, tp.offset if tp.error is None else tp.error.name())


COMMANDS = {
    "kp-member": kp_member,
    "kp-committed": kp_committed,
    "kp-consumer-committed": kp_consumer_committed,
    "kp-commit": kp_commit,
    "kp-session": kp_session,
    "kp-list": kp_list,
    "kp-describe": kp_describe,
    "kp-delete": kp_delete,
    "kp-alter": kp_alter,
    "kp-delete-offsets": kp_delete_offsets,
    "cf-member": cf_member,
    "cf-committed": cf_committed,
    "cf-session": cf_session,
    "cf-list": cf_list,
    "cf-describe": cf_describe,
    "cf-delete": cf_delete,
    "cf-offsets": cf_offsets,
    "cf-alter": cf_alter,
}

if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in COMMANDS:
        sys.exit(__doc__)
    try:
        COMMANDS[sys.argv[1]](*sys.argv[2:])
    except Failed:
        pass
