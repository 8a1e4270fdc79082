"""Index layer benchmark: seglog's index lookups against C ``bisect`` on the same keys, same run.

    .venv/bin/python bench/bench_indexes.py [--entries 1000000] [--lookups 100000] [--runs 5]
                                            [--block 10000] [--json FILE]

Measures, on one index of ``--entries`` entries per kind (page cache warm):

* append rate of ``OffsetIndex.append`` and ``TimeIndex.maybe_append``, without
  and with the native mirror built (an active segment's index has one after
  its first fetch);
* opening an index (must not build the mirror), building the mirror
  (``seglog.indexes.search.native_column`` on both columns) and the first lookup
  after open (which builds it);
* single-lookup latency, p50 and p99, of ``OffsetIndex.lookup`` (random
  targets, and targets in the last 8 KiB), ``OffsetIndex.lookup_ceiling``,
  ``TimeIndex.lookup`` and the fetch-by-timestamp pair "time index -> offset
  index", **interleaved** with the references in blocks of ``--block``
  targets per case (order rotated every block), so load from other processes
  hits every case alike:

  - ``bisect_array``: C ``bisect.bisect_right`` over a native ``array('q')``
    of the same keys (relative offsets, timestamps), nothing else: the
    acceptance reference of issue 2 (a lookup must cost at most 2x it);
  - ``bisect_array_nt``: the same plus reading the key and building the
    ``NamedTuple`` a lookup returns (``tuple.__new__``, the cheapest way);
  - ``bisect_list``: C ``bisect`` over a Python ``list`` of the same keys;
  - ``struct_search``: the pure-Python big-endian binary search over the
    mapping with ``struct.unpack_from`` that seglog used before the mirror.

Never run by pytest. Numbers are medians over ``--runs`` rounds; ratios are
taken between p50s of the same round, then the median ratio is printed.
"""

from __future__ import annotations

import argparse
import bisect
import json
import mmap
import random
import statistics
import struct
import sys
import tempfile
import time
from array import array
from collections.abc import Callable
from functools import partial
from pathlib import Path

from seglog.indexes import OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset
from seglog.indexes.search import native_column

STEP_OFFSET = 31  # ~ records per 4096-byte index interval with 134-byte records
STEP_POSITION = 2048
STEP_TS = 29
TS0 = 1_700_000_000_000
KEY32 = struct.Struct(">i")
KEY64 = struct.Struct(">q")
ACCEPTANCE_RATIO = 2.0  # issue 2: lookup p50 <= 2x bisect_array p50

_new_tuple = tuple.__new__


def struct_floor(mm: mmap.mmap, n: int, target: int, unpack: Callable[..., tuple[int]], stride: int) -> int:
    """Plain floor binary search over a big-endian column, no warm section (the pure-Python reference)."""
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


def median_ms(fn: Callable[[], object], repeat: int = 5) -> float:
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - t0)
    return statistics.median(samples) / 1e6


def bench_appends(directory: Path, n: int, *, mirrored: bool) -> dict[str, float]:
    suffix = "_mirrored" if mirrored else ""
    off_path, ts_path = directory / "append.index", directory / "append.timeindex"
    off_path.unlink(missing_ok=True)
    ts_path.unlink(missing_ok=True)
    with OffsetIndex(off_path, 0, max_index_size=n * 8) as index:
        if mirrored:
            index.lookup(0)  # builds the (empty) mirror; every append then extends it
        append = index.append
        t0 = time.perf_counter_ns()
        for i in range(n):
            append(i * STEP_OFFSET, i * STEP_POSITION % (2**31))
        off_ns = time.perf_counter_ns() - t0
    with TimeIndex(ts_path, 0, max_index_size=(n + 1) * 12) as tix:
        if mirrored:
            tix.lookup(0)
        maybe_append = tix.maybe_append
        t0 = time.perf_counter_ns()
        for i in range(n):
            maybe_append(TS0 + i * STEP_TS, i * STEP_OFFSET)
        ts_ns = time.perf_counter_ns() - t0
    return {f"offset_append{suffix}_ns": off_ns / n, f"time_append{suffix}_ns": ts_ns / n}


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


def decode_mirror(mm: mmap.mmap, n: int, fields: tuple[tuple[int, int], ...]) -> None:
    """Both mirror columns of ``n`` entries, as the first lookup builds them."""
    for width, field in fields:
        native_column(mm, n, stride=len(mm) // n, field=field, width=width)


def unpack_all(fmt: str, mm: mmap.mmap) -> list[tuple[int, ...]]:
    return list(struct.iter_unpack(fmt, mm))


def bench_mirror(off_path: Path, ts_path: Path, n: int) -> dict[str, float]:
    """Open cost, mirror build cost and first-lookup latency (which includes the build)."""
    out: dict[str, float] = {}
    for kind, path, cls, target, fields in (
        ("offset", off_path, OffsetIndex, n * STEP_OFFSET // 2, ((4, 0), (4, 4))),
        ("time", ts_path, TimeIndex, TS0 + n * STEP_TS // 2, ((8, 0), (4, 8))),
    ):
        opens, firsts, seconds = [], [], []
        for _ in range(5):
            t0 = time.perf_counter_ns()
            index = cls(path, 0, writable=False)
            t1 = time.perf_counter_ns()
            try:
                assert index._mirror is None, "opening an index must not build its mirror"
                index.lookup(target)
                t2 = time.perf_counter_ns()
                index.lookup(target)
                t3 = time.perf_counter_ns()
            finally:
                index.close()
            opens.append(t1 - t0)
            firsts.append(t2 - t1)
            seconds.append(t3 - t2)
        with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            out[f"{kind}_mirror_build_ms"] = median_ms(partial(decode_mirror, mm, n, fields))
            # What a struct-based copy would cost instead (one tuple per entry).
            fmt = ">ii" if len(mm) // n == 8 else ">qi"
            out[f"{kind}_iter_unpack_ms"] = median_ms(partial(unpack_all, fmt, mm))
        out[f"{kind}_open_us"] = statistics.median(opens) / 1e3
        out[f"{kind}_first_lookup_ms"] = statistics.median(firsts) / 1e6
        out[f"{kind}_second_lookup_us"] = statistics.median(seconds) / 1e3
    return out


def bench_lookups(off_path: Path, ts_path: Path, n: int, lookups: int, *, seed: int, block: int) -> dict[str, float]:
    rnd = random.Random(seed)
    cold_offsets = [rnd.randrange(0, n * STEP_OFFSET) for _ in range(lookups)]
    warm_offsets = [rnd.randrange((n - 1000) * STEP_OFFSET, n * STEP_OFFSET) for _ in range(lookups)]
    cold_ts = [TS0 + rnd.randrange(0, n * STEP_TS) for _ in range(lookups)]
    # The references' keys: exactly what the files hold, as native arrays and a list.
    offset_keys = array("q", (i * STEP_OFFSET for i in range(n)))
    ts_keys = array("q", (TS0 + i * STEP_TS for i in range(n)))
    offset_list = offset_keys.tolist()
    bisect_right = bisect.bisect_right
    samples: dict[str, list[int]] = {}
    with (
        OffsetIndex(off_path, 0, writable=False) as index,
        TimeIndex(ts_path, 0, writable=False) as tix,
        off_path.open("rb") as f_off,
        mmap.mmap(f_off.fileno(), 0, access=mmap.ACCESS_READ) as mm_off,
    ):
        u32 = KEY32.unpack_from

        def bisect_array_nt(t: int, keys: array[int] = offset_keys) -> OffsetPosition:
            i = bisect_right(keys, t)
            return _new_tuple(OffsetPosition, (keys[i - 1], i))

        def bisect_array_time_nt(t: int, keys: array[int] = ts_keys) -> TimestampOffset:
            i = bisect_right(keys, t)
            return _new_tuple(TimestampOffset, (keys[i - 1], i))

        def seglog_time_then_offset(t: int) -> object:
            return index.lookup(tix.lookup(t).offset)

        # Same answers, or the comparison is meaningless (the first lookups also build the mirrors).
        for t in cold_offsets[:500]:
            assert index.lookup(t).offset == offset_keys[bisect_right(offset_keys, t) - 1], t
            assert index.lookup(t).offset == struct_floor(mm_off, n, t, u32, 8) * STEP_OFFSET, t
        for t in cold_ts[:500]:
            assert tix.lookup(t).timestamp == ts_keys[bisect_right(ts_keys, t) - 1], t
        cases: dict[str, tuple[Callable[[int], object], list[int]]] = {
            "offset_lookup": (index.lookup, cold_offsets),
            "offset_lookup_warm": (index.lookup, warm_offsets),
            "offset_lookup_ceiling": (index.lookup_ceiling, cold_offsets),
            "time_lookup": (tix.lookup, cold_ts),
            "time_then_offset": (seglog_time_then_offset, cold_ts),
            "bisect_array_offset": (lambda t: bisect_right(offset_keys, t), cold_offsets),
            "bisect_array_offset_warm": (lambda t: bisect_right(offset_keys, t), warm_offsets),
            "bisect_array_nt_offset": (bisect_array_nt, cold_offsets),
            "bisect_array_time": (lambda t: bisect_right(ts_keys, t), cold_ts),
            "bisect_array_nt_time": (bisect_array_time_nt, cold_ts),
            "bisect_list_offset": (lambda t: bisect_right(offset_list, t), cold_offsets),
            "struct_search_offset": (lambda t: struct_floor(mm_off, n, t, u32, 8), cold_offsets),
        }
        names = list(cases)
        clock = time.perf_counter_ns
        for name in names:
            samples[name] = []
        for number, start in enumerate(range(0, lookups, block)):
            shift = number % len(names)  # rotate the order so no case always runs first or last
            for name in names[shift:] + names[:shift]:
                fn, targets = cases[name]
                out = samples[name]
                for t in targets[start : start + block]:
                    t0 = clock()
                    fn(t)
                    out.append(clock() - t0)
    result: dict[str, float] = {}
    for name, ns in samples.items():
        result[f"{name}_p50_us"], result[f"{name}_p99_us"] = percentiles(ns)
    return result


RATIOS = {  # name: (seglog case, reference case), both p50
    "offset_lookup/bisect_array": ("offset_lookup", "bisect_array_offset"),
    "offset_lookup/bisect_array_nt": ("offset_lookup", "bisect_array_nt_offset"),
    "offset_lookup_warm/bisect_array_warm": ("offset_lookup_warm", "bisect_array_offset_warm"),
    "offset_lookup_ceiling/bisect_array": ("offset_lookup_ceiling", "bisect_array_offset"),
    "time_lookup/bisect_array": ("time_lookup", "bisect_array_time"),
    "time_lookup/bisect_array_nt": ("time_lookup", "bisect_array_nt_time"),
    "offset_lookup/bisect_list": ("offset_lookup", "bisect_list_offset"),
    "offset_lookup/struct_search": ("offset_lookup", "struct_search_offset"),
}
ACCEPTANCE = (
    "offset_lookup/bisect_array",
    "offset_lookup_ceiling/bisect_array",
    "time_lookup/bisect_array",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--lookups", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--block",
        type=int,
        default=10_000,
        help="targets per case before switching to the next case (1: switch after every lookup, so every "
        "case finds the CPU caches filled by the others)",
    )
    parser.add_argument("--json", type=Path, help="also write the medians here")
    args = parser.parse_args(argv)
    rounds: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="seglog-bench-indexes-") as tmp:
        directory = Path(tmp)
        off_path, ts_path = build(directory, args.entries)
        for r in range(args.runs):
            row = bench_appends(directory, args.entries, mirrored=False)
            row.update(bench_appends(directory, args.entries, mirrored=True))
            row.update(bench_mirror(off_path, ts_path, args.entries))
            row.update(bench_lookups(off_path, ts_path, args.entries, args.lookups, seed=r, block=args.block))
            for ratio, (case, ref) in RATIOS.items():
                row[ratio] = row[f"{case}_p50_us"] / row[f"{ref}_p50_us"]
            rounds.append(row)
            print(f"round {r + 1}/{args.runs} done", file=sys.stderr)
    medians = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    print(
        f"entries={args.entries} lookups={args.lookups} runs={args.runs} block={args.block} "
        "(medians; times in the key's unit)"
    )
    for key, value in medians.items():
        if key not in RATIOS:
            print(f"  {key:38} {value:10.3f}")
    print("ratios of p50s (median over rounds; each round's min-max):")
    for ratio in RATIOS:
        values = [r[ratio] for r in rounds]
        print(f"  {ratio:38} {medians[ratio]:6.2f}x  ({min(values):.2f}-{max(values):.2f})")
    passed = all(medians[ratio] <= ACCEPTANCE_RATIO for ratio in ACCEPTANCE)
    verdict = "met" if passed else "NOT met"
    print(f"acceptance (p50 of a lookup <= {ACCEPTANCE_RATIO}x a bare C bisect over a native array): {verdict}")
    if args.json:
        payload = {"args": vars(args) | {"json": str(args.json)}, "acceptance_met": passed, **medians}
        args.json.write_text(json.dumps(payload, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
