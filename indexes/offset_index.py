"""The offset index (``.index``): sparse map from offset to position in the ``.log``.

Owns: :class:`OffsetIndex` and its entry value :class:`OffsetPosition`.

Must not import: ``segments``, ``engine`` or ``tools``.
"""

from __future__ import annotations

import struct
from bisect import bisect_left
from typing import Final, NamedTuple

from seglog.indexes.abstract import INT32_MAX, AbstractIndex
from seglog.indexes.errors import IndexFullError, InvalidOffsetError
from seglog.indexes.search import bisect_ceiling, bisect_floor, smallest_upper_bound, warm_entries

__all__ = ["OFFSET_ENTRY", "OffsetIndex", "OffsetPosition"]

#: One ``.index`` entry: big-endian int32 relative offset, int32 position.
#: Part of the on-disk format (byte-compatible with Kafka).
OFFSET_ENTRY: Final = struct.Struct(">ii")
_KEY: Final = struct.Struct(">i")  # one int32 column of OFFSET_ENTRY
_POSITION_FIELD: Final = 4  # byte offset of the position inside an entry (format)
_WARM: Final = warm_entries(OFFSET_ENTRY.size)  # 1024 entries in Kafka's 8192-byte warm section


class OffsetPosition(NamedTuple):
    """An offset and the byte position in the ``.log`` of the batch that holds it."""

    offset: int
    position: int


_new_tuple: Final = tuple.__new__


class OffsetIndex(AbstractIndex[OffsetPosition]):
    """Sparse offset index of one segment: ``(offset, position)`` pairs in offset order.

    On disk: 8-byte entries, big-endian ``int32 relative_offset`` (offset minus
    the base offset) and ``int32 position`` (byte position in the ``.log`` of the
    batch start), no header and no checksum, preallocated to ``max_index_size``
    rounded down to a multiple of 8 and trimmed at close (Kafka's ``.index``,
    byte for byte). The segment writes one entry per ``index_interval_bytes`` of
    log: the batch's last offset and its start position. Offsets strictly
    increase; positions never decrease.

    In memory, after the first lookup: the mirror of :class:`AbstractIndex`,
    ``array('i')`` relative offsets and ``array('i')`` positions (8 bytes per entry).

    Concurrency: as :class:`AbstractIndex` (one lock; any thread).
    """

    entry_size = OFFSET_ENTRY.size
    _offset_column = (_KEY, 0)
    _key_field = (4, 0)
    _value_field = (4, _POSITION_FIELD)

    _last_offset: int

    def _reload_last(self) -> None:
        last = self._entries - 1
        self._last_offset = self._base_offset + (self._relative_offset_at(last) if last >= 0 else 0)

    def _parse(self, slot: int) -> OffsetPosition:
        rel, position = OFFSET_ENTRY.unpack_from(self._view(), slot * OFFSET_ENTRY.size)
        # tuple.__new__ skips NamedTuple's Python-level __new__: 100 ns instead of 215 per result.
        return _new_tuple(OffsetPosition, (self._base_offset + rel, position))

    @property
    def last_offset(self) -> int:
        """Offset of the last entry, or the base offset when the index is empty."""
        return self._last_offset

    def _order_problem(self) -> str | None:
        # Relative offsets are >= 0 and strictly increase; positions are >= 0 and never decrease.
        previous_rel, previous_position = -1, 0
        data = self._view()[: self.size_bytes]
        for slot, (rel, position) in enumerate(OFFSET_ENTRY.iter_unpack(data)):
            if rel <= previous_rel or position < previous_position:
                return (
                    f"entry {slot} (offset {self._base_offset + rel}, position {position}) does not follow "
                    f"entry {slot - 1} (offset {self._base_offset + previous_rel}, position {previous_position})"
                    if slot
                    else f"entry 0 has offset {self._base_offset + rel} below base offset {self._base_offset}"
                )
            previous_rel, previous_position = rel, position
        return None

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset ``<= target_offset``.

        Returns ``(base_offset, 0)`` when the index is empty or every entry is
        above the target: the scan for the target then starts at the file start.

        Raises:
            ClosedError: the index is closed.
        """
        # acquire/try/release rather than `with`: a measurable part of a lookup, on every call.
        lock = self._lock
        lock.acquire()
        try:
            keys, positions = self._mirror or self._load_mirror()  # built on the first lookup; ClosedError
            base = self._base_offset
            slot = bisect_floor(keys, self._entries, target_offset - base, _WARM)
            if slot is None:
                return _new_tuple(OffsetPosition, (base, 0))
            return _new_tuple(OffsetPosition, (base + keys[slot], positions[slot]))
        finally:
            lock.release()

    def lookup_ceiling(self, target_offset: int) -> OffsetPosition | None:
        """The entry with the smallest offset ``>= target_offset``, or ``None``.

        Raises:
            ClosedError: the index is closed.
        """
        lock = self._lock
        lock.acquire()
        try:
            keys, positions = self._mirror or self._load_mirror()
            base = self._base_offset
            slot = bisect_ceiling(keys, self._entries, target_offset - base, _WARM)
            if slot is None:
                return None
            return _new_tuple(OffsetPosition, (base + keys[slot], positions[slot]))
        finally:
            lock.release()

    def ceiling_span(self, target_offset: int) -> tuple[int, int, int] | None:
        """Where to read the batch holding ``target_offset``, when an entry says so: ``(position, bytes, offset)``.

        The entry with the smallest offset ``>= target_offset`` (an entry
        carries its batch's last offset and start position, so that batch is
        the first indexed one reaching the target), the bytes from its
        position to the next entry's (``0`` when it is the last entry) and the
        entry's offset, which the reader checks against the batch it finds
        there (an index file is not trusted: it may lie). When
        that batch starts at or below the target, a reader finds it with one
        read and one header instead of walking from the floor entry; when
        unindexed batches lie between, it must walk (the header tells it).
        ``None`` when no entry reaches the target.

        Raises:
            ClosedError: the index is closed.
        """
        lock = self._lock
        lock.acquire()
        try:
            keys, positions = self._mirror or self._load_mirror()
            entries = self._entries
            # One C bisect over the whole mirror (the answer of bisect_ceiling for the strictly increasing
            # keys a checked index holds, without its hot-section split and Python frame: a point
            # read pays this on every call, where a few percent decide how it compares with sqlite).
            slot = bisect_left(keys, target_offset - self._base_offset, 0, entries)
            if slot >= entries:
                return None
            position = positions[slot]
            # A damaged index that passed the O(1) open check (Kafka's: the last entry and the length)
            # may hold positions out of order; a negative span would become a negative read size,
            # so it reads as 0, "not known", and the reader finds its way by the batch headers.
            return (
                position,
                max(positions[slot + 1] - position, 0) if slot + 1 < entries else 0,
                self._base_offset + keys[slot],
            )
        finally:
            lock.release()

    def fetch_upper_bound_offset(self, fetch_offset: OffsetPosition, fetch_size: int) -> OffsetPosition | None:
        """The first entry whose position is ``>= fetch_offset.position + fetch_size``, or ``None``.

        Tells a reader which offset a fetch of ``fetch_size`` bytes starting at
        ``fetch_offset`` cannot reach (Kafka's ``fetchUpperBoundOffset``).

        Raises:
            ClosedError: the index is closed.
        """
        with self._lock:
            if self._closed:
                self._check_open()
            slot = smallest_upper_bound(
                self._view(),
                self._entries,
                fetch_offset.position + fetch_size,
                key=_KEY,
                stride=8,
                field=_POSITION_FIELD,
            )
            return None if slot is None else self._parse(slot)

    def append(self, offset: int, position: int) -> None:
        """Add ``(offset, position)`` after the last entry.

        Raises:
            IndexFullError: no free slot (checked first; the segment must roll).
            InvalidOffsetError: ``offset`` is not above :attr:`last_offset` (non-empty index).
            IndexOffsetOverflowError: ``offset - base_offset`` is outside ``[0, 2**31-1]``.
            StorageError: no disk space for the entry (see :meth:`reserve`); nothing was written.
            ClosedError, ReadOnlyIndexError.
        """
        with self._lock:
            if self._closed or not self._writable:
                self._check_writable()
            entries = self._entries
            if entries >= self._length // OFFSET_ENTRY.size:
                raise IndexFullError(
                    f"{self._path}: cannot append offset {offset}, the index is full "
                    f"({entries} entries in {self._length} bytes); roll the segment"
                )
            if entries and offset <= self._last_offset:
                raise InvalidOffsetError(
                    f"{self._path}: cannot append offset {offset} (position {position}), it is not above "
                    f"the last offset {self._last_offset}; offsets in an index must increase"
                )
            relative = offset - self._base_offset
            if not 0 <= relative <= INT32_MAX:
                self.relative_offset(offset)  # raises IndexOffsetOverflowError with the message
            # Positions come from the segment, which never exceeds segment_bytes (an int32).
            assert 0 <= position <= INT32_MAX, position
            view = self._view()  # first: an unmapped file is checked before anything is written to it
            end = (entries + 1) * OFFSET_ENTRY.size
            if end > self._prepared:
                self._reserve(end, ahead=False)  # a store into a hole on a full disk would be SIGBUS; StorageError
            OFFSET_ENTRY.pack_into(view, entries * OFFSET_ENTRY.size, relative, position)
            self._entries += 1
            self._last_offset = offset
            self._mirror_append(relative, position)
