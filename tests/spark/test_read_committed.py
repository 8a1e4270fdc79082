"""The seglog source over a directory with transactions: read_committed by default, ``isolation.level`` to change it.

Partition t-0, written by the engine and closed cleanly with one transaction
still open: ``0 plain | 1-2 A | 3 B | 4 COMMIT A | 5 B | 6 ABORT B | 7 C (open) | 8 plain`` (LSO 7).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from seglog.engine import Engine, Record
from seglog.tools.spark import read_seglog

pytestmark = pytest.mark.spark

COMMITTED = [(0, b"p0"), (1, b"a1"), (2, b"a2")]
EVERY_DATA_RECORD = [(0, b"p0"), (1, b"a1"), (2, b"a2"), (3, b"b1"), (5, b"b2"), (7, b"c1"), (8, b"p8")]


async def _write(log_dir: Path) -> None:
    async with Engine.open(log_dir) as engine:
        await engine.create_topic("t", partitions=1)
        log = engine.log("t", 0)

        async def txn(pid: int, seq: int, *values: bytes) -> None:
            await log.append([Record(v) for v in values], producer_id=pid, producer_epoch=0, base_sequence=seq,
                             transactional=True)

        await log.append([Record(b"p0")])
        await txn(7, 0, b"a1", b"a2")
        await txn(8, 0, b"b1")
        await log.write_txn_marker(7, 0, commit=True)
        await txn(8, 1, b"b2")
        await log.write_txn_marker(8, 0, commit=False)
        await txn(9, 0, b"c1")
        await log.append([Record(b"p8")])


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("txns")
    asyncio.run(_write(path))
    return path


def _rows(df: Any) -> list[tuple[int, bytes]]:
    return sorted((r.offset, bytes(r.value)) for r in df.select("offset", "value").collect())


def test_a_batch_read_is_read_committed_by_default_and_isolation_level_changes_it(spark: Any, log_dir: Path) -> None:
    assert _rows(read_seglog(spark, str(log_dir))) == COMMITTED
    assert _rows(read_seglog(spark, str(log_dir), **{"isolation.level": "read_uncommitted"})) == EVERY_DATA_RECORD
    assert _rows(read_seglog(spark, str(log_dir), **{"kafka.isolation.level": "read_uncommitted"})) == EVERY_DATA_RECORD
    assert _rows(read_seglog(spark, str(log_dir), **{"isolation.level": "read_committed"})) == COMMITTED


def test_a_stream_stops_at_the_last_stable_offset(spark: Any, log_dir: Path, tmp_path: Path) -> None:
    got: list[tuple[int, bytes]] = []

    def collect(df: Any, epoch: int) -> None:
        got.extend(_rows(df))

    query = (
        spark.readStream.format("seglog").option("startingOffsets", "earliest").load(str(log_dir))
        .writeStream.foreachBatch(collect).option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True).start()
    )
    assert query.awaitTermination(120)
    assert sorted(got) == COMMITTED
