"""Row-wise (format v1) vs column-wise (format v2) msgpack batch bodies: the measurement behind
docs/PERFORMANCE-HISTORY.md's "columnar batch body" section. Plain script, never run by the tests.

    .venv/bin/python bench/columnar_body.py [--records 1000] [--rounds 2000]

Prints µs per batch for: ``encode_batch`` (format v2: columns, all checks, header and CRC), packing
the same records as five columns without checks, packing prebuilt v1 rows (the raw reference), and
``unpackb`` of a v1 row body and of a v2 column body.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from itertools import repeat
from operator import sub

import msgpack

from seglog.segments.batch import HEADER_SIZE, TimestampType, encode_batch
from seglog.segments.records import Record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    records = [Record(os.urandom(100), os.urandom(16), 1_700_000_000_000 + i) for i in range(args.records)]
    packer = msgpack.Packer(use_bin_type=True)
    rows = [(i, r.timestamp, r.key, r.value, ()) for i, r in enumerate(records)]

    def checked_encode() -> bytes:
        return encode_batch(0, records, timestamp_type=TimestampType.CREATE_TIME, now_ms=0, packer=packer)

    def columns_encode() -> bytes:
        values, keys, timestamps, headers, _ = zip(*records, strict=True)
        deltas = list(map(sub, timestamps, repeat(timestamps[0])))
        return packer.pack((list(range(len(records))), deltas, keys, values, headers))

    def raw_rows() -> bytes:
        return packer.pack(rows)

    row_body = raw_rows()
    column_body = checked_encode()[HEADER_SIZE:]

    def unpack_rows() -> object:
        return msgpack.unpackb(row_body, use_list=False)

    def unpack_columns() -> object:
        return msgpack.unpackb(column_body, use_list=False)

    cases: list[tuple[str, Callable[[], object]]] = [
        ("encode_batch (v2 columns, checked)", checked_encode),
        ("pack columns (unchecked)", columns_encode),
        ("pack prebuilt rows (raw)", raw_rows),
        ("unpackb v1 row body", unpack_rows),
        ("unpackb v2 column body", unpack_columns),
    ]
    for name, fn in cases:
        start = time.perf_counter()
        for _ in range(args.rounds):
            fn()
        print(f"{name:36s} {(time.perf_counter() - start) / args.rounds * 1e6:8.1f} us/batch")


if __name__ == "__main__":
    main()
