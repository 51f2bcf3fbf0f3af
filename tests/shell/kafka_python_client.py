"""kafka-python against a kpfs listener, for the tests/shell/t_kafka_*.sh client tests.

Usage: kafka_python_client.py COMMAND BOOTSTRAP ARGS...

  consume TOPIC OFFSET COUNT [RESET]  a consumer without a group, assigned partition 0 and
        positioned at OFFSET (or, for "-", by RESET alone); prints COUNT records, one
        "offset key value" line each (key and value as Python reprs, None for null), then
        the position. RESET is auto_offset_reset: earliest (default), latest or none; an
        error the consumer raises ends it with the error's name and text.
  produce TOPIC COUNT   KafkaProducer with its defaults (idempotent, acks=all): COUNT
        records key-I value-I, flushed; prints each record's offset, then the producer id.
  transactional ID TOPIC   a KafkaProducer with transactional_id ID: init_transactions,
        then a transaction of "committed-0".."committed-2" into TOPIC's partition 0 that it
        commits, and one of "aborted-0", "aborted-1" (flushed, so they are in the log) that
        it aborts; prints a line per step (or the error a step raised, as "Name: text").
        Then a read_committed consumer without a group reads TOPIC from the beginning to
        its end offset (the last stable offset) and prints "offset value" per record and
        the position it ended at.
  retry TOPIC           the same idempotent batch sent again, as a producer retries it, on
        the same connection and after dropping the connection before the acknowledgement;
        prints each answer's error code and base offset.
  create TOPIC [PARTITIONS] [KEY=VALUE...]   CreateTopics; prints OK or the error.
  describe TYPE NAME KEY...  DescribeConfigs of a topic or the broker (TYPE topic or broker):
        one "KEY=VALUE (SOURCE)" line per KEY.
  alter TYPE NAME KEY=VALUE...  IncrementalAlterConfigs (kafka-python's choice); prints OK or
        the error kpfs answered.
  delete TOPIC [PATH]   DeleteTopics; prints OK or the error. With PATH (the topic's folder
        in a mount), stats it just before the request, so the kernel has its entry cached,
        and again as soon as the answer is in; prints whether it was still there.
  list                  Metadata: the topic names, one a line.

Records, configs and errors are printed as the client library reports them, so the shell
test compares what a real client sees. Every wait is bounded by a timeout.
"""

import os
import socket
import struct
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
from kafka.errors import KafkaError
from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.producer import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafka.record.default_records import DefaultRecordBatchBuilder

TIMEOUT_MS = 10_000


def shown(data):
    return "None" if data is None else repr(data)


def consume(bootstrap, topic, offset, count, reset="earliest"):
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset=reset,
        request_timeout_ms=TIMEOUT_MS,
    )
    partition = TopicPartition(topic, 0)
    consumer.assign([partition])
    if offset != "-":
        consumer.seek(partition, int(offset))
    wanted = int(count)
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    got = 0
    while got < wanted and time.monotonic() < deadline:
        try:
            records = consumer.poll(timeout_ms=500, max_records=wanted - got).get(partition, [])
        except KafkaError as error:  # e.g. OffsetOutOfRangeError under reset "none"
            sys.exit(f"{type(error).__name__}: {error}")
        for record in records:
            print(record.offset, shown(record.key), shown(record.value))
        got += len(records)
    if got < wanted:
        sys.exit(f"only {got} of {wanted} records within {TIMEOUT_MS} ms")
    print("position", consumer.position(partition))
    consumer.close()


def produce(bootstrap, topic, count):
    producer = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_MS)
    futures = [
        producer.send(topic, key=f"key-{i}".encode(), value=f"value-{i}".encode())
        for i in range(int(count))
    ]
    producer.flush(timeout=TIMEOUT_MS / 1000)
    for future in futures:
        print(future.get(timeout=TIMEOUT_MS / 1000).offset)
    print("producer_id", producer._transaction_manager.producer_id_and_epoch.producer_id)
    producer.close()


def transactional(bootstrap, transactional_id, topic):
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        transactional_id=transactional_id,
        max_block_ms=TIMEOUT_MS,
        request_timeout_ms=TIMEOUT_MS,
    )
    try:
        producer.init_transactions()
        print("initialized")
        for outcome, values in (("committed", 3), ("aborted", 2)):
            producer.begin_transaction()
            futures = [
                producer.send(topic, value=f"{outcome}-{i}".encode(), partition=0)
                for i in range(values)
            ]
            producer.flush(timeout=TIMEOUT_MS / 1000)
            offsets = " ".join(str(future.get(timeout=TIMEOUT_MS / 1000).offset) for future in futures)
            if outcome == "committed":
                producer.commit_transaction()
            else:
                producer.abort_transaction()
            print(outcome, offsets)
    except KafkaError as e:
        sys.exit(f"{type(e).__name__}: {e}")
    finally:
        producer.close(timeout=TIMEOUT_MS / 1000)
    read_committed(bootstrap, topic)


def read_committed(bootstrap, topic):
    """Reads partition 0 of TOPIC as a read_committed consumer, from the beginning to its
    end offset, which for such a consumer is the last stable offset."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        isolation_level="read_committed",
        request_timeout_ms=TIMEOUT_MS,
    )
    partition = TopicPartition(topic, 0)
    consumer.assign([partition])
    end = consumer.end_offsets([partition])[partition]
    consumer.seek_to_beginning(partition)
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while consumer.position(partition) < end:
        if time.monotonic() > deadline:
            sys.exit(f"position {consumer.position(partition)} short of the end offset {end}")
        for record in consumer.poll(timeout_ms=500).get(partition, []):
            print(record.offset, shown(record.value))
    print("position", consumer.position(partition))
    consumer.close()


class Connection:
    """One TCP connection speaking kafka-python's request and response classes."""

    def __init__(self, bootstrap):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=TIMEOUT_MS / 1000)
        self.correlation_id = 0

    def send(self, request, version):
        self.correlation_id += 1
        request.with_header(correlation_id=self.correlation_id, client_id="kpfs-retry-test")
        self.sock.sendall(request.encode(version=version, header=True, framed=True))

    def receive(self, response_class, version):
        (size,) = struct.unpack(">i", self.read_exactly(4))
        return response_class.decode(self.read_exactly(size), version=version, header=True)

    def read_exactly(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
        return data

    def close(self):
        self.sock.close()


PRODUCE_VERSION = 8


def produce_request(topic, batch):
    return ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=TIMEOUT_MS,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=batch)
                ],
            )
        ],
    )


def answer(connection):
    response = connection.receive(ProduceResponse, PRODUCE_VERSION)
    partition = response.responses[0].partition_responses[0]
    return f"error={partition.error_code} base_offset={partition.base_offset}"


def log_end_offset(connection, topic):
    partition = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition
    connection.send(
        ListOffsetsRequest(
            replica_id=-1,
            topics=[
                ListOffsetsRequest.ListOffsetsTopic(
                    name=topic, partitions=[partition(partition_index=0, timestamp=-1)]
                )
            ],
        ),
        1,
    )
    return connection.receive(ListOffsetsResponse, 1).topics[0].partitions[0].offset


def retry(bootstrap, topic):
    connection = Connection(bootstrap)
    connection.send(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1), 1)
    ids = connection.receive(InitProducerIdResponse, 1)
    assert ids.error_code == 0, ids

    def batch(sequence, values):
        builder = DefaultRecordBatchBuilder(
            magic=2,
            compression_type=0,
            is_transactional=False,
            producer_id=ids.producer_id,
            producer_epoch=ids.producer_epoch,
            base_sequence=sequence,
            batch_size=1 << 20,
        )
        now = int(time.time() * 1000)
        for i, value in enumerate(values):
            builder.append(i, timestamp=now, key=None, value=value, headers=[])
        return bytes(builder.build())

    first = batch(0, [b"retried-0", b"retried-1", b"retried-2"])
    connection.send(produce_request(topic, first), PRODUCE_VERSION)
    answered_first = answer(connection)
    print("first", answered_first)
    # A retry on the same connection, as after a request timeout.
    connection.send(produce_request(topic, first), PRODUCE_VERSION)
    print("same-connection-retry", answer(connection))
    # The connection dropped between send and acknowledgement: the batch was appended, the
    # producer never learnt it, reconnects and sends it again.
    connection.send(produce_request(topic, batch(3, [b"retried-3"])), PRODUCE_VERSION)
    connection.close()
    connection = Connection(bootstrap)
    end_after_first = int(answered_first.split("base_offset=")[1]) + 3
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while log_end_offset(connection, topic) != end_after_first + 1:
        if time.monotonic() > deadline:
            sys.exit("the batch sent before the connection dropped was never appended")
        time.sleep(0.05)
    connection.send(produce_request(topic, batch(3, [b"retried-3"])), PRODUCE_VERSION)
    print("reconnected-retry", answer(connection))
    connection.send(produce_request(topic, batch(4, [b"retried-4"])), PRODUCE_VERSION)
    print("next", answer(connection))
    # A gap in the sequence is refused (OUT_OF_ORDER_SEQUENCE_NUMBER) and appends nothing.
    connection.send(produce_request(topic, batch(9, [b"out-of-order"])), PRODUCE_VERSION)
    print("gap", answer(connection))
    connection.close()


def admin(bootstrap):
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_MS)


def resource(kind, name, configs=None):
    types = {"topic": ConfigResourceType.TOPIC, "broker": ConfigResourceType.BROKER}
    return ConfigResource(types[kind], name, configs=configs)


def key_values(settings):
    return dict(setting.split("=", 1) for setting in settings)


def reported(action):
    """Runs an admin call; prints OK, or the error as the client raises it."""
    try:
        action()
        print("OK")
    except Exception as error:  # what the user of the client would see is the test's subject
        print(type(error).__name__, error)


def create(bootstrap, topic, partitions="1", *settings):
    topics = {topic: {"num_partitions": int(partitions), "configs": key_values(settings)}}
    reported(lambda: admin(bootstrap).create_topics(topics))


def describe(bootstrap, kind, name, *keys):
    described = admin(bootstrap).describe_configs(
        [resource(kind, name)], config_filter="all"
    )
    configs = described[kind][name]
    for key in keys:
        entry = configs[key]
        print(f"{key}={entry['value']} ({entry['config_source']})")


def alter(bootstrap, kind, name, *settings):
    # raise_on_unknown=False: kpfs, not kafka-python's check against DescribeConfigs's
    # read-only flags, is to refuse a static config.
    result = admin(bootstrap).alter_configs(
        [resource(kind, name, key_values(settings))], raise_on_unknown=False
    )
    print(result[kind][name])


def delete(bootstrap, topic, path=None):
    client = admin(bootstrap)
    if path is not None:
        os.stat(path)
    reported(lambda: client.delete_topics([topic]))
    if path is not None:
        print("still there" if os.path.exists(path) else "gone")


def list_topics(bootstrap):
    for name in sorted(admin(bootstrap).list_topics()):
        print(name)


COMMANDS = {
    "consume": consume,
    "produce": produce,
    "retry": retry,
    "transactional": transactional,
    "create": create,
    "describe": describe,
    "alter": alter,
    "delete": delete,
    "list": list_topics,
}

if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in COMMANDS:
        sys.exit(__doc__)
    COMMANDS[sys.argv[1]](*sys.argv[2:])
