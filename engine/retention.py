"""Which segments retention deletes: a pure decision over segment summaries.

Kafka's rules (``UnifiedLog.deleteOldSegments`` / ``deletableSegments``), in the
same order and with the same arithmetic:

1. **time** — a segment whose largest record timestamp is more than
   ``retention_ms`` before now (``now - largest_timestamp > retention_ms``);
2. **size** — the oldest segments while the partition is still at least a
   whole segment over ``retention_bytes`` (``excess - segment.size >= 0``);
3. **log start** — a segment whose every offset is below the log start offset
   (after ``delete_records_before``).

Walking from the oldest segment, deletion stops at the first segment the rule
keeps, at the first segment not wholly below the high watermark, and at an
empty active segment. If every segment goes, the active one is rolled first so
that the partition always keeps a (fresh, empty) segment — data is never
deleted by removing the last segment's file.

Must not import: ``tools``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["RetentionPlan", "SegmentSummary", "plan_retention"]

Reason = Literal["retention.ms", "retention.bytes", "log-start-offset"]
# (segment, upper bound offset = next segment's base or the log end) -> delete it?
_Predicate = Callable[["SegmentSummary", int], bool]


@dataclass(frozen=True, slots=True)
class SegmentSummary:
    """What retention needs to know of one segment, oldest first."""

    base_offset: int
    size_bytes: int
    largest_timestamp_ms: int
    """Largest record timestamp, or the file's mtime when it holds no timestamp (Kafka)."""


@dataclass(frozen=True, slots=True)
class RetentionPlan:
    """Segments to delete (oldest first), why, and whether to roll the active segment first."""

    delete: tuple[int, ...]
    reason: Reason | None
    roll_first: bool

    @property
    def empty(self) -> bool:
        return not self.delete


def plan_retention(
    segments: Sequence[SegmentSummary],
    *,
    log_end_offset: int,
    high_watermark: int,
    log_start_offset: int,
    now_ms: int,
    retention_ms: int,
    retention_bytes: int,
) -> RetentionPlan:
    """Decide one retention pass over a partition's segments (oldest first; the last is active)."""
    if not segments:
        return RetentionPlan((), None, False)
    plans: list[tuple[Reason, list[int]]] = []
    if retention_ms >= 0:
        plans.append(
            (
                "retention.ms",
                _walk(segments, log_end_offset, high_watermark,
                      lambda s, _upper: now_ms - s.largest_timestamp_ms > retention_ms),
            )
        )
    if retention_bytes >= 0:
        excess = [sum(s.size_bytes for s in segments) - retention_bytes]

        def over_size(segment: SegmentSummary, _upper: int) -> bool:
            if excess[0] - segment.size_bytes >= 0:
                excess[0] -= segment.size_bytes
                return True
            return False

        plans.append(("retention.bytes", _walk(segments, log_end_offset, high_watermark, over_size)))
    plans.append(
        ("log-start-offset",
         _walk(segments, log_end_offset, high_watermark, lambda _s, upper: upper <= log_start_offset))
    )
    # Kafka runs the three passes one after another; each deletes a prefix of the
    # segments, so the longest prefix is what all three together delete.
    reason, chosen = max(plans, key=lambda plan: len(plan[1]))
    if not chosen:
        return RetentionPlan((), None, False)
    return RetentionPlan(tuple(chosen), reason, roll_first=len(chosen) == len(segments))


def _walk(
    segments: Sequence[SegmentSummary], log_end_offset: int, high_watermark: int, predicate: _Predicate
) -> list[int]:
    chosen: list[int] = []
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        upper = log_end_offset if last else segments[i + 1].base_offset
        if high_watermark < upper or (last and segment.size_bytes == 0) or not predicate(segment, upper):
            break
        chosen.append(segment.base_offset)
    return chosen
