"""The ``seglog`` PySpark data source: batch reads with pushdown, streaming reads, and the writer.

Owns: :class:`SeglogDataSource` (``name() == "seglog"``), the batch reader
(:class:`SeglogReader`: consecutive segment ranges packed into input partitions
by Spark's file-source rule, :func:`pack_ranges`; filters
on ``topic``/``partition``/``offset``/``timestamp`` answered by
:mod:`seglog.engine.offline` with the indexes), the stream reader
(:class:`SeglogStreamReader`: offsets ``{"<topic>-<partition>": next_offset}``,
``maxOffsetsPerTrigger``, ``Trigger.AvailableNow``), and the planning they
share. The writer lives in :mod:`seglog.tools.spark.writer`.

Pickling: Spark pickles the reader (with what ``pushFilters`` stored on it)
and each :class:`SegmentPartition` to the executors, so both hold only small
plain values; files are opened inside ``read()``, in the worker that reads them.

Must not import: ``seglog.tools.cli``. Imports pyspark and pyarrow (the ``spark`` extra).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
    StringStartsWith,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from seglog.engine import offline
from seglog.tools.spark.arrow import SCHEMA, buffers_to_batch
from seglog.tools.spark.options import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    ReadOptions,
    parse_read_options,
    partition_key,
    split_partition_key,
)

__all__ = ["PushedBounds", "SeglogDataSource", "SeglogReader", "SeglogStreamReader", "SegmentPartition"]

_NO_END = offline.NO_END


@dataclass
class SegmentPartition(InputPartition):
    """One Spark task's work: one or more :class:`seglog.engine.offline.SegmentRange` (picklable, a few hundred bytes
    each)."""

    ranges: tuple[offline.SegmentRange, ...]

    def __post_init__(self) -> None:
        InputPartition.__init__(self, None)


# Spark's own file sources charge this much per file when packing files into tasks
# (spark.sql.files.openCostInBytes): a task of many tiny segments still pays per segment.
_OPEN_COST_BYTES: Final = 4 << 20


def pack_ranges(
    ranges: list[offline.SegmentRange], max_partition_bytes: int, min_partitions: int
) -> list[SegmentPartition]:
    """Input partitions of consecutive segment ranges, by the packing rule of Spark's file sources.

    A task holds at most ``min(max_partition_bytes, max(4 MiB, total /
    min_partitions))`` bytes, each range counted with a 4 MiB open cost
    (Spark's ``maxPartitionBytes``, ``openCostInBytes`` and ``defaultParallelism``),
    and at least one range; ranges stay in plan order so that a task reads a
    partition's segments one after the other. Every task of a Python data source
    costs tens of milliseconds before it reads a byte (docs/SPARK.md §10), so
    many small segments are read by fewer tasks, while a segment larger than the
    limit is a task of its own; ``max_partition_bytes=1`` gives one task per range.
    """
    total = sum(r.end_position - r.start_position + _OPEN_COST_BYTES for r in ranges)
    max_bytes = min(max_partition_bytes, max(_OPEN_COST_BYTES, total // min_partitions))
    packed: list[SegmentPartition] = []
    group: list[offline.SegmentRange] = []
    size = 0
    for r in ranges:
        cost = r.end_position - r.start_position + _OPEN_COST_BYTES
        if group and size + cost > max_bytes:
            packed.append(SegmentPartition(tuple(group)))
            group, size = [], 0
        group.append(r)
        size += cost
    if group:
        packed.append(SegmentPartition(tuple(group)))
    return packed


@dataclass
class PushedBounds:
    """What pushed filters narrowed the read to (every field optional; all are AND-ed)."""

    topics: set[str] | None = None
    partitions: set[int] | None = None
    start_offset: int = 0
    end_offset: int = _NO_END
    from_timestamp: int | None = None
    until_timestamp: int | None = None
    topic_prefixes: list[str] = field(default_factory=list)  # topic LIKE 'orders%'
    unsatisfiable: bool = False  # e.g. topic = 'a' AND topic = 'b'

    def narrow_set(self, current: set[Any] | None, values: Iterable[Any]) -> set[Any]:
        new = set(values)
        return new if current is None else current & new


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MICROSECOND = dt.timedelta(microseconds=1)


def _micros(value: Any) -> int:
    """Microseconds since the epoch of a pushed timestamp (a tz-aware UTC datetime), exactly (no float)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    micros: int = (value - _EPOCH) // _MICROSECOND
    return micros


def _millis_floor(value: Any) -> int:
    """Milliseconds since the epoch of a pushed timestamp, rounded down."""
    return _micros(value) // 1000


def _millis_ceil(value: Any) -> int:
    """Milliseconds since the epoch of a pushed timestamp, rounded up."""
    return -(-_micros(value) // 1000)


def _push(bounds: PushedBounds, pushed: Filter, timestamp_mode: str) -> bool:
    """Apply one filter to ``bounds``; return whether Spark may drop it (it is answered exactly)."""
    f: Any = pushed  # the comparison filters have `attribute` and `value`; Not has a child; the base neither
    attribute: tuple[str, ...] = getattr(f, "attribute", ())
    column = attribute[0] if len(attribute) == 1 else None
    if isinstance(f, IsNotNull):
        return column in ("topic", "partition", "offset", "timestamp")  # never null in seglog
    if column == "topic" and isinstance(f, StringStartsWith):
        bounds.topic_prefixes.append(f.value)
        return True
    if column == "topic" and isinstance(f, (EqualTo, In)):
        bounds.topics = bounds.narrow_set(bounds.topics, [f.value] if isinstance(f, EqualTo) else f.value)
        return True
    if column == "partition" and isinstance(f, (EqualTo, In)):
        bounds.partitions = bounds.narrow_set(bounds.partitions, [f.value] if isinstance(f, EqualTo) else f.value)
        return True
    if column == "partition" and isinstance(f, (GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)):
        return False  # rare: left to Spark (the partition list is small anyway)
    if column == "offset":
        v = f.value
        if isinstance(f, EqualTo):
            bounds.start_offset, bounds.end_offset = max(bounds.start_offset, v), min(bounds.end_offset, v + 1)
        elif isinstance(f, GreaterThan):
            bounds.start_offset = max(bounds.start_offset, v + 1)
        elif isinstance(f, GreaterThanOrEqual):
            bounds.start_offset = max(bounds.start_offset, v)
        elif isinstance(f, LessThan):
            bounds.end_offset = min(bounds.end_offset, v)
        elif isinstance(f, LessThanOrEqual):
            bounds.end_offset = min(bounds.end_offset, v + 1)
        elif isinstance(f, In) and f.value:
            bounds.start_offset = max(bounds.start_offset, min(f.value))
            bounds.end_offset = min(bounds.end_offset, max(f.value) + 1)
            return False  # the range holds more than the listed offsets
        else:
            return False
        return True
    if column == "timestamp" and timestamp_mode != "none":
        # Spark keeps every timestamp filter: rows inside the offsets a bound maps to may still fall outside it.
        lower = upper = None
        if isinstance(f, (GreaterThan, GreaterThanOrEqual)):
            lower = _millis_floor(f.value)
        elif isinstance(f, LessThan):
            upper = _millis_ceil(f.value)
        elif isinstance(f, LessThanOrEqual):
            upper = _millis_floor(f.value) + 1
        elif isinstance(f, EqualTo):
            lower, upper = _millis_floor(f.value), _millis_floor(f.value) + 1
        if lower is not None:
            bounds.from_timestamp = lower if bounds.from_timestamp is None else max(bounds.from_timestamp, lower)
        if upper is not None and timestamp_mode == "offsets":
            bounds.until_timestamp = upper if bounds.until_timestamp is None else min(bounds.until_timestamp, upper)
    return False


def _resolve(
    spec: OffsetSpec, topic: str, partition: int, *, log_start: int, log_end: int
) -> tuple[int | None, int | None]:
    """``(offset, None)`` for an offset bound, ``(None, timestamp)`` for a timestamp bound."""
    value = spec.for_partition(topic, partition)
    if spec.by_timestamp and value >= 0:
        return None, value
    if value == EARLIEST:
        return log_start, None
    if value == LATEST:
        return log_end, None
    return value, None


def plan_read(
    opts: ReadOptions,
    pushed: PushedBounds,
    *,
    stream_ranges: Mapping[tuple[str, int], tuple[int, int]] | None = None,
) -> list[offline.SegmentRange]:
    """Every segment range the read needs, partition by partition (runs where Spark plans: no Spark calls).

    ``stream_ranges`` (micro-batches) gives the exact ``[start, end)`` offsets
    per partition and replaces the starting/ending options.
    """
    if pushed.unsatisfiable:
        return []
    trace = offline.append_trace(opts.trace_file) if opts.trace_file else None
    log_starts = offline.log_start_offsets(opts.path)
    ranges: list[offline.SegmentRange] = []
    for topic, partition in offline.list_partitions(opts.path):
        if not opts.selects(topic):
            continue
        if pushed.topics is not None and topic not in pushed.topics:
            continue
        if not all(topic.startswith(prefix) for prefix in pushed.topic_prefixes):
            continue
        if pushed.partitions is not None and partition not in pushed.partitions:
            continue
        log_start = log_starts.get((topic, partition), 0)
        if stream_ranges is not None:
            if (topic, partition) not in stream_ranges:
                continue
            first, end = stream_ranges[(topic, partition)]
            bounds = offline.Bounds(first, end)
        else:
            # Below the log start and above the log end, plan_partition clamps: 0 and NO_END are safe.
            begin, begin_ts = _resolve(opts.starting, topic, partition, log_start=0, log_end=_NO_END)
            stop, stop_ts = _resolve(opts.ending, topic, partition, log_start=0, log_end=_NO_END)
            bounds = offline.Bounds(
                max(begin or 0, pushed.start_offset),
                min(_NO_END if stop is None else stop, pushed.end_offset),
                _max_opt(begin_ts, pushed.from_timestamp),
                _min_opt(stop_ts, pushed.until_timestamp),
            )
        plan = offline.plan_partition(opts.path, topic, partition, bounds, log_start_offset=log_start, trace=trace,
                                      isolation=opts.isolation)
        ranges.extend(plan.ranges)
    return ranges


def _max_opt(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _min_opt(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def read_partition(opts: ReadOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """The Arrow batches of one input partition (runs on an executor)."""
    ranges = getattr(partition, "ranges", None)
    if ranges is None:  # Spark turns an empty partition list into one InputPartition(None)
        return
    trace = offline.append_trace(opts.trace_file) if opts.trace_file else None
    for segment_range in ranges:
        chunks = offline.scan_range_buffers(
            segment_range, rows_per_chunk=opts.rows_per_batch, max_chunk_bytes=opts.bytes_per_batch, trace=trace
        )
        for chunk in chunks:
            yield buffers_to_batch(segment_range.topic, segment_range.partition, chunk)


class SeglogReader(DataSourceReader):
    """Batch reads of a log directory; state is only the options and the pushed bounds (picklable)."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self.pushed = PushedBounds()

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        """Narrow the plan with every filter seglog can answer; yield the ones Spark must still apply."""
        for f in filters:
            if not _push(self.pushed, f, self.opts.timestamp_pushdown):
                yield f
        if self.pushed.topics == set() or self.pushed.partitions == set():
            self.pushed.unsatisfiable = True
        if self.pushed.start_offset >= self.pushed.end_offset:
            self.pushed.unsatisfiable = True

    def partitions(self) -> list[InputPartition]:
        """The segment ranges the read needs, packed into tasks of at most ``maxPartitionBytes``."""
        opts = self.opts
        return list(pack_ranges(plan_read(opts, self.pushed), opts.max_partition_bytes, opts.min_partitions))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Arrow batches of the partition's records."""
        return read_partition(self.opts, partition)


class SeglogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches by offset: an offset is ``{"<topic>-<partition>": next_offset}`` for every partition read.

    Partitions that appear later (new topics matching ``topics``/``subscribePattern``)
    start at their log start, as Kafka's source does for new partitions.
    """

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self._target: dict[str, int] | None = None  # pinned by Trigger.AvailableNow

    def _ends(self) -> dict[str, int]:
        """Where each partition's micro-batches may end: its log end, or under read_committed its LSO."""
        def end(topic: str, partition: int) -> int:
            if self.opts.isolation == "read_committed":
                return offline.partition_transactions(self.opts.path, topic, partition).last_stable_offset
            return offline.log_end_offset(self.opts.path, topic, partition)

        partitions = offline.list_partitions(self.opts.path)
        return {partition_key(t, p): end(t, p) for t, p in partitions if self.opts.selects(t)}

    def _starts(self) -> dict[str, int]:
        starts = offline.log_start_offsets(self.opts.path)
        return {
            partition_key(t, p): max(starts.get((t, p), 0), _first_base(self.opts.path, t, p))
            for t, p in offline.list_partitions(self.opts.path)
            if self.opts.selects(t)
        }

    def initialOffset(self) -> dict[str, int]:
        """Where a new query starts: ``startingOffsets`` (default latest) or ``startingTimestamp``."""
        ends, starts = self._ends(), self._starts()
        out: dict[str, int] = {}
        for key, end in ends.items():
            topic, partition = split_partition_key(key)
            value, ts = _resolve(self.opts.starting, topic, partition, log_start=starts[key], log_end=end)
            if value is None:
                assert ts is not None
                plan = offline.plan_partition(self.opts.path, topic, partition, offline.Bounds(from_timestamp=ts))
                value = _first_offset(plan, end)
            out[key] = min(max(value, starts[key]), end)
        return out

    def getDefaultReadLimit(self) -> ReadLimit:
        """``maxOffsetsPerTrigger`` as Spark's row limit, else everything available."""
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Pin the end of an ``availableNow`` run to the log ends now (limits still apply per batch)."""
        self._target = self._ends()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        """The end of the next micro-batch: the log ends, capped by the pinned target and the row limit."""
        ends = self._target if self._target is not None else self._ends()
        starts = self._starts()
        begin = {k: start.get(k, starts.get(k, 0)) for k in ends}
        ends = {k: max(v, begin[k]) for k, v in ends.items()}
        if isinstance(limit, ReadMaxRows):
            return _rate_limit(begin, ends, limit.max_rows)
        return ends

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        """Segment ranges covering ``[start, end)`` of every partition that moved."""
        starts = self._starts()
        ranges = {}
        for key, stop in end.items():
            first = start.get(key, starts.get(key, 0))
            if stop > first:
                ranges[split_partition_key(key)] = (first, stop)
        if not ranges:
            return []
        return [SegmentPartition((r,)) for r in plan_read(self.opts, PushedBounds(), stream_ranges=ranges)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Arrow batches of the partition's records."""
        return read_partition(self.opts, partition)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to release: seglog keeps no per-query state (the checkpoint holds the offsets)."""


def _first_base(log_dir: str, topic: str, partition: int) -> int:
    segments = offline.list_segments(offline.partition_path(log_dir, topic, partition))
    return segments[0].base_offset if segments else 0


def _first_offset(plan: offline.PartitionPlan, log_end: int) -> int:
    """The first offset a timestamp-bounded plan returns (the earliest with timestamp >= the bound)."""
    for r in plan.ranges:
        for cols in offline.scan_range(r, rows_per_chunk=1):
            return cols.offsets[0]
    return log_end


def _rate_limit(begin: dict[str, int], ends: dict[str, int], max_rows: int) -> dict[str, int]:
    """Kafka's ``maxOffsetsPerTrigger`` split: each partition gets a share proportional to its backlog."""
    backlog = {k: ends[k] - begin[k] for k in ends}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(ends)
    out = {k: begin[k] + (backlog[k] * max_rows) // total for k in ends}
    spare = max_rows - sum(out[k] - begin[k] for k in ends)
    for k in sorted(ends, key=lambda k: -backlog[k]):  # rounding leftovers go to the largest backlogs
        if spare <= 0:
            break
        if out[k] < ends[k]:
            out[k] += 1
            spare -= 1
    return out


class SeglogDataSource(DataSource):
    """``spark.read.format("seglog")``: Spark's Kafka-source schema over a seglog log directory."""

    @classmethod
    def name(cls) -> str:
        """The format name: ``seglog``."""
        return "seglog"

    def schema(self) -> StructType:
        """Spark's Kafka source schema (``seglog.tools.spark.arrow.SCHEMA_DDL``)."""
        return SCHEMA

    def reader(self, schema: StructType) -> SeglogReader:
        """A batch reader (options parsed here, on the driver, so errors surface at ``load()``)."""
        return SeglogReader(parse_read_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> SeglogStreamReader:
        """A streaming reader (``startingOffsets`` defaults to latest)."""
        return SeglogStreamReader(parse_read_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        """The batch writer (:class:`seglog.tools.spark.writer.SeglogWriter`)."""
        from seglog.tools.spark.writer import SeglogWriter

        return SeglogWriter(dict(self.options), schema, overwrite)

