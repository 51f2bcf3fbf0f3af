"""Commit latency through a Kafka listener, for scripts/bench (scenario wire_commit).

    python bench-group-commit.py BOOTSTRAP COUNT

One confluent-kafka (librdkafka) consumer joins group kpfs-bench-commit on topic
kpfs-bench-commit (which must exist) and, once it has its assignment,
commits offsets 1, 2, ... COUNT of partition 0, one at a time, each with
commit(asynchronous=False): the time from the call to its return is one commit's
latency, OffsetCommit's round trip through librdkafka included. Prints p50_ms, p99_ms,
max_ms and commits, one a line. The first 10 commits (connections warming up) are not
counted.
"""

import sys
import time

from confluent_kafka import Consumer, TopicPartition

TOPIC = "kpfs-bench-commit"
WARM_UP = 10
DEADLINE_S = 60


def percentile(sorted_values, fraction):
    """The nearest-rank percentile of an ascending list."""
    rank = max(1, -(-len(sorted_values) * fraction // 1))
    return sorted_values[int(rank) - 1]


def main():
    bootstrap, count = sys.argv[1], int(sys.argv[2])
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kpfs-bench-commit",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([TOPIC])
    deadline = time.monotonic() + DEADLINE_S
    while not consumer.assignment():
        if time.monotonic() > deadline:
            sys.exit("bench-group-commit: no assignment within the deadline")
        consumer.poll(0.1)
    latencies = []
    for offset in range(1, WARM_UP + count + 1):
        start = time.perf_counter()
        committed = consumer.commit(
            offsets=[TopicPartition(TOPIC, 0, offset)], asynchronous=False
        )
        elapsed_ms = (time.perf_counter() - start) * 1000
        if committed[0].error is not None:
            sys.exit(f"bench-group-commit: commit {offset} failed: {committed[0].error}")
        if offset > WARM_UP:
            latencies.append(elapsed_ms)
    back = consumer.committed([TopicPartition(TOPIC, 0)], timeout=DEADLINE_S)[0].offset
    if back != WARM_UP + count:
        sys.exit(f"bench-group-commit: the committed offset reads back as {back}")
    consumer.close()
    latencies.sort()
    print(f"p50_ms: {percentile(latencies, 0.50):.3f}")
    print(f"p99_ms: {percentile(latencies, 0.99):.3f}")
    print(f"max_ms: {latencies[-1]:.3f}")
    print(f"commits: {len(latencies)}")


if __name__ == "__main__":
    main()
