"""The ``follow`` section of ``seglog bench``: how soon a read-only follower in another process sees an append.

A writer ``Engine`` runs in a child process (``spawn``) and appends one record
at a time, a pause between appends (a live producer, not a flood); it stamps
the moment each ``append`` returned. The follower — a read-only ``Engine`` in
the benchmark's process — subscribes and stamps the moment ``subscribe``
yields each record. Both stamps are ``time.monotonic_ns()``: on Linux one
system-wide clock (``CLOCK_MONOTONIC``), so stamps of two processes compare.

A follower may yield a record before the writer's ``append`` has returned
(it sees the batch once its bytes are in the file, and the writer's loop
resumes only after its thread hop back): such a latency counts as 0, and how
many there were is reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Final

from seglog.engine import Record, run
from seglog.tools.bench.data import open_engine

TOPIC: Final = "follow"
REPLY_TIMEOUT_S: Final = 120.0


def _writer(conn: Connection, directory: str, count: int, gap_s: float) -> None:
    """The child process: create the topic, say ready, append ``count`` records on "go", send the stamps."""

    async def main() -> None:
        async with await open_engine(Path(directory)) as engine:
            await engine.create_topic(TOPIC)  # a fresh directory
            plog = engine.log(TOPIC)
            conn.send("ready")
            await asyncio.to_thread(conn.recv)
            returned: list[int] = []
            for i in range(count):
                await plog.append([Record(b"%d" % i)])
                returned.append(time.monotonic_ns())
                await asyncio.sleep(gap_s)
            conn.send(returned)

    run(main())


@contextlib.contextmanager
def _polling(poll: bool) -> Iterator[None]:
    # SEGLOG_FOLLOW_POLL=1 makes a follower opened meanwhile poll instead of using inotify.
    before = os.environ.get("SEGLOG_FOLLOW_POLL")
    if poll:
        os.environ["SEGLOG_FOLLOW_POLL"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("SEGLOG_FOLLOW_POLL", None)
        else:
            os.environ["SEGLOG_FOLLOW_POLL"] = before


@dataclass(frozen=True, slots=True)
class FollowRun:
    latencies_s: list[float]  # append returned -> subscribe yielded, per record (0 when seen first)
    seen_before_return: int  # records the follower yielded before the writer's append returned
    notified: bool  # inotify drove the follower (else the poll)


async def follow_latencies(
    directory: Path, count: int, *, gap_s: float, poll: bool, interval_ms: int
) -> FollowRun:
    """Run one writer process and one follower on ``directory``; the latency of each of ``count`` appends."""
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    process = context.Process(target=_writer, args=(theirs, str(directory), count, gap_s), daemon=True)
    process.start()
    theirs.close()

    async def receive() -> object:
        if not await asyncio.to_thread(ours.poll, REPLY_TIMEOUT_S):
            raise TimeoutError(f"the benchmark's writer process (pid {process.pid}) did not answer")
        return ours.recv()

    try:
        assert await receive() == "ready"
        with _polling(poll):
            follower = await open_engine(directory, read_only=True, follow_interval_ms=interval_ms)
        try:
            notified = bool(follower._follower is not None and follower._follower.notified)
            plog = follower.log(TOPIC)
            yielded = [0] * count

            async def subscriber() -> None:
                seen = 0
                async for record in plog.subscribe(0):
                    yielded[record.offset] = time.monotonic_ns()
                    seen += 1
                    if seen == count:
                        return

            task = asyncio.create_task(subscriber())
            ours.send("go")
            returned = await receive()
            await asyncio.wait_for(task, REPLY_TIMEOUT_S)
        finally:
            await follower.close()
    finally:
        ours.close()
        await asyncio.to_thread(process.join, REPLY_TIMEOUT_S)
        if process.is_alive():
            process.kill()
    assert isinstance(returned, list) and len(returned) == count
    deltas = [(y - r) / 1e9 for y, r in zip(yielded, returned, strict=True)]
    return FollowRun([max(d, 0.0) for d in deltas], sum(d < 0 for d in deltas), notified)
