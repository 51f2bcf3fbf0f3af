"""Decodes Kafka segment files with kafka-python, a decoder nobody in kpfs wrote.

    kafka_decode.py SEGMENT.log...

Prints one line per batch and one per record, in file order:

    batch FILE base=B last=L count=N codec=C delete_horizon=yes|no
    record offset=O timestamp=T key=K value=V headers=H

K and V are Python reprs (b'...' or None for null), so a tombstone reads value=None.
Exits 1 with a "CORRUPT: ..." line on stderr when kafka-python finds a batch whose
CRC32C is wrong or whose records do not parse, or when a file is not whole batches.
"""

import sys

from kafka.errors import CorruptRecordError
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
# Attribute bit 6 (KIP-534): baseTimestamp holds the delete horizon of the batch.
DELETE_HORIZON_FLAG = 0x40


def corrupt(path, what):
    print(f"CORRUPT: {path}: {what}", file=sys.stderr)
    sys.exit(1)


def decode(path):
    with open(path, "rb") as f:
        data = f.read()
    records = MemoryRecords(data)
    for batch in records:
        if not isinstance(batch, DefaultRecordBatch):
            corrupt(path, f"batch of magic {batch.magic}, not a RecordBatch v2")
        # validate_crc must come before iteration (which decompresses the batch).
        if not batch.validate_crc():
            corrupt(path, f"batch at base offset {batch.base_offset}: CRC32C mismatch")
        horizon = "yes" if batch.attributes & DELETE_HORIZON_FLAG else "no"
        print(
            f"batch {path} base={batch.base_offset} last={batch.last_offset} "
            f"count={batch.records_count} codec={CODECS.get(batch.compression_type)} "
            f"delete_horizon={horizon}"
        )
        try:
            for r in batch:
                print(
                    f"record offset={r.offset} timestamp={r.timestamp} key={r.key!r} "
                    f"value={r.value!r} headers={r.headers!r}"
                )
        except CorruptRecordError as e:
            corrupt(path, f"batch at base offset {batch.base_offset}: {e}")
    # MemoryRecords stops silently before a partial batch; a segment holds none.
    if records.valid_bytes() != len(data):
        corrupt(path, f"{len(data) - records.valid_bytes()} bytes after the last whole batch")


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    for path in sys.argv[1:]:
        decode(path)


if __name__ == "__main__":
    main()
