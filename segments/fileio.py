"""The file layer: the segment's ``.log`` (``SegmentFile``), small files, directories, and the thread hops.

Owns every blocking file system call of the segment and engine layers: opening
and creating segment files, appends (``pwritev`` of several buffers plus an
optional ``fdatasync``), positional reads, truncation, fsync of files and
directories, atomic rename, atomic small-file writes (checkpoints), removal and
preallocation; and the two ways into a thread (:func:`in_thread`, through
``aiofiles``, and :func:`submit`, the append threads).

Rules this module enforces:

* **No blocking file I/O on the event-loop thread.** ``SegmentFile`` is
  synchronous: its owner (the engine's ``PartitionLog``) runs each logical
  operation as ONE thread hop (``in_thread``, or for appends the same hop to
  a pool of their own, :func:`submit`; a hop costs dozens of page-cache
  ``pread`` calls, so one append = one hop however many batches and syscalls
  it needs). An append's :class:`LateBuffer` parts (large batch bodies) are
  made in that hop too. The single exception is the page-cache attempt of
  reads (``SegmentFile.read_nowait``, ``read_cached``): on Linux
  ``os.preadv(fd, [buf], pos, os.RWF_NOWAIT)`` returns cached bytes far sooner
  than a hop and raises ``BlockingIOError`` instead of waiting for the disk;
  then the attempt answers :data:`WOULD_BLOCK` and the caller makes its hop.
  The second exception is the ``pwritev`` of a small append without
  ``fdatasync`` (``SegmentFile.write_nowait``): a copy into the page cache
  that costs less than the hop; it is bounded (:data:`LOOP_WRITE_MAX_BYTES`,
  the descriptor already open, the ``FileOps`` willing) and watched (a write
  slower than :data:`SLOW_WRITE_SECONDS` sends small appends back to the
  threads for a pause that grows while writes stay slow); see
  docs/ARCHITECTURE.md, "Small appends written by the loop".
  The small-file and directory helpers below are coroutines that make their
  hop themselves.
* **``OSError`` stops here**: it becomes :class:`~seglog.indexes.errors.StorageError`
  (``raise StorageError(...) from exc``) naming the path and the operation.
* **The fault-injection seam**: every system call goes through a :class:`FileOps`
  object. Tests install one that fails with ``ENOSPC`` or forgets unsynced writes
  (``seglog.segments.faults``), per file or for the whole process (:func:`use_ops`).
  ``FileOps`` is defined in the lowest layer (``seglog.indexes.fileops``) so that
  the index files go through it too; it is re-exported here.

Must not import: ``engine`` or ``tools``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import enum
import errno
import os
import threading
import time
import warnings
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Final, NoReturn, ParamSpec, Protocol, TypeVar, cast

import aiofiles.os

from seglog.indexes.errors import ClosedError, FileReplacedError, StorageError
from seglog.indexes.fileops import FILE_MODE as _FILE_MODE
from seglog.indexes.fileops import Buffer, FileOps, default_ops, use_ops
from seglog.indexes.handles import open_file_budget
from seglog.segments._native import optional_c_module

__all__ = [
    "Buffer",
    "FileOps",
    "LOOP_WRITE_MAX_BYTES",
    "LateBuffer",
    "PRead",
    "TMP_SUFFIX",
    "WOULD_BLOCK",
    "SegmentFile",
    "WouldBlock",
    "atomic_write",
    "default_ops",
    "fsync_dir",
    "fsync_dir_sync",
    "in_thread",
    "list_dir",
    "make_dirs",
    "read_small_file",
    "read_small_file_sync",
    "remove",
    "replace",
    "run_to_completion",
    "submit",
    "use_ops",
]

_T = TypeVar("_T")
_P = ParamSpec("_P")


class LateBuffer(Protocol):
    """A buffer of :meth:`SegmentFile.append` made in the append's worker thread, just before the write.

    ``len()`` is its exact size up front; ``materialize()`` returns the bytes
    (e.g. :class:`seglog.segments.batch.LateBody`, a batch body encoded there, so a
    large body is written by the thread, and CPU, that wrote it into memory).
    """

    def __len__(self) -> int: ...

    def materialize(self) -> Buffer: ...


_PLAIN_BUFFERS: Final = frozenset((bytes, bytearray, memoryview))
_speedups = optional_c_module("_speedups")
# read_cached_spans' pieces read in one C call (its loop is the twin); None without the C module.
_pread_spans = None if _speedups is None else _speedups.pread_spans


def _is_late(buffer: object) -> bool:
    # By the method, not by type: any other bytes-like object (a bytes subclass, array, mmap) is
    # written as it is, as pwritev takes it.
    return type(buffer) not in _PLAIN_BUFFERS and getattr(type(buffer), "materialize", None) is not None


def _materialized(buffers: Sequence[Buffer | LateBuffer]) -> Sequence[Buffer]:
    """``buffers`` with every LateBuffer made; before anything is written, so a failure writes nothing."""
    if _PLAIN_BUFFERS.issuperset(map(type, buffers)):  # the common case, at C speed: no call per buffer
        return cast(Sequence[Buffer], buffers)
    made: list[Buffer] = []
    for b in buffers:
        if not _is_late(b):
            made.append(cast(Buffer, b))
            continue
        data = cast(LateBuffer, b).materialize()
        if len(data) != len(b):
            raise RuntimeError(f"a late buffer promised {len(b)} bytes and made {len(data)}")
        made.append(data)
    return made


class WouldBlock(enum.Enum):
    """The type of :data:`WOULD_BLOCK`."""

    WOULD_BLOCK = "would block"


WOULD_BLOCK: Final = WouldBlock.WOULD_BLOCK
"""What a page-cache-only attempt returns when it would have to wait for the disk (see ``SegmentFile.read_nowait``)."""

PRead = Callable[[int, int], "bytes | bytearray"]
"""``pread(position, size)``: the bytes at ``position``; fewer only at the file's logical end."""

_IOV_MAX: Final = 1024  # Linux's limit on buffers per writev call (sysconf SC_IOV_MAX)
TMP_SUFFIX: Final = ".tmp"  # part of the on-disk layout: an atomic write's temp file, removed at open if left over


def _call(fn: Callable[[], _T]) -> _T:
    return fn()


_run_in_executor = cast(Callable[[Callable[[], object]], Awaitable[object]], aiofiles.os.wrap(_call))


async def in_thread(fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
    """Run ``fn(*args, **kwargs)`` in the default executor: one thread hop, via aiofiles.

    The hop of every blocking operation but the appends (a segment's read
    that missed the page cache, its index loading, recovery, flush, close...);
    ``fn`` must not touch objects the event loop mutates meanwhile, beyond
    what the segment's concurrency contract allows.
    """
    return cast(_T, await _run_in_executor(partial(fn, *args, **kwargs)))


async def run_to_completion(aw: Awaitable[_T]) -> _T:
    """Await ``aw`` to the end even if the caller is cancelled meanwhile, then re-raise the cancellation.

    For work whose bookkeeping must match the file: an append whose bytes reached
    the file must also move the logical size, whether or not the producer is
    still waiting. A cancelled caller gets ``CancelledError`` after the work is
    done (like a produce that timed out but was written). A ``Future`` (e.g.
    from :func:`submit`) is awaited as is; a coroutine becomes a Task.
    """
    task = asyncio.ensure_future(aw)
    try:
        # shield keeps a cancellation of the caller away from the task; it costs a fraction of the
        # loop-thread CPU that asyncio.wait did, and every append pays it once.
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if task.done():  # the work itself was cancelled, or finished as the caller was cancelled
            if not task.cancelled():
                task.exception()  # mark it retrieved; the cancellation wins
            raise
    while not task.done():  # the caller was cancelled: the work finishes first
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait((task,))
    if not task.cancelled():
        task.exception()
    raise asyncio.CancelledError


class _AppendThreads:
    """The threads appends run in: a pool of their own, made per process (fork-safe), bridged leanly.

    Appends do not go through ``loop.run_in_executor``: the default executor is
    shared with every other hop (reads, index loads, aiofiles), so a sequence of
    appends landed on whichever of its threads woke; in a pool of their own they
    keep to one warm thread, and the bridge below skips ``run_in_executor``'s
    coroutine-function checks and ``wrap_future``'s chaining: both hops got faster
    and steadier (docs/PERFORMANCE.md, "Measurements behind the code").
    """

    def __init__(self) -> None:
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        if hasattr(os, "register_at_fork"):
            # A forked child (Spark's Python workers are forked) has none of the parent's threads.
            os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        self._pool = None
        self._lock = threading.Lock()

    def pool(self) -> concurrent.futures.ThreadPoolExecutor:
        pool = self._pool
        if pool is None:
            with self._lock:
                pool = self._pool
                if pool is None:
                    pool = self._pool = concurrent.futures.ThreadPoolExecutor(
                        max_workers=min(32, (os.cpu_count() or 1) + 4), thread_name_prefix="seglog-append"
                    )
        return pool


_APPEND_THREADS: Final = _AppendThreads()


def _deliver(done: concurrent.futures.Future[_T], future: asyncio.Future[_T]) -> None:
    if future.cancelled():
        return
    if done.cancelled():  # the pool was shut down with its queued jobs cancelled
        future.cancel()
        return
    exc = done.exception()
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(done.result())


def submit(fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> asyncio.Future[_T]:
    """Start ``fn(*args, **kwargs)`` in an append thread at once; returns its future (see ``_AppendThreads``).

    The job is queued before the caller's next ``await`` and the caller holds
    the future, so the bookkeeping of an append can follow the job's outcome
    even when the caller is cancelled (the job runs to its end regardless).
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[_T] = loop.create_future()

    def done(job: concurrent.futures.Future[_T]) -> None:
        with contextlib.suppress(RuntimeError):  # the loop was closed meanwhile: nobody is waiting
            loop.call_soon_threadsafe(_deliver, job, future)

    _APPEND_THREADS.pool().submit(fn, *args, **kwargs).add_done_callback(done)
    return future


# Appends the event loop writes itself (SegmentFile.write_nowait): at most this many bytes, without
# fdatasync. A buffered write of that size copies into the page cache in less time than a thread hop
# takes (docs/PERFORMANCE.md, "Lean single appends"); a larger one costs the loop more than the hop.
LOOP_WRITE_MAX_BYTES: Final = 128 * 1024
# A small unsynced write that took longer than this waited for something (dirty-page throttling, the
# journal, reclaim) or its thread was descheduled: loop writes then pause (docs/ARCHITECTURE.md,
# "Where threads run").
SLOW_WRITE_SECONDS: Final = 0.01
LOOP_WRITE_PAUSE_SECONDS: Final = 0.1  # the first pause; doubled by each slow loop write, up to ...
LOOP_WRITE_MAX_PAUSE_SECONDS: Final = 10.0


class _LoopWrites:
    """When the event loop may write small appends itself: the process's switch (the page cache is shared).

    A slow small write on the loop pauses loop writes for ``pause_s`` and
    doubles the next pause (so a loop write that stalls after each pause
    stalls ever more rarely); a fast one sets the pause back to its first
    length. A slow small write in an append thread (where waiting is
    harmless) extends the pause in force: while writes keep being slow, the
    loop makes none.
    """

    __slots__ = ("pause_s", "paused_until", "slow_s")

    def __init__(self) -> None:
        self.slow_s = SLOW_WRITE_SECONDS
        self.pause_s = LOOP_WRITE_PAUSE_SECONDS
        self.paused_until = 0.0  # time.monotonic() before which small appends take their hop

    def loop_write_took(self, seconds: float, now: float) -> None:
        if seconds > self.slow_s:
            self.paused_until = now + self.pause_s
            self.pause_s = min(self.pause_s * 2, LOOP_WRITE_MAX_PAUSE_SECONDS)
        elif self.pause_s != LOOP_WRITE_PAUSE_SECONDS:
            self.pause_s = LOOP_WRITE_PAUSE_SECONDS

    def thread_write_took(self, seconds: float, now: float) -> None:
        if seconds > self.slow_s:
            self.paused_until = max(self.paused_until, now + self.pause_s)


_LOOP_WRITES: Final = _LoopWrites()


def _storage_error(what: str, path: Path | str, exc: OSError) -> StorageError:
    name = errno.errorcode.get(exc.errno or 0, f"errno {exc.errno}")
    advice = "; free disk space and retry" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else ""
    return StorageError(f"{path}: {what} failed: {exc.strerror or exc} ({name}){advice}")


class _NotCached(Exception):
    """Raised by the event-loop pread when the kernel would have to wait for the disk."""


def _pwritev_all(ops: FileOps, fd: int, buffers: Sequence[Buffer], position: int) -> int:
    # pwritev may write less than asked (signals, quotas, > 2 GiB) and takes at most IOV_MAX buffers:
    # loop until every byte is down, re-slicing the buffer list after a short write.
    pending: list[Buffer] = [b for b in buffers if len(b)]
    written_total = 0
    while pending:
        chunk = pending[:_IOV_MAX]
        want = sum(len(b) for b in chunk)
        written = ops.pwritev(fd, chunk, position + written_total)
        if written <= 0:
            raise OSError(errno.EIO, "pwritev wrote nothing")
        written_total += written
        if written == want:
            del pending[: len(chunk)]
            continue
        # Drop the fully written buffers, keep the unwritten tail of the partly written one.
        for i, buf in enumerate(chunk):
            if written < len(buf):
                pending[: i + 1] = [memoryview(buf)[written:]]
                break
            written -= len(buf)
    return written_total


class SegmentFile:
    """One open data file (a segment's ``.log``) with a logical size.

    On disk: the file holds ``size`` valid bytes; with preallocation the file may
    be longer (zeros), and :meth:`close`/:meth:`trim` cut it back to ``size``.

    Synchronous: every method but :meth:`read_nowait`, :meth:`read_cached`
    and the properties may block, and runs in the thread hop of whoever calls
    it (the engine's ``PartitionLog``, the loader, the follower).

    Concurrency contract: one writer at a time (the caller serialises
    ``write``/``truncate``; the segment's owner holds a lock), any number of
    concurrent readers. ``size`` grows only when the writer publishes a
    completed write (:meth:`advance`), and reads never return bytes beyond
    ``size``, so a reader never sees a half-written append. ``close`` waits
    for the calls already running in other threads and then refuses new ones
    with :class:`ClosedError`.

    Open-file budget: the descriptor counts against the process's
    :func:`~seglog.indexes.handles.open_file_budget`. When no call is using it
    (no guarded call in flight), the budget may close it (:meth:`release_handle`);
    the next call that needs it reopens the file in its worker thread and
    checks that the path still names the same file (device and inode) with at
    least ``size`` bytes, else :class:`FileReplacedError`. Reads on the event
    loop never reopen: with no descriptor they take the thread path.
    """

    def __init__(
        self, path: Path | str, fd: int | None, *, size: int, file_length: int, ops: FileOps, writable: bool,
        identity: tuple[int, int] | None = None,
    ) -> None:
        # The path as text; the Path object only when something asks for it (one per segment adds
        # up when a directory of thousands of segments opens).
        self._name = str(path)
        self._path_object: Path | None = path if isinstance(path, Path) else None
        self._fd = fd  # None: opened on first use, in the thread that needs it (see open's defer)
        self._size = size
        self._file_length = file_length
        self._ops = ops
        self._writable = writable
        self._page_cache_reads = ops.page_cache_reads
        self._loop_writes = ops.loop_writes
        # The system call itself when the ops are the plain ones (a Python frame fewer per loop write).
        self._pwritev = os.pwritev if type(ops) is FileOps else ops.pwritev
        self._closed = False
        self._released = False  # the descriptor was closed (once)
        self._busy = 0  # guarded calls running (see _guarded)
        # A plain lock (its C context manager is cheaper per use than a Condition's); the Condition
        # a closer waits on is made only when a close finds calls running (cheaper per file opened,
        # and an open may open thousands).
        self._busy_lock = threading.Lock()
        self._idle: threading.Condition | None = None
        # Taken by a deferred open and by rename, never on the event loop: a slow open (a cold inode)
        # must not block a loop read waiting for _busy_lock, and an open must not use a name a rename
        # has just replaced.
        self._open_lock = threading.Lock()
        # (st_dev, st_ino) of the file the first descriptor opened: a reopen must find the same file.
        self._identity = identity
        self._dirty = False  # written (or cut) since the last fdatasync: a released descriptor's sync reopens
        self.handle_used = True  # set on every use; the open-file budget's sweep clears it
        if fd is not None:
            open_file_budget().opened(self)

    # --- lifecycle ---------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: Path | str,
        *,
        create: bool,
        writable: bool = True,
        preallocate_bytes: int = 0,
        ops: FileOps | None = None,
        defer: bool = False,
    ) -> SegmentFile:
        """Open (``create=False``) or create (``create=True``) the file at ``path``; blocking.

        A newly created file is made durable (its directory is fsynced) and, with
        ``preallocate_bytes > 0``, extended to that length with ``posix_fallocate``
        at logical size 0 (Kafka's ``preallocate``). An existing file is opened as
        it is (``create=True`` included): its logical size is its length.

        With ``defer`` (an existing file only) the file is only ``stat``-ed
        (it must be a regular file) and its descriptor is opened by the first
        operation that needs one, in that operation's thread: a directory of
        many sealed segments then holds one descriptor per segment read, not
        one per segment. A file that cannot be opened then fails that operation.

        Raises:
            StorageError: the OS refused (missing directory, permissions, no space, not a regular file...).
        """
        ops = ops or default_ops()
        if defer and not create:
            # A sealed segment nobody may read for days: its length now, its descriptor on first use.
            try:
                length = ops.stat_size(str(path))
            except OSError as exc:
                raise _storage_error("stat", Path(path), exc) from exc
            return cls(path, None, size=length, file_length=length, ops=ops, writable=writable)
        path = Path(path)
        flags = _open_flags(writable)
        created = False
        try:
            if create:
                try:
                    fd = ops.open(str(path), flags | os.O_CREAT | os.O_EXCL, _FILE_MODE)
                    created = True
                except FileExistsError:
                    fd = ops.open(str(path), flags, _FILE_MODE)
            else:
                fd = ops.open(str(path), flags, _FILE_MODE)
        except OSError as exc:
            raise _storage_error("open", path, exc) from exc
        try:
            length = ops.fstat_size(fd)
            size = length
            identity = ops.fstat_identity(fd)
            if created and preallocate_bytes > 0:
                ops.fallocate(fd, 0, preallocate_bytes)
                length, size = preallocate_bytes, 0
            if created:
                # A new file's directory entry survives power loss only once the directory is synced.
                fsync_dir_sync(ops, path.parent)
        except OSError as exc:
            ops.close(fd)
            if created:
                # A failed preallocation may leave part of its zeros as the length of the file, which
                # the next open would take for data: the file goes, the next try creates it afresh.
                with contextlib.suppress(OSError):
                    ops.unlink(str(path))
            raise _storage_error("create" if created else "stat", path, exc) from exc
        return cls(path, fd, size=size, file_length=length, ops=ops, writable=writable, identity=identity)

    def begin_close(self) -> None:
        """Refuse new operations from now on (call on the event loop before :meth:`close` in a thread).

        A read on the loop checks ``closed`` and then reads without a thread hop;
        marking the file closed on the loop first means no such read can start
        while a worker thread releases the descriptor (which the OS may then reuse).
        """
        self._closed = True

    def close(self, *, trim: bool = True) -> None:
        """Close the file (idempotent); with ``trim``, first cut a preallocated tail back to ``size``. Blocking.

        Refuses new operations, waits for the guarded calls already running
        (reads in other threads), then closes the descriptor, once (also after
        :meth:`begin_close`).

        Raises:
            StorageError: the trim or close failed (the descriptor is released anyway).
        """
        with self._busy_lock:
            if self._released:
                return
            self._released = True
            self._closed = True  # from here on new calls refuse; calls already running finish first
            if self._busy:
                self._idle = threading.Condition(self._busy_lock)
                self._idle.wait_for(lambda: self._busy == 0)
        open_file_budget().forget(self)
        must_trim = trim and self._writable and self._file_length != self._size
        if self._fd is None and not must_trim:
            return  # deferred and never used, or given back to the open-file budget: nothing is open
        fd = self._fd if self._fd is not None else self._open_descriptor()
        self._fd = None
        try:
            if must_trim:
                self._ops.ftruncate(fd, self._size)
                self._file_length = self._size
        except OSError as exc:
            raise _storage_error("trim on close", self._path, exc) from exc
        finally:
            try:
                self._ops.close(fd)
            except OSError as exc:
                raise _storage_error("close", self._path, exc) from exc

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def __del__(self) -> None:
        # Garbage collection of an open file: say so (pytest turns it into an error) and release the
        # descriptor, which nothing else will ever close.
        if not getattr(self, "_released", True):
            self._closed = self._released = True
            warnings.warn(f"unclosed segment file {self._name}", ResourceWarning, stacklevel=2, source=self)
            if self._fd is not None:
                with contextlib.suppress(OSError):
                    os.close(self._fd)

    @property
    def path(self) -> Path:
        """Current path (follows :meth:`rename`)."""
        return self._path

    @property
    def _path(self) -> Path:
        path = self._path_object
        if path is None:
            path = self._path_object = Path(self._name)
        return path

    def _set_path(self, path: Path) -> None:
        self._path_object, self._name = path, str(path)

    @property
    def size(self) -> int:
        """Logical size in bytes: everything below it has been written completely."""
        return self._size

    @property
    def file_length(self) -> int:
        """Length of the file on disk as this object knows it (>= ``size`` when preallocated)."""
        return self._file_length

    @property
    def ops(self) -> FileOps:
        """The ``FileOps`` this file uses."""
        return self._ops

    def _descriptor(self) -> int:
        # The descriptor, opened now if it was deferred or given back to the budget (only from a guarded
        # call in a worker thread: opening may block; close() and release_handle() wait for or refuse
        # while guarded calls run, so neither can race with this).
        fd = self._fd
        if fd is None:
            with self._open_lock:
                fd = self._fd
                if fd is None:
                    fd = self._fd = self._open_descriptor()
            open_file_budget().opened(self)  # outside the open lock: it may release other files
        return fd

    def _open_descriptor(self) -> int:
        """Open the file by its name; a reopen checks that it is still the file this object vouches for.

        Raises:
            StorageError: the open or the stat failed.
            FileReplacedError: another file (or a shorter one) has the name now.
        """
        try:
            fd = self._ops.open(self._name, _open_flags(self._writable), _FILE_MODE)
        except OSError as exc:
            raise _storage_error("open", self._path, exc) from exc
        try:
            (device, inode), length = self._ops.fstat_identity(fd), self._ops.fstat_size(fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                self._ops.close(fd)
            raise _storage_error("stat", self._path, exc) from exc
        if self._identity is None:  # the first descriptor (a deferred open): this is the file from now on
            self._identity = (device, inode)
            return fd
        # A writable file has one writer, this object, so it holds at least the bytes it vouches for; a
        # read-only file's writer (another process) may have cut it, and its follower looks for itself.
        problem = None
        if (device, inode) != self._identity:
            problem = f"another file has its name now (inode {inode}, was {self._identity[1]})"
        elif self._writable and length < self._size:
            problem = f"it was cut to {length} bytes below the {self._size} written"
        if problem is None:
            return fd
        with contextlib.suppress(OSError):
            self._ops.close(fd)
        raise FileReplacedError(
            f"{self._name}: the file changed while its descriptor was closed to stay within the "
            f"open-file budget: {problem}; nothing was read from it. Close the engine and reopen the "
            "log directory (its recovery checks every file), or run 'seglog verify DIR'"
        )

    def release_handle(self) -> bool:
        """Close the descriptor unless a call is using it (the open-file budget's eviction); ``True`` if none is held.

        The next call that needs the descriptor reopens the file (see the class docstring).
        """
        with self._busy_lock:
            fd = self._fd
            if fd is None or self._released:
                return True  # nothing open, or close() owns the descriptor now
            if self._busy:
                return False
            self._fd = None  # under the lock with no call running: no call can hold this number
        with contextlib.suppress(OSError):  # a failed close still releases the number (POSIX)
            self._ops.close(fd)
        return True

    def _guarded(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        # Runs in the thread that does the syscalls: close() waits until no guarded call is running,
        # and a call that starts after close() began refuses, so a descriptor is never used after
        # os.close (its number could already belong to another file).
        lock = self._busy_lock
        with lock:
            if self._closed:
                raise ClosedError(f"{self._name}: file is closed")
            self._busy += 1
        self.handle_used = True
        try:
            return fn(*args, **kwargs)
        finally:
            with lock:
                self._busy -= 1
                # Only a closer waits, on the Condition it made under this lock after it saw calls
                # running: skipping notify_all() otherwise saves time on every loop-side read.
                if self._busy == 0 and self._idle is not None:
                    self._idle.notify_all()

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"{self._name}: file is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if not self._writable:
            raise ClosedError(f"{self._name}: file was opened read-only")

    # --- writes ------------------------------------------------------------------------------

    def write(
        self,
        buffers: Sequence[Buffer | LateBuffer],
        position: int,
        *,
        fsync: bool = False,
        before: Callable[[], object] | None = None,
        then: Callable[[], object] | None = None,
    ) -> int:
        """Write ``buffers`` back to back at ``position``, the logical end (one ``pwritev``, plus ``fdatasync``).

        Blocking: the caller runs it in its one thread hop (the engine's
        appends: :func:`submit`). It does not move the logical size: the
        caller does that with :meth:`advance` once this returned (on the event
        loop, beside its own bookkeeping), so a reader never sees a size its
        owner has not published. A :class:`LateBuffer` is materialized here,
        every one before the first byte is written (if one fails, nothing is
        written and its error is raised as is). ``before`` runs just before the
        write (whatever it raises fails the write with nothing written; the
        segment reserves index space there). ``then`` runs after a successful
        write (best effort: whatever it raises is ignored, the bytes are
        written), for blocking preparation the caller wants off the event loop.
        On failure the file is cut back to ``position``, so from this object's
        point of view nothing happened. Returns the end of what was written.

        Raises:
            ValueError: ``position`` is not the logical size (appends must be serialised).
            StorageError: the write or the sync failed (e.g. ``ENOSPC``, ``EIO``).
            ClosedError: the file is closed or read-only.
        """
        self._check_writable()
        if position != self._size:
            raise ValueError(f"{self._name}: a write at {position} is not at the logical end {self._size}")
        total = sum(len(b) for b in buffers)
        if total:
            self._guarded(self._write, buffers, position, fsync, before, then)
        return position + total

    def write_nowait(self, buffers: Sequence[Buffer], position: int) -> int | WouldBlock:
        """:meth:`write` without ``fdatasync``, made here on the event loop, or :data:`WOULD_BLOCK` (nothing done).

        The loop writes ``buffers`` itself only when the write is small
        (:data:`LOOP_WRITE_MAX_BYTES`), the descriptor is open (a reopen is a
        path lookup: it may wait for the disk), every buffer is plain bytes (a
        late buffer is made in the append's thread), the ``FileOps`` allow it
        (``loop_writes``), and no small write was slow lately (see
        ``SLOW_WRITE_SECONDS``). Such a write copies into the page cache; the
        durability an acknowledgement promises is the same as the threads'
        write without sync (docs/ARCHITECTURE.md, "Where threads run").
        Otherwise the caller makes its hop and calls :meth:`write`.

        Raises:
            As :meth:`write` (a failed write is cut back, here on the loop: the error path).
        """
        if self._closed or not self._writable:
            self._check_writable()
        if position != self._size:
            raise ValueError(f"{self._name}: a write at {position} is not at the logical end {self._size}")
        total = sum(map(len, buffers))
        if (
            total > LOOP_WRITE_MAX_BYTES
            or not self._loop_writes
            or not _PLAIN_BUFFERS.issuperset(map(type, buffers))
            or time.monotonic() < _LOOP_WRITES.paused_until
        ):
            return WOULD_BLOCK
        # As _guarded, inline (one call fewer on every append): close() waits for this call, and the
        # open-file budget cannot close the descriptor while it runs.
        lock = self._busy_lock
        with lock:
            if self._closed:
                raise ClosedError(f"{self._name}: file is closed")
            fd = self._fd
            if fd is None:  # given back to the open-file budget: reopening is a path lookup, for a thread
                return WOULD_BLOCK
            self._busy += 1
        self.handle_used = True
        try:
            self._dirty = True
            start = time.monotonic()
            try:
                written = self._pwritev(fd, buffers, position)
                if written != total:  # short (a signal): the rest as the threads' writes do it
                    if written <= 0:
                        raise OSError(errno.EIO, "pwritev wrote nothing")
                    _pwritev_all(self._ops, fd, [b"".join(buffers)[written:]], position + written)
            except OSError as exc:
                self._cut_back(position)
                raise _storage_error("write", self._path, exc) from exc
            end = time.monotonic()
            loop_writes = _LOOP_WRITES
            if end - start > loop_writes.slow_s or loop_writes.pause_s != LOOP_WRITE_PAUSE_SECONDS:
                loop_writes.loop_write_took(end - start, end)
        finally:
            with lock:
                self._busy -= 1
                if self._busy == 0 and self._idle is not None:
                    self._idle.notify_all()
        return position + total

    def append_nowait(self, data: bytes | bytearray) -> int | WouldBlock:
        """:meth:`write_nowait` of one buffer at the logical end, then :meth:`advance`; or :data:`WOULD_BLOCK`.

        The lean append's write (``LogSegment.append_lean``): the same rules
        as :meth:`write_nowait` -- small, the descriptor open, loop writes not
        paused, a failed write cut back -- with one buffer, whose bytes are then
        published at once. Returns the position ``data`` was written at.

        Raises:
            As :meth:`write`.
        """
        if self._closed or not self._writable:
            self._check_writable()
        total = len(data)
        if total > LOOP_WRITE_MAX_BYTES or not self._loop_writes:
            return WOULD_BLOCK
        loop_writes = _LOOP_WRITES
        start = time.monotonic()
        if start < loop_writes.paused_until:
            return WOULD_BLOCK
        lock = self._busy_lock  # as in write_nowait: close() waits, the open-file budget cannot close the fd
        with lock:
            if self._closed:
                raise ClosedError(f"{self._name}: file is closed")
            fd = self._fd
            if fd is None:
                return WOULD_BLOCK
            self._busy += 1
        self.handle_used = True
        position = self._size
        try:
            self._dirty = True
            try:
                written = self._pwritev(fd, (data,), position)
                if written != total:
                    if written <= 0:
                        raise OSError(errno.EIO, "pwritev wrote nothing")
                    _pwritev_all(self._ops, fd, [bytes(data[written:])], position + written)
            except OSError as exc:
                self._cut_back(position)
                raise _storage_error("write", self._path, exc) from exc
            end = time.monotonic()
            if end - start > loop_writes.slow_s or loop_writes.pause_s != LOOP_WRITE_PAUSE_SECONDS:
                loop_writes.loop_write_took(end - start, end)
        finally:
            with lock:
                self._busy -= 1
                if self._busy == 0 and self._idle is not None:
                    self._idle.notify_all()
        end_position = position + total
        self._size = end_position
        self._file_length = max(self._file_length, end_position)
        return position

    def advance(self, end: int) -> None:
        """Publish a completed :meth:`write`: the logical size becomes ``end``; no I/O (on the event loop)."""
        self._size = end
        self._file_length = max(self._file_length, end)

    def _write(
        self,
        buffers: Sequence[Buffer | LateBuffer],
        position: int,
        sync: bool,
        before: Callable[[], object] | None = None,
        then: Callable[[], object] | None = None,
    ) -> None:
        data = _materialized(buffers)
        if before is not None:
            before()
        step = "write"
        try:
            fd = self._descriptor()
            self._dirty = True
            start = time.monotonic()
            written = _pwritev_all(self._ops, fd, data, position)
            if sync:
                step = "fdatasync"
                self._ops.fdatasync(fd)
            elif written <= LOOP_WRITE_MAX_BYTES:
                # A write the loop could have made: while such writes are slow here, the loop makes none.
                end = time.monotonic()
                _LOOP_WRITES.thread_write_took(end - start, end)
        except OSError as exc:
            # A failed fdatasync also lands here: after it the kernel may have dropped the dirty pages
            # ("fsyncgate"), so the write is treated as not done rather than as maybe-durable.
            self._cut_back(position)
            raise _storage_error(step, self._path, exc) from exc
        if then is not None:
            # Best effort, and the bytes are written: nothing raised here may turn this write into
            # a failure (its bytes would stay in the file, unaccounted for).
            with contextlib.suppress(BaseException):
                then()

    def _cut_back(self, position: int) -> None:
        # Cut off whatever part of a failed write reached the file, so the file ends where it did.
        # Cut back to `position` itself: with preallocation the file is longer than the data, and
        # cutting to that length would leave the failed batch on disk right after the logical
        # end, where a retry's shorter or equal write does not reach and recovery would find it.
        with contextlib.suppress(OSError, StorageError):
            fd = self._descriptor()
            self._ops.ftruncate(fd, position)
            if self._file_length > position:
                self._ops.fallocate(fd, position, self._file_length - position)  # zeros again

    def truncate(self, size: int) -> None:
        """Cut the file to ``size`` bytes (at most the current size); blocking.

        Raises:
            ValueError: ``size`` is negative or above the current size.
            StorageError: the OS refused.
        """
        self._check_writable()
        if not 0 <= size <= self._size:
            raise ValueError(f"{self._name}: cannot truncate to {size}, the file has {self._size} bytes")
        self._guarded(self._truncate, size)
        self._size = size
        self._file_length = size

    def _truncate(self, size: int) -> None:
        try:
            fd = self._descriptor()
            self._dirty = True
            self._ops.ftruncate(fd, size)
        except OSError as exc:
            raise _storage_error(f"truncate to {size}", self._path, exc) from exc

    def trim(self) -> None:
        """Drop a preallocated tail: cut the file to its logical size (no-op when already so); blocking."""
        self._check_writable()
        if self._file_length != self._size:
            self.truncate(self._size)

    def fsync(self) -> None:
        """``fdatasync`` the file: everything written so far survives power loss; blocking.

        Raises:
            StorageError: the sync failed.
            ClosedError: the file is closed.
        """
        self._guarded(self._fsync)

    def _fsync(self) -> None:
        if self._fd is None and not self._dirty:
            return  # never opened, or nothing written since the last sync: nothing to sync
        fd = self._descriptor()  # a descriptor given back to the budget: the sync of a new one syncs the file
        # Cleared before the sync: a write that lands meanwhile sets it again for the next sync.
        self._dirty = False
        try:
            self._ops.fdatasync(fd)
        except OSError as exc:
            self._dirty = True
            raise _storage_error("fdatasync", self._path, exc) from exc

    def rename(self, new_path: Path | str) -> None:
        """Atomically rename the file (the descriptor stays valid) and fsync the directory; blocking.

        Raises:
            StorageError: the rename failed; the path is unchanged then.
            ClosedError: the file is closed.
        """
        self._guarded(self._rename, Path(new_path))

    def _rename(self, new_path: Path) -> None:
        try:
            with self._open_lock:  # a deferred open sees the old name with the old file, or the new one
                self._ops.replace(self._name, str(new_path))
                self._set_path(new_path)
            fsync_dir_sync(self._ops, new_path.parent)
        except OSError as exc:
            raise _storage_error(f"rename to {new_path.name}", self._path, exc) from exc

    def sync_directory(self) -> None:
        """fsync the file's directory: creations, renames and removals in it survive power loss; blocking.

        Raises:
            StorageError: the OS refused.
        """
        try:
            fsync_dir_sync(self._ops, self._path.parent)
        except OSError as exc:
            raise _storage_error("directory fsync", self._path.parent, exc) from exc

    def delete(self) -> bool:
        """Close without trimming and remove the file; ``False`` if it was gone already. Blocking.

        Raises:
            StorageError: the close failed, or the file exists and cannot be removed.
        """
        self.close(trim=False)
        try:
            self._ops.unlink(self._name)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise _storage_error("remove", self._path, exc) from exc
        return True

    def update_parent_dir(self, directory: Path) -> None:
        """Follow the file to the same name in ``directory`` (the directory was moved); no I/O."""
        self._set_path(Path(directory) / self._path.name)

    def mtime_ms(self) -> int:
        """Last modification time in milliseconds since the epoch; blocking.

        Raises:
            StorageError: stat failed.
        """
        try:
            return self._ops.mtime_ns(self._name) // 1_000_000
        except OSError as exc:
            raise _storage_error("stat", self._path, exc) from exc

    # --- reads -------------------------------------------------------------------------------

    def read_nowait(self, fn: Callable[[PRead], _T]) -> _T | WouldBlock:
        """Run the read-only function ``fn(pread)`` with a page-cache-only ``pread``; no wait, no hop.

        Returns :data:`WOULD_BLOCK` as soon as a read would wait for the disk
        (``preadv`` with ``RWF_NOWAIT`` found the bytes not cached; the
        descriptor is not opened yet; the file system has no ``RWF_NOWAIT``):
        the caller then runs the same ``fn`` with :meth:`read`, from the start,
        in its one thread hop. ``fn`` must therefore have no side effects
        before its last read and must not swallow exceptions.

        Raises:
            StorageError: a read failed.
            ClosedError: the file is closed.
        """
        if not self._page_cache_reads:
            self._check_open()
            return WOULD_BLOCK
        try:
            # Guarded like a thread's read: a close() in a worker waits for it to end.
            return self._guarded(fn, self._pread_nowait)
        except _NotCached:
            return WOULD_BLOCK

    def read(self, fn: Callable[[PRead], _T], *, transient: bool = False) -> _T:
        """Run ``fn(pread)`` with blocking reads (however many ``fn`` makes); from a thread.

        With ``transient``, a file whose descriptor is still deferred is read
        through a descriptor opened for this call only and closed after it: a
        check of a sealed segment's indexes (retention asks every segment for
        its largest timestamp) must not pin one descriptor per segment.

        Raises:
            StorageError: a read failed.
            ClosedError: the file is closed.
        """
        if transient and self._fd is None:
            return self._guarded(self._read_transient, fn)
        return self._guarded(fn, self._pread_blocking)

    def read_cached(self, position: int, size: int) -> bytes | bytearray | None:
        """The ``size`` bytes at ``position`` if the page cache holds them all, else ``None``; no hop, no wait.

        For a reader that has a slower path of its own to take (one executor
        hop) when the bytes are not cached: the same read as :meth:`read_nowait`
        makes, without a function to run.

        Raises:
            StorageError: the read failed.
            ClosedError: the file is closed.
        """
        if not self._page_cache_reads:
            return None
        lock = self._busy_lock  # _guarded, inlined: this is a point read's one file access
        with lock:
            if self._closed:
                raise ClosedError(f"{self._name}: file is closed")
            self._busy += 1
        self.handle_used = True
        try:
            fd = self._fd
            if _pread_spans is not None and fd is not None and type(self._ops) is FileOps:
                # With the default system calls, one C call reads straight into the bytes returned (no
                # Python frame of its own, no zeroed buffer); what it declines _pread_nowait decides.
                whole: list[bytes | bytearray] | None = _pread_spans(fd, ((position, size),), self._size)
                if whole is not None:
                    return whole[0]
            return self._pread_nowait(position, size)
        except _NotCached:
            return None
        finally:
            with lock:
                self._busy -= 1
                if self._busy == 0 and self._idle is not None:
                    self._idle.notify_all()

    def read_cached_spans(self, spans: Sequence[tuple[int, int]]) -> list[bytes | bytearray] | None:
        """:meth:`read_cached` of each ``(position, size)`` of ``spans``, all or ``None``; one guarded access.

        For a reader that wants a few scattered pieces of one file (a record's
        key and value in a large batch): the close guard is taken once.

        Raises:
            StorageError: a read failed.
            ClosedError: the file is closed.
        """
        if not self._page_cache_reads:
            return None
        lock = self._busy_lock
        with lock:
            if self._closed:
                raise ClosedError(f"{self._name}: file is closed")
            self._busy += 1
        self.handle_used = True
        try:
            # _pread_nowait's work, inlined: these are a record-table point read's file accesses, and
            # a Python frame per piece is a noticeable part of it.
            fd = self._fd
            if fd is None:
                return None  # deferred: the thread path opens the descriptor (opening may block)
            if _pread_spans is not None and type(spans) is tuple and type(self._ops) is FileOps:
                # With the default system calls, one C call reads every piece straight into the bytes
                # returned; anything short of all of them whole (not cached, a failed read) is read
                # again by the loop below, which decides and says what failed. A FileOps of a test's
                # own (a fault injected) always takes the loop.
                whole: list[bytes | bytearray] | None = _pread_spans(fd, spans, self._size)
                if whole is not None:
                    return whole
            preadv = self._ops.preadv_nowait
            file_size = self._size
            pieces: list[bytes | bytearray] = []
            for position, wanted in spans:
                size = wanted
                if position < 0 or size < 0:
                    raise ValueError(f"{self._name}: negative read position {position} or size {size}")
                available = file_size - position
                if size > available:
                    size = available if available > 0 else 0
                if size == 0:
                    pieces.append(b"")
                    continue
                buf = bytearray(size)
                try:
                    got = preadv(fd, buf, position)
                except OSError as exc:
                    self._nowait_failed(exc, position, size)
                if got != size:
                    return None  # partly cached: the rest would block
                pieces.append(buf)
            return pieces
        except _NotCached:
            return None
        finally:
            with lock:
                self._busy -= 1
                if self._busy == 0 and self._idle is not None:
                    self._idle.notify_all()

    def pread(self, position: int, size: int) -> bytes:
        """Up to ``size`` bytes at ``position``, never past the logical size; blocking.

        One guarded ``pread`` (fewer bytes only at the logical end), for a
        synchronous reader walking a file (the offline tools, a segment's
        first header).

        Raises:
            StorageError: the read failed.
            ClosedError: the file is closed.
        """
        return self._guarded(self._pread_blocking, position, size)

    def _read_transient(self, fn: Callable[[PRead], _T]) -> _T:
        with self._open_lock:
            if self._fd is not None:  # opened meanwhile: use it
                fd, own = self._fd, False
            else:
                try:
                    fd, own = self._ops.open(self._name, _open_flags(False), _FILE_MODE), True
                except OSError as exc:
                    raise _storage_error("open", self._path, exc) from exc
        try:
            return fn(partial(self._pread_fd, fd))
        finally:
            if own:
                with contextlib.suppress(OSError):
                    self._ops.close(fd)

    def read_unvalidated(self, fn: Callable[[PRead, int], _T]) -> _T:
        """Run ``fn(pread, file_length)`` over the file as it is now, past the logical size; blocking.

        For a read-only file that another process appends to (a follower): the
        ``pread`` reads up to the file's current length (``fstat``), which may
        hold batches this object has not validated yet, or a torn write, or
        preallocated zeros. ``fn`` decides what is valid (the caller then moves
        the logical size with :meth:`follow_size`). Blocking.

        Raises:
            StorageError: the stat or a read failed.
            ClosedError: the file is closed.
        """

        def work() -> _T:
            fd = self._descriptor()
            try:
                length = self._ops.fstat_size(fd)
            except OSError as exc:
                raise _storage_error("stat", self._path, exc) from exc
            return fn(partial(self._pread_fd, fd, limit=length), length)

        return self._guarded(work)

    def follow_size(self, size: int) -> None:
        """Set the logical size of a read-only file to what its follower validated (either way).

        Raises:
            ValueError: the file is writable (its size follows its own appends) or ``size`` is negative.
        """
        if self._writable or size < 0:
            raise ValueError(f"{self._name}: follow_size({size}) is only for a read-only file's follower")
        self._size = size
        self._file_length = max(self._file_length, size)

    def _clamp(self, position: int, size: int, limit: int | None = None) -> int:
        if position < 0 or size < 0:
            raise ValueError(f"{self._name}: negative read position {position} or size {size}")
        return max(0, min(size, (self._size if limit is None else limit) - position))

    def _pread_nowait(self, position: int, size: int) -> bytes | bytearray:
        # _clamp, inlined: this is a point read's one file access, on its hottest path.
        if position < 0 or size < 0:
            raise ValueError(f"{self._name}: negative read position {position} or size {size}")
        available = self._size - position
        if size > available:
            size = available if available > 0 else 0
        if size == 0:
            return b""
        fd = self._fd
        if fd is None:
            raise _NotCached  # deferred: the thread path opens the descriptor (opening may block)
        buf = bytearray(size)
        try:
            got = self._ops.preadv_nowait(fd, buf, position)
        except OSError as exc:
            self._nowait_failed(exc, position, size)
        if got != size:
            raise _NotCached  # partly cached: the rest would block
        return buf

    def _nowait_failed(self, exc: OSError, position: int, size: int) -> NoReturn:
        # A page-cache read refused: _NotCached when the bytes are not cached (or the file system has
        # no RWF_NOWAIT: from now on always the thread), else the read failed.
        if isinstance(exc, BlockingIOError):
            raise _NotCached from None
        if exc.errno in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            self._page_cache_reads = False
            raise _NotCached from None
        raise _storage_error(f"read of {size} bytes at {position}", self._path, exc) from exc

    def _pread_blocking(self, position: int, size: int) -> bytes:
        return self._pread_fd(None, position, size)

    def _pread_fd(self, fd: int | None, position: int, size: int, limit: int | None = None) -> bytes:
        # A blocking pread of this file through `fd` (None: the file's own descriptor, opened if deferred),
        # up to the logical size (or up to `limit`, a follower's look past it).
        size = self._clamp(position, size, limit)
        if size == 0:
            return b""
        if fd is None:
            fd = self._descriptor()
        try:
            data = self._ops.pread(fd, size, position)
            while 0 < len(data) < size:  # short reads happen (signals); stop at a real end of file
                more = self._ops.pread(fd, size - len(data), position + len(data))
                if not more:
                    break
                data += more
        except OSError as exc:
            raise _storage_error(f"read of {size} bytes at {position}", self._path, exc) from exc
        return data


def _open_flags(writable: bool) -> int:
    return (os.O_RDWR if writable else os.O_RDONLY) | getattr(os, "O_CLOEXEC", 0)


# --- directory and small-file operations (one hop each) ------------------------------------------


def fsync_dir_sync(ops: FileOps, directory: Path | str) -> None:
    """The blocking body of :func:`fsync_dir`, for a caller already in a thread.

    Raises:
        OSError: as the system calls raise it (the caller names what failed).
    """
    fd = ops.open(str(directory), os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        ops.fsync(fd)
    finally:
        ops.close(fd)


async def _path_op(what: str, path: Path, ops: FileOps | None, fn: Callable[[FileOps, Path], _T]) -> _T:
    # One hop running fn(ops, path), with OSError translated into StorageError naming path and `what`.
    chosen = ops or default_ops()

    def work() -> _T:
        try:
            return fn(chosen, path)
        except OSError as exc:
            raise _storage_error(what, path, exc) from exc

    return await in_thread(work)


async def fsync_dir(directory: Path | str, *, ops: FileOps | None = None) -> None:
    """fsync a directory so that creations, renames and removals in it survive power loss.

    Raises:
        StorageError: the OS refused.
    """
    await _path_op("directory fsync", Path(directory), ops, fsync_dir_sync)


async def replace(src: Path | str, dst: Path | str, *, ops: FileOps | None = None) -> None:
    """Atomically rename ``src`` to ``dst`` (overwriting it) and fsync ``dst``'s directory.

    Raises:
        StorageError: the OS refused; ``src`` is unchanged then.
    """
    target = Path(dst)

    def rename(o: FileOps, source: Path) -> None:
        o.replace(str(source), str(target))
        fsync_dir_sync(o, target.parent)

    await _path_op(f"rename to {target}", Path(src), ops, rename)


def atomic_write_sync(path: Path, data: bytes, ops: FileOps, *, durable: bool = True) -> None:
    """The blocking body of :func:`atomic_write`."""
    tmp = path.with_name(path.name + TMP_SUFFIX)
    try:
        fd = ops.open(str(tmp), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0))
        try:
            _pwritev_all(ops, fd, [data], 0)
            if durable:
                ops.fdatasync(fd)
        finally:
            ops.close(fd)
        ops.replace(str(tmp), str(path))
        if durable:
            fsync_dir_sync(ops, path.parent)
    except OSError as exc:
        with contextlib.suppress(OSError):
            ops.unlink(str(tmp))
        raise _storage_error("atomic write", path, exc) from exc


async def atomic_write(path: Path | str, data: bytes, *, ops: FileOps | None = None, durable: bool = True) -> None:
    """Replace the file at ``path`` with ``data`` atomically and durably (checkpoints).

    Writes ``<path>.tmp``, fdatasyncs it, renames it over ``path`` and fsyncs the
    directory, in one hop: after a crash the file holds either the old or the
    new content, never a mix. ``durable=False`` leaves out both syncs: a crash
    of the process still leaves the old or the new content, a power loss may
    leave neither (for files checked on read, such as producer snapshots).

    Raises:
        StorageError: the OS refused; the old file is untouched then.
    """
    await in_thread(atomic_write_sync, Path(path), data, ops or default_ops(), durable=durable)


def read_small_file_sync(path: Path | str, ops: FileOps | None = None, *, max_bytes: int | None = None) -> bytes | None:
    """The blocking body of :func:`read_small_file`; with ``max_bytes``, at most that many bytes.

    Raises:
        StorageError: the file exists and cannot be read.
    """
    ops = ops or default_ops()
    path = Path(path)
    try:
        fd = ops.open(str(path), os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _storage_error("open", path, exc) from exc
    try:
        size = ops.fstat_size(fd)
        if max_bytes is not None:
            size = min(size, max_bytes)
        return ops.pread(fd, size, 0)
    except OSError as exc:
        raise _storage_error("read", path, exc) from exc
    finally:
        ops.close(fd)


async def read_small_file(path: Path | str, *, ops: FileOps | None = None) -> bytes | None:
    """The whole content of a small file (a checkpoint), or ``None`` if it does not exist.

    Raises:
        StorageError: the OS refused for another reason.
    """
    return await in_thread(read_small_file_sync, path, ops)


async def remove(path: Path | str, *, ops: FileOps | None = None) -> bool:
    """Delete a file; ``False`` if it did not exist.

    Raises:
        StorageError: the OS refused for another reason.
    """
    ops = ops or default_ops()
    path = Path(path)

    def work() -> bool:
        try:
            ops.unlink(str(path))
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise _storage_error("remove", path, exc) from exc
        return True

    return await in_thread(work)


async def list_dir(path: Path | str, *, ops: FileOps | None = None) -> list[str]:
    """Names in a directory (unsorted).

    Raises:
        StorageError: the OS refused (missing directory, permissions).
    """
    return await _path_op("list", Path(path), ops, lambda o, p: o.listdir(str(p)))


async def make_dirs(path: Path | str, *, ops: FileOps | None = None) -> None:
    """Create a directory and its parents (no error if it exists), then fsync the parent.

    Raises:
        StorageError: the OS refused.
    """

    def create(o: FileOps, p: Path) -> None:
        o.makedirs(str(p))
        fsync_dir_sync(o, p.parent)

    await _path_op("create directory", Path(path), ops, create)
