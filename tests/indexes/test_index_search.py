"""indexes.search: warm-section floor/ceiling search (struct and native mirror) against a bisect model, no files."""

from __future__ import annotations

import bisect
import struct
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.indexes.search import (
    WARM_SECTION_BYTES,
    bisect_ceiling,
    bisect_floor,
    largest_lower_bound,
    native_column,
    smallest_upper_bound,
    warm_entries,
)

PAIR = struct.Struct(">ii")
KEY = struct.Struct(">i")


def column(keys: list[int], values: list[int] | None = None) -> bytes:
    values = values if values is not None else [0] * len(keys)
    return b"".join(PAIR.pack(k, v) for k, v in zip(keys, values, strict=True))


def floor_model(keys: list[int], target: int) -> int | None:
    i = bisect.bisect_right(keys, target)
    return i - 1 if i else None


def ceiling_model(keys: list[int], target: int) -> int | None:
    i = bisect.bisect_left(keys, target)
    return i if i < len(keys) else None


def test_warm_entries_match_kafka() -> None:
    assert WARM_SECTION_BYTES == 8192
    assert warm_entries(8) == 1024
    assert warm_entries(12) == 682


def test_empty_column_has_no_bounds() -> None:
    assert largest_lower_bound(b"", 0, 5, key=KEY, stride=8) is None
    assert smallest_upper_bound(b"", 0, 5, key=KEY, stride=8) is None


def test_single_entry_exact_hit_is_found_both_ways() -> None:
    # Kafka's SMALLEST_UPPER_BOUND misses this exact hit; seglog must not.
    buf = column([7])
    assert largest_lower_bound(buf, 1, 7, key=KEY, stride=8) == 0
    assert smallest_upper_bound(buf, 1, 7, key=KEY, stride=8) == 0
    assert smallest_upper_bound(buf, 1, 6, key=KEY, stride=8) == 0
    assert smallest_upper_bound(buf, 1, 8, key=KEY, stride=8) is None
    assert largest_lower_bound(buf, 1, 6, key=KEY, stride=8) is None


def test_cold_and_warm_paths_on_2000_entries() -> None:
    # D-10: 2000 entries, first hot entry 2000 - 1 - 1024 = 975.
    keys = list(range(0, 20000, 10))
    buf = column(keys)
    for target in (10, 15, 9745, 9750, 9755, 15000, 15001, 19990, 25000, -1):
        assert largest_lower_bound(buf, 2000, target, key=KEY, stride=8) == floor_model(keys, target), target
        assert smallest_upper_bound(buf, 2000, target, key=KEY, stride=8) == ceiling_model(keys, target)


def test_entries_limits_the_search_to_the_valid_prefix() -> None:
    buf = column([1, 2, 3, 0, 0])  # zeroed preallocated slots after 3 entries
    assert largest_lower_bound(buf, 3, 100, key=KEY, stride=8) == 2
    assert smallest_upper_bound(buf, 3, 4, key=KEY, stride=8) is None


def test_value_column_is_searched_with_field() -> None:
    buf = column([1, 2, 3, 4], [0, 10, 23, 37])
    assert smallest_upper_bound(buf, 4, 22, key=KEY, stride=8, field=4) == 2
    assert smallest_upper_bound(buf, 4, 23, key=KEY, stride=8, field=4) == 2
    assert largest_lower_bound(buf, 4, 36, key=KEY, stride=8, field=4) == 2


def test_twelve_byte_stride_with_int64_keys() -> None:
    entry = struct.Struct(">qi")
    keys = [1_700_000_000_000 + 29 * i for i in range(1500)]
    buf = b"".join(entry.pack(k, i) for i, k in enumerate(keys))
    ts_key = struct.Struct(">q")
    for target in (keys[0] - 1, keys[0], keys[3] + 1, keys[900], keys[-1], keys[-1] + 1):
        assert largest_lower_bound(buf, len(keys), target, key=ts_key, stride=12) == floor_model(keys, target)


@settings(max_examples=200, deadline=None)
@given(
    keys=st.lists(st.integers(-(2**31), 2**31 - 1), max_size=1500, unique=True).map(sorted),
    target=st.integers(-(2**31) - 1, 2**31),
)
def test_matches_bisect_model(keys: list[int], target: int) -> None:
    buf = column(keys)
    assert largest_lower_bound(buf, len(keys), target, key=KEY, stride=8) == floor_model(keys, target)
    assert smallest_upper_bound(buf, len(keys), target, key=KEY, stride=8) == ceiling_model(keys, target)


@settings(max_examples=100, deadline=None)
@given(keys=st.lists(st.integers(0, 5000), min_size=1, max_size=1300, unique=True).map(sorted), data=st.data())
def test_every_stored_key_is_found_exactly(keys: list[int], data: st.DataObject) -> None:
    buf = column(keys)
    slot = data.draw(st.integers(0, len(keys) - 1))
    assert largest_lower_bound(buf, len(keys), keys[slot], key=KEY, stride=8) == slot
    assert smallest_upper_bound(buf, len(keys), keys[slot], key=KEY, stride=8) == slot


# -- the native mirror: decoding a column, and the C-bisect search over it ---------------------


def test_native_column_decodes_both_widths_at_any_field() -> None:
    entry = struct.Struct(">qi")
    rows = [(-(2**63), -(2**31)), (-1, -1), (0, 0), (1_700_000_000_000, 7), (2**63 - 1, 2**31 - 1)]
    buf = b"".join(entry.pack(t, o) for t, o in rows) + b"\xff" * 12  # a slot past `entries` is ignored
    timestamps = native_column(buf, len(rows), stride=12, field=0, width=8)
    offsets = native_column(buf, len(rows), stride=12, field=8, width=4)
    assert (timestamps.typecode, offsets.typecode) == ("q", "i")
    assert timestamps.tolist() == [t for t, _ in rows]
    assert offsets.tolist() == [o for _, o in rows]


def test_native_column_of_nothing_is_empty_and_bad_shapes_are_refused() -> None:
    assert native_column(b"", 0, stride=8, field=0, width=4).tolist() == []
    with pytest.raises(ValueError, match="no 3 entries"):
        native_column(column([1, 2]), 3, stride=8, field=0, width=4)
    with pytest.raises(ValueError, match="no 1 entries"):
        native_column(column([1]), 1, stride=8, field=6, width=4)  # the field runs past the entry
    with pytest.raises(ValueError, match="2-byte"):
        native_column(column([1]), 1, stride=8, field=0, width=2)


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**31), 2**31 - 1)), max_size=300))
def test_native_column_matches_struct(rows: list[tuple[int, int]]) -> None:
    buf = b"".join(PAIR.pack(k, v) for k, v in rows)
    assert native_column(buf, len(rows), stride=8, field=0, width=4).tolist() == [k for k, _ in rows]
    assert native_column(buf, len(rows), stride=8, field=4, width=4).tolist() == [v for _, v in rows]


def test_bisect_search_on_empty_and_single_entry() -> None:
    empty = array("i")
    assert bisect_floor(empty, 0, 5, 1024) is None
    assert bisect_ceiling(empty, 0, 5, 1024) is None
    one = array("i", [7])
    assert [bisect_floor(one, 1, t, 1024) for t in (6, 7, 8)] == [None, 0, 0]
    assert [bisect_ceiling(one, 1, t, 1024) for t in (6, 7, 8)] == [0, 0, None]  # exact hit found


def test_bisect_search_cold_and_warm_paths_on_2000_entries() -> None:
    # D-10 again, on the mirror: first hot slot 2000 - 1 - 1024 = 975.
    keys = list(range(0, 20000, 10))
    mirror = array("i", keys)
    buf = column(keys)
    for target in (-1, 0, 10, 15, 9745, 9750, 9755, 15000, 15001, 19990, 25000):
        assert bisect_floor(mirror, 2000, target, 1024) == floor_model(keys, target), target
        assert bisect_floor(mirror, 2000, target, 1024) == largest_lower_bound(buf, 2000, target, key=KEY, stride=8)
        assert bisect_ceiling(mirror, 2000, target, 1024) == ceiling_model(keys, target), target


@settings(max_examples=200, deadline=None)
@given(
    keys=st.lists(st.integers(-(2**31), 2**31 - 1), max_size=200, unique=True).map(sorted),
    extra=st.lists(st.integers(-(2**31), 2**31 - 1), max_size=3),
    target=st.integers(-(2**31) - 1, 2**31),
    warm=st.integers(0, 40),
)
def test_bisect_search_matches_bisect_model_and_struct_search(
    keys: list[int], extra: list[int], target: int, warm: int
) -> None:
    # Small warm sections exercise both steps on short columns; `extra` items past `entries` must be ignored.
    mirror = array("i", keys + extra)
    assert bisect_floor(mirror, len(keys), target, warm) == floor_model(keys, target)
    assert bisect_ceiling(mirror, len(keys), target, warm) == ceiling_model(keys, target)
    buf = column(keys)
    assert bisect_floor(mirror, len(keys), target, warm) == largest_lower_bound(
        buf, len(keys), target, key=KEY, stride=8
    )
    assert bisect_ceiling(mirror, len(keys), target, warm) == smallest_upper_bound(
        buf, len(keys), target, key=KEY, stride=8
    )


@settings(max_examples=50, deadline=None)
@given(keys=st.lists(st.integers(0, 10**6), min_size=1, max_size=1500, unique=True).map(sorted), data=st.data())
def test_bisect_search_with_kafkas_warm_section_finds_every_key(keys: list[int], data: st.DataObject) -> None:
    mirror = array("q", keys)
    slot = data.draw(st.integers(0, len(keys) - 1))
    for warm in (warm_entries(8), warm_entries(12)):
        assert bisect_floor(mirror, len(keys), keys[slot], warm) == slot
        assert bisect_ceiling(mirror, len(keys), keys[slot], warm) == slot
        assert bisect_floor(mirror, len(keys), keys[slot] + 1, warm) == floor_model(keys, keys[slot] + 1)
        assert bisect_ceiling(mirror, len(keys), keys[slot] - 1, warm) == ceiling_model(keys, keys[slot] - 1)
