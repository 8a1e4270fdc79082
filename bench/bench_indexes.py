"""Index layer benchmark: appends and lookups of seglog's indexes against a bare reference.

    .venv/bin/python bench/bench_indexes.py [--entries 1000000] [--lookups 100000] [--runs 5] [--json FILE]

Measures, on one preallocated index of ``--entries`` entries (page cache warm):

* append rate of ``OffsetIndex.append`` and ``TimeIndex.maybe_append``;
* floor-lookup latency (p50/p99) of ``OffsetIndex.lookup``, ``TimeIndex.lookup``
  and the fetch-by-timestamp pair "time index -> offset index", for random
  targets (cold section) and for targets in the last 8 KiB (warm section);
* the same searches done by a bare reference in the same run: a pure-Python
  big-endian binary search over the mmap with ``struct.unpack_from`` and no
  locks, checks or objects (the reference of research/perf.md section 4 and
  goal 6: seglog's p50 should stay within 1.5x of it).

Never run by pytest. Numbers are medians over ``--runs`` rounds.
"""

from __future__ import annotations

import argparse
import json
import mmap
import random
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from indexes import OffsetIndex, TimeIndex

STEP_OFFSET = 31  # ~ records per 4096-byte index interval with 134-byte records (perf.md)
STEP_POSITION = 2048
STEP_TS = 29
TS0 = 1_700_000_000_000
KEY32 = struct.Struct(">i")
KEY64 = struct.Struct(">q")


def reference_floor(mm: mmap.mmap, n: int, target: int, unpack: Callable[..., tuple[int]], stride: int) -> int:
    """Plain floor binary search over a big-endian column, no warm section (perf.md's reference)."""
    if n == 0 or unpack(mm, 0)[0] > target:
        return -1
    lo, hi = 0, n - 1
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if unpack(mm, mid * stride)[0] <= target:
            lo = mid
        else:
            hi = mid - 1
    return lo


def percentiles(samples_ns: list[int]) -> tuple[float, float]:
    ordered = sorted(samples_ns)
    return ordered[len(ordered) // 2] / 1000, ordered[int(len(ordered) * 0.99)] / 1000


def time_each(fn: Callable[[int], object], targets: list[int]) -> list[int]:
    clock = time.perf_counter_ns
    out = []
    for t in targets:
        t0 = clock()
        fn(t)
        out.append(clock() - t0)
    return out


def bench_appends(directory: Path, n: int) -> dict[str, float]:
    off_path, ts_path = directory / "append.index", directory / "append.timeindex"
    off_path.unlink(missing_ok=True)
    ts_path.unlink(missing_ok=True)
    with OffsetIndex(off_path, 0, max_index_size=n * 8) as index:
        append = index.append
        t0 = time.perf_counter()
        for i in range(n):
            append(i * STEP_OFFSET, i * STEP_POSITION % (2**31))
        off_s = time.perf_counter() - t0
    with TimeIndex(ts_path, 0, max_index_size=(n + 1) * 12) as tix:
        maybe_append = tix.maybe_append
        t0 = time.perf_counter()
        for i in range(n):
            maybe_append(TS0 + i * STEP_TS, i * STEP_OFFSET)
        ts_s = time.perf_counter() - t0
    return {"offset_append_ns": off_s / n * 1e9, "time_append_ns": ts_s / n * 1e9}


def build(directory: Path, n: int) -> tuple[Path, Path]:
    off_path, ts_path = directory / "lookup.index", directory / "lookup.timeindex"
    for p in (off_path, ts_path):
        p.unlink(missing_ok=True)
    with OffsetIndex(off_path, 0, max_index_size=n * 8) as index:
        for i in range(n):
            index.append(i * STEP_OFFSET, i * STEP_POSITION % (2**31))
    with TimeIndex(ts_path, 0, max_index_size=(n + 1) * 12) as tix:
        for i in range(n):
            tix.maybe_append(TS0 + i * STEP_TS, i * STEP_OFFSET)
    return off_path, ts_path


def bench_lookups(off_path: Path, ts_path: Path, n: int, lookups: int, seed: int) -> dict[str, float]:
    rnd = random.Random(seed)
    cold_offsets = [rnd.randrange(0, n * STEP_OFFSET) for _ in range(lookups)]
    warm_offsets = [rnd.randrange((n - 1000) * STEP_OFFSET, n * STEP_OFFSET) for _ in range(lookups)]
    cold_ts = [TS0 + rnd.randrange(0, n * STEP_TS) for _ in range(lookups)]
    out: dict[str, float] = {}
    with (
        OffsetIndex(off_path, 0, writable=False) as index,
        TimeIndex(ts_path, 0, writable=False) as tix,
        off_path.open("rb") as f_off,
        ts_path.open("rb") as f_ts,
    ):
        mm_off = mmap.mmap(f_off.fileno(), 0, access=mmap.ACCESS_READ)
        mm_ts = mmap.mmap(f_ts.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            u32, u64 = KEY32.unpack_from, KEY64.unpack_from

            def ref_offset(t: int) -> int:
                return reference_floor(mm_off, n, t, u32, 8)

            def ref_time_then_offset(t: int) -> int:
                slot = reference_floor(mm_ts, n, t, u64, 12)
                offset = KEY32.unpack_from(mm_ts, slot * 12 + 8)[0] if slot >= 0 else 0
                return reference_floor(mm_off, n, offset, u32, 8)

            def seglog_time_then_offset(t: int) -> object:
                return index.lookup(tix.lookup(t).offset)

            # Same answers, or the comparison is meaningless.
            for t in cold_offsets[:200]:
                slot = ref_offset(t)
                assert index.lookup(t).offset == slot * STEP_OFFSET, t
            cases: dict[str, tuple[Callable[[int], object], list[int]]] = {
                "offset_lookup_cold": (index.lookup, cold_offsets),
                "offset_lookup_warm": (index.lookup, warm_offsets),
                "offset_lookup_ceiling_cold": (index.lookup_ceiling, cold_offsets),
                "time_lookup_cold": (tix.lookup, cold_ts),
                "time_then_offset": (seglog_time_then_offset, cold_ts),
                "ref_offset_lookup_cold": (ref_offset, cold_offsets),
                "ref_offset_lookup_warm": (ref_offset, warm_offsets),
                "ref_time_then_offset": (ref_time_then_offset, cold_ts),
            }
            for name, (fn, targets) in cases.items():
                p50, p99 = percentiles(time_each(fn, targets))
                out[f"{name}_p50_us"], out[f"{name}_p99_us"] = p50, p99
        finally:
            mm_off.close()
            mm_ts.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--lookups", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the medians here")
    args = parser.parse_args(argv)
    rounds: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="seglog-bench-indexes-") as tmp:
        directory = Path(tmp)
        off_path, ts_path = build(directory, args.entries)
        for r in range(args.runs):
            row = bench_appends(directory, args.entries)
            row.update(bench_lookups(off_path, ts_path, args.entries, args.lookups, seed=r))
            rounds.append(row)
            print(f"round {r + 1}/{args.runs} done", file=sys.stderr)
    medians = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    medians["ratio_offset_lookup_cold_p50"] = (
        medians["offset_lookup_cold_p50_us"] / medians["ref_offset_lookup_cold_p50_us"]
    )
    medians["ratio_time_then_offset_p50"] = (
        medians["time_then_offset_p50_us"] / medians["ref_time_then_offset_p50_us"]
    )
    print(f"entries={args.entries} lookups={args.lookups} runs={args.runs} (medians)")
    for key, value in medians.items():
        print(f"  {key:34} {value:10.2f}")
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": str(args.json)}, **medians}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
