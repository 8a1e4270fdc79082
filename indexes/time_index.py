"""The time index (``.timeindex``): sparse map from timestamp to offset.

Owns: :class:`TimeIndex` and its entry value :class:`TimestampOffset`.

Must not import: ``segments``, ``engine`` or ``tools``.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

from seglog.indexes.abstract import INT32_MAX, AbstractIndex
from seglog.indexes.errors import IndexFullError, InvalidOffsetError, InvalidTimestampError
from seglog.indexes.search import bisect_floor, warm_entries

__all__ = ["NO_TIMESTAMP", "TIME_ENTRY", "TimeIndex", "TimestampOffset"]

#: One ``.timeindex`` entry: big-endian int64 timestamp (ms), int32 relative offset.
#: Part of the on-disk format (byte-compatible with Kafka).
TIME_ENTRY: Final = struct.Struct(">qi")
_OFFSET: Final = struct.Struct(">i")  # the value column of TIME_ENTRY
_OFFSET_FIELD: Final = 8  # byte offset of the relative offset inside an entry (format)
_WARM: Final = warm_entries(TIME_ENTRY.size)  # 682 entries in Kafka's 8192-byte warm section

#: Kafka's "no timestamp" value (RecordBatch.NO_TIMESTAMP).
NO_TIMESTAMP: Final = -1


class TimestampOffset(NamedTuple):
    """A timestamp (ms) and an offset: no record before ``offset`` has a larger timestamp."""

    timestamp: int
    offset: int


_new_tuple: Final = tuple.__new__


class TimeIndex(AbstractIndex[TimestampOffset]):
    """Sparse time index of one segment: ``(timestamp, offset)`` pairs, both increasing.

    On disk: 12-byte entries, big-endian ``int64 timestamp`` (ms since the
    epoch) and ``int32 relative_offset``, no header and no checksum,
    preallocated to ``max_index_size`` rounded down to a multiple of 12 and
    trimmed at close (Kafka's ``.timeindex``, byte for byte). An entry
    ``(T, O)`` says: the largest timestamp among records before offset ``O`` is
    ``T``, so any record with a timestamp above ``T`` is at or after ``O``.
    Timestamps strictly increase from entry to entry (an append that does not
    raise the timestamp is skipped); offsets never decrease. The last slot is
    reserved for the entry the segment writes when it rolls or closes
    (``maybe_append(..., skip_full_check=True)``), so :attr:`is_full` is true
    one slot early.

    In memory, after the first lookup: the mirror of :class:`AbstractIndex`,
    ``array('q')`` timestamps and ``array('i')`` relative offsets (12 bytes per entry).

    Concurrency: as :class:`AbstractIndex` (one lock; any thread).
    """

    entry_size = TIME_ENTRY.size
    _offset_column = (_OFFSET, _OFFSET_FIELD)
    _key_field = (8, 0)
    _value_field = (4, _OFFSET_FIELD)

    _last_entry: TimestampOffset

    def _reload_last(self) -> None:
        if self._entries == 0:
            self._last_entry = TimestampOffset(NO_TIMESTAMP, self._base_offset)
        else:
            self._last_entry = self._parse(self._entries - 1)

    def _parse(self, slot: int) -> TimestampOffset:
        timestamp, rel = TIME_ENTRY.unpack_from(self._view(), slot * TIME_ENTRY.size)
        # tuple.__new__ skips NamedTuple's Python-level __new__ (100 ns instead of 215).
        return _new_tuple(TimestampOffset, (timestamp, self._base_offset + rel))

    @property
    def is_full(self) -> bool:
        """Whether only the reserved last slot (or none) is free."""
        return self._entries >= self._length // self.entry_size - 1

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or ``(-1, base_offset)`` when the index is empty."""
        return self._last_entry

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp ``<= target_timestamp``.

        Returns ``(-1, base_offset)`` when the index is empty or every entry is
        above the target: the scan for the target then starts at the base offset.

        Raises:
            ClosedError: the index is closed.
        """
        # acquire/try/release rather than `with`: a measurable part of a lookup, on every call.
        lock = self._lock
        lock.acquire()
        try:
            timestamps, offsets = self._mirror or self._load_mirror()  # built on the first lookup; ClosedError
            slot = bisect_floor(timestamps, self._entries, target_timestamp, _WARM)
            if slot is None:
                return _new_tuple(TimestampOffset, (NO_TIMESTAMP, self._base_offset))
            return _new_tuple(TimestampOffset, (timestamps[slot], self._base_offset + offsets[slot]))
        finally:
            lock.release()

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Add ``(timestamp, offset)`` if ``timestamp`` is above the last entry's; otherwise do nothing.

        ``skip_full_check=True`` lets the roll/close entry use the reserved last slot.

        Raises:
            IndexFullError: the index is full and ``skip_full_check`` is false,
                or not even the reserved slot is free.
            InvalidOffsetError: ``offset`` is below the last entry's offset.
            InvalidTimestampError: ``timestamp`` is below the last entry's timestamp.
            IndexOffsetOverflowError: ``offset - base_offset`` is outside ``[0, 2**31-1]``.
            StorageError: no disk space for the entry (see :meth:`reserve`); nothing was written.
            ClosedError, ReadOnlyIndexError.
        """
        with self._lock:
            if self._closed or not self._writable:
                self._check_writable()
            entries = self._entries
            free = self._length // TIME_ENTRY.size - entries  # the reserved slot counts only at roll
            if free <= 0 or (free == 1 and not skip_full_check):
                raise IndexFullError(
                    f"{self._path}: cannot append timestamp {timestamp} at offset {offset}, the index is "
                    f"full ({entries} entries in {self._length} bytes); roll the segment"
                )
            last_timestamp, last_offset = self._last_entry
            if entries and offset < last_offset:
                raise InvalidOffsetError(
                    f"{self._path}: cannot append offset {offset} (timestamp {timestamp}), it is below the "
                    f"last offset {last_offset}; offsets in a time index must not decrease"
                )
            if entries and timestamp < last_timestamp:
                raise InvalidTimestampError(
                    f"{self._path}: cannot append timestamp {timestamp} (offset {offset}), it is below the "
                    f"last timestamp {last_timestamp}; append the largest timestamp seen so far"
                )
            # Only a larger timestamp is new information; an equal one (the roll
            # entry repeated at close, or -1 on an empty index) is skipped.
            if timestamp > last_timestamp:
                relative = offset - self._base_offset
                if not 0 <= relative <= INT32_MAX:
                    self.relative_offset(offset)  # raises IndexOffsetOverflowError with the message
                view = self._view()  # first: an unmapped file is checked before anything is written to it
                end = (entries + 1) * TIME_ENTRY.size
                if end > self._prepared:
                    self._reserve(end, ahead=False)  # a store into a hole on a full disk would be SIGBUS; StorageError
                TIME_ENTRY.pack_into(view, entries * TIME_ENTRY.size, timestamp, relative)
                self._entries = entries + 1
                self._last_entry = _new_tuple(TimestampOffset, (timestamp, offset))
                self._mirror_append(timestamp, relative)

    def _order_problem(self) -> str | None:
        # Timestamps strictly increase; relative offsets are >= 0 and never decrease.
        previous_ts, previous_rel = NO_TIMESTAMP, 0
        data = self._view()[: self.size_bytes]
        for slot, (timestamp, rel) in enumerate(TIME_ENTRY.iter_unpack(data)):
            if timestamp <= previous_ts or rel < previous_rel:
                return (
                    f"entry {slot} (timestamp {timestamp}, offset {self._base_offset + rel}) does not follow "
                    f"entry {slot - 1} (timestamp {previous_ts}, offset {self._base_offset + previous_rel})"
                    if slot
                    else f"entry 0 has timestamp {timestamp} or offset {self._base_offset + rel} out of range"
                )
            previous_ts, previous_rel = timestamp, rel
        return None

    def _entry_problem(self) -> str | None:
        first_timestamp = self._parse(0).timestamp
        if self._last_entry.timestamp < first_timestamp:
            return f"last timestamp {self._last_entry.timestamp} is below first timestamp {first_timestamp}"
        return super()._entry_problem()
