"""confluent-kafka (a current librdkafka) against a kpfs listener, for the tests/shell
client tests.

Usage: confluent_client.py produce BOOTSTRAP TOPIC CODEC COUNT
       confluent_client.py topics BOOTSTRAP
       confluent_client.py operations BOOTSTRAP TOPIC
       confluent_client.py transactional BOOTSTRAP ID
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
transactional: a Producer with transactional.id ID: init_transactions, then the error
  it raised and whether it is fatal.
"""

import sys

from confluent_kafka import KafkaException, Producer, TopicCollection
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


def transactional(bootstrap, transactional_id):
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "log_level": 0}
    )
    try:
        producer.init_transactions(TIMEOUT_S)
        print("initialized")
    except KafkaException as e:
        print(f"{e.args[0].str()} (fatal: {e.args[0].fatal()})")


if __name__ == "__main__":
    if sys.argv[1:2] == ["produce"] and len(sys.argv) == 6:
        produce(*sys.argv[2:])
    elif sys.argv[1:2] == ["topics"] and len(sys.argv) == 3:
        topics(sys.argv[2])
    elif sys.argv[1:2] == ["operations"] and len(sys.argv) == 4:
        operations(*sys.argv[2:])
    elif sys.argv[1:2] == ["transactional"] and len(sys.argv) == 4:
        transactional(*sys.argv[2:])
    else:
        sys.exit(__doc__)
