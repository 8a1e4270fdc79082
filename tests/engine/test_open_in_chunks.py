"""Engine.open opens the segment files of loader.LOAD_CHUNK partitions per executor hop.

Whatever the chunking, every partition is loaded with its records, and a
partition that cannot be opened fails the open without leaving the files of
the other partitions (same chunk, later chunk) open. Files are opened at open
after an unclean stop (a clean one leaves them for first use:
test_lazy_open.py), so these tests remove the clean-shutdown marker.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from enginehelpers import open_log_files_under

from seglog.engine import Engine, Record, errors
from seglog.engine.loader import LOAD_CHUNK

PARTITIONS = LOAD_CHUNK + 6  # two chunks, the second one short


async def fill(root: Path) -> None:
    async with Engine.open(root) as engine:
        await engine.create_topic("t", partitions=PARTITIONS)
        for p in range(PARTITIONS):
            log = engine.log("t", p)
            await log.append([Record(b"a%d" % p)])
            await log.roll()
            await log.append([Record(b"b%d" % p)])


def forget_clean_shutdown(root: Path) -> None:
    (root / ".clean-shutdown").unlink()


@pytest.mark.parametrize("clean", [False, True])
async def test_every_partition_of_every_chunk_is_loaded(tmp_path: Path, clean: bool) -> None:
    await fill(tmp_path)
    if not clean:
        forget_clean_shutdown(tmp_path)
    async with Engine.open(tmp_path) as engine:
        for p in range(PARTITIONS):
            log = engine.log("t", p)
            assert (log.log_start_offset, log.log_end_offset, log.segment_count) == (0, 2, 2)
            first, second = await log.read(0, max_bytes=1 << 20), await log.read(1, max_bytes=1 << 20)
            assert [r.value for r in first.records + second.records] == [b"a%d" % p, b"b%d" % p]


@pytest.mark.parametrize("bad", [1, LOAD_CHUNK + 2])
async def test_a_partition_that_cannot_open_fails_the_open_and_leaks_nothing(tmp_path: Path, bad: int) -> None:
    await fill(tmp_path)
    log_file = tmp_path / f"t-{bad}" / "00000000000000000000.log"
    log_file.unlink()
    log_file.mkdir()  # a directory where a segment file should be: opening it fails
    forget_clean_shutdown(tmp_path)
    with pytest.raises(errors.StorageError):
        await Engine.open(tmp_path)
    assert open_log_files_under(tmp_path) == []
    log_file.rmdir()  # the next open takes the directory lock (released by the failed open) and goes on
    async with Engine.open(tmp_path) as engine:
        assert engine.log("t", 0).log_end_offset == 2
        assert engine.log("t", bad).log_end_offset == 2  # the second segment is still there
