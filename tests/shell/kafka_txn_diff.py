"""What a client sees of a transactional topic, asked of Apache Kafka and of kpfs alike.

    kafka_txn_diff.py LABEL KAFKA_BOOTSTRAP KPFS_BOOTSTRAP OUT_DIR TOPIC PARTITIONS

For each partition of TOPIC, raw requests on a socket (kafka_diff_wire.py's Pair: the same
bytes to both brokers, at the highest version both serve), so that the fields a client
library keeps to itself are visible:

- LABEL-offsets-pN: ListOffsets of the earliest offset, of the latest under
  READ_UNCOMMITTED (the high watermark) and under READ_COMMITTED (the last stable offset);
- LABEL-fetch-rc-pN: READ_COMMITTED Fetches from offset 0, each from the offset after the
  last batch the one before returned, until the last stable offset: per Fetch its offset,
  high watermark, last stable offset, aborted_transactions and the batches it returned
  (base and last offset, producer id and epoch, transactional, control). Each asks for one
  byte, so gets the one batch at its offset (minOneMessage) on both: with more, Kafka
  stops at a segment's end where kpfs goes on into the next (docs/KAFKA-PROTOCOL.md,
  "Fetch"), which is not what this compares;
- LABEL-fetch-ru-pN: a READ_UNCOMMITTED Fetch of one byte from 0: its
  aborted_transactions (null) and last stable offset;
- LABEL-offset-fetch and LABEL-offset-fetch-stable: OffsetFetch of every partition for
  the workload's group (TOPIC-group), without and with require_stable: with it, a
  partition a transaction sent an offset for that its marker has not settled yet is
  UNSTABLE_OFFSET_COMMIT (KIP-447), which consumers taking a partition over wait on.

OUT_DIR/NAME.{kafka,kpfs} hold them as sorted JSON; OUT_DIR/LABEL.names the names.
Nothing is normalised but what kafka_diff_wire.py's normalise() does (throttle times,
topic ids); producer ids are compared as they are, both brokers handing them out from 0
in the order asked.
"""

import os
import sys

from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.consumer.group import OffsetFetchRequest, OffsetFetchResponse
from kafka.protocol.consumer.offsets import ListOffsetsRequest, ListOffsetsResponse
from kafka.record.memory_records import MemoryRecords

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kafka_diff_wire import Pair, fetch, list_offsets  # noqa: E402

READ_UNCOMMITTED, READ_COMMITTED = 0, 1


def batches_of(raw):
    out = []
    if raw:
        records = MemoryRecords(bytes(raw))
        while True:
            b = records.next_batch()
            if b is None:
                break
            out.append({
                "base_offset": b.base_offset,
                "last_offset": b.last_offset,
                "producer_id": b.producer_id,
                "producer_epoch": b.producer_epoch,
                "transactional": b.is_transactional,
                "control": b.is_control_batch,
            })
    return out


def one_fetch(pair, side, topic, partition, offset, isolation, max_bytes=1 << 20):
    body = fetch(topic, offset, partition=partition, max_bytes=max_bytes)
    body["isolation_level"] = isolation
    answer = pair.sides[side].call(FetchRequest, FetchResponse, pair.version(FetchRequest), body, as_json=False)
    part = answer["responses"][0]["partitions"][0]
    aborted = part["aborted_transactions"]
    return {
        "fetch_offset": offset,
        "error_code": part["error_code"],
        "high_watermark": part["high_watermark"],
        "last_stable_offset": part["last_stable_offset"],
        "log_start_offset": part["log_start_offset"],
        "aborted_transactions": None if aborted is None else [dict(a) for a in aborted],
        "batches": batches_of(part["records"]),
    }


def fetches_rc(pair, side, topic, partition):
    offset, out = 0, []
    while len(out) < 50:
        got = one_fetch(pair, side, topic, partition, offset, READ_COMMITTED, max_bytes=1)
        out.append(got)
        if got["error_code"] != 0 or not got["batches"]:
            break
        offset = got["batches"][-1]["last_offset"] + 1
        if offset >= got["last_stable_offset"]:
            break
    return out


def main():
    if len(sys.argv) != 7:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    label, kafka, kpfs, out, topic, partitions = sys.argv[1:]
    pair = Pair(kafka, kpfs, out)
    for p in range(int(partitions)):
        offsets = {}
        for side in pair.sides:
            offsets[side] = {}
            for what, ts, isolation in (("earliest", -2, READ_UNCOMMITTED), ("latest-read-uncommitted", -1, READ_UNCOMMITTED),
                                        ("latest-read-committed", -1, READ_COMMITTED)):
                body = list_offsets(topic, ts, partition=p)
                body["isolation_level"] = isolation
                a = pair.sides[side].call(ListOffsetsRequest, ListOffsetsResponse, pair.version(ListOffsetsRequest), body)
                offsets[side][what] = a["topics"][0]["partitions"][0]
            pair.write(f"{label}-offsets-p{p}", side, offsets[side])
            pair.write(f"{label}-fetch-rc-p{p}", side, fetches_rc(pair, side, topic, p))
            pair.write(f"{label}-fetch-ru-p{p}", side, one_fetch(pair, side, topic, p, 0, READ_UNCOMMITTED, max_bytes=1))
    for stable in (False, True):
        body = {
            "groups": [{"group_id": f"{topic}-group", "member_id": None, "member_epoch": -1,
                        "topics": [{"name": topic, "partition_indexes": list(range(int(partitions)))}]}],
            "require_stable": stable,
        }
        pair.check(f"{label}-offset-fetch{'-stable' if stable else ''}", OffsetFetchRequest, OffsetFetchResponse, body)
    with open(os.path.join(out, f"{label}.names"), "w") as f:
        f.write("\n".join(pair.names) + "\n")


if __name__ == "__main__":
    main()
