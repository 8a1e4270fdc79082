"""What one executor hop and one segment append cost on this machine (wall and loop-thread CPU).

    .venv/bin/python bench/hop_cost.py [--rounds 2000] [--batches 300]

Prints, per call: an empty ``run_in_executor`` hop (uvloop and asyncio), ``os.write`` of a
1000-record batch, and an append of the same batch as the engine makes it (``segment_append``:
one hop + the write + bookkeeping).
The figures behind issue 3's note: the hop, not the bytes, is what keeps a single-batch append from
the raw msgpack + ``os.write`` rate. Plain script, never run by the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from seglog.engine import run
from seglog.engine.log import segment_append
from seglog.segments.batch import TimestampType, encode_batch
from seglog.segments.records import Record
from seglog.segments.segment import LogSegment, batch_headers


async def hop(rounds: int) -> tuple[float, float]:
    loop = asyncio.get_running_loop()
    for _ in range(50):
        await loop.run_in_executor(None, len, b"x")
    wall, cpu = time.perf_counter(), time.thread_time()
    for _ in range(rounds):
        await loop.run_in_executor(None, len, b"x")
    return (time.perf_counter() - wall) / rounds * 1e6, (time.thread_time() - cpu) / rounds * 1e6


async def append(seg: LogSegment, batches: list[bytes]) -> int:
    # As the engine appends (engine.log.segment_append): one hop to the append threads.
    return await segment_append(seg, batches, batch_headers(batches))


async def appends(batches: int) -> tuple[float, float, float]:
    records = [Record(os.urandom(100), os.urandom(16), 1_700_000_000_000 + i) for i in range(1000)]
    encoded = [
        encode_batch(i * 1000, records, timestamp_type=TimestampType.CREATE_TIME, now_ms=0) for i in range(batches)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        seg = LogSegment.open(directory, 0, max_index_size=10 << 20, index_interval_bytes=4096,
                                    roll_jitter_ms=0, now_ms=0)
        wall, cpu = time.perf_counter(), time.thread_time()
        for batch in encoded:
            await append(seg, [batch])
        append_wall = (time.perf_counter() - wall) / batches * 1e6
        append_cpu = (time.thread_time() - cpu) / batches * 1e6
        seg.close()
        fd = os.open(directory / "raw", os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            wall = time.perf_counter()
            for batch in encoded:
                os.write(fd, batch)
            write_wall = (time.perf_counter() - wall) / batches * 1e6
        finally:
            os.close(fd)
    return append_wall, append_cpu, write_wall


async def main(rounds: int, batches: int) -> None:
    hop_wall, hop_cpu = await hop(rounds)
    print(f"{type(asyncio.get_running_loop()).__module__:24s} empty hop: {hop_wall:6.1f} us wall, "
          f"{hop_cpu:6.1f} us loop-thread CPU")
    append_wall, append_cpu, write_wall = await appends(batches)
    print(f"{'':24s} LogSegment.append (1000 x 100 B): {append_wall:6.1f} us wall, {append_cpu:6.1f} us "
          f"loop-thread CPU; os.write of the same batch {write_wall:6.1f} us")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--batches", type=int, default=300)
    args = parser.parse_args()
    run(main(args.rounds, args.batches))
    asyncio.run(main(args.rounds, args.batches))
