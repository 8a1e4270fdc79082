"""An index that is opened (and its file created) only when first used.

Owns: :class:`LazyIndex`.

Must not import: ``segments``, ``engine`` or ``tools``.

Why (Kafka ``LazyIndex``): a log with thousands of segments would otherwise
map two 10 MiB files per segment at open; most old segments are never read
before they are deleted, so they never cost a mapping.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

from seglog.indexes.abstract import AbstractIndex, PathLike, delete_file, rename_file
from seglog.indexes.fileops import FileOps, default_ops
from seglog.indexes.offset_index import OffsetIndex
from seglog.indexes.time_index import TimeIndex

__all__ = ["LazyIndex"]

IndexT = TypeVar("IndexT", bound=AbstractIndex[Any])


class LazyIndex(Generic[IndexT]):
    """A path that becomes an open index on the first :meth:`get`.

    On disk: nothing of its own; the wrapped index's file, created (and
    preallocated) by the first :meth:`get` if it does not exist. Until then,
    :meth:`rename_to`, :meth:`update_parent_dir`, :meth:`delete` and
    :meth:`close` act on the path alone and never create the file.

    Concurrency: one ``threading.Lock``; the first :meth:`get` opens the index
    exactly once even when several threads race, and every later :meth:`get`
    returns the same instance without taking the lock.
    """

    def __init__(self, path: PathLike, open_index: Callable[[Path], IndexT], *, ops: FileOps | None = None) -> None:
        """Wrap ``path``; ``open_index(path)`` opens it on the first :meth:`get`; ``ops``: the file's system calls."""
        self._path = Path(path)
        self._ops = ops or default_ops()
        self._open_index = open_index
        self._index: IndexT | None = None
        self._lock = threading.Lock()

    @classmethod
    def for_offset(
        cls, path: PathLike, base_offset: int, max_index_size: int, *, writable: bool = True,
        ops: FileOps | None = None,
    ) -> LazyIndex[OffsetIndex]:
        """A lazy :class:`OffsetIndex` at ``path``."""
        ops = ops or default_ops()
        return LazyIndex(path, lambda p: OffsetIndex(p, base_offset, max_index_size, writable, ops=ops), ops=ops)

    @classmethod
    def for_time(
        cls, path: PathLike, base_offset: int, max_index_size: int, *, writable: bool = True,
        ops: FileOps | None = None,
    ) -> LazyIndex[TimeIndex]:
        """A lazy :class:`TimeIndex` at ``path``."""
        ops = ops or default_ops()
        return LazyIndex(path, lambda p: TimeIndex(p, base_offset, max_index_size, writable, ops=ops), ops=ops)

    @property
    def path(self) -> Path:
        """The file's current path (the index's own path once loaded)."""
        index = self._index
        return self._path if index is None else index.path

    @property
    def is_loaded(self) -> bool:
        """Whether :meth:`get` has opened the index."""
        return self._index is not None

    def peek(self) -> IndexT | None:
        """The index if :meth:`get` has opened it, else ``None`` (opens nothing): one call for hot paths."""
        return self._index

    def get(self) -> IndexT:
        """The index, opening (and creating) its file on the first call.

        Raises:
            StorageError: the file cannot be opened or created (for example,
                its directory is missing); the next call tries again.
            InvalidIndexSizeError: a new file with a size below one entry.
        """
        index = self._index
        if index is not None:  # fast path: a loaded index never changes back
            return index
        with self._lock:
            if self._index is None:
                self._index = self._open_index(self._path)
            return self._index

    def rename_to(self, path: PathLike) -> None:
        """Rename the file (loaded or not); a missing, never-loaded file is not an error.

        Raises:
            StorageError: the rename of an existing file failed.
        """
        with self._lock:
            target = Path(path)
            if self._index is not None:
                self._index.rename_to(target)
                return
            try:
                rename_file(self._path, target, "index", missing_ok=True, ops=self._ops)
            finally:
                self._path = target

    def update_parent_dir(self, directory: PathLike) -> None:
        """Point at the same file name in ``directory`` (after the directory was moved); no I/O."""
        with self._lock:
            self._path = Path(directory) / self._path.name
            if self._index is not None:
                self._index.update_parent_dir(directory)

    def delete(self) -> bool:
        """Delete the file (closing the index if loaded); returns whether it existed.

        Raises:
            StorageError: the file exists but cannot be removed.
        """
        with self._lock:
            if self._index is not None:
                return self._index.delete()
            return delete_file(self._path, "index", self._ops)

    def close(self) -> None:
        """Close the index if loaded (trim and unmap); nothing to do otherwise. Idempotent.

        Raises:
            StorageError: trimming the loaded index failed.
        """
        with self._lock:
            if self._index is not None:
                self._index.close()

    def close_handler(self) -> None:
        """Unmap the index if loaded, without trimming. Idempotent."""
        with self._lock:
            if self._index is not None:
                self._index.close_handler()

    def __repr__(self) -> str:
        return f"<LazyIndex {self.path} {'loaded' if self.is_loaded else 'not loaded'}>"
