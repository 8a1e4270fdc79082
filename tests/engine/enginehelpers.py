"""Helpers shared by the engine tests."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from seglog.engine import AppendResult, PartitionLog, Record
from seglog.segments.faults import GatedOps


async def read_all(log: PartitionLog, max_bytes: int = 1 << 20) -> list[Record]:
    """Every record of ``log``, from its log start to its log end, read ``max_bytes`` at a time."""
    out: list[Record] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        got = await log.read(offset, max_bytes)
        out.extend(got.records)
        offset = got.next_offset
    return out


async def read_pairs(
    log: PartitionLog, isolation: str = "read_uncommitted", max_bytes: int = 100
) -> list[tuple[int, bytes | None]]:
    """``(offset, value)`` of every record ``isolation`` lets a reader see, from the log start until reads stop moving.

    A ``read_committed`` reader stops at the last stable offset, not the log end.
    """
    out: list[tuple[int, bytes | None]] = []
    offset = log.log_start_offset
    while True:
        got = await log.read(offset, max_bytes, isolation=isolation)  # type: ignore[arg-type]
        out += [(r.offset, r.value) for r in got.records]
        if got.next_offset == offset:
            return out
        offset = got.next_offset


def open_log_files_under(root: Path) -> list[str]:
    """The ``.log`` files below ``root`` that this process still holds open (Linux ``/proc``)."""
    return open_files_under(root, (".log",))


def open_files_under(root: Path, suffixes: tuple[str, ...]) -> list[str]:
    """Files below ``root`` ending with one of ``suffixes`` that this process holds open, once per descriptor.

    A file removed or replaced while open counts under its old name (Linux ``/proc`` adds " (deleted)").
    """
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}").removesuffix(" (deleted)")
        except OSError:
            continue
        if target.startswith(str(root)) and target.endswith(suffixes):
            out.append(target)
    return out


def break_first_segment(partition_dir: Path) -> Path:
    """Put a directory where ``partition_dir``'s first ``.log`` is: opening the partition fails. Returns its path."""
    bad = partition_dir / f"{0:020d}.log"
    bad.unlink()
    bad.mkdir()
    return bad


async def reach(condition: Callable[[], bool], what: str, within_s: float = 30.0) -> None:
    """Let the loop run until ``condition()`` holds; fail the test, naming ``what``, if it never does.

    For a state a task reaches without signalling it (a close waiting for the writer): the test
    goes on once the state is there, however slow the machine, and fails if it never comes.
    """
    deadline = time.monotonic() + within_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {within_s} s: {what}")
        await asyncio.sleep(0.001)


@contextlib.asynccontextmanager
async def writer_held(log: PartitionLog, ops: GatedOps) -> AsyncIterator[asyncio.Future[AppendResult]]:
    """Inside the block, ``log``'s writer is stuck in the pwritev of one append (``b"blocker"``).

    Appends made inside the block stay queued behind it, neither taken by the writer nor encoded
    nor written, until the block ends (it then waits for the blocker's result). ``ops`` must be
    the FileOps the partition's active segment was opened with (``use_ops`` around the engine).
    """
    writing = ops.gate("pwritev", path_contains=".log")
    blocker = asyncio.ensure_future(log.append([Record(b"blocker")]))
    try:
        await writing.reached()
        yield blocker
    finally:
        writing.release()
        await blocker
