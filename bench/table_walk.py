"""The batch table's header walk, C loop against the Python loop, for small and larger batches.

    .venv/bin/python bench/table_walk.py

Builds in memory a ``.log`` of 50,000 records (1, 10 and 100 records per batch, 100-B values), then
times ``walk_batch_table`` over all of it (one walk, no byte limit) with the C module and without it
(``SEGLOG_PURE_PYTHON``'s path, switched in-process as the tests do), best of three each, interleaved.
The walk runs in a thread on a segment's first read; with one-record batches it is the whole cost of
that read. Plain script, never run by the tests; quote the ratio, the machine is shared.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "segments"))

from seghelpers import python_only  # the tests' switch to the Python path

from seglog.segments import batch_table
from seglog.segments.batch import TimestampType, encode_batch
from seglog.segments.records import Record

RECORDS = 50_000


def main() -> None:
    for count in (1, 10, 100):
        data = b"".join(
            encode_batch(i * count, [Record(b"v" * 100, b"k" * 16, 1_700_000_000_000 + i)] * count,
                         timestamp_type=TimestampType.CREATE_TIME, now_ms=0)
            for i in range(RECORDS // count)
        )

        def pread(position: int, size: int, data: bytes = data) -> bytes:
            return data[position : position + size]

        best = {"c": float("inf"), "python": float("inf")}
        for _ in range(3):
            for name in ("c", "python"):
                start = time.perf_counter()
                if name == "python":
                    with python_only():
                        build = batch_table.walk_batch_table(pread, 0, len(data), 0, RECORDS, max_bytes=1 << 40)
                else:
                    build = batch_table.walk_batch_table(pread, 0, len(data), 0, RECORDS, max_bytes=1 << 40)
                best[name] = min(best[name], time.perf_counter() - start)
                assert build.end == len(data)
        print(
            f"{count:>3} records per batch: {len(build.positions):>6} batches, {len(data) / 1e6:.1f} MB; "
            f"python {best['python'] * 1e3:.1f} ms, C {best['c'] * 1e3:.1f} ms: {best['python'] / best['c']:.0f}x"
        )


if __name__ == "__main__":
    main()
