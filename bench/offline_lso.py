"""What an offline reader (the Spark source's plan) pays to look at a live partition: its LSO and its log end.

    .venv/bin/python bench/offline_lso.py [--batches 20000] [--more 100] [--looks 5] [DIR]

A writer engine appends ``--batches`` batches of 10 records of 100 B to one
partition (one active segment, no roll, so no snapshot after the first
batch), then the first look is timed; then ``--looks`` times: ``--more``
batches are appended and a look timed. The first look walks every batch
header of the active segment; a later one walks on from where the previous
ended (the Spark source's driver looks at every trigger). Prints the first
look, the median of the later ones, and their ratio. Then, on the same
directory, ``offline.log_end_offset`` (a binary search over a few slots of the
active segment's preallocated offset index, then a walk from that entry)
beside ``offline.dump_index`` of that index (reading every slot: what finding
the last entry cost before), interleaved, medians. Never run by pytest.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from seglog.engine import Engine, LogConfig, Record, offline


async def main(directory: Path, batches: int, more: int, looks: int) -> None:
    async with Engine.open(directory, LogConfig(segment_bytes=1 << 30)) as engine:
        await engine.create_topic("t")
        log = engine.log("t")
        for _ in range(batches):
            await log.append([Record(b"x" * 100) for _ in range(10)])
        started = time.perf_counter()
        offline.partition_transactions(directory, "t", 0)
        first = time.perf_counter() - started
        later = []
        for _ in range(looks):
            for _ in range(more):
                await log.append([Record(b"x" * 100) for _ in range(10)])
            started = time.perf_counter()
            found = offline.partition_transactions(directory, "t", 0)
            later.append(time.perf_counter() - started)
            assert found.last_stable_offset == log.log_end_offset
        index = directory / "t-0" / f"{0:020d}.index"
        probe, full = [], []
        for _ in range(looks):
            started = time.perf_counter()
            assert offline.log_end_offset(directory, "t", 0) == log.log_end_offset
            probe.append(time.perf_counter() - started)
            started = time.perf_counter()
            offline.dump_index(index)
            full.append(time.perf_counter() - started)
    median = statistics.median(later)
    print(f"active segment of {batches:,} batches: first look {first * 1e3:.1f} ms; "
          f"after {more} more batches: median {median * 1e3:.2f} ms over {looks} looks; ratio {median / first:.4f}")
    p, f = statistics.median(probe), statistics.median(full)
    print(f"log_end_offset {p * 1e3:.2f} ms; reading the whole index {f * 1e3:.2f} ms; ratio {p / f:.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir", nargs="?", type=Path, help="an empty directory (default: a temporary one)")
    parser.add_argument("--batches", type=int, default=20_000)
    parser.add_argument("--more", type=int, default=100)
    parser.add_argument("--looks", type=int, default=5)
    args = parser.parse_args()
    if args.dir is None:
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(main(Path(tmp), args.batches, args.more, args.looks))
    else:
        asyncio.run(main(args.dir, args.batches, args.more, args.looks))
