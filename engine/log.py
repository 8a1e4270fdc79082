"""``PartitionLog``: one topic-partition — an ordered set of segments with one writer.

Owns: offset assignment, group commit of concurrent appends, roll, the flush
policy (``flush.messages`` / ``flush.ms``), reads by offset and by timestamp,
``subscribe``, ``delete_records_before``, per-partition retention and the
per-partition part of recovery.

Concurrency contract: everything runs on the event loop's thread. Appends are
serialised by one writer: callers enqueue their batch (the first caller of a
loop turn its encoded batch; the others, when small, their records, which the
writer encodes together into one batch) and await a future. One loop turn
after the first caller, ``_write_next`` takes every batch waiting, assigns
offsets and writes them: itself, on the loop, when the write is small, needs
no fsync, no roll and nothing loaded (``_write_on_loop``); else the writer
task does it with one executor hop (and one fsync when the flush policy asks
for it), and takes whatever is queued meanwhile. Either resolves the
futures. A caller cancelled before its batch was taken is simply dropped;
after that, the batch is written whole or not at all, so no cancellation
leaves a half-written batch visible. Readers never wait for the
writer: they read below the log end offset, which moves only after a write
completed. Structural changes (roll, retention, truncation, close) take
``_lock``, which the writer task also holds while it writes (a write on the
loop needs it free, and nothing else runs before it is done).

What a ``PartitionLog`` needs of whoever owns it -- opening its files on first
use, checkpointing a moved log start, deleting a segment after
``file.delete.delay.ms`` -- it asks through :class:`LogOwner`; it knows nothing
else of the ``Engine`` (an import-linter contract keeps it so).

Must not import: ``tools``, ``engine.engine``, ``engine.loader``, ``engine.follow``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import warnings
from bisect import bisect_left
from collections.abc import AsyncGenerator, Callable, Coroutine, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Final, Protocol, TypeVar

import msgpack

from seglog.engine.checkpoints import ClosedPartition
from seglog.engine.config import LogConfig
from seglog.engine.errors import (
    ClosedError,
    CorruptIndexError,
    CorruptRecordError,
    CorruptSnapshotError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    ProducerError,
    RecordTooLargeError,
    SeglogError,
)
from seglog.engine.producer_state import (
    MAX_PRODUCER_EPOCH,
    AppendCheck,
    BatchMetadata,
    ProducerStateManager,
    decode_snapshot,
    plan_snapshot_load,
    producer_fields_problem,
    read_snapshot_file,
)
from seglog.engine.results import (
    EARLIEST_TIMESTAMP,
    ISOLATION_LEVELS,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    NO_TIMESTAMP,
    AbortedTransaction,
    AppendResult,
    FetchResult,
    Isolation,
    OffsetAndTimestamp,
)
from seglog.engine.retention import RetentionPlan, SegmentSummary, plan_retention
from seglog.engine.validate import INT64_MAX, validate_int64, validate_offset, validate_timestamp
from seglog.indexes import AbortedTxn, TimestampOffset
from seglog.segments.batch import (
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    BatchHeader,
    LateBody,
    TimestampType,
    check_header,
    decode_batch,
    decode_batches,
    decode_first_batch,
    encode_batch_parts,
    encode_small_batch,
    plan_batch_parts,
    read_header,
    rebase_batch,
    verify_crc,
)
from seglog.segments.batch_table import TableBuild
from seglog.segments.fileio import (
    LOOP_WRITE_MAX_BYTES,
    WOULD_BLOCK,
    LateBuffer,
    WouldBlock,
    atomic_write,
    fsync_dir,
    in_thread,
    remove,
    run_to_completion,
    submit,
)
from seglog.segments.files import list_partition_dir, snapshot_file_name
from seglog.segments.kafka_batch import (
    ControlRecord,
    check_produced,
    clear_leader_epoch,
    control_record,
    decode_produced,
    encode_control_batch,
    stamp_log_append_time,
)
from seglog.segments.records import Record
from seglog.segments.segment import FetchData, LogSegment, LogSegments, RollParams

__all__ = [
    "LoadedLog",
    "LogOwner",
    "PartitionLog",
    "Unopened",
    "close_segments",
    "new_segment",
    "segment_append",
    "segment_read",
]

log = logging.getLogger("seglog")
_T = TypeVar("_T")

# Largest group the writer hands to one executor hop: fresh buffers over ~1 MiB pay page faults
# (several times slower than a copy into warm memory), and a hop of ~1000 records already amortises
# most of the hop's cost (docs/PERFORMANCE.md, "Measurements behind the code").
MAX_GROUP_BYTES: Final = 1 << 20
DEFAULT_FETCH_BYTES: Final = 1 << 20
# A read of at most this many bytes (a point read, a small fetch) has a segment's batches tabled for it
# (LogSegment.batch_table_job): larger fetches read whole batches from the offset index as before and
# do not pay the walk.
_TABLED_READ_BYTES: Final = 64 * 1024
# Largest last write kept in memory for tailing readers: a few single-record appends or one modest
# batch. Subscribers following a live partition then read without touching the file.
TAIL_CACHE_BYTES: Final = 16 * 1024


_new_append_result = partial(tuple.__new__, AppendResult)  # skips NamedTuple.__new__'s Python frame
_new_fetch_result = partial(tuple.__new__, FetchResult)  # the same, on every read
_new_roll_params = partial(tuple.__new__, RollParams)  # the same, on every append
_new_batch_header = partial(tuple.__new__, BatchHeader)  # the same
_unpack_header = HEADER.unpack_from  # read_header without its Python frame, for batches encoded here
_new_offset_and_timestamp = partial(tuple.__new__, OffsetAndTimestamp)  # the same, on every time lookup


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _written(body: bytes | LateBody) -> bytes:
    """The bytes of a body that was written (a LateBody made them in the write's thread)."""
    return body.materialize() if isinstance(body, LateBody) else body


@dataclass(slots=True)
class _PendingAppend:
    head: bytearray  # the batch's 61-byte header, or the whole batch; the writer patches its base offset in
    body: bytes | LateBody  # the rest of the batch (never copied: written from here by pwritev), or b""
    header: BatchHeader  # as encoded (base offset 0)
    size: int  # bytes of the whole batch (header.size, kept as a field: it is read several times per append)
    future: asyncio.Future[AppendResult] | None  # None for a merged batch: its members' futures answer
    base_offset: int = -1  # assigned by the writer
    # A batch merged from small appends: (future, record count, max timestamp) of each, in order.
    members: list[tuple[asyncio.Future[AppendResult], int, int]] | None = None
    # Retries of this producer batch taken in the same write: answered with its result.
    followers: list[asyncio.Future[AppendResult]] | None = None
    # A transaction marker (a Kafka control batch): (commit, coordinator epoch).
    marker: tuple[bool, int] | None = None

    def futures(self) -> list[asyncio.Future[AppendResult]]:
        """The futures of the callers this batch answers."""
        if self.members is not None:
            return [member[0] for member in self.members]
        assert self.future is not None  # only a merged batch has none
        return [self.future, *self.followers] if self.followers else [self.future]


class _Leader:
    """The mark of a write its first caller runs itself (``PartitionLog.append``), as a Handle would be."""

    def cancel(self) -> None:
        """Nothing to unschedule: whoever writes first (a close, or the caller) clears the mark."""


_LEADER: Final = _Leader()


@dataclass(slots=True)
class _SmallAppend:
    """A small append not encoded yet: the writer encodes it, merged with the small appends queued beside it."""

    records: list[Record]  # a copy: the caller may reuse its list while it waits
    estimate: int  # bytes of its keys and values plus per-record overhead: bounds a merged batch
    future: asyncio.Future[AppendResult]


# Appends of at most this many records may be merged into one batch with the appends queued beside
# them (Kafka's producer does the same in its RecordAccumulator): 100 concurrent single-record
# callers make one batch of 100 records per write instead of 100 batches, which nearly halves the
# cost of each append (docs/PERFORMANCE.md, "Measurements behind the code").
SMALL_APPEND_RECORDS: Final = 16

# A batch of at least LATE_BODY_RECORDS records, LATE_BODY_BYTES bytes and LATE_BODY_RECORD_BYTES
# bytes a record on average is planned on the event loop and its body written by the append's thread
# (segments.batch.plan_batch_parts); PERFORMANCE.md, "Bodies are written where they are encoded".
LATE_BODY_RECORDS: Final = 64
LATE_BODY_BYTES: Final = 256 * 1024
LATE_BODY_RECORD_BYTES: Final = 512
_RECORD_OVERHEAD_ESTIMATE: Final = 32  # msgpack framing and timestamp delta per record, rounded up


def _largest(records: list[Record], now_ms: int) -> int:
    # The largest timestamp of encoded CreateTime records (None became now_ms).
    if len(records) == 1:
        timestamp = records[0][2]
        return now_ms if timestamp is None else timestamp
    return max([now_ms if r[2] is None else r[2] for r in records])


def _small_estimate(records: list[Record]) -> int | None:
    # The estimate of a small append of plain Records whose key and value are bytes or None, or
    # None when it is anything else (encoded at once then, so its error is raised at once).
    total = 0
    for record in records:
        if record.__class__ is not Record:
            return None
        value, key = record[0], record[1]
        if (value.__class__ is not bytes and value is not None) or (key.__class__ is not bytes and key is not None):
            return None
        total += _RECORD_OVERHEAD_ESTIMATE + (len(value) if value else 0) + (len(key) if key else 0)
    return total


@dataclass(frozen=True, slots=True)
class LoadedLog:
    """A partition's opened (and, where needed, recovered) segments and the offsets they hold.

    What ``engine.loader`` hands a :class:`PartitionLog`: every recovered byte
    is already durable, so the recovery point is the log end.
    """

    segments: LogSegments[LogSegment]
    log_start_offset: int
    log_end_offset: int
    recovery_point: int
    # Whether the open changed the files (recovered, cut, set aside): they are not what a clean close left.
    recovered: bool = False
    # The base offset of the first segment recovery scanned (its .txnindex, and every later one's, was
    # reset and is rebuilt from the log with the producer state), or None.
    txn_index_from: int | None = None


@dataclass(frozen=True, slots=True)
class Unopened:
    """A partition a clean open left unopened: what the clean close recorded, and the checkpoints' entries.

    ``record`` answers the properties until the first use opens the files; it
    never moves the log start (``log_start_checkpoint`` does, clamped by the
    files once they are open). ``None``: the checkpoint has no entry.
    """

    record: ClosedPartition
    log_start_checkpoint: int | None
    recovery_point_checkpoint: int | None


class LogOwner(Protocol):
    """What a :class:`PartitionLog` asks of whoever owns it (the ``Engine``), and nothing more."""

    async def open_files(
        self, topic: str, partition: int, directory: Path, config: LogConfig, unopened: Unopened
    ) -> LoadedLog:
        """Open a partition's files, check the record against them (recovering where they disagree)."""

    async def log_start_moved(self) -> None:
        """Checkpoint the log start offsets: one of this owner's partitions moved its own."""

    async def delete_segment_later(self, segment: LogSegment, delay_ms: int, name: str) -> None:
        """Rename ``segment``'s files ``.deleted`` now and remove them after ``delay_ms``."""


async def new_segment(directory: Path, config: LogConfig, base_offset: int, now_ms: int) -> LogSegment:
    """Create an empty segment at ``base_offset`` whose directory entry survives power loss.

    Raises:
        StorageError: the file cannot be created or the directory not synced (nothing is left open).
    """
    segment = await in_thread(
        LogSegment.open,
        directory,
        base_offset,
        max_index_size=config.segment_index_bytes,
        index_interval_bytes=config.index_interval_bytes,
        roll_jitter_ms=config.random_segment_jitter(),
        now_ms=now_ms,
        preallocate_bytes=config.initial_segment_size,
    )
    try:
        await fsync_dir(directory)
    except BaseException:
        await close_segments([segment])
        raise
    return segment


async def segment_append(
    segment: LogSegment,
    parts: Sequence[bytes | bytearray | memoryview | LateBuffer],
    headers: Sequence[BatchHeader],
    *,
    fsync: bool = False,
) -> int:
    """Append to ``segment`` the batches ``headers`` describe (bytes ``parts``): ONE hop to the append threads.

    The async edge of appends: checked on the loop (``check_append``), written
    by the segment's blocking ``write_append`` in an append thread (submitted
    at once, so the write overlaps whatever the loop does next), published on
    the loop (``publish_append``) when it returned, also when the caller was
    cancelled meanwhile (then ``CancelledError`` is raised after). Returns the
    position of the first batch.

    Raises:
        As ``LogSegment.check_append`` and ``LogSegment.write_append``.
    """
    segment.check_append(parts, headers)
    if not headers:
        return segment.size
    job = submit(segment.write_append, parts, headers, fsync=fsync)
    try:
        await run_to_completion(job)
    finally:
        if job.done() and not job.cancelled() and job.exception() is None:
            segment.publish_append(job.result())
    return job.result().position


async def segment_read(op: Callable[[bool], _T | WouldBlock]) -> _T:
    """Run a segment's read ``op(nowait)``: first page cache only, on the loop; else blocking, in ONE thread hop.

    The async edge of every read (aiosqlite's shape: the segment is
    synchronous, and only knows which bytes the read needs; this decides where
    it runs). ``op(True)`` answers from memory and the page cache (``preadv``
    with ``RWF_NOWAIT``) or says :data:`WOULD_BLOCK`; then ``op(False)`` runs
    the same read, from its start, in a worker thread.
    """
    got = op(True)
    if got is WOULD_BLOCK:
        got = await in_thread(op, False)
        assert got is not WOULD_BLOCK, "a blocking segment read always answers"
    return got


async def _table_walk(segment: LogSegment, job: Callable[[], TableBuild | None]) -> None:
    # A batch-table walk in a thread, installed on the loop, also when the reading task is cancelled
    # meanwhile (the segment's "a build is under way" flag must be cleared).
    task = asyncio.ensure_future(in_thread(job))
    try:
        build = await asyncio.shield(task)
    except asyncio.CancelledError:
        task.add_done_callback(
            lambda done: segment.install_batch_table(
                None if done.cancelled() or done.exception() is not None else done.result()
            )
        )
        raise
    except BaseException:
        segment.install_batch_table(None)
        raise
    segment.install_batch_table(build)


def _read_from(
    segment: LogSegment, offset: int, max_bytes: int, max_position: int | None, nowait: bool
) -> FetchData | WouldBlock | None:
    # A read of whole batches from the one holding `offset` (at least that one: min_one_message).
    return segment.read(offset, max_bytes, max_position, True, nowait=nowait)


def _find_in_segment(
    segment: LogSegment, timestamp: int, start: int, nowait: bool
) -> TimestampOffset | WouldBlock | None:
    # A time lookup in one segment: skipped by its largest timestamp (which may load its time index), then
    # searched; both in the same attempt (and the same hop).
    largest = segment.largest_record_timestamp(nowait=nowait)
    if largest is WOULD_BLOCK:
        return WOULD_BLOCK
    if largest is None or largest < timestamp:
        return None
    return segment.find_offset_by_timestamp(timestamp, starting_offset=start, nowait=nowait)


def _each_segment(
    segments: Sequence[LogSegment], read: Callable[[LogSegment, bool], _T | WouldBlock], nowait: bool
) -> list[_T] | WouldBlock:
    # read(segment, nowait) of every segment, in one attempt (or one hop): WOULD_BLOCK if any would block.
    found: list[_T] = []
    for segment in segments:
        got = read(segment, nowait)
        if got is WOULD_BLOCK:
            return WOULD_BLOCK
        found.append(got)
    return found


def _largest_record_timestamp(segment: LogSegment, nowait: bool) -> int | WouldBlock | None:
    return segment.largest_record_timestamp(nowait=nowait)


def _largest_timestamp(segment: LogSegment, nowait: bool) -> int | WouldBlock:
    return segment.largest_timestamp(nowait=nowait)


async def close_segments(segments: Sequence[LogSegment]) -> None:
    """Close ``segments`` in ONE thread hop (two per segment would make closing 10,000 cost ~2 s of hops).

    Each is first marked closed on the loop, so that no page-cache read starts
    while a worker thread releases its files. Completes even if the caller is
    cancelled (then re-raises the cancellation); every segment is tried.

    Raises:
        StorageError: a segment failed to close (the first such error; its files are released anyway).
    """
    for segment in segments:
        segment.begin_close()

    def close_all() -> None:
        errors: list[Exception] = []
        for segment in segments:
            try:
                segment.close()
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    await run_to_completion(in_thread(close_all))


class PartitionLog:
    """One topic-partition of an :class:`~engine.Engine`: append, read, look up, subscribe.

    Obtain one with ``engine.log(topic, partition)``; the engine owns its
    lifetime. All methods must be called from the engine's event loop.
    Built from either its ``loaded`` files or, after a clean shutdown, an
    ``unopened`` record whose files the first call that needs them opens
    (through ``owner.open_files``).
    """

    def __init__(
        self,
        topic: str,
        partition: int,
        directory: Path,
        config: LogConfig,
        owner: LogOwner,
        *,
        loaded: LoadedLog | None = None,
        unopened: Unopened | None = None,
        read_only: bool,
        active_is_new: bool = False,
    ) -> None:
        self._owner = owner
        self.topic: Final = topic
        self.partition: Final = partition
        self.directory = directory
        self.config = config
        # Set when a clean open left this partition's files unopened: what the clean close recorded.
        # The first call that needs the files opens them (_open); the properties answer from it.
        self._unopened = unopened
        self._opening: asyncio.Task[None] | None = None
        self._closed_as: ClosedPartition | None = None  # what a clean close records (set by close)
        self._txn_index_from: int | None = None  # see LoadedLog.txn_index_from
        if loaded is not None:
            self._segments = loaded.segments
            self._log_start_offset = loaded.log_start_offset
            self._log_end_offset = loaded.log_end_offset
            self._recovery_point = loaded.recovery_point
            self._txn_index_from = loaded.txn_index_from
        elif unopened is not None:
            record = unopened.record
            self._segments = LogSegments()
            # Until the files are open: the checkpoint's entry as read, never the record's first base offset
            # (a record that omits a segment must not hide it); 0 without an entry. Written back as it is
            # by a close before the first use, it can only be too low, which the first use raises to the
            # first segment's base offset (Kafka's rule); too high would hide records for good.
            start = unopened.log_start_checkpoint
            self._log_start_offset = 0 if start is None else start
            self._log_end_offset = record.log_end_offset
            self._recovery_point = record.log_end_offset  # a clean close flushed everything
        else:
            raise TypeError("PartitionLog needs its loaded files or an unopened record")
        self._read_only = read_only
        self._unflushed_messages = 0
        self._last_flush_ms = _now_ms()
        self._lock = asyncio.Lock()
        self._pending: list[_PendingAppend | _SmallAppend] = []
        self._writer: asyncio.Task[None] | None = None
        # _write_next scheduled by the first append queued, or _LEADER: that append's caller runs it.
        self._write_soon: asyncio.Handle | _Leader | None = None
        self._data_waiters: list[asyncio.Future[None]] = []
        # (first offset, end offset, bytes) of the last small write: tailing reads decode it directly.
        self._tail: tuple[int, int, bytes, bool] | None = None  # ..., and whether it is one batch
        self._closed = False
        self._closing = False
        self._close_task: asyncio.Task[None] | None = None
        self._deleted = False
        # One reused Packer per writer (msgspec/msgpack advice): a new Packer per record costs a third
        # of the encode rate (docs/PERFORMANCE.md, "Measurements behind the code").
        self._packer = msgpack.Packer(use_bin_type=True)
        self._timestamp_type = (
            TimestampType.LOG_APPEND_TIME if config.timestamp_is_log_append_time else TimestampType.CREATE_TIME
        )
        # A reopened or recovered active segment has trimmed (hence "full") indexes; they are
        # grown back to segment.index.bytes before its first append (Kafka's LogLoader does it at load).
        # (A new segment's index files are created at full size when first needed: nothing to grow.)
        self._active_indexes_ready = read_only or active_is_new
        self._background: set[asyncio.Task[None]] = set()
        # Idempotent producers' state (engine.producer_state), up to the log end; snapshotted in
        # <offset>.snapshot at each roll and at a clean close. Loaded from the snapshots and the log the
        # first time the writer needs it (_ready_producers): most partitions never see a producer id.
        self._producers = ProducerStateManager(self._log_end_offset)
        # A new partition has no producer yet; any other loads its state (read-only: without deleting
        # anything) when its files are opened, or on first need.
        self._producers_loaded = active_is_new and loaded is not None and loaded.log_end_offset == 0
        # Every aborted transaction of the live segments (their .txnindex entries), by last offset:
        # what aborted_transactions() answers from without touching a file. Loaded with the producers.
        self._aborted: list[AbortedTxn] = []
        self._clean_open = unopened is not None  # its files as the last run's clean close left them
        self._last_snapshot_offset = -1  # offset of the newest snapshot file known to exist (-1: none)
        self._end_at_open = self._log_end_offset if unopened is None else -1  # the log end at the files' open

    # -- properties ------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        """The first offset that can be read."""
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record will get."""
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        """Every offset below this is readable; equal to the log end offset (no replication)."""
        return self._log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """Every offset below this is decided: no transaction open here starts below it (Kafka's LSO).

        The first offset of the oldest open transaction, or the high watermark
        when none is open; never below the log start. ``read_committed`` reads
        stop here. Exact once the producer state is loaded: when a partition
        is opened after a clean close, by the first producer append or
        ``read_committed`` read, or by :meth:`load_producer_state` (a no-op once
        loaded). After an unclean open the state is rebuilt from the log on
        first need: call that first where the value must be exact.
        """
        end = self._log_end_offset
        first = self._producers.first_undecided_offset() if self._producers_loaded else None
        stable = end if first is None or first > end else first
        return max(stable, self._log_start_offset)

    @property
    def recovery_point(self) -> int:
        """Every offset below this has been fsynced to disk."""
        return self._recovery_point

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def size_bytes(self) -> int:
        """Bytes of all segments' ``.log`` files."""
        if self._unopened is not None:
            return self._unopened.record.size_bytes
        return self._segments.size_bytes

    @property
    def segment_count(self) -> int:
        if self._unopened is not None:
            return len(self._unopened.record.base_offsets)
        return len(self._segments)

    def segment_base_offsets(self) -> list[int]:
        if self._unopened is not None:
            return list(self._unopened.record.base_offsets)
        return list(self._segments.base_offsets())

    def __repr__(self) -> str:
        return (
            f"<PartitionLog {self.topic}-{self.partition} start={self._log_start_offset} "
            f"end={self._log_end_offset} segments={self.segment_count}>"
        )

    # -- opening the files on first use ---------------------------------------------

    async def _open(self) -> None:
        """Open the files a clean open left unopened (once; concurrent first callers share it).

        The work runs in a task of its own: a cancelled caller does not stop it
        half way; a failed attempt (the error goes to every caller waiting on
        it) is retried by the next call.
        """
        task = self._opening
        if task is None:
            task = self._opening = asyncio.get_running_loop().create_task(
                self._open_files(), name=f"seglog-open-{self.topic}-{self.partition}"
            )
            task.add_done_callback(self._opened)
        await asyncio.shield(task)

    def _opened(self, task: asyncio.Task[None]) -> None:
        # A failed (or cancelled) open is forgotten, even when every caller waiting on it was
        # cancelled before it failed: the next call tries again instead of getting the old error.
        if (task.cancelled() or task.exception() is not None) and self._opening is task:
            self._opening = None

    async def _open_files(self) -> None:
        record = self._unopened
        if record is None:
            return
        self._check_open()
        if self._closing:  # its close (or its topic's deletion) has begun: no files to open for it
            what = "is being deleted" if self._deleted else "is closing"
            raise ClosedError(f"{self.topic}-{self.partition} {what}")
        # The owner checks the record against the files (a disagreement recovers the partition as after
        # an unclean stop) and makes whatever it recovered durable before handing the segments over.
        loaded = await self._owner.open_files(self.topic, self.partition, self.directory, self.config, record)
        if self._closed:  # closed meanwhile (close waits for this task; belt and braces)
            with contextlib.suppress(Exception):
                await close_segments(loaded.segments.values())
            self._check_open()
        self._segments = loaded.segments
        self._log_end_offset = loaded.log_end_offset
        self._log_start_offset = loaded.log_start_offset
        self._recovery_point = loaded.recovery_point
        self._unopened = None
        self._end_at_open = loaded.log_end_offset
        self._txn_index_from = loaded.txn_index_from
        # A record the files disagreed with was recovered from: what the clean close left is gone.
        self._clean_open = not loaded.recovered
        await self.load_producer_state()

    async def load_producer_state(self) -> None:
        """Load the producer state and the aborted transactions now, if not yet (else: on first need).

        The engine calls it when it opens a partition's files after a clean
        close, so that ``last_stable_offset`` and ``aborted_transactions`` are
        exact from the start. After an unclean open (the state is rebuilt from
        the log, and the ``.txnindex`` of the segments recovery scanned with it)
        the first producer append or ``read_committed`` read loads it, or a
        call of this. A failure is logged, not raised: the next need tries again.
        """
        if self._producers_loaded or self._closed:
            return
        try:
            await self._ready_producers()
        except SeglogError as exc:
            log.warning("%s-%d: producer state not loaded (tried again on next need): %s",
                        self.topic, self.partition, exc)

    # -- append --------------------------------------------------------------------

    async def append(
        self,
        records: Sequence[Record],
        *,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        transactional: bool = False,
    ) -> AppendResult:
        """Append ``records`` as one batch with consecutive offsets; returns where they went.

        The batch is durable against a process crash when this returns, and
        against power loss too when ``flush_messages`` says so (``1``: every
        append is fsynced before it returns).

        ``producer_id``, ``producer_epoch`` and ``base_sequence`` are those of
        Kafka's idempotent producer (the Kafka front end passes what a client
        sent): the batch's records get sequences ``base_sequence`` on, and a
        batch this producer already wrote (the same epoch and sequences, one of
        its last five) is not written again: the call returns where it went.

        ``transactional=True`` (which needs a producer) writes a batch of the
        producer's transaction: the first one opens the transaction at this
        partition, and :meth:`write_txn_marker` ends it. Until then its records
        stay above :attr:`last_stable_offset` (``read_committed`` readers wait
        for them); a non-transactional batch of the same producer meanwhile is
        refused.

        Raises:
            InvalidRecordError: ``records`` is empty, not a sequence of
                ``Record``, or a field has the wrong type; producer fields out
                of range; ``transactional`` without a producer.
            RecordTooLargeError: the encoded batch is larger than
                ``max_message_bytes`` or ``segment_bytes``.
            InvalidProducerEpochError, OutOfOrderSequenceError: the producer's
                batch is refused (an older epoch, a gap in the sequences); nothing is written.
            InvalidTxnStateError: a non-transactional batch of a producer whose
                transaction is open here.
            StorageError: the disk failed; the log is as it was before the call.
            ClosedError: the log or engine was closed.
        """
        if self._closed or self._closing or self._read_only:
            self._check_writable()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[AppendResult] = loop.create_future()
        if transactional is not False:
            if transactional is not True:
                raise InvalidRecordError(f"transactional must be a bool, got {transactional!r}")
            if producer_id == NO_PRODUCER_ID:
                raise InvalidRecordError(
                    f"{self.topic}-{self.partition}: a transactional append needs producer_id, producer_epoch and "
                    "base_sequence (a transaction belongs to a producer)"
                )
        if producer_id != NO_PRODUCER_ID or producer_epoch != NO_PRODUCER_EPOCH or base_sequence != NO_SEQUENCE:
            fields: tuple[object, ...] = (producer_id, producer_epoch, base_sequence)
            if any(type(field) is not int for field in fields):
                raise InvalidRecordError(
                    f"{self.topic}-{self.partition}: producer_id, producer_epoch and base_sequence must be ints, "
                    f"got {fields!r}"
                )
            problem = producer_fields_problem(producer_id, producer_epoch, base_sequence)
            if problem is not None:
                raise InvalidRecordError(f"{self.topic}-{self.partition}: {problem}")
            # Never merged with other appends: the batch's header carries the producer's sequences.
            head, body, header = self._encode(
                records, producer=(producer_id, producer_epoch, base_sequence), transactional=transactional
            )
            self._pending.append(_PendingAppend(head, body, header, header.size, future))
        elif self._writer is None and self._write_soon is None:
            # The first append queued (every append of a producer that awaits each one): nothing waits
            # to be merged with it, so it is encoded now, as it is. This caller then leads the write
            # (LevelDB's writer queue): it lets the loop turn once, so that the appends of the other
            # tasks of this turn queue behind it (they merge among themselves), and writes them all
            # with its own (_write_next); its result is then ready, unless the writer task took over.
            # A small batch of plain records is encoded whole, in one call (header, CRC and body), and
            # written by _write_lean unless anything queues behind it or the write is unusual.
            lean = (
                encode_small_batch(
                    records, self._timestamp_type is TimestampType.LOG_APPEND_TIME, time.time_ns() // 1_000_000,
                    LOOP_WRITE_MAX_BYTES,
                )
                if records.__class__ is list
                else None
            )
            if lean is None:
                head, body, header = self._encode(records)
                item = _PendingAppend(head, body, header, LOG_OVERHEAD + header.batch_length, future)
            else:
                batch, max_timestamp = lean
                count = len(records)  # before the turn: the caller's list may change meanwhile
                size = len(batch)
                config = self.config
                if size > config.max_message_bytes or size > config.segment_bytes:
                    self._check_size(size)
                # Queued as any batch (its header and body in one buffer): a caller queued behind it, or
                # a close during the turn, writes it with the rest.
                item = _PendingAppend(batch, b"", _new_batch_header(_unpack_header(batch)), size, future)
            pending = self._pending
            pending.append(item)
            self._write_soon = _LEADER
            try:
                await asyncio.sleep(0)
            except asyncio.CancelledError:
                future.cancel()  # never written: _write_next drops it
                if self._write_soon is _LEADER:  # those queued behind it are written by the next turn
                    self._write_soon = loop.call_soon(self._write_next)
                raise
            if self._write_soon is _LEADER:  # (a close may have written the queue already)
                if lean is not None and len(pending) == 1:  # nobody queued behind it
                    self._write_soon = None
                    pending.clear()
                    result = self._write_lean(batch, count, max_timestamp)
                    if result is not None:
                        return result
                    pending.append(item)  # the general path decides
                self._write_next()
            return await future
        elif type(records) is list and 0 < len(records) <= SMALL_APPEND_RECORDS:
            estimate = _small_estimate(records)
            if estimate is not None:
                # Encoded by the writer, in one batch with the small appends waiting beside it.
                self._pending.append(_SmallAppend(records.copy(), estimate, future))
            else:
                head, body, header = self._encode(records)
                self._pending.append(_PendingAppend(head, body, header, header.size, future))
        else:
            head, body, header = self._encode(records)
            self._pending.append(_PendingAppend(head, body, header, header.size, future))
        self._start_writer(loop)
        # If this caller is cancelled the future is cancelled with it; the writer
        # skips cancelled futures it has not taken yet, and a batch already taken
        # is written whole (its result is simply not delivered).
        return await future

    def _encode(
        self,
        records: Sequence[Record],
        now_ms: int | None = None,
        producer: tuple[int, int, int] = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE),
        transactional: bool = False,
    ) -> tuple[bytearray, bytes | LateBody, BatchHeader]:
        given: object = records  # callers may pass anything; check before trusting the annotation
        # A list or tuple of records is the common case; the slower ABC check only for anything else.
        if given.__class__ is not list and (isinstance(given, (Record, str, bytes)) or not isinstance(given, Sequence)):
            raise InvalidRecordError(
                f"append takes a sequence of Record, got {type(records).__name__}; wrap one record in a list"
            )
        if not records:
            raise InvalidRecordError("append of an empty batch: pass at least one Record")
        if now_ms is None:
            now_ms = time.time_ns() // 1_000_000  # _now_ms, inline: every append
        body: bytes | LateBody
        if len(records) >= LATE_BODY_RECORDS and (
            planned := plan_batch_parts(
                0, records, timestamp_type=self._timestamp_type, now_ms=now_ms, producer=producer,
                transactional=transactional,
            )
        ):
            # Checked and sized here; the body is written by the append's thread, just before it
            # writes it to the file (PERFORMANCE.md, "Bodies are written where they are encoded").
            head, body = planned
            if len(body) < LATE_BODY_BYTES or len(body) < LATE_BODY_RECORD_BYTES * len(records):
                body = body.materialize()  # small records: the split costs more than it saves
        else:
            try:
                head, body = encode_batch_parts(
                    0, records, timestamp_type=self._timestamp_type, now_ms=now_ms, packer=self._packer,
                    producer_id=producer[0], producer_epoch=producer[1], base_sequence=producer[2],
                    transactional=transactional,
                )
            except (TypeError, ValueError) as exc:
                raise InvalidRecordError(f"{self.topic}-{self.partition}: {exc}") from exc
        header = read_header(head)
        size = LOG_OVERHEAD + header.batch_length
        config = self.config
        if size > config.max_message_bytes or size > config.segment_bytes:
            self._check_size(size)
        return head, body, header

    def _check_size(self, size: int) -> None:
        config = self.config
        if size > config.max_message_bytes:
            raise RecordTooLargeError(
                f"{self.topic}-{self.partition}: the batch is {size} bytes on disk, more than "
                f"max.message.bytes={config.max_message_bytes}; split it into smaller appends or raise the limit"
            )
        if size > config.segment_bytes:
            raise RecordTooLargeError(
                f"{self.topic}-{self.partition}: the batch is {size} bytes on disk, more than "
                f"segment.bytes={config.segment_bytes}; split it or raise segment.bytes"
            )

    async def append_encoded(self, data: bytes | bytearray | memoryview) -> AppendResult:
        """Append batches that were encoded elsewhere (``seglog.segments.batch.encode_batch``), back to back.

        For bulk writers (the Spark data source's commit): encoding runs in
        parallel tasks, and this places the finished batches. Every batch is
        checked (header, CRC-32C, body) before anything is written, then given
        offsets following the log end (the CRC does not cover the base
        offset, so nothing is re-encoded — except under ``LogAppendTime``,
        where the timestamps are rewritten as Kafka does). Each batch is
        written whole; the batches of one call are contiguous in the log.

        Raises:
            CorruptRecordError: ``data`` is not a sequence of valid batches.
            RecordTooLargeError: a batch exceeds ``max_message_bytes`` or ``segment_bytes``.
            InvalidRecordError: ``data`` is not bytes, a bytearray or a memoryview.
            StorageError, ClosedError: as :meth:`append`.
        """
        self._check_writable()
        if not isinstance(data, bytes | bytearray | memoryview):
            raise InvalidRecordError(
                f"append_encoded takes bytes, a bytearray or a memoryview, got {type(data).__name__}"
            )
        config = self.config
        limit = max(config.max_message_bytes, config.segment_bytes)
        items: list[_PendingAppend] = []
        futures: list[asyncio.Future[AppendResult]] = []
        loop = asyncio.get_running_loop()
        view = memoryview(data)
        position, end = 0, len(view)
        while position < end:
            # Each batch stands alone (staged batches all start at offset 0): header, CRC and body
            # are checked; CorruptRecordError names the position otherwise.
            header = read_header(view, position)
            check_header(header, limit, position)
            if position + header.size > end:
                raise CorruptRecordError(
                    f"{self.topic}-{self.partition}: append_encoded got a batch cut short at position {position}"
                )
            raw = view[position : position + header.size]
            verify_crc(raw, 0, header)
            records = decode_batch(raw, 0, header)
            if self._timestamp_type is TimestampType.LOG_APPEND_TIME:
                head, body, batch_header = self._encode([r._replace(offset=-1) for r in records])
            else:
                self._check_size(header.size)
                head, body, batch_header = bytearray(raw[:HEADER_SIZE]), bytes(raw[HEADER_SIZE:]), header
            future: asyncio.Future[AppendResult] = loop.create_future()
            futures.append(future)
            items.append(_PendingAppend(head, body, batch_header, batch_header.size, future))
            position += header.size
        if not items:
            raise CorruptRecordError(f"{self.topic}-{self.partition}: append_encoded got no batch")
        self._pending.extend(items)  # no await since the first: the batches stay contiguous
        self._start_writer(loop)
        results = await asyncio.gather(*futures)
        return AppendResult(
            first_offset=results[0].first_offset,
            last_offset=results[-1].last_offset,
            max_timestamp=max(r.max_timestamp for r in results),
            log_append_time=results[-1].log_append_time,
            log_start_offset=results[-1].log_start_offset,
        )

    async def append_kafka_batch(self, data: bytes | bytearray | memoryview) -> AppendResult:
        """Store one Kafka RecordBatch v2 (magic 2) as it arrived: what the wire server does with a produced batch.

        The batch is checked whole first (``seglog.segments.kafka_batch.check_produced``:
        CRC-32C, lengths, record count, offset deltas, timestamps, headers; a
        compressed batch is decompressed to check its records, and stays
        compressed on disk), then written verbatim beside seglog's own batches
        (docs/FORMAT.md §2.5). Only bytes outside the CRC change: the base
        offset (the log's next offset) and the partition leader epoch (-1);
        under ``LogAppendTime`` also the timestamp type, ``max_timestamp`` (the
        append time, which every record then reports) and the CRC. A batch
        with a record that has no timestamp (-1) under ``CreateTime`` is the
        exception: its records are appended as seglog's own batch, each
        without a timestamp getting the append time, as :meth:`append` does.

        ``max_message_bytes`` applies to the batch as stored (compressed). The
        records of one call get consecutive offsets; durability as :meth:`append`.

        Raises:
            KafkaBatchError: the batch fails a check (``refusal`` says which
                kind); nothing is written. A subclass of ``CorruptRecordError``.
            RecordTooLargeError: the batch exceeds ``max_message_bytes`` or ``segment_bytes``.
            InvalidRecordError: ``data`` is not bytes, a bytearray or a memoryview.
            StorageError, ClosedError: as :meth:`append`.
        """
        self._check_writable()
        if not isinstance(data, bytes | bytearray | memoryview):
            raise InvalidRecordError(
                f"append_kafka_batch takes bytes, a bytearray or a memoryview, got {type(data).__name__}"
            )
        self._check_size(len(data))
        produced = check_produced(data, max_batch_bytes=len(data))
        if produced.needs_timestamps:
            # Re-encoded as seglog's own batch, with the producer's fields kept: an idempotent
            # producer's retry of such a batch is still recognised.
            sent = read_header(memoryview(data)[:HEADER_SIZE])
            if sent.producer_id != NO_PRODUCER_ID:
                return await self.append(
                    decode_produced(data), producer_id=sent.producer_id, producer_epoch=sent.producer_epoch,
                    base_sequence=sent.base_sequence, transactional=sent.is_transactional,
                )
            return await self.append(decode_produced(data))
        view = memoryview(data)
        head = bytearray(view[:HEADER_SIZE])
        body = bytes(view[HEADER_SIZE:])
        clear_leader_epoch(head)
        if self._timestamp_type is TimestampType.LOG_APPEND_TIME:
            stamp_log_append_time(head, body, _now_ms())
        header = read_header(head)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[AppendResult] = loop.create_future()
        self._pending.append(_PendingAppend(head, body, header, header.size, future))
        self._start_writer(loop)
        return await future

    def _start_writer(self, loop: asyncio.AbstractEventLoop) -> None:
        # The first append queued while no writer runs schedules _write_next for the next loop turn: the
        # appends queued meanwhile (concurrent callers) are taken with it, into one batch.
        if self._writer is None and self._write_soon is None:
            self._write_soon = loop.call_soon(self._write_next)

    def _write_next(self) -> None:
        """Write the appends queued: on the loop when it can (``_write_on_loop``), else by the writer task.

        Runs one loop turn after the first append queued: in that append's
        caller (``append``), or as a plain callback (``_start_writer``: the
        other kinds of append, and a leading caller cancelled); a close runs
        it at once.
        The writer task (``_write_pending``, one thread hop per group) takes
        the group when the loop cannot write it, and whatever is queued while
        it writes; it ends when nothing is left.
        """
        self._write_soon = None
        pending = self._pending
        if self._writer is not None or not pending:
            return
        try:
            if len(pending) == 1 and pending[0].__class__ is _PendingAppend:
                # One caller (the serial producer), encoded already: nothing to merge or encode.
                item = pending.pop()
                assert isinstance(item, _PendingAppend)
                if item.future is not None and item.future.cancelled():
                    return
                group = [item]
            else:
                group = self._take_group()
        except Exception as exc:  # a bug in encoding: the queued callers get it, the loop goes on
            self._fail_pending(exc)
            return
        try:
            written = bool(group) and self._write_on_loop(group)
        except Exception as exc:  # a bug: its callers get it, the loop (or the leading caller) goes on
            for item in group:
                for future in item.futures():
                    if not future.done():
                        future.set_exception(exc)
            written = True
        if written:
            if not self._pending:
                return
            group = []  # the rest of a queue longer than one group: the writer task takes it
        if group or self._pending:
            self._writer = asyncio.get_running_loop().create_task(
                self._write_pending(group or None), name=f"seglog-writer-{self.topic}-{self.partition}"
            )

    def _write_lean(self, batch: bytearray, records: int, max_timestamp: int) -> AppendResult | None:
        """Write one leading caller's batch on the loop and publish it: its result, or ``None`` (nothing done).

        ``_write_on_loop`` and ``_publish`` fused for the commonest append (one
        batch ``encode_small_batch`` made, nobody queued behind it): the same
        conditions (the lock free, the files open, ``flush.messages`` not
        reached), then ``LogSegment.append_lean``, which refuses whatever is
        not the common case. ``None`` sends the batch down the general path.

        Raises:
            StorageError: the write failed; nothing was published.
        """
        config = self.config
        if (
            self._lock.locked()
            or self._closed
            or self._unopened is not None
            or not self._active_indexes_ready
            or self._unflushed_messages + records >= config.flush_messages
        ):
            return None
        active = self._segments.last_segment
        assert active is not None  # a partition always has a segment
        base = self._log_end_offset
        if (
            active.append_lean(
                batch, base, records, max_timestamp, config.segment_ms, config.segment_bytes,
                time.time_ns() // 1_000_000,
            )
            is WOULD_BLOCK
        ):
            return None
        # _publish, for one batch.
        end = base + records
        self._log_end_offset = end
        self._tail = (base, end, bytes(batch), True) if len(batch) <= TAIL_CACHE_BYTES else None
        self._unflushed_messages += records
        if self._data_waiters:
            self._wake_readers()
        self._producers.map_end_offset = end
        log_append_time = self._timestamp_type is TimestampType.LOG_APPEND_TIME
        return _new_append_result(
            (base, end - 1, max_timestamp, max_timestamp if log_append_time else NO_TIMESTAMP, self._log_start_offset)
        )

    def _write_on_loop(self, group: list[_PendingAppend]) -> bool:
        """Write ``group`` here on the event loop and answer its callers; ``False`` (nothing done) if it cannot.

        Only the commonest write qualifies: no roll, no fsync (``flush.messages``
        not reached), no producer's batch (their admission may load the
        producer state), the lock free (no roll, flush, retention or close in
        progress), the files open, and a write the segment and the file layer
        take onto the loop (``LogSegment.append_nowait``: small, into the page
        cache, nothing to load or allocate). Everything else makes the writer
        task's one hop. Whatever the write raises goes to the callers.
        """
        if self._lock.locked() or self._closed or self._unopened is not None or not self._active_indexes_ready:
            return False
        records = size = offsets = 0
        max_timestamp = group[0].header.max_timestamp
        for item in group:
            header = item.header
            if header.producer_id != NO_PRODUCER_ID or item.body.__class__ is LateBody:
                return False
            records += header.record_count
            offsets += header.last_offset_delta + 1
            size += item.size
            max_timestamp = max(max_timestamp, header.max_timestamp)
        config = self.config
        if size > LOOP_WRITE_MAX_BYTES or self._unflushed_messages + records >= config.flush_messages:
            return False
        active = self._segments.last_segment  # the active segment
        assert active is not None  # a partition always has a segment
        next_offset = self._log_end_offset
        if active.should_roll(
            _new_roll_params(
                (
                    config.segment_ms, config.segment_bytes, max_timestamp, next_offset + offsets - 1, size,
                    time.time_ns() // 1_000_000,
                )
            )
        ):
            return False
        parts: list[bytes | bytearray | memoryview] = []
        headers: list[BatchHeader] = []
        for item in group:
            head = item.head
            rebase_batch(head, next_offset)
            item.base_offset = next_offset
            next_offset += item.header.last_offset_delta + 1
            parts.append(head)
            parts.append(item.body)  # type: ignore[arg-type]  # not a LateBody: checked above
            headers.append(_new_batch_header((item.base_offset, *item.header[1:])))  # as written: rebased
        try:
            position = active.append_nowait(parts, headers)
        except Exception as exc:
            for item in group:
                for future in item.futures():
                    if not future.done():
                        future.set_exception(exc)
            return True
        if position is WOULD_BLOCK:
            return False
        self._publish(group, records, False)
        return True

    def _fail_pending(self, exc: BaseException) -> None:
        for waiting in self._pending:
            for future in waiting.futures() if isinstance(waiting, _PendingAppend) else (waiting.future,):
                if not future.done():
                    future.set_exception(exc)
        self._pending.clear()

    async def write_txn_marker(
        self, producer_id: int, producer_epoch: int, *, commit: bool, coordinator_epoch: int = 0
    ) -> int:
        """End ``producer_id``'s transaction at this partition with a marker; returns the marker's offset.

        What Kafka's transaction coordinator writes to each partition of a
        transaction (WriteTxnMarkers): a control batch in Kafka's format (one
        record: commit or abort, and ``coordinator_epoch``) that takes one
        offset and is never returned as a record. The transaction's records
        become decided: :attr:`last_stable_offset` moves past them, and an
        abort adds the transaction to the segment's ``.txnindex``
        (:meth:`aborted_transactions`), so ``read_committed`` reads skip them.
        With no transaction open for the producer the marker is written all
        the same (Kafka does). A newer ``producer_epoch`` than the producer's
        is taken (the coordinator bumps it when it aborts a timed-out one).
        Durability as :meth:`append`.

        Raises:
            InvalidRecordError: a field of the wrong type or out of range.
            InvalidProducerEpochError: ``producer_epoch`` is older than the producer's (fenced).
            TransactionCoordinatorFencedError: ``coordinator_epoch`` is older than the
                one of the producer's last marker here.
            StorageError, ClosedError: as :meth:`append`.
        """
        self._check_writable()
        if commit is not True and commit is not False:
            raise InvalidRecordError(f"commit must be a bool, got {commit!r}")
        fields: tuple[object, ...] = (producer_id, producer_epoch, coordinator_epoch)
        if any(type(field) is not int for field in fields):
            raise InvalidRecordError(
                f"{self.topic}-{self.partition}: producer_id, producer_epoch and coordinator_epoch must be ints, "
                f"got {fields!r}"
            )
        if producer_id < 0 or not 0 <= producer_epoch <= MAX_PRODUCER_EPOCH or not 0 <= coordinator_epoch < 2**31:
            raise InvalidRecordError(
                f"{self.topic}-{self.partition}: a marker needs a producer id >= 0, an epoch in "
                f"[0, {MAX_PRODUCER_EPOCH}] and a coordinator epoch in [0, 2**31-1]; got {fields!r}"
            )
        now_ms = _now_ms()
        data = encode_control_batch(
            producer_id, producer_epoch, commit=commit, coordinator_epoch=coordinator_epoch, timestamp=now_ms
        )
        head = bytearray(data[:HEADER_SIZE])
        body = data[HEADER_SIZE:]
        if self._timestamp_type is TimestampType.LOG_APPEND_TIME:
            stamp_log_append_time(head, body, now_ms)
        header = read_header(head)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[AppendResult] = loop.create_future()
        self._pending.append(
            _PendingAppend(head, body, header, header.size, future, marker=(commit, coordinator_epoch))
        )
        self._start_writer(loop)
        return (await future).first_offset

    async def _write_pending(self, first: list[_PendingAppend] | None = None) -> None:
        # The writer task: `first` (taken by _write_next), then every group queued meanwhile, one hop each.
        try:
            while first or self._pending:
                group = first or self._take_group()
                first = None
                if not group:
                    continue
                try:
                    async with self._lock:
                        if self._closed:
                            raise ClosedError(f"{self.topic}-{self.partition} was closed before the append was written")
                        if self._unopened is not None:
                            await self._open()
                        await self._write_group(group)
                except BaseException as exc:
                    for item in group:
                        for future in item.futures():
                            if not future.done():
                                if isinstance(exc, asyncio.CancelledError):
                                    future.cancel()
                                else:
                                    future.set_exception(exc)
                    if isinstance(exc, asyncio.CancelledError):
                        raise
        finally:
            self._writer = None
            # Only left behind when the writer itself was cancelled: these callers are told their
            # append failed, so the batches must never be written later by another writer.
            for waiting in self._pending:
                if waiting.future is not None and not waiting.future.done():
                    waiting.future.set_exception(ClosedError(f"{self.topic}-{self.partition} was closed"))
            self._pending.clear()

    def _take_group(self) -> list[_PendingAppend]:
        """The batches of the next write, in arrival order: runs of small appends merged, about 1 MiB."""
        group: list[_PendingAppend] = []
        run: list[_SmallAppend] = []
        size = run_bytes = 0
        config = self.config
        # A merged batch must pass the size checks its appends would pass alone; well below them,
        # the estimate (keys, values, overhead; not headers) leaves room for what it leaves out.
        merge_limit = min(config.max_message_bytes, config.segment_bytes) // 2
        pending = self._pending
        taken = 0
        for item in pending:
            if item.future is not None and item.future.cancelled():
                taken += 1
                continue
            item_bytes = item.estimate if isinstance(item, _SmallAppend) else item.size
            if (group or run) and size + item_bytes > MAX_GROUP_BYTES:
                break
            taken += 1
            size += item_bytes
            if isinstance(item, _SmallAppend):
                if run and run_bytes + item_bytes > merge_limit:
                    group.extend(self._encode_run(run))
                    run, run_bytes = [], 0
                run.append(item)
                run_bytes += item_bytes
                continue
            if run:
                group.extend(self._encode_run(run))
                run, run_bytes = [], 0
            group.append(item)
        if run:
            group.extend(self._encode_run(run))
        del pending[:taken]  # one slice delete: pop(0) per item made a group of n appends O(n^2)
        return group

    def _encode_run(self, run: list[_SmallAppend]) -> list[_PendingAppend]:
        """One batch holding the records of every small append in ``run``, in order.

        When that batch cannot be encoded (a record is invalid) or is too
        large, each append is encoded alone instead, so that only the callers
        at fault get the error.
        """
        if len(run) > 1:
            now_ms = _now_ms()
            try:
                head, body, header = self._encode([record for small in run for record in small.records], now_ms)
            except (InvalidRecordError, RecordTooLargeError):
                pass
            else:
                log_append_time = self._timestamp_type is TimestampType.LOG_APPEND_TIME
                members = [
                    (small.future, len(small.records), now_ms if log_append_time else _largest(small.records, now_ms))
                    for small in run
                ]
                return [_PendingAppend(head, body, header, header.size, None, members=members)]
        batches: list[_PendingAppend] = []
        for small in run:
            try:
                head, body, header = self._encode(small.records)
            except (InvalidRecordError, RecordTooLargeError) as exc:
                small.future.set_exception(exc)
                continue
            batches.append(_PendingAppend(head, body, header, header.size, small.future))
        return batches

    async def _ready_producers(self) -> ProducerStateManager:
        """The producer state up to the log end, loaded on first need (lock held), as Kafka's ``LogLoader``.

        The newest snapshot that reads back is loaded (one that does not --
        a CRC-32C mismatch, values no writer produces -- is logged, deleted and
        the next older one tried), then the batch headers after it are read up
        to the log end. Snapshots past the log end (a recovery cut the log
        shorter), below the log start or of no segment are deleted first. With
        no snapshot at all the whole log is read, once: the snapshot written
        at the next roll or clean close bounds the next load.
        """
        if self._producers_loaded:
            return self._producers
        if self._unopened is not None:
            await self._open()
        directory = self.directory
        start, end = self._log_start_offset, self._log_end_offset
        snapshots = (await in_thread(list_partition_dir, directory)).snapshots
        plan = plan_snapshot_load(snapshots, self._segments.base_offsets(), log_start_offset=start,
                                  log_end_offset=end, clean_shutdown=self._clean_open)
        if not self._read_only:
            for offset in plan.delete:
                await remove(directory / snapshot_file_name(offset))
        # Recovery reset the .txnindex of the segments it scanned: the state must be rebuilt from a
        # snapshot at or below the first of them, so that the scan sees (and indexes) their aborts.
        rebuild_from = None if self._read_only else self._txn_index_from
        bad = await in_thread(_first_bad_txn_index, self._segments.values(), end)
        if bad is not None:
            log.warning("%s-%d: the .txnindex of segment %d is corrupt; %s", self.topic, self.partition, bad,
                        "ignored (read-only)" if self._read_only else "rebuilt from the log, with every later one")
            if not self._read_only:
                rebuild_from = bad if rebuild_from is None else min(rebuild_from, bad)
                later = self._segments.values(rebuild_from, end + 1)

                def reset() -> None:
                    for segment in later:
                        if segment.base_offset >= bad:
                            segment.reset_txn_index()

                await in_thread(reset)
        candidates = [c for c in plan.candidates if rebuild_from is None or c <= rebuild_from]
        producers = ProducerStateManager(start)
        now_ms = _now_ms()
        if plan.assume_empty and rebuild_from is None:
            # Cleanly closed with no snapshot at all: written by a seglog from before producer state
            # (its batches carry no producer id), or every snapshot was lost to a power cut after the
            # close -- which syncs a snapshot that holds producers, so the state was empty.
            start = end
        for offset in candidates:
            path = directory / snapshot_file_name(offset)
            try:
                entries = decode_snapshot(await in_thread(read_snapshot_file, path), offset)
            except CorruptSnapshotError as exc:
                log.warning("%s: %s; ignored (deleted), the producer state is rebuilt from the log", path, exc)
                if not self._read_only:
                    await remove(path)
                continue
            producers.load_snapshot(entries, offset, now_ms=now_ms)
            self._last_snapshot_offset = max(self._last_snapshot_offset, offset)
            start = offset
            break
        if start < end:
            await self._replay(producers, start, end, rebuild_from)
            log.info(
                "%s-%d: producer state rebuilt from offset %d to %d (%d producers)",
                self.topic, self.partition, start, end, len(producers.producers),
            )
        producers.map_end_offset = end
        segments = self._segments.values()

        def read_aborted() -> list[AbortedTxn]:
            found: list[AbortedTxn] = []
            for segment in segments:
                with contextlib.suppress(CorruptIndexError):  # only when read-only: ignored (warned above)
                    found += segment.aborted_txns()
            return found

        aborted = await in_thread(read_aborted)
        self._producers = producers
        self._aborted = aborted
        self._producers_loaded = True
        self._txn_index_from = None
        return producers

    async def _replay(self, producers: ProducerStateManager, start: int, end: int, rebuild_from: int | None) -> None:
        """Bring ``producers`` from ``start`` to ``end`` with the log's batches (Kafka's ``rebuildProducerState``).

        Only headers are read, but for the markers' one record (commit or
        abort). The aborts at or after ``rebuild_from`` are appended to their
        segment's ``.txnindex`` (recovery emptied it; Kafka's ``LogSegment.recover``).
        """
        rebuilt: dict[LogSegment, list[AbortedTxn]] = {}

        def on_marker(segment: LogSegment, header: BatchHeader, marker: ControlRecord) -> None:
            aborted = _load_marker(producers, header, marker)
            if aborted is not None and rebuild_from is not None and header.base_offset >= rebuild_from:
                rebuilt.setdefault(segment, []).append(aborted)

        # load_batch runs in the read's thread: nothing else uses ``producers`` yet.
        await self._walk_batches(start, end, partial(_load_batch, producers), on_marker)
        for segment, txns in rebuilt.items():
            await in_thread(segment.append_aborted_txns, txns, fsync=True)

    async def _walk_batches(
        self,
        start: int,
        end: int,
        on_batch: Callable[[BatchHeader], None],
        on_marker: Callable[[LogSegment, BatchHeader, ControlRecord], None],
    ) -> None:
        """Visit the batch headers of ``[start, end)`` in order: ``on_batch`` for data, ``on_marker`` for markers.

        ``on_batch`` runs in the read's thread (or on the loop when the page
        cache holds the bytes); ``on_marker`` on the loop, with the marker's
        record read back and checked.
        """

        class MarkerFound(Exception):  # stops the header walk at a marker: its record decides the state
            def __init__(self, header: BatchHeader) -> None:
                super().__init__()
                self.header = header

        def visit(header: BatchHeader) -> None:
            if header.is_control:
                raise MarkerFound(header)
            on_batch(header)

        for segment in self._segments.values(start, end):
            position = max(start, segment.base_offset)
            while position < end:
                try:
                    await in_thread(segment.visit_batch_headers, position, end, visit)
                except MarkerFound as found:
                    header = found.header
                    on_marker(segment, header, await _read_marker(segment, header))
                    position = header.next_offset
                    continue
                break

    async def _follow_producers(self, end: int) -> None:
        """A read-only view's producer state and aborted transactions brought to ``end`` (the follower's find).

        The caller publishes ``end`` as the log end only after this returns, so
        that the last stable offset never runs ahead of what was replayed (a
        transaction the writer opened past the old end would otherwise read as
        committed). The headers are gathered first and applied on the loop in
        one step: a reader never sees half a replay. Lock held by the caller.
        """
        start = self._log_end_offset
        if not self._producers_loaded or end == start:
            return
        if end < start:  # the writer's recovery cut the log: the state is reloaded from the files on next use
            self._producers_loaded = False
            return
        found: list[tuple[BatchHeader, ControlRecord | None]] = []
        try:
            await self._walk_batches(start, end, lambda header: found.append((header, None)),
                                     lambda _segment, header, marker: found.append((header, marker)))
        except SeglogError as exc:  # the reload on next use reports it to the reader that needs the state
            log.warning("%s-%d: producer state not followed past %d: %s", self.topic, self.partition, start, exc)
            self._producers_loaded = False
            return
        producers = self._producers
        for header, marker in found:
            if marker is None:
                _load_batch(producers, header)
            elif (aborted := _load_marker(producers, header, marker)) is not None:
                self._aborted.append(aborted)
        producers.map_end_offset = end

    def _admit(self, group: list[_PendingAppend]) -> list[_PendingAppend]:
        """``group`` without the producers' batches that are retries or refused (lock held).

        Each producer batch is checked, in order, against the producer state and
        the batches admitted before it (engine.producer_state.AppendCheck). A
        retry of a written batch is answered now with where that batch went; a
        retry of a batch of this same group is answered when that one is
        written; a refused batch gets its error. The others keep their order.
        """
        check = AppendCheck(self._producers)
        admitted: list[_PendingAppend] = []
        by_first_offset: dict[int, _PendingAppend] = {}
        next_offset = self._log_end_offset
        for item in group:
            header = item.header
            if item.marker is not None:
                try:
                    check.check_marker(
                        header.producer_id, header.producer_epoch, item.marker[1], next_offset, header.max_timestamp,
                        commit=item.marker[0],
                    )
                except ProducerError as exc:
                    log.info("%s-%d: %s", self.topic, self.partition, exc)
                    assert item.future is not None
                    if not item.future.done():
                        item.future.set_exception(exc)
                    continue
            elif header.producer_id != NO_PRODUCER_ID:
                try:
                    duplicate = check.check(
                        header.producer_id, header.producer_epoch, header.base_sequence, next_offset,
                        header.last_offset_delta, header.max_timestamp, is_transactional=header.is_transactional,
                    )
                except ProducerError as exc:
                    log.info("%s-%d: %s", self.topic, self.partition, exc)
                    assert item.future is not None  # producer batches are never merged
                    if not item.future.done():
                        item.future.set_exception(exc)
                    continue
                if duplicate is not None:
                    self._answer_duplicate(item, duplicate, by_first_offset.get(duplicate.first_offset))
                    continue
                by_first_offset[next_offset] = item
            admitted.append(item)
            next_offset += header.last_offset_delta + 1
        return admitted

    def _refuse_producer_batches(self, group: list[_PendingAppend], exc: SeglogError) -> list[_PendingAppend]:
        log.warning(
            "%s-%d: the producer state could not be loaded, idempotent producers' batches are refused: %s",
            self.topic, self.partition, exc,
        )
        kept: list[_PendingAppend] = []
        for item in group:
            if item.header.producer_id == NO_PRODUCER_ID:
                kept.append(item)
            elif item.future is not None and not item.future.done():
                item.future.set_exception(exc)
        return kept

    def _answer_duplicate(
        self, item: _PendingAppend, duplicate: BatchMetadata, original: _PendingAppend | None
    ) -> None:
        future = item.future
        assert future is not None  # producer batches are never merged
        if original is not None:  # a retry of a batch of this write: answered when that one is written
            if original.followers is None:
                original.followers = []
            original.followers.append(future)
            return
        log.debug(
            "%s-%d: producer %d retried the batch of offsets %d..%d: answered with them, not written again",
            self.topic, self.partition, item.header.producer_id, duplicate.first_offset, duplicate.last_offset,
        )
        if not future.done():
            append_time = duplicate.timestamp if self._timestamp_type is TimestampType.LOG_APPEND_TIME else NO_TIMESTAMP
            future.set_result(
                AppendResult(
                    first_offset=duplicate.first_offset,
                    last_offset=duplicate.last_offset,
                    max_timestamp=duplicate.timestamp,
                    log_append_time=append_time,
                    log_start_offset=self._log_start_offset,
                )
            )

    async def _write_group(self, group: list[_PendingAppend]) -> None:
        """Assign offsets, roll when needed, write, advance the log end, resolve futures (lock held)."""
        if any(item.header.producer_id != NO_PRODUCER_ID for item in group):
            try:
                await self._ready_producers()
            except SeglogError as exc:
                # Without the producers' state no producer batch can be told from a retry: those fail
                # (the next write tries the load again); the appends without a producer go on.
                group = self._refuse_producer_batches(group, exc)
            else:
                group = self._admit(group)
        if not group:
            return
        config = self.config
        now_ms = _now_ms()
        next_offset = self._log_end_offset
        active = await self._ready_active()
        if len(group) > 1 and not active.should_roll(
            RollParams(
                max_segment_ms=config.segment_ms,
                max_segment_bytes=config.segment_bytes,
                max_timestamp_in_messages=max(item.header.max_timestamp for item in group),
                max_offset_in_messages=next_offset + sum(item.header.last_offset_delta + 1 for item in group) - 1,
                messages_size=sum(item.size for item in group),
                now_ms=now_ms,
            )
        ):
            # Every roll condition grows with the group (size, largest timestamp, last offset; the
            # index-full test does not change before the write), so when the whole group fits, each
            # prefix fits: one check instead of one per batch (a per-batch check is a large part of a
            # single-record append).
            for item in group:
                rebase_batch(item.head, next_offset)
                item.base_offset = next_offset
                next_offset += item.header.last_offset_delta + 1
            await self._append_chunk(active, group)
            return
        chunk: list[_PendingAppend] = []
        chunk_size = 0
        for item in group:
            header = item.header
            first = next_offset
            last = first + header.last_offset_delta
            roll = active.should_roll(
                RollParams(
                    max_segment_ms=config.segment_ms,
                    max_segment_bytes=config.segment_bytes,
                    max_timestamp_in_messages=header.max_timestamp,
                    max_offset_in_messages=last,
                    messages_size=chunk_size + item.size,
                    now_ms=now_ms,
                )
            )
            if roll and (chunk or active.size > 0):
                if chunk:
                    await self._append_chunk(active, chunk)
                    chunk, chunk_size = [], 0
                active = await self._roll(now_ms)
            rebase_batch(item.head, first)
            item.base_offset = first
            chunk.append(item)
            chunk_size += item.size
            next_offset = last + 1
        if chunk:
            await self._append_chunk(active, chunk)

    async def _ready_active(self) -> LogSegment:
        active = self._segments.active_segment
        assert active is not None  # a partition always has a segment
        if not self._active_indexes_ready:
            await in_thread(active.resize_indexes, self.config.segment_index_bytes)
            self._active_indexes_ready = True
        return active

    async def _append_chunk(self, segment: LogSegment, chunk: list[_PendingAppend]) -> None:
        records = sum(item.header.record_count for item in chunk)
        fsync = self._unflushed_messages + records >= self.config.flush_messages
        if fsync and self._recovery_point < segment.base_offset:
            # Segments sealed since the last flush hold unflushed records too: sync them first, or
            # the recovery point would move past bytes that are only in the page cache.
            await self._flush_locked(segment.base_offset)
        size_before = segment.size
        try:
            await segment_append(
                segment,
                [part for item in chunk for part in (item.head, item.body)],
                [read_header(item.head) for item in chunk],  # as written: base offsets patched in
                fsync=fsync,
            )
        except asyncio.CancelledError:
            # The segment finishes a write it started even when this task is cancelled: if the
            # bytes went in, publish them before passing the cancellation on, or the next append
            # would reuse these offsets.
            if segment.size > size_before:
                aborted = self._publish(chunk, records, fsync)
                if aborted:
                    await run_to_completion(self._index_aborts(segment, chunk, aborted, fsync))
            raise
        aborted = self._publish(chunk, records, fsync)
        if aborted:
            await run_to_completion(self._index_aborts(segment, chunk, aborted, fsync))

    async def _index_aborts(
        self, segment: LogSegment, chunk: list[_PendingAppend], aborted: list[AbortedTxn], fsync: bool
    ) -> None:
        """Write the ``.txnindex`` entries of the aborts ``chunk`` wrote, then answer its markers' callers.

        (Readers already know them: ``_publish`` added them to ``_aborted``.)
        A failure goes to the markers' callers; the entries stay known until
        the partition closes, and an open after a crash rebuilds them.
        """
        error: BaseException | None = None
        try:
            await in_thread(segment.append_aborted_txns, aborted, fsync=fsync)
        except SeglogError as exc:
            log.error("%s-%d: .txnindex entries %s not written: %s", self.topic, self.partition, aborted, exc)
            error = exc
        start = self._log_start_offset
        for item in chunk:
            future = item.future
            if item.marker is None or future is None or future.done():
                continue
            if error is not None:
                future.set_exception(error)
            else:
                base, header = item.base_offset, item.header
                future.set_result(_new_append_result((base, base, header.max_timestamp, NO_TIMESTAMP, start)))

    def _publish(self, chunk: list[_PendingAppend], records: int, fsync: bool) -> list[AbortedTxn]:
        """The bytes of ``chunk`` are in the file: move the log end, wake readers, resolve the callers.

        Returns the aborted transactions whose markers ``chunk`` holds (their
        callers are answered once the ``.txnindex`` has them: ``_index_aborts``).
        """
        last = chunk[-1]
        self._log_end_offset = last.base_offset + last.header.last_offset_delta + 1
        # Keep the last small write in memory for tailing readers (see read()); a large group is not
        # worth holding (and readers of bulk data read the page cache at memory speed anyway).
        if len(chunk) == 1:
            body = last.body
            self._tail = (
                (
                    last.base_offset,
                    self._log_end_offset,
                    b"".join((last.head, body if body.__class__ is bytes else _written(body))),
                    True,
                )
                if last.size <= TAIL_CACHE_BYTES
                else None
            )
        else:
            size = 0
            for item in chunk:
                size += item.size
            self._tail = (
                (
                    chunk[0].base_offset,
                    self._log_end_offset,
                    b"".join([p for item in chunk for p in (item.head, _written(item.body))]),
                    False,
                )
                if size <= TAIL_CACHE_BYTES
                else None
            )
        if fsync:
            self._unflushed_messages = 0
            self._recovery_point = self._log_end_offset
            self._last_flush_ms = _now_ms()
        else:
            self._unflushed_messages += records
        # Readers first: their tasks then run before the producers' (callbacks run in the order
        # they were scheduled), so a subscriber gets the records sooner; a producer loses
        # nothing, its write is done and its result already fixed.
        if self._data_waiters:
            self._wake_readers()
        log_append_time = self._timestamp_type is TimestampType.LOG_APPEND_TIME
        start = self._log_start_offset
        producers = self._producers
        producers.map_end_offset = self._log_end_offset
        aborted: list[AbortedTxn] = []
        for item in chunk:
            base, header = item.base_offset, item.header
            append_time = header.max_timestamp if log_append_time else NO_TIMESTAMP
            if item.marker is not None:
                completed, lso = producers.load_marker(
                    header.producer_id, header.producer_epoch, base, header.max_timestamp,
                    commit=item.marker[0], coordinator_epoch=item.marker[1],
                )
                if completed.is_aborted:
                    txn = AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset, lso)
                    self._aborted.append(txn)
                    aborted.append(txn)
                elif item.future is not None and not item.future.done():
                    item.future.set_result(
                        _new_append_result((base, base, header.max_timestamp, append_time, start))
                    )
                continue
            if header.producer_id != NO_PRODUCER_ID:
                producers.load_batch(
                    header.producer_id, header.producer_epoch, header.base_sequence, base,
                    header.last_offset_delta, header.max_timestamp, is_transactional=header.is_transactional,
                )
                if item.followers:
                    result = _new_append_result(
                        (base, base + header.last_offset_delta, header.max_timestamp, append_time, start)
                    )
                    for follower in item.followers:
                        if not follower.done():
                            follower.set_result(result)
            if item.members is not None:
                for future, count, max_timestamp in item.members:
                    if not future.done():
                        future.set_result(
                            _new_append_result((base, base + count - 1, max_timestamp, append_time, start))
                        )
                    base += count
            elif item.future is not None and not item.future.done():
                # Field order of AppendResult: first, last, max timestamp, log append time, log start.
                item.future.set_result(
                    _new_append_result(
                        (base, base + header.last_offset_delta, header.max_timestamp, append_time, start)
                    )
                )
        return aborted

    async def _roll(self, now_ms: int) -> LogSegment:
        """Seal the active segment and start a new one at the log end offset (lock held)."""
        old = self._segments.active_segment
        assert old is not None
        new_base = self._log_end_offset
        if old.base_offset == new_base:  # empty active segment: nothing to seal
            return old
        await in_thread(old.on_become_inactive)
        segment = await new_segment(self.directory, self.config, new_base, now_ms)
        self._segments.add(segment)
        self._active_indexes_ready = True
        log.info("%s-%d: rolled new segment at offset %d", self.topic, self.partition, new_base)
        await self._take_snapshot(now_ms, durable=False)
        # Kafka flushes the sealed segment in the background after a roll; the
        # recovery point moves when that flush is done.
        self._spawn(self._flush_up_to(new_base))
        return segment

    async def _take_snapshot(self, now_ms: int, *, durable: bool) -> None:
        """Write the producer state at the log end to ``<log end>.snapshot`` (lock held), as Kafka does.

        At a roll the file is written without fsync: a snapshot is checked
        (CRC-32C) when read and one lost or torn is rebuilt from the log, so a
        roll does not pay two more syncs. A failure is logged, not raised: the
        snapshot only saves the scan of the log after it at the next open.
        """
        end = self._log_end_offset
        if end == self._last_snapshot_offset:
            return
        try:
            producers = await self._ready_producers()
            producers.map_end_offset = end
            producers.remove_expired_producers(now_ms)
            await atomic_write(self.directory / snapshot_file_name(end), producers.snapshot(), durable=durable)
        except SeglogError as exc:
            log.warning("%s-%d: producer snapshot at offset %d not written: %s", self.topic, self.partition, end, exc)
            return
        self._last_snapshot_offset = end

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        task.add_done_callback(partial(log_task_failure, where=f"{self.topic}-{self.partition}"))

    async def roll(self) -> None:
        """Seal the active segment now (a no-op when it is empty)."""
        self._check_writable()
        async with self._lock:
            if self._unopened is not None:
                await self._open()
            await self._roll(_now_ms())

    # -- flush -------------------------------------------------------------------------

    async def flush(self) -> None:
        """fsync every segment up to the log end; the recovery point moves to the log end.

        Raises:
            StorageError: the fsync failed.
        """
        self._check_open()
        if self._read_only:
            return
        async with self._lock:
            await self._flush_locked(self._log_end_offset)

    async def _flush_up_to(self, offset: int) -> None:
        async with self._lock:
            if not self._closed:
                await self._flush_locked(offset)

    async def _flush_locked(self, offset: int) -> None:
        if offset <= self._recovery_point:
            return
        for segment in self._segments.values(self._recovery_point, offset):
            await in_thread(segment.flush)
        if offset >= self._log_end_offset:
            self._unflushed_messages = 0
        self._recovery_point = max(self._recovery_point, offset)
        self._last_flush_ms = _now_ms()

    async def maybe_flush_for_time(self, now_ms: int) -> None:
        """Apply ``flush.ms``: fsync when unflushed data is older than the limit.

        Raises:
            InvalidRecordError: ``now_ms`` is not an int that fits int64.
        """
        validate_timestamp(now_ms, "now_ms")
        if self._closed or self._read_only or self._recovery_point >= self._log_end_offset:
            return
        if now_ms - self._last_flush_ms >= self.config.flush_ms:
            async with self._lock:
                await self._flush_locked(self._log_end_offset)

    # -- read --------------------------------------------------------------------------

    async def read(
        self, offset: int, max_bytes: int = DEFAULT_FETCH_BYTES, *, isolation: Isolation = "read_uncommitted"
    ) -> FetchResult:
        """Records from ``offset`` on, in offset order, about ``max_bytes`` of them.

        Always returns at least one record when one exists at or after
        ``offset`` (Kafka's minOneMessage), even if it is larger than
        ``max_bytes``. Reading at the log end offset returns no records.

        ``isolation`` is Kafka's ``isolation.level``. ``"read_uncommitted"``
        (the default): every data record, those of open and aborted
        transactions too. ``"read_committed"``: only records below
        :attr:`last_stable_offset`, without those of aborted transactions.
        Transaction markers are never returned as records; their offsets are
        gaps in either isolation (``next_offset`` moves past them).

        Raises:
            OffsetOutOfRangeError: ``offset`` is below the log start offset or
                above the log end offset.
            CorruptRecordError: a batch on disk failed its CRC check.
            InvalidRecordError: ``isolation`` is neither of the two.
        """
        if isolation != "read_uncommitted":
            _check_isolation(isolation)
            return await self._read_committed(offset, max_bytes)
        if self._closed:
            self._check_open()  # raises
        if self._unopened is not None:
            await self._open()
        # `type(x) is int` first: the exact-int common case skips the two isinstance calls.
        if type(offset) is not int and (isinstance(offset, bool) or not isinstance(offset, int)):
            raise InvalidRecordError(f"offset must be an int, got {type(offset).__name__}")
        if (type(max_bytes) is not int and (isinstance(max_bytes, bool) or not isinstance(max_bytes, int))) or (
            max_bytes < 0
        ):
            raise InvalidRecordError(f"max_bytes must be a non-negative int, got {max_bytes!r}")
        end = self._log_end_offset
        start = self._log_start_offset
        if offset < start or offset > end:
            beyond = "" if 0 <= offset <= INT64_MAX else " (and outside [0, 2**63-1], the range of an offset)"
            raise OffsetOutOfRangeError(
                f"{self.topic}-{self.partition}: offset {offset} is outside the log [{start}, {end}]{beyond}; "
                f"read from {start} (earliest) or {end} (latest)"
            )
        tail = self._tail
        if tail is not None and tail[0] <= offset < tail[1] and offset < end:
            # The batches of the last write, still in memory: a tailing reader (subscribe) needs no
            # file read, header walk or second copy. Decoding still checks each batch's CRC.
            buf = tail[2]
            if tail[3]:  # one batch (the common case): one call, with the disk read's max_bytes rule
                limit = max_bytes if max_bytes < len(buf) else None
                records = decode_first_batch(buf, start_offset=offset, max_bytes=limit)
            else:
                records = _read_batches(buf, offset, max_bytes)
            if records:
                return _new_fetch_result((records, records[-1].offset + 1, end, self._log_start_offset))
        segment: LogSegment | None = self._segments.floor_segment(offset)
        while segment is not None and offset < end:
            # A point read answered at once (one batch, placed by the index, cached): no await, no hop.
            # (No read limit: with no await in between, the active segment's size is the log end.)
            got = segment.read_records_cached(offset, max_bytes)
            if (
                got is None
                and max_bytes <= _TABLED_READ_BYTES
                and (job := segment.batch_table_job(offset)) is not None
            ):
                # The first read of a segment (or of batches appended since, several per write) tables
                # its batches by their headers, in one hop; from then on a point read is one bisect.
                await _table_walk(segment, job)
                got = segment.read_records_cached(offset, max_bytes)
            if got and got[-1].offset >= end:
                got = [r for r in got if r.offset < end]
            if got:
                return _new_fetch_result((got, got[-1].offset + 1, end, self._log_start_offset))
            max_position = segment.size if segment is self._segments.active_segment else None
            data = segment.read_cached(offset, max_bytes, max_position)  # no await when it can answer at once
            if data is None:
                data = await segment_read(partial(_read_from, segment, offset, max_bytes, max_position))
            if data is not None and data.data:
                records = data.records(max_offset=end)
                if records:
                    return _new_fetch_result((records, records[-1].offset + 1, end, self._log_start_offset))
                # Only transaction markers (no records): read on after them.
                following = _end_of_batches(data.data, end)
                if following > offset:
                    offset = following
                    continue
            segment = self._segments.higher_segment(segment.base_offset)
            if segment is not None and segment.base_offset != offset:
                # The segments do not chain here: the one before ends below `offset`, the next begins
                # above it. Serving the next one would skip the offsets between (a missing segment).
                raise CorruptRecordError(
                    f"{self.topic}-{self.partition}: offset {offset} is in no segment: the segment before it "
                    f"ends below it and the next one begins at {segment.base_offset} (a missing or misplaced "
                    "segment; 'seglog verify' names it)"
                )
        return FetchResult([], offset, end, self._log_start_offset)

    async def _ensure_producers(self) -> None:
        """Load the producer state and aborted transactions if they are not yet (what read_committed needs).

        Raises:
            SeglogError: they cannot be loaded (a read_committed read cannot be answered without them).
        """
        if self._producers_loaded:
            return
        if self._unopened is not None:
            await self._open()
        async with self._lock:
            self._check_open()
            await self._ready_producers()

    async def _read_committed(self, offset: int, max_bytes: int) -> FetchResult:
        """``read(offset, max_bytes, isolation="read_committed")``: committed data records below the LSO.

        Reads whole batches (:meth:`read_batches`) and drops the markers and
        the batches of aborted transactions (the ones Kafka's consumer drops
        with the fetch's aborted-transaction list), going on past them until a
        record is found or the LSO is reached.
        """
        if self._closed:
            self._check_open()
        if type(max_bytes) is not int or max_bytes < 0:
            raise InvalidRecordError(f"max_bytes must be a non-negative int, got {max_bytes!r}")
        await self._ensure_producers()
        while True:
            stable = self.last_stable_offset
            batches = await self.read_batches(offset, max_bytes)  # checks offset (type and range)
            end, start = self._log_end_offset, self._log_start_offset
            kept = [(header, view) for header, view in batches if header.base_offset < stable]
            if not kept:
                return FetchResult([], offset, end, start)
            aborted = self._aborted_txns(offset, kept[-1][0].next_offset)
            records: list[Record] = []
            next_offset = offset
            for header, view in kept:
                next_offset = header.next_offset
                if header.is_control or (header.is_transactional and _aborted_batch(header, aborted)):
                    continue
                limit = max_bytes if not records and header.size > max_bytes else None
                got = decode_batch(view, 0, header, start_offset=offset, max_bytes=limit)
                records.extend(got)
                if limit is not None and got and got[-1].offset < header.last_offset:
                    next_offset = got[-1].offset + 1  # a batch larger than max_bytes: cut as read() cuts
                    break
            if records:
                return FetchResult(records, next_offset, end, start)
            offset = next_offset

    def aborted_transactions(self, start_offset: int, end_offset: int) -> list[AbortedTransaction]:
        """The aborted transactions overlapping ``[start_offset, end_offset)`` (Kafka's ``collectAbortedTxns``).

        Each is a producer id and the first offset of its transaction here:
        what a Kafka FetchResponse under ``read_committed`` carries, so that a
        reader of :meth:`read_batches` skips that producer's transactional
        batches from ``first_offset`` to its abort marker. Answered from
        memory (the ``.txnindex`` entries are loaded with the producer state,
        when the files are opened).

        Raises:
            InvalidRecordError: the offsets are not ints.
        """
        if type(start_offset) is not int or type(end_offset) is not int:
            raise InvalidRecordError(f"offsets must be ints, got {start_offset!r} and {end_offset!r}")
        return [AbortedTransaction(txn.producer_id, txn.first_offset)
                for txn in self._aborted_txns(start_offset, end_offset)]

    def _aborted_txns(self, start_offset: int, end_offset: int) -> list[AbortedTxn]:
        aborted = self._aborted
        found: list[AbortedTxn] = []
        # Entries are in marker (last offset) order; Kafka's rule: last >= start and first < end, and
        # none after an entry whose LSO reaches the end can start before it.
        for i in range(bisect_left(aborted, start_offset, key=_last_offset_of), len(aborted)):
            txn = aborted[i]
            if txn.first_offset < end_offset:
                found.append(txn)
            if txn.last_stable_offset >= end_offset:
                break
        return found

    async def read_batches(
        self, offset: int, max_bytes: int = DEFAULT_FETCH_BYTES, *, isolation: Isolation = "read_uncommitted"
    ) -> list[tuple[BatchHeader, memoryview]]:
        """The stored batches from the one holding ``offset`` on, as they are on disk: ``(header, bytes)`` each.

        For a reader that wants batches rather than records (the wire server's
        Fetch sends Kafka's batches as stored, docs/KAFKA.md): whole batches of
        either format (``header.magic``: seglog's ``0x54`` or Kafka's 2) from
        one segment, the first holding ``offset`` (it may start before it),
        about ``max_bytes`` of them but always at least one, all below the log
        end. Each batch's header rules and CRC-32C are checked before it is
        returned, and the batches follow on from the one the offset index or
        the segment's base offset places (the read ends before one that does
        not); its body is not decoded (``seglog.segments.batch.decode_batch``
        does that). Empty at the log end.

        Control batches (transaction markers) are among them, as Kafka's
        Fetch returns them. With ``isolation="read_committed"`` only the
        batches below :attr:`last_stable_offset` are returned (empty at or past
        it); the batches of aborted transactions are still there, and
        :meth:`aborted_transactions` of the range says which they are (as
        Kafka's Fetch does: its consumer drops them).

        Raises:
            OffsetOutOfRangeError: ``offset`` is outside ``[log start, log end]``.
            CorruptRecordError: a batch on disk fails its header rules, its CRC or
                the offset rules, or ``offset`` is in no segment (one is missing).
        """
        if isolation != "read_uncommitted":
            _check_isolation(isolation)
            await self._ensure_producers()
            batches = await self.read_batches(offset, max_bytes)
            stable = self.last_stable_offset
            return [batch for batch in batches if batch[0].base_offset < stable]
        if self._closed:
            self._check_open()  # raises
        if self._unopened is not None:
            await self._open()
        if type(offset) is not int or type(max_bytes) is not int or max_bytes < 0:
            raise InvalidRecordError(
                f"offset and max_bytes must be ints (max_bytes >= 0), got {offset!r} and {max_bytes!r}"
            )
        end, start = self._log_end_offset, self._log_start_offset
        if offset < start or offset > end:
            raise OffsetOutOfRangeError(
                f"{self.topic}-{self.partition}: offset {offset} is outside the log [{start}, {end}]; "
                f"read from {start} (earliest) or {end} (latest)"
            )
        segment: LogSegment | None = self._segments.floor_segment(offset)
        while segment is not None and offset < end:
            max_position = segment.size if segment is self._segments.active_segment else None
            data = await segment_read(partial(_read_from, segment, offset, max_bytes, max_position))
            if data is not None and data.data:
                view = data.data
                batches = []
                position = 0
                while position < len(view):
                    header = read_header(view, position)
                    check_header(header, len(view) - position, position)
                    if header.base_offset >= end:
                        break
                    verify_crc(view, position, header)
                    batches.append((header, view[position : position + header.size]))
                    position += header.size
                if batches:
                    return batches
            segment = self._segments.higher_segment(segment.base_offset)
            if segment is not None and segment.base_offset != offset:
                # As in read(): the segments do not chain here, and the next one's batches would skip
                # the offsets between (a missing segment).
                raise CorruptRecordError(
                    f"{self.topic}-{self.partition}: offset {offset} is in no segment: the segment before it "
                    f"ends below it and the next one begins at {segment.base_offset} (a missing or misplaced "
                    "segment; 'seglog verify' names it)"
                )
        return []

    async def offset_for_timestamp(self, timestamp: int) -> OffsetAndTimestamp | None:
        """The earliest offset whose record timestamp is ≥ ``timestamp`` (Kafka's ListOffsets).

        Kafka's sentinels work: ``LATEST_TIMESTAMP`` (-1) gives the log end
        offset, ``EARLIEST_TIMESTAMP`` (-2) the log start offset (both with
        timestamp -1), ``MAX_TIMESTAMP`` (-3) the first record holding the
        largest timestamp. ``None`` when no record qualifies.

        Raises:
            InvalidRecordError: ``timestamp`` is not an int, does not fit int64,
                or is a negative value other than the three sentinels.
        """
        if self._closed:
            self._check_open()  # raises
        # A plain non-negative int64 (the common case) is valid and no sentinel: no validation call.
        if type(timestamp) is not int or not 0 <= timestamp <= INT64_MAX:
            validate_timestamp(timestamp, "timestamp (ms since the epoch)")
            if timestamp == LATEST_TIMESTAMP:
                return OffsetAndTimestamp(self._log_end_offset, NO_TIMESTAMP)
            if timestamp == EARLIEST_TIMESTAMP:
                return OffsetAndTimestamp(self._log_start_offset, NO_TIMESTAMP)
            if timestamp == MAX_TIMESTAMP:
                return await self._offset_of_max_timestamp()
            raise InvalidRecordError(
                f"timestamp {timestamp} is negative; use ms since the epoch or -1 (latest), -2 (earliest), -3 (max)"
            )
        if self._unopened is not None:
            await self._open()
        start = self._log_start_offset
        # Kafka: the first segment (holding offsets >= log start) whose largest timestamp reaches the
        # target; every earlier segment holds only smaller timestamps, so its first qualifying record
        # is the earliest in the whole log, however out of order the timestamps are.
        segments = self._segments
        # The usual case first: the first live segment answers from its table, with no await (so the
        # bounds taken before the lookup still hold), without the lists of the walk below.
        head = segments.first_live(start, self._log_end_offset)
        if head is None:
            return None
        base, segment, bound = head
        found = segment.find_offset_by_timestamp_cached(timestamp, start)
        if found is not None and found is not WOULD_BLOCK:
            found_ts, offset = found
            if base <= offset < bound:
                return _new_offset_and_timestamp((offset, found_ts))
            return self._answer_in(segment, offset, found_ts)  # raises: the segment is misplaced
        bases, live = segments.live_from(start)
        if found is None:  # the first holds no such timestamp: on with the next (as the walk would)
            bases, live = bases[1:], live[1:]
        for base, segment in zip(bases, live, strict=True):
            found = segment.find_offset_by_timestamp_cached(timestamp, start)  # no await when it can answer
            if found is WOULD_BLOCK and (job := segment.batch_table_job(start, whole=True)) is not None:
                await _table_walk(segment, job)
                found = segment.find_offset_by_timestamp_cached(timestamp, start)
            if found is WOULD_BLOCK:
                found = await segment_read(partial(_find_in_segment, segment, timestamp, start))
            if found is not None:
                found_ts, offset = found
                # _answer_in's check, inline on the base offset in hand (bounds taken now, after any await).
                if base <= offset < self._segments.following_base(base, self._log_end_offset):
                    return _new_offset_and_timestamp((offset, found_ts))
                return self._answer_in(segment, offset, found_ts)  # raises: the segment is misplaced
        return None

    def _answer_in(self, segment: LogSegment, offset: int, timestamp: int) -> OffsetAndTimestamp:
        # A segment's records lie between its base offset and the next one's (the log end for the
        # last): an answer outside is a segment whose files are not where its name says.
        bound = self._segments.following_base(segment.base_offset, self._log_end_offset)
        if not segment.base_offset <= offset < bound:
            raise CorruptRecordError(
                f"{self.topic}-{self.partition}: the segment at base offset {segment.base_offset} holds offset "
                f"{offset}, outside its range [{segment.base_offset}, {bound}) (a misplaced segment; "
                "'seglog verify' names it)"
            )
        return OffsetAndTimestamp(offset, timestamp)

    def _live_segments(self) -> list[LogSegment]:
        """Segments holding at least one offset at or above the log start offset."""
        return self._segments.live_from(self._log_start_offset)[1]

    async def _offset_of_max_timestamp(self) -> OffsetAndTimestamp | None:
        if self._unopened is not None:
            await self._open()
        best: tuple[int, LogSegment] | None = None
        live = self._live_segments()
        # Every segment's largest timestamp is known once its time index was loaded: one hop for all those
        # that were not, then the lookup in the segment that has the largest.
        largest_of = await segment_read(partial(_each_segment, live, _largest_record_timestamp))
        for segment, largest in zip(live, largest_of, strict=True):
            if largest is not None and (best is None or largest > best[0]):
                best = (largest, segment)
        if best is None:
            return None
        largest_ts, holder = best
        start = self._log_start_offset
        found = await segment_read(
            lambda nowait: holder.find_offset_by_timestamp(largest_ts, starting_offset=start, nowait=nowait)
        )
        return None if found is None else self._answer_in(holder, found.offset, found.timestamp)

    def subscribe(
        self, start_offset: int | None = None, *, max_bytes: int = DEFAULT_FETCH_BYTES,
        isolation: Isolation = "read_uncommitted",
    ) -> AsyncGenerator[Record, None]:
        """Yield records from ``start_offset`` (default: the log start) on, waiting for new ones.

        Waiting costs nothing: the iterator sleeps on a future that the next
        append resolves (no polling). The iteration ends when the log or the
        engine is closed or the topic deleted. ``isolation`` as :meth:`read`:
        under ``"read_committed"`` the iterator waits at the last stable
        offset until the open transaction there ends.

        Raises:
            InvalidRecordError: (at once, before iterating) ``start_offset`` is
                not None or an int in [0, 2**63-1], or ``max_bytes`` is not an
                int in [0, 2**63-1].
            OffsetOutOfRangeError: the position fell below the log start offset
                (retention or ``delete_records_before`` removed it), or
                ``start_offset`` is beyond the log end offset.
        """
        if start_offset is not None:
            validate_offset(start_offset, "start_offset")
        validate_int64(max_bytes, "max_bytes", minimum=0)
        _check_isolation(isolation)
        return self._subscribe(start_offset, max_bytes, isolation)

    async def _subscribe(
        self, start_offset: int | None, max_bytes: int, isolation: Isolation
    ) -> AsyncGenerator[Record, None]:
        if self._unopened is not None:
            await self._open()  # the files' log start and end bound the position
        committed = isolation == "read_committed"
        if committed:
            await self._ensure_producers()
        offset = self._log_start_offset if start_offset is None else start_offset
        while not self._closed:
            if committed and self._log_start_offset <= offset <= self._log_end_offset:
                if offset >= self.last_stable_offset:
                    await self._wait_for_write()  # a write (a marker, say) may move the LSO
                    continue
                result = await self.read(offset, max_bytes, isolation="read_committed")
                for record in result.records:
                    yield record
                offset = result.next_offset
                await asyncio.sleep(0)
                continue
            if offset < self._log_end_offset:
                result = await self.read(offset, max_bytes)
                for record in result.records:
                    yield record
                offset = result.next_offset
                # A page-cache read never suspends: a subscriber catching up on a long backlog
                # would otherwise hold the loop (and starve the writer) until it reaches the end.
                await asyncio.sleep(0)
                continue
            if offset > self._log_end_offset:
                raise OffsetOutOfRangeError(
                    f"{self.topic}-{self.partition}: offset {offset} is beyond the log end {self._log_end_offset}"
                )
            await self.wait_for_append(offset)

    async def wait_for_append(self, offset: int) -> None:
        """Return once a record at ``offset`` or later exists (the log end offset is above ``offset``).

        Returns at once when there is one already, and when the log is closed or
        its topic deleted. The wait costs nothing: it sleeps on a future that the
        next append resolves (no polling). Cancelling it is safe and leaves
        nothing behind; a caller that waits with a timeout (a long-polling
        Kafka fetch) cancels it when the time is up.
        """
        while not self._closed and self._log_end_offset <= offset:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._data_waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._data_waiters:
                    self._data_waiters.remove(waiter)

    async def _wait_for_write(self) -> None:
        """Return after the next write (or at once when the log is closed)."""
        if self._closed:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._data_waiters.append(waiter)
        try:
            await waiter
        finally:
            if waiter in self._data_waiters:
                self._data_waiters.remove(waiter)

    def _wake_readers(self) -> None:
        waiters, self._data_waiters = self._data_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    # -- deletion and retention ---------------------------------------------------------

    async def delete_records_before(self, offset: int) -> int:
        """Move the log start offset up to ``offset`` and delete the segments wholly below it.

        Kafka's DeleteRecords. Returns the new log start offset (it never
        moves down). The new start is checkpointed before this returns.

        Raises:
            InvalidRecordError: ``offset`` is not an int in [0, 2**63-1].
            OffsetOutOfRangeError: ``offset`` is above the log end offset.
        """
        self._check_writable()
        validate_offset(offset)
        if self._unopened is not None:
            await self._open()  # the files' log end, not the record's, bounds the new start
        if offset > self._log_end_offset:
            raise OffsetOutOfRangeError(
                f"{self.topic}-{self.partition}: cannot delete records before {offset}, "
                f"beyond the log end offset {self._log_end_offset}"
            )
        if offset > self._log_start_offset:
            self._log_start_offset = offset
            await self._owner.log_start_moved()
            await self.enforce_retention(_now_ms(), log_start_only=True)
        return self._log_start_offset

    async def retention_plan(self, now_ms: int, *, log_start_only: bool = False) -> RetentionPlan:
        """What a retention pass would delete now (nothing changes).

        ``log_start_only`` applies only the log-start-offset rule (what
        ``delete_records_before`` triggers), not ``retention.ms``/``retention.bytes``.

        Raises:
            InvalidRecordError: ``now_ms`` is not an int that fits int64.
        """
        validate_timestamp(now_ms, "now_ms")
        if self._unopened is not None:
            await self._open()
        segments = self._segments.values()
        # One hop for every segment whose largest timestamp is not known yet (a sealed segment's time
        # index is loaded on first use), none when all are.
        largest = await segment_read(partial(_each_segment, segments, _largest_timestamp))
        summaries = [SegmentSummary(s.base_offset, s.size, ts) for s, ts in zip(segments, largest, strict=True)]
        return plan_retention(
            summaries,
            log_end_offset=self._log_end_offset,
            high_watermark=self.high_watermark,
            log_start_offset=self._log_start_offset,
            now_ms=now_ms,
            retention_ms=-1 if log_start_only else self.config.retention_ms,
            retention_bytes=-1 if log_start_only else self.config.retention_bytes,
        )

    def _record_keeps_everything(self, now_ms: int, log_start_only: bool) -> bool:
        """Whether a partition whose files are unopened provably has nothing to delete now.

        Every retention rule deletes a prefix of the segments, so it deletes
        nothing when the first segment does not qualify (``plan_retention``'s
        walk); the record holds what that needs. When in doubt: False (the
        files are opened and the real plan decides).
        """
        assert self._unopened is not None
        record = self._unopened.record
        bases = record.base_offsets
        upper = bases[1] if len(bases) > 1 else record.log_end_offset  # the first segment's next offset
        if record.log_end_offset < upper or (len(bases) == 1 and record.size_bytes == 0):
            return True  # the first segment can never be deleted now
        if upper <= self._log_start_offset:
            return False
        if log_start_only:
            return True
        config = self.config
        if config.retention_ms >= 0 and now_ms - record.first_largest_timestamp > config.retention_ms:
            return False
        return not (config.retention_bytes >= 0 and record.size_bytes >= config.retention_bytes)

    async def enforce_retention(self, now_ms: int, *, log_start_only: bool = False) -> int:
        """Delete what retention allows now; returns the number of segments deleted.

        Raises:
            InvalidRecordError: ``now_ms`` is not an int that fits int64.
        """
        validate_timestamp(now_ms, "now_ms")
        if self._closed or self._read_only:
            return 0
        if self._unopened is not None and self._record_keeps_everything(now_ms, log_start_only):
            return 0  # the background pass leaves partitions nobody used unopened
        async with self._lock:
            if self.closed:  # re-check after waiting for the lock
                return 0
            plan = await self.retention_plan(now_ms, log_start_only=log_start_only)
            if plan.empty:
                return 0
            if plan.roll_first:
                await self._roll(now_ms)
            deleted = 0
            for base in plan.delete:
                segment = self._segments.get(base)
                if segment is None or segment is self._segments.active_segment:
                    continue
                self._segments.remove(base)
                first = self._segments.first_segment
                if first is not None and first.base_offset > self._log_start_offset:
                    self._log_start_offset = first.base_offset
                await self._owner.delete_segment_later(
                    segment, self.config.file_delete_delay_ms, f"{self.topic}-{self.partition}-{segment.base_offset}"
                )
                # The state at that segment's start is of no use without the segment (Kafka deletes it too).
                await remove(self.directory / snapshot_file_name(base))
                deleted += 1
            first = self._segments.first_segment
            if first is not None:
                # The aborts whose markers went with the deleted segments (their .txnindex went too).
                self._aborted = [txn for txn in self._aborted if txn.last_offset >= first.base_offset]
            log.info("%s-%d: retention (%s) deleted %d segment(s)", self.topic, self.partition, plan.reason, deleted)
        return deleted

    # -- lifecycle -------------------------------------------------------------------------

    async def close(self, *, flush: bool = False) -> None:
        """Stop taking appends, finish those in flight, optionally fsync, close every segment. Idempotent.

        With ``flush`` every appended byte is fsynced before the files close (the
        engine's clean close), after the appends already queued were written. The
        work runs in a task of its own: a cancelled caller does not stop it half
        way, and a later ``close()`` waits for the same task.
        """
        if self._closed:
            return
        if self._close_task is None:
            self._close_task = asyncio.get_running_loop().create_task(
                self._close(flush), name=f"seglog-close-{self.topic}-{self.partition}"
            )
        await asyncio.shield(self._close_task)

    async def _close(self, flush: bool) -> None:
        self._closing = True  # appends from now on are refused
        if self._write_soon is not None:  # appends queued before the close are written first
            self._write_soon.cancel()
            self._write_next()
        writer = self._writer
        if writer is not None:
            # asyncio.wait, not gather: a cancelled close must not cancel the writer mid-write.
            await asyncio.wait({writer})
        if self._opening is not None:
            await asyncio.wait({self._opening})  # files being opened are closed below, not leaked
        async with self._lock:
            if self.closed:  # re-check after waiting for the lock
                return
            if self._opening is not None and not self._opening.done():
                await asyncio.wait({self._opening})
            if flush and not self._read_only:
                await self._flush_locked(self._log_end_offset)
                if self._unopened is None and self._txn_index_from is not None and not self._producers_loaded:
                    # Recovery emptied .txnindex files that the state's load has not written back yet
                    # (it failed at open): the clean close must not leave them empty.
                    try:
                        await self._ready_producers()
                    except SeglogError as exc:
                        log.error("%s-%d: the .txnindex files recovery emptied are not rebuilt: %s",
                                  self.topic, self.partition, exc)
                if self._unopened is None and (self._producers_loaded or self._log_end_offset != self._end_at_open):
                    # Synced when it holds producers (an empty state lost to a power cut is rebuilt as
                    # cheaply as it is read). A partition nothing was appended to since its files were
                    # opened keeps the snapshots it had: they describe it still.
                    await self._take_snapshot(_now_ms(), durable=not self._producers.is_empty)
                self._closed_as = await self._closing_record()
            self._closed = True
            for task in list(self._background):
                task.cancel()
            await asyncio.gather(*self._background, return_exceptions=True)
            await close_segments(self._segments.values())
        self._wake_readers()

    async def _closing_record(self) -> ClosedPartition | None:
        """What the engine's clean-shutdown record says of this partition (None: nothing; open it eagerly)."""
        if self._unopened is not None:
            return self._unopened.record
        first = self._segments.first_segment
        if first is None:
            return None
        if self._producers_loaded and self._producers.first_undecided_offset() is not None:
            # A transaction is open: the next open loads the state at once (an unopened partition's
            # last_stable_offset could not say where it stands).
            return None
        try:
            largest = await segment_read(lambda nowait: first.largest_timestamp(nowait=nowait))
        except SeglogError as exc:
            log.warning("%s-%d: not recorded for a lazy open: %s", self.topic, self.partition, exc)
            return None
        segments = self._segments.values()
        return ClosedPartition(
            self._log_end_offset, self.size_bytes, largest, tuple(s.base_offset for s in segments),
            tuple(s.size for s in segments),
        )

    def _move_to(self, directory: Path) -> None:
        """Follow the partition's directory, renamed as a whole, to ``directory``; no I/O (lock held)."""
        self.directory = directory
        for segment in self._segments:
            segment.update_parent_dir(directory)

    def _mark_deleted(self) -> None:
        # Its topic is being deleted: appends and opening its files are refused from now on, before
        # the partitions are closed one by one.
        self._deleted = True
        self._closing = True

    def _check_open(self) -> None:
        if self._closed:
            what = "deleted" if self._deleted else "closed"
            raise ClosedError(f"{self.topic}-{self.partition} was {what}")

    def _check_writable(self) -> None:
        self._check_open()
        if self._closing:
            raise ClosedError(f"{self.topic}-{self.partition} is closing")
        if self._read_only:
            raise ClosedError(f"{self.topic}-{self.partition} is open read-only")

    def __del__(self, _warn: Callable[..., None] = warnings.warn) -> None:
        if not getattr(self, "_closed", True):
            _warn(f"unclosed {self!r}", ResourceWarning, stacklevel=2, source=self)


def log_task_failure(task: asyncio.Task[Any], *, where: str = "") -> None:
    """Report how a background task failed, once, to the ``seglog`` logger (a done callback).

    A ``SeglogError`` (a disk that failed, say) is one line: its message says
    what and where, and a traceback on a command line's stderr helps no one.
    Anything else is a bug in seglog and keeps its traceback. A ``ClosedError``
    is how a task ends when its log closes under it: not a failure. Taking the
    exception here also keeps asyncio from reporting it a second time as
    "exception was never retrieved".
    """
    if task.cancelled():
        return
    exc = task.exception()
    if exc is None or isinstance(exc, ClosedError):
        return
    prefix = f"{where}: " if where else ""
    if isinstance(exc, SeglogError):
        log.error("%sbackground task %s failed: %s", prefix, task.get_name(), exc)
    else:
        log.error("%sbackground task %s failed: %r", prefix, task.get_name(), exc, exc_info=exc)



def _read_batches(buf: bytes, offset: int, max_bytes: int) -> list[Record]:
    """What a read of ``offset`` from the batches ``buf`` returns, by the rule of a read from the file.

    From the batch holding ``offset``: when it alone is larger than
    ``max_bytes``, its records up to about ``max_bytes`` (at least one);
    otherwise the whole batches that fit in ``max_bytes``, from ``offset`` on.
    (A read served from the tail cache then returns what the same read from
    the segment file would.)

    Raises:
        CorruptRecordError: a batch fails its checks.
    """
    view = memoryview(buf)
    position, size = 0, len(buf)
    while True:
        header = read_header(view, position)
        check_header(header, size - position, position)
        if header.last_offset >= offset or position + header.size >= size:
            break
        position += header.size
    first = header.size
    if first > max_bytes:
        return decode_first_batch(view[position : position + first], start_offset=offset, max_bytes=max_bytes)
    stop = position + first
    while stop + HEADER_SIZE <= size:
        following = read_header(view, stop).size
        if following <= 0 or stop + following - position > max_bytes or stop + following > size:
            break
        stop += following
    return decode_batches(view[position:stop], start_offset=offset, max_batch_bytes=stop - position)


def _load_batch(producers: ProducerStateManager, header: BatchHeader) -> None:
    """A data batch read back from the log, into ``producers``."""
    producers.load_batch(
        header.producer_id, header.producer_epoch, header.base_sequence, header.base_offset,
        header.last_offset_delta, header.max_timestamp, is_transactional=header.is_transactional,
    )


def _load_marker(producers: ProducerStateManager, header: BatchHeader, marker: ControlRecord) -> AbortedTxn | None:
    """A marker read back from the log, into ``producers``; the aborted transaction it ends, if an abort."""
    completed, lso = producers.load_marker(
        header.producer_id, header.producer_epoch, header.base_offset, header.max_timestamp,
        commit=marker.commit, coordinator_epoch=marker.coordinator_epoch,
    )
    if not completed.is_aborted:
        return None
    return AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset, lso)


async def _read_marker(segment: LogSegment, header: BatchHeader) -> ControlRecord:
    """The record of the control batch ``header`` of ``segment`` (read, CRC-checked, decoded).

    Raises:
        CorruptRecordError: the batch is not where its header was, fails its CRC, or is no marker.
    """
    data = await segment_read(partial(_read_from, segment, header.base_offset, header.size, None))
    if data is None or len(data.data) < header.size:
        raise CorruptRecordError(f"{segment.log_path}: the marker at offset {header.base_offset} cannot be read back")
    found = read_header(data.data)
    if found.base_offset != header.base_offset or not found.is_control:
        raise CorruptRecordError(f"{segment.log_path}: no marker at offset {header.base_offset} on a second read")
    verify_crc(data.data, 0, found)
    return control_record(data.data, 0, found)


def _first_bad_txn_index(segments: list[LogSegment], end: int) -> int | None:
    """The base offset of the first segment whose ``.txnindex`` is not what a writer leaves (blocking), or None.

    Each entry's marker (its last offset) must lie in its segment, after the
    previous entry's, and the transaction must start at or before it.
    """
    for i, segment in enumerate(segments):
        bound = segments[i + 1].base_offset if i + 1 < len(segments) else end
        try:
            entries = segment.aborted_txns()
        except CorruptIndexError:
            return segment.base_offset
        previous = segment.base_offset - 1
        for txn in entries:
            if not previous < txn.last_offset < bound or not 0 <= txn.first_offset <= txn.last_offset:
                return segment.base_offset
            previous = txn.last_offset
    return None


def _check_isolation(isolation: object) -> None:
    if isolation not in ISOLATION_LEVELS or type(isolation) is not str:
        raise InvalidRecordError(
            f"isolation must be 'read_uncommitted' or 'read_committed' (Kafka's isolation.level), got {isolation!r}"
        )


def _last_offset_of(txn: AbortedTxn) -> int:
    return txn.last_offset


def _aborted_batch(header: BatchHeader, aborted: list[AbortedTxn]) -> bool:
    """Whether the transactional batch ``header`` belongs to one of the ``aborted`` transactions."""
    producer_id, offset = header.producer_id, header.base_offset
    return any(
        txn.producer_id == producer_id and txn.first_offset <= offset <= txn.last_offset for txn in aborted
    )


def _end_of_batches(buf: memoryview, end: int) -> int:
    """The offset after the last whole batch of ``buf`` (batches back to back) that starts below ``end``."""
    position, size = 0, len(buf)
    following = -1
    while position + HEADER_SIZE <= size:
        header = read_header(buf, position)
        if header.base_offset >= end or header.batch_length <= 0 or position + header.size > size:
            break
        following = header.next_offset
        position += header.size
    return following
