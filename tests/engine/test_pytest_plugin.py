"""The seglog pytest plugin (entry point pytest11), used exactly as a user's project would use it."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from seglog.engine import Engine, LogConfig, Record


def test_config_fixture_uses_small_segments(seglog_config: LogConfig) -> None:
    assert seglog_config.segment_bytes == 64 * 1024


async def test_engine_fixture_is_fresh_and_open(seglog_engine: Engine, seglog_dir: Path, seglog: ModuleType) -> None:
    assert seglog_engine.topics() == [] and seglog_engine.path == seglog_dir
    await seglog_engine.create_topic("orders", partitions=2)
    await seglog_engine.produce("orders", b"paid", key=b"order-1")
    await seglog_engine.produce("orders", b"shipped", key=b"order-1")
    await seglog.assert_topic_holds(seglog_engine, "orders", [b"shipped", b"paid"])  # any order across partitions
    partition = (await seglog_engine.produce("orders", b"done", key=b"order-1")).partition
    await seglog.assert_topic_holds(seglog_engine, "orders", [b"paid", b"shipped", b"done"], partition=partition,
                                    keys=[b"order-1"] * 3)
    with pytest.raises(AssertionError, match="holds"):
        await seglog.assert_topic_holds(seglog_engine, "orders", [b"paid"], partition=partition)


async def test_recovery_reports_progress(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("t", partitions=3)
        for p in range(3):
            await engine.log("t", p).append([Record(b"x" * 100)] * 10)
        await engine._abort_open()  # a crash: no clean-shutdown marker
    seen = []
    async with Engine.open(tmp_path, on_progress=seen.append) as engine:
        assert not engine.had_clean_shutdown
    assert [p.partitions_done for p in seen] == [1, 2, 3]
    assert {p.partitions_total for p in seen} == {3}
    assert sum(p.segments_recovered for p in seen) == 3 and sum(p.bytes_recovered for p in seen) > 3000
