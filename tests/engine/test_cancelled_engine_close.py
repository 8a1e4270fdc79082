"""Engine.close() cancelled part-way is finished by the next close(): every partition is closed and
the directory lock released (a cancelled close used to mark the engine closed, so the second close
returned at once and left both behind)."""
import asyncio
import gc
import warnings
from pathlib import Path

from seglog.engine import Engine, Record, errors
from seglog.segments.faults import GatedOps
from seglog.segments.fileio import use_ops


async def test_a_close_after_a_cancelled_close_closes_every_partition_and_releases_the_lock(tmp_path: Path) -> None:
    with GatedOps() as ops, use_ops(ops):
        engine = await Engine.open(tmp_path)
        await engine.create_topic("t", partitions=2)
        await engine.log("t", 0).append([Record(b"x")])  # not fsynced yet: close() flushes it
        flushing = ops.gate("fdatasync", path_contains=".log")
        task = asyncio.create_task(engine.close())
        await flushing.reached()  # close() is half way: flushing a partition, others not closed yet
        task.cancel()
        flushing.release()
        (outcome,) = await asyncio.gather(task, return_exceptions=True)
        assert isinstance(outcome, asyncio.CancelledError), f"the close was not cancelled: {outcome!r}"
        await engine.close()  # "Idempotent, and safe to call again after a cancelled close."
    leaked = [p for p in (engine._logs.values()) if not p.closed]
    try:
        other = await Engine.open(tmp_path)
    except errors.LogDirLockedError:
        other = None
    finally:
        # keep the interpreter from turning the leak into a different error in teardown
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for p in leaked:
                await p.close()
            gc.collect()
    if other is not None:
        await other.close()
    assert other is not None, "the lock is still held after close() returned"
    assert not leaked, f"{len(leaked)} partition(s) left open after close()"
