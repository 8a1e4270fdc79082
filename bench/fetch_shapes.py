"""Sequential fetch of the 8 append shapes beside the raw read + unpack, in one process (issue 22, point 3).

    .venv/bin/python bench/fetch_shapes.py [--rounds 7] [--passes 2] [--small 50000] [--large 20000]
    .venv/bin/python bench/fetch_shapes.py --profile 1x100 [--passes 20]   # pyinstrument of seglog's side
    PYTHONPATH=/path/to/other/tree .venv/bin/python bench/fetch_shapes.py   # (from outside the tree) before/after

For each shape (1, 10, 100, 1000 records per append x 100-B and 1 KiB values, as
``seglog bench --only shapes``) one log is written, then every round reads it
front to back with ``read(offset, 1 MiB)``, every record decoded
(``workloads.sequential_fetch``), and, right before or after (the order alternates
from round to round), the same records from a raw file of back-to-back msgpack rows
with 1 MiB ``pread`` + a streaming ``Unpacker`` (``references.raw_sequential_read``).
The ratio seglog ÷ raw (records per second) is taken per round; the figure is
the median of the rounds after one discarded warm-up round. The machine may be
shared: only the ratios mean anything. Plain script, never run by the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import tempfile
from pathlib import Path

import seglog
from seglog.engine import LogConfig, PartitionLog
from seglog.tools.bench import references as ref
from seglog.tools.bench import workloads
from seglog.tools.bench.data import Dataset, open_engine

RECORDS_PER_APPEND = (1, 10, 100, 1000)
VALUE_BYTES = (100, 1024)
CONFIG = LogConfig(max_message_bytes=4 << 20)  # 1000 x 1 KiB is a ~1.05 MB batch, as in the shapes section


def _label(records: int, value_bytes: int) -> str:
    return f"{records}x{'100' if value_bytes == 100 else '1K'}"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--passes", type=int, default=2, help="whole-log reads per variant per round")
    parser.add_argument("--small", type=int, default=50_000, help="records per log with 100-B values")
    parser.add_argument("--large", type=int, default=20_000, help="records per log with 1 KiB values")
    parser.add_argument("--profile", help="a shape such as 1x100 or 10x1K: profile seglog's fetch of it only")
    parser.add_argument("--only", help="comma-separated shapes to measure (default: all 8)")
    parser.add_argument("--gc-threshold", type=int, help="gc.set_threshold(N) for both sides (default: Python's)")
    args = parser.parse_args()
    if args.gc_threshold:
        gc.set_threshold(args.gc_threshold)
    shapes = [(r, v) for v in VALUE_BYTES for r in RECORDS_PER_APPEND]
    wanted = args.profile or args.only
    if wanted:
        names = set(wanted.split(","))
        shapes = [s for s in shapes if _label(*s) in names]
    with tempfile.TemporaryDirectory(prefix="seglog-fetch-shapes-") as tmp:
        directory = Path(tmp)
        engine = await open_engine(directory / "seglog", CONFIG)
        try:
            datasets = {v: Dataset(args.small if v == 100 else args.large, v) for v in VALUE_BYTES}
            logs: dict[str, PartitionLog] = {}
            raws: dict[int, Path] = {}
            for records, value_bytes in shapes:
                label = _label(records, value_bytes)
                topic = f"shape-{label}"
                await engine.create_topic(topic)
                logs[label] = log = engine.log(topic)
                await workloads.fill(log, datasets[value_bytes].batches(records))
                if value_bytes not in raws:
                    raws[value_bytes] = directory / f"raw-{value_bytes}.log"
                    ref.write_raw_file(raws[value_bytes], datasets[value_bytes].rows)
            if args.profile:
                await _profile(logs, datasets, args.passes)
                return
            ratios: dict[str, list[float]] = {label: [] for label in logs}
            for round_no in range(args.rounds + 1):
                for records, value_bytes in shapes:
                    label = _label(records, value_bytes)
                    count = datasets[value_bytes].count
                    seglog_s = raw_s = 0.0
                    for turn in range(2):
                        gc.collect()
                        if (turn + round_no) % 2 == 0:
                            for _ in range(args.passes):
                                seglog_s += await workloads.sequential_fetch(logs[label], count)
                        else:
                            for _ in range(args.passes):
                                raw_s += ref.raw_sequential_read(raws[value_bytes], count)
                    if round_no > 0:  # round 0 warms up
                        ratios[label].append(raw_s / seglog_s)  # rate ratio: seglog's rec/s over raw's
            print(f"seglog from {Path(seglog.__file__).parent}")  # which tree: PYTHONPATH may name another
            print(f"fetch ÷ raw read + unpack, median of {args.rounds} rounds ({args.passes} passes each):")
            for label, values in ratios.items():
                print(f"  {label:>7}: {statistics.median(values):5.2f}  (min {min(values):.2f}, max {max(values):.2f})")
        finally:
            await engine.close()


async def _profile(logs: dict[str, PartitionLog], datasets: dict[int, Dataset], passes: int) -> None:
    from pyinstrument import Profiler

    for label, log in logs.items():
        count = datasets[100 if label.endswith("100") else 1024].count
        await workloads.sequential_fetch(log, count)
        profiler = Profiler(interval=0.0002, async_mode="disabled")
        profiler.start()
        for _ in range(passes):
            await workloads.sequential_fetch(log, count)
        profiler.stop()
        print(profiler.output_text(unicode=False, color=False, show_all=False))


if __name__ == "__main__":
    asyncio.run(main())
