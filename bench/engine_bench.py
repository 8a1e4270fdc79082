"""Engine benchmark driver: the ``seglog bench`` suite from a checkout, plus profiles of its hot paths.

    .venv/bin/python bench/engine_bench.py [--quick] [--json PATH] [--only NAME,...]   # == seglog bench
    .venv/bin/python bench/engine_bench.py --profile produce      # pyinstrument profile of one hot path
    .venv/bin/python bench/engine_bench.py --profile point --html /tmp/point.html

Profiles (each runs the workload seglog bench times, under pyinstrument, on uvloop):

    produce      1000-record batches of 100 B, no fsync
    concurrent   100 callers appending one record each
    fetch        sequential 1 MiB fetches, decoded
    point        one-record reads by offset (batches of 100)
    timestamp    offset_for_timestamp + one-record read
    subscribe    append one record, wait for the subscriber to get it
    open         clean open of 200 partitions x 10 segments

The figures themselves come from ``seglog bench`` (docs/PERFORMANCE.md); a
profile's wall time is inflated by the profiler and is not a result.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

from seglog.engine import Engine, run
from seglog.tools.bench import scaling, workloads
from seglog.tools.bench.data import BASE_TIMESTAMP_MS, Dataset
from seglog.tools.cli import main as seglog_main

PROFILES = ("produce", "concurrent", "fetch", "point", "timestamp", "subscribe", "open")


Target = tuple[Callable[[], Awaitable[object]], Engine | None]


async def _profile_target(name: str, scratch: Path) -> Target:
    """Set up the workload ``name`` in ``scratch``: the coroutine function to profile, and the engine to close."""
    data = Dataset(100_000, 100)
    rnd = random.Random(7)
    if name == "produce":
        batches = data.batches(1000)
        counter = iter(range(1_000_000))
        return (lambda: workloads.produce(scratch / f"p{next(counter)}", batches)), None
    if name == "concurrent":
        counter = iter(range(1_000_000))
        return (lambda: workloads.produce_concurrent(scratch / f"c{next(counter)}", data.records[:20_000], 100)), None
    if name == "open":
        root = scratch / "open"
        await scaling.build_many_partitions(root, 200, 1, data)

        return (lambda: scaling.timed_open(root)), None
    engine, log = await workloads.open_log(scratch / "log")
    await workloads.fill(log, data.batches(100 if name in ("point", "timestamp") else 1000))
    n = data.count
    if name == "fetch":

        return (lambda: workloads.sequential_fetch(log, n)), engine
    if name == "point":
        return (lambda: workloads.point_reads(log, workloads.sample_offsets(rnd, 0, n, 5000), [])), engine
    if name == "timestamp":
        targets = [BASE_TIMESTAMP_MS + o for o in workloads.sample_offsets(rnd, 0, n, 5000)]
        return (lambda: workloads.timestamp_reads(log, targets, [])), engine
    if name == "subscribe":
        return (lambda: workloads.subscribe_latencies(log, data.records[:2000], [])), engine
    await engine.close()
    raise SystemExit(f"unknown profile {name!r}; choose from {', '.join(PROFILES)}")


def profile(name: str, rounds: int, html: str | None) -> None:
    from pyinstrument import Profiler

    profiler = Profiler(async_mode="disabled", interval=0.0002)

    async def go() -> None:
        with tempfile.TemporaryDirectory(prefix="seglog-profile-") as tmp:
            target, engine = await _profile_target(name, Path(tmp))
            try:
                await target()  # warm-up, not profiled
                profiler.start()
                for _ in range(rounds):
                    await target()
                profiler.stop()
            finally:
                if engine is not None:
                    await engine.close()
        if html:
            Path(html).write_text(profiler.output_html(), encoding="utf-8")
            print(f"profile written to {html}", file=sys.stderr)
        else:
            print(profiler.output_text(unicode=True, color=False, show_all=False))

    run(go())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", choices=PROFILES, help="profile one hot path instead of running the suite")
    parser.add_argument("--rounds", type=int, default=3, help="profiled repetitions of the workload (default 3)")
    parser.add_argument("--html", default=None, help="write the profile as HTML to this path")
    args, rest = parser.parse_known_args()
    if args.profile:
        profile(args.profile, args.rounds, args.html)
        return 0
    return seglog_main(["bench", *rest])


if __name__ == "__main__":
    sys.exit(main())
