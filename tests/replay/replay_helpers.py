"""Shared helpers of the replay tests that need the engine (a plain module, not a conftest, so the
tests of the engine-free parts still run when the engine cannot be imported)."""

from __future__ import annotations

from pathlib import Path

from seglog.engine import Engine, errors
from seglog.tools.replay.format import Workload, WorkloadRow, derive_partitions

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "sample-workload.parquet"


def workload(rows: list[WorkloadRow], partitions: dict[str, int] | None = None) -> Workload:
    return Workload(rows, derive_partitions(rows, partitions or {}))


async def partition_contents(log_dir: Path) -> dict[tuple[str, int], list[tuple[object, ...]]]:
    """Every record of every partition as (key, value, timestamp, headers), read via the public API."""
    out: dict[tuple[str, int], list[tuple[object, ...]]] = {}
    async with Engine.open(log_dir) as engine:
        for topic in sorted(engine.topics()):
            p = 0
            while True:
                try:
                    log = engine.log(topic, p)
                except errors.UnknownTopicOrPartitionError:
                    break
                records: list[tuple[object, ...]] = []
                offset = log.log_start_offset
                while offset < log.log_end_offset:
                    got = await log.read(offset, max_bytes=1 << 20)
                    records += [(r.key, r.value, r.timestamp, tuple(r.headers)) for r in got.records]
                    offset = got.next_offset
                out[(topic, p)] = records
                p += 1
    return out
