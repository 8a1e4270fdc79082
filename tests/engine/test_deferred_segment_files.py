"""After Engine.open a sealed segment holds no file descriptor until something reads it.

A directory of many sealed segments (1000 partitions x 10 segments) would otherwise need one
descriptor per segment (Kafka's operators raise `ulimit -n` for this). The active segment is
opened when its partition is (at open after an unclean stop, by the partition's first use after
a clean one: test_lazy_open.py); a sealed one is `stat`-ed then and opened by its first use.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from enginehelpers import open_log_files_under

from seglog.engine import Engine, Record, errors
from seglog.engine.engine import RecoveryProgress
from seglog.segments.faults import FailingOps
from seglog.segments.fileio import use_ops

PARTITIONS = 3
SEGMENTS = 4


async def fill(root: Path) -> None:
    async with Engine.open(root) as engine:
        await engine.create_topic("t", partitions=PARTITIONS)
        for p in range(PARTITIONS):
            log = engine.log("t", p)
            for s in range(SEGMENTS):
                await log.append([Record(b"v%d" % s)])
                if s < SEGMENTS - 1:
                    await log.roll()


def segment_log(root: Path, partition: int, base: int) -> str:
    return str(root / f"t-{partition}" / f"{base:020d}.log")


@pytest.mark.parametrize("clean", [True, False])
async def test_only_active_segments_are_open_until_a_sealed_one_is_read(tmp_path: Path, clean: bool) -> None:
    await fill(tmp_path)
    if not clean:
        (tmp_path / ".clean-shutdown").unlink()  # every partition's files are opened at open
    async with Engine.open(tmp_path) as engine:
        opened = range(PARTITIONS) if not clean else []
        assert sorted(open_log_files_under(tmp_path)) == [segment_log(tmp_path, p, 3) for p in opened]
        got = await engine.log("t", 1).read(0)  # a sealed segment: its descriptor is opened now, in a thread
        assert [r.value for r in got.records] == [b"v0"]
        assert segment_log(tmp_path, 1, 0) in open_log_files_under(tmp_path)
        again = await engine.log("t", 1).read(0)  # and reused
        assert [r.value for r in again.records] == [b"v0"]
        assert (await engine.log("t", 2).offset_for_timestamp(0)) is not None
    assert open_log_files_under(tmp_path) == []


async def test_a_sealed_segment_that_cannot_be_opened_fails_its_reads_only(tmp_path: Path) -> None:
    await fill(tmp_path)
    ops = FailingOps()
    ops.fail("open", errno.EACCES, times=None, path_contains=f"t-1{'/'}{0:020d}.log")
    with use_ops(ops):
        async with Engine.open(tmp_path) as engine:
            with pytest.raises(errors.StorageError, match=r"t-1/00000000000000000000\.log"):
                await engine.log("t", 1).read(0)
            got = await engine.log("t", 1).read(1)  # the partition's other segments still read
            assert [r.value for r in got.records] == [b"v1"]
            await engine.log("t", 1).append([Record(b"more")])  # and it still takes appends
    assert open_log_files_under(tmp_path) == []


async def test_never_opened_sealed_segments_are_deleted_by_retention(tmp_path: Path) -> None:
    await fill(tmp_path)
    async with Engine.open(tmp_path) as engine:
        log = engine.log("t", 0)
        assert await log.delete_records_before(3) >= 0
        await engine.log("t", 0).enforce_retention(0, log_start_only=True)
        assert log.segment_base_offsets() == [3]
        assert [r.value for r in (await log.read(3)).records] == [b"v3"]
    assert sorted(p.name for p in (tmp_path / "t-0").glob("*.log*")) == [f"{3:020d}.log"]


async def test_a_directory_where_a_sealed_segment_should_be_fails_the_open(tmp_path: Path) -> None:
    await fill(tmp_path)
    bad = Path(segment_log(tmp_path, 2, 1))
    bad.unlink()
    bad.mkdir()
    (tmp_path / ".clean-shutdown").unlink()  # after a clean stop the partition's first use fails instead
    with pytest.raises(errors.StorageError, match="not a regular file"):
        await Engine.open(tmp_path)
    assert open_log_files_under(tmp_path) == []


async def test_open_then_close_leaves_sealed_segments_files_as_they_were(tmp_path: Path) -> None:
    # Closing touches only what was used: the sealed segments' index files are not mapped, rewritten
    # or trimmed again, and the next open finds every index (nothing to recover).
    await fill(tmp_path)
    sealed = sorted(p for p in tmp_path.glob("t-*/*") if not p.name.startswith(f"{3:020d}"))
    before = {p: p.read_bytes() for p in sealed}
    assert any(p.suffix == ".index" for p in before) and any(p.suffix == ".timeindex" for p in before)
    async with Engine.open(tmp_path):
        pass
    assert {p: p.read_bytes() for p in sealed} == before
    progress: list[RecoveryProgress] = []
    async with Engine.open(tmp_path, on_progress=progress.append) as engine:
        assert engine.had_clean_shutdown
        assert len(progress) == PARTITIONS and all(p.segments_recovered == 0 for p in progress)
        assert [r.value for r in (await engine.log("t", 0).read(2)).records] == [b"v2"]


async def test_a_retention_pass_leaves_sealed_segments_without_descriptors(tmp_path: Path) -> None:
    # Retention asks every segment for its largest timestamp, which checks its indexes against its
    # .log on first load: that read must not keep a descriptor per sealed segment open afterwards.
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("t", partitions=2)
        for p in range(2):
            log = engine.log("t", p)
            for _ in range(4):
                for _ in range(4):  # several 3 KB batches per segment: the offset index gets entries
                    await log.append([Record(b"x" * 3000)])
                await log.roll()
    async with Engine.open(tmp_path) as engine:
        assert len(open_log_files_under(tmp_path)) == 0  # a clean open: files open on first use
        for log in engine.logs():  # what a retention pass asks of a partition it opens
            assert (await log.retention_plan(0)).empty
        assert await engine.enforce_retention() == 0
        assert len(open_log_files_under(tmp_path)) == 2  # the active segments
        assert (await engine.log("t", 0).read(0)).records  # a read still works (and opens that one)
        assert len(open_log_files_under(tmp_path)) == 3


async def test_an_unclean_recovery_of_many_sealed_segments_leaves_them_without_descriptors(tmp_path: Path) -> None:
    # Each recovered segment used to keep its .log and both index maps open (Python's mmap keeps a
    # descriptor): 10,000 recovered segments exhausted a 20,000-descriptor ulimit. Recovered sealed
    # segments are now fsynced, closed and reopened like a clean open's sealed segments.
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("t", partitions=1)
        log = engine.log("t", 0)
        for i in range(30):
            await log.append([Record(b"r%d" % i)])
            await log.roll()
        await log.append([Record(b"last")])
    (tmp_path / ".clean-shutdown").unlink()
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 0\n")  # recover all 31
    progress: list[RecoveryProgress] = []
    async with Engine.open(tmp_path, on_progress=progress.append) as engine:
        assert progress[-1].segments_recovered == 31
        assert len(open_log_files_under(tmp_path)) == 1  # the active segment's .log only
        got = [r.value for r in (await engine.log("t", 0).read(0, max_bytes=1 << 20)).records]
        assert got[0] == b"r0"
        for i in range(31):
            assert (await engine.log("t", 0).read(i)).records[0].value == (b"r%d" % i if i < 30 else b"last")
    async with Engine.open(tmp_path, on_progress=progress.append) as engine:  # clean again: nothing to rebuild
        assert engine.log("t", 0).log_end_offset == 31
        assert (await engine.log("t", 0).read(30)).records[0].value == b"last"
