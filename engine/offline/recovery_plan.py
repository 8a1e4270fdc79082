"""The recovery plan: what opening a directory would recover, computed without changing anything.

``seglog recover --dry-run`` prints it. The loader (``engine/loader.py``, issue
18's second part) replaces this module with the one plan the open itself
follows; until then this is the read-only copy of the open's rules, on the
segment reader and the engine's listing like every offline read.

Must not import: ``tools``; nor ``seglog.engine.engine`` / ``seglog.engine.log``.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from seglog.engine._fs import CLEAN_SHUTDOWN_FILE
from seglog.engine.checkpoints import RECOVERY_POINT_CHECKPOINT
from seglog.engine.errors import StorageError
from seglog.engine.offline.listing import (
    SegmentInfo,
    TopicMeta,
    list_segments,
    partition_dirs,
    read_checkpoint,
    read_topic_file,
)
from seglog.engine.offline.segment_scan import TailKind, log_end_offset_of, scan_segment
from seglog.engine.offline.verify import VerifyProgress, total_log_bytes
from seglog.segments.files import INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, list_partition_dir

__all__ = ["PartitionRecoveryPlan", "RecoveryPlan", "SegmentRecovery", "plan_recovery"]


@dataclass(frozen=True, slots=True)
class SegmentRecovery:
    """What recovery would do to one segment.

    ``action`` is ``"keep"`` (valid to the end: only its indexes are rebuilt),
    ``"truncate"`` (cut at ``truncate_to``, then rebuild its indexes) or
    ``"delete"`` (it follows a truncated segment, so its offsets would no
    longer follow on: Kafka deletes such segments too).
    """

    base_offset: int
    path: Path
    file_bytes: int
    valid_bytes: int
    batches: int
    next_offset: int
    action: str
    truncate_to: int | None
    reason: str
    rebuilt_indexes: list[str]

    @property
    def truncated_bytes(self) -> int:
        return self.file_bytes - self.valid_bytes if self.action != "delete" else self.file_bytes


@dataclass(frozen=True, slots=True)
class PartitionRecoveryPlan:
    """Recovery of one partition: the recovery point, each segment it would scan, the files it would remove."""

    topic: str
    partition: int
    recovery_point: int
    segments_before: int  # segments below the recovery point that are not scanned
    segments: list[SegmentRecovery]
    log_end_offset_after: int
    removed_files: list[Path] = field(default_factory=list)  # leftovers and orphan index files


@dataclass(frozen=True, slots=True)
class RecoveryPlan:
    """What opening the directory would recover, computed without changing anything."""

    path: Path
    clean_shutdown: bool
    forced: bool
    recovery_checkpoint_problem: str | None
    partitions: list[PartitionRecoveryPlan]

    @property
    def will_recover(self) -> bool:
        """Whether the open would scan any segment or remove any file."""
        return any(p.segments or p.removed_files for p in self.partitions)

    @property
    def bytes_truncated(self) -> int:
        return sum(s.truncated_bytes for p in self.partitions for s in p.segments)

    @property
    def segments_to_recover(self) -> int:
        return sum(len(p.segments) for p in self.partitions)


def _removed_at_open(directory: Path) -> list[Path]:
    # What the engine's open removes: leftovers of interrupted work and index files without a .log.
    return [directory / name for name in sorted(list_partition_dir(directory).removable)]


def _recover_segment(seg: SegmentInfo, meta: TopicMeta, *, why_scanned: str) -> SegmentRecovery:
    scan = scan_segment(seg.log_path, max_batch_bytes=meta.max_batch_bytes, base_offset=seg.base_offset)
    rebuilt = [seg.sibling(INDEX_SUFFIX).name, seg.sibling(TIME_INDEX_SUFFIX).name]
    if seg.txn_index_bytes is not None:
        rebuilt.append(seg.sibling(TXN_INDEX_SUFFIX).name)
    if scan.tail is None:
        return SegmentRecovery(seg.base_offset, seg.log_path, scan.file_bytes, scan.valid_bytes, scan.batch_count,
                               scan.next_offset, "keep", None, f"{why_scanned}; every batch is valid", rebuilt)
    kind = {TailKind.ZEROS: "preallocated zero bytes", TailKind.INCOMPLETE: "torn write",
            TailKind.CORRUPT: "invalid batch"}[scan.tail]
    return SegmentRecovery(seg.base_offset, seg.log_path, scan.file_bytes, scan.valid_bytes, scan.batch_count,
                           scan.next_offset, "truncate", scan.valid_bytes,
                           f"{why_scanned}; {kind} at position {scan.valid_bytes}: {scan.reason}", rebuilt)


def plan_recovery(
    log_dir: str | os.PathLike[str],
    *,
    force: bool = False,
    on_progress: Callable[[VerifyProgress], None] | None = None,
) -> RecoveryPlan:
    """Say what ``Engine.open`` would recover (with ``force_recovery=force``), changing nothing.

    The engine's rules (after Kafka's LogLoader): leftovers of interrupted work
    (``.deleted``, ``.cleaned``, ``.swap``, ``.tmp``) and index files without a
    ``.log`` are removed; a segment missing its ``.index`` or ``.timeindex`` is
    recovered even after a clean shutdown; after an unclean stop (no
    ``.clean-shutdown`` marker), or when forced, every segment from the one
    holding the checkpointed recovery point (0 when the checkpoint is missing or
    unreadable) to the end is recovered. Recovering a segment scans it, cuts it
    after its last valid batch and rebuilds its indexes; when a segment after
    the recovery point is cut, the segments after it are deleted. After a clean
    shutdown whose marker holds a record, the engine does the clean-up and the
    rebuild of missing indexes of a partition at that partition's first use
    rather than at open (docs/OPERATIONS.md §3); the plan is the same.

    Raises:
        StorageError: the directory is missing or unreadable.
    """
    root = Path(log_dir)
    if not root.is_dir():
        raise StorageError(f"{root}: no such log directory")
    clean = (root / CLEAN_SHUTDOWN_FILE).exists()
    unclean_open = force or not clean
    points, problem = read_checkpoint(root, RECOVERY_POINT_CHECKPOINT)
    plans: list[PartitionRecoveryPlan] = []
    dirs = partition_dirs(root)
    done, total = 0, total_log_bytes([d for _, d in dirs])
    for key, directory in dirs:
        meta = read_topic_file(directory)
        segments = list_segments(directory)
        point = (points or {}).get(key, 0)
        # The segment holding the recovery point and every later one (Kafka's logSegments(rp, MAX)).
        first = max(0, bisect_right([s.base_offset for s in segments], point) - 1) if unclean_open else len(segments)
        actions: list[SegmentRecovery] = []
        end = log_end_offset_of(segments[-1], meta.max_batch_bytes)[0] if segments else 0
        cut_at: int | None = None
        for i, seg in enumerate(segments):
            unclean = i >= first
            missing = seg.index_bytes is None or seg.time_index_bytes is None
            if cut_at is not None:
                actions.append(SegmentRecovery(seg.base_offset, seg.log_path, seg.size_bytes, 0, 0, seg.base_offset,
                                               "delete", None, f"follows segment {cut_at}, which was cut", []))
                continue
            if not unclean and not missing:
                continue
            why = "after the recovery point" if unclean else "an index file is missing"
            action = _recover_segment(seg, meta, why_scanned=why)
            actions.append(action)
            done += seg.size_bytes
            if on_progress is not None:
                on_progress(VerifyProgress(done, total, seg.log_path))
            if action.action == "truncate" and unclean:
                cut_at = seg.base_offset
                end = action.next_offset
            elif seg.next_base_offset is None:
                end = action.next_offset
        plans.append(PartitionRecoveryPlan(key[0], key[1], point, min(first, len(segments)), actions, end,
                                           _removed_at_open(directory)))
    return RecoveryPlan(root, clean, force, problem, plans)
