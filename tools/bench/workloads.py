"""seglog's side of every benchmark: the engine driven through its public API only.

Each function returns seconds (or fills a list of per-operation latencies);
setup and teardown are outside the timed part.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final

from seglog.engine import Engine, LogConfig, PartitionLog, Record
from seglog.tools.bench.data import open_engine
from seglog.tools.bench.timing import now

TOPIC: Final = "bench"
FETCH_BYTES: Final = 1 << 20  # one consumer fetch: Kafka's default max.partition.fetch.bytes
POINT_FETCH_BYTES: Final = 1  # a one-record read: minOneMessage returns at least the record asked for


async def open_log(
    directory: Path, config: LogConfig | None = None, *, create: bool = True
) -> tuple[Engine, PartitionLog]:
    """Open an engine on ``directory`` (creating topic ``bench`` with one partition if asked)."""
    engine = await open_engine(directory, config)
    try:
        if create:
            await engine.create_topic(TOPIC, partitions=1)
        return engine, engine.log(TOPIC, 0)
    except BaseException:
        await engine.close()
        raise


async def produce(directory: Path, batches: Sequence[Sequence[Record]], config: LogConfig | None = None) -> float:
    """Append every batch, one ``append`` call each, one after another; seconds (open and close excluded)."""
    engine, log = await open_log(directory, config)
    try:
        append = log.append
        start = now()
        for batch in batches:
            await append(batch)
        return now() - start
    finally:
        await engine.close()


async def produce_concurrent(
    directory: Path, records: Sequence[Record], callers: int, config: LogConfig | None = None
) -> float:
    """``callers`` tasks, each appending its share of ``records`` one record per call; seconds."""
    engine, log = await open_log(directory, config)
    try:
        shares = [records[i::callers] for i in range(callers)]

        async def caller(share: Sequence[Record]) -> None:
            append = log.append
            for record in share:
                await append([record])

        start = now()
        await asyncio.gather(*(caller(share) for share in shares))
        return now() - start
    finally:
        await engine.close()


async def fill(log: PartitionLog, batches: Iterable[Sequence[Record]]) -> None:
    for batch in batches:
        await log.append(batch)


async def sequential_fetch(log: PartitionLog, expected: int) -> float:
    """Read the log front to back in 1 MiB fetches, every record decoded; seconds."""
    read = log.read
    offset, end, count = log.log_start_offset, log.log_end_offset, 0
    start = now()
    while offset < end:
        result = await read(offset, FETCH_BYTES)
        count += len(result.records)
        offset = result.next_offset
    elapsed = now() - start
    if count != expected:
        raise RuntimeError(f"seglog fetch returned {count} records, expected {expected}")
    return elapsed


async def point_reads(log: PartitionLog, offsets: Sequence[int], out: list[float]) -> None:
    """``read(offset, 1)`` — one record by offset — one sample per offset."""
    read = log.read
    for offset in offsets:
        start = now()
        result = await read(offset, POINT_FETCH_BYTES)
        out.append(now() - start)
        if result.records[0].offset != offset:
            raise RuntimeError(f"point read of {offset} returned offset {result.records[0].offset}")


async def timestamp_reads(log: PartitionLog, timestamps: Sequence[int], out: list[float]) -> None:
    """``offset_for_timestamp(ts)`` then ``read(offset, 1)``: find and fetch the first record at ``ts``."""
    lookup, read = log.offset_for_timestamp, log.read
    for ts in timestamps:
        start = now()
        found = await lookup(ts)
        assert found is not None  # every target lies inside the log
        result = await read(found.offset, POINT_FETCH_BYTES)
        out.append(now() - start)
        if result.records[0].timestamp != ts:
            raise RuntimeError(f"timestamp lookup of {ts} found timestamp {result.records[0].timestamp}")


async def subscribe_latencies(log: PartitionLog, records: Sequence[Record], out: list[float]) -> None:
    """End to end: from the ``append`` call to the subscriber holding the record, one record at a time."""
    arrived = asyncio.Event()
    arrival = [0.0]

    async def subscriber() -> None:
        async for _ in log.subscribe(log.log_end_offset):
            arrival[0] = now()
            arrived.set()

    task = asyncio.get_running_loop().create_task(subscriber())
    await asyncio.sleep(0.01)  # let the subscriber reach its wait
    try:
        for record in records:
            arrived.clear()
            start = now()
            await log.append([record])
            await arrived.wait()
            out.append(arrival[0] - start)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def sample_offsets(rnd: random.Random, start: int, end: int, count: int) -> list[int]:
    return [rnd.randrange(start, end) for _ in range(count)]
