"""The aborted-transaction index (``.txnindex``) of one segment.

Owns: :class:`TransactionIndex`, its entry :class:`AbortedTxn` and the result
of a search, :class:`TxnIndexSearchResult`.

Must not import: ``segments``, ``engine`` or ``tools``.
"""

from __future__ import annotations

import contextlib
import os
import struct
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Final, NamedTuple

from seglog.indexes.abstract import IndexFile, PathLike, delete_file
from seglog.indexes.errors import CorruptIndexError, FileReplacedError, InvalidOffsetError, StorageError
from seglog.indexes.fileops import FILE_MODE, FileOps, default_ops
from seglog.indexes.handles import open_file_budget

__all__ = ["ABORTED_TXN", "ABORTED_TXN_VERSION", "AbortedTxn", "TransactionIndex", "TxnIndexSearchResult"]

#: One ``.txnindex`` entry, 34 bytes big-endian: int16 version, int64 producer id,
#: int64 first offset, int64 last offset, int64 last stable offset.
#: Part of the on-disk format (Kafka's AbortedTxn, byte for byte).
ABORTED_TXN: Final = struct.Struct(">hqqqq")
#: The only entry version written and accepted (format).
ABORTED_TXN_VERSION: Final = 0
# Entries read per pread when scanning: 1927 * 34 = 65518 bytes, just under 64 KiB.
_SCAN_ENTRIES: Final = 1927


class AbortedTxn(NamedTuple):
    """One aborted transaction: its producer, its offset range and the LSO when it ended."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def to_bytes(self) -> bytes:
        """The 34-byte on-disk entry."""
        return ABORTED_TXN.pack(ABORTED_TXN_VERSION, *self)


class TxnIndexSearchResult(NamedTuple):
    """Aborted transactions overlapping a fetch; ``is_complete`` when later segments cannot add any."""

    aborted_txns: list[AbortedTxn]
    is_complete: bool


class TransactionIndex(IndexFile):
    """The aborted transactions whose markers are in one segment, in the order they ended.

    On disk: a plain append-only file (not preallocated, not mmap'd) of 34-byte
    entries, big-endian ``int16 version (0), int64 producer_id, int64
    first_offset, int64 last_offset, int64 last_stable_offset`` (Kafka's
    ``.txnindex``). The file is created by the first :meth:`append`; a segment
    without aborted transactions has none. A trailing partial entry (a torn
    write) is ignored by reads. ``last_offset`` strictly increases from entry
    to entry.

    Concurrency: one ``threading.Lock`` around every method, so any thread may
    call it. The file descriptor is opened on demand and :meth:`close` only
    releases it: a later call reopens the file (Kafka does the same).
    """

    _WHAT = "transaction index"
    _RENAME_MISSING_OK = True  # the file is created on the first append, so it may not exist yet

    def __init__(self, path: PathLike, start_offset: int, *, ops: FileOps | None = None) -> None:
        """Remember ``path`` (the file is not created or opened yet); ``ops``: its system calls."""
        self._path = Path(path)
        self._ops = ops or default_ops()
        self._start_offset = start_offset
        self._lock = threading.RLock()
        self._fd: int | None = None
        # Last offset of the last entry, read from the file on the first append.
        self._last_offset: int | None = None
        self._last_offset_known = False
        # (st_dev, st_ino) of the file once opened: a reopen (after the open-file budget took the
        # descriptor back) must find the same file.
        self._identity: tuple[int, int] | None = None
        self.handle_used = True

    @property
    def path(self) -> Path:
        """The file's current path."""
        return self._path

    @property
    def start_offset(self) -> int:
        """The base offset of the segment this index belongs to."""
        return self._start_offset

    def _open(self, create: bool) -> int | None:
        # Returns the descriptor, or None when the file does not exist and create is false.
        self.handle_used = True
        if self._fd is None:
            flags = os.O_RDWR | os.O_APPEND | os.O_CLOEXEC | (os.O_CREAT if create else 0)
            try:
                fd = self._ops.open(str(self._path), flags, FILE_MODE)
            except FileNotFoundError as exc:
                if create:
                    raise StorageError(f"{self._path}: cannot create transaction index: {exc}") from exc
                if self._identity is not None:  # it existed when the budget closed it: someone removed it
                    raise self._replaced("the file is gone") from exc
                return None
            except OSError as exc:
                raise StorageError(f"{self._path}: cannot open transaction index: {exc}") from exc
            try:
                identity = self._ops.fstat_identity(fd)
            except OSError as exc:
                self._ops.close(fd)
                raise StorageError(f"{self._path}: cannot stat transaction index: {exc}") from exc
            if self._identity is not None and identity != self._identity:
                self._ops.close(fd)
                raise self._replaced(f"inode {identity[1]}, was {self._identity[1]}")
            self._fd, self._identity = fd, identity
            open_file_budget().opened(self)
        return self._fd

    def _replaced(self, problem: str) -> FileReplacedError:
        return FileReplacedError(
            f"{self._path.name}: the transaction index changed while its descriptor was closed to stay "
            f"within the open-file budget ({problem}); indexes are rebuilt from the .log on open, "
            "or run 'seglog recover DIR'"
        )

    def release_handle(self) -> bool:
        """Close the descriptor unless a call holds the lock (the open-file budget's eviction).

        Returns ``True`` when no descriptor is held after.
        """
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if self._fd is not None:
                fd, self._fd = self._fd, None
                with contextlib.suppress(OSError):
                    self._ops.close(fd)
            return True
        finally:
            self._lock.release()

    def _iter_entries(self) -> Iterator[tuple[int, AbortedTxn]]:
        # Yields (byte position, entry); stops before a trailing partial entry.
        fd = self._open(create=False)
        if fd is None:
            return
        try:
            size = self._ops.fstat_size(fd)
            usable = size - size % ABORTED_TXN.size
            position = 0
            while position < usable:
                chunk = self._ops.pread(fd, min(usable - position, _SCAN_ENTRIES * ABORTED_TXN.size), position)
                if len(chunk) % ABORTED_TXN.size or not chunk:  # the file shrank under us
                    raise StorageError(f"{self._path}: short read at byte {position} of {usable}")
                for version, *fields in ABORTED_TXN.iter_unpack(chunk):
                    if version != ABORTED_TXN_VERSION:
                        raise CorruptIndexError(
                            f"{self._path.name}: entry at byte {position} has version {version}, "
                            f"expected {ABORTED_TXN_VERSION}; indexes are rebuilt from the .log on open, "
                            "or run 'seglog recover DIR'"
                        )
                    yield position, AbortedTxn(*fields)
                    position += ABORTED_TXN.size
        except OSError as exc:
            raise StorageError(f"{self._path}: cannot read transaction index: {exc}") from exc

    def append(self, txn: AbortedTxn) -> None:
        """Write ``txn`` at the end of the file (creating it).

        Raises:
            InvalidOffsetError: ``txn.last_offset`` is not above the last entry's
                (also after a reopen: the last entry is read back from the file).
            CorruptIndexError: the existing last entry has an unknown version.
            StorageError: the file cannot be created or written.
        """
        with self._lock:
            if not self._last_offset_known:
                for _, entry in self._iter_entries():
                    self._last_offset = entry.last_offset
                self._last_offset_known = True
            if self._last_offset is not None and self._last_offset >= txn.last_offset:
                raise InvalidOffsetError(
                    f"{self._path}: cannot append aborted transaction {txn}, its last offset is not above "
                    f"{self._last_offset}; last offsets of appended transactions must increase"
                )
            fd = self._open(create=True)
            assert fd is not None
            data = txn.to_bytes()
            try:
                written = self._ops.write(fd, data)
            except OSError as exc:
                raise StorageError(f"{self._path}: cannot append to transaction index: {exc}") from exc
            if written != len(data):
                raise StorageError(f"{self._path}: short write ({written} of {len(data)} bytes)")
            self._last_offset = txn.last_offset

    def all_aborted_txns(self) -> list[AbortedTxn]:
        """Every entry, in file order (empty when the file does not exist).

        Raises:
            CorruptIndexError, StorageError.
        """
        with self._lock:
            return [entry for _, entry in self._iter_entries()]

    @property
    def is_empty(self) -> bool:
        """Whether the index has no complete entry (also when the file does not exist).

        Raises:
            StorageError: the file exists but cannot be read.
        """
        with self._lock:
            fd = self._open(create=False)
            if fd is None:
                return True
            try:
                return self._ops.fstat_size(fd) < ABORTED_TXN.size
            except OSError as exc:
                raise StorageError(f"{self._path}: cannot stat transaction index: {exc}") from exc

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Aborted transactions that overlap ``[fetch_offset, upper_bound_offset)``.

        A transaction overlaps when its ``last_offset >= fetch_offset`` and its
        ``first_offset < upper_bound_offset``. The search stops, complete, at the
        first entry whose ``last_stable_offset >= upper_bound_offset`` (no later
        segment can hold an earlier-starting transaction); otherwise the result
        is incomplete and the caller continues with the next segment.

        Raises:
            CorruptIndexError, StorageError.
        """
        with self._lock:
            found: list[AbortedTxn] = []
            for _, txn in self._iter_entries():
                if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                    found.append(txn)
                if txn.last_stable_offset >= upper_bound_offset:
                    return TxnIndexSearchResult(found, True)
            return TxnIndexSearchResult(found, False)

    def truncate_to(self, offset: int) -> None:
        """Remove the first entry whose ``last_offset >= offset`` and every entry after it.

        Raises:
            CorruptIndexError, StorageError.
        """
        with self._lock:
            previous: int | None = None
            for position, txn in self._iter_entries():
                if txn.last_offset >= offset:
                    self._truncate_file(position)
                    self._last_offset, self._last_offset_known = previous, True
                    return
                previous = txn.last_offset

    def reset(self) -> None:
        """Remove every entry (the file, if any, becomes empty; none is created).

        Raises:
            StorageError.
        """
        with self._lock:
            if self._open(create=False) is not None:
                self._truncate_file(0)
            self._last_offset, self._last_offset_known = None, True

    def _truncate_file(self, size: int) -> None:
        assert self._fd is not None  # only called after _open found the file
        try:
            self._ops.ftruncate(self._fd, size)
        except OSError as exc:
            raise StorageError(f"{self._path}: cannot truncate transaction index to {size}: {exc}") from exc

    def sanity_check(self) -> None:
        """Check every entry: version 0 and ``last_offset`` not below the start offset.

        Raises:
            CorruptIndexError: an entry fails a check.
            StorageError: the file cannot be read.
        """
        with self._lock:
            for position, txn in self._iter_entries():
                if txn.last_offset < self._start_offset:
                    raise CorruptIndexError(
                        f"{self._path.name}: entry at byte {position} has last offset {txn.last_offset} "
                        f"below the start offset {self._start_offset}; indexes are rebuilt from the .log "
                        "on open, or run 'seglog recover DIR'"
                    )

    def flush(self) -> None:
        """fsync the file if it is open (nothing is created).

        Raises:
            StorageError.
        """
        with self._lock:
            if self._fd is not None:
                try:
                    self._ops.fsync(self._fd)
                except OSError as exc:
                    raise StorageError(f"{self._path}: cannot fsync transaction index: {exc}") from exc

    def close(self) -> None:
        """Release the file descriptor; later calls reopen it. Idempotent."""
        with self._lock:
            self._close_fd()

    def _close_fd(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            open_file_budget().forget(self)
            self._ops.close(fd)

    def delete(self) -> bool:
        """Close and delete the file; returns whether it existed.

        Raises:
            StorageError: the file exists but cannot be removed.
        """
        with self._lock:
            self._close_fd()
            self._identity = None  # a later append creates a new file
            self._last_offset, self._last_offset_known = None, True
            return delete_file(self._path, "transaction index", self._ops)

    def __del__(self) -> None:
        if getattr(self, "_fd", None) is not None:
            warnings.warn(f"unclosed transaction index {self._path}", ResourceWarning, stacklevel=2, source=self)
            self._close_fd()

    def __repr__(self) -> str:
        return f"<TransactionIndex {self._path} start_offset={self._start_offset}>"
