"""confluent-kafka (a current librdkafka) against a kpfs listener, for the tests/shell
client tests.

Usage: confluent_client.py produce BOOTSTRAP TOPIC CODEC COUNT
  An idempotent Producer (enable.idempotence=true, so acks=all) with
  compression.type=CODEC (none, gzip, snappy, lz4, zstd) sends COUNT records
  "CODEC record I of a compressible payload ..." lingering long enough that they go in
  one batch, waits for every delivery report and prints "delivered N offsets A..B", or
  the first delivery error.
"""

import sys

from confluent_kafka import Producer

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


if __name__ == "__main__":
    if len(sys.argv) != 6 or sys.argv[1] != "produce":
        sys.exit(__doc__)
    produce(*sys.argv[2:])
