"""After a clean shutdown, Engine.open leaves every partition's files for its first use.

The clean close records each partition's log end offset, .log bytes and segment
base offsets in ``.clean-shutdown``; the next open serves those from the record
and opens a partition's files (segments, indexes, the walk to the log end) when
something first needs them. The files always win over the record; a record that
cannot be parsed, or an unclean stop, opens everything at once as before.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from enginehelpers import break_first_segment, open_log_files_under

from seglog.engine import Engine, LogConfig, Record, errors
from seglog.engine.checkpoints import ClosedPartition, format_clean_shutdown, parse_clean_shutdown
from seglog.segments.faults import GatedOps
from seglog.segments.fileio import use_ops

PARTITIONS = 3


async def fill(root: Path, config: LogConfig | None = None) -> None:
    async with Engine.open(root, config=config) as engine:
        await engine.create_topic("t", partitions=PARTITIONS)
        for p in range(PARTITIONS):
            log = engine.log("t", p)
            for s in range(3):
                await log.append([Record(b"p%d-s%d-%d" % (p, s, i), timestamp=1000 * s + i) for i in range(p + 2)])
                await log.roll()
            await log.append([Record(b"p%d-last" % p, timestamp=5000)])


def clean_record(root: Path) -> dict[tuple[str, int], ClosedPartition]:
    return parse_clean_shutdown((root / ".clean-shutdown").read_bytes())


async def test_the_clean_close_records_each_partition_and_the_open_serves_it_without_files(tmp_path: Path) -> None:
    await fill(tmp_path)
    async with Engine.open(tmp_path, read_only=True) as ro:
        expected = {
            (log.topic, log.partition): (log.log_start_offset, log.log_end_offset, log.size_bytes,
                                         log.segment_base_offsets())
            for log in ro.logs()
        }
    record = clean_record(tmp_path)
    # The first segment of partition p holds p + 2 records with timestamps 0, 1, ..., p + 1.
    assert {k: v.first_largest_timestamp for k, v in record.items()} == {("t", p): p + 1 for p in range(PARTITIONS)}
    assert {k: (v.log_end_offset, v.size_bytes, list(v.base_offsets)) for k, v in record.items()} == {
        k: v[1:] for k, v in expected.items()
    }
    async with Engine.open(tmp_path) as engine:
        assert open_log_files_under(tmp_path) == []
        got = {
            (log.topic, log.partition): (log.log_start_offset, log.log_end_offset, log.size_bytes,
                                         log.segment_base_offsets())
            for log in engine.logs()
        }
        assert got == expected
        assert open_log_files_under(tmp_path) == []  # the properties opened nothing
        assert not (tmp_path / ".clean-shutdown").exists()  # removed at open, as always


async def test_first_use_opens_only_that_partition_and_every_operation_works(tmp_path: Path) -> None:
    await fill(tmp_path)
    async with Engine.open(tmp_path) as engine:
        log = engine.log("t", 1)
        got = await log.read(0)
        assert got.records[0].value == b"p1-s0-0"
        assert {Path(f).parent.name for f in open_log_files_under(tmp_path)} == {"t-1"}
        end = log.log_end_offset
        hit = await engine.log("t", 2).offset_for_timestamp(2000)
        assert hit is not None and hit.offset == 8  # p2: 4 records per segment, the third starts at 8
        result = await engine.log("t", 0).append([Record(b"new")])
        assert result.first_offset == engine.log("t", 0).log_end_offset - 1 == 7
        seen = []
        async for record in log.subscribe(end - 1):
            seen.append(record.value)
            break
        assert seen == [b"p1-last"]
    async with Engine.open(tmp_path) as engine:  # what was appended after a lazy open is recorded too
        assert engine.log("t", 0).log_end_offset == 8
        assert (await engine.log("t", 0).read(7)).records[0].value == b"new"


async def test_every_operation_opens_the_files_first(tmp_path: Path) -> None:
    # Each call below is the first on a fresh lazily opened engine; each must see the real files.
    calls = {
        "roll": lambda log: log.roll(),
        "flush": lambda log: log.flush(),
        "delete_records_before": lambda log: log.delete_records_before(2),
        "offset_for_timestamp max": lambda log: log.offset_for_timestamp(-3),
        "retention": lambda log: log.enforce_retention(0, log_start_only=True),
    }
    await fill(tmp_path)
    for name, call in calls.items():
        async with Engine.open(tmp_path) as engine:
            log = engine.log("t", 0)
            await call(log)
            assert (await log.read(log.log_start_offset)).records, name
            await log.append([Record(b"after " + name.encode())])
            assert (await log.read(log.log_end_offset - 1)).records[0].value == b"after " + name.encode()


async def test_concurrent_first_callers_share_one_open(tmp_path: Path) -> None:
    await fill(tmp_path)
    async with Engine.open(tmp_path) as engine:
        log = engine.log("t", 2)
        reads = [log.read(i) for i in range(log.log_end_offset)]
        results = await asyncio.gather(*reads, log.append([Record(b"x")]), log.offset_for_timestamp(0))
        assert [r.records[0].offset for r in results[:-2]] == list(range(13))
        assert results[-2].first_offset == 13
        # One descriptor per open file: the segments were opened once.
        files = open_log_files_under(tmp_path)
        assert len(files) == len(set(files))


async def test_a_cancelled_first_caller_does_not_break_the_open(tmp_path: Path) -> None:
    await fill(tmp_path)
    with GatedOps() as ops, use_ops(ops):
        async with Engine.open(tmp_path) as engine:
            log = engine.log("t", 0)
            opening = ops.gate("open", path_contains=f"t-0{os.sep}")
            task = asyncio.ensure_future(log.read(0))
            await opening.reached()  # the open of partition 0's files is under way
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            opening.release()
            assert (await log.read(0)).records[0].value == b"p0-s0-0"
    assert open_log_files_under(tmp_path) == []


async def test_a_partition_whose_files_fail_fails_its_first_use_only(tmp_path: Path) -> None:
    await fill(tmp_path)
    bad = break_first_segment(tmp_path / "t-1")  # a directory where a segment should be
    async with Engine.open(tmp_path) as engine:
        for _ in range(2):  # a failed open is retried by the next call, and fails again
            with pytest.raises(errors.StorageError, match="not a regular file"):
                await engine.log("t", 1).read(2)
        assert (await engine.log("t", 0).read(0)).records  # the others work
        bad.rmdir()
        bad.touch()  # "repaired" (emptied) meanwhile: the next call opens it; offsets 0-2 are gone
        with pytest.raises(errors.OffsetOutOfRangeError):  # the log starts after them, never jumps over them
            await engine.log("t", 1).read(2)
        assert engine.log("t", 1).log_start_offset == 3
        assert (await engine.log("t", 1).read(3)).records[0].offset == 3
    assert open_log_files_under(tmp_path) == []


async def test_the_files_win_over_a_record_they_do_not_match(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    await fill(tmp_path)
    active = tmp_path / "t-0" / f"{6:020d}.log"
    active.write_bytes(b"")  # the active segment lost its batch after the clean close (a restore, say)
    async with Engine.open(tmp_path) as engine:
        log = engine.log("t", 0)
        assert log.log_end_offset == 7  # what the close recorded
        with caplog.at_level(logging.WARNING):
            assert (await log.read(6)).records == []  # the files say the log ends at 6
        assert "the files win" in caplog.text
        assert log.log_end_offset == 6
        assert (await log.append([Record(b"again")])).first_offset == 6
    async with Engine.open(tmp_path) as engine:  # the next clean close recorded what the files said
        assert engine.log("t", 0).log_end_offset == 7
        assert (await engine.log("t", 0).read(6)).records[0].value == b"again"


@pytest.mark.parametrize("marker", [b"", b"garbage\n", b"1\n1\nt 0 5 10 0 9,3\n"])
async def test_a_marker_without_a_usable_record_opens_everything_at_once(tmp_path: Path, marker: bytes) -> None:
    await fill(tmp_path)
    (tmp_path / ".clean-shutdown").write_bytes(marker)  # seglog < 0.3 wrote an empty one
    async with Engine.open(tmp_path) as engine:
        assert engine.had_clean_shutdown
        assert len(open_log_files_under(tmp_path)) == PARTITIONS  # every active segment
        assert [log.log_end_offset for log in engine.logs()] == [7, 10, 13]


async def test_a_crash_after_a_lazy_open_loses_nothing(tmp_path: Path) -> None:
    # Partition 0 is used and the process killed; partitions 1 and 2 were never opened. The unclean
    # open recovers from the checkpoints the lazy engine wrote and finds everything.
    await fill(tmp_path)
    script = f"""
import asyncio, os, signal, sys
from seglog.engine import Engine, Record
async def main():
    engine = await Engine.open({str(tmp_path)!r})
    for i in range(20):
        await engine.log("t", 0).append([Record(b"acked-%d" % i)])
    print("acked", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
asyncio.run(main())
"""
    proc = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).parents[2])
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert proc.stdout.strip() == "acked"
    assert not (tmp_path / ".clean-shutdown").exists()
    async with Engine.open(tmp_path) as engine:
        assert not engine.had_clean_shutdown
        assert [log.log_end_offset for log in engine.logs()] == [27, 10, 13]
        got = await engine.log("t", 0).read(7, max_bytes=1 << 20)
        assert [r.value for r in got.records] == [b"acked-%d" % i for i in range(20)]
        assert (await engine.log("t", 2).read(12)).records[0].value == b"p2-last"


def test_the_record_format_round_trips_and_refuses_what_cannot_be_true() -> None:
    record = {
        ("orders", 0): ClosedPartition(1234, 56789, 1_700_000_000_000, (0, 800), (30100, 26689)),
        ("a.b_c-d", 7): ClosedPartition(0, 0, 5, (0,), (0,)),
        ("v1", 0): ClosedPartition(9, 10, 5, (0,)),  # carried over from a version 1 record: no sizes
    }
    data = format_clean_shutdown(record)
    assert data == (b"2\n3\na.b_c-d 7 0 0 5 0 0\norders 0 1234 56789 1700000000000 0,800 30100,26689\n"
                    b"v1 0 9 10 5 0 -\n")
    assert parse_clean_shutdown(data) == record
    assert parse_clean_shutdown(b"1\n1\norders 0 1234 56789 1700000000000 0,800\n") == {  # seglog 0.3's
        ("orders", 0): ClosedPartition(1234, 56789, 1_700_000_000_000, (0, 800))
    }
    assert parse_clean_shutdown(b"") == {}
    for bad in (
        b"2\n1\nt 0 1 1 0 0\n",  # version 2 without the sizes
        b"2\n1\nt 0 9 10 0 0,5 4\n",  # a size per segment
        b"2\n1\nt 0 9 10 0 0,5 4,5\n",  # sizes that do not add up to the bytes
        b"1\n1\nt 0 9 10 0 0,5 4,6\n",  # version 1 with sizes
        b"0\n1\nt 0 1 1 0 0\n",  # another version
        b"1\n2\nt 0 1 1 0 0\n",  # count
        b"1\n1\nt 0 1 1 0\n",  # a field missing
        b"1\n1\nt 0 1 1 0 \n",  # no segment
        b"1\n1\nt 0 9 1 0 5,5\n",  # bases not ascending
        b"1\n1\nt 0 4 1 0 0,5\n",  # the log ends before its last segment starts
        b"1\n1\nt 0 -1 1 0 0\n",  # negative
        b"1\n1\n../x 0 1 1 0 0\n",  # not a topic name
        b"\xff",
    ):
        with pytest.raises(errors.CorruptionError):
            parse_clean_shutdown(bad)


async def test_a_clean_open_of_many_partitions_opens_no_file(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("many", partitions=200)
        for p in range(0, 200, 7):
            await engine.log("many", p).append([Record(b"x")])
    fds_before = len(os.listdir("/proc/self/fd"))
    async with Engine.open(tmp_path) as engine:
        assert len(os.listdir("/proc/self/fd")) - fds_before <= 2  # the lock file (and nothing per partition)
        assert sum(log.log_end_offset for log in engine.logs()) == len(range(0, 200, 7))


async def test_retention_opens_only_partitions_that_may_have_something_to_delete(tmp_path: Path) -> None:
    # retention.ms (7 days by default) is judged on the first segment's largest timestamp, which the
    # record holds: a pass over fresh partitions opens none of them; an expired one is opened and cut.
    now = int(time.time() * 1000)
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("fresh", partitions=3)
        await engine.create_topic("old", partitions=1, config={"retention.ms": 60_000})
        for topic, partitions, ts in (("fresh", 3, now), ("old", 1, now - 3_600_000)):
            for p in range(partitions):
                log = engine.log(topic, p)
                for s in range(3):
                    await log.append([Record(b"%d" % s, timestamp=ts)])
                    await log.roll()
                await log.append([Record(b"last", timestamp=now)])
    async with Engine.open(tmp_path) as engine:
        assert await engine.enforce_retention() == 3  # old-0's three expired segments
        assert {Path(f).parent.name for f in open_log_files_under(tmp_path)} == {"old-0"}
        assert engine.log("old", 0).log_start_offset == 3
        assert engine.log("fresh", 1).segment_count == 4
