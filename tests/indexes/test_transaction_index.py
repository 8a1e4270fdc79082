"""TransactionIndex: Kafka's TransactionIndexTest scenarios (TX-*), torn tails and versions."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest

from seglog.indexes import AbortedTxn, CorruptIndexError, InvalidOffsetError, StorageError, TransactionIndex

A = AbortedTxn(0, 0, 10, 11)
B = AbortedTxn(1, 5, 15, 13)
C = AbortedTxn(2, 18, 35, 25)
D = AbortedTxn(3, 32, 50, 40)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "00000000000000000000.txnindex"


@pytest.fixture
def txn(path: Path):  # type: ignore[no-untyped-def]
    path.touch()
    index = TransactionIndex(path, 0)
    yield index
    index.close()


def fill(index: TransactionIndex, *entries: AbortedTxn) -> None:
    for entry in entries:
        index.append(entry)


def test_reopen_appends_at_the_end(txn: TransactionIndex, path: Path) -> None:
    fill(txn, A, B, C, D)  # TX-1
    txn.close()
    with TransactionIndex(path, 0) as reopened:
        e = AbortedTxn(3, 50, 60, 55)
        reopened.append(e)
        assert reopened.all_aborted_txns() == [A, B, C, D, e]
    assert path.stat().st_size == 5 * 34


def test_last_offset_is_checked_after_reopen_too(txn: TransactionIndex, path: Path) -> None:
    fill(txn, A, B)
    txn.close()
    with TransactionIndex(path, 0) as reopened, pytest.raises(InvalidOffsetError, match="15"):
        reopened.append(AbortedTxn(9, 1, 12, 1))  # Kafka forgets the last offset on reopen; seglog does not


def test_sanity_check(txn: TransactionIndex, path: Path) -> None:
    fill(txn, A, B, C, D)  # TX-2
    txn.sanity_check()
    txn.close()
    with TransactionIndex(path, 100) as late, pytest.raises(CorruptIndexError, match="last offset 10 below"):
        late.sanity_check()


def test_last_offset_must_increase(txn: TransactionIndex) -> None:
    txn.append(AbortedTxn(1, 5, 15, 13))  # TX-3, TX-4
    with pytest.raises(InvalidOffsetError):
        txn.append(AbortedTxn(0, 0, 15, 11))
    with pytest.raises(InvalidOffsetError):
        txn.append(AbortedTxn(0, 0, 10, 11))
    assert txn.all_aborted_txns() == [AbortedTxn(1, 5, 15, 13)]


@pytest.mark.parametrize(
    ("fetch", "upper", "want", "complete"),
    [
        (0, 100, [A, B, C, D], False),
        (0, 32, [A, B, C], True),
        (0, 35, [A, B, C, D], True),
        (10, 35, [A, B, C, D], True),
        (11, 35, [B, C, D], True),
        (20, 41, [C, D], False),
    ],
)
def test_collect_aborted_txns(
    txn: TransactionIndex, fetch: int, upper: int, want: list[AbortedTxn], complete: bool
) -> None:
    fill(txn, A, B, C, D)  # TX-5
    assert txn.collect_aborted_txns(fetch, upper) == (want, complete)


def test_truncate(txn: TransactionIndex) -> None:
    entries = [AbortedTxn(0, 0, 10, 2), AbortedTxn(1, 5, 15, 16), AbortedTxn(2, 18, 35, 25), AbortedTxn(3, 32, 50, 40)]
    fill(txn, *entries)  # TX-6
    txn.truncate_to(51)
    assert txn.collect_aborted_txns(0, 100).aborted_txns == entries
    txn.truncate_to(50)
    assert txn.collect_aborted_txns(0, 100).aborted_txns == entries[:3]
    txn.append(AbortedTxn(4, 40, 45, 41))  # the last offset went back to 35 with the truncation
    txn.reset()
    assert txn.collect_aborted_txns(0, 100).aborted_txns == []
    assert txn.is_empty
    txn.append(AbortedTxn(0, 0, 1, 0))  # reset forgets the last offset too


def test_serde() -> None:
    entry = AbortedTxn(983493, 137, 299, 200)  # TX-7
    data = entry.to_bytes()
    assert len(data) == 34
    assert data[:2] == b"\x00\x00"  # version 0
    assert data == bytes.fromhex("0000 00000000000f01c5 0000000000000089 000000000000012b 00000000000000c8")


def test_rename_and_update_parent_dir(txn: TransactionIndex, tmp_path: Path) -> None:
    txn.append(AbortedTxn(0, 0, 10, 2))  # TX-8
    txn.rename_to(tmp_path / "renamed.txnindex")
    txn.append(AbortedTxn(1, 5, 15, 16))
    assert [t.first_offset for t in txn.collect_aborted_txns(0, 100).aborted_txns] == [0, 5]
    sub = tmp_path / "sub"
    txn.update_parent_dir(sub)  # TX-9
    assert txn.path == sub / "renamed.txnindex"


def test_rename_of_never_written_index_is_no_error(tmp_path: Path) -> None:
    index = TransactionIndex(tmp_path / "a.txnindex", 0)
    index.rename_to(tmp_path / "b.txnindex")
    assert index.path == tmp_path / "b.txnindex"
    assert not (tmp_path / "b.txnindex").exists()


def test_flush_and_lazy_creation(tmp_path: Path) -> None:
    path = tmp_path / "lazy.txnindex"
    with TransactionIndex(path, 0) as index:  # TX-10, TX-13
        index.flush()
        index.reset()
        assert not path.exists()
        assert index.is_empty  # TX-12
        assert index.all_aborted_txns() == []
        index.append(AbortedTxn(0, 0, 10, 2))
        index.flush()
        assert path.stat().st_size == 34
        assert not index.is_empty


def test_delete(txn: TransactionIndex, path: Path) -> None:
    txn.append(A)  # TX-11
    assert txn.delete() is True
    assert not path.exists()
    assert txn.delete() is False


def test_use_after_close_reopens(txn: TransactionIndex) -> None:
    txn.close()  # TX-14
    txn.append(AbortedTxn(0, 0, 10, 2))
    txn.close()
    txn.append(AbortedTxn(1, 5, 15, 16))
    txn.close()
    assert [t.first_offset for t in txn.collect_aborted_txns(0, 100).aborted_txns] == [0, 5]


def test_trailing_partial_entry_is_ignored(txn: TransactionIndex, path: Path) -> None:
    fill(txn, A, B)  # D-11
    with path.open("ab") as f:
        f.write(b"\x00" * 10)
    assert txn.all_aborted_txns() == [A, B]


def test_unknown_version_is_corruption(txn: TransactionIndex, path: Path) -> None:
    fill(txn, A)
    with path.open("r+b") as f:
        f.write(b"\x01\x00")
    with pytest.raises(CorruptIndexError, match="version 256"):
        txn.all_aborted_txns()


def test_many_entries_span_several_reads(txn: TransactionIndex) -> None:
    entries = [AbortedTxn(i, 2 * i, 2 * i + 1, 2 * i) for i in range(5000)]  # 170 kB: three 64 KiB reads
    fill(txn, *entries)
    assert txn.all_aborted_txns() == entries
    assert txn.collect_aborted_txns(9000, 9003) == ([entries[4500], entries[4501]], True)


def test_missing_directory_is_a_storage_error(tmp_path: Path) -> None:
    index = TransactionIndex(tmp_path / "gone" / "x.txnindex", 0)
    with pytest.raises(StorageError) as info:
        index.append(A)
    assert isinstance(info.value.__cause__, FileNotFoundError)


def test_unclosed_index_warns(path: Path) -> None:
    index = TransactionIndex(path, 0)
    index.append(A)
    with pytest.warns(ResourceWarning, match="unclosed transaction index"):
        del index
        gc.collect()
    assert os.path.getsize(path) == 34
