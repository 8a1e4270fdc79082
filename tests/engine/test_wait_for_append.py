"""``PartitionLog.wait_for_append``: the append notification a long-polling Kafka fetch parks on."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from enginehelpers import reach

from seglog.engine import Engine, Record


async def test_it_returns_at_once_when_the_record_exists_and_wakes_on_the_next_append(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("t")
        log = engine.log("t")
        await log.append([Record(b"a")])
        returned = log.wait_for_append(0).__await__()
        with pytest.raises(StopIteration):
            next(returned)  # offset 0 exists: it returns without ever suspending
        waiting = asyncio.ensure_future(log.wait_for_append(1))
        await reach(lambda: bool(log._data_waiters), "the wait for offset 1 parked")
        assert not waiting.done()  # the interleaving this test is about
        await log.append([Record(b"b")])
        await asyncio.wait_for(waiting, 30)  # a bound for a hang: the append wakes it
        assert log.log_end_offset == 2 and not log._data_waiters


async def test_a_cancelled_wait_leaves_nothing_behind(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("t")
        log = engine.log("t")
        for _ in range(3):
            with_timeout = asyncio.wait_for(log.wait_for_append(0), 0.01)
            try:
                await with_timeout
            except TimeoutError:
                pass
            else:
                raise AssertionError("nothing was appended, yet the wait returned")
        assert log._data_waiters == []


async def test_closing_the_log_ends_the_wait(tmp_path: Path) -> None:
    engine = await Engine.open(tmp_path)
    await engine.create_topic("t")
    log = engine.log("t")
    waiting = asyncio.ensure_future(log.wait_for_append(0))
    await reach(lambda: bool(log._data_waiters), "the wait parked before the close")
    await engine.close()
    await asyncio.wait_for(waiting, 30)  # a bound for a hang: the close ends it
