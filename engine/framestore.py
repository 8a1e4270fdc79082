"""A durable log of msgpack frames with an in-memory image: what the group store and the transaction log share.

A store is one directory holding one log file of frames (part of the on-disk
format, docs/FORMAT.md §8)::

    int32 length | uint32 CRC-32C of the payload | payload: a msgpack array of length bytes

The first frame is a header ``[0, version]``. What the other frames mean is the
business of the store's *image* (:class:`Image`): it applies each decoded frame
to its state at load, says whether the frame made sense, and writes its live
state as frames for a compaction. The machinery here is the same for every
store:

* **Reading never trusts the file**: a frame whose length runs past the end or
  whose CRC fails ends the log there (a write cut short by a crash; a writable
  open truncates it away), except that a damaged frame followed by a valid one
  is skipped alone, so one flipped bit costs one change, not all later ones. A
  frame that passes its CRC but does not make sense is skipped.
* **Writes are durable before they are visible**: one writer task appends what
  callers queued, in call order, with one ``fdatasync`` per run of queued frames
  (group commit); each change is applied to the image only after its frame is
  durable, so a reader never sees a state that a crash could take back.
* **Compaction** writes the image's live state into ``<log>.compacting`` while
  writes go on, appends the frames written meanwhile, and renames it over the
  log: at any instant the log on disk holds every acknowledged change.

Must not import: ``tools`` or ``server``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Generic, Protocol, TypeVar

import google_crc32c
import msgpack

from seglog.engine.errors import ClosedError, StorageError
from seglog.segments.fileio import FileOps, default_ops, in_thread

__all__ = [
    "COMPACTING_SUFFIX",
    "DEFAULT_COMPACT_MIN_BYTES",
    "FRAME_HEAD_SIZE",
    "HEADER",
    "MAX_FRAME_BYTES",
    "FrameScan",
    "FrameStore",
    "Image",
    "encode_frame",
    "read_file",
    "scan_frames",
    "storage_error",
]

log = logging.getLogger("seglog")

COMPACTING_SUFFIX: Final = ".compacting"
HEADER: Final = 0  # part of the on-disk format: the kind of the header frame
_FRAME_HEAD: Final = struct.Struct(">iI")  # part of the on-disk format: length, CRC-32C of the payload
FRAME_HEAD_SIZE: Final = _FRAME_HEAD.size
# A frame holds one group's offsets or one transaction's state: 10,000 partitions with long names stay well under.
MAX_FRAME_BYTES: Final = 64 << 20
# Compaction runs when the log has grown past this many bytes and twice its size after the last compaction.
DEFAULT_COMPACT_MIN_BYTES: Final = 4 << 20


def encode_frame(payload: Any) -> bytes:
    body: bytes = msgpack.packb(payload, use_bin_type=True)
    return _FRAME_HEAD.pack(len(body), google_crc32c.value(body)) + body


@dataclass(slots=True)
class FrameScan:
    frames: list[tuple[int, Any]]  # (position, decoded payload) of each valid frame
    valid_bytes: int  # the log holds valid frames up to here; beyond: a torn or damaged tail
    problems: list[str]


def scan_frames(data: bytes | memoryview, name: str) -> FrameScan:
    """Every valid frame of a log's bytes; never trusts a length or a CRC (see the module docstring)."""
    frames: list[tuple[int, Any]] = []
    problems: list[str] = []
    size = len(data)
    pos = 0
    valid = 0

    def frame_at(at: int) -> tuple[Any, int] | None:
        """The payload and end of a valid frame at ``at``, or ``None``."""
        if at + FRAME_HEAD_SIZE > size:
            return None
        length, crc = _FRAME_HEAD.unpack_from(data, at)
        end = at + FRAME_HEAD_SIZE + length
        if length <= 0 or length > MAX_FRAME_BYTES or end > size:
            return None
        body = bytes(data[at + FRAME_HEAD_SIZE : end])
        if google_crc32c.value(body) != crc:
            return None
        try:
            return msgpack.unpackb(body, raw=False, strict_map_key=False), end
        except Exception:  # msgpack raises many kinds on garbage; a CRC-valid frame that does not parse is skipped
            return ("unparsable", end)

    while pos < size:
        found = frame_at(pos)
        if found is not None:
            frames.append((pos, found[0]))
            pos = valid = found[1]
            continue
        # A damaged frame whose length is intact, followed by a valid frame (or the exact end): skip it alone.
        if pos + FRAME_HEAD_SIZE <= size:
            length = _FRAME_HEAD.unpack_from(data, pos)[0]
            nxt = pos + FRAME_HEAD_SIZE + length
            if 0 < length <= MAX_FRAME_BYTES and nxt <= size and (nxt == size or frame_at(nxt) is not None):
                problems.append(f"{name}: the frame at byte {pos} ({length} bytes) fails its CRC; skipped")
                pos = valid = nxt
                continue
        problems.append(
            f"{name}: bytes {pos}-{size} ({size - pos} bytes) do not hold a valid frame "
            "(a write cut short by a crash, or damage); the log ends at byte " + str(pos)
        )
        break
    return FrameScan(frames, valid, problems)


class Image(Protocol):
    """The in-memory state of a store, built by applying its frames in order."""

    problems: list[str]
    """What was skipped while reading (damaged frames, a torn tail, frames that do not make sense)."""

    def apply(self, payload: Any) -> bool:
        """Apply one decoded frame; ``False`` when it does not make sense (it is then ignored)."""
        ...

    def frames(self) -> Iterator[bytes]:
        """The live state as frames (what a compaction writes), header first."""
        ...


ImageT = TypeVar("ImageT", bound=Image)


def read_file(ops: FileOps, path: Path) -> bytes:
    """(blocking) The whole of a file, read through ``ops`` (a file that shrinks meanwhile ends early)."""
    fd = ops.open(str(path), os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        size = ops.fstat_size(fd)
        chunks = []
        read = 0
        while read < size:
            chunk = ops.pread(fd, size - read, read)
            if not chunk:
                break
            chunks.append(chunk)
            read += len(chunk)
        return b"".join(chunks)
    finally:
        ops.close(fd)


def read_log(image: Image, path: Path, ops: FileOps) -> tuple[bool, int]:
    """(blocking) Apply the valid frames of the log at ``path`` to ``image``: (whether it exists, its valid bytes).

    Raises:
        StorageError: the file exists but cannot be read.
    """
    try:
        data = read_file(ops, path)
    except FileNotFoundError:
        return False, 0
    except OSError as exc:
        raise storage_error("read", path, exc) from exc
    scan = scan_frames(data, str(path))
    image.problems += scan.problems
    for position, payload in scan.frames:
        if position == 0 and not (isinstance(payload, list) and payload[:1] == [HEADER]):
            image.problems.append(f"{path}: no header frame at byte 0; reading its frames anyway")
        if not image.apply(payload):
            image.problems.append(f"{path}: the frame at byte {position} does not make sense; skipped")
    return True, scan.valid_bytes


def storage_error(what: str, path: Path, exc: OSError) -> StorageError:
    name = errno.errorcode.get(exc.errno or 0, f"errno {exc.errno}")
    advice = "; free disk space and retry" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else ""
    return StorageError(f"{path}: {what} failed: {exc.strerror or exc} ({name}){advice}")


@dataclass(slots=True)
class _Job:
    frame: bytes
    apply: Callable[[], Any]
    future: asyncio.Future[Any]


class _Swap:
    """A compaction ready to take the log's place (queued behind the writes before it)."""

    __slots__ = ("future", "path")

    def __init__(self, path: Path, future: asyncio.Future[None]) -> None:
        self.path = path
        self.future = future


class FrameStore(Generic[ImageT]):
    """One log of frames and its image: ``await load()`` once, read the image, write with :meth:`_enqueue`.

    Subclasses give the image and the header frame, and may fold extra data in
    when the log is first opened for appends (:meth:`_extra_frames`).
    A read-only store (a follower engine) loads and never writes. Call it only
    on the event loop that loaded it.
    """

    what = "store"  # how messages name the store

    def __init__(
        self,
        directory: Path,
        file_name: str,
        image: ImageT,
        header_frame: bytes,
        *,
        read_only: bool,
        compact_min_bytes: int = DEFAULT_COMPACT_MIN_BYTES,
        ops: FileOps | None = None,
    ) -> None:
        self.directory = directory
        self.path = directory / file_name
        self._header_frame = header_frame
        self._read_only = read_only
        self._ops = ops
        self.compact_min_bytes = compact_min_bytes
        self._image = image
        self._fd: int | None = None
        self._size = 0  # bytes of the log on disk (valid frames only)
        self._queue: list[_Job | _Swap] = []
        self._writer: asyncio.Task[None] | None = None
        self._since: list[bytes] | None = None  # frames written since a compaction took its snapshot
        self._compaction: asyncio.Task[None] | None = None
        self._compacted_bytes = 0  # the log's size after the last compaction
        self._closed = False
        self.writes = 0  # executor hops that wrote frames (a test checks that writes share them)

    @property
    def ops(self) -> FileOps:
        return self._ops or default_ops()

    @property
    def read_only(self) -> bool:
        return self._read_only

    # -- open and close -------------------------------------------------------------------

    def _read_blocking(self) -> tuple[ImageT, bool, int]:
        """(blocking) Read the store into a fresh image: (image, whether there is anything to open, valid bytes)."""
        image = self._fresh_image()
        exists, valid = read_log(image, self.path, self.ops)
        return image, exists, valid

    def _fresh_image(self) -> ImageT:
        raise NotImplementedError  # each store makes its own image

    def _has_extra_frames(self) -> bool:
        """Whether :meth:`_extra_frames` has anything to fold in (the log is then created at load)."""
        return False

    def _extra_frames(self) -> bytes:
        """Frames to append when the log is first opened for appends (a previous format folded in)."""
        return b""

    def _after_open(self) -> None:
        """(blocking) Called once the log is open for appends and the extra frames are durable."""

    async def load(self) -> None:
        """Read the store (and, when writable and it exists, repair it and open its log for appends).

        Raises:
            StorageError: the directory or the log cannot be read or written.
        """
        image, exists, valid = await in_thread(self._read_blocking)
        for problem in image.problems:
            log.warning("%s", problem)
        image.problems.clear()
        self._image = image
        if self._read_only or not (exists or self._has_extra_frames()):
            return  # a store with nothing in it yet is created by its first write
        self._fd, self._size = await in_thread(self._open_for_appends, valid, exists)
        self._compacted_bytes = self._size

    def _open_for_appends(self, valid: int, existed: bool) -> tuple[int, int]:
        """(blocking) Remove a cut-short compaction, cut a torn tail, create the log, fold in extra frames."""
        ops = self.ops
        directory = self.directory
        try:
            ops.makedirs(str(directory))
            with contextlib.suppress(FileNotFoundError):
                ops.unlink(str(self.path) + COMPACTING_SUFFIX)
            fd = ops.open(str(self.path), os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            raise storage_error("open", self.path, exc) from exc
        try:
            size = ops.fstat_size(fd)
            if size > valid:
                log.warning("%s: cutting %d bytes after the last valid frame at byte %d", self.path, size - valid,
                            valid)
                ops.ftruncate(fd, valid)
            if valid == 0:
                _write_all(ops, fd, self._header_frame, 0)
                valid = len(self._header_frame)
            extra = self._extra_frames()
            if extra:
                _write_all(ops, fd, extra, valid)
                valid += len(extra)
            ops.fdatasync(fd)
            if not existed or extra:
                fsync_dir(ops, directory)
            self._after_open()
            return fd, valid
        except OSError as exc:
            ops.close(fd)
            raise storage_error("open for appends", self.path, exc) from exc
        except BaseException:
            ops.close(fd)
            raise

    async def close(self) -> None:
        """Finish the writes queued so far, stop a compaction, close the log. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._compaction is not None:
            # Not cancelled: its file write cannot be stopped half-way, and the writer swaps it in soon.
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.shield(self._compaction)
        if self._writer is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.shield(self._writer)
        fd, self._fd = self._fd, None
        if fd is not None:
            ops = self.ops
            await in_thread(ops.close, fd)
            with contextlib.suppress(OSError):
                await in_thread(ops.unlink, str(self.path) + COMPACTING_SUFFIX)

    # -- writes -------------------------------------------------------------------------

    def _enqueue(self, frame: bytes, apply: Callable[[], Any]) -> asyncio.Future[Any]:
        """Queue ``frame``; once it is durable ``apply()`` runs and the future resolves with its result.

        Raises:
            ClosedError: the store is closed.
            StorageError: the store is read-only.
        """
        if self._closed:
            raise ClosedError(f"{self.path}: the {self.what} is closed")
        if self._read_only:
            raise StorageError(f"{self.path}: the {self.what} is read-only (a follower engine writes nothing)")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.append(_Job(frame, apply, future))
        self._wake_writer()
        return future

    def _wake_writer(self) -> None:
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write_queued())

    async def _write_queued(self) -> None:
        """The writer: appends what is queued, in order, one executor hop per run of frames."""
        while self._queue:
            item = self._queue[0]
            if isinstance(item, _Swap):
                self._queue.pop(0)
                await self._swap(item)
                continue
            jobs: list[_Job] = []
            while self._queue and isinstance(self._queue[0], _Job):
                job = self._queue.pop(0)
                assert isinstance(job, _Job)
                jobs.append(job)
            data = b"".join(job.frame for job in jobs)
            try:
                if self._fd is None:
                    self._fd, self._size = await in_thread(self._open_for_appends, 0, False)
                await in_thread(self._append, data, self._size)
            except BaseException as exc:
                failure = exc if isinstance(exc, Exception) else ClosedError(f"{self.path}: the write was cancelled")
                for job in jobs:
                    if not job.future.done():
                        job.future.set_exception(failure)
                        job.future.exception()  # a caller that stopped waiting must not leave it unretrieved
                if not isinstance(exc, Exception):
                    raise
                continue
            self._size += len(data)
            self.writes += 1
            if self._since is not None:
                self._since.append(data)
            for job in jobs:
                try:
                    result = job.apply()
                except Exception as exc:  # a bug in an apply function must not stop the writer
                    log.exception("%s: applying a change failed", self.path)
                    if not job.future.done():
                        job.future.set_exception(exc)
                    continue
                if not job.future.done():
                    job.future.set_result(result)
            self._maybe_compact()

    def _append(self, data: bytes, position: int) -> None:
        """(blocking) Write ``data`` at ``position`` and fdatasync; on failure cut the file back to ``position``."""
        ops = self.ops
        fd = self._fd
        if fd is None:
            raise ClosedError(f"{self.path}: the {self.what} is closed")
        try:
            _write_all(ops, fd, data, position)
            ops.fdatasync(fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                ops.ftruncate(fd, position)
            raise storage_error("append", self.path, exc) from exc

    # -- compaction -----------------------------------------------------------------------

    def _maybe_compact(self) -> None:
        if (
            self._compaction is not None
            or self._closed
            or self._size < self.compact_min_bytes
            or self._size < 2 * self._compacted_bytes
        ):
            return
        self._compaction = asyncio.get_running_loop().create_task(self._compact())

    async def _compact(self) -> None:
        """Rewrite the live state while writes go on; the writer swaps it in (see the module docstring)."""
        tmp = Path(str(self.path) + COMPACTING_SUFFIX)
        frames = b"".join(self._image.frames())  # the image equals the log right now: no write is half-applied
        self._since = []
        try:
            await in_thread(self._write_compacted, tmp, frames)
            swapped: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._queue.append(_Swap(tmp, swapped))
            self._wake_writer()
            await swapped
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("%s: compaction failed (%s); the log stays as it is and compaction is retried later",
                        self.path, exc)
            self._compacted_bytes = self._size  # retry once the log has doubled again
            with contextlib.suppress(OSError):
                await in_thread(self.ops.unlink, str(tmp))
        finally:
            self._since = None
            self._compaction = None

    def _write_compacted(self, tmp: Path, frames: bytes) -> None:
        ops = self.ops
        try:
            fd = ops.open(str(tmp), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0))
            try:
                _write_all(ops, fd, frames, 0)
                ops.fdatasync(fd)
            finally:
                ops.close(fd)
        except OSError as exc:
            raise storage_error("compaction write", tmp, exc) from exc

    async def _swap(self, swap: _Swap) -> None:
        since = b"".join(self._since or ())
        try:
            fd, size = await in_thread(self._swap_files, swap.path, since)
        except Exception as exc:
            if not swap.future.done():
                swap.future.set_exception(exc)
            return
        old, self._fd = self._fd, fd
        self._size = self._compacted_bytes = size
        if old is not None:
            with contextlib.suppress(OSError):
                await in_thread(self.ops.close, old)
        log.info("%s: compacted to %d bytes", self.path, size)
        if not swap.future.done():
            swap.future.set_result(None)

    def _swap_files(self, tmp: Path, since: bytes) -> tuple[int, int]:
        """(blocking) Append the frames written meanwhile to the compacted file, then rename it over the log."""
        ops = self.ops
        try:
            fd = ops.open(str(tmp), os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            raise storage_error("open", tmp, exc) from exc
        try:
            size = ops.fstat_size(fd)
            if since:
                _write_all(ops, fd, since, size)
                size += len(since)
                ops.fdatasync(fd)
            ops.replace(str(tmp), str(self.path))
            fsync_dir(ops, self.directory)
            return fd, size
        except OSError as exc:
            ops.close(fd)
            raise storage_error("compaction swap", tmp, exc) from exc


def _write_all(ops: FileOps, fd: int, data: bytes, position: int) -> None:
    view = memoryview(data)
    while view:
        written = ops.pwritev(fd, [view], position)
        if written <= 0:
            raise OSError(errno.EIO, "write returned no progress")
        view = view[written:]
        position += written


def fsync_dir(ops: FileOps, directory: Path) -> None:
    fd = ops.open(str(directory), os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        ops.fsync(fd)
    finally:
        ops.close(fd)
