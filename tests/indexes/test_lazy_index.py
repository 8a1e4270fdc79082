"""LazyIndex: Kafka's LazyIndexTest scenarios (LZ-*) and a race on the first get()."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from seglog.indexes import LazyIndex, OffsetIndex, StorageError, TimeIndex


def test_factories_open_the_right_index(tmp_path: Path) -> None:
    off = LazyIndex.for_offset(tmp_path / "0.index", 0, 1000)  # LZ-1
    tim = LazyIndex.for_time(tmp_path / "0.timeindex", 0, 1500)
    assert off.path == tmp_path / "0.index"
    assert isinstance(off.get(), OffsetIndex) and off.get().base_offset == 0
    assert isinstance(tim.get(), TimeIndex) and tim.get().max_entries == 125
    assert off.get() is off.get()  # LZ-2
    off.close()
    tim.close()


def test_file_is_created_by_the_first_get(tmp_path: Path) -> None:
    path = tmp_path / "0.index"  # LZ-3
    lazy = LazyIndex.for_offset(path, 0, 1000)
    assert not path.exists() and not lazy.is_loaded
    assert lazy.peek() is None and not path.exists()  # peek opens nothing
    index = lazy.get()
    assert path.stat().st_size == 1000 and lazy.is_loaded
    assert lazy.peek() is index
    lazy.close()


def test_get_with_missing_directory_raises_and_can_retry(tmp_path: Path) -> None:
    lazy = LazyIndex.for_offset(tmp_path / "later" / "0.index", 0, 1000)  # LZ-4
    with pytest.raises(StorageError, match="cannot open index file"):
        lazy.get()
    assert not lazy.is_loaded
    (tmp_path / "later").mkdir()
    lazy.get().append(3, 0)
    lazy.close()


def test_rename_after_load(tmp_path: Path) -> None:
    lazy = LazyIndex.for_offset(tmp_path / "0.index", 0, 1000)  # LZ-5
    lazy.get()
    new = tmp_path / "0.index.deleted"
    lazy.rename_to(new)
    assert lazy.path == new and new.exists()
    lazy.close()


def test_rename_before_load_without_file(tmp_path: Path) -> None:
    lazy = LazyIndex.for_time(tmp_path / "0.timeindex", 0, 1500)  # LZ-6, LS-13
    new = tmp_path / "0.timeindex.deleted"
    lazy.rename_to(new)
    assert lazy.path == new and not new.exists()
    lazy.get()  # created under the new name
    assert new.exists() and not (tmp_path / "0.timeindex").exists()
    lazy.close()


def test_rename_before_load_with_file(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    OffsetIndex(path, 0, 80).close()
    lazy = LazyIndex.for_offset(path, 0, 80)
    lazy.rename_to(tmp_path / "1.index")
    assert (tmp_path / "1.index").exists() and not path.exists()
    with pytest.raises(StorageError):
        lazy.rename_to(tmp_path / "nowhere" / "2.index")


def test_delete(tmp_path: Path) -> None:
    path = tmp_path / "0.index"  # LZ-7
    lazy = LazyIndex.for_offset(path, 0, 1000)
    assert lazy.delete() is False
    lazy.get()
    assert path.exists()
    assert lazy.delete() is True
    assert not path.exists()


def test_update_parent_dir(tmp_path: Path) -> None:
    lazy = LazyIndex.for_offset(tmp_path / "0.index", 0, 1000)  # LZ-8
    lazy.update_parent_dir(tmp_path / "moved")
    assert lazy.path == tmp_path / "moved" / "0.index"
    (tmp_path / "moved").mkdir()
    index = lazy.get()
    (tmp_path / "moved").rename(tmp_path / "again")
    lazy.update_parent_dir(tmp_path / "again")
    assert index.path == lazy.path == tmp_path / "again" / "0.index"
    lazy.close()
    assert lazy.path.stat().st_size == 0  # trimmed at its new place


def test_close_before_and_after_load(tmp_path: Path) -> None:
    path = tmp_path / "0.index"  # LZ-9
    lazy = LazyIndex.for_offset(path, 0, 1000)
    lazy.close()
    lazy.close_handler()
    assert not path.exists()
    lazy.get().append(5, 7)
    lazy.close()
    assert path.stat().st_size == 8


class _CountingLock:
    """A lock that counts the acquisitions that had to wait (another thread held it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition()
        self.waited = 0

    def __enter__(self) -> None:
        if not self._lock.acquire(blocking=False):
            with self._changed:
                self.waited += 1
                self._changed.notify_all()
            self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()

    def wait_for(self, condition: Callable[[], bool]) -> bool:
        with self._changed:
            return self._changed.wait_for(condition, timeout=60)


def test_concurrent_first_gets_open_the_file_once(tmp_path: Path) -> None:
    opened: list[OffsetIndex] = []
    lock = _CountingLock()

    def open_index(p: Path) -> OffsetIndex:
        index = OffsetIndex(p, 0, 80)
        with lock._changed:
            opened.append(index)
            first = len(opened) == 1
            lock._changed.notify_all()
        if first:
            # The first opener goes on only once the three others have come for the index: they
            # wait for the lock it holds, or (no lock) open the file themselves.
            assert lock.wait_for(lambda: lock.waited == 3 or len(opened) == 4), "the other gets never came"
        return index

    lazy = LazyIndex(tmp_path / "0.index", open_index)
    lazy._lock = lock  # type: ignore[assignment]
    got: list[OffsetIndex] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            got.append(lazy.get())
        except BaseException as exc:  # reported below, in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert not errors, errors
        assert len(opened) == 1 and len(got) == 4 and all(g is opened[0] for g in got)
    finally:
        for index in opened[1:]:
            index.close()
        lazy.close()


def test_read_only_lazy_index(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    with OffsetIndex(path, 0, 80) as index:
        index.append(2, 9)
    lazy = LazyIndex.for_offset(path, 0, 80, writable=False)
    assert lazy.get().lookup(3) == (2, 9)
    lazy.close()
    assert path.stat().st_size == 8
