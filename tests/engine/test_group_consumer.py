"""The library group consumer (``engine.consumer``): sharing partitions, rebalancing, commits, seek, pause.

Ordering comes from the consumers' own events (a rebalance listener) and the
coordinator's state (``wait_until``); every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from seglog.engine import Engine, Record, errors
from seglog.engine.consumer import ConsumerRecord, GroupConsumer, TopicPartition
from seglog.engine.coordinator import GroupState

BOUND_S = 15.0
FAST: dict[str, Any] = {"session_timeout_ms": 2_000, "heartbeat_interval_ms": 100, "rebalance_timeout_ms": 5_000}


class Assignments:
    """A rebalance listener that lets a test wait for an assignment that satisfies a predicate."""

    def __init__(self) -> None:
        self.current: set[TopicPartition] = set()
        self.revocations = 0
        self._changed = asyncio.Event()

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.revocations += 1
        self.current = set()

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.current = set(assigned)
        self._changed.set()

    async def wait_for(self, predicate: Callable[[set[TopicPartition]], bool]) -> None:
        async with asyncio.timeout(BOUND_S):
            while not predicate(self.current):
                self._changed.clear()
                await self._changed.wait()


async def fill(
    engine: Engine, topic: str = "orders", partitions: int = 4, per_partition: int = 10
) -> set[tuple[int, int]]:
    await engine.create_topic(topic, partitions=partitions, exist_ok=True)
    sent = set()
    for p in range(partitions):
        res = await engine.log(topic, p).append([Record(b"%d-%d" % (p, i)) for i in range(per_partition)])
        sent |= {(p, o) for o in range(res.first_offset, res.last_offset + 1)}
    return sent


async def drain(consumer: GroupConsumer, seen: list[tuple[int, int]], done: Callable[[], bool],
                *, commit_each: bool = False) -> None:
    """Read until ``done()``, recording (partition, offset) of every record handed out."""
    async with asyncio.timeout(BOUND_S):
        while not done():
            got = await consumer.getmany(timeout_ms=50)
            for records in got.values():
                seen.extend((r.partition, r.offset) for r in records)
            if got and commit_each:
                # A rebalance may have taken the partitions: their new owner reads from the last commit.
                with contextlib.suppress(errors.CommitFailedError):
                    await consumer.commit()


async def test_records_carry_their_topic_and_partition(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("orders", partitions=2)
        await engine.log("orders", 1).append([Record(b"v", key=b"k", timestamp=1000, headers=(("h", b"x"),))])
        async with engine.consumer("g", ["orders"], **FAST) as consumer:
            record = await asyncio.wait_for(consumer.getone(), BOUND_S)
        assert isinstance(record, ConsumerRecord)
        assert (record.topic, record.partition, record.offset, record.value, record.key, record.timestamp,
                record.headers) == ("orders", 1, 0, b"v", b"k", 1000, (("h", b"x"),))
        assert record.record() == Record(b"v", b"k", 1000, (("h", b"x"),), 0)


async def test_a_member_resumes_from_the_committed_offset_after_a_restart(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        await fill(engine, partitions=1, per_partition=10)
        async with engine.consumer("g", ["orders"], enable_auto_commit=False, **FAST) as consumer:
            first = [await asyncio.wait_for(consumer.getone(), BOUND_S) for _ in range(4)]
            await consumer.commit()
            await asyncio.wait_for(consumer.getone(), BOUND_S)  # read, never committed
        assert [r.offset for r in first] == [0, 1, 2, 3]
    async with Engine.open(tmp_path) as engine:
        async with engine.consumer("g", ["orders"], **FAST) as consumer:
            resumed = await asyncio.wait_for(consumer.getone(), BOUND_S)
        assert resumed.offset == 4


async def test_two_members_split_four_partitions_and_each_record_is_delivered_once(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        sent = await fill(engine, per_partition=50)
        seen: list[tuple[int, int]] = []
        heard_a, heard_b = Assignments(), Assignments()
        a = engine.consumer("g", ["orders"], listener=heard_a, **FAST)
        b = engine.consumer("g", ["orders"], listener=heard_b, **FAST)
        async with a:
            # a reads alone for a while, then b joins in the middle of the backlog.
            got = await a.getmany(max_records=30)
            seen += [(r.partition, r.offset) for rs in got.values() for r in rs]
            async with b:
                await heard_a.wait_for(lambda s: len(s) == 2)
                await heard_b.wait_for(lambda s: len(s) == 2)
                assert not heard_a.current & heard_b.current
                def done() -> bool:
                    return len(seen) >= len(sent)
                await asyncio.gather(drain(a, seen, done), drain(b, seen, done))
        assert sorted(seen) == sorted(sent)  # every record once: no loss, no duplicate


async def test_when_a_member_leaves_the_other_takes_every_partition_without_redelivery(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        sent = await fill(engine, per_partition=20)
        seen: list[tuple[int, int]] = []
        heard_a = Assignments()
        options = {**FAST, "enable_auto_commit": False}
        async with engine.consumer("g", ["orders"], listener=heard_a, **options) as a:
            async with engine.consumer("g", ["orders"], **options) as b:
                await heard_a.wait_for(lambda s: len(s) == 2)
                half = len(sent) // 2
                await asyncio.gather(drain(a, seen, lambda: len(seen) >= half, commit_each=True),
                                     drain(b, seen, lambda: len(seen) >= half, commit_each=True))
                await b.commit()
                await a.commit()
            # b left: a takes all four partitions and reads on from b's commits.
            await heard_a.wait_for(lambda s: len(s) == 4)
            await drain(a, seen, lambda: len(seen) >= len(sent), commit_each=True)
        assert sorted(seen) == sorted(sent)


async def test_a_member_that_stops_heartbeating_is_expired_and_its_partitions_move(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        await fill(engine, per_partition=1)
        heard = Assignments()
        async with engine.consumer("g", ["orders"], listener=heard, **FAST) as consumer:
            coord = engine.coordinator
            # A member of the same group that joins, takes its share, and then never heartbeats.
            from seglog.engine.assignors import encode_subscription
            silent_join = asyncio.create_task(coord.join(
                "g", protocol_type="consumer", protocols=[("range", encode_subscription(["orders"]))],
                session_timeout_ms=1_000, rebalance_timeout_ms=5_000, client_id="silent",
            ))
            async with asyncio.timeout(BOUND_S):
                silent = await silent_join
                share = await coord.sync("g", silent.generation_id, silent.member_id)
            assert share.error.name == "NONE" and share.assignment
            await heard.wait_for(lambda s: len(s) == 2)
            # 1 s without a heartbeat: the silent member is removed and its partitions come to the consumer.
            await heard.wait_for(lambda s: len(s) == 4)
            assert consumer.assignment() == {TopicPartition("orders", p) for p in range(4)}


async def test_seek_pause_and_resume(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        await fill(engine, partitions=2, per_partition=5)
        async with engine.consumer("g", ["orders"], enable_auto_commit=False, **FAST) as consumer:
            p0, p1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
            consumer.seek("orders", 0, 3)
            consumer.pause(p1)
            assert consumer.paused() == {p1}
            got = await consumer.getmany(timeout_ms=100)
            assert list(got) == [p0] and [r.offset for r in got[p0]] == [3, 4]
            assert await consumer.getmany(timeout_ms=50) == {}  # p0 at its end, p1 paused
            consumer.resume(p1)
            got = await consumer.getmany(timeout_ms=100)
            assert [r.offset for r in got[p1]] == [0, 1, 2, 3, 4]
            assert await consumer.position(p0) == 5
            consumer.seek_to_beginning(p0)
            assert (await consumer.getone(p0)).offset == 0
            with pytest.raises(errors.InvalidRecordError, match="not assigned"):
                consumer.seek("other", 0, 0)


async def test_a_waiting_getone_is_woken_by_an_append(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("orders")
        async with engine.consumer("g", ["orders"], **FAST) as consumer:
            waiting = asyncio.create_task(consumer.getone())
            for _ in range(100):  # until the reader is parked on the log (asserted below)
                if consumer._changed is not None:
                    break
                await asyncio.sleep(0)
            assert consumer._changed is not None and not waiting.done()
            await engine.log("orders").append([Record(b"late")])
            assert (await asyncio.wait_for(waiting, BOUND_S)).value == b"late"


async def test_auto_offset_reset_latest_and_none(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        await fill(engine, partitions=1, per_partition=3)
        async with engine.consumer("latest", ["orders"], auto_offset_reset="latest", **FAST) as consumer:
            assert await consumer.getmany(timeout_ms=50) == {}
            assert await consumer.position(TopicPartition("orders", 0)) == 3
        async with engine.consumer("none", ["orders"], auto_offset_reset="none", **FAST) as consumer:
            with pytest.raises(errors.OffsetOutOfRangeError, match="auto_offset_reset"):
                await consumer.getmany(timeout_ms=50)
            consumer.seek("orders", 0, 1)
            assert (await asyncio.wait_for(consumer.getone(), BOUND_S)).offset == 1


async def test_auto_commit_commits_positions_on_stop(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        await fill(engine, partitions=1, per_partition=5)
        async with engine.consumer("g", ["orders"], **FAST) as consumer:
            for _ in range(3):
                await asyncio.wait_for(consumer.getone(), BOUND_S)
        assert await engine.committed("g", "orders", 0) == 3


async def test_closing_the_engine_ends_the_iteration(tmp_path: Path) -> None:
    engine = await Engine.open(tmp_path)
    await engine.create_topic("orders")
    consumer = engine.consumer("g", ["orders"], **FAST)
    await consumer.start()
    seen: list[ConsumerRecord] = []

    async def iterate() -> None:
        async for record in consumer:
            seen.append(record)

    reading = asyncio.create_task(iterate())
    await engine.log("orders").append([Record(b"one")])
    await engine.close()
    await asyncio.wait_for(reading, BOUND_S)  # ended by the close, not cancelled
    assert engine.coordinator.state_of("g") in (GroupState.EMPTY, None)


async def test_bad_options_are_refused(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        with pytest.raises(errors.InvalidConfigError, match="heartbeat_interval_ms"):
            engine.consumer("g", ["t"], session_timeout_ms=100, heartbeat_interval_ms=100)
        with pytest.raises(errors.InvalidConfigError, match="partition_assignment_strategy"):
            engine.consumer("g", ["t"], partition_assignment_strategy=["sticky"])
        with pytest.raises(errors.InvalidRecordError, match="topics"):
            engine.consumer("g", "orders")  # type: ignore[arg-type]
        with pytest.raises(errors.InvalidTopicError):
            engine.consumer("g", ["bad/name"])
        with pytest.raises(errors.InvalidRecordError, match="group id"):
            engine.consumer("", ["t"])


async def test_a_start_cancelled_while_joining_leaves_nothing_running(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("orders")
        from seglog.engine.assignors import encode_subscription
        coord = engine.coordinator
        other = await coord.join("g", protocol_type="consumer", protocols=[("range", encode_subscription(["orders"]))],
                                 session_timeout_ms=60_000, rebalance_timeout_ms=60_000)
        await coord.sync("g", other.generation_id, other.member_id, assignments={})
        consumer = engine.consumer("g", ["orders"], **FAST)
        starting = asyncio.create_task(consumer.start())
        # Its JoinGroup parks: the other member never rejoins. Then the start is cancelled.
        await coord.wait_until(lambda: coord.state_of("g") is GroupState.PREPARING_REBALANCE)
        starting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await starting
        assert consumer._stopped and consumer._task is None
        with pytest.raises(errors.ClosedError, match="stopped"):
            await consumer.getmany()


async def test_iterating_a_consumer_that_was_never_started_is_refused(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        consumer = engine.consumer("g", ["orders"], **FAST)
        with pytest.raises(errors.ClosedError, match="not started"):
            async for _ in consumer:
                pass
