"""The seglog source's options, parsed once on the driver (names and meanings follow Spark's Kafka source).

Owns: :class:`ReadOptions` and :func:`parse_read_options`, the JSON offset
forms (``{"orders":{"0":23,"1":-2}}``, -2 earliest, -1 latest), the pushdown
mode, and :func:`partition_key` for streaming offsets (``"orders-0"``).

Spark hands options over as strings with lowercased keys (pyspark's
``CaseInsensitiveDict``); everything here works on that or any mapping.

Must not import: ``seglog.tools.cli``; no pyspark import (plain values, testable alone).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from seglog.engine import errors
from seglog.engine.results import ISOLATION_LEVELS, Isolation

__all__ = [
    "EARLIEST",
    "LATEST",
    "PUSHDOWN_MODES",
    "OffsetSpec",
    "ReadOptions",
    "parse_read_options",
    "partition_key",
    "split_partition_key",
]

EARLIEST: Final = -2  # Kafka's JSON offset for "earliest"
LATEST: Final = -1  # Kafka's JSON offset for "latest"
# How timestamp filters are answered (see docs/SPARK.md, "Pushdown"):
#   offsets - both bounds become offsets with the time index, like Kafka's offsetsForTimes (default)
#   start   - only the lower bound (exact even when timestamps are out of order)
#   none    - timestamp filters are left to Spark
PUSHDOWN_MODES: Final = ("offsets", "start", "none")


class OptionError(errors.SeglogError, ValueError):
    """A seglog source option that cannot be understood; the message names the option."""


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """``earliest``/``latest`` for every partition, or per-partition values (Kafka's JSON form)."""

    default: int  # EARLIEST, LATEST, or a timestamp when by_timestamp
    per_partition: dict[tuple[str, int], int] = field(default_factory=dict)
    by_timestamp: bool = False

    def for_partition(self, topic: str, partition: int) -> int:
        """The value for one partition: its own entry, else the default."""
        return self.per_partition.get((topic, partition), self.default)


# Rows and key + value bytes per Arrow batch a read task hands to Spark, whichever comes first.
# Larger batches scan faster (Spark pays a cost per batch of a Python data source; bench/spark_bench.py,
# docs/PERFORMANCE.md "Measurements behind the code"); the byte cap keeps a batch of large records to
# ~64 MiB per task (docs/SPARK.md §3).
DEFAULT_ROWS_PER_BATCH: Final = 262_144
DEFAULT_BYTES_PER_BATCH: Final = 64 << 20
# Segment ranges are packed into tasks by the rule of Spark's file sources (docs/SPARK.md §3):
# at most min(maxPartitionBytes, max(4 MiB, total / minPartitions)) bytes a task, 4 MiB counted per
# range (openCostInBytes). A task of a Python data source costs tens of ms before it reads a byte,
# so many small segments are better read by fewer tasks; segments of Kafka's default size (1 GiB)
# stay a task each. Spark's defaults; minPartitions is the cluster's parallelism, which a reader
# cannot see: read_seglog() passes spark.sparkContext.defaultParallelism, and without it 8 keeps
# small logs spread over tasks as before.
DEFAULT_MAX_PARTITION_BYTES: Final = 128 << 20
DEFAULT_MIN_PARTITIONS: Final = 8


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """Every option of a seglog read or stream, resolved."""

    path: str
    topics: tuple[str, ...] | None  # None: every topic (or the pattern)
    pattern: str | None
    starting: OffsetSpec
    ending: OffsetSpec
    max_offsets_per_trigger: int | None
    timestamp_pushdown: str
    rows_per_batch: int
    bytes_per_batch: int
    max_partition_bytes: int
    min_partitions: int
    trace_file: str | None
    isolation: Isolation = "read_committed"

    def selects(self, topic: str) -> bool:
        """Whether ``topic`` is read (``topics`` or ``subscribePattern``)."""
        if self.topics is not None:
            return topic in self.topics
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None
        return True


def partition_key(topic: str, partition: int) -> str:
    """The streaming offset key of a partition: ``"<topic>-<partition>"``, the directory's name."""
    return f"{topic}-{partition}"


def split_partition_key(key: str) -> tuple[str, int]:
    """Inverse of :func:`partition_key` (topic names may hold ``-``; the partition is after the last one).

    Raises:
        OptionError: not ``<topic>-<int>``.
    """
    topic, sep, number = key.rpartition("-")
    if not sep or not topic or not number.isdigit():
        raise OptionError(f"streaming offset key {key!r} is not '<topic>-<partition>'")
    return topic, int(number)


def _int_option(options: Mapping[str, str], name: str, minimum: int) -> int | None:
    raw = options.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"option {name}={raw!r} is not an integer") from None
    if value < minimum:
        raise OptionError(f"option {name}={value} must be at least {minimum}")
    return value


def _offset_json(name: str, raw: str, *, by_timestamp: bool) -> dict[tuple[str, int], int]:
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option {name} is neither earliest/latest nor Kafka's JSON form: {exc}") from None
    if not isinstance(doc, dict):
        raise OptionError(f'option {name} must be a JSON object like {{"orders":{{"0":23}}}}')
    out: dict[tuple[str, int], int] = {}
    for topic, parts in doc.items():
        if not isinstance(parts, dict):
            raise OptionError(f"option {name}: topic {topic!r} must map partitions to offsets")
        for partition, value in parts.items():
            if not str(partition).isdigit() or isinstance(value, bool) or not isinstance(value, int):
                raise OptionError(f"option {name}: {topic!r} partition {partition!r} -> {value!r} is not int -> int")
            low = 0 if by_timestamp else EARLIEST
            if value < low:
                raise OptionError(f"option {name}: {topic}/{partition} value {value} is below {low}")
            out[(topic, int(partition))] = value
    return out


def _offset_spec(options: Mapping[str, str], which: str, default: int) -> OffsetSpec:
    """``startingOffsets``/``endingOffsets`` and their timestamp forms; timestamps take precedence (Kafka)."""
    by_ts_json = options.get(f"{which}offsetsbytimestamp")
    single_ts = _int_option(options, f"{which}Timestamp", 0)
    if by_ts_json is not None:
        fallback = single_ts if single_ts is not None else default
        return OffsetSpec(
            fallback,
            _offset_json(f"{which}OffsetsByTimestamp", by_ts_json, by_timestamp=True),
            by_timestamp=True,
        )
    if single_ts is not None:
        return OffsetSpec(single_ts, by_timestamp=True)
    raw = options.get(f"{which}offsets")
    if raw is None:
        return OffsetSpec(default)
    word = raw.strip().lower()
    if word in ("earliest", "latest"):
        if which == "ending" and word == "earliest":
            raise OptionError("option endingOffsets=earliest is not allowed (Kafka: use latest or JSON offsets)")
        return OffsetSpec(EARLIEST if word == "earliest" else LATEST)
    return OffsetSpec(default, _offset_json(f"{which}Offsets", raw, by_timestamp=False))


def parse_read_options(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    """Resolve a read's options; defaults as Spark's Kafka source (streams start at latest).

    Raises:
        OptionError: a missing path, a malformed value, or both ``topics`` and ``subscribePattern``.
    """
    path = options.get("path")
    if not path:
        raise OptionError("no log directory: use .load('<log_dir>') or .option('path', '<log_dir>')")
    raw_topics = options.get("topics") or options.get("subscribe")
    pattern = options.get("subscribepattern")
    if raw_topics and pattern:
        raise OptionError("use either topics (subscribe) or subscribePattern, not both")
    topics = tuple(t.strip() for t in raw_topics.split(",") if t.strip()) if raw_topics else None
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise OptionError(f"option subscribePattern={pattern!r} is not a regular expression: {exc}") from None
    isolation = _isolation(options)
    mode = (options.get("timestamppushdown") or "offsets").lower()
    if mode not in PUSHDOWN_MODES:
        raise OptionError(f"option timestampPushdown={mode!r}: use one of {', '.join(PUSHDOWN_MODES)}")
    return ReadOptions(
        # Resolved where the query is planned (the driver), as Spark's file sources do: an executor of a
        # cluster (local-cluster included) runs in a working directory of its own.
        path=os.path.abspath(path),
        topics=topics,
        pattern=pattern,
        starting=_offset_spec(options, "starting", LATEST if streaming else EARLIEST),
        ending=_offset_spec(options, "ending", LATEST),
        max_offsets_per_trigger=_int_option(options, "maxOffsetsPerTrigger", 1),
        timestamp_pushdown=mode,
        rows_per_batch=_int_option(options, "rowsPerBatch", 1) or DEFAULT_ROWS_PER_BATCH,
        bytes_per_batch=_int_option(options, "bytesPerBatch", 1) or DEFAULT_BYTES_PER_BATCH,
        max_partition_bytes=_int_option(options, "maxPartitionBytes", 1) or DEFAULT_MAX_PARTITION_BYTES,
        min_partitions=_int_option(options, "minPartitions", 1) or DEFAULT_MIN_PARTITIONS,
        trace_file=options.get("tracefile"),
        isolation=isolation,
    )


def _isolation(options: Mapping[str, str]) -> Isolation:
    """``isolation.level`` (or Spark's Kafka source's ``kafka.isolation.level``); ``read_committed`` by default.

    Raises:
        OptionError: a value other than read_committed / read_uncommitted, or both names with different values.
    """
    given = {name: options[name].strip().lower() for name in ("isolation.level", "kafka.isolation.level")
             if options.get(name) is not None}
    if len(set(given.values())) > 1:
        raise OptionError(f"options isolation.level and kafka.isolation.level disagree: {given}")
    value = next(iter(given.values()), "read_committed")
    if value == "read_committed":
        return "read_committed"
    if value == "read_uncommitted":
        return "read_uncommitted"
    raise OptionError(f"option isolation.level={value!r}: use one of {', '.join(ISOLATION_LEVELS)}")
