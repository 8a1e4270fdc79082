"""The group store (engine/groups.py): one log of commits, durable, shared writes, compaction, repair."""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from seglog.engine import Engine, errors
from seglog.engine.groups import (
    COMPACTING_SUFFIX,
    GROUPS_DIR,
    LOG_FILE,
    GroupStore,
    encode_legacy_group_file,
    legacy_group_file_name,
    read_store,
    scan_frames,
)
from seglog.segments.fileio import FileOps


def log_path(root: Path) -> Path:
    return root / GROUPS_DIR / LOG_FILE


async def open_store(root: Path, **kwargs: object) -> GroupStore:
    store = GroupStore(root / GROUPS_DIR, read_only=False, **kwargs)  # type: ignore[arg-type]
    await store.load()
    return store


async def test_commits_survive_a_reopen_and_the_latest_commit_wins(tmp_path: Path) -> None:
    store = await open_store(tmp_path)
    await store.commit("billing", {("orders", 0): 5, ("orders", 1): 7}, {("orders", 0): "note"})
    await store.commit("billing", {("orders", 0): 9})
    await store.commit("audit", {("orders", 0): 1})
    await store.close()
    again = await open_store(tmp_path)
    try:
        assert again.offsets("billing") == {("orders", 0): 9, ("orders", 1): 7}
        assert again.committed_metadata("billing", "orders", 0) == ""  # the later commit carried none
        assert again.groups() == ["audit", "billing"]
    finally:
        await again.close()


async def test_an_empty_store_writes_no_file_until_the_first_commit(tmp_path: Path) -> None:
    store = await open_store(tmp_path)
    assert not (tmp_path / GROUPS_DIR).exists()
    await store.commit("g", {("t", 0): 1})
    await store.close()
    assert log_path(tmp_path).is_file()


async def test_commits_made_together_share_one_write(tmp_path: Path) -> None:
    store = await open_store(tmp_path)
    try:
        await asyncio.gather(*(store.commit(f"group-{i}", {("t", p): i for p in range(10)}) for i in range(50)))
        assert store.writes == 1  # every call queued before the writer ran: one write, one fdatasync
        assert all(store.offsets(f"group-{i}") == {("t", p): i for p in range(10)} for i in range(50))
    finally:
        await store.close()


async def test_a_torn_tail_is_cut_and_later_commits_follow_the_valid_frames(tmp_path: Path) -> None:
    store = await open_store(tmp_path)
    await store.commit("g", {("t", 0): 1})
    await store.commit("g", {("t", 0): 2})
    await store.close()
    path = log_path(tmp_path)
    valid = path.stat().st_size
    with path.open("ab") as f:  # a third commit cut short by a crash: its header and half its payload
        f.write(b"\x00\x00\x00\x40\x12\x34\x56\x78partial")
    again = await open_store(tmp_path)
    assert path.stat().st_size == valid
    assert again.committed("g", "t", 0) == 2
    await again.commit("g", {("t", 0): 3})
    await again.close()
    assert read_store(tmp_path).offsets == {"g": {("t", 0): 3}}


async def test_a_damaged_frame_in_the_middle_costs_only_its_own_commit(tmp_path: Path) -> None:
    store = await open_store(tmp_path)
    for group in ("a", "b", "c"):
        await store.commit(group, {("t", 0): 1})
    await store.close()
    path = log_path(tmp_path)
    data = bytearray(path.read_bytes())
    positions = [pos for pos, _ in scan_frames(bytes(data)).frames]
    data[positions[2] + 12] ^= 0x01  # a bit of group "b"'s payload (frames: header, a, b, c)
    path.write_bytes(bytes(data))
    image = read_store(tmp_path)
    assert image.offsets == {"a": {("t", 0): 1}, "c": {("t", 0): 1}}
    assert any("fails its CRC" in p for p in image.problems)


async def test_files_of_the_previous_format_are_folded_into_the_log(tmp_path: Path) -> None:
    directory = tmp_path / GROUPS_DIR
    directory.mkdir()
    (directory / legacy_group_file_name("billing")).write_bytes(encode_legacy_group_file("billing", {("orders", 0): 7}))
    (directory / legacy_group_file_name("g" * 200)).write_bytes(encode_legacy_group_file("g" * 200, {("orders", 1): 3}))
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("orders", partitions=2)
        assert await engine.committed("billing", "orders", 0) == 7
        assert await engine.committed("g" * 200, "orders", 1) == 3
        assert sorted(p.name for p in directory.iterdir()) == [LOG_FILE]
        await engine.commit_offset("billing", "orders", 0, 8)
    assert read_store(tmp_path).offsets == {"billing": {("orders", 0): 8}, "g" * 200: {("orders", 1): 3}}


class _HoldCompaction(FileOps):
    """Holds the compaction's first write until the test lets it go, so commits land meanwhile."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.release = threading.Event()

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        if path.endswith(COMPACTING_SUFFIX) and flags & os.O_TRUNC:
            self.reached.set()
            assert self.release.wait(30), "the test never released the compaction"
        return super().open(path, flags, mode)


async def test_compaction_keeps_every_commit_made_while_it_runs(tmp_path: Path) -> None:
    ops = _HoldCompaction()
    store = await open_store(tmp_path, compact_min_bytes=2_000, ops=ops)
    model: dict[str, dict[tuple[str, int], int]] = {}
    try:
        round_ = 0
        while not ops.reached.is_set():  # commit until the log is large enough to be compacted
            round_ += 1
            for group in ("a", "b", "c"):
                offsets = {("t", p): round_ * 10 + p for p in range(4)}
                await store.commit(group, offsets)
                model[group] = offsets
            assert round_ < 1000, "no compaction started"
        await asyncio.to_thread(ops.reached.wait, 30)
        # The compaction holds its snapshot; these commits must reach the compacted log too.
        await store.commit("a", {("t", 0): 10_000})
        await store.delete("b")
        model["a"] = {**model["a"], ("t", 0): 10_000}
        del model["b"]
        ops.release.set()
        assert store._compaction is not None
        await store._compaction
        assert store._compacted_bytes == store._size < 2_000
    finally:
        ops.release.set()
        await store.close()
    assert read_store(tmp_path).offsets == model
    assert not Path(str(log_path(tmp_path)) + COMPACTING_SUFFIX).exists()


class _FullDisk(FileOps):
    def __init__(self) -> None:
        self.fail = False

    def pwritev(self, fd: int, buffers: object, position: int) -> int:
        if self.fail:
            self.fail = False
            raise OSError(errno.ENOSPC, "No space left on device")
        return super().pwritev(fd, buffers, position)  # type: ignore[arg-type]


async def test_a_failed_write_changes_nothing_and_the_next_commit_succeeds(tmp_path: Path) -> None:
    ops = _FullDisk()
    store = await open_store(tmp_path, ops=ops)
    try:
        await store.commit("g", {("t", 0): 1})
        ops.fail = True
        with pytest.raises(errors.StorageError, match="free disk space"):
            await store.commit("g", {("t", 0): 2})
        assert store.committed("g", "t", 0) == 1
        await store.commit("g", {("t", 0): 3})
    finally:
        await store.close()
    assert read_store(tmp_path).offsets == {"g": {("t", 0): 3}}
    assert read_store(tmp_path).problems == []


async def test_forget_topic_and_delete_are_durable(tmp_path: Path) -> None:
    store = await open_store(tmp_path)
    await store.commit("a", {("gone", 0): 1, ("kept", 0): 2})
    await store.commit("b", {("gone", 1): 1})
    await store.commit("c", {("kept", 0): 5})
    await store.forget_topic("gone")
    assert await store.delete("c") is True
    assert await store.delete("never") is False
    await store.close()
    assert read_store(tmp_path).offsets == {"a": {("kept", 0): 2}}


async def test_a_follower_reads_the_store_while_the_writer_holds_it(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("t")
        await engine.commit_offset("g", "t", 0, 4)
        async with Engine.open(tmp_path, read_only=True) as follower:
            assert await follower.committed("g", "t", 0) == 4


_CHILD = """
import asyncio, sys
from seglog.engine import Engine

async def main():
    engine = await Engine.open(sys.argv[1])
    await engine.create_topic("t", partitions=2)
    for i in range(20):
        await engine.commit_offsets("g", {("t", 0): i, ("t", 1): 100 + i})
    print("committed", flush=True)
    await asyncio.Event().wait()  # killed here, never closed

asyncio.run(main())
"""


async def test_an_acknowledged_commit_survives_sigkill(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(child.stdout.readline), 60)
        assert line.strip() == "committed"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        if child.stdout is not None:
            child.stdout.close()
    async with Engine.open(tmp_path) as engine:
        assert engine.group_offsets("g") == {("t", 0): 19, ("t", 1): 119}
