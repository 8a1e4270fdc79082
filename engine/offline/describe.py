"""A log directory described from its files: partitions, segments, log start and end offsets.

Must not import: ``tools``; nor ``seglog.engine.engine`` / ``seglog.engine.log``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seglog.engine._fs import CLEAN_SHUTDOWN_FILE
from seglog.engine.checkpoints import LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT
from seglog.engine.errors import StorageError, UnknownTopicOrPartitionError
from seglog.engine.names import parse_partition_dir, validate_topic
from seglog.engine.offline.listing import (
    SegmentInfo,
    TopicMeta,
    group_names,
    list_segments,
    partition_dirs,
    partition_path,
    read_checkpoint,
    read_topic_file,
)
from seglog.engine.offline.segment_scan import log_end_offset_of
from seglog.segments.fileio import default_ops

__all__ = [
    "LogDirInfo",
    "PartitionInfo",
    "describe_log_dir",
    "describe_partition",
    "partition_info",
    "partition_view",
]


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One partition: its segments, offsets and what the checkpoints say about it.

    ``log_end_offset`` is found by walking the last segment from its last
    offset-index entry (the engine does the same at open); ``log_start_offset``
    is the checkpointed value, or the first segment's base offset.
    """

    topic: str
    partition: int
    directory: Path
    segments: list[SegmentInfo]
    log_start_offset: int
    log_end_offset: int
    recovery_point: int | None
    size_bytes: int
    overrides: dict[str, Any]


def describe_partition(
    partition_dir: str | os.PathLike[str],
    *,
    log_start_offsets: dict[tuple[str, int], int] | None = None,
    recovery_points: dict[tuple[str, int], int] | None = None,
) -> PartitionInfo:
    """Describe one ``<topic>-<partition>`` directory.

    Raises:
        StorageError: the directory (or a segment) cannot be read, or its name is
            not ``<topic>-<partition>``.
    """
    directory = Path(partition_dir)
    parsed = parse_partition_dir(directory.name)
    if parsed is None:
        raise StorageError(f"{directory}: not a partition directory (expected <topic>-<partition>)")
    meta = read_topic_file(directory)
    segments = list_segments(directory)
    if segments:
        first_base = segments[0].base_offset
        end = log_end_offset_of(segments[-1], meta.max_batch_bytes)[0]
    else:
        first_base = end = 0
    start = (log_start_offsets or {}).get(parsed, first_base)
    return PartitionInfo(
        topic=parsed[0],
        partition=parsed[1],
        directory=directory,
        segments=segments,
        log_start_offset=min(max(start, first_base), end),
        log_end_offset=end,
        recovery_point=(recovery_points or {}).get(parsed),
        size_bytes=sum(s.size_bytes for s in segments),
        overrides=meta.overrides,
    )


@dataclass(frozen=True, slots=True)
class LogDirInfo:
    """A log directory: its partitions (by topic) and the state files next to them."""

    path: Path
    clean_shutdown: bool
    partitions: list[PartitionInfo]
    recovery_points: dict[tuple[str, int], int] | None
    log_start_offsets: dict[tuple[str, int], int] | None
    groups: list[str]

    def topics(self) -> list[str]:
        """Topic names, sorted."""
        return sorted({p.topic for p in self.partitions})


def describe_log_dir(log_dir: str | os.PathLike[str], *, topic: str | None = None) -> LogDirInfo:
    """Describe a log directory: every partition (or only ``topic``'s) with its segments and offsets.

    Raises:
        StorageError: the directory is missing or unreadable.
        InvalidTopicError: ``topic`` is not a legal topic name.
    """
    path = Path(log_dir)
    if topic is not None:
        validate_topic(topic)
    if not default_ops().is_dir(str(path)):
        raise StorageError(f"{path}: no such log directory")
    recovery_points, _ = read_checkpoint(path, RECOVERY_POINT_CHECKPOINT)
    start_offsets, _ = read_checkpoint(path, LOG_START_OFFSET_CHECKPOINT)
    partitions = [
        describe_partition(d, log_start_offsets=start_offsets, recovery_points=recovery_points)
        for (t, _p), d in partition_dirs(path)
        if topic is None or t == topic
    ]
    return LogDirInfo(
        path=path,
        clean_shutdown=default_ops().exists(str(path / CLEAN_SHUTDOWN_FILE)),
        partitions=partitions,
        recovery_points=recovery_points,
        log_start_offsets=start_offsets,
        groups=group_names(path),
    )


def partition_view(log_dir: Path, topic: str, partition: int) -> tuple[PartitionInfo, TopicMeta]:
    """One partition described, with its ``topic.json``.

    Raises:
        StorageError: the log directory is missing or unreadable.
        UnknownTopicOrPartitionError: no such partition directory.
    """
    directory = partition_path(log_dir, topic, partition)
    if not default_ops().is_dir(str(log_dir)):
        raise StorageError(f"{log_dir}: no such log directory")
    if not default_ops().is_dir(str(directory)):
        raise UnknownTopicOrPartitionError(f"{directory}: no such partition directory")
    start_offsets, _ = read_checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT)
    return describe_partition(directory, log_start_offsets=start_offsets), read_topic_file(directory)


def partition_info(log_dir: str | os.PathLike[str], topic: str, partition: int) -> PartitionInfo:
    """Describe one partition of a log directory (its segments, log start and end offsets).

    Raises:
        StorageError: the log directory is missing or unreadable.
        UnknownTopicOrPartitionError: no such partition directory.
    """
    return partition_view(Path(log_dir), topic, partition)[0]
