"""The app of t_kafka_move.sh: one kafka-python program that runs against kpfs first and
then, unchanged but for its bootstrap servers, against the Kafka cluster.

Usage: move_client.py COMMAND BOOTSTRAP ARGS...

  create TOPIC PARTITIONS KEY=VALUE...  CreateTopics with those config overrides; prints OK.
  produce TOPIC COUNT   COUNT records key-I value-I (I from 0), acks=all, flushed; prints
        "PARTITION END-OFFSET" per partition.
  consume TOPIC GROUP [COUNT]   a consumer of group GROUP (classic protocol, auto-commit
        off, auto_offset_reset earliest) subscribed to TOPIC. With COUNT: reads COUNT
        records, one at a time, then commits each assigned partition's position (so what is
        committed is exactly what was read) and leaves. Without: reads until its
        position reaches the end offset every partition had when it joined, commits and
        leaves. Prints "PARTITION OFFSET KEY VALUE" per record, in the order read, then
        "committed PARTITION OFFSET" per partition it committed.
  offset-syncs TOPIC   MirrorMaker 2's offset-syncs topic TOPIC (one partition), read to its
        end without a group: "TOPIC PARTITION UPSTREAM DOWNSTREAM" per sync, decoded as
        MirrorMaker 2's OffsetSync writes them (key: the topic as a string, then the
        partition; value: the upstream, then the downstream offset).

Every wait is bounded: a command that has not done its work in 60 s fails.
"""

import struct
import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata

DEADLINE_S = 60


def create(bootstrap, topic, partitions, *configs):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    overrides = dict(c.split("=", 1) for c in configs)
    admin.create_topics([NewTopic(topic, int(partitions), 1, topic_configs=overrides)])
    admin.close()
    print("OK")


def produce(bootstrap, topic, count):
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    futures = [
        producer.send(topic, key=b"key-%d" % i, value=b"value-%d" % i) for i in range(int(count))
    ]
    producer.flush(DEADLINE_S)
    ends = {}
    for f in futures:
        m = f.get(DEADLINE_S)
        ends[m.partition] = max(ends.get(m.partition, 0), m.offset + 1)
    producer.close()
    for p in sorted(ends):
        print(p, ends[p])


def consume(bootstrap, topic, group, count=None):
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    consumer.subscribe([topic])
    deadline = time.monotonic() + DEADLINE_S
    read = 0
    ends = None
    want = None if count is None else int(count)
    while want is None or read < want:
        if time.monotonic() > deadline:
            sys.exit("consume: %d records in %d s, no more" % (read, DEADLINE_S))
        batches = consumer.poll(timeout_ms=500, max_records=1 if want is not None else 500)
        if want is None and ends is None and consumer.assignment():
            ends = consumer.end_offsets(list(consumer.assignment()))
        for tp, records in batches.items():
            for r in records:
                print(tp.partition, r.offset, r.key.decode(), r.value.decode())
                read += 1
        if want is None and ends is not None and all(
            consumer.position(tp) >= end for tp, end in ends.items()
        ):
            break
    # Every assigned partition's position: the offset after the last record this app was
    # given (0 for a partition it read nothing of), never one it was not given.
    last = {tp: consumer.position(tp) for tp in consumer.assignment()}
    consumer.commit({tp: OffsetAndMetadata(o, "", -1) for tp, o in last.items()})
    consumer.close()
    for tp in sorted(last, key=lambda t: t.partition):
        print("committed", tp.partition, last[tp])


def offset_syncs(bootstrap, topic):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    end = consumer.end_offsets([tp])[tp]
    deadline = time.monotonic() + DEADLINE_S
    while consumer.position(tp) < end:
        if time.monotonic() > deadline:
            sys.exit("offset-syncs: not at the end offset %d in %d s" % (end, DEADLINE_S))
        for r in consumer.poll(timeout_ms=500).get(tp, []):
            (n,) = struct.unpack_from(">h", r.key, 0)
            name = r.key[2 : 2 + n].decode()
            (partition,) = struct.unpack_from(">i", r.key, 2 + n)
            upstream, downstream = struct.unpack_from(">qq", r.value, 0)
            print(name, partition, upstream, downstream)
    consumer.close()


COMMANDS = {"create": create, "produce": produce, "consume": consume, "offset-syncs": offset_syncs}

if __name__ == "__main__":
    COMMANDS[sys.argv[1]](*sys.argv[2:])
