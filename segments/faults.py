"""Fault-injecting ``FileOps`` for tests of every layer: failing syscalls, simulated power loss, gates.

Owns :class:`FailingOps` (a syscall fails with a chosen errno, optionally after
writing part of the data), :class:`PowerLossOps` (remembers what was made
durable by ``fdatasync`` and rolls files back to it on :meth:`PowerLossOps.power_fail`)
and :class:`GatedOps` (a chosen syscall stops at a :class:`Gate` until the test
lets it go: race tests force their interleaving with it, and fail when it is
never reached, instead of hoping a ``sleep`` lines the threads up).
Install one per file (``SegmentFile.open(..., ops=...)``, ``LogSegment.open(..., ops=...)``)
or process-wide with ``seglog.segments.fileio.use_ops``.

Every file of every layer is opened, sized and removed through ``FileOps`` (the
mapped offset and time indexes included), so ``FailingOps`` and ``GatedOps``
reach them too; ``PowerLossOps`` leaves the mapped indexes alone: what they
hold is written through the mapping and ``msync``, which it cannot see, and
recovery rebuilds them from the ``.log`` anyway.

Must not import: ``engine`` or ``tools``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import re
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Final, TypeVar

from seglog.segments.fileio import Buffer, FileOps

__all__ = ["FailingOps", "Gate", "GatedOps", "PowerLossOps", "Signal"]

_T = TypeVar("_T")
# A mapped index's name (any pending suffix after it): PowerLossOps does not track those files.
_MAPPED_INDEX: Final = re.compile(r"^\d{20}\.(index|timeindex)(\.|$)")


@dataclass
class _Rule:
    op: str
    err: int
    after: int  # let this many matching calls through first
    times: int | None  # fail this many times, None = forever
    path_contains: str | None
    partial_bytes: int  # pwritev only: write this many bytes before failing
    seen: int = 0


class FailingOps(FileOps):
    """``FileOps`` whose calls fail on demand, for "disk full" and "I/O error" tests.

    ``ops.fail("pwritev", errno.ENOSPC, partial_bytes=100)`` makes the next write
    put 100 bytes into the file and then raise ``OSError(ENOSPC)``, as a real
    disk that fills up in the middle of a write does. ``calls`` counts every
    call by operation name.
    """

    def __init__(self) -> None:
        self._rules: list[_Rule] = []
        self._paths: dict[int, str] = {}
        self._lock = threading.Lock()
        self.calls: Counter[str] = Counter()

    def fail(
        self,
        op: str,
        err: int = errno.ENOSPC,
        *,
        after: int = 0,
        times: int | None = 1,
        path_contains: str | None = None,
        partial_bytes: int = 0,
    ) -> None:
        """Make calls of ``op`` (a method name, e.g. ``"pwritev"``, ``"fdatasync"``) fail with ``err``."""
        if not callable(getattr(FileOps, op, None)):
            raise ValueError(f"FileOps has no operation {op!r}")
        with self._lock:
            self._rules.append(_Rule(op, err, after, times, path_contains, partial_bytes))

    def clear(self) -> None:
        """Remove every failure rule."""
        with self._lock:
            self._rules.clear()

    def _rule_for(self, op: str, path: str | None) -> _Rule | None:
        with self._lock:
            self.calls[op] += 1
            for rule in self._rules:
                if rule.op != op or (rule.path_contains and (path is None or rule.path_contains not in path)):
                    continue
                rule.seen += 1
                if rule.seen <= rule.after:
                    return None
                if rule.times is not None:
                    if rule.times == 0:
                        continue
                    rule.times -= 1
                return rule
        return None

    def _maybe_fail(self, op: str, path: str | None) -> None:
        rule = self._rule_for(op, path)
        if rule is not None:
            raise OSError(rule.err, f"{os.strerror(rule.err)} (injected into {op})")

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        """Fails on rule ``open``; remembers the descriptor's path."""
        self._maybe_fail("open", path)
        fd = super().open(path, flags, mode)
        with self._lock:
            self._paths[fd] = path
        return fd

    def close(self, fd: int) -> None:
        """Fails on rule ``close`` (after closing: the descriptor is gone either way)."""
        with self._lock:
            path = self._paths.pop(fd, None)
        super().close(fd)
        self._maybe_fail("close", path)

    def pwritev(self, fd: int, buffers: Sequence[Buffer], position: int) -> int:
        """Fails on rule ``pwritev``, after writing ``partial_bytes`` of the data if asked."""
        rule = self._rule_for("pwritev", self._paths.get(fd))
        if rule is None:
            return super().pwritev(fd, buffers, position)
        if rule.partial_bytes:
            data = b"".join(bytes(b) for b in buffers)[: rule.partial_bytes]
            os.pwrite(fd, data, position)
        raise OSError(rule.err, f"{os.strerror(rule.err)} (injected into pwritev)")

    def pread(self, fd: int, size: int, position: int) -> bytes:
        """Fails on rule ``pread``."""
        self._maybe_fail("pread", self._paths.get(fd))
        return super().pread(fd, size, position)

    def preadv_nowait(self, fd: int, buf: bytearray, position: int) -> int:
        """Fails on rule ``preadv_nowait`` (use ``errno.EAGAIN`` to force the thread path)."""
        rule = self._rule_for("preadv_nowait", self._paths.get(fd))
        if rule is not None:
            if rule.err == errno.EAGAIN:
                raise BlockingIOError(errno.EAGAIN, "injected: not in the page cache")
            raise OSError(rule.err, f"{os.strerror(rule.err)} (injected into preadv_nowait)")
        return super().preadv_nowait(fd, buf, position)

    def fdatasync(self, fd: int) -> None:
        """Fails on rule ``fdatasync``."""
        self._maybe_fail("fdatasync", self._paths.get(fd))
        super().fdatasync(fd)

    def fsync(self, fd: int) -> None:
        """Fails on rule ``fsync``."""
        self._maybe_fail("fsync", self._paths.get(fd))
        super().fsync(fd)

    def ftruncate(self, fd: int, size: int) -> None:
        """Fails on rule ``ftruncate``."""
        self._maybe_fail("ftruncate", self._paths.get(fd))
        super().ftruncate(fd, size)

    def fallocate(self, fd: int, offset: int, length: int) -> None:
        """Fails on rule ``fallocate``."""
        self._maybe_fail("fallocate", self._paths.get(fd))
        super().fallocate(fd, offset, length)

    def replace(self, src: str, dst: str) -> None:
        """Fails on rule ``replace``."""
        self._maybe_fail("replace", src)
        super().replace(src, dst)

    def unlink(self, path: str) -> None:
        """Fails on rule ``unlink``."""
        self._maybe_fail("unlink", path)
        super().unlink(path)

    def write(self, fd: int, data: Buffer) -> int:
        """Fails on rule ``write``."""
        self._maybe_fail("write", self._paths.get(fd))
        return super().write(fd, data)

    def listdir(self, path: str) -> list[str]:
        """Fails on rule ``listdir``."""
        self._maybe_fail("listdir", path)
        return super().listdir(path)

    def scandir(self, path: str) -> list[tuple[str, bool]]:
        """Fails on rule ``scandir``."""
        self._maybe_fail("scandir", path)
        return super().scandir(path)

    def mkdir(self, path: str, mode: int = 0o755) -> None:
        """Fails on rule ``mkdir``."""
        self._maybe_fail("mkdir", path)
        super().mkdir(path, mode)

    def rmtree(self, path: str) -> None:
        """Fails on rule ``rmtree``."""
        self._maybe_fail("rmtree", path)
        super().rmtree(path)


class PowerLossOps(FileOps):
    """``FileOps`` that can roll every file it wrote back to its last ``fdatasync``: a power failure.

    At the first ``open`` of a path it remembers the file's content as durable
    (an empty image for a file it creates); each ``fdatasync`` snapshots the file
    as the new durable image. :meth:`power_fail` writes the durable images back,
    optionally keeping ``torn_bytes`` of each file's unsynced tail (a torn
    write), and deletes files created since the last fsync of their directory.
    Simplifications, fine for small test files: images are whole-file copies;
    renames, truncations and unlinks count as durable at once.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._paths: dict[int, str] = {}
        self._durable: dict[str, bytes] = {}
        self._created: set[str] = set()  # created, and the directory not fsynced since

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        """Opens; the first time a path is seen its current content counts as durable (mapped indexes: never)."""
        path = os.path.abspath(path)
        existed = os.path.exists(path)
        fd = super().open(path, flags, mode)
        if _MAPPED_INDEX.search(os.path.basename(path)):
            return fd
        with self._lock:
            self._paths[fd] = path
            if os.path.isfile(path) and path not in self._durable:
                self._durable[path] = _read_all(path) if existed else b""
                if not existed:
                    self._created.add(path)
        return fd

    def close(self, fd: int) -> None:
        """Closes and forgets the descriptor."""
        with self._lock:
            self._paths.pop(fd, None)
        super().close(fd)

    def fdatasync(self, fd: int) -> None:
        """Syncs and records the file's content as its durable image."""
        super().fdatasync(fd)
        with self._lock:
            path = self._paths.get(fd)
            if path is not None and os.path.isfile(path):
                self._durable[path] = _read_all(path)

    def fsync(self, fd: int) -> None:
        """Syncs; for a directory, its newly created files become durable entries."""
        super().fsync(fd)
        with self._lock:
            path = self._paths.get(fd)
            if path is not None and os.path.isdir(path):
                self._created = {p for p in self._created if os.path.dirname(p) != path}
            elif path is not None:
                self._durable[path] = _read_all(path)

    def replace(self, src: str, dst: str) -> None:
        """Renames, carrying the durable image along."""
        super().replace(src, dst)
        src, dst = os.path.abspath(src), os.path.abspath(dst)
        with self._lock:
            if src in self._durable:
                self._durable[dst] = self._durable.pop(src)
            if src in self._created:
                self._created.discard(src)
                self._created.add(dst)
            for fd, path in self._paths.items():
                if path == src:
                    self._paths[fd] = dst

    def unlink(self, path: str) -> None:
        """Deletes and forgets the file."""
        super().unlink(path)
        path = os.path.abspath(path)
        with self._lock:
            self._durable.pop(path, None)
            self._created.discard(path)

    def power_fail(self, *, torn_bytes: int = 0) -> list[str]:
        """Roll every tracked file back to its durable image; returns the paths that changed.

        With ``torn_bytes > 0`` each file keeps up to that many bytes of the data
        written after its last sync when that data extends the durable image (a
        write torn by the power cut). Open descriptors keep working afterwards,
        but the caller should close everything and reopen, as after a reboot.
        """
        changed: list[str] = []
        with self._lock:
            for path in sorted(self._created):
                if os.path.exists(path):
                    os.unlink(path)
                    changed.append(path)
                self._durable.pop(path, None)
            self._created.clear()
            for path, image in self._durable.items():
                if not os.path.isfile(path):
                    continue
                current = _read_all(path)
                keep = image
                if torn_bytes and current.startswith(image):
                    keep = current[: len(image) + torn_bytes]
                if keep != current:
                    with open(path, "wb") as f:
                        f.write(keep)
                    changed.append(path)
        return changed


class Signal:
    """A one-shot flag that threads wait for (:meth:`wait`) and an event loop awaits (:meth:`wait_async`).

    ``wait_async`` needs no executor thread: a test whose executor threads are all
    held at gates can still wait for the next one to arrive.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._wakers: list[Callable[[], None]] = []

    def set(self) -> None:
        """Raise the flag and wake every waiter (from any thread)."""
        with self._lock:
            self._event.set()
            wakers, self._wakers = self._wakers, []
        for wake in wakers:
            wake()

    def is_set(self) -> bool:
        """Whether :meth:`set` was called."""
        return self._event.is_set()

    def wait(self, within_s: float) -> bool:
        """Block until the flag is raised; ``False`` if ``within_s`` seconds passed first."""
        return self._event.wait(within_s)

    async def wait_async(self, within_s: float) -> bool:
        """Await the flag on the running loop; ``False`` if ``within_s`` seconds passed first."""
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()

        def resolve() -> None:
            if not woken.done():
                woken.set_result(None)

        def wake() -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(resolve)

        with self._lock:
            if self._event.is_set():
                return True
            self._wakers.append(wake)
        try:
            await asyncio.wait_for(woken, within_s)
        except TimeoutError:
            return False
        return True


GATE_TIMEOUT_S = 60.0
"""How long a gate waits for the test (for a call to arrive, or to be let go) before giving up."""


class Gate:
    """One stopping point of :class:`GatedOps`: a matching call stops here until :meth:`release`.

    ``entered`` is raised when the call arrives (from the thread making it, after
    ``on_enter`` ran), ``left`` when the system call returned or raised. The test
    awaits :meth:`reached` to know its interleaving happened; it raises
    ``TimeoutError`` when no call ever came, so a test that missed its race
    fails instead of passing without testing anything. A held call that is never
    released goes on by itself after :data:`GATE_TIMEOUT_S` (a failed test must
    not hang the run); :meth:`release` before any call arrives lets it through.
    """

    def __init__(
        self,
        op: str,
        *,
        path_contains: str | None,
        after: int,
        hold: bool,
        on_enter: Callable[[], object] | None,
    ) -> None:
        self.op = op
        self.path_contains = path_contains
        self.after = after
        self.hold = hold
        self.on_enter = on_enter
        self.entered = Signal()
        self.left = Signal()
        self.thread: threading.Thread | None = None  # the thread of the call that stopped here
        self._go = threading.Event()
        self._seen = 0
        self._taken = False

    def _matches(self, op: str, paths: tuple[str | None, ...]) -> bool:
        # Called under GatedOps' lock: counts matching calls, takes the first one past `after`.
        if self._taken or op != self.op:
            return False
        if self.path_contains is not None and not any(p is not None and self.path_contains in p for p in paths):
            return False
        self._seen += 1
        if self._seen <= self.after:
            return False
        self._taken = True
        return True

    def _arrive(self) -> None:
        self.thread = threading.current_thread()
        if self.on_enter is not None:
            self.on_enter()
        self.entered.set()
        if self.hold:
            self._go.wait(GATE_TIMEOUT_S)

    def release(self) -> None:
        """Let the held call (or the one still to come) go on."""
        self._go.set()

    def _describe(self) -> str:
        where = f" on a path containing {self.path_contains!r}" if self.path_contains else ""
        return f"{self.op}{where} (after {self.after} others)"

    async def reached(self, within_s: float = GATE_TIMEOUT_S) -> None:
        """Wait until a call has arrived at the gate.

        Raises:
            TimeoutError: none came within ``within_s`` seconds: the interleaving was not reached.
        """
        if not await self.entered.wait_async(within_s):
            raise TimeoutError(f"no call of {self._describe()} reached its gate within {within_s} s")

    def wait_reached(self, within_s: float = GATE_TIMEOUT_S) -> None:
        """:meth:`reached` for a thread (blocks)."""
        if not self.entered.wait(within_s):
            raise TimeoutError(f"no call of {self._describe()} reached its gate within {within_s} s")

    async def passed(self, within_s: float = GATE_TIMEOUT_S) -> None:
        """Wait until the call that stopped here has returned (or raised).

        Raises:
            TimeoutError: it did not within ``within_s`` seconds.
        """
        if not await self.left.wait_async(within_s):
            raise TimeoutError(f"the call of {self._describe()} at its gate did not return within {within_s} s")


class GatedOps(FileOps):
    """``FileOps`` around another one (default: the plain one) whose chosen calls stop at a :class:`Gate`.

    ``gate = ops.gate("fdatasync", path_contains=".log")`` stops the next
    ``fdatasync`` of a ``.log`` file before the system call, in whatever
    thread makes it, until ``gate.release()``; ``await gate.reached()`` returns
    once a call is there (and fails the test if none comes). ``on_enter`` runs
    in the calling thread as the call arrives (with ``hold=False`` the call then
    goes straight on): for a call made on the event loop, which cannot be held
    while the test's coroutine waits on that same loop. Used as a context
    manager, every gate is released on exit, so a failing test never leaves a
    thread stuck. Matching: ``path_contains`` is tested against the path
    (``replace``: source or destination; descriptor calls: the path it was
    opened with).
    """

    def __init__(self, inner: FileOps | None = None) -> None:
        self._inner = inner if inner is not None else FileOps()
        self._lock = threading.Lock()
        self._gates: list[Gate] = []
        self._paths: dict[int, str] = {}

    @property
    def loop_writes(self) -> bool:
        """False: a gated ``pwritev`` waits for its test, which must not stop the event loop."""
        return False

    def gate(
        self,
        op: str,
        *,
        path_contains: str | None = None,
        after: int = 0,
        hold: bool = True,
        on_enter: Callable[[], object] | None = None,
    ) -> Gate:
        """A gate for the first call of ``op`` (a ``FileOps`` method name) after ``after`` matching others."""
        if not callable(getattr(FileOps, op, None)):
            raise ValueError(f"FileOps has no operation {op!r}")
        gate = Gate(op, path_contains=path_contains, after=after, hold=hold, on_enter=on_enter)
        with self._lock:
            self._gates.append(gate)
        return gate

    def release_all(self) -> None:
        """Release every gate (held calls go on; later ones pass)."""
        with self._lock:
            gates = list(self._gates)
        for gate in gates:
            gate.release()

    def __enter__(self) -> GatedOps:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release_all()

    def _through(self, op: str, paths: tuple[str | None, ...], call: Callable[[], _T]) -> _T:
        with self._lock:
            gate = next((g for g in self._gates if g._matches(op, paths)), None)
        if gate is None:
            return call()
        try:
            gate._arrive()
            return call()
        finally:
            gate.left.set()

    def _path(self, fd: int) -> str | None:
        with self._lock:
            return self._paths.get(fd)

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        """Gate ``open``; remembers the descriptor's path."""
        fd = self._through("open", (path,), lambda: self._inner.open(path, flags, mode))
        with self._lock:
            self._paths[fd] = path
        return fd

    def close(self, fd: int) -> None:
        """Gate ``close``."""
        self._through("close", (self._path(fd),), lambda: self._inner.close(fd))
        with self._lock:
            self._paths.pop(fd, None)

    def pwritev(self, fd: int, buffers: Sequence[Buffer], position: int) -> int:
        """Gate ``pwritev``."""
        return self._through("pwritev", (self._path(fd),), lambda: self._inner.pwritev(fd, buffers, position))

    def pread(self, fd: int, size: int, position: int) -> bytes:
        """Gate ``pread``."""
        return self._through("pread", (self._path(fd),), lambda: self._inner.pread(fd, size, position))

    def preadv_nowait(self, fd: int, buf: bytearray, position: int) -> int:
        """Gate ``preadv_nowait`` (made on the event loop: use ``on_enter`` and ``hold=False``)."""
        return self._through("preadv_nowait", (self._path(fd),), lambda: self._inner.preadv_nowait(fd, buf, position))

    def fdatasync(self, fd: int) -> None:
        """Gate ``fdatasync``."""
        self._through("fdatasync", (self._path(fd),), lambda: self._inner.fdatasync(fd))

    def fsync(self, fd: int) -> None:
        """Gate ``fsync`` (directories too)."""
        self._through("fsync", (self._path(fd),), lambda: self._inner.fsync(fd))

    def ftruncate(self, fd: int, size: int) -> None:
        """Gate ``ftruncate``."""
        self._through("ftruncate", (self._path(fd),), lambda: self._inner.ftruncate(fd, size))

    def fstat_size(self, fd: int) -> int:
        """Gate ``fstat_size``."""
        return self._through("fstat_size", (self._path(fd),), lambda: self._inner.fstat_size(fd))

    def fstat_identity(self, fd: int) -> tuple[int, int]:
        """Gate ``fstat_identity``."""
        return self._through("fstat_identity", (self._path(fd),), lambda: self._inner.fstat_identity(fd))

    def stat_size(self, path: str) -> int:
        """Gate ``stat_size``."""
        return self._through("stat_size", (path,), lambda: self._inner.stat_size(path))

    def fallocate(self, fd: int, offset: int, length: int) -> None:
        """Gate ``fallocate``."""
        self._through("fallocate", (self._path(fd),), lambda: self._inner.fallocate(fd, offset, length))

    def replace(self, src: str, dst: str) -> None:
        """Gate ``replace`` (matched on either path)."""
        self._through("replace", (src, dst), lambda: self._inner.replace(src, dst))
        with self._lock:
            for fd, path in self._paths.items():
                if path == src:
                    self._paths[fd] = dst

    def unlink(self, path: str) -> None:
        """Gate ``unlink``."""
        self._through("unlink", (path,), lambda: self._inner.unlink(path))

    def inode(self, path: str) -> int:
        """Gate ``inode``."""
        return self._through("inode", (path,), lambda: self._inner.inode(path))

    def is_dir(self, path: str) -> bool:
        """Gate ``is_dir``."""
        return self._through("is_dir", (path,), lambda: self._inner.is_dir(path))

    def mtime_ns(self, path: str) -> int:
        """Gate ``mtime_ns``."""
        return self._through("mtime_ns", (path,), lambda: self._inner.mtime_ns(path))

    def exists(self, path: str) -> bool:
        """Gate ``exists``."""
        return self._through("exists", (path,), lambda: self._inner.exists(path))

    def write(self, fd: int, data: Buffer) -> int:
        """Gate ``write``."""
        return self._through("write", (self._path(fd),), lambda: self._inner.write(fd, data))

    def seek_hole(self, fd: int, offset: int) -> int:
        """Gate ``seek_hole``."""
        return self._through("seek_hole", (self._path(fd),), lambda: self._inner.seek_hole(fd, offset))

    def fstat_blocks(self, fd: int) -> int | None:
        """Gate ``fstat_blocks``."""
        return self._through("fstat_blocks", (self._path(fd),), lambda: self._inner.fstat_blocks(fd))

    def listdir(self, path: str) -> list[str]:
        """Gate ``listdir``."""
        return self._through("listdir", (path,), lambda: self._inner.listdir(path))

    def makedirs(self, path: str) -> None:
        """Gate ``makedirs``."""
        self._through("makedirs", (path,), lambda: self._inner.makedirs(path))

    def scandir(self, path: str) -> list[tuple[str, bool]]:
        """Gate ``scandir``."""
        return self._through("scandir", (path,), lambda: self._inner.scandir(path))

    def mkdir(self, path: str, mode: int = 0o755) -> None:
        """Gate ``mkdir``."""
        self._through("mkdir", (path,), lambda: self._inner.mkdir(path, mode))

    def lexists(self, path: str) -> bool:
        """Gate ``lexists``."""
        return self._through("lexists", (path,), lambda: self._inner.lexists(path))

    def rmtree(self, path: str) -> None:
        """Gate ``rmtree``."""
        self._through("rmtree", (path,), lambda: self._inner.rmtree(path))

    @property
    def page_cache_reads(self) -> bool:
        """As the wrapped ``FileOps``."""
        return self._inner.page_cache_reads


def _read_all(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()
