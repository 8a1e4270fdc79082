"""The batch codec with and without the C loops (segments/_speedups.c), in one process.

    .venv/bin/python bench/codec_bench.py [--records 1000] [--value-bytes 100] [--rounds 200]

Prints microseconds per batch (median of --rounds) for encode_batch_parts and
decode_batches of one batch of --records records, first with the C module and
then with segments.batch._fast set to None (the pure-Python reference path,
what SEGLOG_PURE_PYTHON=1 selects), and the ratio. Page-cache and I/O free:
this is the codec alone (docs/PERFORMANCE.md, "The C fast path").
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable

import seglog.segments.batch as batch_module
from seglog.segments.batch import TimestampType, decode_batches, encode_batch, encode_batch_parts
from seglog.segments.records import Record


def median_us(action: Callable[[], object], rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    if batch_module._fast is None:
        raise SystemExit("segments._speedups is not built (or SEGLOG_PURE_PYTHON is set): nothing to compare")
    records = [
        Record(bytes([i % 251]) * args.value_bytes, b"key-%05d" % (i % 64), 1_700_000_000_000 + i)
        for i in range(args.records)
    ]
    ts = TimestampType.CREATE_TIME
    data = encode_batch(0, records, timestamp_type=ts, now_ms=0)
    gc.freeze()
    fast = batch_module._fast
    results: dict[str, dict[str, float]] = {}
    for path in ("c", "python"):
        batch_module._fast = fast if path == "c" else None
        encode = median_us(lambda: encode_batch_parts(0, records, timestamp_type=ts, now_ms=0), args.rounds)
        decode = median_us(lambda: decode_batches(data, max_batch_bytes=len(data)), args.rounds)
        results[path] = {"encode": encode, "decode": decode}
    batch_module._fast = fast
    for op in ("encode", "decode"):
        c, py = results["c"][op], results["python"][op]
        print(f"{op}: C {c:.0f} us, Python {py:.0f} us per batch of {args.records} x {args.value_bytes} B "
              f"(C is {py / c:.1f}x faster)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
