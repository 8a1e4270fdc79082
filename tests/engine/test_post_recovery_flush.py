"""Engine.open after a crash: recovery, then an fsync of the recovered bytes (PartitionLog.flush). A
cancellation or a failed fsync at that point closes the partition's files. (They used to stay open:
the PartitionLog was neither in the engine's logs, so the abort path did not close it, nor closed.)"""

from __future__ import annotations

import asyncio
import errno
from pathlib import Path

import pytest
from enginehelpers import open_log_files_under

from seglog.engine import Engine, Record, errors
from seglog.segments.faults import FailingOps, GatedOps
from seglog.segments.fileio import use_ops


async def crashed_log_dir(root: Path) -> None:
    async with Engine.open(root) as engine:
        await engine.create_topic("t", partitions=1)
        log = engine.log("t", 0)
        await log.append([Record(b"a")])
        await log.roll()
        await log.append([Record(b"b")])
    (root / ".clean-shutdown").unlink()  # as a crash leaves it: recovery runs on the next open


async def test_open_cancelled_during_the_post_recovery_fsync_closes_the_partition(tmp_path: Path) -> None:
    await crashed_log_dir(tmp_path)
    with GatedOps() as ops, use_ops(ops):
        # The active segment (base offset 1) is the one recovered; its fsync is the post-recovery flush.
        syncing = ops.gate("fdatasync", path_contains=f"{1:020d}.log")
        opening = asyncio.ensure_future(Engine.open(tmp_path))
        await syncing.reached()  # recovery is done; the fsync of the recovered segment is running
        opening.cancel()
        syncing.release()
        (outcome,) = await asyncio.gather(opening, return_exceptions=True)
        assert isinstance(outcome, asyncio.CancelledError), f"the open was not cancelled: {outcome!r}"
        leaked = open_log_files_under(tmp_path)
    assert not leaked, f"descriptors left open by a cancelled Engine.open(): {leaked}"


async def test_a_failed_post_recovery_fsync_fails_the_open_and_closes_the_partition(tmp_path: Path) -> None:
    await crashed_log_dir(tmp_path)
    ops = FailingOps()
    ops.fail("fdatasync", errno.EIO, times=None, path_contains=".log")
    with use_ops(ops), pytest.raises(errors.StorageError):
        await Engine.open(tmp_path)
    assert open_log_files_under(tmp_path) == []
    async with Engine.open(tmp_path) as engine:  # the data is all there once the disk works again
        assert engine.log("t", 0).log_end_offset == 2
