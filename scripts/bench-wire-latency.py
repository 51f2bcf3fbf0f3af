"""End-to-end latency through a Kafka listener, for scripts/bench (scenario wire_latency).

    python bench-wire-latency.py BOOTSTRAP TOPIC COUNT RATE

One confluent-kafka (librdkafka) producer sends COUNT records of 100 bytes, RATE a
second, with acks=1 and linger.ms=0; one consumer in another process fetches them as
they come (long poll) and notes, for each, the time from just before `produce()` to the
moment `poll()` hands it over. The send time travels in the record (CLOCK_MONOTONIC,
which both processes share). Prints p50_ms, p99_ms, max_ms and records, one a line.

Before the timed records, the producer sends warm-up records until the consumer has
received one: connections, metadata and the first fetch are not the latency asked about.
"""

import multiprocessing
import struct
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

RECORD_BYTES = 100
WARM_UP = b"w"
TIMED = b"t"
# How long anything may take before the run counts as broken.
DEADLINE_S = 60


def percentile(sorted_values, fraction):
    """The nearest-rank percentile of an ascending list."""
    rank = max(1, -(-len(sorted_values) * fraction // 1))
    return sorted_values[int(rank) - 1]


def consume(bootstrap, topic, count, warmed, results):
    # group.id is required by confluent-kafka; nothing is committed and no group is
    # joined (assign, not subscribe), as kcat's simple consumer.
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kpfs-bench-latency",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 500,
            "fetch.min.bytes": 1,
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    latencies = []
    deadline = time.monotonic() + DEADLINE_S + count / 100
    while len(latencies) < count and time.monotonic() < deadline:
        message = consumer.poll(0.1)
        received = time.monotonic_ns()
        if message is None:
            continue
        if message.error():
            raise RuntimeError(f"consumer: {message.error()}")
        value = message.value()
        if value[:1] == WARM_UP:
            warmed.set()
        elif value[:1] == TIMED:
            (sent,) = struct.unpack_from(">q", value, 1)
            latencies.append((received - sent) / 1e6)
    consumer.close()
    results.put(latencies)


def main():
    bootstrap, topic, count, rate = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    warmed = multiprocessing.Event()
    results = multiprocessing.Queue()
    consumer = multiprocessing.Process(target=consume, args=(bootstrap, topic, count, warmed, results))
    consumer.start()
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0, "enable.idempotence": False}
    )
    failures = []

    def delivered(error, _message):
        if error is not None:
            failures.append(error)

    padding = b"x" * (RECORD_BYTES - 9)
    deadline = time.monotonic() + DEADLINE_S
    while not warmed.is_set():
        if time.monotonic() > deadline or not consumer.is_alive():
            sys.exit("bench-wire-latency: the consumer never received a warm-up record")
        producer.produce(topic, WARM_UP + b"\0" * (RECORD_BYTES - 1), on_delivery=delivered)
        producer.poll(0)
        warmed.wait(0.01)
    start = time.monotonic()
    for i in range(count):
        pause = start + i / rate - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        producer.produce(topic, TIMED + struct.pack(">q", time.monotonic_ns()) + padding, on_delivery=delivered)
        producer.poll(0)
    producer.flush(DEADLINE_S)
    latencies = sorted(results.get(timeout=DEADLINE_S))
    consumer.join()
    if failures:
        sys.exit(f"bench-wire-latency: {len(failures)} records not delivered: {failures[0]}")
    if len(latencies) != count:
        sys.exit(f"bench-wire-latency: the consumer received {len(latencies)} of {count} records")
    print(f"p50_ms: {percentile(latencies, 0.50):.3f}")
    print(f"p99_ms: {percentile(latencies, 0.99):.3f}")
    print(f"max_ms: {latencies[-1]:.3f}")
    print(f"records: {len(latencies)}")


if __name__ == "__main__":
    main()
