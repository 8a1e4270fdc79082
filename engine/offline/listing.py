"""What a log directory holds, read from its files: partitions, segments, topic configs, checkpoints, groups.

Owns the offline view of a directory's layout: the partition directories of a
log directory, the segments of a partition (the listing is
``seglog.segments.files.list_partition_dir``, the engine's own), each
partition's ``topic.json`` (hence the largest batch its reads accept), the two
offset checkpoints and the consumer-group files; and opening a ``.log``
read-only for the segment reader (``seglog.segments.reader``).

Must not import: ``tools``; nor ``seglog.engine.engine`` / ``seglog.engine.log``.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from seglog.engine._fs import TOPIC_FILE, list_log_dir
from seglog.engine._fs import lock_holder as _lock_holder
from seglog.engine.checkpoints import LOG_START_OFFSET_CHECKPOINT, parse_checkpoint
from seglog.engine.config import LogConfig
from seglog.engine.errors import CorruptionError, InvalidConfigError, StorageError
from seglog.engine.groups import GROUPS_DIR, StoreImage, read_store
from seglog.engine.names import partition_dir_name
from seglog.segments.fileio import SegmentFile, default_ops, read_small_file_sync
from seglog.segments.files import (
    INDEX_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    list_partition_dir,
)
from seglog.segments.reader import BatchReader

__all__ = [
    "file_size",
    "GROUPS_DIR",
    "SegmentInfo",
    "TopicMeta",
    "group_names",
    "group_offsets",
    "group_store",
    "list_names",
    "list_partitions",
    "list_segments",
    "lock_holder",
    "log_start_offsets",
    "max_batch_bytes_for",
    "open_log",
    "partition_dirs",
    "partition_path",
    "read_checkpoint",
    "read_topic_file",
    "segment_reader",
]

_MAX_TOPIC_FILE_BYTES: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """One segment as the directory listing shows it (no file is read, only ``stat``).

    ``next_base_offset`` is the following segment's base offset (``None`` for the
    last, active segment): the segment holds offsets in
    ``[base_offset, next_base_offset)``. Index sizes are ``None`` when the file
    does not exist.
    """

    base_offset: int
    log_path: Path
    size_bytes: int
    next_base_offset: int | None
    index_bytes: int | None
    time_index_bytes: int | None
    txn_index_bytes: int | None

    @property
    def is_active(self) -> bool:
        """Whether this is the partition's last segment (the one appends go to)."""
        return self.next_base_offset is None

    def sibling(self, suffix: str) -> Path:
        """The path of this segment's file with ``suffix`` (``.index``, ``.timeindex``, ``.txnindex``)."""
        return self.log_path.with_suffix(suffix)


def file_size(path: Path) -> int | None:
    """The length of the regular file at ``path``, ``None`` if there is none (through the file layer).

    Something else under the name (a directory) is ``None`` too: reading it is what reports it.

    Raises:
        StorageError: it cannot be ``stat``-ed.
    """
    try:
        return default_ops().stat_size(str(path))
    except (FileNotFoundError, IsADirectoryError):
        return None
    except OSError as exc:
        raise StorageError(f"{path}: cannot stat: {exc}") from exc


def list_names(directory: Path) -> list[str]:
    """The names in ``directory``, sorted.

    Raises:
        StorageError: the directory is missing or unreadable.
    """
    try:
        return sorted(default_ops().listdir(str(directory)))
    except FileNotFoundError as exc:
        raise StorageError(f"{directory}: no such directory") from exc
    except NotADirectoryError as exc:
        raise StorageError(f"{directory}: not a directory") from exc
    except OSError as exc:
        raise StorageError(f"{directory}: cannot list: {exc}") from exc


def list_segments(partition_dir: str | os.PathLike[str]) -> list[SegmentInfo]:
    """The segments of one partition directory, in base-offset order (the engine's listing, with sizes).

    Only ``<20-digit base offset>.log`` files count; files pending deletion
    (``.deleted`` etc.) and stray files are ignored here (``verify`` reports them).

    Raises:
        StorageError: the directory is missing or unreadable.
    """
    directory = Path(partition_dir)
    listed = list_partition_dir(directory).segments
    out: list[SegmentInfo] = []
    for i, seg in enumerate(listed):
        log_path = seg.path(directory)
        out.append(
            SegmentInfo(
                base_offset=seg.base_offset,
                log_path=log_path,
                size_bytes=file_size(log_path) or 0,
                next_base_offset=listed[i + 1].base_offset if i + 1 < len(listed) else None,
                index_bytes=file_size(seg.path(directory, INDEX_SUFFIX)) if seg.has_offset_index else None,
                time_index_bytes=file_size(seg.path(directory, TIME_INDEX_SUFFIX)) if seg.has_time_index else None,
                txn_index_bytes=file_size(seg.path(directory, TXN_INDEX_SUFFIX)) if seg.has_txn_index else None,
            )
        )
    return out


def partition_path(log_dir: str | os.PathLike[str], topic: str, partition: int) -> Path:
    """``<log_dir>/<topic>-<partition>``."""
    return Path(log_dir) / partition_dir_name(topic, partition)


def partition_dirs(log_dir: str | os.PathLike[str]) -> list[tuple[tuple[str, int], Path]]:
    """Every ``<topic>-<partition>`` directory of ``log_dir`` (symlinks are not followed), sorted.

    Raises:
        StorageError: ``log_dir`` is missing or unreadable.
    """
    root = Path(log_dir)
    return sorted((key, root / name) for key, name in list_log_dir(root).partition_dirs.items())


def list_partitions(log_dir: str | os.PathLike[str]) -> list[tuple[str, int]]:
    """Every ``(topic, partition)`` with a directory in ``log_dir``, sorted.

    Raises:
        StorageError: ``log_dir`` is missing or unreadable.
    """
    return [key for key, _ in partition_dirs(log_dir)]


# --------------------------------------------------------------------------------------- topic.json


@dataclass(frozen=True, slots=True)
class TopicMeta:
    """A partition's ``topic.json``: its partition count, config overrides, config, and what was wrong with it."""

    partitions: int | None
    overrides: dict[str, Any]
    config: LogConfig
    problem: str | None

    @property
    def max_batch_bytes(self) -> int:
        """The bound the engine's recovery puts on a batch: no valid batch is larger."""
        return max(self.config.max_message_bytes, self.config.segment_bytes)


def read_topic_file(partition_dir: Path) -> TopicMeta:
    """The partition's ``topic.json``; Kafka's defaults (and ``problem``) when it is missing or unreadable."""
    path = partition_dir / TOPIC_FILE
    try:
        raw = read_small_file_sync(path, max_bytes=_MAX_TOPIC_FILE_BYTES + 1)
    except StorageError as exc:
        return TopicMeta(None, {}, LogConfig(), f"cannot read: {exc}")
    if raw is None:
        return TopicMeta(None, {}, LogConfig(), None)
    if len(raw) > _MAX_TOPIC_FILE_BYTES:
        return TopicMeta(None, {}, LogConfig(), "larger than 1 MiB; not a topic file")
    try:
        meta = json.loads(raw)
        if not isinstance(meta, dict):
            raise ValueError("not a JSON object")
        overrides = meta.get("config", {})
        if not isinstance(overrides, dict):
            raise ValueError("'config' is not an object")
        partitions = meta.get("partitions")
        if partitions is not None and (not isinstance(partitions, int) or partitions < 1):
            raise ValueError(f"'partitions' is {partitions!r}")
        config = LogConfig.from_properties(overrides)
    except (ValueError, InvalidConfigError) as exc:
        return TopicMeta(None, {}, LogConfig(), f"unreadable ({exc}); the engine uses its default config")
    return TopicMeta(partitions, dict(overrides), config, None)


def max_batch_bytes_for(partition_dir: str | os.PathLike[str]) -> int:
    """The largest batch a partition's config allows: the bound every scan puts on a batch length.

    From the partition's ``topic.json`` overrides over Kafka's defaults (the
    engine's recovery uses the same bound); the defaults when it is unreadable.
    """
    return read_topic_file(Path(partition_dir)).max_batch_bytes


# --------------------------------------------------------------------------------------- checkpoints


def read_checkpoint(log_dir: Path, name: str) -> tuple[dict[tuple[str, int], int] | None, str | None]:
    """``(offsets, problem)`` of a checkpoint file: offsets is ``None`` when it is missing or unreadable."""
    path = log_dir / name
    try:
        data = read_small_file_sync(path)
    except StorageError as exc:
        return None, f"cannot read: {exc}"
    if data is None:
        return None, None
    try:
        return parse_checkpoint(data, name=name), None
    except CorruptionError as exc:
        return None, str(exc)


def log_start_offsets(log_dir: str | os.PathLike[str]) -> dict[tuple[str, int], int]:
    """The engine's ``log-start-offset-checkpoint`` (records below are deleted); empty when absent or unreadable.

    Empty is the safe choice, as the engine makes it: every record is kept.
    """
    offsets, _ = read_checkpoint(Path(log_dir), LOG_START_OFFSET_CHECKPOINT)
    return offsets or {}


# --------------------------------------------------------------------------------------- consumer groups


def group_names(log_dir: Path) -> list[str]:
    """The consumer groups with committed offsets in the group store, sorted (none when it is unreadable)."""
    try:
        image = read_store(log_dir)
    except StorageError:
        return []  # verify reports it
    return sorted(image.offsets)


def group_offsets(log_dir: str | os.PathLike[str]) -> dict[str, dict[tuple[str, int], int]]:
    """Every consumer group's committed offsets, read from the group store (damaged frames skipped).

    Raises:
        StorageError: the log directory or its group store is missing or unreadable.
    """
    return group_store(log_dir).offsets


def lock_holder(log_dir: str | os.PathLike[str]) -> int | None:
    """The pid of the process whose Engine holds ``log_dir`` now (0: unknown pid), or ``None`` when none does.

    A running engine (``seglog serve``, an application) keeps its groups'
    membership up to date in the group store; without one, no group has
    active members.
    """
    return _lock_holder(Path(log_dir))


def group_store(log_dir: str | os.PathLike[str]) -> StoreImage:
    """The group store of a log directory: offsets, their metadata and the groups' membership snapshots.

    Read without the directory lock, as a running engine may be writing it:
    the view ends at the last complete frame.

    Raises:
        StorageError: the log directory is missing, or its group store unreadable.
    """
    root = Path(log_dir)
    if not default_ops().is_dir(str(root)):
        raise StorageError(f"{root}: no such log directory")
    return read_store(root)


# --------------------------------------------------------------------------------------- .log files


@contextlib.contextmanager
def open_log(path: str | os.PathLike[str]) -> Iterator[SegmentFile]:
    """A ``.log`` opened read-only through the file layer; its size, taken now, bounds every read.

    Reads are ``pread`` (never mmap): a live engine may truncate the file under
    us, which turns an mmap access into SIGBUS but a ``pread`` into a short read.

    Raises:
        StorageError: the file cannot be opened.
    """
    log = SegmentFile.open(Path(path), create=False, writable=False)
    try:
        yield log
    finally:
        log.close(trim=False)


def segment_reader(log: SegmentFile, base_offset: int, max_batch_bytes: int, **options: Any) -> BatchReader:
    """The segment reader over ``log`` (from :func:`open_log`), bounded by its size; ``options``: ``BatchReader``'s."""
    return BatchReader(
        log.pread, end=log.size, base_offset=base_offset, max_batch_bytes=max_batch_bytes, path=log.path,
        **options,
    )
