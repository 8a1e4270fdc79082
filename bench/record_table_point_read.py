"""Microseconds per point read of one record of a 1000 x 1 KiB batch (a record-table read), this tree.

Run it on two trees, alternated, and compare the medians of the same session: the figure alone depends
on the machine's load.

    .venv/bin/python bench/record_table_point_read.py LABEL
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import tempfile
import time

from seglog import Engine, Record

READS = 20_000
ROUNDS = 5


async def main(label: str) -> None:
    with tempfile.TemporaryDirectory() as directory:
        async with Engine.open(directory) as engine:
            await engine.create_topic("t")
            log = engine.log("t")
            for batch in range(20):
                await log.append([Record(b"v" * 1024, b"k" * 16, 1000 + batch * 1000 + i) for i in range(1000)])
            offsets = [random.randrange(20 * 1000) for _ in range(READS)]
            for offset in offsets:  # warm-up: every batch's record table built
                await log.read(offset, 1)
            rounds = []
            for _ in range(ROUNDS):
                start = time.perf_counter()
                for offset in offsets:
                    await log.read(offset, 1)
                rounds.append((time.perf_counter() - start) / READS * 1e6)
    print(f"{label}: {statistics.median(rounds):.2f} us per point read (median of {ROUNDS} rounds of {READS})")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "this tree"))
