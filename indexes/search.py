"""The warm-section binary search shared by every mmap'd index.

Owns: pure, synchronous functions that find a slot in a sorted column of
fixed-width big-endian keys held in any buffer (an ``mmap``, ``bytes``, a
``bytearray``), the same search with C ``bisect`` over a native in-memory
copy of a column (:func:`bisect_floor`, :func:`bisect_ceiling`), and the
decoder that makes that copy (:func:`native_column`). They know nothing of
files, offsets or timestamps: a *column* is "the int found at
``slot * stride + field`` by ``key.unpack_from``".

Must not import: anything from seglog (this module is the bottom of the
bottom layer and is tested without files).

Why a warm section (Kafka ``AbstractIndex``): appends and most lookups (tailing
consumers, the segment's own translate-offset on append) hit the last entries.
A plain binary search over a 10 MiB index touches pages spread over the whole
file, which the OS may have evicted; searching the last 8192 bytes first keeps
the probes of the common case inside the last 2-3 pages (8192 / 8 = 1024 offset
entries, 8192 / 12 = 682 time entries), so they stay in the page cache. The
result is identical to a plain binary search; only the probe order differs.
"""

from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from mmap import mmap
from typing import Final

__all__ = [
    "WARM_SECTION_BYTES",
    "Buffer",
    "bisect_ceiling",
    "bisect_floor",
    "largest_lower_bound",
    "native_column",
    "smallest_upper_bound",
    "warm_entries",
]

#: Bytes at the tail of an index searched first (Kafka's choice: two to three
#: 4 KiB pages, small enough to stay cached, large enough to hold the entries
#: a tailing reader asks for). Behaviour, not format: changing it changes no byte.
WARM_SECTION_BYTES: Final = 8192

Buffer = bytes | bytearray | memoryview | mmap


def warm_entries(entry_size: int) -> int:
    """Number of entries in the warm section for entries of ``entry_size`` bytes."""
    return WARM_SECTION_BYTES // entry_size


def largest_lower_bound(
    buf: Buffer, entries: int, target: int, *, key: struct.Struct, stride: int, field: int = 0
) -> int | None:
    """Slot of the largest key ``<= target`` among the first ``entries`` slots, or ``None``.

    ``None`` means the column is empty or every key is above ``target``. Keys are
    read as ``key.unpack_from(buf, slot * stride + field)[0]`` and must be sorted
    (non-decreasing; with equal keys the last of the run is returned). The last
    ``warm_entries(stride)`` slots are searched first, one comparison per
    probe. Lookups use :func:`bisect_floor` over the native mirror instead
    (~3x faster); this one searches columns that have no mirror (positions in
    ``fetch_upper_bound_offset``, time-index offsets in ``truncate_to``) and is
    the reference the mirror is checked against.
    """
    if entries <= 0:
        return None
    unpack = key.unpack_from
    hi = entries - 1
    lo = max(0, hi - WARM_SECTION_BYTES // stride)  # Kafka's first hot entry
    if unpack(buf, lo * stride + field)[0] > target:
        # Not in the warm section: the cold part [0, lo - 1], if the target is in range at all.
        if lo == 0 or unpack(buf, field)[0] > target:
            return None
        lo, hi = 0, lo - 1
    # Invariant: key(lo) <= target; the answer is in [lo, hi].
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if unpack(buf, mid * stride + field)[0] <= target:
            lo = mid
        else:
            hi = mid - 1
    return lo


def smallest_upper_bound(
    buf: Buffer, entries: int, target: int, *, key: struct.Struct, stride: int, field: int = 0
) -> int | None:
    """Slot of the smallest key ``>= target`` among the first ``entries`` slots, or ``None``.

    ``None`` means the column is empty or every key is below ``target``. Unlike
    Kafka's ``SMALLEST_UPPER_BOUND``, an exact hit on the first slot of a search
    range is returned (Kafka returns the next slot there; it only uses this
    search on positions, where that does no harm). With duplicate keys an
    exact hit returns the last of the run, so keys should be strictly
    increasing (offsets, positions and time-index timestamps are).
    """
    floor = largest_lower_bound(buf, entries, target, key=key, stride=stride, field=field)
    if floor is None:
        return 0 if entries > 0 else None
    if key.unpack_from(buf, floor * stride + field)[0] == target:
        return floor
    return floor + 1 if floor + 1 < entries else None


#: ``array`` type codes of the native signed ints that hold a 4- or 8-byte
#: big-endian column (C ``int`` and ``long long``; 4 and 8 bytes on every
#: platform CPython supports, checked below).
_TYPECODES: Final = {4: "i", 8: "q"}
if any(array(code).itemsize != width for width, code in _TYPECODES.items()):  # pragma: no cover
    raise ImportError("indexes.search needs 4-byte 'i' and 8-byte 'q' arrays, this platform has other sizes")


def native_column(buf: Buffer, entries: int, *, stride: int, field: int, width: int) -> array[int]:
    """The big-endian signed ``width``-byte ints at ``slot * stride + field`` for the first ``entries`` slots.

    Returns a native ``array('i')`` (width 4) or ``array('q')`` (width 8), one
    item per slot, in slot order: the in-memory mirror that :func:`bisect_floor`
    and :func:`bisect_ceiling` search. Done with one strided slice per byte and
    one ``byteswap`` (all in C): an order of magnitude faster than
    ``struct.iter_unpack`` of the entries (``bench/bench_indexes.py`` prints both).

    Raises:
        ValueError: ``width`` is not 4 or 8, or ``buf`` is shorter than ``entries * stride``.
    """
    if width not in _TYPECODES:
        raise ValueError(f"no native array holds {width}-byte ints; use 4 or 8")
    column: array[int] = array(_TYPECODES[width])
    if entries <= 0:
        return column
    end = entries * stride
    if len(buf) < end or not 0 <= field <= stride - width:
        raise ValueError(f"a buffer of {len(buf)} bytes has no {entries} entries of {stride} bytes at field {field}")
    raw = bytearray(entries * width)
    for byte in range(width):  # byte `byte` of every item, big-endian order
        raw[byte::width] = buf[field + byte : end : stride]
    column.frombytes(raw)
    if sys.byteorder == "little":
        column.byteswap()
    return column


def bisect_floor(keys: Sequence[int], entries: int, target: int, warm: int) -> int | None:
    """Slot of the largest key ``<= target`` among ``keys[:entries]``, or ``None``; C ``bisect``.

    The same answer as :func:`largest_lower_bound` over the column that
    ``keys`` mirrors (with equal keys, the last of the run), found with the
    same two steps: the last ``warm + 1`` slots (Kafka's hot section: slots
    ``entries - 1 - warm`` to ``entries - 1``) when the target is not below
    their first key, else the cold part before them. Each step is one
    ``bisect_right`` in C, so a lookup costs one Python call plus ~20 C probes.
    """
    hi = entries
    lo = hi - 1 - warm  # Kafka's first hot slot
    if lo <= 0:
        lo = 0
    elif keys[lo] > target:
        hi, lo = lo, 0
    slot = bisect_right(keys, target, lo, hi) - 1
    return None if slot < 0 else slot


def bisect_ceiling(keys: Sequence[int], entries: int, target: int, warm: int) -> int | None:
    """Slot of the smallest key ``>= target`` among ``keys[:entries]``, or ``None``; C ``bisect``.

    Hot section first, as :func:`bisect_floor`. An exact hit is returned
    (seglog's deviation from Kafka's ``SMALLEST_UPPER_BOUND``, as in
    :func:`smallest_upper_bound`); with equal keys the first of the run is
    returned (``bisect_left``), which only differs from
    :func:`smallest_upper_bound` on keys that are not strictly increasing.
    """
    hi = entries
    lo = hi - 1 - warm
    if lo <= 0:
        lo = 0
    elif keys[lo] > target:
        hi, lo = lo, 0
    slot = bisect_left(keys, target, lo, hi)
    return None if slot >= entries else slot
