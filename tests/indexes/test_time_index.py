"""TimeIndex: Kafka's TimeIndexTest scenarios (TI-*), the reserved last slot, and bytes on disk."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from seglog.indexes import (
    CorruptIndexError,
    IndexFullError,
    IndexOffsetOverflowError,
    InvalidOffsetError,
    InvalidTimestampError,
    SlotOutOfRangeError,
    TimeIndex,
    TimestampOffset,
)

BASE = 45


@pytest.fixture
def tix(tmp_path: Path):  # type: ignore[no-untyped-def]
    index = TimeIndex(tmp_path / "00000000000000000045.timeindex", BASE, max_index_size=30 * 12)
    yield index
    index.close()


def append_entries(index: TimeIndex, n: int) -> None:
    for i in range(1, n + 1):
        index.maybe_append(i * 10, i * 10 + BASE)


def test_lookup(tix: TimeIndex) -> None:
    assert tix.lookup(100) == TimestampOffset(-1, BASE)  # TI-1
    append_entries(tix, 29)
    assert tix.lookup(9) == (-1, BASE)
    assert tix.lookup(25) == (20, 65)
    assert tix.lookup(30) == (30, 75)
    assert tix.lookup(10**15) == (290, 335)


def test_entry(tix: TimeIndex) -> None:
    with pytest.raises(SlotOutOfRangeError):  # TI-3
        tix.entry(0)
    append_entries(tix, 29)  # TI-2
    assert [tix.entry(i) for i in range(4)] == [(10, 55), (20, 65), (30, 75), (40, 85)]


def test_truncate(tix: TimeIndex) -> None:
    append_entries(tix, 29)  # TI-4
    tix.truncate()
    assert tix.entries == 0
    assert tix.last_entry == (-1, BASE)
    append_entries(tix, 29)
    tix.truncate_to(10 + BASE)
    assert tix.entries == 0
    append_entries(tix, 29)
    tix.truncate_to(70)  # between (20, 65) and (30, 75): the floor entry stays
    assert (tix.entries, tix.last_entry) == (2, (20, 65))
    tix.truncate_to(10**9)
    assert tix.entries == 2


def test_append_rules_and_the_reserved_last_slot(tix: TimeIndex) -> None:
    assert not tix.is_full  # TI-7
    append_entries(tix, 29)  # TI-5
    assert tix.is_full and tix.entries == tix.max_entries - 1
    with pytest.raises(IndexFullError):
        tix.maybe_append(10000, 1000)
    with pytest.raises(InvalidOffsetError, match="280"):
        tix.maybe_append(10000, (30 - 2) * 10, skip_full_check=True)
    tix.maybe_append(10000, 1000, skip_full_check=True)
    assert tix.last_entry == (10000, 1000)
    with pytest.raises(IndexFullError):  # not even the reserved slot is left
        tix.maybe_append(10001, 1001, skip_full_check=True)


def test_equal_timestamp_is_skipped_and_lower_one_refused(tix: TimeIndex) -> None:
    tix.maybe_append(-1, BASE)  # D-9: NO_TIMESTAMP on an empty index is never written
    assert tix.entries == 0
    tix.maybe_append(100, 50)
    tix.maybe_append(100, 60)  # D-8: same timestamp, later offset: nothing new
    assert (tix.entries, tix.last_entry) == (1, (100, 50))
    tix.maybe_append(101, 50)  # same offset, larger timestamp: appended
    assert tix.last_entry == (101, 50)
    with pytest.raises(InvalidTimestampError, match="99"):
        tix.maybe_append(99, 70)
    with pytest.raises(InvalidOffsetError):
        tix.maybe_append(200, 49)
    with pytest.raises(IndexOffsetOverflowError):
        tix.maybe_append(300, BASE + 2**31)


def test_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000045.timeindex"
    with TimeIndex(path, BASE, max_index_size=360) as index:  # TI-6
        index.sanity_check()
        append_entries(index, 5)
        index.sanity_check()
    good = path.read_bytes()
    with TimeIndex(path, BASE, max_index_size=360) as reopened:
        reopened.sanity_check()
        assert reopened.last_entry == (50, 95)
    bad_cases = {
        "last offset 44 is below base offset 45": good + struct.pack(">qi", 60, -1),
        "last timestamp 9 is below first timestamp 10": good + struct.pack(">qi", 9, 60),
        "length 59 is not a multiple of 12": good[:48] + b"\x00" * 11,
    }
    for message, data in bad_cases.items():
        path.write_bytes(data)
        with TimeIndex(path, BASE, writable=False) as index, pytest.raises(CorruptIndexError, match=message):
            index.sanity_check()


def test_last_entry(tix: TimeIndex) -> None:
    assert tix.last_entry == (-1, BASE)  # TI-8
    tix.maybe_append(1, 46)
    assert tix.last_entry == (1, 46)


def test_resize(tix: TimeIndex) -> None:
    assert tix.resize(360) is False  # TI-9
    assert tix.resize(180) is True and tix.max_entries == 15
    assert tix.resize(720) is True and tix.max_entries == 60


def test_entry_layout_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "x.timeindex"
    with TimeIndex(path, BASE, max_index_size=360) as index:  # TI-10
        assert index.entry_size == 12
        index.maybe_append(1, 46)
        assert index.entry(0) == (1, 46)
    assert path.read_bytes() == struct.pack(">qi", 1, 1) == bytes.fromhex("0000000000000001 00000001")


def test_last_entry_is_reloaded_after_reopen_and_truncate(tmp_path: Path) -> None:
    path = tmp_path / "x.timeindex"
    with TimeIndex(path, 0, max_index_size=120) as index:
        for ts, off in ((100, 1), (200, 5), (300, 9)):
            index.maybe_append(ts, off)
    with TimeIndex(path, 0, max_index_size=120) as index:
        assert index.last_entry == (300, 9)
        index.truncate_to(5)
        assert index.last_entry == (100, 1)
        index.reset()
        assert (index.entries, index.last_entry, index.max_entries) == (0, (-1, 0), 10)


def test_full_after_reopen_of_trimmed_file(tmp_path: Path) -> None:
    # D-5: 36 bytes = 3 slots, 2 entries: full because the last slot is reserved.
    path = tmp_path / "x.timeindex"
    with TimeIndex(path, 0, max_index_size=36) as index:
        index.maybe_append(10, 1)
        index.maybe_append(20, 2)
        assert index.is_full
    with TimeIndex(path, 0) as index:
        assert index.is_full and index.max_entries == 2


def test_truncate_to_removes_every_entry_of_a_repeated_offset(tix: TimeIndex) -> None:
    # Same offset, larger timestamp is a valid append; truncating to that offset removes the whole run.
    for ts, off in ((10, 50), (20, 50), (30, 50), (40, 60)):
        tix.maybe_append(ts, off)
    tix.truncate_to(50)
    assert (tix.entries, tix.last_entry) == (0, (-1, BASE))
    for ts, off in ((10, 46), (20, 50), (30, 50), (40, 60)):
        tix.maybe_append(ts, off)
    tix.truncate_to(50)
    assert (tix.entries, tix.last_entry) == (1, (10, 46))


def test_full_sanity_check_finds_an_entry_out_of_order_in_the_middle(tmp_path: Path) -> None:
    path = tmp_path / "x.timeindex"
    with TimeIndex(path, BASE, max_index_size=360) as index:
        append_entries(index, 5)
        index.sanity_check(full=True)
    data = bytearray(path.read_bytes())
    data[24:36] = struct.pack(">qi", 15, 30)  # slot 2: timestamp 15 after 20
    path.write_bytes(bytes(data))
    with TimeIndex(path, BASE, writable=False) as index:
        index.sanity_check()
        with pytest.raises(CorruptIndexError, match=r"entry 2 \(timestamp 15, offset 75\) does not follow"):
            index.sanity_check(full=True)
    data[24:36] = struct.pack(">qi", 30, 5)  # slot 2: offset 50 after 65
    path.write_bytes(bytes(data))
    with TimeIndex(path, BASE, writable=False) as index, pytest.raises(CorruptIndexError, match="entry 2"):
        index.sanity_check(full=True)
