"""Fault-injecting ``FileOps`` for tests of every layer: failing syscalls and simulated power loss.

Owns :class:`FailingOps` (a syscall fails with a chosen errno, optionally after
writing part of the data) and :class:`PowerLossOps` (remembers what was made
durable by ``fdatasync`` and rolls files back to it on :meth:`PowerLossOps.power_fail`).
Install one per file (``SegmentFile.open(..., ops=...)``, ``LogSegment.open(..., ops=...)``)
or process-wide with ``seglog.segments.fileio.use_ops``.

Only data written through ``FileOps`` is covered: index files are memory-mapped
and are rebuilt from the ``.log`` by recovery anyway.

Must not import: ``engine`` or ``tools``.
"""

from __future__ import annotations

import errno
import os
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from seglog.segments.fileio import Buffer, FileOps

__all__ = ["FailingOps", "PowerLossOps"]


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

    def listdir(self, path: str) -> list[str]:
        """Fails on rule ``listdir``."""
        self._maybe_fail("listdir", path)
        return super().listdir(path)


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
        """Opens; the first time a path is seen its current content counts as durable."""
        path = os.path.abspath(path)
        existed = os.path.exists(path)
        fd = super().open(path, flags, mode)
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


def _read_all(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()
