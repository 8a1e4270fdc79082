"""The system calls of every seglog file, one method each: the fault-injection seam (``FileOps``).

The lowest layer holds it so that every layer's file calls go through it: the
index files (``seglog.indexes``), the segment files and the engine's
directories and small files (``seglog.segments.fileio``, the file layer, which
re-exports it and adds the thread hops, the logical sizes and the ``OSError``
translation). Tests install a ``FileOps`` of their own per file or process-wide
(:func:`use_ops`; ``seglog.segments.faults`` has failing, power-losing and
gated ones). A mapped index's loads and stores are memory accesses, not calls:
what the seam sees of an index is its open, sizing, allocation and removal.

Must not import: ``segments``, ``engine`` or ``tools``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Iterator, Sequence
from typing import Final

__all__ = ["FILE_MODE", "RWF_NOWAIT", "Buffer", "FileOps", "default_ops", "use_ops"]

Buffer = bytes | bytearray | memoryview

RWF_NOWAIT: Final[int | None] = getattr(os, "RWF_NOWAIT", None)
FILE_MODE: Final = 0o644  # permission bits of a new data file (before the umask): never executable


class FileOps:
    """The synchronous system calls of the file layer, one method each: the fault-injection seam.

    The default implementation calls ``os`` directly. A test subclasses it and
    overrides a method to raise ``OSError(errno.ENOSPC, ...)``, write only part
    of the data, or keep writes in a buffer until ``fdatasync``. Methods are
    called from executor threads (and ``preadv_nowait`` from the event loop, as
    are the ``pwritev`` of small appends without ``fdatasync`` while
    :attr:`loop_writes` says so, and an index's allocation calls in the rare
    case an entry meets a slot nobody reserved), so an implementation must be
    thread-safe.
    """

    def open(self, path: str, flags: int, mode: int = FILE_MODE) -> int:
        """``os.open``."""
        return os.open(path, flags, mode)

    def close(self, fd: int) -> None:
        """``os.close``."""
        os.close(fd)

    def pwritev(self, fd: int, buffers: Sequence[Buffer], position: int) -> int:
        """``os.pwritev``: write ``buffers`` at ``position``; returns bytes written (may be short)."""
        return os.pwritev(fd, buffers, position)

    def pread(self, fd: int, size: int, position: int) -> bytes:
        """``os.pread`` (blocking)."""
        return os.pread(fd, size, position)

    def preadv_nowait(self, fd: int, buf: bytearray, position: int) -> int:
        """``os.preadv(fd, [buf], position, RWF_NOWAIT)``: raises ``BlockingIOError`` if not cached."""
        assert RWF_NOWAIT is not None  # callers check page_cache_reads first
        return os.preadv(fd, [buf], position, RWF_NOWAIT)

    def fdatasync(self, fd: int) -> None:
        """``os.fdatasync``: data and the size, not other metadata."""
        os.fdatasync(fd)

    def fsync(self, fd: int) -> None:
        """``os.fsync`` (directories)."""
        os.fsync(fd)

    def ftruncate(self, fd: int, size: int) -> None:
        """``os.ftruncate``."""
        os.ftruncate(fd, size)

    def fstat_size(self, fd: int) -> int:
        """File length in bytes (``os.fstat(fd).st_size``)."""
        return os.fstat(fd).st_size

    def fstat_identity(self, fd: int) -> tuple[int, int]:
        """``(st_dev, st_ino)`` of the open file: which file it is (a reopen by name compares them)."""
        st = os.fstat(fd)
        return st.st_dev, st.st_ino

    def stat_size(self, path: str) -> int:
        """Length in bytes of the regular file at ``path`` (``os.stat``); ``IsADirectoryError`` if not a file."""
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "not a regular file", path)
        return st.st_size

    def fallocate(self, fd: int, offset: int, length: int) -> None:
        """``os.posix_fallocate``: reserve blocks so later appends cannot fail for space.

        Raises ``OSError`` (``EOPNOTSUPP``) where the platform has none.
        """
        fallocate = getattr(os, "posix_fallocate", None)
        if fallocate is None:  # macOS and other platforms without it
            raise OSError(errno.EOPNOTSUPP, "posix_fallocate is not supported here")
        fallocate(fd, offset, length)

    def replace(self, src: str, dst: str) -> None:
        """``os.replace``: atomic rename, overwriting ``dst``."""
        os.replace(src, dst)

    def unlink(self, path: str) -> None:
        """``os.unlink``."""
        os.unlink(path)

    def inode(self, path: str) -> int:
        """``os.stat(path).st_ino``: which file (or directory) the name stands for now."""
        return os.stat(path).st_ino

    def is_dir(self, path: str) -> bool:
        """``os.path.isdir``."""
        return os.path.isdir(path)

    def mtime_ns(self, path: str) -> int:
        """Modification time in nanoseconds."""
        return os.stat(path).st_mtime_ns

    def exists(self, path: str) -> bool:
        """``os.path.exists``."""
        return os.path.exists(path)

    def listdir(self, path: str) -> list[str]:
        """``os.listdir``."""
        return os.listdir(path)

    def write(self, fd: int, data: Buffer) -> int:
        """``os.write`` (a file opened with ``O_APPEND``: at its end); returns bytes written (may be short)."""
        return os.write(fd, data)

    def seek_hole(self, fd: int, offset: int) -> int:
        """``os.lseek(fd, offset, SEEK_HOLE)``: where the first hole at or after ``offset`` starts.

        Raises ``OSError`` (``EINVAL``) where the platform or file system cannot tell.
        """
        seek_hole = getattr(os, "SEEK_HOLE", None)
        if seek_hole is None:
            raise OSError(errno.EINVAL, "SEEK_HOLE is not supported here")
        return os.lseek(fd, offset, seek_hole)

    def fstat_blocks(self, fd: int) -> int | None:
        """512-byte blocks allocated to the file (``st_blocks``), ``None`` where the platform has no such field."""
        return getattr(os.fstat(fd), "st_blocks", None)

    def makedirs(self, path: str) -> None:
        """``os.makedirs(path, exist_ok=True)``."""
        os.makedirs(path, exist_ok=True)

    def scandir(self, path: str) -> list[tuple[str, bool]]:
        """``os.scandir``: each name in ``path`` with whether it is a directory (a symlink is not followed)."""
        with os.scandir(path) as entries:
            return [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]

    def mkdir(self, path: str, mode: int = 0o755) -> None:
        """``os.mkdir`` (one directory; ``FileExistsError`` if it exists)."""
        os.mkdir(path, mode)

    def lexists(self, path: str) -> bool:
        """``os.path.lexists``: something (a dangling symlink included) has this name."""
        return os.path.lexists(path)

    def rmtree(self, path: str) -> None:
        """``shutil.rmtree``: a directory and everything below it."""
        shutil.rmtree(path)

    @property
    def page_cache_reads(self) -> bool:
        """Whether ``preadv_nowait`` may be used (Linux with ``RWF_NOWAIT``)."""
        return RWF_NOWAIT is not None

    @property
    def loop_writes(self) -> bool:
        """Whether a small append without ``fdatasync`` may call ``pwritev`` on the event loop.

        True for the system's calls (a page-cache write); an implementation
        whose ``pwritev`` may wait at will (a test's gate) says False, and every
        append then makes its thread hop.
        """
        return True


class _Defaults:
    ops: FileOps = FileOps()


def default_ops() -> FileOps:
    """The ``FileOps`` used by files opened without an explicit ``ops``."""
    return _Defaults.ops


@contextlib.contextmanager
def use_ops(ops: FileOps) -> Iterator[FileOps]:
    """Install ``ops`` as the process-wide default while the ``with`` block runs (tests only).

    Files opened inside the block keep ``ops`` for their lifetime.
    """
    previous, _Defaults.ops = _Defaults.ops, ops
    try:
        yield ops
    finally:
        _Defaults.ops = previous
