"""confluent-kafka (a current librdkafka) against a kpfs listener, for the tests/shell
client tests.

Usage: confluent_client.py produce BOOTSTRAP TOPIC CODEC COUNT
       confluent_client.py topics BOOTSTRAP
       confluent_client.py operations BOOTSTRAP TOPIC
       confluent_client.py transactional BOOTSTRAP ID TOPIC
  An idempotent Producer (enable.idempotence=true, so acks=all) with
  compression.type=CODEC (none, gzip, snappy, lz4, zstd) sends COUNT records
  "CODEC record I of a compressible payload ..." lingering long enough that they go in
  one batch, waits for every delivery report and prints "delivered N offsets A..B", or
  the first delivery error.
topics: the AdminClient's list_topics (librdkafka's Metadata request for every topic),
  one name a line.
operations: the AdminClient's describe_topics and describe_cluster with
  include_authorized_operations: "topic N: OPS" and "cluster N: OPS", the operations by
  name, sorted.
transactional: a Producer with transactional.id ID: init_transactions, then a transaction
  of "committed-0".."committed-2" into TOPIC's partition 0 that it commits, and one of
  "aborted-0", "aborted-1" (flushed, so they are in the log) that it aborts; prints a line
  per step with the offsets delivered, or the error a step raised and whether it is fatal.
  Then a read_committed Consumer without a group reads TOPIC from the beginning to its
  high watermark (for such a consumer the last stable offset): "offset value" per record
  and the position it ended at.
"""

import sys
import time

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

TIMEOUT_S = 10


def produce(bootstrap, topic, codec, count):
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": codec,
            "enable.idempotence": True,
            "linger.ms": 200,
            "message.timeout.ms": TIMEOUT_S * 1000,
        }
    )
    offsets, errors = [], []

    def delivered(error, message):
        if error is not None:
            errors.append(error)
        else:
            offsets.append(message.offset())

    for i in range(int(count)):
        value = f"{codec} record {i} of a compressible payload {'x' * 40}"
        producer.produce(topic, value=value.encode(), on_delivery=delivered)
    left = producer.flush(TIMEOUT_S)
    if errors:
        sys.exit(f"delivery failed: {errors[0]}")
    if left:
        sys.exit(f"{left} records not delivered within {TIMEOUT_S} s")
    print(f"delivered {len(offsets)} offsets {min(offsets)}..{max(offsets)}")


def topics(bootstrap):
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=TIMEOUT_S)
    for name in sorted(metadata.topics):
        print(name)


def operations(bootstrap, topic):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_topics(
        TopicCollection([topic]), include_authorized_operations=True, request_timeout=TIMEOUT_S
    )[topic].result()
    cluster = admin.describe_cluster(
        include_authorized_operations=True, request_timeout=TIMEOUT_S
    ).result()
    for what, ops in (("topic", described.authorized_operations), ("cluster", cluster.authorized_operations)):
        names = sorted(op.name for op in ops or [])
        print(f"{what} {len(names)}: {' '.join(names)}")


def transactional(bootstrap, transactional_id, topic):
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "log_level": 0}
    )
    try:
        producer.init_transactions(TIMEOUT_S)
        print("initialized")
        for outcome, values in (("committed", 3), ("aborted", 2)):
            producer.begin_transaction()
            offsets, errors = [], []

            def delivered(error, message):
                if error is not None:
                    errors.append(error)
                else:
                    offsets.append(message.offset())

            for i in range(values):
                producer.produce(
                    topic, value=f"{outcome}-{i}".encode(), partition=0, on_delivery=delivered
                )
            left = producer.flush(TIMEOUT_S)
            if errors or left:
                sys.exit(f"{outcome}: delivery failed: {errors or f'{left} not delivered'}")
            if outcome == "committed":
                producer.commit_transaction(TIMEOUT_S)
            else:
                producer.abort_transaction(TIMEOUT_S)
            print(outcome, " ".join(map(str, sorted(offsets))))
    except KafkaException as e:
        sys.exit(f"{e.args[0].str()} (fatal: {e.args[0].fatal()})")
    read_committed(bootstrap, topic)


def read_committed(bootstrap, topic):
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",  # librdkafka wants one; assign() never joins it
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "log_level": 0,
        }
    )
    partition = TopicPartition(topic, 0)
    _, end = consumer.get_watermark_offsets(partition, timeout=TIMEOUT_S)
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    deadline = time.monotonic() + TIMEOUT_S

    def position():
        return consumer.position([partition])[0].offset

    while position() < end:
        if time.monotonic() > deadline:
            sys.exit(f"position {position()} short of the high watermark {end}")
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error():
            sys.exit(f"consumer error: {message.error()}")
        print(message.offset(), repr(message.value()))
    print("position", position())
    consumer.close()


if __name__ == "__main__":
    if sys.argv[1:2] == ["produce"] and len(sys.argv) == 6:
        produce(*sys.argv[2:])
    elif sys.argv[1:2] == ["topics"] and len(sys.argv) == 3:
        topics(sys.argv[2])
    elif sys.argv[1:2] == ["operations"] and len(sys.argv) == 4:
        operations(*sys.argv[2:])
    elif sys.argv[1:2] == ["transactional"] and len(sys.argv) == 5:
        transactional(*sys.argv[2:])
    else:
        sys.exit(__doc__)
