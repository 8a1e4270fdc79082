"""Engine.open after a crash: recovery, then an fsync of the recovered sealed segments. A cancellation
or a failed fsync at that point closes the partition's files. (They used to stay open: the PartitionLog
was neither in the engine's logs, so the abort path did not close it, nor closed.) The recovered active
segment is not synced at open (Kafka's rule): the recovery point stays below it until the next flush."""

from __future__ import annotations

import asyncio
import errno
from pathlib import Path

import pytest
from enginehelpers import open_log_files_under

from seglog.engine import Engine, Record, errors
from seglog.segments.faults import FailingOps, GatedOps
from seglog.segments.fileio import FileOps, use_ops


async def crashed_log_dir(root: Path, *, keep_recovery_point: bool = False) -> None:
    async with Engine.open(root) as engine:
        await engine.create_topic("t", partitions=1)
        log = engine.log("t", 0)
        await log.append([Record(b"a")])
        await log.roll()
        await log.append([Record(b"b")])
    (root / ".clean-shutdown").unlink()  # as a crash leaves it: recovery runs on the next open
    if not keep_recovery_point:
        (root / "recovery-point-offset-checkpoint").unlink()  # every segment is recovered, the sealed one too


class SyncedPaths(FileOps):
    """The system calls, noting the path of each ``fdatasync``."""

    def __init__(self) -> None:
        self.paths: dict[int, str] = {}
        self.synced: list[str] = []

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        fd = super().open(path, flags, mode)
        self.paths[fd] = path
        return fd

    def fdatasync(self, fd: int) -> None:
        self.synced.append(self.paths.get(fd, "?"))
        super().fdatasync(fd)


async def test_open_cancelled_during_the_post_recovery_fsync_closes_the_partition(tmp_path: Path) -> None:
    await crashed_log_dir(tmp_path)
    with GatedOps() as ops, use_ops(ops):
        # The sealed segment (base offset 0) is recovered; its fsync is the post-recovery flush.
        syncing = ops.gate("fdatasync", path_contains=f"{0:020d}.log")
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


async def test_a_recovered_active_segment_is_not_synced_at_open_and_the_recovery_point_stays_below_it(
    tmp_path: Path,
) -> None:
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("t", partitions=1)
        await engine.log("t", 0).append([Record(b"a")])
        await engine.log("t", 0).roll()  # the clean close leaves the recovery point at 1
    engine = await Engine.open(tmp_path)
    await engine.log("t", 0).append([Record(b"b")])  # never synced
    await engine._abort_open()  # a crash: no flush, no checkpoint, no clean-shutdown marker
    ops = SyncedPaths()
    with use_ops(ops):
        engine = await Engine.open(tmp_path)
        try:
            assert not engine.had_clean_shutdown
            log = engine.log("t", 0)
            assert log.log_end_offset == 2
            # Recovered, not synced: the next flush syncs it, a crash before that recovers it again.
            assert not [p for p in ops.synced if p.endswith(f"{1:020d}.log")], ops.synced
            assert log.recovery_point == 1
        finally:
            await engine.close()
    assert [p for p in ops.synced if p.endswith(f"{1:020d}.log")], "the clean close did not sync the recovered segment"
    async with Engine.open(tmp_path) as engine:
        assert engine.had_clean_shutdown
        assert engine.log("t", 0).recovery_point == 2
