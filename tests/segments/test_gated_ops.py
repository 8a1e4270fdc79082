"""GatedOps, the race tests' gate: a chosen syscall stops until the test lets it go, and a gate that no
call reaches fails the test instead of letting it pass without its race."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from seghelpers import append_file

from seglog.segments import fileio
from seglog.segments.faults import FailingOps, GatedOps, Signal
from seglog.segments.fileio import SegmentFile


async def test_a_held_call_waits_at_its_gate_until_released(tmp_path: Path) -> None:
    with GatedOps() as ops:
        f = SegmentFile.open(tmp_path / "a.log", create=True, ops=ops)
        writing = ops.gate("pwritev")
        append = asyncio.ensure_future(append_file(f, [b"abc"]))
        await writing.reached()
        assert writing.thread is not None and writing.thread is not threading.current_thread()
        assert not writing.left.is_set() and (tmp_path / "a.log").read_bytes() == b""
        writing.release()
        assert await append == 0
        await writing.passed()
        assert (tmp_path / "a.log").read_bytes() == b"abc"
        await append_file(f, [b"def"])  # a gate takes one call: the next passes
        f.close()


async def test_a_gate_no_call_reaches_fails_instead_of_passing(tmp_path: Path) -> None:
    ops = GatedOps()
    never = ops.gate("fdatasync", path_contains="nothing-has-this-name")
    f = SegmentFile.open(tmp_path / "a.log", create=True, ops=ops)
    await append_file(f, [b"x"], fsync=True)
    with pytest.raises(TimeoutError, match="fdatasync on a path containing 'nothing-has-this-name'"):
        await never.reached(within_s=0.01)
    with pytest.raises(TimeoutError):
        never.wait_reached(within_s=0.01)
    f.close()


async def test_gates_match_by_path_and_skip_the_first_calls_asked(tmp_path: Path) -> None:
    with GatedOps() as ops:
        second_b = ops.gate("open", path_contains="b.log", after=1)
        renamed = ops.gate("replace", path_contains="renamed", hold=False)
        first = SegmentFile.open(tmp_path / "b.log", create=True, ops=ops)
        assert not second_b.entered.is_set()
        other = SegmentFile.open(tmp_path / "c.log", create=True, ops=ops)
        opening = asyncio.ensure_future(fileio.in_thread(SegmentFile.open, tmp_path / "b.log", create=False, ops=ops))
        await second_b.reached()
        second_b.release()
        again = await opening
        other.rename(tmp_path / "renamed.log")  # matched on the destination
        await renamed.passed()
        for f in (first, other, again):
            f.close()


async def test_on_enter_runs_in_the_calling_thread_and_the_exit_releases_every_gate(tmp_path: Path) -> None:
    seen: list[threading.Thread] = []
    failing = FailingOps()
    with GatedOps(failing) as ops:
        f = SegmentFile.open(tmp_path / "a.log", create=True, ops=ops)
        ops.gate("fdatasync", hold=False, on_enter=lambda: seen.append(threading.current_thread()))
        await fileio.in_thread(f.fsync)
        assert len(seen) == 1 and seen[0] is not threading.current_thread()
        assert failing.calls["fdatasync"] == 1  # the wrapped FileOps made the call
        held = ops.gate("ftruncate")
    truncating = asyncio.ensure_future(fileio.in_thread(f.truncate, 0))  # released on exit: goes straight through
    await truncating
    assert held.entered.is_set()
    f.close()


async def test_a_signal_wakes_threads_and_the_loop() -> None:
    signal = Signal()
    assert not await signal.wait_async(0.01)
    threading.Timer(0.01, signal.set).start()
    assert await signal.wait_async(30)
    assert signal.wait(0) and signal.is_set()
    assert await signal.wait_async(0)  # raised already: no wait


async def test_use_ops_installs_a_gate_for_files_opened_inside(tmp_path: Path) -> None:
    with GatedOps() as ops, fileio.use_ops(ops):
        gate = ops.gate("fsync")  # the directory fsync of a created file
        opening = asyncio.ensure_future(fileio.in_thread(SegmentFile.open, tmp_path / "a.log", create=True))
        await gate.reached()
        gate.release()
        (await opening).close()
