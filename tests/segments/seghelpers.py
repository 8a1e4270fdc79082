"""Helpers shared by the segment tests: batches in the shapes Kafka's tests use, a loop-thread I/O recorder,
the codec with and without its C module."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import seglog.segments.batch as batch_module
import seglog.segments.batch_table as batch_table_module
import seglog.segments.kafka_batch as kafka_batch_module
from seglog.engine.log import segment_append
from seglog.segments import fileio
from seglog.segments.batch import TimestampType, encode_batch, read_header
from seglog.segments.errors import CorruptRecordError
from seglog.segments.fileio import WOULD_BLOCK, Buffer, FileOps, LateBuffer, SegmentFile
from seglog.segments.records import Record
from seglog.segments.segment import LogSegment, batch_headers

SegmentFactory = Callable[..., Coroutine[Any, Any, LogSegment]]


@contextmanager
def python_only() -> Iterator[None]:
    """The segment codec (both formats) and the batch tables' walk without their C modules while the block runs."""
    saved, saved_walk, saved_kafka = batch_module._fast, batch_table_module._fast, kafka_batch_module._fast
    batch_module._fast = None
    batch_table_module._fast = None  # type: ignore[misc]  # Final: replaced only while the block runs
    kafka_batch_module._fast = None
    try:
        yield
    finally:
        batch_module._fast = saved
        batch_table_module._fast = saved_walk  # type: ignore[misc]
        kafka_batch_module._fast = saved_kafka


def outcome(fn: Callable[[], object]) -> object:
    """``("ok", result)``, or the type and message of the library error ``fn`` raised."""
    try:
        return ("ok", fn())
    except (TypeError, ValueError, CorruptRecordError) as exc:
        return (type(exc), str(exc))


def both(fn: Callable[[], object]) -> tuple[object, object]:
    """``fn``'s outcome with the C module and without it: tests assert the two agree."""
    fast = outcome(fn)
    with python_only():
        slow = outcome(fn)
    return fast, slow


def batch(offset: int, *values: str, ts: int | None = None, now_ms: int = 0) -> bytes:
    """One batch of ``values`` at consecutive offsets from ``offset``; record timestamps ``offset * 10``
    (Kafka's test helper) unless ``ts`` is given."""
    records = [
        Record(v.encode(), timestamp=(offset + i) * 10 if ts is None else ts) for i, v in enumerate(values)
    ]
    return encode_batch(offset, records, timestamp_type=TimestampType.CREATE_TIME, now_ms=now_ms)


async def append(seg: LogSegment, batches: Sequence[bytes | bytearray | memoryview], *, fsync: bool = False) -> int:
    """Append encoded batches as the engine does (``engine.log.segment_append``: checked on the loop, written in
    one hop to the append threads, published on the loop); returns the position of the first."""
    return await segment_append(seg, batches, batch_headers(batches), fsync=fsync)


def size_of(b: bytes) -> int:
    return read_header(b).size


async def append_file(f: SegmentFile, buffers: Sequence[Buffer | LateBuffer], *, fsync: bool = False) -> int:
    """What the owner of a ``SegmentFile`` does to append: the blocking write in one append-thread hop, then
    the size published on the loop; returns the position written at."""
    position = f.size
    f.advance(await fileio.submit(f.write, buffers, position, fsync=fsync))
    return position


async def read_at(f: SegmentFile, position: int, size: int) -> bytes | bytearray:
    """What the owner of a ``SegmentFile`` does to read: the page-cache attempt on the loop, else one hop."""
    got = f.read_nowait(lambda pread: pread(position, size))
    if got is WOULD_BLOCK:
        return await fileio.in_thread(f.pread, position, size)
    return got


class LoopThreadOps(FileOps):
    """Records every blocking call made on the event-loop thread (none is allowed)."""

    def __init__(self) -> None:
        self.loop_thread = threading.current_thread()
        self.on_loop: list[str] = []

    def _note(self, name: str) -> None:
        if threading.current_thread() is self.loop_thread:
            self.on_loop.append(name)

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        self._note("open")
        return super().open(path, flags, mode)

    def pwritev(self, fd: int, buffers: Sequence[Buffer], position: int) -> int:
        self._note("pwritev")
        return super().pwritev(fd, buffers, position)

    def pread(self, fd: int, size: int, position: int) -> bytes:
        self._note("pread")
        return super().pread(fd, size, position)

    def fdatasync(self, fd: int) -> None:
        self._note("fdatasync")
        super().fdatasync(fd)

    def ftruncate(self, fd: int, size: int) -> None:
        self._note("ftruncate")
        super().ftruncate(fd, size)

    def replace(self, src: str, dst: str) -> None:
        self._note("replace")
        super().replace(src, dst)

    def unlink(self, path: str) -> None:
        self._note("unlink")
        super().unlink(path)


def wait_until(condition: Callable[[], bool], within_s: float = 30.0) -> bool:
    """Block (in a thread) until ``condition()`` holds; ``False`` if it did not within ``within_s`` seconds.

    For a state another thread reaches without telling anyone (e.g. a closer waiting on a
    condition variable): the outcome depends on the state, never on how fast the machine is.
    """
    deadline = time.monotonic() + within_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True
