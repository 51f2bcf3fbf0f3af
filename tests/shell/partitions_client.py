"""Partitioned topics through kafka-python and confluent-kafka, for
tests/shell/t_partitions_clients.sh, which runs each command against a real Kafka broker
and against kpfs and compares what they print: what a client reports, one fact a line,
nothing that differs between two brokers by right (ids, times, ports).

Usage: partitions_client.py COMMAND BOOTSTRAP ARGS...

  kp-create TOPIC:N...    KafkaAdminClient.create_topics with N partitions (-1: the
        broker's num.partitions), replication factor -1: "topic ErrorName message".
  cf-create TOPIC:N...    the same with confluent-kafka's AdminClient ("topic OK" or
        "topic ERROR_NAME message").
  kp-describe TOPIC...    describe_topics: "topic partition leader=L epoch=E replicas=[..]
        isr=[..] offline=[..]" per partition, in partition order.
  cf-describe TOPIC...    per topic, its partitions in list_topics' metadata, "topic
        partition leader=L replicas=[..] isr=[..]", then as describe_topics has them
        (DescribeTopicPartitions), the same lines after "described:".
  kp-add TOPIC N          create_partitions to N partitions in all: "topic ErrorName message".
  cf-add TOPIC N          the same with confluent-kafka.
  kp-produce-to TOPIC PARTITION VALUE...  KafkaProducer.send to that partition: the
        offsets it was told, "partition offset" lines.
  kp-keyed TOPIC COUNT    KafkaProducer with the default partitioner sends key-0..key-N-1
        (values value-I), then a consumer reads every partition from the beginning:
        "key told=P stored=P" (the partition the producer reported, the one it is read from).
  cf-keyed TOPIC COUNT    the same with confluent-kafka's Producer, partitioner
        murmur2_random (the Java producer's: librdkafka's default is CRC32).
  kp-offsets TOPIC        KafkaConsumer.beginning_offsets and end_offsets of every
        partition: "topic partition earliest latest".
  kp-delete-records TOPIC PARTITION OFFSET  KafkaAdminClient.delete_records: "topic
        partition low_watermark=N ErrorName", or the error it raises.
  kp-read TOPIC PARTITION  every record of one partition: "partition offset value".
  group KIND ASSIGNOR TOPIC GROUP KAFKA_BIN  the consumer group scenario (see group()):
        KIND kp (kafka-python) or cf (confluent-kafka), ASSIGNOR range, roundrobin or
        cooperative-sticky; KAFKA_BIN is Kafka's bin/ for kafka-consumer-groups.sh.

Every wait is bounded by a timeout.
"""

import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from group_client import TIMEOUT_S, cf_admin, cf_consumer, kp_admin, kp_consumer  # noqa: E402


def named_counts(specs):
    return [(name, int(count)) for name, count in (s.rsplit(":", 1) for s in specs)]


def error_name(code):
    import kafka.errors

    return kafka.errors.for_code(code).__name__


def cf_outcomes(futures):
    """'name OK' or 'name ERROR_NAME message' per future of a confluent admin call."""
    for name, future in sorted(futures.items()):
        try:
            future.result(timeout=TIMEOUT_S)
            print(name, "OK")
        except Exception as error:  # what the client reports is the subject
            e = error.args[0]
            print(name, e.name(), e.str())


def kp_create(bootstrap, *specs):
    from kafka.admin import NewTopic

    answer = kp_admin(bootstrap).create_topics(
        [NewTopic(name, count) for name, count in named_counts(specs)], raise_errors=False
    )
    for topic in sorted(answer["topics"], key=lambda t: t["name"]):
        print(topic["name"], error_name(topic["error_code"]), topic["error_message"])


def cf_create(bootstrap, *specs):
    from confluent_kafka.admin import NewTopic

    cf_outcomes(
        cf_admin(bootstrap).create_topics(
            [NewTopic(name, count) for name, count in named_counts(specs)],
            operation_timeout=TIMEOUT_S,
        )
    )


def kp_describe(bootstrap, *topics):
    for topic in kp_admin(bootstrap).describe_topics(list(topics)):
        if topic["error_code"]:
            print(topic["name"], error_name(topic["error_code"]))
        for p in sorted(topic["partitions"], key=lambda p: p["partition_index"]):
            print(
                topic["name"], p["partition_index"], f"leader={p['leader_id']}",
                f"epoch={p['leader_epoch']}", f"replicas={p['replica_nodes']}",
                f"isr={p['isr_nodes']}", f"offline={p['offline_replicas']}",
                error_name(p["error_code"]),
            )


def cf_describe(bootstrap, *topics):
    from confluent_kafka import TopicCollection

    admin = cf_admin(bootstrap)
    metadata = admin.list_topics(timeout=TIMEOUT_S)
    described = admin.describe_topics(TopicCollection(list(topics)))
    for name in topics:
        topic = metadata.topics.get(name)
        if topic is None:
            print(name, "not in the metadata")
        else:
            if topic.error is not None:
                print(name, topic.error.name())
            for p in sorted(topic.partitions.values(), key=lambda p: p.id):
                print(name, p.id, f"leader={p.leader}", f"replicas={p.replicas}", f"isr={p.isrs}")
        try:
            d = described[name].result(timeout=TIMEOUT_S)
        except Exception as error:  # what the client reports is the subject
            print("described:", name, error.args[0].name(), error.args[0].str())
            continue
        for p in d.partitions:
            print(
                "described:", d.name, p.id, f"leader={p.leader.id}",
                f"replicas={[n.id for n in p.replicas]}", f"isr={[n.id for n in p.isr]}",
            )


def kp_add(bootstrap, topic, count):
    answer = kp_admin(bootstrap).create_partitions({topic: int(count)}, raise_errors=False)
    for result in answer.results:
        print(result.name, error_name(result.error_code), result.error_message)


def cf_add(bootstrap, topic, count):
    from confluent_kafka.admin import NewPartitions

    cf_outcomes(
        cf_admin(bootstrap).create_partitions(
            [NewPartitions(topic, int(count))], operation_timeout=TIMEOUT_S
        )
    )


def kp_producer(bootstrap, **settings):
    from kafka import KafkaProducer

    return KafkaProducer(
        bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_S * 1000, **settings
    )


def kp_produce_to(bootstrap, topic, partition, *values):
    producer = kp_producer(bootstrap)
    sent = [producer.send(topic, v.encode(), partition=int(partition)) for v in values]
    for future in sent:
        m = future.get(timeout=TIMEOUT_S)
        print(m.partition, m.offset)
    producer.close()


def kp_assigned_consumer(bootstrap, topic):
    """A KafkaConsumer outside any group, assigned every partition of topic, at the start."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False,
        request_timeout_ms=TIMEOUT_S * 1000,
    )
    partitions = consumer.partitions_for_topic(topic)
    if not partitions:
        sys.exit(f"{topic} has no partitions in the metadata")
    tps = [TopicPartition(topic, p) for p in sorted(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning()
    return consumer, tps


def kp_read_all(consumer, tps):
    """Every record of the assigned partitions, up to their ends now."""
    ends = consumer.end_offsets(tps)
    records = []
    deadline = time.monotonic() + TIMEOUT_S
    while any(consumer.position(tp) < ends[tp] for tp in tps):
        if time.monotonic() > deadline:
            sys.exit(f"did not reach the ends {ends} within {TIMEOUT_S} s")
        for batch in consumer.poll(timeout_ms=200).values():
            records.extend(batch)
    return records


def keyed_report(told, records):
    stored = {r.key.decode(): r.partition for r in records}
    for key in sorted(told, key=lambda k: int(k.rsplit("-", 1)[1])):
        print(key, f"told={told[key]}", f"stored={stored.get(key)}")


def kp_keyed(bootstrap, topic, count):
    producer = kp_producer(bootstrap)
    keys = [f"key-{i}" for i in range(int(count))]
    futures = {k: producer.send(topic, key=k.encode(), value=f"value-{k}".encode()) for k in keys}
    told = {k: f.get(timeout=TIMEOUT_S).partition for k, f in futures.items()}
    producer.close()
    keyed_report(told, kp_read_all(*kp_assigned_consumer(bootstrap, topic)))


def cf_keyed(bootstrap, topic, count):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    told = {}

    def delivered(error, message):
        if error is not None:
            sys.exit(f"delivery failed: {error}")
        told[message.key().decode()] = message.partition()

    for i in range(int(count)):
        producer.produce(topic, key=f"key-{i}", value=f"value-key-{i}", on_delivery=delivered)
    if producer.flush(TIMEOUT_S):
        sys.exit(f"records undelivered after {TIMEOUT_S} s")
    keyed_report(told, kp_read_all(*kp_assigned_consumer(bootstrap, topic)))


def kp_offsets(bootstrap, topic):
    consumer, tps = kp_assigned_consumer(bootstrap, topic)
    earliest = consumer.beginning_offsets(tps)
    latest = consumer.end_offsets(tps)
    for tp in tps:
        print(topic, tp.partition, earliest[tp], latest[tp])
    consumer.close()


def kp_delete_records(bootstrap, topic, partition, offset):
    from kafka import TopicPartition

    try:
        answer = kp_admin(bootstrap).delete_records({TopicPartition(topic, int(partition)): int(offset)})
    except Exception as error:
        print(type(error).__name__, error)
        return
    for tp, outcome in sorted(answer.items()):
        print(tp.topic, tp.partition, f"low_watermark={outcome['low_watermark']}",
              error_name(outcome["error_code"]))


def kp_read(bootstrap, topic, partition):
    from kafka import TopicPartition

    consumer, tps = kp_assigned_consumer(bootstrap, topic)
    tp = TopicPartition(topic, int(partition))
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    for r in kp_read_all(consumer, [tp]):
        print(r.partition, r.offset, r.value.decode())
    consumer.close()


# --- The consumer group scenario.


class Member(threading.Thread):
    """A group member polling in its own thread: its assignment (partitions of the one
    topic) and the records it consumed, each committed (synchronously) once processed."""

    def __init__(self, kind, bootstrap, group, topic, name, assignor):
        super().__init__(daemon=True)
        self.kind, self.name = kind, name
        self.assigned = frozenset()
        self.records = []  # (partition, offset, value)
        self.error = None
        self.leave = threading.Event()
        self.left = threading.Event()
        if kind == "kp":
            from kafka.coordinator.assignors.range import RangePartitionAssignor
            from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

            assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}
            self.consumer = kp_consumer(
                bootstrap, group, client_id=name, partition_assignment_strategy=[assignors[assignor]]
            )
            # The member knows the topic's partitions before it joins: a kafka-python
            # 3.0.12 leader that assigns without them rejoins when they arrive, and in that
            # second rebalance it now and then hangs for good, client-side
            # (docs/KAFKA-PROTOCOL.md, "Partitions through real clients").
            if not self.consumer.partitions_for_topic(topic):
                raise RuntimeError(f"{name}: no partitions for {topic}")
        else:
            self.consumer = cf_consumer(
                bootstrap, group, **{"client.id": name, "partition.assignment.strategy": assignor}
            )
        self.consumer.subscribe([topic])

    def run(self):
        try:
            while not self.leave.is_set():
                got = self.poll()
                self.assigned = frozenset(tp.partition for tp in self.consumer.assignment())
                if got:
                    self.records.extend(got)
                    self.commit()
            self.consumer.close()
        except Exception as error:  # reported by the scenario, which then fails
            self.error = f"{type(error).__name__}: {error}"
        self.left.set()

    def poll(self):
        if self.kind == "kp":
            return [
                (r.partition, r.offset, r.value.decode())
                for records in self.consumer.poll(timeout_ms=200).values()
                for r in records
            ]
        got = []
        for m in self.consumer.consume(num_messages=500, timeout=0.2):
            if m.error():
                raise RuntimeError(str(m.error()))
            got.append((m.partition(), m.offset(), m.value().decode()))
        return got

    def commit(self):
        if self.kind == "kp":
            self.consumer.commit()
        else:
            self.consumer.commit(asynchronous=False)


def wait_for(what, condition, members, seconds=TIMEOUT_S):
    deadline = time.monotonic() + seconds
    while not condition():
        errors = [f"{m.name}: {m.error}" for m in members if m.error]
        if errors or time.monotonic() > deadline:
            state = ", ".join(f"{m.name}={sorted(m.assigned)}/{len(m.records)}" for m in members)
            sys.exit(f"{what}: not within {seconds} s ({state}) {' '.join(errors)}")
        time.sleep(0.05)


def split_evenly(members, partitions):
    """Every member has partitions // len(members) of them, and together all, once each."""
    shares = [m.assigned for m in members]
    return all(len(s) == partitions // len(members) for s in shares) and set().union(
        *shares
    ) == set(range(partitions))


def shares(members):
    return " ".join(str(sorted(s)) for s in sorted(sorted(m.assigned) for m in members))


def produce_round(bootstrap, topic, partitions, per_partition, first):
    """per_partition records to each partition, values "p<P>-<I>" for I from first."""
    producer = kp_producer(bootstrap)
    sent = [
        producer.send(topic, f"p{p}-{i}".encode(), partition=p)
        for p in range(partitions)
        for i in range(first, first + per_partition)
    ]
    for future in sent:
        future.get(timeout=TIMEOUT_S)
    producer.close()


def check_consumed(members, partitions, first, per_partition, before):
    """What the members consumed since before (their record counts then): every record of
    the round once, each by the member owning its partition, at the offset it was
    produced at. Prints the facts; the other side prints the same ones or differs."""
    expected = {(p, i, f"p{p}-{i}") for p in range(partitions) for i in range(first, first + per_partition)}
    got = []
    for m in members:
        mine = m.records[before.get(m.name, 0):]
        got.extend(mine)
        foreign = sorted({p for p, _, _ in mine} - m.assigned)
        if foreign:
            print(f"  a member consumed partitions it does not own: {foreign}")
    print(
        f"  consumed {len(got)} records, {len(set(got))} distinct,",
        f"{len(set(got) & expected)} of the {len(expected)} produced,",
        f"{len(set(got) - expected)} others",
    )


def committed_line(bootstrap, group, topic):
    offsets = kp_admin(bootstrap).list_group_offsets({group: None})[group]
    return " ".join(
        f"{tp.partition}={o.offset}" for tp, o in sorted(offsets.items()) if tp.topic == topic
    )


def wait_committed(bootstrap, group, topic, partitions, offset, members):
    want = " ".join(f"{p}={offset}" for p in range(partitions))
    wait_for(f"committed {want}", lambda: committed_line(bootstrap, group, topic) == want, members)
    print(f"  committed: {want}")


def consumer_groups_describe(kafka_bin, bootstrap, group, by_member):
    """kafka-consumer-groups.sh --describe, its rows sorted by partition, each member's
    consumer id and client id replaced by a letter in the order they first appear (the
    ids are random; which partitions share a member is what the assignor decided), or,
    unless by_member, by "?" (the assignor's choice depends on the ids)."""
    out = subprocess.run(
        [f"{kafka_bin}/kafka-consumer-groups.sh", "--bootstrap-server", bootstrap,
         "--describe", "--group", group],
        capture_output=True, text=True, timeout=60,
    )
    lines = [line.split() for line in out.stdout.splitlines() if line.strip()]
    header = [fields for fields in lines if fields[:2] == ["GROUP", "TOPIC"]]
    rows = sorted((f for f in lines if f[:2] != ["GROUP", "TOPIC"]), key=lambda f: int(f[2]))
    members, clients = {}, {}
    print("  kafka-consumer-groups.sh --describe:", " ".join(header[0]) if header else "no header")
    for f in rows:
        if len(f) == 9:
            f[6] = "member-" + (members.setdefault(f[6], "abcdefgh"[len(members)]) if by_member else "?")
            f[8] = "client-" + (clients.setdefault(f[8], "abcdefgh"[len(clients)]) if by_member else "?")
        print("   ", " ".join(f))
    if out.stderr.strip():
        print("  stderr:", out.stderr.strip())
    print("  exit", out.returncode)


def group(bootstrap, kind, assignor, topic, group_id, kafka_bin, partitions=6, per_round=10):
    """Three members over a topic of six partitions: each gets two; 60 records produced then
    are consumed once each across the group and committed; the member owning partition 0
    leaves, the other two get three each and consume the next 60. kafka-consumer-groups.sh
    describes the group of two."""
    members = [Member(kind, bootstrap, group_id, topic, f"{kind}-{i}", assignor) for i in (1, 2, 3)]
    for m in members:
        m.start()
    try:
        # What a sticky assignor gives depends on the order the members joined in and
        # on their ids; the range and roundrobin assignors' shares depend on neither.
        sticky = assignor == "cooperative-sticky"
        wait_for("an even split of three", lambda: split_evenly(members, partitions), members)
        if sticky:
            print("three members:", " ".join(str(len(m.assigned)) for m in members), "partitions")
        else:
            print(f"three members: {shares(members)}")
        produce_round(bootstrap, topic, partitions, per_round, 0)
        total = partitions * per_round
        wait_for(f"{total} records", lambda: sum(len(m.records) for m in members) >= total, members)
        check_consumed(members, partitions, 0, per_round, {})
        wait_committed(bootstrap, group_id, topic, partitions, per_round, members)

        leaving = next(m for m in members if 0 in m.assigned)
        kept = {m.name: sorted(m.assigned) for m in members if m is not leaving}
        leaving.leave.set()
        wait_for("the leaver's close", leaving.left.is_set, members)
        stay = [m for m in members if m is not leaving]
        wait_for("an even split of two", lambda: split_evenly(stay, partitions), stay)
        if sticky:
            # That each keeps what it had is the point of stickiness.
            print("two members:", " ".join(str(len(m.assigned)) for m in stay), "partitions,",
                  "each keeping its own:", all(set(kept[m.name]) <= m.assigned for m in stay))
        else:
            print(f"two members: {shares(stay)}")
        before = {m.name: len(m.records) for m in stay}
        produce_round(bootstrap, topic, partitions, per_round, per_round)
        wait_for(
            f"{total} more records",
            lambda: sum(len(m.records) - before[m.name] for m in stay) >= total,
            stay,
        )
        check_consumed(stay, partitions, per_round, per_round, before)
        wait_committed(bootstrap, group_id, topic, partitions, 2 * per_round, stay)
        if kafka_bin != "-":
            consumer_groups_describe(kafka_bin, bootstrap, group_id, not sticky)
    finally:
        for m in members:
            m.leave.set()
        for m in members:
            m.join(TIMEOUT_S)


COMMANDS = {
    "kp-create": kp_create,
    "cf-create": cf_create,
    "kp-describe": kp_describe,
    "cf-describe": cf_describe,
    "kp-add": kp_add,
    "cf-add": cf_add,
    "kp-produce-to": kp_produce_to,
    "kp-keyed": kp_keyed,
    "cf-keyed": cf_keyed,
    "kp-offsets": kp_offsets,
    "kp-delete-records": kp_delete_records,
    "kp-read": kp_read,
    "group": group,
}

if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in COMMANDS:
        sys.exit(__doc__)
    COMMANDS[sys.argv[1]](*sys.argv[2:])
