"""Producer-state snapshots (``<offset>.snapshot``) read offline: listed, decoded, checked against the log.

A snapshot holds the producer state of a partition up to (not including)
the offset in its name (``seglog.engine.producer_state``; the layout is in
docs/FORMAT.md). The engine writes one at each roll (at the new segment's
base offset) and at a clean close (at the log end), and when it loads the
state it deletes those it cannot use (:func:`~seglog.engine.producer_state.plan_snapshot_load`)
and those that do not read back. Here they are read with the engine's own
decoder (which trusts nothing) and never changed.

Must not import: ``tools``; nor ``seglog.engine.engine`` / ``seglog.engine.log`` /
``seglog.engine.loader``.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from seglog.engine.errors import CorruptSnapshotError, StorageError
from seglog.engine.offline.findings import Check, Finding, Severity
from seglog.engine.producer_state import ProducerStateEntry, decode_snapshot, read_snapshot_file
from seglog.segments.fileio import default_ops
from seglog.segments.files import list_partition_dir, snapshot_file_name, snapshot_offset_of

__all__ = ["SnapshotDump", "dump_snapshot", "list_snapshots", "read_snapshots", "snapshot_findings"]


@dataclass(frozen=True, slots=True)
class SnapshotDump:
    """A ``.snapshot`` file read back: the offset its name says, and its producers or why it does not decode."""

    path: Path
    offset: int
    file_bytes: int
    entries: list[ProducerStateEntry] = field(default_factory=list)
    problem: str | None = None  # the decoder's refusal: the engine deletes such a file and rebuilds from the log


def list_snapshots(directory: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """The snapshot files of a partition directory, by offset: ``(offset, path)``.

    Raises:
        StorageError: the directory cannot be listed.
    """
    d = Path(directory)
    return [(offset, d / snapshot_file_name(offset)) for offset in sorted(list_partition_dir(d).snapshots)]


def dump_snapshot(path: str | os.PathLike[str]) -> SnapshotDump:
    """Read and decode one snapshot file (blocking); a file that does not decode is a ``problem``, not an error.

    Raises:
        StorageError: the file is missing or unreadable, or its name is not ``<20-digit offset>.snapshot``.
    """
    p = Path(path)
    offset = snapshot_offset_of(p.name)
    if offset is None:
        raise StorageError(f"{p}: not a snapshot file name (<20-digit offset>.snapshot)")
    try:
        size = default_ops().stat_size(str(p))
    except FileNotFoundError as exc:
        raise StorageError(f"{p}: no such file") from exc
    except OSError as exc:
        raise StorageError(f"{p}: cannot read: {exc.strerror or exc}") from exc
    try:
        data = read_snapshot_file(p)
    except CorruptSnapshotError as exc:  # too large to be one, or removed under the read
        return SnapshotDump(p, offset, size, problem=str(exc))
    try:
        return SnapshotDump(p, offset, len(data), decode_snapshot(data, offset))
    except CorruptSnapshotError as exc:
        return SnapshotDump(p, offset, len(data), problem=str(exc))


def read_snapshots(directory: str | os.PathLike[str]) -> tuple[list[SnapshotDump], list[Finding]]:
    """Every snapshot file of a partition directory read (:func:`dump_snapshot`), by offset.

    A file that does not decode is a dump with a ``problem``; one that cannot
    be read at all (gone under the read, no permission) is a finding instead.

    Raises:
        StorageError: the directory cannot be listed.
    """
    dumps: list[SnapshotDump] = []
    unreadable: list[Finding] = []
    for offset, path in list_snapshots(directory):
        try:
            dumps.append(dump_snapshot(path))
        except StorageError as exc:
            unreadable.append(Finding(Severity.ERROR, Check.SNAPSHOT, path, str(exc), offset=offset))
    return dumps, unreadable


def snapshot_findings(
    snapshots: Sequence[SnapshotDump],
    *,
    off_boundary: Collection[int] = (),
    log_end_offset: int,
) -> list[Finding]:
    """Check a partition's snapshots against its log; ``snapshots`` in offset order.

    Each one must decode, and lie where the engine writes one: at a batch
    boundary inside the log (``off_boundary``: the snapshots' offsets that a
    scan of the segment holding them found inside a batch, or past its last
    valid batch), not past the log end (the log was cut after it was
    written). Snapshots the engine merely has no more use for -- the previous
    clean close's, one below the log start -- are normal (the engine leaves
    them behind and deletes them when it next loads the producer state, as
    Kafka's ``removeStraySnapshots`` does) and not reported.
    """
    out: list[Finding] = []
    for snap in snapshots:
        if snap.problem is not None:
            out.append(Finding(Severity.ERROR, Check.SNAPSHOT, snap.path,
                               f"does not decode ({snap.problem}); the engine deletes it and rebuilds the producer "
                               "state from the log", offset=snap.offset))
        elif snap.offset > log_end_offset:
            out.append(Finding(Severity.ERROR, Check.SNAPSHOT, snap.path,
                               f"offset {snap.offset} is past the log end offset {log_end_offset} (the log was cut "
                               "after it was written); the engine deletes it", offset=snap.offset))
        elif snap.offset in off_boundary:
            out.append(Finding(Severity.ERROR, Check.SNAPSHOT, snap.path,
                               f"offset {snap.offset} is not where a batch starts: no writer takes a snapshot "
                               "there", offset=snap.offset))
    return out
