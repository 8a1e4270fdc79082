"""Scaling runs: clean open vs listing, unclean recovery vs bytes after the recovery point, lookups vs log size.

Directories are built through the engine, then copied or re-checkpointed at
the file level to reach the states a long-running broker would leave: many
partitions after a clean shutdown, or a crash with a given recovery point.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from seglog.engine import Engine, LogConfig, Record, offline
from seglog.tools.bench.data import BASE_TIMESTAMP_MS, Dataset, open_engine
from seglog.tools.bench.timing import now
from seglog.tools.bench.workloads import TOPIC

RECOVERY_POINT_FILE: Final = "recovery-point-offset-checkpoint"  # docs/OPERATIONS.md §1
CLEAN_SHUTDOWN_FILE: Final = ".clean-shutdown"  # docs/OPERATIONS.md §1
SEGMENTS_PER_PARTITION: Final = 10


# ------------------------------------------------------------------------------------ clean open


async def build_many_partitions(root: Path, partitions: int, batches_per_segment: int, data: Dataset) -> int:
    """A log directory of ``partitions`` x 10 segments after a clean shutdown; returns its ``.log`` bytes.

    The engine creates the topic and fills partition 0 (a batch of 30 records
    per ``batches_per_segment``, a roll after each segment); the other
    partitions get copies of partition 0's segment files, and an engine opens
    (recovering them) and closes the directory once more.
    """
    batch = data.records[:30]
    async with await open_engine(root) as engine:
        await engine.create_topic(TOPIC, partitions=partitions)
        log = engine.log(TOPIC, 0)
        for segment in range(SEGMENTS_PER_PARTITION):
            for _ in range(batches_per_segment):
                await log.append(batch)
            if segment < SEGMENTS_PER_PARTITION - 1:
                await log.roll()
    source = root / f"{TOPIC}-0"
    copied = (offline.LOG_SUFFIX, offline.INDEX_SUFFIX, offline.TIME_INDEX_SUFFIX)
    files = [p for p in source.iterdir() if p.suffix in copied]
    for partition in range(1, partitions):
        target = root / f"{TOPIC}-{partition}"
        for stale in target.iterdir():
            if stale.suffix in copied:
                stale.unlink()
        for path in files:
            shutil.copyfile(path, target / path.name)
    # The copies changed the partitions behind the clean close's back: one unclean open (recovering
    # them) and a clean close leave the directory as an engine would, its .clean-shutdown record true.
    (root / ".clean-shutdown").unlink()
    async with await open_engine(root):
        pass
    return partitions * sum(p.stat().st_size for p in files if p.suffix == offline.LOG_SUFFIX)


async def timed_open(root: Path, *, use_every_partition: bool = False) -> float:
    """Seconds for ``Engine.open`` of ``root`` (the close afterwards is not timed).

    With ``use_every_partition``, also a one-record read from every partition,
    one after another: after a clean close a partition's files are opened by
    its first use, so this is what the open deferred.
    """
    start = now()
    engine = await open_engine(root)
    if use_every_partition:
        for log in engine.logs():
            await log.read(log.log_start_offset, max_bytes=1)
    elapsed = now() - start
    await engine.close()
    return elapsed


# ------------------------------------------------------------------------------------ recovery


@dataclass(slots=True)
class CrashCase:
    name: str
    root: Path
    checkpoint: bytes  # the recovery-point checkpoint a crash would have left
    bytes_after: int  # bytes of the segments from the recovery point on
    bytes_total: int


async def _fill_to(engine: Engine, data: Dataset, target_bytes: int, cursor: Iterator[list[Record]]) -> None:
    log = engine.log(TOPIC, 0)
    while log.size_bytes < target_bytes:
        await log.append(next(cursor))


def _cycle(data: Dataset) -> Iterator[list[Record]]:
    batches = data.batches(1000)
    while True:
        yield from batches


async def build_crash_cases(root: Path, data: Dataset, unit_bytes: int) -> list[CrashCase]:
    """Two partitions' worth of directories and four crash states over them.

    ``big`` holds 4 units of segments (a roll after each unit) and ``small`` 2;
    the recovery point of each case sits on a segment boundary so the bytes
    after it are exact: (4 units, 4 after), (4, 2), (4, 1) and (2, 1).
    """
    cases: list[CrashCase] = []
    config = LogConfig(segment_bytes=1 << 30)
    for name, units, afters in (("big", 4, (4, 2, 1)), ("small", 2, (1,))):
        directory = root / name
        checkpoints: dict[int, bytes] = {}
        async with await open_engine(directory, config) as engine:
            await engine.create_topic(TOPIC, partitions=1)
            log = engine.log(TOPIC, 0)
            cursor = _cycle(data)
            for unit in range(units):
                await engine.flush()  # the checkpoint now says: recovered up to here
                checkpoints[units - unit] = (directory / RECOVERY_POINT_FILE).read_bytes()
                await _fill_to(engine, data, (unit + 1) * unit_bytes, cursor)
                if unit < units - 1:
                    await log.roll()
            total = log.size_bytes
        sizes = sorted((s.base_offset, s.size_bytes) for s in offline.list_segments(directory / f"{TOPIC}-0"))
        for after in afters:
            after_bytes = sum(size for _, size in sizes[units - after :])
            label = f"total {units}X, after {after}X"
            cases.append(CrashCase(label, directory, checkpoints[after], after_bytes, total))
    return cases


async def timed_recovery(case: CrashCase) -> tuple[float, int]:
    """Leave ``case.root`` as a crash would (its checkpoint, no clean-shutdown marker), then time the open.

    Returns (seconds, bytes the engine reports recovered).
    """
    (case.root / RECOVERY_POINT_FILE).write_bytes(case.checkpoint)
    (case.root / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
    recovered = [0]

    def on_progress(progress: object) -> None:
        recovered[0] += getattr(progress, "bytes_recovered", 0)

    start = now()
    engine = await open_engine(case.root, on_progress=on_progress)
    elapsed = now() - start
    if engine.had_clean_shutdown:
        raise RuntimeError(f"{case.root}: expected an unclean open")
    await engine._abort_open()  # close without the clean-shutdown marker: the next open recovers again
    return elapsed, recovered[0]


# ------------------------------------------------------------------------------------ lookups


def tiny_batches(count: int, batch: int) -> Iterator[list[Record]]:
    """``count`` records of 1-byte values, no key, timestamps 1 ms apart, made batch by batch (no big list)."""
    value = b"x"
    for first in range(0, count, batch):
        yield [Record(value, None, BASE_TIMESTAMP_MS + i) for i in range(first, min(first + batch, count))]
