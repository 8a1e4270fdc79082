"""Kafka's offset checkpoint files: ``recovery-point-offset-checkpoint`` and friends.

Format (Kafka's ``CheckpointFile``), text, one item per line::

    0                     <- version
    2                     <- number of entries
    orders 0 1234         <- topic, partition, offset
    orders 1 99

The ``.clean-shutdown`` marker carries, in the same style, what a clean open
needs to answer for a partition without opening its files (see
:func:`format_clean_shutdown`).

Parsing is strict and pure: a file that does not follow the format raises
:class:`~seglog.engine.errors.CorruptionError`, and the engine then falls back to the
safe choice (recover everything) rather than trusting it. Writing is atomic
(temp file, fsync, rename, directory fsync) and lives in the engine.

Must not import: ``tools``.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import pairwise
from typing import Final, NamedTuple

from seglog.engine.errors import CorruptionError
from seglog.engine.names import validate_topic

__all__ = [
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT",
    "ClosedPartition",
    "format_checkpoint",
    "format_clean_shutdown",
    "parse_checkpoint",
    "parse_clean_shutdown",
]

RECOVERY_POINT_CHECKPOINT: Final = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT: Final = "log-start-offset-checkpoint"
CHECKPOINT_VERSION: Final = 0  # part of the file format
# Of the .clean-shutdown record, part of the format: 2 adds each segment's .log bytes; 1 (still read) has
# none; an empty marker (seglog < 0.3) has no record at all.
CLEAN_SHUTDOWN_VERSION: Final = 2
_CLEAN_SHUTDOWN_VERSIONS: Final = ("1", "2")
MAX_CHECKPOINT_ENTRIES: Final = 10_000_000  # bound before allocating anything from a count on disk

TopicPartition = tuple[str, int]


def _entry_lines(data: bytes, name: str, versions: tuple[str, ...]) -> tuple[str, list[tuple[int, str]]]:
    """The version and the entry lines (with their 1-based line numbers) of a version + count + entries text file.

    Raises:
        CorruptionError: not ASCII, another version, or a count that does not match the lines.
    """
    try:
        lines = data.decode("ascii").splitlines()
    except UnicodeDecodeError as exc:
        raise CorruptionError(f"{name}: not ASCII text") from exc
    if len(lines) < 2:
        raise CorruptionError(f"{name}: expected a version and a count, got {len(lines)} line(s)")
    version = lines[0].strip()
    if version not in versions:
        raise CorruptionError(f"{name}: unsupported version {version!r} (expected {' or '.join(versions)})")
    try:
        count = int(lines[1])
    except ValueError as exc:
        raise CorruptionError(f"{name}: entry count {lines[1]!r} is not a number") from exc
    if not 0 <= count <= MAX_CHECKPOINT_ENTRIES or count != len(lines) - 2:
        raise CorruptionError(f"{name}: header says {count} entries but the file has {len(lines) - 2}")
    return version, list(enumerate(lines[2:], start=3))


def format_checkpoint(offsets: Mapping[TopicPartition, int]) -> bytes:
    """The checkpoint file's bytes for ``offsets`` (sorted, for stable diffs)."""
    lines = [str(CHECKPOINT_VERSION), str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    return ("\n".join(lines) + "\n").encode("ascii")


def parse_checkpoint(data: bytes, *, name: str = "checkpoint") -> dict[TopicPartition, int]:
    """Parse a checkpoint file's bytes.

    Raises:
        CorruptionError: wrong version, a count that does not match the lines,
            a malformed line, a bad topic name or a negative offset.
    """
    out: dict[TopicPartition, int] = {}
    for number, line in _entry_lines(data, name, (str(CHECKPOINT_VERSION),))[1]:
        parts = line.split(" ")
        if len(parts) != 3:
            raise CorruptionError(f"{name}: line {number} is not 'topic partition offset': {line!r}")
        topic, partition_text, offset_text = parts
        try:
            validate_topic(topic)
            partition, offset = int(partition_text), int(offset_text)
        except (ValueError, TypeError) as exc:
            raise CorruptionError(f"{name}: line {number} is malformed: {line!r}") from exc
        if partition < 0 or offset < 0:
            raise CorruptionError(f"{name}: line {number} has a negative number: {line!r}")
        out[(topic, partition)] = offset
    return out


class ClosedPartition(NamedTuple):
    """One partition as a clean close left it: enough to serve it before its files are opened.

    A hint, never trusted over the files: the partition's first use checks it
    against them (``engine.loader.check_clean_record``).
    """

    log_end_offset: int
    size_bytes: int  # bytes of its .log files
    first_largest_timestamp: int  # of its first segment (what retention.ms judges first), as retention sees it
    base_offsets: tuple[int, ...]  # of its segments, ascending
    segment_bytes: tuple[int, ...] | None = None  # each segment's .log bytes (None: a version 1 record)


def format_clean_shutdown(partitions: Mapping[TopicPartition, ClosedPartition]) -> bytes:
    """The ``.clean-shutdown`` record: checkpoint-style text, one partition per line.

    ::

        2                                                    <- version
        2                                                    <- number of entries
        orders 0 1234 56789 1700000000000 0,800 30100,26689  <- topic, partition, log end offset, .log bytes,
        orders 1 0 0 1700000000000 0 0                          first segment's largest timestamp, base
                                                                offsets, each segment's .log bytes
    A partition carried over from a version 1 record (unopened since) has
    ``-`` for the sizes it never had.
    """
    lines = [str(CLEAN_SHUTDOWN_VERSION), str(len(partitions))]
    lines += [
        f"{topic} {partition} {p.log_end_offset} {p.size_bytes} {p.first_largest_timestamp} "
        f"{','.join(map(str, p.base_offsets))} "
        f"{'-' if p.segment_bytes is None else ','.join(map(str, p.segment_bytes))}"
        for (topic, partition), p in sorted(partitions.items())
    ]
    return ("\n".join(lines) + "\n").encode("ascii")


def parse_clean_shutdown(data: bytes, *, name: str = ".clean-shutdown") -> dict[TopicPartition, ClosedPartition]:
    """Parse a ``.clean-shutdown`` record (an empty marker parses to no entries).

    Reads version 1 (no segment sizes) and 2.

    Raises:
        CorruptionError: not the format of :func:`format_clean_shutdown`, or an
            entry that cannot be true (no segment, base offsets not ascending,
            a log end below the last segment's base offset, a negative number,
            sizes that are not one per segment or do not add up to the bytes).
    """
    if not data:
        return {}
    out: dict[TopicPartition, ClosedPartition] = {}
    version, lines = _entry_lines(data, name, _CLEAN_SHUTDOWN_VERSIONS)
    fields = 6 if version == "1" else 7
    for number, line in lines:
        parts = line.split(" ")
        if len(parts) != fields:
            raise CorruptionError(
                f"{name}: line {number} is not 'topic partition end bytes timestamp bases"
                f"{'' if fields == 6 else ' sizes'}': {line!r}"
            )
        try:
            validate_topic(parts[0])
            partition, end, size, largest = int(parts[1]), int(parts[2]), int(parts[3]), int(parts[4])
            bases = tuple(int(b) for b in parts[5].split(","))
            sizes = None if fields == 6 or parts[6] == "-" else tuple(int(b) for b in parts[6].split(","))
        except (ValueError, TypeError) as exc:
            raise CorruptionError(f"{name}: line {number} is malformed: {line!r}") from exc
        if (
            min(partition, end, size, *bases, *(sizes or ())) < 0
            or any(a >= b for a, b in pairwise(bases))
            or end < bases[-1]
            or (sizes is not None and (len(sizes) != len(bases) or sum(sizes) != size))
        ):
            raise CorruptionError(f"{name}: line {number} cannot describe a partition: {line!r}")
        out[(parts[0], partition)] = ClosedPartition(end, size, largest, bases, sizes)
    return out
