"""A writable index gives its mapping back to the open-file budget while idle and maps again on use.

The mapping holds a descriptor (CPython's ``mmap`` keeps a duplicate). Released,
the index keeps its entry count and its lookup mirror; the next use of the
slots maps the file again, only if the path still names the same file.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from seglog.indexes import FileReplacedError, OffsetIndex, OffsetPosition, TransactionIndex
from seglog.indexes.handles import open_file_budget
from seglog.indexes.transaction_index import AbortedTxn
from seglog.segments.faults import GatedOps
from seglog.segments.fileio import in_thread

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts descriptors through /proc")


def held(path: Path) -> int:
    """How many descriptors of this process point at ``path``."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").removesuffix(" (deleted)") == str(path)
        except OSError:
            continue
    return count


def test_a_released_index_keeps_its_entries_and_maps_again_to_append(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    index = OffsetIndex(path, 100, max_index_size=8 * 64)
    for n in range(10):
        index.append(101 + n, 10 * n)
    assert held(path) == 1
    assert index.release_handle()
    assert held(path) == 0
    assert index.lookup(105) == OffsetPosition(105, 40)  # the mirror answers without the mapping
    assert held(path) == 0
    index.append(111, 100)  # maps again
    assert held(path) == 1
    assert index.entries == 11 and index.entry(10) == OffsetPosition(111, 100)
    index.close()
    assert path.stat().st_size == 11 * 8  # trimmed to the entries, as a close does
    with OffsetIndex(path, 100, writable=False) as again:
        assert [again.entry(n) for n in range(11)] == [OffsetPosition(101 + n, 10 * n) for n in range(11)]


def test_an_index_replaced_while_unmapped_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(path, 0, max_index_size=8 * 64)
    index.append(5, 0)
    assert index.release_handle()
    copy = tmp_path / "copy"
    shutil.copyfile(path, copy)
    os.replace(copy, path)
    with pytest.raises(FileReplacedError, match="changed while it was unmapped"):
        index.append(6, 8)
    assert index.lookup(5) == OffsetPosition(5, 0)
    size = path.stat().st_size
    with pytest.raises(FileReplacedError):  # nor is the other file trimmed at close
        index.close()
    assert index.closed and path.stat().st_size == size


def test_indexes_past_the_budget_are_unmapped_least_recently_used_first(tmp_path: Path) -> None:
    budget = open_file_budget()
    before = budget.max_open_files
    budget.resize(16)
    paths = [tmp_path / f"{n:020d}.index" for n in range(24)]
    indexes = [OffsetIndex(p, n, max_index_size=8 * 16) for n, p in enumerate(paths)]
    try:
        assert sum(held(p) for p in paths) <= 16
        # The first ones were opened longest ago and not used since: they went first.
        assert held(paths[0]) == 0 and held(paths[-1]) == 1
        indexes[0].append(1, 0)  # maps again; an idle one goes instead
        assert held(paths[0]) == 1
        assert sum(held(p) for p in paths) <= 16
    finally:
        for index in indexes:
            index.close()
        budget.resize(before)


async def test_an_index_in_use_keeps_its_mapping(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    ops = GatedOps()
    with ops, OffsetIndex(path, 0, max_index_size=8 * 1024, ops=ops) as index:
        # reserve() allocates under the index's lock: hold it there, in a worker thread.
        gate = ops.gate("fallocate", path_contains=str(path))
        reserving = asyncio.ensure_future(in_thread(index.reserve, 4))
        await gate.reached()
        assert not index.release_handle()  # the budget's eviction would try this: refused while in use
        gate.release()
        await reserving
        index.append(1, 0)
        assert index.release_handle() and held(path) == 0


def test_a_transaction_index_reopens_the_same_file_only(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    txn = TransactionIndex(path, 0)
    try:
        txn.append(AbortedTxn(1, 0, 5, 6))
        assert held(path) == 1 and txn.release_handle() and held(path) == 0
        assert txn.all_aborted_txns() == [AbortedTxn(1, 0, 5, 6)]  # reopened
        assert txn.release_handle()
        copy = tmp_path / "copy"
        shutil.copyfile(path, copy)
        os.replace(copy, path)
        with pytest.raises(FileReplacedError, match="transaction index changed"):
            txn.all_aborted_txns()
    finally:
        txn.close()
