"""Start-up as a producer sees it, for scripts/bench (scenario kafka).

    python bench-kafka-startup.py BOOTSTRAP TOPIC READY_FILE

Makes a confluent-kafka (librdkafka) producer, creates READY_FILE, and sends one record of
100 bytes to TOPIC, again whenever a try fails, until the server at BOOTSTRAP
acknowledges it (acks=1). The caller starts the server once READY_FILE exists, so the
client's own start (Python, the library) is never counted; the producer meanwhile
reconnects every few milliseconds. Prints acked_ns: the wall clock (CLOCK_REALTIME, as
`date +%s%N`) at the acknowledgement.
"""

import sys
import time

from confluent_kafka import KafkaError, Producer

RECORD_BYTES = 100
# How long a server may take to acknowledge before the run counts as broken.
DEADLINE_S = 120


def main():
    bootstrap, topic, ready_file = sys.argv[1], sys.argv[2], sys.argv[3]
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": 0,
            "enable.idempotence": False,
            # Reconnect and ask for metadata again within milliseconds: the resolution of
            # the measurement. librdkafka's defaults (100 ms, backing off to 10 s) would
            # measure its back-off rather than the server.
            "reconnect.backoff.ms": 1,
            "reconnect.backoff.max.ms": 5,
            "retry.backoff.ms": 5,
            "retry.backoff.max.ms": 5,
            "topic.metadata.refresh.fast.interval.ms": 5,
            # A try that fails is made again here, not after librdkafka's 5 minutes.
            "message.timeout.ms": 2000,
            # Refused connections until the server listens are the point, not news.
            "log_level": 0,
            "error_cb": lambda _error: None,
        }
    )
    acked_ns = []
    failures = []

    def delivered(error, _message):
        if error is None:
            acked_ns.append(time.time_ns())
        else:
            failures.append(error)

    open(ready_file, "w").close()
    deadline = time.monotonic() + DEADLINE_S
    record = b"s" * RECORD_BYTES
    while not acked_ns:
        if time.monotonic() > deadline:
            last = failures[-1] if failures else KafkaError(KafkaError._TIMED_OUT)
            sys.exit(f"bench-kafka-startup: no acknowledgement from {bootstrap} in {DEADLINE_S} s: {last}")
        producer.produce(topic, record, on_delivery=delivered)
        producer.flush(DEADLINE_S)
    print(f"acked_ns: {acked_ns[0]}")


if __name__ == "__main__":
    main()
