"""Every data file the engine creates is created 0644 (rw-r--r--): never executable, and not left to the
umask either (with umask 0 a default mode would make files world-writable)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from seglog.engine import Engine, LogConfig, Record

# The offset and time index files are created by the index layer, whose mode is fixed and tested there.
INDEX_SUFFIXES = (".index", ".timeindex")


@pytest.fixture
def umask_zero() -> Iterator[None]:
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


@pytest.mark.usefixtures("umask_zero")
async def test_data_files_are_created_0644_whatever_the_umask(tmp_path: Path) -> None:
    data = tmp_path / "data"
    small = LogConfig(segment_bytes=1024, segment_index_bytes=1024, index_interval_bytes=128)
    async with Engine.open(data) as engine:
        await engine.create_topic("t", partitions=2, config=small)
        for i in range(40):  # enough to roll segments
            await engine.log("t", i % 2).append([Record(b"v" * 100, b"k", 1_700_000_000_000 + i)])
        await engine.commit_offset("billing", "t", 0, 3)
        await engine.flush()  # checkpoints
    async with Engine.open(data) as engine:  # a second open and clean close rewrite the markers
        assert engine.log("t", 0).segment_count > 1

    modes = {
        str(p.relative_to(data)): stat.S_IMODE(p.stat().st_mode)
        for p in data.rglob("*")
        if p.is_file() and not p.name.endswith(INDEX_SUFFIXES)
    }
    kinds = {Path(name).suffix or Path(name).name for name in modes}
    assert {".log", ".json", ".lock", ".clean-shutdown", "recovery-point-offset-checkpoint",
            "log-start-offset-checkpoint"} <= kinds
    assert {name: oct(mode) for name, mode in modes.items() if mode != 0o644} == {}
