"""OffsetIndex: Kafka's OffsetIndexTest scenarios (OI-*), plus reopen, read-only, close and bytes on disk."""

from __future__ import annotations

import gc
import random
import struct
import threading
from pathlib import Path

import pytest

from seglog.indexes import (
    ClosedError,
    CorruptIndexError,
    IndexFullError,
    IndexOffsetOverflowError,
    InvalidIndexSizeError,
    InvalidOffsetError,
    OffsetIndex,
    OffsetPosition,
    ReadOnlyIndexError,
    SeglogError,
    SlotOutOfRangeError,
    StorageError,
)

BASE = 45


@pytest.fixture
def idx(tmp_path: Path):  # type: ignore[no-untyped-def]
    index = OffsetIndex(tmp_path / "00000000000000000045.index", BASE, max_index_size=30 * 8)
    yield index
    index.close()


def test_new_file_is_preallocated_to_whole_entries(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    with OffsetIndex(path, 0, max_index_size=67) as index:
        assert path.stat().st_size == 64  # roundDown(67, 8)
        assert index.max_entries == 8
        assert index.entries == 0
        assert index.length == 64
    assert path.stat().st_size == 0  # close trims to the valid entries


def test_max_index_size_below_one_entry_is_refused_and_leaves_no_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidIndexSizeError, match="below one entry"):
        OffsetIndex(tmp_path / "x.index", 0, max_index_size=7)
    assert not (tmp_path / "x.index").exists()


def test_lookup_on_empty_index_returns_base_and_position_zero(idx: OffsetIndex) -> None:
    assert idx.lookup(92) == OffsetPosition(BASE, 0)  # OI-1
    assert idx.lookup(BASE) == (BASE, 0)
    assert idx.lookup_ceiling(BASE) is None
    assert idx.last_offset == BASE


def test_random_lookups_match_a_sorted_map(idx: OffsetIndex) -> None:
    rnd = random.Random(7)  # OI-2
    offsets, positions, offset, position = [], [], BASE + 1, 0
    for _ in range(30):
        offset += rnd.randint(1, 15)
        position += rnd.randint(1, 100)
        offsets.append(offset)
        positions.append(position)
        idx.append(offset, position)
    for o, p in zip(offsets, positions, strict=True):
        assert idx.lookup(o) == (o, p)
    for target in range(BASE, offsets[-1] + 3):
        below = [i for i, o in enumerate(offsets) if o <= target]
        want = (offsets[below[-1]], positions[below[-1]]) if below else (BASE, 0)
        assert idx.lookup(target) == want
        above = [i for i, o in enumerate(offsets) if o >= target]
        assert idx.lookup_ceiling(target) == ((offsets[above[0]], positions[above[0]]) if above else None)


def test_lookup_extremes(idx: OffsetIndex) -> None:
    for i in range(30):  # OI-3
        idx.append(BASE + i + 1, i)
    assert idx.lookup(BASE) == (BASE, 0)
    assert idx.lookup(BASE + 30) == (BASE + 30, 29)
    assert idx.lookup(10**12) == (BASE + 30, 29)
    assert idx.lookup_ceiling(0) == (BASE + 1, 0)


def test_entry_returns_slots_and_refuses_missing_ones(idx: OffsetIndex) -> None:
    with pytest.raises(SlotOutOfRangeError):  # OI-5
        idx.entry(0)
    for i in range(30):  # OI-4
        idx.append(BASE + i, i)
    assert [idx.entry(i) for i in range(30)] == [(BASE + i, i) for i in range(30)]
    with pytest.raises(SlotOutOfRangeError, match="slot 30"):
        idx.entry(30)
    with pytest.raises(IndexError):
        idx.entry(-1)


def test_append_to_full_index_is_refused_before_the_offset_check(idx: OffsetIndex) -> None:
    for i in range(30):  # OI-6
        idx.append(BASE + i + 1, i)
    assert idx.is_full
    with pytest.raises(IndexFullError, match="full"):
        idx.append(31, 1)  # also out of order: fullness is reported first


def test_offsets_must_increase(idx: OffsetIndex) -> None:
    idx.append(51, 0)  # OI-7
    with pytest.raises(InvalidOffsetError, match="51"):
        idx.append(50, 1)
    with pytest.raises(InvalidOffsetError):
        idx.append(51, 1)  # equal is refused too
    assert idx.entries == 1


def test_relative_offset_overflow(tmp_path: Path) -> None:
    with OffsetIndex(tmp_path / "x.index", 100, max_index_size=80) as index:
        with pytest.raises(IndexOffsetOverflowError):
            index.append(99, 0)  # below the base offset
        with pytest.raises(IndexOffsetOverflowError):
            index.append(100 + 2**31, 0)
        index.append(100 + 2**31 - 1, 0)  # the largest relative offset fits
        assert index.lookup(2**40) == (100 + 2**31 - 1, 0)
        assert index.can_append_offset(100) and not index.can_append_offset(99)
        assert isinstance(IndexOffsetOverflowError("x"), ValueError)


def test_fetch_upper_bound_offset(idx: OffsetIndex) -> None:
    assert idx.fetch_upper_bound_offset(OffsetPosition(BASE, 0), 5) is None  # OI-8
    for offset, position in ((45, 0), (46, 10), (47, 23), (48, 37)):
        idx.append(offset, position)
    cases = {
        ((45, 0), 5): (46, 10),
        ((45, 0), 10): (46, 10),
        ((45, 0), 23): (47, 23),
        ((45, 0), 22): (47, 23),
        ((46, 10), 24): (48, 37),
        ((48, 37), 1): None,
        ((45, 0), 200): None,
        ((46, 10), 200): None,
    }
    for (start, size), want in cases.items():
        assert idx.fetch_upper_bound_offset(OffsetPosition(*start), size) == want, (start, size)


def test_reopen_after_close_sees_the_same_entries_and_is_full(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    with OffsetIndex(path, BASE, max_index_size=240) as index:
        index.append(51, 0)
        index.append(52, 1)
    assert path.stat().st_size == 16
    with OffsetIndex(path, BASE) as index:  # OI-9
        assert index.lookup(51) == (51, 0)
        assert index.lookup(52) == (52, 1)
        assert (index.last_offset, index.entries, index.max_entries) == (52, 2, 2)
        with pytest.raises(IndexFullError):
            index.append(53, 1)


def test_truncate_sequence(tmp_path: Path) -> None:
    with OffsetIndex(tmp_path / "x.index", 0, max_index_size=80) as index:  # OI-10
        index.truncate()
        for i in range(1, 10):
            index.append(i, i)
        index.truncate_to(12)
        assert (index.lookup(10), index.last_offset) == ((9, 9), 9)
        index.append(10, 10)
        index.truncate_to(10)
        assert (index.lookup(10), index.last_offset) == ((9, 9), 9)
        index.append(10, 10)
        index.truncate_to(9)
        assert (index.lookup(10), index.last_offset) == ((8, 8), 8)
        index.append(9, 9)
        index.truncate_to(5)
        assert (index.lookup(10), index.last_offset) == ((4, 4), 4)
        index.append(5, 5)
        index.truncate()
        assert (index.entries, index.last_offset) == (0, 0)
        index.append(0, 0)  # the base offset itself is a valid first entry


def test_truncate_to_an_offset_between_entries_keeps_the_floor(idx: OffsetIndex) -> None:
    for offset in (50, 60, 70):
        idx.append(offset, offset)
    idx.truncate_to(65)
    assert (idx.entries, idx.last_offset) == (2, 60)
    idx.truncate_to(0)
    assert (idx.entries, idx.last_offset) == (0, BASE)


def test_use_after_close_raises_closed_error(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 0, max_index_size=80)
    index.append(1, 1)
    index.close()
    index.close()  # idempotent
    assert index.closed
    for call in (lambda: index.lookup(1), lambda: index.append(2, 2), lambda: index.entry(0), index.flush):
        with pytest.raises(ClosedError):  # OI-11
            call()


def test_sanity_check_passes_with_last_offset_equal_to_base(tmp_path: Path) -> None:
    with OffsetIndex(tmp_path / "x.index", 20, max_index_size=80) as index:  # OI-12
        index.append(20, 0)
        index.sanity_check()


def test_sanity_check_catches_crafted_corruption(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000040.index"
    path.write_bytes(struct.pack(">ii", 1, 0) + struct.pack(">ii", -28, 10))  # last offset 12 < base 40
    with (
        OffsetIndex(path, 40, writable=False) as index,
        pytest.raises(CorruptIndexError, match=r"last offset 12 is below base offset 40.*seglog recover"),
    ):
        index.sanity_check()
    path.write_bytes(struct.pack(">ii", 1, 0) + b"\x00\x00\x00")  # 11 bytes
    with OffsetIndex(path, 40, writable=False) as index:
        assert index.entries == 1
        with pytest.raises(CorruptIndexError, match="not a multiple of 8"):
            index.sanity_check()


def test_bytes_on_disk_are_kafka_big_endian(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000050.index"
    with OffsetIndex(path, 50, max_index_size=80) as index:
        index.append(55, 4096)
        index.append(60, 8200)
    assert path.read_bytes() == bytes.fromhex("00000005 00001000 0000000a 00002008")


def test_reopened_untrimmed_index_counts_every_slot(tmp_path: Path) -> None:
    # D-7: after a crash the preallocated zero slots read as entries (Kafka does
    # the same); recovery rebuilds, it never trusts such a file.
    path = tmp_path / "x.index"
    index = OffsetIndex(path, 0, max_index_size=80)
    index.append(3, 100)
    index.flush()
    index.close_handler()  # a crash: no trim
    with OffsetIndex(path, 0, max_index_size=80) as reopened:
        assert reopened.entries == 10
        assert reopened.is_full


def test_read_only_index_reads_but_refuses_changes(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    with OffsetIndex(path, 0, max_index_size=80) as index:
        index.append(5, 50)
    with OffsetIndex(path, 0, writable=False) as ro:
        assert ro.lookup(7) == (5, 50)
        for call in (lambda: ro.append(6, 60), lambda: ro.truncate_to(0), ro.truncate, lambda: ro.resize(80)):
            with pytest.raises(ReadOnlyIndexError, match="read-only"):
                call()
        ro.flush()  # nothing to write
    assert path.stat().st_size == 8  # closing a read-only index does not trim or grow


def test_read_only_open_of_missing_file_is_a_storage_error(tmp_path: Path) -> None:
    with pytest.raises(StorageError) as info:
        OffsetIndex(tmp_path / "missing.index", 0, writable=False)
    assert isinstance(info.value.__cause__, FileNotFoundError)
    assert not (tmp_path / "missing.index").exists()


def test_resize_grows_shrinks_and_refuses_to_drop_entries(tmp_path: Path) -> None:
    with OffsetIndex(tmp_path / "x.index", 0, max_index_size=80) as index:
        index.append(1, 1)
        index.append(2, 2)
        assert index.resize(80) is False
        assert index.resize(43) is True and index.length == 40 and index.max_entries == 5
        assert index.resize(800) is True and index.max_entries == 100
        assert index.lookup(2) == (2, 2)  # entries survive the remap
        with pytest.raises(InvalidIndexSizeError, match="2 entries"):
            index.resize(8)
        assert index.trim_to_valid_size() is True and index.is_full
        index.reset()
        assert (index.entries, index.length) == (0, 80)


def test_empty_trimmed_index_reopens_full_and_reset_makes_room(tmp_path: Path) -> None:
    # LS-8: a closed empty index is 0 bytes; reopened it has no slot until reset.
    path = tmp_path / "x.index"
    OffsetIndex(path, 0, max_index_size=80).close()
    with OffsetIndex(path, 0, max_index_size=80) as index:
        assert (index.length, index.max_entries, index.is_full) == (0, 0, True)
        assert index.lookup(5) == (0, 0)
        with pytest.raises(IndexFullError):
            index.append(1, 0)
        index.reset()
        index.append(1, 0)
        assert index.lookup(5) == (1, 0)


def test_rename_and_delete(tmp_path: Path) -> None:
    path, moved = tmp_path / "x.index", tmp_path / "x.index.deleted"
    index = OffsetIndex(path, 0, max_index_size=80)
    index.append(1, 1)
    index.rename_to(moved)
    assert index.path == moved and moved.exists() and not path.exists()
    index.append(2, 2)  # the mapping follows the inode
    with pytest.raises(StorageError):
        index.rename_to(tmp_path / "no-such-dir" / "y.index")
    assert index.path == tmp_path / "no-such-dir" / "y.index"  # Kafka: the path follows anyway
    index.update_parent_dir(tmp_path)
    assert index.path == tmp_path / "y.index"
    index.close_handler()
    assert moved.stat().st_size == 80  # close_handler neither trims nor moves the file


def test_delete_returns_whether_the_file_existed(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 0, max_index_size=80)
    assert index.delete() is True
    assert not (tmp_path / "x.index").exists()
    assert index.closed
    assert index.delete() is False


def test_unclosed_index_warns(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 0, max_index_size=80)
    with pytest.warns(ResourceWarning, match="unclosed index"):
        del index
        gc.collect()


def test_errors_share_the_root() -> None:
    for exc in (ClosedError, CorruptIndexError, IndexFullError, InvalidOffsetError, ReadOnlyIndexError):
        assert issubclass(exc, SeglogError)


def test_concurrent_appends_and_lookups_from_threads(tmp_path: Path) -> None:
    # One writer thread appends and resizes while readers look up: the lock keeps
    # every answer a real entry (or the base), never a torn or unmapped read.
    index = OffsetIndex(tmp_path / "x.index", 0, max_index_size=8 * 4000)
    errors: list[BaseException] = []
    done = threading.Event()

    def writer() -> None:
        try:
            for i in range(1, 3000):
                index.append(i * 2, i * 10)
                if i % 500 == 0:
                    index.resize(8 * (4000 + i))
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            done.set()

    def reader() -> None:
        rnd = random.Random(1)
        try:
            while not done.is_set():
                got = index.lookup(rnd.randrange(0, 6000))
                if got != (0, 0) and got.position != got.offset * 5:
                    errors.append(AssertionError(got))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    index.close()
    assert errors == []
    assert index.closed


def test_failed_resize_leaves_an_empty_usable_index(tmp_path: Path) -> None:
    # The disk "fails" the remap (the file vanished): the index drops its entries,
    # which only makes readers scan from the segment start, and stays closable.
    path = tmp_path / "x.index"
    index = OffsetIndex(path, 10, max_index_size=80)
    index.append(12, 100)
    path.unlink()
    with pytest.raises(StorageError, match="cannot resize"):
        index.resize(160)
    assert (index.entries, index.last_offset, index.lookup(50)) == (0, 10, (10, 0))
    assert index.is_full
    with pytest.raises(IndexFullError):
        index.append(13, 0)
    index.close()  # nothing left to trim
    assert index.closed


def test_full_sanity_check_finds_an_entry_out_of_order_in_the_middle(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    with OffsetIndex(path, 100, max_index_size=80) as index:
        for i in range(5):
            index.append(101 + i * 10, i * 1000)
        index.sanity_check(full=True)
    data = bytearray(path.read_bytes())
    data[2 * 8 : 3 * 8] = struct.pack(">ii", 5, 2000)  # slot 2 now goes back to offset 105
    path.write_bytes(bytes(data))
    with OffsetIndex(path, 100, writable=False) as index:
        index.sanity_check()  # Kafka's O(1) check sees nothing wrong
        with pytest.raises(CorruptIndexError, match=r"entry 2 \(offset 105, position 2000\) does not follow"):
            index.sanity_check(full=True)
    path.write_bytes(struct.pack(">ii", 3, 500) + struct.pack(">ii", 4, 400))  # position goes back
    with OffsetIndex(path, 100, writable=False) as index, pytest.raises(CorruptIndexError, match="entry 1"):
        index.sanity_check(full=True)
    path.write_bytes(struct.pack(">ii", -1, 0) + struct.pack(">ii", 4, 400))  # first below base
    with OffsetIndex(path, 100, writable=False) as index, pytest.raises(CorruptIndexError, match="entry 0"):
        index.sanity_check(full=True)
