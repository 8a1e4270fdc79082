"""The one synchronous reader of a segment's ``.log``: its batches in order, each checked (LevelDB's ``log::Reader``).

Owns reading a ``.log`` front to back (or from a batch start found in an
index) in bounded windows, and deciding, for each batch, whether it can be
trusted: the header rules and the CRC-32C (``seglog.segments.batch``), the
offset rules of ``docs/FORMAT.md`` §2.3 (a segment's first batch has the base
offset its file name says, and each later batch starts at the previous one's
last offset + 1), that every batch lies inside the file (the size is taken
once, by the caller, and bounds every read), and that a batch's offsets fit
the segment (its last offset at most 2**31-1 above the base). It stops at the
first batch that breaks one and says why (:class:`~seglog.segments.batch.ScanStop`):
a cut-short tail (``INCOMPLETE``), bad bytes (``CORRUPT``), a whole, intact
batch of a format it recognises but does not read (``UNSUPPORTED``), offsets
that do not fit (``OVERFLOW``) or the caller's byte limit (``LIMIT``). What to
make of the stop is the caller's: recovery cuts the tail, an offline read of a
sealed segment raises :class:`~seglog.segments.errors.CorruptRecordError`
(:meth:`BatchReader.raise_unless_complete`), ``verify`` reports it.

Its users: recovery and index rebuilds (``LogSegment``), the follower's scan
of a segment another process appends to, and every offline reader in
``seglog.engine.offline`` (dump, verify, explain, reads without an engine, the
Spark source). The segment's point-read path keeps its own header walk (an
index entry places it, and it runs on the event loop); it applies the same
header rules (:func:`~seglog.segments.batch.check_header`).

Format detection: each batch's magic byte picks its :class:`BatchFormat` in
:data:`FORMATS`. seglog's own (``0x54``) and Kafka's RecordBatch v2 (magic 2,
the batches the wire server stores as they arrive; ``seglog.segments.kafka_batch``)
are read, each with its own header rules and the same CRC and offset rules,
both in the same pass (``scan_batches`` applies a batch's rules by its magic);
format v1 (``0x53``) is recognised only to be refused.

Synchronous and pure but for the ``pread`` it is given: no asyncio, no thread,
no file opened here. Must not import: ``engine`` or ``tools``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Final, NamedTuple

from seglog.segments import kafka_batch
from seglog.segments.batch import (
    HEADER_SIZE,
    INT32_MAX,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_V1,
    BatchHeader,
    ScanStop,
    crc_matches,
    header_problem,
    offset_problem,
    read_header,
    scan_batches,
    verify_crc,
)
from seglog.segments.errors import CorruptRecordError
from seglog.segments.kafka_batch import KAFKA_MAGIC

__all__ = [
    "BODY_READAHEAD",
    "CHUNK_BYTES",
    "FORMATS",
    "HEADER_READAHEAD",
    "BatchFormat",
    "BatchReader",
    "LocatedBatch",
    "PRead",
]

PRead = Callable[[int, int], "bytes | bytearray"]
"""``pread(position, size)``: up to ``size`` bytes of the file at ``position`` (fewer only at its end)."""

# A validating scan reads this much at a time (and at least one whole batch): large enough that the
# per-read cost vanishes, small enough to stay out of the page-fault regime of fresh multi-megabyte
# buffers (docs/PERFORMANCE.md, "Measurements behind the code").
CHUNK_BYTES: Final = 4 * 1024 * 1024
# A header walk reads this much past a header it needs: skipping a batch costs a few KiB, not its body.
HEADER_READAHEAD: Final = 4096
# Bodies are read in windows of this much, which also hold the headers that follow.
BODY_READAHEAD: Final = 1 << 20
# A window at least this large re-reads the short tail of the previous one instead of joining the two.
_REREAD_FROM: Final = 256 * 1024

class LocatedBatch(NamedTuple):
    """A batch found in a segment: its start position and its header (size, offsets, timestamps)."""

    position: int
    header: BatchHeader


class BatchFormat(NamedTuple):
    """A batch format the reader recognises by its magic byte (the byte at position 16 of a batch).

    ``header_problem(header, max_batch_bytes)`` holds the format's header rules
    (``None`` when the header is plausible); ``None`` instead of a function
    marks a format recognised only to be refused: a whole batch of it whose
    CRC-32C holds stops the reader with ``UNSUPPORTED`` (intact data an older
    or newer seglog wrote), never ``CORRUPT``, so recovery does not cut it.
    Every format shares the 61-byte header layout, the CRC range and the
    offset rules (seglog's header is Kafka's v2 ``RecordBatch`` header).
    """

    magic: int
    name: str
    header_problem: Callable[[BatchHeader, int], str | None] | None


# seglog's own header rules (batch.header_problem) hand a magic-2 header to kafka_batch's, so the
# two entries that are read agree with scan_batches, which applies both by magic in one pass.
FORMATS: Final[dict[int, BatchFormat]] = {
    MAGIC: BatchFormat(MAGIC, "seglog batch format v2", header_problem),
    MAGIC_V1: BatchFormat(MAGIC_V1, "seglog batch format v1 (written by seglog < 0.2)", None),
    KAFKA_MAGIC: BatchFormat(KAFKA_MAGIC, "Kafka RecordBatch v2", kafka_batch.header_problem),
}
"""The formats the reader recognises, by magic byte; anything else is ``CORRUPT``."""


class _Window:
    """Positional reads through one buffer: bytes already held are not read again, except the short tail of
    a large window, read again with the next one (copying the new window after it would cost more)."""

    __slots__ = ("buf", "bytes_read", "end", "pread", "start")

    def __init__(self, pread: PRead, start: int, end: int) -> None:
        self.pread = pread
        self.buf: bytes | bytearray = b""
        self.start = start
        self.end = end  # lowered when a read comes back short: the file shrank under us
        self.bytes_read = 0

    def view(self, position: int, size: int, readahead: int) -> tuple[bytes | bytearray, int] | None:
        """``(buffer, index of position in it)`` holding ``size`` bytes at ``position``; ``None`` past the end.

        Reads ``readahead`` bytes (at least ``size``, at most up to the end)
        when the buffer does not hold them, keeping what it holds from
        ``position`` on.
        """
        start, buf = self.start, self.buf
        held = start + len(buf)
        if start <= position and position + size <= held:
            return buf, position - start
        want = min(max(size, readahead), self.end - position)
        if want < size:
            return None
        kept = held - position if start <= position < held else 0
        # A large window reads the short tail it would keep again, rather than copying the whole new
        # window after it (keep + data is one more multi-megabyte buffer, written page by page).
        keep = buf[position - start :] if kept and (want < _REREAD_FROM or 2 * kept >= want) else b""
        at = position + len(keep)
        data = self.pread(at, want - len(keep))
        self.bytes_read += len(data)
        if len(data) < want - len(keep):
            self.end = at + len(data)
        self.buf, self.start = (keep + data if keep else data), position
        return (self.buf, 0) if len(self.buf) >= size else None


class BatchReader:
    """The batches of one ``.log`` from ``start`` to ``end``, in order, each checked; iterate once.

    ``pread`` reads the file; ``end`` is its size as the caller took it (reads
    never go past it). ``base_offset`` is the segment's (its file name's).
    ``start`` must be a batch start: ``0``, or a position an index gave. The
    batch at ``start`` must have base offset ``first_offset``; by default that
    is ``base_offset`` when ``start`` is 0, and "any, not below ``base_offset``"
    otherwise (a batch in the middle of a segment, whose offset the caller does
    not know). ``max_batch_bytes`` bounds every batch before its body is read.

    With ``verify`` (the default) every batch's CRC-32C is checked before it is
    yielded, reading ``chunk_bytes`` windows (recovery, ``verify``, a tail
    walk); without it only headers are read and checked (``HEADER_READAHEAD``
    past each), and :meth:`batch_bytes` reads and CRC-checks a batch's bytes
    when the caller wants them (a read that skips most batches by their
    header). ``limit``: no batch starting at or past it is read (the stop is
    then ``LIMIT``); a batch starting before it is read whole.

    While and after iterating: ``position`` is the end of the batches yielded
    so far (after a stop: where the first bad batch starts, what recovery keeps),
    ``next_offset`` the base offset the next batch must have, ``stop`` and
    ``reason`` why iteration ended (``None`` and ``""`` before), and
    ``bytes_read`` how many bytes were read.
    """

    __slots__ = (
        "_base_offset", "_chunk", "_limit", "_max_batch_bytes", "_path", "_progress", "_started", "_verify",
        "_window", "next_offset", "position", "reason", "stop",
    )

    def __init__(
        self,
        pread: PRead,
        *,
        end: int,
        base_offset: int,
        max_batch_bytes: int,
        start: int = 0,
        first_offset: int | None = None,
        verify: bool = True,
        limit: int | None = None,
        chunk_bytes: int = CHUNK_BYTES,
        path: object = "",
        progress: Callable[[int], object] | None = None,
    ) -> None:
        self._window = _Window(pread, start, end)
        self._base_offset = base_offset
        self._max_batch_bytes = max_batch_bytes
        self._verify = verify
        self._limit = limit
        self._chunk = chunk_bytes
        self._path = path
        self._progress = progress
        self._started = False
        self.position = start
        self.next_offset: int | None = first_offset if first_offset is not None else (
            base_offset if start == 0 else None
        )
        self.stop: ScanStop | None = None
        self.reason = ""

    @property
    def end(self) -> int:
        """Where the file ends for this reader (its size, lowered if it shrank while being read)."""
        return self._window.end

    @property
    def bytes_read(self) -> int:
        """Bytes read from the file so far (once each on a forward walk, but for a batch a large window cut)."""
        return self._window.bytes_read

    def __iter__(self) -> Iterator[LocatedBatch]:
        if self._started:
            raise RuntimeError("a BatchReader is iterated once")
        self._started = True
        return self._checked() if self._verify else self._headers()

    # --------------------------------------------------------------------------- the two walks

    def _checked(self) -> Iterator[LocatedBatch]:
        # Whole windows through scan_batches (headers, CRC, offsets in one pass per window); a batch
        # that runs past the window is read again from its start in a window large enough for it.
        window, base, chunk, limit = self._window, self._base_offset, self._chunk, self._limit
        max_batch = self._max_batch_bytes
        while True:
            position = self.position
            if self._stops_before(position):
                return
            readahead = chunk if limit is None else max(min(chunk, limit - position), HEADER_SIZE)
            got = window.view(position, HEADER_SIZE, readahead)
            if got is None:
                self._finish(ScanStop.INCOMPLETE, "a header is cut short")
                return
            buf, at = got
            result = scan_batches(buf, at, max_batch_bytes=max_batch, next_offset=self.next_offset)
            origin = window.start
            for relative, header in result.batches:
                batch_position = origin + relative
                if limit is not None and batch_position >= limit:
                    self._finish(ScanStop.LIMIT, "")
                    return
                # scan_batches applied the offset rule, but to the first batch of a walk that starts in
                # the middle of a segment (next_offset None): that one is checked here.
                if self.next_offset is None and not self._offsets_ok(header):
                    return
                if header.base_offset + header.last_offset_delta - base > INT32_MAX:
                    self._overflow(header)
                    return
                yield LocatedBatch(batch_position, header)
                self.position = batch_position + LOG_OVERHEAD + header.batch_length
                self.next_offset = header.base_offset + header.last_offset_delta + 1
            if self._progress is not None:
                self._progress(self.position)
            if result.stop is ScanStop.END:
                continue
            if result.stop is ScanStop.INCOMPLETE:
                # The window ends inside a batch (or its header). If the file goes on, read that batch
                # whole: its header passed the size check, so its size is bounded by max_batch_bytes.
                held = window.start + len(window.buf)
                if held < window.end:
                    cut_header = held - self.position < HEADER_SIZE
                    need = HEADER_SIZE if cut_header else read_header(buf, result.valid_end).size
                    if window.view(self.position, need, max(readahead, need)) is not None:
                        continue
                self._finish(ScanStop.INCOMPLETE, result.reason)
                return
            # CORRUPT: bad bytes, or an intact batch of a format recognised only to be refused.
            self._foreign(result.valid_end, result.reason)
            return

    def _headers(self) -> Iterator[LocatedBatch]:
        # Header by header: each is checked as scan_batches checks it (header_problem, the offset
        # rule), its body is read only when the caller asks for it (batch_bytes checks the CRC).
        window, max_batch = self._window, self._max_batch_bytes
        while True:
            position = self.position
            if self._stops_before(position):
                return
            got = window.view(position, HEADER_SIZE, HEADER_READAHEAD)
            if got is None:
                self._finish(ScanStop.INCOMPLETE, "a header is cut short")
                return
            buf, at = got
            header = read_header(buf, at)
            fmt = FORMATS.get(header.magic & 0xFF)
            if fmt is not None and fmt.header_problem is not None:
                problem = fmt.header_problem(header, max_batch)
                if problem is not None:
                    self._finish(ScanStop.CORRUPT, problem)
                    return
                if position + header.size > window.end:
                    self._finish(ScanStop.INCOMPLETE, f"a {header.size}-byte batch is cut short")
                    return
                if not self._offsets_ok(header):
                    return
                if header.last_offset - self._base_offset > INT32_MAX:
                    self._overflow(header)
                    return
                batch = LocatedBatch(position, header)
            else:
                self._foreign(at, "")
                return
            yield batch
            self.position = position + header.size
            self.next_offset = header.next_offset

    # --------------------------------------------------------------------------- the rules

    def _stops_before(self, position: int) -> bool:
        # Both walks, before the batch at `position`: the end of the file (END) or of the byte limit (LIMIT).
        if position >= self._window.end:
            self._finish(ScanStop.END, "")
            return True
        if self._limit is not None and position >= self._limit:
            self._finish(ScanStop.LIMIT, "")
            return True
        return False

    def _offsets_ok(self, header: BatchHeader) -> bool:
        # The offset rule (batch.offset_problem; scan_batches has applied it already to every batch but
        # the first of a walk that starts in the middle of a segment, whose offset is not known: that
        # one must be the segment's, not below its base offset).
        expected = self.next_offset
        if expected is None:
            if header.base_offset >= self._base_offset:
                return True
            problem: str | None = (
                f"base offset {header.base_offset} is below the segment's base offset {self._base_offset}"
            )
        else:
            problem = offset_problem(header.base_offset, expected)
            if problem is None:
                return True
        self._finish(ScanStop.CORRUPT, problem or "offsets do not follow on")
        return False

    def _overflow(self, header: BatchHeader) -> None:
        # Relative offsets are int32 (FORMAT.md §2.3 rule 7): seglog never writes a batch past that.
        self._finish(
            ScanStop.OVERFLOW,
            f"last offset {header.last_offset} is more than 2**31-1 above the segment's base offset "
            f"{self._base_offset}",
        )

    def _foreign(self, at: int, reason: str) -> None:
        # The batch at self.position (index `at` of the window) is not a valid batch of a format the
        # reader reads (scan_batches and _headers apply those formats' rules and say what is wrong:
        # `reason`): a whole batch of a format recognised only to be refused, or bad bytes. Stops the
        # reader.
        position = self.position
        buf = self._window.buf
        if len(buf) - at < HEADER_SIZE:
            self._finish(ScanStop.INCOMPLETE, reason or "a header is cut short")
            return
        header = read_header(buf, at)
        fmt = FORMATS.get(header.magic & 0xFF)
        if fmt is None or fmt.header_problem is not None:
            self._finish(ScanStop.CORRUPT, reason or header_problem(header, self._max_batch_bytes) or "bad header")
            return
        inside = position + header.size <= self._window.end and header.batch_length > 0
        if inside and crc_matches(self._window.pread, position, header):
            self._finish(
                ScanStop.UNSUPPORTED,
                f"the batch is {fmt.name} (magic {fmt.magic:#04x}), which this version cannot read; "
                "its CRC-32C holds, so it is intact and is not cut (docs/FORMAT.md §6)",
            )
        else:
            problem = header_problem(header, self._max_batch_bytes)
            self._finish(ScanStop.CORRUPT, problem or f"a {fmt.name} batch whose CRC-32C does not hold")

    def _finish(self, stop: ScanStop, reason: str) -> None:
        self.stop, self.reason = stop, reason

    # --------------------------------------------------------------------------- after a batch

    def batch_bytes(self, batch: LocatedBatch, readahead: int = BODY_READAHEAD) -> tuple[bytes | bytearray, int]:
        """``(buffer, index of the batch in it)``: the bytes of a batch this reader yielded, CRC-32C checked.

        Reads them (``readahead`` bytes at least, so the following headers come
        along) unless the reader's window holds them.

        Raises:
            CorruptRecordError: the file ends inside the batch, or its CRC does not match.
        """
        got = self._window.view(batch.position, batch.header.size, readahead)
        if got is None:
            raise CorruptRecordError(
                f"{self._path}: batch at position {batch.position}: {batch.header.size} bytes announced, "
                "the file ends before"
            )
        buf, at = got
        if not self._verify:
            try:
                verify_crc(buf, at, batch.header)
            except CorruptRecordError as exc:
                raise CorruptRecordError(f"{self._path}: {exc}") from exc
        return got

    def raise_unless_complete(self) -> None:
        """Raise unless the reader stopped at the end of the file (or its limit): for a sealed segment.

        A sealed segment has no tail being written, so anything but ``END``
        (and ``LIMIT``) is damage, never an end to stop at quietly.

        Raises:
            CorruptRecordError: the reader stopped at a bad, cut-short, unsupported or misplaced batch.
        """
        if self.stop not in (ScanStop.END, ScanStop.LIMIT, None):
            raise CorruptRecordError(
                f"{self._path}: batch at position {self.position}: {self.reason}; the records from there on "
                "cannot be read ('seglog verify' names the damage)"
            )
