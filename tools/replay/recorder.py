"""Recording workloads: from an existing log directory, or from an application's calls.

:func:`record_log` reads a log through the engine's public read API
(``topics``, ``log``, ``offset_for_timestamp``, ``read``) and turns each record
into a produce row with its explicit partition, one producer per partition
(``<topic>-<partition>``, so replay keeps each partition's order exactly),
``seq`` = the source offset, ``offset`` = the source offset (for audit) and
``ts_ns`` = the record timestamp in ns clamped to never go back within the
partition (a log may hold out-of-order timestamps; capture time must not).
Records sharing a millisecond go out as one batch on replay. A time range
``[from, to)`` selects offsets as Kafka's ListOffsets would: from
``offset_for_timestamp(from)`` up to (excluding) ``offset_for_timestamp(to)``.

:class:`RecordingEngine` wraps an open engine and records the calls an
application makes through it (``append``, ``produce``, ``read``,
``offset_for_timestamp``), with the capture time of each call; every record of
one ``append`` shares that instant, so it replays as one batch. Calls that
raise are not recorded (a replay of the recording then has nothing to fail
on). Producer names default to the current asyncio task's name, so concurrent
tasks become separate producers whose order is kept.

Uses only ``engine``'s public API; no import of ``segments`` or ``indexes``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Final

from seglog.engine import Record, errors
from seglog.tools.replay.format import (
    OP_FETCH,
    OP_FETCH_TIME,
    TOMBSTONE_SIZE,
    Workload,
    WorkloadRow,
    write_workload,
)
from seglog.tools.replay.runner import EngineLike, PartitionLogLike, count_partitions

# Read size of the recording pass; the engine returns at least one record per read anyway.
RECORD_READ_BYTES: Final = 1 << 20
_NS_PER_MS: Final = 1_000_000


def _value_size(value: bytes | None) -> int:
    return TOMBSTONE_SIZE if value is None else len(value)


async def record_log(
    engine: EngineLike,
    *,
    topics: Sequence[str] | None = None,
    from_ms: int | None = None,
    to_ms: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> Workload:
    """A workload holding the records of ``topics`` (all when ``None``) in ``[from_ms, to_ms)``.

    Raises:
        errors.UnknownTopicOrPartitionError: a requested topic does not exist.
    """
    names = sorted(engine.topics()) if topics is None else list(topics)
    known = set(engine.topics())
    for name in names:
        if name not in known:
            raise errors.UnknownTopicOrPartitionError(
                f"topic {name!r} is not in this log directory (it holds: {', '.join(sorted(known)) or 'nothing'})"
            )
    rows: list[WorkloadRow] = []
    partitions: dict[str, int] = {}
    for topic in names:
        n = count_partitions(engine, topic)
        partitions[topic] = n
        for p in range(n):
            log: PartitionLogLike = engine.log(topic, p)
            start, end = await _offset_range(log, from_ms, to_ms)
            clamp_ns = 0
            producer = f"{topic}-{p}"
            offset = start
            while offset < end:
                got = await log.read(offset, max_bytes=RECORD_READ_BYTES)
                if not got.records:
                    break
                for rec in got.records:
                    if rec.offset < offset:
                        continue
                    if rec.offset >= end:
                        break
                    clamp_ns = max(clamp_ns, rec.timestamp * _NS_PER_MS)
                    rows.append(
                        WorkloadRow(
                            topic=topic,
                            partition=p,
                            key=rec.key,
                            value=rec.value,
                            timestamp_us=rec.timestamp * 1000,
                            headers=tuple(rec.headers),
                            ts_ns=clamp_ns,
                            producer=producer,
                            seq=rec.offset,
                            value_size=_value_size(rec.value),
                            offset=rec.offset,
                        )
                    )
                    if progress is not None:
                        progress(1)
                offset = max(got.next_offset, got.records[-1].offset + 1)
    rows.sort(key=lambda r: (r.ts_ns, r.producer, r.seq))
    return Workload(rows, partitions, "<recorded>")


async def _offset_range(log: PartitionLogLike, from_ms: int | None, to_ms: int | None) -> tuple[int, int]:
    start, end = log.log_start_offset, log.log_end_offset
    if from_ms is not None:
        hit = await log.offset_for_timestamp(from_ms)
        start = end if hit is None else max(start, hit.offset)
    if to_ms is not None:
        hit = await log.offset_for_timestamp(to_ms)
        if hit is not None:
            end = min(end, hit.offset)
    return start, max(start, end)


def _task_name() -> str:
    task = asyncio.current_task()
    return task.get_name() if task is not None else "main"


class _Capture:
    """The rows captured so far, shared by a RecordingEngine and its RecordingLogs."""

    def __init__(self, producer_id: Callable[[], str], clock_ns: Callable[[], int]) -> None:
        self.producer_id = producer_id
        self.rows: list[WorkloadRow] = []
        self.partitions: dict[str, int] = {}
        self.seqs: dict[str, int] = {}
        # Capture time = wall clock at start + monotonic time since: readable and never going back.
        self._wall0 = time.time_ns()
        self._mono0 = clock_ns()
        self._clock_ns = clock_ns

    def now_ns(self) -> int:
        return self._wall0 + (self._clock_ns() - self._mono0)

    def add(self, ts_ns: int, **fields: Any) -> None:
        producer = self.producer_id()
        seq = self.seqs.get(producer, 0)
        self.seqs[producer] = seq + 1
        self.rows.append(WorkloadRow(ts_ns=ts_ns, producer=producer, seq=seq, **fields))


class RecordingLog:
    """A ``PartitionLog`` whose ``append``, ``read`` and ``offset_for_timestamp`` calls are recorded.

    Everything else is passed through to the wrapped log unchanged.
    """

    def __init__(self, inner: Any, topic: str, partition: int, capture: _Capture) -> None:
        self._inner = inner
        self._topic = topic
        self._partition = partition
        self._capture = capture

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def append(self, records: Iterable[Record]) -> Any:
        """Append (one batch) and record one produce row per record, all at the same instant."""
        batch = list(records)
        ts_ns = self._capture.now_ns()
        result = await self._inner.append(batch)
        for r in batch:
            self._capture.add(
                ts_ns,
                topic=self._topic,
                partition=self._partition,
                key=r.key,
                value=r.value,
                timestamp_us=None if r.timestamp is None else r.timestamp * 1000,
                headers=tuple(r.headers),
                value_size=_value_size(r.value),
            )
        return result

    async def read(self, offset: int, max_bytes: int = 1 << 20) -> Any:
        """Read, and record a ``fetch`` row."""
        ts_ns = self._capture.now_ns()
        result = await self._inner.read(offset, max_bytes=max_bytes)
        self._capture.add(ts_ns, topic=self._topic, partition=self._partition, op=OP_FETCH, offset=offset,
                          max_bytes=max_bytes)
        return result

    async def offset_for_timestamp(self, timestamp: int) -> Any:
        """Look up, and record a ``fetch_time`` row."""
        ts_ns = self._capture.now_ns()
        result = await self._inner.offset_for_timestamp(timestamp)
        self._capture.add(ts_ns, topic=self._topic, partition=self._partition, op=OP_FETCH_TIME,
                          timestamp_us=timestamp * 1000)
        return result


class RecordingEngine:
    """Wraps an open ``Engine``; the application uses it in place of the engine.

    ``producer_id`` names the producer of each call (default: the current
    asyncio task's name). Not thread-safe, like the engine's asyncio API: use it
    from the engine's event loop. Example::

        async with Engine.open("data") as engine:
            rec = RecordingEngine(engine)
            await app.run(rec)                  # the app calls rec.log(...).append(...), rec.produce(...)
            rec.write("capture.parquet")
    """

    def __init__(
        self,
        engine: Any,
        *,
        producer_id: Callable[[], str] = _task_name,
        clock_ns: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        self._inner = engine
        self._capture = _Capture(producer_id, clock_ns)
        self._logs: dict[tuple[str, int], RecordingLog] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def create_topic(self, name: str, partitions: int = 1, config: Any = None) -> Any:
        """Create the topic and remember its partition count for the workload's metadata."""
        result = await self._inner.create_topic(name, partitions=partitions, config=config)
        self._capture.partitions[name] = partitions
        return result

    def log(self, topic: str, partition: int) -> RecordingLog:
        """The recording wrapper of ``engine.log(topic, partition)``."""
        wrapped = self._logs.get((topic, partition))
        if wrapped is None:
            wrapped = RecordingLog(self._inner.log(topic, partition), topic, partition, self._capture)
            self._logs[(topic, partition)] = wrapped
        return wrapped

    async def produce(self, topic: str, value: bytes | None, *, key: bytes | None = None,
                      timestamp: int | None = None, headers: Sequence[tuple[str, bytes]] = (),
                      partition: int | None = None) -> Any:
        """Produce one record and record it.

        The row's partition is null when the engine chose it by key (replay
        hashes the key the same way), and the engine's choice for a key-less record.
        """
        ts_ns = self._capture.now_ns()
        kwargs: dict[str, Any] = {"key": key, "timestamp": timestamp, "headers": headers}
        if partition is not None:
            kwargs["partition"] = partition
        result = await self._inner.produce(topic, value, **kwargs)
        if partition is None and key is None:
            # The engine took turns among the partitions; keep its choice so the replay matches.
            partition = getattr(result, "partition", None)
        self._capture.add(
            ts_ns,
            topic=topic,
            partition=partition,
            key=key,
            value=value,
            timestamp_us=None if timestamp is None else timestamp * 1000,
            headers=tuple(headers),
            value_size=_value_size(value),
        )
        return result

    def workload(self) -> Workload:
        """The calls recorded so far. Partition counts: from ``create_topic`` calls, else probed."""
        partitions = dict(self._capture.partitions)
        for row in self._capture.rows:
            if row.topic not in partitions:
                partitions[row.topic] = count_partitions(self._inner, row.topic)
        return Workload(list(self._capture.rows), partitions, "<recorded calls>")

    def write(self, path: str | Path) -> Path:
        """Write the recorded calls as a workload file (Parquet, or JSON Lines by suffix).

        Raises:
            OSError: the file cannot be written.
        """
        w = self.workload()
        return write_workload(path, w.rows, w.partitions)
