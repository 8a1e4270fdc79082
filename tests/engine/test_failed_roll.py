"""A roll whose directory fsync fails closes the segment it just opened, and the append fails with
StorageError. (Engine._new_segment opens the new segment, then fsyncs the directory; the segment used
to be dropped unclosed when that fsync failed: a leaked descriptor. _create_partition has the same
shape.)"""
import errno
from pathlib import Path

import pytest
from enginehelpers import open_log_files_under

from seglog.engine import Engine, LogConfig, Record, errors
from seglog.segments.faults import FailingOps
from seglog.segments.fileio import use_ops


async def test_a_roll_whose_directory_fsync_fails_leaks_no_segment(tmp_path: Path) -> None:
    ops = FailingOps()
    config = LogConfig(segment_bytes=300, segment_index_bytes=240)
    with use_ops(ops):
        async with Engine.open(tmp_path, config) as engine:
            await engine.create_topic("t")
            log = engine.log("t")
            await log.append([Record(b"x" * 150)])
            # the roll's SegmentFile.open fsyncs the dir (passes), then _new_segment fsyncs it again (fails)
            ops.fail("fsync", errno.EIO, after=1, times=1)
            with pytest.raises(errors.StorageError):
                await log.append([Record(b"y" * 150)])
            ops.clear()
        leaked = open_log_files_under(tmp_path)
    assert not leaked, f"descriptors still open after Engine.close(): {leaked}"
