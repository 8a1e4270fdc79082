"""delete_topic's GroupOffsets.forget_topic iterates a snapshot of group ids but reads
self._offsets[group] after awaiting another group's file write: a delete_group() that runs
meanwhile makes delete_topic fail with a bare KeyError (not SeglogError), skipping the
checkpoint write."""
import asyncio
import threading
import time
from pathlib import Path

from seglog.engine import Engine, errors
from seglog.segments.fileio import FileOps, use_ops


class SlowGroupWrite(FileOps):
    def __init__(self) -> None:
        self.entered = threading.Event()
        self.armed = False

    def replace(self, src: str, dst: str) -> None:
        if self.armed and "consumer-offsets" in dst:
            self.entered.set()
            time.sleep(0.2)
        super().replace(src, dst)


async def test_delete_topic_concurrent_delete_group(tmp_path: Path) -> None:
    ops = SlowGroupWrite()
    with use_ops(ops):
        async with Engine.open(tmp_path) as engine:
            await engine.create_topic("t")
            await engine.commit_offset("a", "t", 0, 1)
            await engine.commit_offset("b", "t", 0, 1)
            ops.armed = True
            deleting = asyncio.create_task(engine.delete_topic("t"))
            await asyncio.to_thread(ops.entered.wait, 5)
            await engine.delete_group("b")  # a different group: not serialised with group "a"'s write
            try:
                await deleting
            except errors.SeglogError:
                pass
            except Exception as exc:
                raise AssertionError(f"delete_topic raised a non-SeglogError: {exc!r}") from exc
            assert engine.topics() == []
