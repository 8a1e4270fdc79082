"""The entry-format-agnostic part of the mmap'd indexes: file, mapping, slots.

Owns: :class:`AbstractIndex` (open/preallocate, mmap, resize, trim, flush,
close, delete, rename, relative offsets, the lock), shared by ``OffsetIndex``
and ``TimeIndex``; the allocation of index file space before a mapping touches it.

Must not import: ``segments``, ``engine`` or ``tools``.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import struct
import threading
import warnings
from abc import ABC, abstractmethod
from array import array
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Final, Generic, Self, TypeVar

from seglog.indexes.errors import (
    ClosedError,
    CorruptIndexError,
    FileReplacedError,
    IndexOffsetOverflowError,
    InvalidIndexSizeError,
    ReadOnlyIndexError,
    SlotOutOfRangeError,
    StorageError,
)
from seglog.indexes.fileops import FILE_MODE, FileOps, default_ops
from seglog.indexes.handles import open_file_budget
from seglog.indexes.search import largest_lower_bound, native_column

__all__ = [
    "FILE_MODE",
    "INT32_MAX",
    "AbstractIndex",
    "EntryT",
    "IndexFile",
    "PathLike",
    "allocate_range",
    "delete_file",
    "rename_file",
]

#: Largest relative offset and position an index entry can hold: both are
#: stored as big-endian int32 (part of the format, as in Kafka).
INT32_MAX: Final = 2**31 - 1
# How far ahead of its next entry a writable index's file is allocated and written (see reserve).
PREPARE_AHEAD_BYTES: Final = 64 << 10
_ZEROS: Final = bytes(PREPARE_AHEAD_BYTES)
# What posix_fallocate fails with where the file system cannot do it (musl, some FUSE and network
# file systems): the range is then written for real instead. glibc already falls back by itself.
_FALLOCATE_UNSUPPORTED: Final = frozenset({errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EINVAL})
_O_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)

PathLike = str | os.PathLike[str]
EntryT = TypeVar("EntryT", bound=tuple[int, int])


def delete_file(path: Path, what: str, ops: FileOps | None = None) -> bool:
    """Remove ``path``; returns whether it existed.

    Raises:
        StorageError: the file exists but cannot be removed.
    """
    ops = ops or default_ops()
    try:
        ops.unlink(str(path))
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise StorageError(f"{path}: cannot delete {what}: {exc}") from exc
    return True


def rename_file(source: Path, target: Path, what: str, *, missing_ok: bool, ops: FileOps | None = None) -> None:
    """Atomically rename ``source`` to ``target``; with ``missing_ok``, a missing source is no error.

    Raises:
        StorageError: the rename failed.
    """
    ops = ops or default_ops()
    try:
        ops.replace(str(source), str(target))
    except FileNotFoundError as exc:
        if not missing_ok or ops.exists(str(source)):  # the target's directory may be the missing part
            raise StorageError(f"{source}: cannot rename {what} to {target}: {exc}") from exc
    except OSError as exc:
        raise StorageError(f"{source}: cannot rename {what} to {target}: {exc}") from exc


def _fallocate(ops: FileOps, fd: int, start: int, end: int) -> bool:
    """``posix_fallocate`` of ``[start, end)``; ``False`` where the platform or file system has none.

    Raises:
        OSError: the allocation failed (``ENOSPC``, ``EIO``, ...).
    """
    try:
        ops.fallocate(fd, start, end - start)
    except OSError as exc:
        if exc.errno in _FALLOCATE_UNSUPPORTED:
            return False
        raise
    return True


def _pwrite_all(ops: FileOps, fd: int, data: bytes | memoryview, position: int) -> None:
    view = memoryview(data)
    while view:
        written = ops.pwritev(fd, [view], position)
        if written <= 0:  # a file system that takes nothing without saying why: it has no room
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view, position = view[written:], position + written


def allocate_range(fd: int, start: int, end: int, *, keep: bool, ops: FileOps | None = None) -> bool:
    """Give ``[start, end)`` of the open file real blocks, so that no mapped access meets a hole; blocking.

    A store through a shared mapping into a hole must allocate inside the page
    fault, and where the file system has no room the kernel answers with
    ``SIGBUS``, which kills the process (on tmpfs a mere read of a hole does
    too). Allocated beforehand, the failure is an ``ENOSPC`` from a system call
    instead. ``posix_fallocate`` does it where the file system can; elsewhere
    the range is written for real: zeros when it holds nothing anyone reads
    (``keep=False``), or its own bytes read back (``keep=True``). Returns
    whether the range was written (the fallback) rather than only allocated.

    Raises:
        OSError: the space cannot be had (``ENOSPC``) or the file system failed;
            with the write fallback a leading part of the range may be written.
    """
    ops = ops or default_ops()
    if end <= start or _fallocate(ops, fd, start, end):
        return False
    for position in range(start, end, PREPARE_AHEAD_BYTES):
        size = min(PREPARE_AHEAD_BYTES, end - position)
        _pwrite_all(ops, fd, _read_whole_at(ops, fd, position, size) if keep else _ZEROS[:size], position)
    return True


def _read_whole_at(ops: FileOps, fd: int, position: int, size: int) -> bytes:
    data = ops.pread(fd, size, position)
    return data + bytes(size - len(data))  # past the end of file: zeros, as a hole reads


def _holes_before(ops: FileOps, fd: int, length: int) -> bool:
    """Whether the file has a hole (an unallocated range) before ``length``; cheap, one ``lseek``."""
    try:
        return ops.seek_hole(fd, 0) < length
    except OSError:
        pass  # not supported here: count blocks instead
    blocks = ops.fstat_blocks(fd)
    return blocks is None or blocks * 512 < length


def _space_error(path: Path, what: str, exc: OSError) -> StorageError:
    name = errno.errorcode.get(exc.errno or 0, "an error")
    advice = "; free disk space and retry" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else ""
    return StorageError(f"{path}: cannot allocate disk space for {what} ({name}: {exc.strerror}){advice}")


def _read_whole(ops: FileOps, fd: int, length: int) -> bytes:
    chunks: list[bytes] = []
    position = 0
    while position < length:
        chunk = ops.pread(fd, length - position, position)
        if not chunk:  # the file shrank meanwhile: the snapshot is what was there
            break
        chunks.append(chunk)
        position += len(chunk)
    return b"".join(chunks)


def _entries_before_zero_tail(buf: bytes, entries: int, entry_size: int) -> int:
    """How many leading slots hold entries, in a file whose tail may be zero-filled preallocation.

    Keys strictly increase, so only slot 0 can be all zeros; "slot i >= 1 is
    all zeros" is false then true along the file, and a binary search finds the
    first zero slot (a few compares even for 1M slots).
    """
    zero = bytes(entry_size)
    lo, hi = 1, entries  # the answer is in [1, entries] when entries >= 1
    if entries <= 1:
        return entries
    while lo < hi:
        mid = (lo + hi) // 2
        if buf[mid * entry_size : (mid + 1) * entry_size] == zero:
            hi = mid
        else:
            lo = mid + 1
    return lo


class IndexFile:
    """What every index file shares: a path guarded by ``_lock``, rename, move, context manager.

    Subclasses set ``_path`` and ``_lock`` and define ``close``; ``_WHAT``
    names the file in errors, ``_RENAME_MISSING_OK`` says whether a file that
    was never created (a lazily created index) may be renamed.
    """

    _WHAT: ClassVar[str] = "index"
    _RENAME_MISSING_OK: ClassVar[bool] = False
    _path: Path
    _lock: threading.RLock
    _ops: FileOps

    def close(self) -> None:
        raise NotImplementedError

    def rename_to(self, path: PathLike) -> None:
        """Atomically rename the file; the index follows the new path even when the rename fails.

        Raises:
            StorageError: the rename failed (or the file is missing, unless it is created lazily).
        """
        with self._lock:
            target = Path(path)
            try:
                rename_file(self._path, target, self._WHAT, missing_ok=self._RENAME_MISSING_OK, ops=self._ops)
            finally:
                self._path = target

    def update_parent_dir(self, directory: PathLike) -> None:
        """Follow the file to the same name in ``directory`` (its directory was moved); no I/O."""
        with self._lock:
            self._path = Path(directory) / self._path.name

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class AbstractIndex(IndexFile, ABC, Generic[EntryT]):
    """A preallocated, memory-mapped file of fixed-size big-endian entries.

    On disk: ``entries * entry_size`` bytes of entries, followed while the file
    is open for writing by zero-filled preallocated slots. A new file is created
    at ``max_index_size`` rounded down to whole entries (sparse); an existing
    file keeps its length and is assumed to be entirely valid (as in Kafka: a
    cleanly closed index was trimmed to its entries; after a crash the caller
    rebuilds it). :meth:`close` and :meth:`trim_to_valid_size` cut the file back
    to its valid entries.

    In memory: lookups search a native mirror of the entries, two ``array``
    columns (key and value) decoded from the mapping with one bulk copy on the
    first lookup, not at open (opening thousands of segments stays cheap; the
    build is milliseconds per million entries),
    then kept equal to the file's valid entries by every append and
    truncation, and dropped at close. It costs ``entry_size`` bytes per
    entry, the size of the valid part of the file. Searching it with C
    ``bisect`` makes a lookup several times faster than a pure-Python search
    of the big-endian mapping, close to a bare C ``bisect`` over a native
    array (``bench/bench_indexes.py``; ``docs/INDEXES.md`` has the figures).

    Disk space: a slot is written through the mapping only once its file bytes
    are allocated (:meth:`reserve`; an append reserves for itself when nobody
    did), so a full disk fails an append with :class:`StorageError` before
    anything is written instead of killing the process with ``SIGBUS``. An
    existing writable file with holes is allocated whole before it is mapped.

    Open-file budget: a writable index's mapping holds a descriptor (CPython's
    ``mmap`` keeps a duplicate), counted by the process's
    :func:`~seglog.indexes.handles.open_file_budget`. When the lock is free the
    budget may unmap it (:meth:`release_handle`); the mirror is built first and
    kept, so lookups never need the mapping again, and the next call that
    reads or writes slots maps the file again (:meth:`reserve` does it in the
    append's worker thread), after checking that the path still names the same
    file with the same length (:class:`FileReplacedError` otherwise).

    Concurrency: every method takes one lock (``threading.RLock``; ``reserve``
    holds it while it allocates), so an index may be used from several threads
    (the event loop and executor threads); a lookup holds it for about a
    microsecond, so sharing it costs little. The
    mirror is only built, read and changed under that lock. Use after
    :meth:`close` raises :class:`ClosedError`; ``close`` is idempotent.
    Mutating a read-only index raises :class:`ReadOnlyIndexError`.
    """

    #: Bytes per entry; part of the on-disk format of each concrete index.
    entry_size: int
    #: Where an entry keeps its relative offset: the int32 format and its byte offset.
    _offset_column: tuple[struct.Struct, int]
    #: Where an entry keeps its search key and its value: ``(width, byte offset)``
    #: of each big-endian signed int (format), the two columns of the mirror.
    _key_field: tuple[int, int]
    _value_field: tuple[int, int]

    def __init__(
        self, path: PathLike, base_offset: int, max_index_size: int = -1, writable: bool = True,
        *, ops: FileOps | None = None,
    ) -> None:
        """Open ``path``, creating and preallocating it when it does not exist (writable only).

        ``max_index_size=-1`` is only valid for an existing file (as in Kafka).
        ``ops``: the system calls of this file (default: the process's, ``default_ops()``).

        Raises:
            InvalidIndexSizeError: a new file with ``max_index_size`` below one entry.
            StorageError: the file cannot be created, opened, sized or mapped.
        """
        self._lock = threading.RLock()
        # (keys, values) of the first `entries` slots, or None until the first lookup and after close.
        self._mirror: tuple[array[int], array[int]] | None = None
        # The mapping, or b"" for an empty file (mmap refuses those): reads of the
        # first `entries` slots then need no None check on the lookup path.
        self._mm: mmap.mmap | bytes = b""
        # Bytes of the current mapping's file known to be written (not a hole): see prepare_ahead.
        self._prepared = 0
        self._closed = True  # until the mapping exists, __del__ has nothing to report
        # The mapping was given back to the open-file budget: the next use of the slots maps it again.
        self._released = False
        self.handle_used = True  # set by every use of the mapping; the budget's sweep clears it
        self._identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the mapped file
        self._path = Path(path)
        self._base_offset = base_offset
        self._max_index_size = max_index_size
        self._writable = writable
        self._ops = ops = ops or default_ops()
        try:
            try:
                flags = (os.O_RDWR | os.O_CREAT | os.O_EXCL) if writable else os.O_RDONLY
                fd = ops.open(str(self._path), flags | _O_CLOEXEC, FILE_MODE)
                newly_created = writable
            except FileExistsError:
                fd, newly_created = ops.open(str(self._path), os.O_RDWR | _O_CLOEXEC), False
        except OSError as exc:
            raise StorageError(f"{self._path}: cannot open index file: {exc}") from exc
        try:
            if newly_created:
                if max_index_size < self.entry_size:
                    raise InvalidIndexSizeError(
                        f"{self._path}: max index size {max_index_size} is below one entry "
                        f"({self.entry_size} bytes); use a segment index size of at least {self.entry_size}"
                    )
                ops.ftruncate(fd, self._round_down(max_index_size))  # sparse: space is taken by reserve()
            elif writable:
                self._allocate_existing(fd)
            self._mm, self._length = self._map(fd)
            if isinstance(self._mm, mmap.mmap):
                self._identity = ops.fstat_identity(fd)
        except OSError as exc:
            raise StorageError(f"{self._path}: cannot size or map index file: {exc}") from exc
        finally:
            ops.close(fd)
            if newly_created and not isinstance(self._mm, mmap.mmap):
                with contextlib.suppress(OSError):  # do not leave a half-made file behind
                    ops.unlink(str(self._path))
        # Every byte of an existing file is an entry the mapping may read: all of it is allocated.
        self._prepared = 0 if newly_created else self._length
        # A new file starts empty; an existing one is taken as full of valid entries (Kafka), except
        # that a read-only snapshot stops at the preallocated zero slots of a live writer's index.
        self._entries = 0 if newly_created else self._length // self.entry_size
        if not writable and isinstance(self._mm, bytes):
            self._entries = _entries_before_zero_tail(self._mm, self._entries, self.entry_size)
        self._reload_last()
        self._closed = False
        if isinstance(self._mm, mmap.mmap):
            open_file_budget().opened(self)

    # -- helpers for subclasses -------------------------------------------------

    def _allocate_existing(self, fd: int) -> None:
        """Allocate the holes of an existing writable file before it is mapped (opening reads its last slot).

        A file left preallocated by a crash is sparse after its entries, and the
        whole file counts as entries (Kafka's rule) until the caller rebuilds it.
        The segment layer deletes such files before a rebuild rather than open
        them, so this is rare; a trimmed file has no hole and costs one ``lseek``.

        Raises:
            StorageError: the space cannot be had; nothing was mapped.
        """
        length = self._ops.fstat_size(fd)
        if length and _holes_before(self._ops, fd, length):
            try:
                allocate_range(fd, 0, length, keep=True, ops=self._ops)
            except OSError as exc:
                raise _space_error(self._path, f"the {length} bytes of the index before mapping it", exc) from exc

    def _reserve(self, end: int, *, ahead: bool) -> None:
        """Allocate the file up to ``end`` bytes before the mapping touches them; lock held.

        With ``ahead`` (a worker thread's :meth:`reserve`) up to
        ``PREPARE_AHEAD_BYTES`` further than what is allocated, so that this runs
        about once per 64 KiB of entries, or just up to the end of ``end``'s page
        when there is no room for more; without (an entry write, maybe on the
        event loop) up to the end of ``end``'s page. The range is then written
        with zeros: on ext4 a mapped store into allocated but never-written
        blocks still takes the slow page fault of a hole (docs/INDEXES.md §2), on
        whichever thread writes the entry. Only slots at or after ``entries`` are
        touched (unused: their content is never read), and the file never grows.

        Raises:
            StorageError: the space cannot be had (``ENOSPC``); nothing was written to the index.
        """
        end = min(end, self._length)
        start = max(self._prepared, self._entries * self.entry_size)
        if end <= start:
            return
        # Space comes in pages anyway: the page holding `end` is what an entry write needs at least.
        needed = min(self._length, end + (-end % mmap.PAGESIZE))
        ahead_end = min(self._length, max(needed, start + PREPARE_AHEAD_BYTES)) if ahead else needed
        ops = self._ops
        try:
            fd = ops.open(str(self._path), os.O_WRONLY | _O_CLOEXEC)
            try:
                try:
                    written = allocate_range(fd, start, ahead_end, keep=False, ops=ops)
                except OSError as exc:
                    if exc.errno not in (errno.ENOSPC, errno.EDQUOT) or ahead_end == needed:
                        raise
                    written = allocate_range(fd, start, needed, keep=False, ops=ops)  # what is needed may fit
                    ahead_end = needed
                if not written:
                    with contextlib.suppress(OSError):  # allocated already: the zeros only save page faults
                        for position in range(start, ahead_end, PREPARE_AHEAD_BYTES):
                            _pwrite_all(ops, fd, _ZEROS[: min(PREPARE_AHEAD_BYTES, ahead_end - position)], position)
            finally:
                ops.close(fd)
        except OSError as exc:
            slots = -(-(end - self._entries * self.entry_size) // self.entry_size)
            what = f"{slots} more index entries; nothing was written to the index"
            raise _space_error(self._path, what, exc) from exc
        self._prepared = ahead_end

    def _map(self, fd: int) -> tuple[mmap.mmap | bytes, int]:
        length = self._ops.fstat_size(fd)
        if length == 0:  # mmap refuses empty files; an empty index has nothing to read
            return b"", 0
        if not self._writable:
            # A read-only index is a snapshot read with pread, never a mapping: the writer (maybe
            # another process) trims a preallocated index when its segment rolls or closes, and a
            # mapped page past the new end of file kills the reader with SIGBUS on its next lookup.
            snapshot = _read_whole(self._ops, fd, length)
            return snapshot, len(snapshot)
        return mmap.mmap(fd, length, access=mmap.ACCESS_WRITE), length

    def _round_down(self, size: int) -> int:
        return size - size % self.entry_size

    def _relative_offset_at(self, slot: int) -> int:
        key, field = self._offset_column
        relative: int = key.unpack_from(self._view(), slot * self.entry_size + field)[0]
        return relative

    def _view(self) -> mmap.mmap | bytes:
        """The mapping, mapped again first if the open-file budget took it back; call under the lock.

        Raises:
            StorageError: the file cannot be opened or mapped.
            FileReplacedError: the path names another file now, or one of another length.
        """
        if self._released:
            self._remap()
        self.handle_used = True
        return self._mm

    def _remap(self) -> None:
        # Under the lock, from the thread that needs the slots (reserve() does it in an append's
        # worker thread, so the loop's entry writes find the mapping in place).
        try:
            fd = self._ops.open(str(self._path), os.O_RDWR | _O_CLOEXEC)
        except OSError as exc:
            raise StorageError(f"{self._path}: cannot reopen index file: {exc}") from exc
        try:
            identity, length = self._ops.fstat_identity(fd), self._ops.fstat_size(fd)
            if identity != self._identity or length != self._length:
                # Nothing seglog does changes an index file while it is unmapped: another file, or a
                # change by another hand, is not to be trusted as this index's entries.
                raise FileReplacedError(
                    f"{self._path.name}: the index file changed while it was unmapped to stay within the "
                    f"open-file budget (inode {identity[1]}, {length} bytes; was inode "
                    f"{self._identity[1] if self._identity else '?'}, {self._length} bytes); "
                    "indexes are rebuilt from the .log on open, or run 'seglog recover DIR'"
                )
            self._mm = mmap.mmap(fd, length, access=mmap.ACCESS_WRITE)
        except OSError as exc:
            raise StorageError(f"{self._path}: cannot map index file again: {exc}") from exc
        finally:
            self._ops.close(fd)
        self._released = False
        open_file_budget().opened(self)

    def release_handle(self) -> bool:
        """Unmap now unless a call holds the lock (the open-file budget's eviction); ``True`` if nothing is mapped.

        The mirror is built first if no lookup built it yet, so that lookups
        keep answering without the mapping. Nothing is written or trimmed: the
        entries are in the file (a shared mapping's stores are the file's pages).
        """
        if not self._lock.acquire(blocking=False):
            return False  # in use: the budget asks again later
        try:
            if self._closed or not isinstance(self._mm, mmap.mmap):
                return True
            if self._mirror is None:
                self._load_mirror()
            self._mm.close()
            self._mm = b""
            self._released = True
            return True
        finally:
            self._lock.release()

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"{self._path}: index is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if not self._writable:
            raise ReadOnlyIndexError(f"{self._path}: index was opened read-only")

    def _truncate_to_entries(self, entries: int) -> None:
        self._entries = entries
        if self._mirror is not None:
            for column in self._mirror:
                del column[entries:]
        self._reload_last()

    def _load_mirror(self) -> tuple[array[int], array[int]]:
        """Build the native mirror of the valid entries (first lookup after open); call under the lock.

        Raises:
            ClosedError: the index is closed (lookups reach here when it is).
        """
        self._check_open()
        (key_width, key_field), (value_width, value_field) = self._key_field, self._value_field
        stride, entries = self.entry_size, self._entries
        view = self._view()
        self._mirror = (
            native_column(view, entries, stride=stride, field=key_field, width=key_width),
            native_column(view, entries, stride=stride, field=value_field, width=value_width),
        )
        return self._mirror

    def _mirror_append(self, key: int, value: int) -> None:
        # Called by appends after the entry is in the mapping, under the lock.
        if self._mirror is not None:
            keys, values = self._mirror
            keys.append(key)
            values.append(value)

    @abstractmethod
    def _reload_last(self) -> None:
        """Re-read the cached last entry from the first ``entries`` slots."""

    @abstractmethod
    def _parse(self, slot: int) -> EntryT:
        """The entry in ``slot`` (a valid slot), with absolute offsets."""

    # -- public API ---------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The index file's current path."""
        return self._path

    @property
    def base_offset(self) -> int:
        """The offset that relative offset 0 stands for (the segment's base offset)."""
        return self._base_offset

    @property
    def max_index_size(self) -> int:
        """The size the file is preallocated to, and reset to by :meth:`reset`."""
        return self._max_index_size

    @property
    def writable(self) -> bool:
        """Whether the index was opened for writing."""
        return self._writable

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` or :meth:`delete` was called."""
        return self._closed

    @property
    def entries(self) -> int:
        """Number of valid entries."""
        return self._entries

    @property
    def max_entries(self) -> int:
        """Number of slots the current file length holds."""
        return self._length // self.entry_size

    @property
    def length(self) -> int:
        """Current file length in bytes (preallocated slots included)."""
        return self._length

    @property
    def size_bytes(self) -> int:
        """Bytes taken by valid entries (``entries * entry_size``)."""
        return self._entries * self.entry_size

    @property
    def is_full(self) -> bool:
        """Whether no slot is free for an append."""
        return self._entries >= self._length // self.entry_size

    def entry(self, n: int) -> EntryT:
        """The entry in slot ``n``.

        Raises:
            SlotOutOfRangeError: ``n`` is not below :attr:`entries`.
            ClosedError: the index is closed.
        """
        with self._lock:
            self._check_open()
            if not 0 <= n < self._entries:
                raise SlotOutOfRangeError(f"{self._path}: slot {n} out of range, the index has {self._entries} entries")
            return self._parse(n)

    def relative_offset(self, offset: int) -> int:
        """``offset - base_offset`` as stored in an entry.

        Raises:
            IndexOffsetOverflowError: the difference is outside ``[0, 2**31-1]``.
        """
        relative = offset - self._base_offset
        if not 0 <= relative <= INT32_MAX:
            raise IndexOffsetOverflowError(
                f"{self._path}: offset {offset} is not in [{self._base_offset}, "
                f"{self._base_offset + INT32_MAX}] relative to base offset {self._base_offset}; "
                "the segment must roll before this offset"
            )
        return relative

    def can_append_offset(self, offset: int) -> bool:
        """Whether ``offset`` can be stored relative to the base offset."""
        return 0 <= offset - self._base_offset <= INT32_MAX

    def truncate(self) -> None:
        """Remove every entry (the file keeps its length).

        Raises:
            ClosedError, ReadOnlyIndexError.
        """
        with self._lock:
            self._check_writable()
            self._truncate_to_entries(0)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is ``>= offset``; a larger offset changes nothing.

        Raises:
            ClosedError, ReadOnlyIndexError.
        """
        with self._lock:
            self._check_writable()
            # Keep the entries below `offset`: the floor of `offset - 1` and all before
            # it. Exact for integer offsets, and right where the time index repeats an
            # offset (same offset, larger timestamp), unlike an exact-hit test.
            key, field = self._offset_column
            slot = largest_lower_bound(
                self._view(), self._entries, offset - 1 - self._base_offset,
                key=key, stride=self.entry_size, field=field,
            )
            keep = 0 if slot is None else slot + 1
            self._truncate_to_entries(keep)

    def sanity_check(self, *, full: bool = False) -> None:
        """Check the index the way Kafka does at open (O(1)), or every entry with ``full``.

        The O(1) check looks at the last entry and the file length only. With
        ``full=True`` (for ``seglog verify``; ~0.1 s per 1M entries) every entry
        is also checked against the one before it and against the base offset.

        Raises:
            CorruptIndexError: the last entry's offset is below the base offset,
                the file length is not a whole number of entries, an
                index-specific rule fails (see the subclass), or with ``full``
                the first entry out of order.
            ClosedError: the index is closed.
        """
        with self._lock:
            self._check_open()
            problem = self._entry_problem() if self._entries else None
            if problem is None and self._length % self.entry_size:
                problem = f"length {self._length} is not a multiple of {self.entry_size} bytes"
            if problem is None and full:
                problem = self._order_problem()
            if problem is not None:
                raise CorruptIndexError(
                    f"{self._path.name}: {problem}; indexes are rebuilt from the .log on open, "
                    "or run 'seglog recover DIR'"
                )

    @abstractmethod
    def _order_problem(self) -> str | None:
        """The first entry that breaks the index's ordering rules, described, or ``None``."""

    def _entry_problem(self) -> str | None:
        # Called with at least one entry; subclasses add their own rules first.
        last_offset = self._base_offset + self._relative_offset_at(self._entries - 1)
        if last_offset < self._base_offset:
            return f"last offset {last_offset} is below base offset {self._base_offset}"
        return None

    def resize(self, size: int) -> bool:
        """Set the file length to ``size`` rounded down to whole entries and remap it.

        Returns ``False`` (and does nothing) when the rounded size equals the
        current length. The old mapping is closed before the file changes size.

        Raises:
            InvalidIndexSizeError: the new size cannot hold the current entries.
            ClosedError, ReadOnlyIndexError, StorageError.
        """
        with self._lock:
            self._check_writable()
            rounded = self._round_down(size)
            if rounded == self._length:
                return False
            if self._released:
                self._remap()  # the same file, checked, before its length changes
            if rounded < self.size_bytes:
                raise InvalidIndexSizeError(
                    f"{self._path}: cannot resize to {rounded} bytes, {self._entries} entries "
                    f"need {self.size_bytes}; truncate first"
                )
            # What stays of the file keeps its blocks; what a growth adds is a hole until reserved.
            prepared = min(self._prepared, rounded)
            self._unmap()
            self._released = False  # mapped again below (or left unmapped, and empty, by a failure)
            try:
                fd = self._ops.open(str(self._path), os.O_RDWR | _O_CLOEXEC)
                try:
                    self._ops.ftruncate(fd, rounded)
                    self._mm, self._length = self._map(fd)
                    self._prepared = prepared
                    self._identity = self._ops.fstat_identity(fd)
                finally:
                    self._ops.close(fd)
            except OSError as exc:
                # No mapping now. An index is only a hint: with no entries a lookup
                # answers (base, 0), i.e. "scan from the start", which is still right,
                # and a full index makes the segment roll. Nothing is read unmapped.
                self._length = 0
                self._truncate_to_entries(0)
                raise StorageError(f"{self._path}: cannot resize index to {rounded} bytes: {exc}") from exc
            if isinstance(self._mm, mmap.mmap):
                open_file_budget().opened(self)
            return True

    def trim_to_valid_size(self) -> bool:
        """Cut the file to exactly its valid entries (done at roll and close).

        Raises:
            ClosedError, ReadOnlyIndexError, StorageError.
        """
        with self._lock:
            return self.resize(self.size_bytes)

    def reset(self) -> None:
        """Remove every entry and grow the file back to ``max_index_size`` (before a rebuild).

        Raises:
            ClosedError, ReadOnlyIndexError, InvalidIndexSizeError, StorageError.
        """
        with self._lock:
            self.truncate()
            if self._max_index_size < self.entry_size:
                raise InvalidIndexSizeError(
                    f"{self._path}: max index size {self._max_index_size} is below one entry ({self.entry_size} bytes)"
                )
            self.resize(self._max_index_size)

    def flush(self) -> None:
        """Write dirty pages of the mapping to disk (``msync``).

        Raises:
            ClosedError, StorageError.
        """
        with self._lock:
            self._check_open()
            if self._released and self._writable:
                self._view()  # the stores made through the old mapping are in the file; msync them
            if isinstance(self._mm, mmap.mmap) and self._writable:
                try:
                    self._mm.flush()
                except OSError as exc:
                    raise StorageError(f"{self._path}: cannot flush index: {exc}") from exc

    def close(self) -> None:
        """Trim a writable index to its valid entries and unmap it. Idempotent.

        Raises:
            StorageError: the trim failed (the mapping is released anyway).
        """
        with self._lock:
            if self._closed:
                return
            try:
                if self._writable:
                    self.trim_to_valid_size()
            finally:
                self.close_handler()

    def close_handler(self) -> None:
        """Unmap without trimming or writing anything (Kafka's ``closeHandler``). Idempotent."""
        with self._lock:
            self._closed = True
            self._mirror = None
            self._released = False
            self._unmap()
            open_file_budget().forget(self)

    def _unmap(self) -> None:
        if isinstance(self._mm, mmap.mmap):
            self._mm.close()
        self._mm = b""
        self._prepared = 0

    def reserve(self, slots: int) -> None:
        """Allocate file space for the next ``slots`` entries now (blocking), as far as the file reaches.

        Appends reserve on their own before writing an entry through the
        mapping; a caller that must not fail half way (a segment about to write
        its ``.log``) reserves first, from a worker thread, so that a full disk
        fails it before anything is written and no blocking call is left for
        the event loop. See :meth:`_reserve`.

        Raises:
            StorageError: no space (``ENOSPC``) or the file system failed; nothing was written.
            ClosedError, ReadOnlyIndexError.
        """
        with self._lock:
            self._check_writable()
            self._view()  # an append's entry writes follow on the loop: map here, in the worker thread
            end = (self._entries + slots) * self.entry_size
            if end > self._prepared:
                self._reserve(end, ahead=True)

    def reserved(self, slots: int) -> bool:
        """Whether the next ``slots`` entries need no :meth:`reserve`: mapped, their space allocated; no I/O.

        For an append made on the event loop, which skips :meth:`reserve`
        when this holds and makes its thread hop otherwise.
        """
        return (
            not self._released
            and not self._closed
            and self._writable
            and (self._entries + slots) * self.entry_size <= self._prepared
        )

    def prepare_ahead(self) -> None:
        """Best-effort :meth:`reserve` of the slots just after the last entry, unless done already; blocking.

        Does nothing to a read-only, closed or trimmed index, nor when half of
        the span allocated ahead is still free; a failure (a full disk) is left
        for the next entry's own reservation to report.
        """
        with self._lock:
            if self._closed or not self._writable or not isinstance(self._mm, mmap.mmap):
                return
            start = self._entries * self.entry_size
            if self._prepared - start >= PREPARE_AHEAD_BYTES // 2:
                return
            with contextlib.suppress(StorageError):
                self._reserve(max(start, self._prepared) + PREPARE_AHEAD_BYTES, ahead=True)

    def delete(self) -> bool:
        """Unmap and delete the file; returns whether it existed. The index is closed after.

        Raises:
            StorageError: the file exists but cannot be removed.
        """
        with self._lock:
            self.close_handler()
            return delete_file(self._path, "index", self._ops)

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            warnings.warn(f"unclosed index {self._path}", ResourceWarning, stacklevel=2, source=self)
            self.close_handler()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{self._entries}/{self.max_entries} entries"
        return f"<{type(self).__name__} {self._path} base_offset={self._base_offset} {state}>"
