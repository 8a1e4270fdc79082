"""engine._fs.list_log_dir: the one listing of a log directory, used by the open, the follower and the offline tools."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from seglog.engine import Engine, _fs, errors
from seglog.engine.follow import _list_log_dir
from seglog.engine.offline.listing import list_partitions
from seglog.segments.faults import FailingOps
from seglog.segments.fileio import use_ops


def test_the_listing_sorts_partition_directories_from_what_is_set_aside(tmp_path: Path) -> None:
    for name in ("t-0", "t-1", "other-3", "t-2.0123456789abcdef0123456789abcdef-delete",
                 "t-4.0123456789abcdef0123456789abcdef-create", "not a partition"):
        (tmp_path / name).mkdir()
    (tmp_path / "u-0").write_bytes(b"")  # a file named like a partition directory is none
    os.symlink(tmp_path / "t-0", tmp_path / "v-0")  # nor is a symlink
    (tmp_path / ".clean-shutdown").write_bytes(b"")
    entries = _fs.list_log_dir(tmp_path)
    assert entries.partition_dirs == {("t", 0): "t-0", ("t", 1): "t-1", ("other", 3): "other-3"}
    assert entries.deleted_dirs == ["t-2.0123456789abcdef0123456789abcdef-delete"]
    assert entries.unfinished_dirs == ["t-4.0123456789abcdef0123456789abcdef-create"]
    assert ".clean-shutdown" in entries.names and "u-0" in entries.names
    # The offline tools and the follower see the same partitions as the open.
    assert list_partitions(tmp_path) == [("other", 3), ("t", 0), ("t", 1)]
    assert set(_list_log_dir(tmp_path, set()).partition_dirs) == {("t", 0), ("t", 1), ("other", 3)}
    assert set(_fs.scan_log_dir_sync(tmp_path, create=False).partition_dirs) == {("t", 0), ("t", 1), ("other", 3)}


def test_a_missing_log_directory_is_a_storage_error_for_every_reader(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    for list_it in (lambda: _fs.list_log_dir(missing), lambda: list_partitions(missing),
                    lambda: _list_log_dir(missing, set()), lambda: _fs.scan_log_dir_sync(missing, create=False)):
        with pytest.raises(errors.StorageError, match="no such log directory"):
            list_it()


async def test_the_open_the_follower_and_the_offline_tools_list_through_the_file_layer(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("t", partitions=1)
    ops = FailingOps()
    ops.fail("scandir", errno.EIO, times=None)
    with use_ops(ops):
        with pytest.raises(errors.StorageError, match="cannot read the log directory"):
            list_partitions(tmp_path)
        with pytest.raises(errors.StorageError, match="cannot read the log directory"):
            _list_log_dir(tmp_path, set())
        with pytest.raises(errors.StorageError, match="cannot read the log directory"):
            async with Engine.open(tmp_path):
                pass


async def test_the_open_refuses_a_topic_file_it_cannot_read_and_the_follower_looks_again_later(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("t", partitions=2)
    ops = FailingOps()
    ops.fail("open", errno.EACCES, times=None, path_contains="topic.json")
    with use_ops(ops):
        with pytest.raises(errors.StorageError, match=r"topic\.json"):
            async with Engine.open(tmp_path):
                pass
        # A follower's writer may be creating the directory right now: the topic is left for a later look.
        assert _list_log_dir(tmp_path, set()).partition_dirs == {("t", 0): None, ("t", 1): None}
