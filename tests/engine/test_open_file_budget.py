"""Segments hold at most ``max_open_files`` descriptors and maps; idle ones close and reopen on next use.

Without the budget every segment read once keeps its ``.log`` descriptor and
two index maps (each a descriptor: CPython's ``mmap`` keeps a duplicate), and
1,000 partitions x 3 segments exhaust ``ulimit -n 1024``. The 10,000-partition
run is ``bench/open_files.py scale`` (about a minute and a half here); the
subprocess test runs the same workload on 1,200 partitions, which already
needs about 4,800 descriptors without the budget.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from enginehelpers import open_files_under

from seglog.engine import Engine, LogConfig, Record, errors
from seglog.indexes.handles import OpenFileBudget, open_file_budget
from seglog.segments.faults import GatedOps
from seglog.segments.fileio import use_ops

BENCH = Path(__file__).resolve().parents[2] / "bench" / "open_files.py"
PARTITIONS = 40
BUDGET = 16
TINY = LogConfig(segment_bytes=256)  # one 100-byte record per segment: every append after the first rolls
SEGMENT_FILES = (".log", ".index", ".timeindex", ".txnindex")


@pytest.fixture
def budget() -> Iterator[OpenFileBudget]:
    """The process's budget, put back as it was after the test (the engine option sets it per process)."""
    shared = open_file_budget()
    before = shared.max_open_files
    yield shared
    shared.resize(before)


def segment_files_open_under(root: Path) -> list[str]:
    """Paths of segment files (``.log`` and indexes) below ``root`` that this process holds (Linux ``/proc``)."""
    return open_files_under(root, SEGMENT_FILES)


def value(partition: int, n: int) -> bytes:
    return b"%d/%d" % (partition, n) + b"." * 100


async def fill(root: Path) -> None:
    """``PARTITIONS`` partitions of two segments each: offset 0 sealed, offset 1 active."""
    async with Engine.open(root) as engine:
        await engine.create_topic("t", partitions=PARTITIONS, config=TINY)
        for p in range(PARTITIONS):
            for n in range(2):
                await engine.log("t", p).append([Record(value(p, n))])


async def read_one(engine: Engine, partition: int, offset: int) -> bytes | None:
    got = await engine.log("t", partition).read(offset, max_bytes=1 << 20)
    return got.records[0].value


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts descriptors through /proc")
def test_every_partition_is_read_and_appended_to_under_ulimit_1024(tmp_path: Path) -> None:
    # tmpfs where there is one: every new segment fsyncs its directory, which on a disk is most of the run.
    scratch = Path("/dev/shm") if Path("/dev/shm").is_dir() else tmp_path
    done = subprocess.run(
        [sys.executable, str(BENCH), "scale", "--partitions", "1200", "--nofile", "1024", "--dir", str(scratch)],
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "every record read back" in done.stdout, done.stdout
    peak = re.search(r"at most (\d+) descriptors open", done.stdout)
    assert peak is not None and int(peak.group(1)) < 1024, done.stdout


async def test_descriptors_of_segments_stay_within_max_open_files(tmp_path: Path, budget: OpenFileBudget) -> None:
    await fill(tmp_path)
    evicted = budget.evictions
    async with Engine.open(tmp_path, max_open_files=BUDGET) as engine:
        most = 0
        for p in range(PARTITIONS):
            assert await read_one(engine, p, 0) == value(p, 0)
            assert await read_one(engine, p, 1) == value(p, 1)
            await engine.log("t", p).append([Record(value(p, 2))])
            most = max(most, len(segment_files_open_under(tmp_path)))
        assert most <= BUDGET
        # Every partition's files were opened (a sealed .log, two index maps, the active .log): far past 16.
        assert budget.evictions - evicted > PARTITIONS
        for p in range(PARTITIONS):  # every file closed since is reopened, and holds what it held
            assert [await read_one(engine, p, n) for n in range(3)] == [value(p, n) for n in range(3)]
        assert len(segment_files_open_under(tmp_path)) <= BUDGET


async def test_a_read_in_flight_keeps_its_descriptor_while_the_budget_evicts(
    tmp_path: Path, budget: OpenFileBudget
) -> None:
    await fill(tmp_path)
    ops = GatedOps()
    held = str(tmp_path / "t-0" / f"{0:020d}.log")
    with use_ops(ops), ops:
        async with Engine.open(tmp_path, max_open_files=BUDGET) as engine:
            assert await read_one(engine, 0, 0) == value(0, 0)  # indexes loaded and checked
            for p in range(1, PARTITIONS):
                await read_one(engine, p, 0)
            assert held not in segment_files_open_under(tmp_path)  # the budget closed it
            # The next read of it reopens it in a worker thread and stops there, before its pread.
            gate = ops.gate("pread", path_contains=held)
            reader = asyncio.create_task(read_one(engine, 0, 0))
            await gate.reached()
            assert held in segment_files_open_under(tmp_path)
            refused = budget.refusals
            for p in range(1, PARTITIONS):  # every one of these opens files: the budget sweeps past the held one
                await read_one(engine, p, 0)
                await read_one(engine, p, 1)
            assert budget.refusals > refused  # the sweep picked the file in use, and it kept its descriptor
            assert held in segment_files_open_under(tmp_path)
            gate.release()
            assert await reader == value(0, 0)


async def test_a_log_replaced_while_its_descriptor_was_closed_is_refused(
    tmp_path: Path, budget: OpenFileBudget
) -> None:
    await fill(tmp_path)
    sealed = tmp_path / "t-0" / f"{0:020d}.log"
    async with Engine.open(tmp_path, max_open_files=BUDGET) as engine:
        assert await read_one(engine, 0, 0) == value(0, 0)
        for p in range(1, PARTITIONS):
            await read_one(engine, p, 0)
        assert str(sealed) not in segment_files_open_under(tmp_path)
        # The same bytes under the same name, in another file: not the file the segment vouched for.
        copy = sealed.with_name("copy")
        shutil.copyfile(sealed, copy)
        os.replace(copy, sealed)
        with pytest.raises(errors.FileReplacedError, match="another file has its name now"):
            await read_one(engine, 0, 0)
        assert await read_one(engine, 0, 1) == value(0, 1)  # the partition's other segment is untouched


@pytest.mark.parametrize("bad", [0, 15, True, 16.0, "64"])
def test_max_open_files_must_be_an_int_of_at_least_16(tmp_path: Path, bad: object) -> None:
    with pytest.raises(errors.InvalidConfigError, match="max_open_files must be None or an int of at least 16"):
        Engine.open(tmp_path, max_open_files=bad)  # type: ignore[arg-type]
    assert not (tmp_path / ".lock").exists()  # refused before anything was touched
