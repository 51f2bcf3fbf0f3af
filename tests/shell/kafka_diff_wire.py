"""Sends the same Kafka requests to Apache Kafka and to kpfs and writes what each answered.

    kafka_diff_wire.py refusals KAFKA_BOOTSTRAP KPFS_BOOTSTRAP OUT_DIR
    kafka_diff_wire.py compaction KAFKA_BOOTSTRAP KPFS_BOOTSTRAP OUT_DIR

Each scenario is one request (or a short sequence) built with kafka-python's protocol
classes (generated from Kafka's own JSON schemas, written independently of kpfs) and sent
on a plain socket, so that bad inputs a client library would refuse to send reach the
broker. Both brokers get the same bytes, at the same API version (the highest both
serve). OUT_DIR/NAME.kafka and OUT_DIR/NAME.kpfs hold the decoded answers as sorted JSON,
normalised only for what must differ between two brokers: throttle times, topic ids,
member ids, hosts and ports. A request the broker answers by closing the connection
reads {"connection": "closed"}.

"refusals" runs the bad inputs (error codes and messages). "compaction" runs the
ListOffsets and Fetch scenarios on topics that retention and the cleaner acted on; it
first produces their workload on both and polls (with a deadline) until both brokers'
retention and cleaner are done, so that it compares finished states.
"""

import json
import os
import re
import socket
import struct
import sys
import time

from kafka.protocol.admin.configs import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kafka.protocol.admin.groups import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)
from kafka.protocol.admin import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)
from kafka.protocol.admin.topics import (
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.consumer.group import (
    JoinGroupRequest,
    JoinGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kafka.protocol.consumer.offsets import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

# The record timestamps of every workload: an hour before the run, so that no retention
# by time acts on them (retention.ms stays at its 7 days) and the test means the same on
# any day; normalise() writes them relative to this base.
T0 = (int(time.time()) - 3600) * 1000


def build(cls, value):
    """A kafka-python message or struct of class CLS from a plain dict (nested dicts and
    lists of dicts become the schema's nested structs)."""
    fields = {}
    for name, v in value.items():
        field = cls.fields[name]
        if field.is_struct_array() and v is not None:
            v = [build(field.data_class, item) for item in v]
        elif field.is_struct() and v is not None:
            v = build(field.data_class, v)
        fields[name] = v
    return cls(**fields)


class Closed(Exception):
    pass


class Broker:
    """One connection to one broker, with the API versions it serves."""

    def __init__(self, bootstrap):
        host, port = bootstrap.rsplit(":", 1)
        self.address = (host, int(port))
        self.sock = None
        self.correlation = 0
        versions = self.call(ApiVersionsRequest, ApiVersionsResponse, 0, {})
        self.versions = {k["api_key"]: (k["min_version"], k["max_version"]) for k in versions["api_keys"]}

    def connect(self):
        self.sock = socket.create_connection(self.address, timeout=30)

    def call(self, req_cls, resp_cls, version, body, as_json=True):
        """Sends BODY at VERSION; the decoded answer as a dict (AS_JSON: of values JSON
        takes, which loses bytes fields), {"connection": "closed"} when the broker closed
        the connection instead."""
        if self.sock is None:
            self.connect()
        self.correlation += 1
        req = build(req_cls, body)
        req.with_header(correlation_id=self.correlation, client_id="kpfs-diff-wire")
        try:
            self.sock.sendall(req.encode(version=version, header=True, framed=True))
            if not req.expect_response():
                return {"response": "none"}
            size = struct.unpack(">i", self.read(4))[0]
            data = self.read(size)
        except (Closed, ConnectionResetError, BrokenPipeError):
            self.sock.close()
            self.sock = None
            return {"connection": "closed"}
        return resp_cls.decode(data, version=version, header=True).to_dict(json=as_json)

    def api_versions_at(self, version):
        """ApiVersions at a VERSION no broker serves, encoded as its newest version (as a
        client newer than the broker sends it): the error code of the version-0 answer a
        broker gives then, and whether it lists its APIs."""
        if self.sock is None:
            self.connect()
        self.correlation += 1
        req = build(ApiVersionsRequest, {"client_software_name": "kpfs-diff-wire", "client_software_version": "1"})
        req.with_header(correlation_id=self.correlation, client_id="kpfs-diff-wire")
        frame = bytearray(req.encode(version=ApiVersionsRequest.max_version, header=True, framed=True))
        # The frame's size (4 bytes), the API key (2), then the version.
        struct.pack_into(">h", frame, 6, version)
        try:
            self.sock.sendall(bytes(frame))
            size = struct.unpack(">i", self.read(4))[0]
            data = self.read(size)
        except (Closed, ConnectionResetError, BrokenPipeError):
            self.sock.close()
            self.sock = None
            return {"connection": "closed"}
        answer = ApiVersionsResponse.decode(data, version=0, header=True).to_dict()
        return {"error_code": answer["error_code"], "lists_apis": bool(answer["api_keys"])}

    def read(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise Closed()
            buf += chunk
        return buf


class Pair:
    """The two brokers; each scenario runs on both and writes OUT/NAME.{kafka,kpfs}."""

    def __init__(self, kafka_bootstrap, kpfs_bootstrap, out):
        self.sides = {"kafka": Broker(kafka_bootstrap), "kpfs": Broker(kpfs_bootstrap)}
        self.out = out
        self.names = []

    def version(self, req_cls):
        """The highest version of REQ_CLS both brokers and kafka-python serve."""
        key = req_cls.API_KEY
        top = req_cls.max_version
        for broker in self.sides.values():
            if key not in broker.versions:
                sys.exit(f"a broker does not serve {req_cls.__name__}")
            top = min(top, broker.versions[key][1])
        return top

    def each(self, req_cls, resp_cls, body, version=None):
        """The same request on both brokers; {side: answer}."""
        v = self.version(req_cls) if version is None else version
        return {side: b.call(req_cls, resp_cls, v, body) for side, b in self.sides.items()}

    def check(self, name, req_cls, resp_cls, body, version=None, pick=None):
        """A scenario: the request on both, the normalised answers (or PICK of them) kept."""
        answers = self.each(req_cls, resp_cls, body, version)
        for side, answer in answers.items():
            self.write(name, side, pick(answer) if pick else answer)
        return answers

    def write(self, name, side, value):
        if name not in self.names:
            self.names.append(name)
        with open(os.path.join(self.out, f"{name}.{side}"), "w") as f:
            json.dump(normalise(value), f, indent=1, sort_keys=True)
            f.write("\n")


# Fields whose values each broker makes its own: ids it draws, its address.
PER_BROKER_FIELDS = {"topic_id", "member_id", "host", "port"}


def normalise(value, key=None):
    if isinstance(value, dict):
        return {k: normalise(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    if key == "throttle_time_ms":
        return 0
    if key in PER_BROKER_FIELDS and value not in (None, "", -1):
        return key.upper()
    if key in ("timestamp", "max_timestamp") and isinstance(value, int) and value >= T0 - 86400000:
        return f"T0+{value - T0}"
    if isinstance(value, str):
        return re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "UUID", value)
    return value


# --- Requests, as dicts of kafka-python's field names.


def configs_listed(answer):
    for topic in answer["topics"]:
        if topic.get("configs"):
            topic["configs"] = "listed"
    return answer


def create_topic(name, partitions=1, replication=1, configs=None, assignments=None, validate_only=False):
    return {
        "topics": [
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": replication,
                "assignments": assignments or [],
                "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
            }
        ],
        "timeout_ms": 30000,
        "validate_only": validate_only,
    }


def batch(records, base_ts=T0):
    """A RecordBatch v2 of RECORDS ((key, value) pairs; offsets 0.., timestamps
    BASE_TS + offset)."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20,
    )
    for i, (k, v) in enumerate(records):
        builder.append(i, timestamp=base_ts + i, key=k, value=v, headers=[])
    return bytes(builder.build())


def reseal(data):
    """DATA with its CRC32C recomputed (after a change a broker must catch otherwise)."""
    from kafka.record._crc32c import crc as crc32c

    data = bytearray(data)
    struct.pack_into(">I", data, DefaultRecordBatch.CRC_OFFSET, crc32c(bytes(data[DefaultRecordBatch.ATTRIBUTES_OFFSET:])))
    return bytes(data)


def produce(topic, records_bytes, acks=-1, partition=0):
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 30000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records_bytes}]}],
    }


def fetch(topic, offset, partition=0, max_bytes=1 << 20):
    return {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{"partition": partition, "current_leader_epoch": -1, "fetch_offset": offset, "log_start_offset": -1, "partition_max_bytes": max_bytes}]}],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def list_offsets(topic, timestamp, partition=0):
    return {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1, "timestamp": timestamp}]}],
    }


def delete_records(topic, offset, partition=0):
    return {"topics": [{"name": topic, "partitions": [{"partition_index": partition, "offset": offset}]}], "timeout_ms": 30000}


def create_partitions(topics, validate_only=False):
    """CreatePartitions of TOPICS: (name, count, assignments or None) each."""
    return {
        "topics": [
            {"name": name, "count": count, "assignments": None if assignments is None else [{"broker_ids": b} for b in assignments]}
            for name, count, assignments in topics
        ],
        "timeout_ms": 30000,
        "validate_only": validate_only,
    }


def fetch_partitions(topic, offsets, max_bytes=1 << 20):
    """A Fetch of each (partition, offset) of TOPIC in one request."""
    body = fetch(topic, 0, max_bytes=max_bytes)
    body["topics"][0]["partitions"] = [
        {"partition": p, "current_leader_epoch": -1, "fetch_offset": o, "log_start_offset": -1, "partition_max_bytes": 1 << 20}
        for p, o in offsets
    ]
    return body


def alter_configs(resource_type, name, configs):
    return {
        "resources": [{"resource_type": resource_type, "resource_name": name, "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
        "validate_only": False,
    }


def incremental(resource_type, name, ops):
    """OPS: (name, operation, value) with operation 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT."""
    return {
        "resources": [{"resource_type": resource_type, "resource_name": name, "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops]}],
        "validate_only": False,
    }


TOPIC, BROKER = 2, 4
# What the names of the "compaction" scenarios' topics (after-retention, after-compaction)
# start with: they run beside the "refusals" ones.
COMPACTION_PREFIX = "after-"
# A RecordBatch v2 header: base offset (8 bytes), length (4), leader epoch (4), magic.
MAGIC_OFFSET = 16


def offset_commit(group, topic, partition=0, offset=1):
    return {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "retention_time_ms": -1,
        "topics": [{"name": topic, "partitions": [{"partition_index": partition, "committed_offset": offset, "committed_leader_epoch": -1, "committed_metadata": ""}]}],
    }


def offset_fetch(group, topic=None):
    return {
        "groups": [{"group_id": group, "member_id": None, "member_epoch": -1, "topics": None if topic is None else [{"name": topic, "partition_indexes": [0]}]}],
        "require_stable": False,
    }


def join_group(group, session_timeout_ms, rebalance_timeout_ms=30000):
    return {
        "group_id": group,
        "session_timeout_ms": session_timeout_ms,
        "rebalance_timeout_ms": rebalance_timeout_ms,
        "member_id": "",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"\x00\x03\x00\x00\x00\x00\x00\x00\x00\x00"}],
        "reason": None,
    }


def refusals(pair):
    # Which configs a created topic lists is the config-describe checks' business; here,
    # whether it lists them.
    c = lambda name, body: pair.check(name, CreateTopicsRequest, CreateTopicsResponse, body, pick=configs_listed)
    # Setup on both: a plain topic with data, a compacted one, one with a small
    # max.message.bytes; each must be created on both for the checks to mean anything.
    create_topics(pair, {"wire-t": None, "wire-compact": {"cleanup.policy": "compact"}, "wire-small": {"max.message.bytes": "200"}, "wire.coll": None, "wire-p3": None, "wire-grow": None}, partitions={"wire-p3": 3})
    # Kafka's group coordinator serves once __consumer_offsets exists, which the first
    # FindCoordinator creates, and it loaded it.
    def coordinator_ready(side):
        broker = pair.sides[side]
        found = broker.call(FindCoordinatorRequest, FindCoordinatorResponse, pair.version(FindCoordinatorRequest), {"key_type": 0, "coordinator_keys": ["wire-g"]})
        if found["coordinators"][0]["error_code"] != 0:
            return False, found
        fetched = broker.call(OffsetFetchRequest, OffsetFetchResponse, pair.version(OffsetFetchRequest), offset_fetch("wire-ready"))
        return fetched["groups"][0]["error_code"] == 0, fetched

    wait_for("the group coordinator", 30, coordinator_ready)
    for _ in range(2):
        for side, answer in pair.each(ProduceRequest, ProduceResponse, produce("wire-t", batch([(b"k", b"v1"), (b"k", b"v2")]))).items():
            if answer["responses"][0]["partition_responses"][0]["error_code"] != 0:
                sys.exit(f"{side}: produce to wire-t: {answer}")

    # CreateTopics: names.
    c("create-name-too-long", create_topic("n" * 250))
    c("create-name-249", create_topic("n" * 249, validate_only=True))
    c("create-name-bad-chars", create_topic("bad name!"))
    c("create-name-dot", create_topic("."))
    c("create-name-dotdot", create_topic(".."))
    c("create-name-empty", create_topic(""))
    c("create-name-collision", create_topic("wire_coll"))
    c("create-exists", create_topic("wire-t"))
    c("create-duplicate-in-request", {**create_topic("dup"), "topics": create_topic("dup")["topics"] * 2})
    # CreateTopics: partitions, replication, assignment.
    c("create-replication-2", create_topic("rf2", replication=2))
    c("create-replication-0", create_topic("rf0", replication=0))
    c("create-partitions-0", create_topic("p0", partitions=0))
    c("create-partitions-minus-2", create_topic("pm2", partitions=-2))
    c("create-partitions-3", create_topic("p3", partitions=3, validate_only=True))
    c("create-assignment-node-1", create_topic("assigned", partitions=-1, replication=-1, assignments=[{"partition_index": 0, "broker_ids": [1]}], validate_only=True))
    c("create-assignment-unknown-node", create_topic("assigned2", partitions=-1, replication=-1, assignments=[{"partition_index": 0, "broker_ids": [7]}]))
    c("create-assignment-and-partitions", create_topic("assigned3", partitions=1, replication=-1, assignments=[{"partition_index": 0, "broker_ids": [1]}]))
    c("create-defaults", create_topic("defaults", partitions=-1, replication=-1, validate_only=True))
    # CreateTopics: configs.
    c("create-config-unknown", create_topic("cfg1", configs={"no.such.config": "1"}))
    c("create-config-not-a-number", create_topic("cfg2", configs={"segment.bytes": "abc"}))
    c("create-config-out-of-range", create_topic("cfg3", configs={"segment.bytes": "400"}))
    c("create-config-bad-enum", create_topic("cfg4", configs={"cleanup.policy": "bogus"}))
    c("create-config-ratio-above-1", create_topic("cfg5", configs={"min.cleanable.dirty.ratio": "1.5"}))
    c("create-config-bad-boolean", create_topic("cfg6", configs={"preallocate": "maybe"}))
    c("create-config-null-value", create_topic("cfg7", configs={"retention.ms": None}))

    # CreatePartitions: refusals, validate_only, growth.
    cp = lambda name, body: pair.check(name, CreatePartitionsRequest, CreatePartitionsResponse, body)
    cp("create-partitions-unknown-topic", create_partitions([("no-such-topic", 3, None)]))
    cp("create-partitions-unchanged", create_partitions([("wire-t", 1, None)]))
    cp("create-partitions-decrease", create_partitions([("wire-p3", 2, None)]))
    cp("create-partitions-zero", create_partitions([("wire-t", 0, None)]))
    cp("create-partitions-negative", create_partitions([("wire-t", -1, None)]))
    cp("create-partitions-duplicate", create_partitions([("wire-t", 2, None), ("wire-t", 3, None)]))
    cp("create-partitions-assignments-too-few", create_partitions([("wire-t", 3, [[1]])]))
    cp("create-partitions-assignment-unknown-node", create_partitions([("wire-t", 2, [[7]])]))
    cp("create-partitions-assignment-empty", create_partitions([("wire-t", 2, [[]])]))
    cp("create-partitions-assignment-twice", create_partitions([("wire-t", 2, [[1, 1]])]))
    cp("create-partitions-assignment-two-replicas", create_partitions([("wire-t", 2, [[1, 7]])]))
    cp("create-partitions-validate-only", create_partitions([("wire-t", 4, None)], validate_only=True))
    cp("create-partitions-grow", create_partitions([("wire-grow", 3, [[1], [1]])]))

    # A topic of three partitions: produce to one, fetch and list offsets of each.
    p3 = lambda name, req, resp, body: pair.check(name, req, resp, body)
    p3("partitions-produce-2", ProduceRequest, ProduceResponse, produce("wire-p3", batch([(b"k", b"two")]), partition=2))
    p3("partitions-produce-1", ProduceRequest, ProduceResponse, produce("wire-p3", batch([(b"k", b"one"), (b"k", b"more")]), partition=1))
    p3("partitions-produce-3", ProduceRequest, ProduceResponse, produce("wire-p3", batch([(b"k", b"none")]), partition=3))
    p3("partitions-fetch", FetchRequest, FetchResponse, fetch_partitions("wire-p3", [(0, 0), (1, 0), (2, 0), (3, 0)]))
    # Only the first partition with records goes over the answer's max_bytes.
    p3("partitions-fetch-max-bytes", FetchRequest, FetchResponse, fetch_partitions("wire-p3", [(0, 0), (1, 0), (2, 0)], max_bytes=1))
    lo3 = list_offsets("wire-p3", -1)
    lo3["topics"][0]["partitions"] = [{"partition_index": p, "current_leader_epoch": -1, "timestamp": -1} for p in range(4)]
    p3("partitions-list-offsets", ListOffsetsRequest, ListOffsetsResponse, lo3)
    dtp = lambda name, body: pair.check(name, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, body)
    dtp("partitions-describe-page-1", {"topics": [{"name": "wire-p3"}, {"name": "wire-t"}], "response_partition_limit": 2, "cursor": None})
    dtp("partitions-describe-page-2", {"topics": [{"name": "wire-p3"}, {"name": "wire-t"}], "response_partition_limit": 2, "cursor": {"topic_name": "wire-p3", "partition_index": 2}})
    dtp("partitions-describe-page-full", {"topics": [{"name": "wire-p3"}, {"name": "wire-t"}], "response_partition_limit": 3, "cursor": None})
    dtp("partitions-describe-cursor-negative", {"topics": [{"name": "wire-p3"}], "response_partition_limit": 3, "cursor": {"topic_name": "wire-p3", "partition_index": -1}})
    dtp("partitions-describe-cursor-past-end", {"topics": [{"name": "wire-p3"}], "response_partition_limit": 3, "cursor": {"topic_name": "wire-p3", "partition_index": 7}})
    # Fetch sessions (KIP-227) over the three partitions: a full fetch (epoch 0) opens one,
    # incremental ones (each side with its own session id) carry only what changed.
    sessions = {}

    def in_session(name, side, epoch, offsets, forgotten=(), session=None):
        body = fetch_partitions("wire-p3", offsets)
        if not offsets:
            body["topics"] = []
        body["session_id"] = sessions.get(side, 0) if session is None else session
        body["session_epoch"] = epoch
        body["forgotten_topics_data"] = [{"topic": "wire-p3", "partitions": list(forgotten)}] if forgotten else []
        answer = pair.sides[side].call(FetchRequest, FetchResponse, pair.version(FetchRequest), body)
        if epoch == 0:
            sessions[side] = answer["session_id"]
        answer["session_id"] = "SESSION" if answer["session_id"] else 0
        pair.write(name, side, answer)

    for side in pair.sides:
        in_session("session-full", side, 0, [(0, 0), (7, 0), (1, 0), (2, 0)])
        in_session("session-incremental-moved", side, 1, [(1, 2), (2, 1)])
    for side, answer in pair.each(ProduceRequest, ProduceResponse, produce("wire-p3", batch([(b"k", b"zero")]), partition=0)).items():
        if answer["responses"][0]["partition_responses"][0]["error_code"] != 0:
            sys.exit(f"{side}: produce to wire-p3: {answer}")
    for side in pair.sides:
        in_session("session-incremental-new-record", side, 2, [], forgotten=[7])
        in_session("session-incremental-nothing-new", side, 3, [(0, 1)])
        in_session("session-stale-epoch", side, 3, [])
        in_session("session-unknown", side, 1, [], session=sessions[side] ^ 1)
        in_session("session-closed-by-sessionless", side, -1, [(0, 1)])
        in_session("session-after-close", side, 5, [])
    oc3 = offset_commit("wire-g3", "wire-p3", partition=2)
    oc3["topics"][0]["partitions"].append({**oc3["topics"][0]["partitions"][0], "partition_index": 3})
    pair.check("partitions-offset-commit", OffsetCommitRequest, OffsetCommitResponse, oc3)

    # AlterConfigs and IncrementalAlterConfigs.
    a = lambda name, body: pair.check(name, AlterConfigsRequest, AlterConfigsResponse, body)
    a("alter-unknown-name", alter_configs(TOPIC, "wire-t", {"no.such.config": "1"}))
    a("alter-not-a-number", alter_configs(TOPIC, "wire-t", {"retention.ms": "soon"}))
    a("alter-out-of-range", alter_configs(TOPIC, "wire-t", {"min.cleanable.dirty.ratio": "2"}))
    a("alter-bad-boolean", alter_configs(TOPIC, "wire-t", {"preallocate": "perhaps"}))
    a("alter-unknown-topic", alter_configs(TOPIC, "no-such-topic", {"retention.ms": "1000"}))
    a("alter-broker-read-only", alter_configs(BROKER, "1", {"log.dirs": "/tmp/x"}))
    a("alter-unknown-broker", alter_configs(BROKER, "7", {"log.retention.ms": "1000"}))
    i = lambda name, body: pair.check(name, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, body)
    i("incremental-unknown-name", incremental(TOPIC, "wire-t", [("no.such.config", 0, "1")]))
    i("incremental-not-a-number", incremental(TOPIC, "wire-t", [("retention.bytes", 0, "lots")]))
    i("incremental-out-of-range", incremental(TOPIC, "wire-t", [("segment.bytes", 0, "400")]))
    i("incremental-append-to-non-list", incremental(TOPIC, "wire-t", [("retention.ms", 2, "5")]))
    i("incremental-subtract-from-non-list", incremental(TOPIC, "wire-t", [("segment.bytes", 3, "5")]))
    i("incremental-append-unknown-name", incremental(TOPIC, "wire-t", [("no.such.config", 2, "5")]))
    i("incremental-bad-list-value", incremental(TOPIC, "wire-t", [("cleanup.policy", 2, "bogus")]))
    i("incremental-bad-operation", incremental(TOPIC, "wire-t", [("retention.ms", 9, "5")]))
    i("incremental-unknown-topic", incremental(TOPIC, "no-such-topic", [("retention.ms", 0, "5")]))
    i("incremental-broker-read-only", incremental(BROKER, "1", [("log.dirs", 0, "/tmp/x")]))
    i("incremental-broker-static-only", incremental(BROKER, "1", [("log.retention.check.interval.ms", 0, "1000")]))
    i("incremental-unknown-broker", incremental(BROKER, "7", [("log.retention.ms", 0, "1000")]))
    i("incremental-broker-unknown-name", incremental(BROKER, "1", [("no.such.config", 0, "1")]))
    i("incremental-duplicate-name", incremental(TOPIC, "wire-t", [("retention.ms", 0, "5000"), ("retention.ms", 1, None)]))

    # DeleteTopics of unknown topics, by name and by id.
    d = lambda name, body: pair.check(name, DeleteTopicsRequest, DeleteTopicsResponse, body)
    d("delete-topic-unknown", {"topics": [{"name": "no-such-topic", "topic_id": "00000000-0000-0000-0000-000000000000"}], "topic_names": ["no-such-topic"], "timeout_ms": 30000})
    d("delete-topic-unknown-id", {"topics": [{"name": None, "topic_id": "6f6c642d-6964-2d6f-662d-612d746f7069"}], "timeout_ms": 30000})

    # Produce of bad batches.
    p = lambda name, body, **kw: pair.check(name, ProduceRequest, ProduceResponse, body, **kw)
    good = batch([(b"k", b"value")])
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    p("produce-crc-wrong", produce("wire-t", bytes(bad_crc)))
    bad_magic = bytearray(good)
    bad_magic[MAGIC_OFFSET] = 3
    p("produce-magic-3", produce("wire-t", reseal(bad_magic)))
    count = bytearray(good)
    struct.pack_into(">i", count, DefaultRecordBatch.HEADER_STRUCT.size - 4, 2)
    magic_1 = bytearray(good)
    magic_1[MAGIC_OFFSET] = 1
    p("produce-magic-1", produce("wire-t", bytes(magic_1)))
    p("produce-two-batches", produce("wire-t", good + good))
    p("produce-count-mismatch", produce("wire-t", reseal(count)))
    two = bytearray(batch([(b"a", b"1"), (b"b", b"2")]))
    # The second record's offset delta (after its length varint and attributes byte) from
    # 1 (zigzag 2) to 0: offsets inside the batch no longer increase.
    first_len = two[DefaultRecordBatch.HEADER_STRUCT.size] >> 1
    second = DefaultRecordBatch.HEADER_STRUCT.size + 1 + first_len
    assert two[second + 2] == 2, two[second:]
    two[second + 2] = 0
    p("produce-offsets-not-increasing", produce("wire-t", reseal(two)))
    p("produce-too-large", produce("wire-small", batch([(b"k", b"x" * 400)])))
    p("produce-keyless-to-compacted", produce("wire-compact", batch([(None, b"no key")])))
    p("produce-acks-2", produce("wire-t", good, acks=2))
    p("produce-unknown-topic", produce("no-such-topic", good))
    p("produce-unknown-partition", produce("wire-t", good, partition=5))
    p("produce-not-a-batch", produce("wire-t", b"\x00" * 70))
    p("produce-v2-unsupported", produce("wire-t", good), version=2)

    # Fetch and ListOffsets out of range, of unknown topics and partitions.
    f = lambda name, body: pair.check(name, FetchRequest, FetchResponse, body)
    f("fetch-beyond-end", fetch("wire-t", 1000))
    f("fetch-negative-offset", fetch("wire-t", -5))
    f("fetch-unknown-topic", fetch("no-such-topic", 0))
    f("fetch-unknown-partition", fetch("wire-t", 0, partition=5))
    lo = lambda name, body: pair.check(name, ListOffsetsRequest, ListOffsetsResponse, body)
    lo("list-offsets-unknown-topic", list_offsets("no-such-topic", -1))
    lo("list-offsets-unknown-partition", list_offsets("wire-t", -1, partition=5))
    lo("list-offsets-bad-timestamp", list_offsets("wire-t", -7))

    # DeleteRecords beyond the high watermark, below the log start.
    dr = lambda name, body: pair.check(name, DeleteRecordsRequest, DeleteRecordsResponse, body)
    dr("delete-records-beyond-high-watermark", delete_records("wire-t", 100))
    dr("delete-records-to-2", delete_records("wire-t", 2))
    dr("delete-records-below-log-start", delete_records("wire-t", 1))
    dr("delete-records-negative", delete_records("wire-t", -7))
    dr("delete-records-unknown-topic", delete_records("no-such-topic", 0))
    dr("delete-records-unknown-partition", delete_records("wire-t", 0, partition=5))

    # Groups.
    oc = lambda name, body: pair.check(name, OffsetCommitRequest, OffsetCommitResponse, body)
    oc("offset-commit-unknown-topic", offset_commit("wire-g", "no-such-topic"))
    oc("offset-commit-unknown-partition", offset_commit("wire-g", "wire-t", partition=5))
    oc("offset-commit-empty-group-id", offset_commit("", "wire-t"))
    oc("offset-commit-unknown-generation", {**offset_commit("wire-g2", "wire-t"), "generation_id_or_member_epoch": 5, "member_id": "nobody"})
    of = lambda name, body: pair.check(name, OffsetFetchRequest, OffsetFetchResponse, body)
    of("offset-fetch-unknown-group", offset_fetch("no-such-group", "wire-t"))
    of("offset-fetch-unknown-group-all", offset_fetch("no-such-group"))
    of("offset-fetch-unknown-topic", offset_fetch("wire-g", "no-such-topic"))
    dg = lambda name, body: pair.check(name, DescribeGroupsRequest, DescribeGroupsResponse, body)
    dg("describe-groups-unknown", {"groups": ["no-such-group"], "include_authorized_operations": False})
    dg("describe-groups-empty-id", {"groups": [""], "include_authorized_operations": False})
    dl = lambda name, body: pair.check(name, DeleteGroupsRequest, DeleteGroupsResponse, body)
    dl("delete-groups-unknown", {"groups_names": ["no-such-group"]})
    dl("delete-groups-empty-id", {"groups_names": [""]})
    jg = lambda name, body: pair.check(name, JoinGroupRequest, JoinGroupResponse, body)
    jg("join-group-session-too-short", join_group("wire-j", 1000))
    jg("join-group-session-too-long", join_group("wire-j", 3600000))
    jg("join-group-empty-id", join_group("", 10000))

    # Unsupported API versions: ApiVersions answers with its version 0 and the error,
    # anything else is a closed connection.
    for side, broker in pair.sides.items():
        pair.write("api-versions-v99", side, broker.api_versions_at(99))
    pair.check("fetch-v3-unsupported", FetchRequest, FetchResponse, fetch("wire-t", 0), version=3)
    # Which topics the refusals left behind (none but the setup's and those created on
    # purpose); the compaction scenarios' own topics come and go meanwhile.
    pair.check("metadata-v0-all-topics", MetadataRequest, MetadataResponse, {"topics": []}, version=0,
               pick=lambda a: sorted(t["name"] for t in a["topics"] if not t["name"].startswith(COMPACTION_PREFIX)))


def wait_for(what, deadline_s, probe):
    """Polls PROBE on both sides until it returns True for each; exits at the deadline
    saying which side did not get there and what it last saw."""
    end = time.time() + deadline_s
    last = {}
    pending = {"kafka", "kpfs"}
    while pending:
        for side in sorted(pending):
            ok, last[side] = probe(side)
            if ok:
                pending.discard(side)
        if pending and time.time() > end:
            sys.exit(f"{what}: not reached within {deadline_s} s on {sorted(pending)}: {last}")
        if pending:
            time.sleep(0.25)


def create_topics(pair, topics, partitions=None):
    """Creates TOPICS (name: configs) on both, each with the PARTITIONS (name: count) asked
    or one, and waits until each broker serves them (Kafka's broker learns of a topic its
    controller created a moment later)."""
    for name, configs in topics.items():
        count = (partitions or {}).get(name, 1)
        for side, answer in pair.each(CreateTopicsRequest, CreateTopicsResponse, create_topic(name, partitions=count, configs=configs)).items():
            if answer["topics"][0]["error_code"] != 0:
                sys.exit(f"{side}: cannot create {name}: {answer}")

    def served(side):
        a = pair.sides[side].call(MetadataRequest, MetadataResponse, pair.version(MetadataRequest), {"topics": [{"name": n, "topic_id": None} for n in topics], "allow_auto_topic_creation": False})
        ok = all(
            t["error_code"] == 0
            and len(t["partitions"]) == (partitions or {}).get(t["name"], 1)
            and all(p["leader_id"] >= 0 for p in t["partitions"])
            for t in a["topics"]
        )
        return ok, a

    wait_for(f"the topics {sorted(topics)}", 30, served)


def records_of(answer):
    """(offset, key, value) of each record of a Fetch answer's one partition (the answer
    decoded with as_json=False, so that its records are bytes)."""
    part = answer["responses"][0]["partitions"][0]
    out = []
    raw = part.get("records")
    if raw:
        batches = MemoryRecords(bytes(raw)) if isinstance(raw, (bytes, bytearray, memoryview)) else raw
        for b in batches:
            for r in b:
                out.append([r.offset, r.key and bytes(r.key).decode(), r.value and bytes(r.value).decode()])
    return {"error_code": part["error_code"], "high_watermark": part["high_watermark"], "log_start_offset": part["log_start_offset"], "records": out}


def consumed(pair, side, topic, offset):
    """What a consumer reads of TOPIC from OFFSET to the high watermark: fetches from the
    offset after the last record each returned (Kafka answers one segment's batches per
    fetch, kpfs up to max_bytes of several)."""
    broker = pair.sides[side]
    records = []
    while True:
        got = records_of(broker.call(FetchRequest, FetchResponse, pair.version(FetchRequest), fetch(topic, offset), as_json=False))
        records += [r for r in got["records"] if r[0] >= offset]
        if got["error_code"] != 0 or not got["records"] or got["records"][-1][0] + 1 >= got["high_watermark"]:
            got["records"] = records
            return got
        offset = got["records"][-1][0] + 1


def offsets_after_cleanup(pair):
    """Retention by size and compaction on both, then ListOffsets and Fetch of what stayed."""
    record = lambda i: [(f"key-{i % 4}".encode(), f"value-{i:02d}".encode())]
    one = len(batch(record(0)))
    # One batch per segment (internal.segment.bytes holds one and a half), so that each
    # produce rolls one; retention.bytes keeps 3.5 segments' worth: 6 of 10 go.
    topics = {
        "after-retention": {"internal.segment.bytes": str(one * 3 // 2), "retention.bytes": str(one * 7 // 2)},
        # Compacted only once all ten are in (below), so that the cleaner makes one pass
        # over all nine inactive segments: passes while segments still roll would group
        # segments as their timing has it, on each broker its own way.
        "after-compaction": {"internal.segment.bytes": str(one * 3 // 2)},
    }
    create_topics(pair, topics)
    for name in topics:
        for i in range(10):
            # Offset 7 is a tombstone of key-1.
            recs = [(b"key-1", None)] if (name == "after-compaction" and i == 7) else record(i)
            answers = pair.each(ProduceRequest, ProduceResponse, produce(name, batch(recs, base_ts=T0 + 1000 * i)))
            for side, answer in answers.items():
                if answer["responses"][0]["partition_responses"][0]["error_code"] != 0:
                    sys.exit(f"{side}: produce to {name}: {answer}")

    compact = incremental(TOPIC, "after-compaction", [("cleanup.policy", 0, "compact"), ("min.cleanable.dirty.ratio", 0, "0.01"), ("delete.retention.ms", 0, "86400000")])
    for side, answer in pair.each(IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, compact).items():
        if answer["responses"][0]["error_code"] != 0:
            sys.exit(f"{side}: cannot make after-compaction compacted: {answer}")

    def log_start(topic, want):
        def probe(side):
            a = pair.sides[side].call(ListOffsetsRequest, ListOffsetsResponse, pair.version(ListOffsetsRequest), list_offsets(topic, -2))
            got = a["topics"][0]["partitions"][0]["offset"]
            return got == want, got
        return probe

    wait_for("retention of after-retention to offset 6", 60, log_start("after-retention", 6))

    # Cleaned: the first nine segments (the tenth, offset 9, is active) keep the last
    # record of each key: key-3 at 3, key-2 at 6, key-1's tombstone at 7, key-0 at 8.
    def cleaned(side):
        offsets = [r[0] for r in consumed(pair, side, "after-compaction", 0)["records"]]
        return offsets == [3, 6, 7, 8, 9], offsets

    wait_for("compaction of after-compaction", 90, cleaned)

    for topic in topics:
        for label, ts in (("earliest", -2), ("latest", -1), ("max-timestamp", -3), ("before-data", T0 - 5000),
                          ("deleted-range", T0 + 2000), ("inside", T0 + 7500), ("last", T0 + 9000), ("after-data", T0 + 60000)):
            pair.check(f"list-offsets-{topic}-{label}", ListOffsetsRequest, ListOffsetsResponse, list_offsets(topic, ts),
                       pick=lambda a: a["topics"][0]["partitions"][0])
        for start in (0, 5):
            for side in pair.sides:
                pair.write(f"consume-{topic}-from-{start}", side, consumed(pair, side, topic, start))


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in ("refusals", "compaction"):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    pair = Pair(sys.argv[2], sys.argv[3], sys.argv[4])
    {"refusals": refusals, "compaction": offsets_after_cleanup}[sys.argv[1]](pair)
    with open(os.path.join(sys.argv[4], f"{sys.argv[1]}.names"), "w") as f:
        f.write("\n".join(pair.names) + "\n")


if __name__ == "__main__":
    main()
