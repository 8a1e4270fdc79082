"""Appends hop to a thread pool of their own, made per process: a forked child appends too.

Spark's Python workers are forked from a daemon; a pool created before a fork has no threads in the
child, and a job queued to it would wait forever.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from pathlib import Path

from seglog.engine import Engine, Record


async def produce(root: Path, values: list[bytes]) -> list[bytes]:
    async with Engine.open(root) as engine:
        if "t" not in engine.topics():
            await engine.create_topic("t", partitions=1)
        log = engine.log("t", 0)
        for value in values:
            await log.append([Record(value)])
        return [r.value for r in (await log.read(0, max_bytes=1 << 20)).records if r.value is not None]


def child(root: str) -> None:
    got = asyncio.run(produce(Path(root), [b"child"]))
    raise SystemExit(0 if got == [b"parent", b"child"] else 3)


def test_a_forked_child_appends_after_its_parent_did(tmp_path: Path) -> None:
    assert asyncio.run(produce(tmp_path, [b"parent"])) == [b"parent"]  # the parent's pool exists now
    process = multiprocessing.get_context("fork").Process(target=child, args=(str(tmp_path),))
    process.start()
    process.join(timeout=30)
    if process.is_alive():
        process.kill()
        process.join()
        raise AssertionError("the child's append never ran (a pool inherited without its threads)")
    assert process.exitcode == 0
