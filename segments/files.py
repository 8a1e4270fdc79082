"""Segment file names, their suffixes, and the one listing of a partition directory (Kafka's ``LogFileUtils``).

Owns the naming rules of ``docs/FORMAT.md`` §1: a segment's files are its base
offset in decimal, zero-padded to 20 digits, followed by ``.log``, ``.index``,
``.timeindex`` or ``.txnindex``; an extra suffix after that (``.deleted``,
``.cleaned``, ``.swap``) marks a file waiting for deletion or a swap, and
``.tmp`` a file an atomic write did not finish. A producer-state snapshot is
``<offset, 20 digits>.snapshot`` (docs/FORMAT.md). Every module that builds or
parses such a name, or lists a partition directory, does it here: the engine's
open, its follower, and the offline tools see the same segments.

Synchronous: :func:`list_partition_dir` and :func:`remove_leftovers_sync` block,
and go through the file layer's ``FileOps`` (its fault-injection seam).

Must not import: ``engine`` or ``tools``. Knows nothing of topics or partitions:
a partition directory is just a directory of segment files here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final, NamedTuple

from seglog.indexes.errors import StorageError
from seglog.segments.fileio import TMP_SUFFIX, FileOps, default_ops

__all__ = [
    "CLEANED_SUFFIX",
    "DELETED_SUFFIX",
    "FILE_NAME_DIGITS",
    "INDEX_SUFFIX",
    "INDEX_SUFFIXES",
    "LEFTOVER_SUFFIXES",
    "LOG_SUFFIX",
    "PENDING_SUFFIXES",
    "SEGMENT_SUFFIXES",
    "SNAPSHOT_SUFFIX",
    "STRAY_SUFFIX",
    "SWAP_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "TMP_SUFFIX",
    "TXN_INDEX_SUFFIX",
    "ListedSegment",
    "PartitionDirListing",
    "base_offset_of",
    "filename_prefix",
    "list_partition_dir",
    "parse_segment_file_name",
    "remove_leftovers_sync",
    "segment_file_name",
    "snapshot_file_name",
    "snapshot_offset_of",
]

# --- Part of the on-disk layout (docs/FORMAT.md §1): changing any of these makes old directories unreadable. ---
FILE_NAME_DIGITS: Final = 20  # the base offset, zero-padded (Kafka's LogFileUtils.filenamePrefixFromOffset)
LOG_SUFFIX: Final = ".log"
INDEX_SUFFIX: Final = ".index"
TIME_INDEX_SUFFIX: Final = ".timeindex"
TXN_INDEX_SUFFIX: Final = ".txnindex"
INDEX_SUFFIXES: Final = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
SEGMENT_SUFFIXES: Final = (LOG_SUFFIX, *INDEX_SUFFIXES)
DELETED_SUFFIX: Final = ".deleted"  # a segment retention removed, waiting for file.delete.delay.ms (Kafka's)
CLEANED_SUFFIX: Final = ".cleaned"  # Kafka's compaction output, never written by seglog: removed at open
SWAP_SUFFIX: Final = ".swap"  # Kafka's segment swap, never written by seglog: removed at open
PENDING_SUFFIXES: Final = (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX)
# A segment recovery set aside (it does not chain with the log): "<name>.<ms>.stray", kept for an operator,
# never listed as a segment, never removed by an open (docs/OPERATIONS.md §3).
STRAY_SUFFIX: Final = ".stray"
SNAPSHOT_SUFFIX: Final = ".snapshot"  # a producer-state snapshot (engine.producer_state writes its content)
# Files an open removes: the pending ones, and the temp file of an interrupted atomic write
# (Kafka's LogLoader removes the first three the same way).
LEFTOVER_SUFFIXES: Final = (*PENDING_SUFFIXES, TMP_SUFFIX)
_MAX_OFFSET: Final = 2**63 - 1


def filename_prefix(offset: int) -> str:
    """The file-name stem of a segment: its base offset, zero-padded to 20 digits (Kafka's rule)."""
    return f"{offset:020d}"


def segment_file_name(base_offset: int, suffix: str = LOG_SUFFIX) -> str:
    """``00000000000000000042.log`` for base offset 42 (``suffix``: ``.index``, ``.timeindex``, ...)."""
    return f"{base_offset:020d}{suffix}"


def base_offset_of(path: str | os.PathLike[str]) -> int | None:
    """The base offset a file's name stands for (any suffix), or ``None`` if its stem is not 20 digits."""
    name = os.fspath(path)
    name = name[name.rfind(os.sep) + 1 :]
    stem = name.split(".", 1)[0]
    if len(stem) != FILE_NAME_DIGITS or not stem.isdigit() or not stem.isascii():
        return None
    return int(stem)


def parse_segment_file_name(name: str) -> tuple[int, str] | None:
    """``(base offset, suffix)`` when ``name`` is exactly a segment file's name, else ``None``.

    ``00000000000000000042.timeindex`` gives ``(42, ".timeindex")``; a file
    pending deletion (``....log.deleted``) or any other name gives ``None``.
    """
    suffix = name[FILE_NAME_DIGITS:]
    if suffix not in SEGMENT_SUFFIXES:
        return None
    stem = name[:FILE_NAME_DIGITS]
    if not stem.isdigit() or not stem.isascii():
        return None
    return int(stem), suffix


def snapshot_file_name(offset: int) -> str:
    """``<offset, 20 digits>.snapshot``: the producer state of the log up to (not including) ``offset``."""
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def snapshot_offset_of(name: str) -> int | None:
    """The offset of a snapshot file's name, or ``None`` when ``name`` is not exactly one."""
    if not name.endswith(SNAPSHOT_SUFFIX):
        return None
    digits = name[: -len(SNAPSHOT_SUFFIX)]
    if len(digits) != FILE_NAME_DIGITS or not digits.isdigit() or not digits.isascii():
        return None
    offset = int(digits)
    return offset if offset <= _MAX_OFFSET else None


class ListedSegment(NamedTuple):
    """One segment of a listing: its base offset and which of its index files exist (its ``.log`` does)."""

    base_offset: int
    has_offset_index: bool
    has_time_index: bool
    has_txn_index: bool

    def path(self, directory: str | os.PathLike[str], suffix: str = LOG_SUFFIX) -> Path:
        """The path of this segment's file with ``suffix`` in ``directory``."""
        return Path(directory, segment_file_name(self.base_offset, suffix))


class PartitionDirListing(NamedTuple):
    """What a partition directory holds, by file name (no file is opened or ``stat``-ed).

    ``segments``: every ``<base>.log``, in base-offset order. ``leftovers``:
    files of interrupted work (:data:`LEFTOVER_SUFFIXES`), which an open
    removes. ``orphan_indexes``: index files whose ``.log`` is missing, which
    an open removes too (rebuilt from nothing, they would be empty anyway).
    ``misnamed``: names that end in a segment suffix but whose stem is not a
    20-digit base offset; ignored by everyone, reported by ``verify``.
    ``snapshots``: the offsets of the producer-state snapshots, ascending. Other
    names (``topic.json``) are not listed. All names are sorted.
    """

    directory: Path
    segments: tuple[ListedSegment, ...]
    leftovers: tuple[str, ...]
    orphan_indexes: tuple[str, ...]
    misnamed: tuple[str, ...]
    snapshots: tuple[int, ...] = ()

    @property
    def base_offsets(self) -> list[int]:
        """The base offsets of the segments, ascending."""
        return [s.base_offset for s in self.segments]

    @property
    def removable(self) -> tuple[str, ...]:
        """The names an open of the partition removes: leftovers and orphan index files."""
        return self.leftovers + self.orphan_indexes


def list_partition_dir(directory: str | os.PathLike[str], *, ops: FileOps | None = None) -> PartitionDirListing:
    """List the segment files of one partition directory (blocking; one ``listdir``).

    Raises:
        StorageError: the directory is missing, not a directory, or cannot be listed.
    """
    path = Path(directory)
    try:
        names = (ops or default_ops()).listdir(str(path))
    except FileNotFoundError as exc:
        raise StorageError(f"{path}: no such partition directory") from exc
    except NotADirectoryError as exc:
        raise StorageError(f"{path}: not a directory") from exc
    except OSError as exc:
        raise StorageError(f"{path}: cannot list the partition directory: {exc}") from exc
    logs: set[int] = set()
    indexes: dict[int, set[str]] = {}
    leftovers: list[str] = []
    misnamed: list[str] = []
    snapshots: list[int] = []
    for name in names:
        if name.endswith(LEFTOVER_SUFFIXES):
            leftovers.append(name)
            continue
        parsed = parse_segment_file_name(name)
        if parsed is None:
            if (snapshot := snapshot_offset_of(name)) is not None:
                snapshots.append(snapshot)
                continue
            if "." + name.partition(".")[2] in SEGMENT_SUFFIXES:
                misnamed.append(name)
            continue
        base, suffix = parsed
        if suffix == LOG_SUFFIX:
            logs.add(base)
        else:
            indexes.setdefault(base, set()).add(suffix)
    segments = tuple(
        ListedSegment(
            base,
            INDEX_SUFFIX in (found := indexes.get(base, ())),
            TIME_INDEX_SUFFIX in found,
            TXN_INDEX_SUFFIX in found,
        )
        for base in sorted(logs)
    )
    orphans = sorted(
        segment_file_name(base, suffix) for base, suffixes in indexes.items() if base not in logs for suffix in suffixes
    )
    return PartitionDirListing(
        path, segments, tuple(sorted(leftovers)), tuple(orphans), tuple(sorted(misnamed)), tuple(sorted(snapshots))
    )


def remove_leftovers_sync(listing: PartitionDirListing, *, ops: FileOps | None = None) -> list[str]:
    """Remove what an open removes (:attr:`PartitionDirListing.removable`); returns the names removed (blocking).

    A file already gone is not an error (another process cleaned up first).

    Raises:
        StorageError: a file cannot be removed.
    """
    ops = ops or default_ops()
    removed = []
    for name in listing.removable:
        path = listing.directory / name
        try:
            ops.unlink(str(path))
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise StorageError(f"{path}: cannot remove a leftover file: {exc}") from exc
        removed.append(name)
    return removed
