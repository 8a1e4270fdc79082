"""The warm-section binary search shared by every mmap'd index.

Owns: pure, synchronous functions that find a slot in a sorted column of
fixed-width big-endian keys held in any buffer (an ``mmap``, ``bytes``, a
``bytearray``). They know nothing of files, offsets or timestamps: a *column*
is "the int found at ``slot * stride + field`` by ``key.unpack_from``".

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
from mmap import mmap
from typing import Final

__all__ = [
    "WARM_SECTION_BYTES",
    "Buffer",
    "largest_lower_bound",
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
    ``warm_entries(stride)`` slots are searched first. The loop is inlined, with
    one comparison per probe, because it runs on every fetch: together with
    cheaper result tuples this took a cold ``OffsetIndex.lookup`` from 1.54x to
    1.42x of a bare struct search (``bench/bench_indexes.py``, 100k entries).
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
