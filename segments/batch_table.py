"""In-memory tables of where each batch, and each record of a large batch, lies in a ``.log``.

Owns :class:`BatchTable` (one entry per batch of a segment: last offset, start
position, largest timestamp, running largest timestamp), :class:`RecordTable`
(one entry per record of one large batch whose CRC was verified: timestamp and
where its key and value bytes lie) and :class:`TableBudget`, the one bound on
the memory all tables of a process hold (least recently used tables go first).

Nothing here is trusted on its own: a table only says where to read, and the
reader checks the bytes it finds there against the table (the batch's
offsets, length and CRC field) before it uses them; any mismatch sends the
read back to the header walk, which decides. Pure and synchronous; the
segment (``seglog.segments.segment``) builds tables in a thread and installs
them on the event loop.

Must not import: ``engine`` or ``tools``.
"""

from __future__ import annotations

import threading
from array import array
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Callable
from typing import Final, NamedTuple

import msgpack

from seglog.segments._native import optional_c_module
from seglog.segments.batch import (
    CONTROL_BIT,
    HEADER_SIZE,
    INT64_MAX,
    LOG_OVERHEAD,
    MAGIC,
    BatchHeader,
    decode_batch,
    header_problem,
    read_header,
    verify_crc,
)
from seglog.segments.errors import CorruptRecordError
from seglog.segments.fileio import PRead

__all__ = [
    "BYTES_PER_BATCH",
    "DEFAULT_TABLE_BUDGET_BYTES",
    "WALK_MAX_BYTES",
    "BatchTable",
    "RecordTable",
    "TableBudget",
    "TableBuild",
    "build_record_table",
    "default_budget",
    "walk_batch_table",
]

# About 1.3 million batch entries (or 0.8 million records of large batches) across every segment of the
# process: a read of a segment whose table did not fit takes the header walk, as before tables existed.
DEFAULT_TABLE_BUDGET_BYTES: Final = 32 << 20
BYTES_PER_BATCH: Final = 32  # four int64 arrays (last offset, position, max timestamp, running max) ...
_BYTES_PER_RECORD: Final = 40  # timestamp, key position and length, value position and length
_RECORD_TABLE_OVERHEAD: Final = 256
# The walk reads this much at a time; a header beyond the window is read alone (a large batch's body
# is skipped, never read).
_WALK_WINDOW: Final = 256 * 1024
# One walk tables at most this much of a segment (a read past it walks on from there): a segment's first
# point read reads its headers, which with small batches means its whole file, so a large segment is
# tabled a part per read rather than all at once.
WALK_MAX_BYTES: Final = 16 << 20
_fast: Final = optional_c_module("_speedups")  # walk_headers: the walk's loop over plain headers


class TableBudget:
    """The bound on the bytes held by every table of the process: least recently used tables are dropped.

    Thread-safe (engines on several loops share it). A table is charged when
    installed (:meth:`charge`), touched when read (:meth:`touch`) and
    released when its segment truncates or closes (:meth:`release`); an
    evicted table's ``on_evict`` runs (it drops the owner's reference).
    """

    def __init__(self, limit_bytes: int) -> None:
        self._lock = threading.Lock()
        self._limit = limit_bytes
        self._used = 0
        self._tables: OrderedDict[object, tuple[int, Callable[[], None]]] = OrderedDict()

    @property
    def limit_bytes(self) -> int:
        return self._limit

    @property
    def used_bytes(self) -> int:
        """Bytes charged by the tables held now (never above :attr:`limit_bytes`)."""
        return self._used

    def set_limit(self, limit_bytes: int) -> None:
        """Change the bound (evicting at once down to it). ``0`` turns the tables off."""
        if limit_bytes < 0:
            raise ValueError(f"a table budget must be >= 0 bytes, got {limit_bytes}")
        evicted = []
        with self._lock:
            self._limit = limit_bytes
            evicted = self._evict_to(limit_bytes)
        for on_evict in evicted:
            on_evict()

    def charge(self, key: object, cost: int, on_evict: Callable[[], None]) -> bool:
        """Hold ``cost`` bytes for ``key`` (evicting older tables); ``False`` when it can never fit."""
        if cost > self._limit:
            return False
        with self._lock:
            old = self._tables.pop(key, None)
            if old is not None:
                self._used -= old[0]
            evicted = self._evict_to(self._limit - cost)
            self._tables[key] = (cost, on_evict)
            self._used += cost
        for drop in evicted:
            drop()
        return True

    def grow(self, key: object, extra: int) -> bool:
        """Charge ``extra`` more bytes to ``key``'s table; ``False`` (nothing charged) when it is not held."""
        with self._lock:
            held = self._tables.get(key)
            if held is None or held[0] + extra > self._limit:
                return False
            self._tables[key] = (held[0] + extra, held[1])
            self._used += extra
            self._tables.move_to_end(key)
            evicted = self._evict_to(self._limit, keep=key)
        for drop in evicted:
            drop()
        return True

    def touch(self, key: object) -> None:
        # No lock: move_to_end is one call under the GIL, and the sizes it would guard do not change.
        try:  # noqa: SIM105 -- not contextlib.suppress: three Python calls on every record-table read
            self._tables.move_to_end(key)
        except KeyError:
            pass

    def release(self, key: object) -> None:
        with self._lock:
            held = self._tables.pop(key, None)
            if held is not None:
                self._used -= held[0]

    def _evict_to(self, target: int, keep: object = None) -> list[Callable[[], None]]:
        evicted = []
        while self._used > target and self._tables:
            key, (cost, on_evict) = self._tables.popitem(last=False)
            if key is keep:  # the table being grown is the newest: keep it, evict the next
                self._tables[key] = (cost, on_evict)
                if len(self._tables) == 1:
                    break
                continue
            self._used -= cost
            evicted.append(on_evict)
        return evicted

    def __len__(self) -> int:
        return len(self._tables)


_DEFAULT_BUDGET = TableBudget(DEFAULT_TABLE_BUDGET_BYTES)


def default_budget() -> TableBudget:
    """The process-wide budget every segment's tables are charged to."""
    return _DEFAULT_BUDGET


class TableBuild(NamedTuple):
    """What a header walk found, for :meth:`BatchTable.extend` (built in a thread, installed on the loop)."""

    start: int  # position the walk began at (the table's end, or 0)
    end: int  # position after the last whole batch it tabled
    last_offsets: array[int]
    positions: array[int]
    max_timestamps: array[int]
    complete: bool  # it stopped at its byte limit or the end, not at a header that failed or the entry limit


class BatchTable:
    """One entry per batch of a segment from position 0 to :attr:`end`: a point read's one bisect.

    ``last_offsets[i]`` is the last offset of batch ``i``, ``positions[i]``
    its start (its size is up to the next start, or :attr:`end`),
    ``running_max[i]`` the largest timestamp of batches ``0..i`` (a time
    lookup's bisect) and ``max_timestamps[i]`` batch ``i``'s own. Batches
    follow on (each starts at the previous one's last offset + 1, the first at
    the segment's base offset), as the header walk requires.
    """

    __slots__ = ("base_offset", "end", "last_offsets", "max_timestamps", "positions", "running_max")

    def __init__(self, base_offset: int) -> None:
        self.base_offset = base_offset
        self.end = 0
        self.last_offsets: array[int] = array("q")
        self.positions: array[int] = array("q")
        self.max_timestamps: array[int] = array("q")
        self.running_max: array[int] = array("q")

    def __len__(self) -> int:
        return len(self.positions)

    @property
    def next_offset(self) -> int:
        return self.last_offsets[-1] + 1 if self.last_offsets else self.base_offset

    def extend(self, build: TableBuild) -> bool:
        """Add a walk's entries when it began at this table's end; ``False`` (unchanged) otherwise."""
        if build.start != self.end:
            return False
        top = self.running_max[-1] if self.running_max else -1
        running = self.running_max
        for ts in build.max_timestamps:
            top = max(top, ts)
            running.append(top)
        self.last_offsets.extend(build.last_offsets)
        self.positions.extend(build.positions)
        self.max_timestamps.extend(build.max_timestamps)
        self.end = build.end
        return True

    def add(self, position: int, size: int, last_offset: int, max_timestamp: int) -> bool:
        """Add one batch appended at this table's end; ``False`` (unchanged) when it is not there."""
        if position != self.end:
            return False
        top = self.running_max[-1] if self.running_max else -1
        self.last_offsets.append(last_offset)
        self.positions.append(position)
        self.max_timestamps.append(max_timestamp)
        self.running_max.append(max_timestamp if max_timestamp > top else top)
        self.end = position + size
        return True

    def find(self, offset: int) -> int:
        """The slot of the batch holding ``offset`` (``len(self)`` when past the table)."""
        return bisect_left(self.last_offsets, offset)

    def span(self, slot: int) -> tuple[int, int, int]:
        """``(first offset, position, size)`` of batch ``slot``."""
        position = self.positions[slot]
        following = self.positions[slot + 1] if slot + 1 < len(self.positions) else self.end
        first = self.last_offsets[slot - 1] + 1 if slot else self.base_offset
        return first, position, following - position

    def first_reaching(self, timestamp: int, slot: int) -> int:
        """The first slot from ``slot`` on whose batch has a timestamp >= ``timestamp`` (``len`` when none)."""
        slot = bisect_left(self.running_max, timestamp, slot)
        own = self.max_timestamps
        count = len(own)
        while slot < count and own[slot] < timestamp:  # the running max came from an earlier batch
            slot += 1
        return slot

    def cost_bytes(self) -> int:
        return len(self.positions) * BYTES_PER_BATCH


def walk_batch_table(
    pread: PRead, start: int, end: int, expected_base: int, max_entries: int, max_bytes: int = WALK_MAX_BYTES
) -> TableBuild:
    """Table the batches in ``[start, end)`` of a ``.log`` by their headers alone; blocking (in a thread).

    ``expected_base`` is the base offset the batch at ``start`` must have.
    Stops (the build then covers less) at the first header that does not
    read as the next batch (a length outside the file, offsets that do not
    follow on, any check of ``header_problem``) and after ``max_entries``
    batches: the walk only says where batches lie; a read checks each one it
    uses (its header, its CRC) as it would without a table. It also stops
    after the batch that crosses ``max_bytes`` from ``start`` (``complete``:
    the next walk goes on from there), so that no single walk reads a large
    segment whole.
    """
    last_offsets: array[int] = array("q")
    positions: array[int] = array("q")
    max_timestamps: array[int] = array("q")
    window: bytes | bytearray = b""
    window_start = start
    position = start
    expected = expected_base
    stop_at = start + max_bytes
    complete = False
    fast = _fast if expected <= INT64_MAX else None
    while True:
        if position >= end or position >= stop_at:
            complete = True
            break
        if len(positions) >= max_entries:
            break
        at = position - window_start
        if at + HEADER_SIZE > len(window):
            window_start, at = position, 0
            window = pread(position, min(_WALK_WINDOW, end - position))
            if len(window) < HEADER_SIZE:
                break
        if fast is not None:
            # The plain seglog headers of the window in one C call; it stops before anything else
            # (a Kafka batch's header, a damaged one, the window's end), which the lines below decide.
            taken, position, expected, lasts, starts, stamps = fast.walk_headers(
                window, at, position, end, stop_at, expected, max_entries - len(positions)
            )
            if taken:
                last_offsets.frombytes(lasts)
                positions.frombytes(starts)
                max_timestamps.frombytes(stamps)
                continue
        header = read_header(window, at)
        # Every check the header walk makes: a time lookup skips batches by the largest timestamp
        # noted here, as the walk skips them by their header.
        if header.base_offset != expected or header_problem(header, end - position) is not None:
            break
        expected = header.base_offset + header.last_offset_delta + 1
        last_offsets.append(expected - 1)
        positions.append(position)
        max_timestamps.append(header.max_timestamp)
        position += header.size
    return TableBuild(start, position, last_offsets, positions, max_timestamps, complete)


class RecordTable:
    """Where each record of one large batch lies, from a read that verified the batch's CRC once.

    Kept for the batch at ``position`` with this ``header`` (its 61 bytes,
    with the batch length and the CRC field): a read checks the header it
    finds there against it before it trusts the positions. Only dense seglog batches without record
    headers get one (what a large append writes); others are decoded whole.
    ``key_lengths[i]``/``value_lengths[i]`` are ``-1`` for a nil key/value.
    """

    __slots__ = (
        "base_offset", "header", "key_lengths", "key_positions", "position", "sorted", "timestamps",
        "value_lengths", "value_positions",
    )

    def __init__(self, position: int, header: bytes) -> None:
        self.position = position
        self.header = header  # all 61 bytes: offsets, length, CRC field, attributes, timestamps
        self.base_offset = int.from_bytes(header[:8], "big", signed=True)
        self.timestamps: array[int] = array("q")
        self.key_positions: array[int] = array("q")
        self.key_lengths: array[int] = array("q")
        self.value_positions: array[int] = array("q")
        self.value_lengths: array[int] = array("q")
        self.sorted = True

    def __len__(self) -> int:
        return len(self.timestamps)

    def cost_bytes(self) -> int:
        return len(self.timestamps) * _BYTES_PER_RECORD + _RECORD_TABLE_OVERHEAD

    def matches(self, head: bytes | bytearray) -> bool:
        """Whether ``head`` (the 61 bytes at :attr:`position`) is the header this table was built from."""
        return head == self.header

    def first_at_or_after(self, timestamp: int, index: int) -> int:
        """The first record index from ``index`` on with a timestamp >= ``timestamp`` (``len`` when none)."""
        stamps = self.timestamps
        if self.sorted:
            return bisect_left(stamps, timestamp, index)
        count = len(stamps)
        while index < count and stamps[index] < timestamp:
            index += 1
        return index


def _entry_span(unpacker: msgpack.Unpacker, body: memoryview, at: int, position: int) -> tuple[int, int]:
    # (absolute position of the bytes, length) of one bin-or-nil entry, or (position, -1) for nil.
    start = unpacker.tell()
    unpacker.skip()
    stop = unpacker.tell()
    marker = body[start]
    if marker == 0xC0:
        return position, -1
    prefix = {0xC4: 2, 0xC5: 3, 0xC6: 5}.get(marker)
    if prefix is None:
        raise CorruptRecordError(f"batch at position {position}: a key or value is not bin or nil")
    return at + start + prefix, stop - start - prefix


def build_record_table(
    buf: bytes | bytearray | memoryview, position: int, header: BatchHeader
) -> RecordTable | None:
    """The :class:`RecordTable` of the batch ``buf`` holds whole (at file ``position``); ``None`` if not tabled.

    Verifies the CRC and decodes the whole batch once (every check of a full
    read), then notes where each record's key and value bytes lie. ``None``
    for a batch that is not a dense seglog batch without record headers
    (those keep the whole-batch read).

    Raises:
        CorruptRecordError: the batch fails its checks (the read that asked raises it).
    """
    if header.magic != MAGIC or header.attributes & CONTROL_BIT or header.last_offset_delta != header.record_count - 1:
        return None
    verify_crc(buf, 0, header)
    records = decode_batch(buf, 0, header)
    body_start = HEADER_SIZE
    body_end = LOG_OVERHEAD + header.batch_length
    body = memoryview(buf)[body_start:body_end]
    count = header.record_count
    table = RecordTable(position, bytes(memoryview(buf)[:HEADER_SIZE]))
    unpacker = msgpack.Unpacker(max_buffer_size=len(body), use_list=False, raw=False)
    unpacker.feed(body)
    try:
        if unpacker.read_array_header() != 5 or unpacker.unpack() is not None:
            return None  # decode_batch accepted it: sparse offsets (never written by seglog's appends)
        unpacker.skip()  # the timestamps: taken from the decoded records
        at = position + body_start
        spans = []
        for _column in range(2):
            if unpacker.read_array_header() != count:
                return None
            spans.append([_entry_span(unpacker, body, at, position) for _ in range(count)])
        if unpacker.unpack() is not None:
            return None  # record headers: decoded whole
    except (ValueError, msgpack.OutOfData, msgpack.ExtraData) as exc:  # decode_batch accepted it: cannot happen
        raise CorruptRecordError(f"batch at position {position}: body is not valid ({exc})") from exc
    previous = -1
    for record, (key_at, key_len), (value_at, value_len) in zip(records, spans[0], spans[1], strict=True):
        if key_len != (-1 if record.key is None else len(record.key)) or value_len != (
            -1 if record.value is None else len(record.value)
        ):
            return None
        timestamp = record.timestamp
        if timestamp is None:  # never from a decoded batch: every record there has its timestamp
            return None
        table.timestamps.append(timestamp)
        if timestamp < previous:
            table.sorted = False
        previous = timestamp
        table.key_positions.append(key_at)
        table.key_lengths.append(key_len)
        table.value_positions.append(value_at)
        table.value_lengths.append(value_len)
    return table
