"""The path of one small append: written by the event loop itself, in a small fixed number of Python calls.

A producer that awaits each append (the common shape of a prototype) pays for
everything between ``append`` and the file on every record. The rules held
here: an uncontended small append without fsync makes no thread hop and a
fixed, small number of Python calls; concurrent callers still share one write
and merge into a batch; and every append that could wait on the loop (an
fsync, a large write, index files to load, a slow disk) still makes its one
hop to the append threads.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from enginehelpers import read_all

from seglog.engine import Engine, LogConfig, PartitionLog, Record
from seglog.engine import log as log_module
from seglog.engine.errors import StorageError
from seglog.engine.log import _LEADER
from seglog.indexes import OffsetIndex
from seglog.segments import fileio
from seglog.segments.batch import scan_batches
from seglog.segments.fileio import LOOP_WRITE_MAX_BYTES, WOULD_BLOCK, FileOps, use_ops
from seglog.segments.segment import LogSegment

PURE_PYTHON = bool(os.environ.get("SEGLOG_PURE_PYTHON"))
# Python calls of seglog's own code in one uncontended single-record append, from ``append`` to the
# file and back (``append`` counts twice: it resumes after its loop turn). Before the loop wrote
# small appends itself, the path made about a hundred, and a thread hop; before the lean path
# (encode_small_batch, _write_lean, LogSegment.append_lean) two dozen. The pure-Python encoder
# adds its own few calls.
MAX_CALLS = 13 if PURE_PYTHON else 9
NO_INDEX_ENTRIES = LogConfig(index_interval_bytes=1 << 30)  # the same path every time: no entry falls due


@pytest.fixture(autouse=True)
def loop_writes_reset() -> Iterator[None]:
    # The switch is process-wide: a slow write elsewhere (a loaded machine) must not decide these tests,
    # and these tests' slow writes must not pause anyone else's.
    state = fileio._LOOP_WRITES
    saved = (state.slow_s, state.pause_s, state.paused_until)
    state.slow_s, state.pause_s, state.paused_until = 3600.0, fileio.LOOP_WRITE_PAUSE_SECONDS, 0.0
    try:
        yield
    finally:
        state.slow_s, state.pause_s, state.paused_until = saved


class HopCounter:
    """Counts the jobs handed to any thread pool (the append threads and the default executor)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.hops = 0
        submit = concurrent.futures.ThreadPoolExecutor.submit

        def counted(pool: concurrent.futures.ThreadPoolExecutor, *args: Any, **kwargs: Any) -> Any:
            self.hops += 1
            return submit(pool, *args, **kwargs)

        monkeypatch.setattr(concurrent.futures.ThreadPoolExecutor, "submit", counted)


class LogWrites(FileOps):
    """Notes the thread of each ``pwritev`` to a ``.log``; optionally sleeps in the first ones."""

    def __init__(self, slow_writes: int = 0, slow_s: float = 0.0) -> None:
        self.paths: dict[int, str] = {}
        self.threads: list[str] = []
        self.slow_writes = slow_writes
        self.slow_s = slow_s

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        fd = super().open(path, flags, mode)
        self.paths[fd] = path
        return fd

    def pwritev(self, fd: int, buffers: Any, position: int) -> int:
        if self.paths.get(fd, "").endswith(".log"):
            self.threads.append(threading.current_thread().name)
            if self.slow_writes:
                self.slow_writes -= 1
                time.sleep(self.slow_s)  # a write the disk made wait (dirty-page throttling, say)
        return super().pwritev(fd, buffers, position)  # type: ignore[no-any-return]

    @property
    def on_loop(self) -> int:
        return self.threads.count(threading.main_thread().name)


async def profiled_append(log: PartitionLog, record: Record) -> int:
    """The seglog calls of one awaited ``append([record])``, from the call to its result."""
    calls = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal calls
        if event == "call" and f"{os.sep}seglog{os.sep}" in frame.f_code.co_filename:
            calls += 1

    sys.setprofile(profile)
    try:
        await log.append([record])
    finally:
        sys.setprofile(None)
    return calls


async def test_an_uncontended_small_append_makes_no_thread_hop_and_a_fixed_small_number_of_python_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with Engine.open(tmp_path, NO_INDEX_ENTRIES) as eng:
        await eng.create_topic("t")
        log = eng.log("t")
        for i in range(5):  # the first appends load what the path needs (the time index, say)
            await log.append([Record(b"warm-up %d" % i, b"k", 1_700_000_000_000 + i)])
        counter = HopCounter(monkeypatch)
        calls = [await profiled_append(log, Record(b"v" * 100, b"k" * 16, 1_700_000_000_100 + i)) for i in range(20)]
        assert counter.hops == 0, "a small unsynced append is written by the loop, without a thread hop"
        assert len(set(calls)) == 1, f"the same path every time, a fixed number of calls: {calls}"
        assert calls[0] <= MAX_CALLS
        assert [r.value for r in (await read_all(log))[5:]] == [b"v" * 100] * 20


async def test_concurrent_callers_of_one_loop_turn_share_one_write_and_merge_into_a_batch(tmp_path: Path) -> None:
    ops = LogWrites()
    with use_ops(ops):
        async with Engine.open(tmp_path) as eng:
            await eng.create_topic("t")
            log = eng.log("t")
            await log.append([Record(b"first")])
            before = len(ops.threads)
            results = await asyncio.gather(*(log.append([Record(b"%d" % i)]) for i in range(50)))
            assert len(ops.threads) - before == 1, "the 50 callers' appends went to the file in one write"
            assert sorted(r.first_offset for r in results) == list(range(1, 51))
            data = (log.directory / f"{0:020d}.log").read_bytes()
            headers = [h for _, h in scan_batches(data, max_batch_bytes=1 << 30).batches]
            # The first caller of the turn may be encoded as it calls (nothing waits to merge with it
            # yet); the callers queued behind it share one batch.
            assert sum(h.record_count for h in headers) == 51 and headers[-1].record_count >= 49


async def test_an_append_the_flush_policy_syncs_makes_its_hop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ops = LogWrites()
    with use_ops(ops):
        async with Engine.open(tmp_path, LogConfig(flush_messages=1)) as eng:
            await eng.create_topic("t")
            log = eng.log("t")
            await log.append([Record(b"warm-up")])
            counter = HopCounter(monkeypatch)
            for i in range(5):
                await log.append([Record(b"%d" % i)])
            assert counter.hops == 5, "an fdatasync waits for the disk: one hop per append, as ever"
            assert ops.on_loop == 0
            assert log.recovery_point == log.log_end_offset == 6


async def test_an_append_larger_than_the_loop_write_limit_makes_its_hop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ops = LogWrites()
    with use_ops(ops):
        async with Engine.open(tmp_path, NO_INDEX_ENTRIES.with_overrides(max_message_bytes=4 << 20)) as eng:
            await eng.create_topic("t")
            log = eng.log("t")
            await log.append([Record(b"warm-up")])
            counter = HopCounter(monkeypatch)
            await log.append([Record(b"x" * (LOOP_WRITE_MAX_BYTES // 4)) for _ in range(4)])
            assert counter.hops == 1
            await log.append([Record(b"small")])
            assert counter.hops == 1, "the small one after it is the loop's again"
            assert ops.threads[-2] != threading.main_thread().name
            assert ops.threads[-1] == threading.main_thread().name


async def test_a_slow_loop_write_sends_small_appends_to_the_threads_for_a_pause_that_grows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = fileio._LOOP_WRITES
    state.slow_s = 0.02
    ops = LogWrites()
    with use_ops(ops):
        async with Engine.open(tmp_path) as eng:
            await eng.create_topic("t")
            log = eng.log("t")
            for i in range(3):
                await log.append([Record(b"fast %d" % i)])
            assert ops.on_loop >= 2
            ops.slow_writes, ops.slow_s = 1, 0.05  # the next write waits 50 ms: slower than slow_s
            on_loop = ops.on_loop
            await log.append([Record(b"slow")])
            assert ops.on_loop == on_loop + 1, "the slow write itself was the loop's"
            assert state.paused_until > time.monotonic()
            assert state.pause_s == 2 * fileio.LOOP_WRITE_PAUSE_SECONDS, "the next pause, if any, is longer"
            counter = HopCounter(monkeypatch)
            await log.append([Record(b"paused")])
            assert counter.hops == 1, "while paused, a small append makes its hop"
            assert ops.on_loop == on_loop + 1
            state.paused_until = 0.0  # the pause is over
            await log.append([Record(b"after")])
            assert counter.hops == 1 and ops.on_loop == on_loop + 2, "then the loop writes again"
            assert state.pause_s == fileio.LOOP_WRITE_PAUSE_SECONDS, "a fast loop write sets the pause back"
            assert [r.value for r in await read_all(log)][-3:] == [b"slow", b"paused", b"after"]


async def test_index_entries_planned_on_the_loop_are_written_and_found(tmp_path: Path) -> None:
    # An entry per batch (index.interval.bytes 0): the loop writes the batches and the mapped entries.
    ops = LogWrites()
    with use_ops(ops):
        async with Engine.open(tmp_path, LogConfig(index_interval_bytes=0)) as eng:
            await eng.create_topic("t")
            log = eng.log("t")
            for i in range(40):
                await log.append([Record(b"%d" % i, None, 1_700_000_000_000 + i)])
            assert ops.on_loop >= 35, "after the first appends created and loaded the indexes"
            segment = log._segments.active_segment
            assert segment is not None
            assert segment._offset_index.get().entries >= 35
            for i in range(40):
                assert (await log.read(i, 1)).records[0].value == b"%d" % i
                found = await log.offset_for_timestamp(1_700_000_000_000 + i)
                assert found is not None and found.offset == i
    async with Engine.open(tmp_path) as eng:  # and the files are as a clean close leaves them
        assert [r.value for r in await read_all(eng.log("t"))] == [b"%d" % i for i in range(40)]


async def test_a_leading_caller_cancelled_in_its_turn_writes_nothing_and_those_behind_it_are_written(
    tmp_path: Path,
) -> None:
    async with Engine.open(tmp_path) as eng:
        await eng.create_topic("t")
        log = eng.log("t")
        await log.append([Record(b"before")])
        leader = asyncio.ensure_future(log.append([Record(b"leader")]))
        behind = asyncio.ensure_future(log.append([Record(b"behind")]))
        await asyncio.sleep(0)  # both ran their first step: the leader queued and let the loop turn
        assert log._write_soon is _LEADER and len(log._pending) == 2, "the leader is in its turn, one queued"
        leader.cancel()
        result = await behind
        with pytest.raises(asyncio.CancelledError):
            await leader
        assert result.first_offset == 1
        assert [r.value for r in await read_all(log)] == [b"before", b"behind"]


async def test_a_close_in_the_leaders_turn_writes_its_append_first(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as eng:
        await eng.create_topic("t")
        log = eng.log("t")
        await log.append([Record(b"before")])
        write_next, writes_by = log._write_next, []

        def noted() -> None:
            writes_by.append("close" if log._closing else "leader")
            write_next()

        log._write_next = noted  # type: ignore[method-assign]
        closing = asyncio.ensure_future(log.close())  # its task's first step runs inside the leader's turn
        leader = asyncio.ensure_future(log.append([Record(b"leader")]))
        assert (await leader).first_offset == 1, "acknowledged: written before the files closed"
        await closing
        assert writes_by == ["close"], "the close began in the leader's turn and wrote its queue"
    async with Engine.open(tmp_path) as eng:
        assert [r.value for r in await read_all(eng.log("t"))] == [b"before", b"leader"]


# ------------------------------------------------------------------------------------------- lean path


class LeanSpy:
    """Notes what each lean write answered: ``_write_lean`` (None: declined) and ``LogSegment.append_lean``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.partition: list[bool] = []  # _write_lean: True written, False declined
        self.segment: list[bool] = []  # append_lean: True written, False WOULD_BLOCK
        write_lean, append_lean = PartitionLog._write_lean, LogSegment.append_lean

        def partition_noted(log: PartitionLog, *args: Any) -> Any:
            result = write_lean(log, *args)
            self.partition.append(result is not None)
            return result

        def segment_noted(segment: LogSegment, *args: Any) -> Any:
            result = append_lean(segment, *args)
            self.segment.append(result is not WOULD_BLOCK)
            return result

        monkeypatch.setattr(PartitionLog, "_write_lean", partition_noted)
        monkeypatch.setattr(LogSegment, "append_lean", segment_noted)


def shaped_appends() -> list[list[Record]]:
    # Appends of 1 to 40 records, keys or none, headers or none, timestamps that mostly grow but
    # sometimes fall back (the time index follows the largest so far), all explicit: the files of
    # two runs can then be compared byte for byte.
    appends: list[list[Record]] = []
    timestamp = 1_700_000_000_000
    for i in range(160):
        count = (1, 2, 10, 1, 40, 3, 1, 7)[i % 8]
        batch = []
        for j in range(count):
            timestamp += 37 if (i + j) % 5 else -90
            batch.append(
                Record(
                    b"v%d-%d" % (i, j) * (1 + (i + j) % 9), None if j % 3 == 1 else b"k%d" % j, timestamp,
                    (("h", b"x"),) if i % 4 == 0 else (),
                )
            )
        appends.append(batch)
    return appends


# An index entry every few batches, and segments that roll every few dozen appends: for their size, for
# time, for a full index.
SHAPES_CONFIGS = [
    LogConfig(segment_bytes=3000, index_interval_bytes=300),
    LogConfig(segment_ms=1000, index_interval_bytes=300),
    LogConfig(segment_index_bytes=48, index_interval_bytes=100),
]


async def partition_files(directory: Path, config: LogConfig, appends: list[list[Record]]) -> dict[str, bytes]:
    async with Engine.open(directory, config) as eng:
        await eng.create_topic("t")
        log = eng.log("t")
        for batch in appends:
            await log.append(batch)
        partition = log.directory
    return {
        path.name: path.read_bytes()
        for path in sorted(partition.iterdir())
        if path.suffix in (".log", ".index", ".timeindex", ".txnindex")
    }


@pytest.mark.parametrize("config", SHAPES_CONFIGS, ids=["segment.bytes", "segment.ms", "index full"])
async def test_the_lean_path_leaves_the_same_files_as_the_general_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: LogConfig
) -> None:
    appends = shaped_appends()
    spy = LeanSpy(monkeypatch)
    lean = await partition_files(tmp_path / "lean", config, appends)
    assert spy.partition.count(True) > len(appends) // 2, "most appends took the lean path"
    assert spy.segment.count(False) >= 5, "and the segment declined some (rolls, index entries to load)"
    with monkeypatch.context() as general:
        # Every append encoded and written as before the lean path: header and body apart.
        general.setattr(log_module, "encode_small_batch", lambda *args, **kwargs: None)
        calls = len(spy.partition)
        assert await partition_files(tmp_path / "general", config, appends) == lean
        assert len(spy.partition) == calls, "the general run never took the lean path"
    assert sum(name.endswith(".log") for name in lean) >= 4, "the run rolled its segments often"


@pytest.mark.parametrize(
    ("config", "why"),
    [
        (LogConfig(segment_bytes=4096, index_interval_bytes=1 << 30), "segment.bytes reached"),
        (LogConfig(segment_ms=4000, index_interval_bytes=1 << 30), "segment.ms passed"),
        (LogConfig(segment_index_bytes=120, index_interval_bytes=0), "an index full"),
    ],
)
async def test_an_append_that_must_roll_is_declined_by_the_lean_path_and_rolls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: LogConfig, why: str
) -> None:
    async with Engine.open(tmp_path, config) as eng:
        await eng.create_topic("t")
        log = eng.log("t")
        spy = LeanSpy(monkeypatch)
        for i in range(60):
            # 400 B a batch, 600 ms apart: each segment takes about eight (or ten time-index entries).
            await log.append([Record(b"x" * 400, None, 1_700_000_000_000 + 600 * i)])
        assert log.segment_count >= 5, why
        assert spy.segment.count(False) >= log.segment_count - 1, f"each roll ({why}) was declined first"
        assert spy.segment.count(True) >= 20, "the appends between the rolls took the lean path"
        assert [r.timestamp for r in await read_all(log)] == [1_700_000_000_000 + 600 * i for i in range(60)]


async def test_an_append_the_flush_policy_syncs_is_declined_by_the_lean_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with Engine.open(tmp_path, LogConfig(flush_messages=3)) as eng:
        await eng.create_topic("t")
        log = eng.log("t")
        spy = LeanSpy(monkeypatch)
        counter = HopCounter(monkeypatch)
        for i in range(9):
            await log.append([Record(b"%d" % i)])
        assert spy.partition == [True, True, False] * 3, "every third append is synced: the hop, not the loop"
        assert counter.hops == 3
        assert log.recovery_point == log.log_end_offset == 9


async def test_an_append_while_the_lock_is_held_is_declined_by_the_lean_path_and_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with Engine.open(tmp_path) as eng:
        await eng.create_topic("t")
        log = eng.log("t")
        await log.append([Record(b"before")])
        spy = LeanSpy(monkeypatch)
        async with log._lock:  # a roll, a flush or retention in progress
            append = asyncio.ensure_future(log.append([Record(b"during")]))
            for _ in range(5):
                await asyncio.sleep(0)
            assert spy.partition == [False], "the lean path declined it"
            assert not append.done() and log.log_end_offset == 1, "nothing written while the lock is held"
        assert (await append).first_offset == 1
        assert [r.value for r in await read_all(log)] == [b"before", b"during"]


async def test_an_append_whose_index_entry_has_no_allocated_slot_is_declined_by_the_lean_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A lean write never allocates index space (a mapped write into a hole would fault on the loop): when
    # an entry comes due and its slot is not allocated, the general path reserves it in its hop and
    # writes the entry.
    async with Engine.open(tmp_path) as eng:
        await eng.create_topic("t")
        log = eng.log("t")
        await log.append([Record(b"first" + bytes(995))])
        spy = LeanSpy(monkeypatch)
        monkeypatch.setattr(OffsetIndex, "reserved", lambda self, slots: False)
        for i in range(16):
            # About 1.1 KB a batch: an entry comes due (index.interval.bytes, 4 KiB) every fourth append.
            await log.append([Record(b"%04d" % i + bytes(996))])
        assert spy.segment.count(False) == 4, "each append with an entry due was declined"
        assert spy.segment.count(True) == 12, "the others took the lean path"
        segment: LogSegment = log._segments.active_segment  # type: ignore[assignment]
        offset_index = segment._offset_index.peek()
        assert offset_index is not None and offset_index.entries == 4, "the general path wrote every entry"
        assert [r.value[:4] for r in (await read_all(log))[1:]] == [b"%04d" % i for i in range(16)]


async def test_a_producers_batch_never_takes_the_lean_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with Engine.open(tmp_path) as eng:
        await eng.create_topic("t")
        log = eng.log("t")
        await log.append([Record(b"before")])
        spy = LeanSpy(monkeypatch)
        result = await log.append([Record(b"p")], producer_id=7, producer_epoch=0, base_sequence=0)
        again = await log.append([Record(b"p")], producer_id=7, producer_epoch=0, base_sequence=0)
        assert spy.partition == [] and spy.segment == []
        assert result.first_offset == again.first_offset == 1, "the retry was recognised: the producer state saw it"


async def test_an_append_behind_the_leader_makes_the_leader_take_the_general_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with Engine.open(tmp_path) as eng:
        await eng.create_topic("t")
        log = eng.log("t")
        await log.append([Record(b"before")])
        spy = LeanSpy(monkeypatch)
        results = await asyncio.gather(log.append([Record(b"leader")]), log.append([Record(b"behind")]))
        assert spy.partition == [], "two callers share one write: the general path"
        assert [r.first_offset for r in results] == [1, 2]
        assert [r.value for r in await read_all(log)] == [b"before", b"leader", b"behind"]


async def test_a_lean_append_that_fails_to_write_is_cut_back_and_raises(tmp_path: Path) -> None:
    class FailingWrites(LogWrites):
        fail = False

        def pwritev(self, fd: int, buffers: Any, position: int) -> int:
            if self.fail and self.paths.get(fd, "").endswith(".log"):
                os.pwritev(fd, [bytes(buffers[0])[:10]], position)  # a torn write, then the error
                raise OSError(28, "No space left on device")
            return super().pwritev(fd, buffers, position)

    ops = FailingWrites()
    with use_ops(ops):
        async with Engine.open(tmp_path) as eng:
            await eng.create_topic("t")
            log = eng.log("t")
            await log.append([Record(b"before")])
            size = log.size_bytes
            ops.fail = True
            with pytest.raises(StorageError, match="free disk space"):
                await log.append([Record(b"lost")])
            ops.fail = False
            assert log.size_bytes == size and log.log_end_offset == 1, "nothing published"
            assert (log.directory / f"{0:020d}.log").stat().st_size == size, "the torn bytes were cut back"
            assert (await log.append([Record(b"after")])).first_offset == 1
            assert [r.value for r in await read_all(log)] == [b"before", b"after"]
