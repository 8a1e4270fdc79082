"""Opening a partition: what is listed, what is trusted when, what recovery does -- and the plan of it.

Owns seglog's ``LogLoader`` (Kafka's class of that name): the one path from a
partition directory to the segments a ``PartitionLog`` serves, taken by
``Engine.open`` (every partition after an unclean stop), by a partition's
first use after a clean stop, by a read-only follower, and -- reading only --
by ``seglog recover --dry-run`` (:func:`dry_run_recovery`).

The rules are pure: :func:`plan_recovery` takes what was listed and read (the
partition's :class:`PartitionFacts`, the checkpoints' entries, the
clean-shutdown record) and says which segments are recovered and why;
:class:`RecoveryWalk` takes what each scan found and says what becomes of each
segment (recovered, cut, set aside, deleted); :func:`settle_log_start` says
where the log starts. Two short drivers feed them the same facts -- the open
(:func:`load_partition`, which changes files) and the dry run (which reads
only) -- so the plan a dry run shows is what the open does (a property test
holds them to it). docs/OPERATIONS.md §3 and docs/ARCHITECTURE.md say the
rules in prose: what is trusted when, the chain of segments, the log start.

Concurrency: the blocking parts (listing, opening files) run in executor
threads, one hop per chunk of partitions; the rest on the event loop. A
partition being loaded is owned by its loader until it is handed over.

Must not import: ``tools``, ``engine.engine``, ``engine.follow``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import logging
import time
from bisect import bisect_right
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from seglog.engine import _fs
from seglog.engine.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    ClosedPartition,
    parse_checkpoint,
    parse_clean_shutdown,
)
from seglog.engine.config import LogConfig
from seglog.engine.errors import (
    CorruptionError,
    CorruptRecordError,
    UnknownTopicOrPartitionError,
)
from seglog.engine.log import LoadedLog, LogOwner, PartitionLog, Unopened, close_segments, new_segment, segment_read
from seglog.engine.names import aside_dir_name, is_aside_dir_of, partition_dir_name
from seglog.engine.offline.segment_scan import scan_segment
from seglog.engine.offline.snapshots import dump_snapshot, list_snapshots
from seglog.engine.producer_state import plan_snapshot_load
from seglog.engine.topics import TopicState, parse_topic_file
from seglog.segments.batch import BatchHeader
from seglog.segments.fileio import WOULD_BLOCK, in_thread, remove, run_to_completion
from seglog.segments.files import (
    INDEX_SUFFIX,
    STRAY_SUFFIX,
    TIME_INDEX_SUFFIX,
    list_partition_dir,
    remove_leftovers_sync,
    snapshot_file_name,
)
from seglog.segments.segment import LogSegment, LogSegments

__all__ = [
    "LOAD_CHUNK",
    "LOAD_CHUNKS_IN_FLIGHT",
    "DiskSegment",
    "LogDirLoad",
    "OpenedFiles",
    "PartitionFacts",
    "PartitionPlan",
    "PartitionRecovery",
    "RecoveryPlan",
    "RecoveryProgress",
    "RecoveryWalk",
    "SegmentAction",
    "SegmentRecovery",
    "check_clean_record",
    "close_opened",
    "dry_run_recovery",
    "load_log_dir",
    "load_partition",
    "open_files_in_chunk",
    "open_partition_files_sync",
    "open_unopened",
    "parse_checkpoint_file",
    "plan_recovery",
    "settle_log_start",
    "topic_of",
    "with_first_batches",
]

log = logging.getLogger("seglog")

# Partitions whose files one executor hop opens at Engine.open, and such hops in flight. A hop costs a
# good part of what opening one partition's files does, and threads opening files concurrently mostly
# fight over the GIL (one-partition hops in flight made the open of a large directory ~3x slower). One
# chunk at a time: with two in flight the next chunk's thread contended with this chunk's loop work for
# the GIL and the open got slower (docs/PERFORMANCE.md, "Measurements behind the code").
LOAD_CHUNK: Final = 64
LOAD_CHUNKS_IN_FLIGHT: Final = 1


# =============================================================================================
# What was listed and read
# =============================================================================================


@dataclass(frozen=True, slots=True)
class DiskSegment:
    """One segment as the listing shows it: base offset (its file name), ``.log`` bytes, which indexes exist."""

    base_offset: int
    size_bytes: int
    has_offset_index: bool
    has_time_index: bool


@dataclass(frozen=True, slots=True)
class PartitionFacts:
    """What opening a partition's files found, before anything is recovered: all the plan is made of.

    ``removed_files``: leftovers of interrupted work and index files without a
    ``.log``, which a writable open removes. ``active_next_offset``: the active
    segment's log end, read after a clean stop (``None`` when not read, or when
    the segment did not parse to its end: ``active_problem`` says why).
    ``first_batches``: after an unclean stop, the base offset of each segment's
    first batch (``None``: empty, or no plausible header) -- one short read per
    segment, so that a segment in the wrong place is found even below the
    recovery point; empty when not read.
    """

    segments: tuple[DiskSegment, ...]
    removed_files: tuple[str, ...] = ()
    active_next_offset: int | None = None
    active_problem: str | None = None
    first_batches: tuple[int | None, ...] = ()

    @property
    def base_offsets(self) -> list[int]:
        return [s.base_offset for s in self.segments]


# =============================================================================================
# The plan: which segments are recovered, and why
# =============================================================================================


def check_clean_record(record: ClosedPartition, facts: PartitionFacts) -> tuple[int, str] | None:
    """Where the clean-shutdown record disagrees with the files: (index of the first segment in doubt, why).

    ``None`` when the listing has the recorded base offsets and ``.log`` sizes
    (a version 1 record has only their sum) and the active segment ends where
    the record says. Comparing costs nothing the open does not do anyway.
    """
    listed = facts.base_offsets
    recorded = list(record.base_offsets)
    if listed != recorded:
        first = next((i for i, (a, b) in enumerate(zip(listed, recorded, strict=False)) if a != b),
                     min(len(listed), len(recorded)))
        return first, f"it lists segments {_short(recorded)}, the directory holds {_short(listed)}"
    sizes = [s.size_bytes for s in facts.segments]
    if record.segment_bytes is not None:
        for i, (have, want) in enumerate(zip(sizes, record.segment_bytes, strict=True)):
            if have != want:
                return i, f"segment {listed[i]} holds {have} bytes, the record says {want}"
    elif sum(sizes) != record.size_bytes:
        return 0, f"the segments hold {sum(sizes)} bytes, the record says {record.size_bytes}"
    end = facts.active_next_offset
    if end is not None and end != record.log_end_offset:
        return len(listed) - 1, f"the log ends at {end}, the record says {record.log_end_offset}"
    return None


def _short(offsets: Sequence[int], limit: int = 8) -> str:
    if len(offsets) <= limit:
        return str(list(offsets))
    return f"[{', '.join(map(str, offsets[: limit // 2]))}, ..., {', '.join(map(str, offsets[-limit // 2 :]))}]"


@dataclass(frozen=True, slots=True)
class PartitionPlan:
    """Which segments recovery scans, and why: decided from the listing alone (:func:`plan_recovery`).

    Every segment from ``unclean_from`` (an index into ``facts.segments``) on is
    recovered as after an unclean stop; the segments of ``rebuilt`` (index ->
    why) are scanned wherever they are. The rest are trusted -- unless a scan
    finds that the segments do not chain there (:class:`RecoveryWalk`).
    """

    facts: PartitionFacts
    recovery_point: int
    unclean_from: int
    unclean_why: str
    rebuilt: tuple[tuple[int, str], ...]
    record_problem: str | None

    @property
    def removed_files(self) -> tuple[str, ...]:
        return self.facts.removed_files

    @property
    def scans_anything(self) -> bool:
        return self.unclean_from < len(self.facts.segments) or bool(self.rebuilt)

    def why_scanned(self, index: int) -> str | None:
        if index >= self.unclean_from:
            return self.unclean_why
        return next((why for i, why in self.rebuilt if i == index), None)


def plan_recovery(
    facts: PartitionFacts,
    *,
    unclean: bool,
    recovery_point: int | None,
    record: ClosedPartition | None = None,
) -> PartitionPlan:
    """Say which segments of one partition recovery scans, from what was listed and read. Pure.

    The rules (after Kafka's LogLoader): after an unclean stop (``unclean``;
    also a forced recovery), every segment from the one holding the recovery
    point (``None``: no checkpoint entry, so 0) to the end. After a clean stop,
    the clean-shutdown ``record`` is checked against the files first: where
    they disagree, the partition is recovered as after an unclean stop from the
    segment before the first one in doubt (whose end must meet the next
    segment's base offset). Anywhere, a segment missing its ``.index`` or
    ``.timeindex`` has its indexes rebuilt, and an active segment that does not
    parse to its end is recovered.
    """
    segments = facts.segments
    point = 0 if recovery_point is None else recovery_point
    unclean_from = len(segments)
    why = ""
    if unclean:
        unclean_from = max(0, bisect_right(facts.base_offsets, point) - 1)
        why = f"at or after the recovery point {point}" if recovery_point is not None else "no recovery point"
    problem = None
    if record is not None and not unclean:
        found = check_clean_record(record, facts)
        if found is not None:
            first, problem = found
            unclean_from = min(unclean_from, max(first - 1, 0))
            why = f"the clean-shutdown record does not match the files ({problem})"
    rebuilt: list[tuple[int, str]] = []
    for i, segment in enumerate(segments[:unclean_from]):
        missing = [name for name, has in ((INDEX_SUFFIX, segment.has_offset_index),
                                          (TIME_INDEX_SUFFIX, segment.has_time_index)) if not has]
        if missing:
            rebuilt.append((i, f"its {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing"))
        elif i == len(segments) - 1 and facts.active_problem is not None:
            rebuilt.append((i, f"the active segment does not parse to its end ({facts.active_problem})"))
    return PartitionPlan(facts, point, unclean_from, why, tuple(rebuilt), problem)


# =============================================================================================
# The walk: what becomes of each segment, as the scans come in
# =============================================================================================


class SegmentAction(enum.StrEnum):
    """What recovery does to a segment it looks at."""

    KEEP = "keep"  # scanned: every batch valid; its indexes rebuilt
    TRUNCATE = "truncate"  # scanned: cut after its last valid batch; its indexes rebuilt
    SET_ASIDE = "set-aside"  # does not chain with the log: its files renamed *.<ms>.stray, never served
    DELETE = "delete"  # follows a segment cut after an unclean stop (Kafka's rule)


@dataclass(frozen=True, slots=True)
class SegmentRecovery:
    """What recovery does (or, in a dry run, would do) to one segment, and why."""

    base_offset: int
    action: SegmentAction
    reason: str
    file_bytes: int
    valid_bytes: int  # kept (0 for a segment set aside or deleted)
    next_offset: int | None  # one past its last offset after recovery (None: not scanned)

    @property
    def truncated_bytes(self) -> int:
        """Bytes cut off (a truncation) or taken out of the log (set aside, deleted)."""
        return self.file_bytes - self.valid_bytes


@dataclass(frozen=True, slots=True)
class SnapshotRemoval:
    """A producer-state snapshot file the open deletes (or, in a dry run, would delete), and why."""

    name: str
    reason: str


@dataclass(frozen=True, slots=True)
class PartitionRecovery:
    """What recovery does to one partition: its plan, each segment looked at, the offsets it ends with."""

    topic: str
    partition: int
    plan: PartitionPlan
    segments: tuple[SegmentRecovery, ...]
    log_start_offset: int
    log_end_offset: int
    new_segment_at: int | None  # no segment is left: an empty one starts here
    notes: tuple[str, ...] = ()  # what a loaded log warns about (a checkpoint clamped, a record disbelieved)
    # Snapshots deleted: by the open (past the recovered log end); a dry run adds those the first load of
    # the producer state deletes (of no use, or not reading back), as it would find them.
    removed_snapshots: tuple[SnapshotRemoval, ...] = ()

    def segment_bases_after(self) -> list[int]:
        """The base offsets of the segments the partition has after this recovery."""
        gone = {s.base_offset for s in self.segments if s.action in (SegmentAction.SET_ASIDE, SegmentAction.DELETE)}
        bases = [s.base_offset for s in self.plan.facts.segments if s.base_offset not in gone]
        if self.new_segment_at is not None:
            bases.append(self.new_segment_at)
        return bases

    @property
    def changes_anything(self) -> bool:
        return bool(self.segments or self.plan.removed_files or self.new_segment_at is not None)

    @property
    def bytes_scanned(self) -> int:
        return sum(s.file_bytes for s in self.segments if s.next_offset is not None)

    @property
    def bytes_truncated(self) -> int:
        return sum(s.truncated_bytes for s in self.segments)


class RecoveryWalk:
    """The decisions of recovery over one partition's segments, in order, as the scans come in. Pure.

    The segments of a log chain: each begins where the previous one ends, and
    its first batch has the base offset its file name says. The walk holds them
    to it wherever it looks (the segments the plan scans, and from the first
    break on every later one), and keeps the chain of what it keeps:

    * a segment whose first batch has another base offset is in the wrong
      place (swapped, renamed, copied): it is set aside whole, never cut, and
      the log goes on where the segment before it ends;
    * a segment that begins below where the log so far ends overlaps it (a
      duplicate): it alone is set aside;
    * a segment that begins above it leaves a gap (a segment is missing): it
      and every later one are set aside, and the log ends at the gap -- unless
      no record is kept before the gap (the first segments were emptied): the
      empty segments are deleted then, and the log starts after the gap;
    * a segment cut after an unclean stop is followed by nothing: the later
      segments are deleted (Kafka's rule: their offsets would no longer
      follow on);
    * a segment nobody scans is trusted to end where the next one begins.

    Driving it: ``while (i := walk.next()) is not None``, read the base offset
    of segment ``i``'s first batch (and, when :meth:`needs_previous_end` says so, the
    previous segment's next offset) and pass it to :meth:`first_batch`; when
    that returns True, scan (recover) the segment and pass what the scan found
    to :meth:`scanned`. Then :meth:`finish`, with the last kept segment's next
    offset when :meth:`last_kept` does not know it.
    """

    def __init__(self, plan: PartitionPlan) -> None:
        self.plan = plan
        self._segments = plan.facts.segments
        self._index_of = {s.base_offset: i for i, s in enumerate(self._segments)}
        self._i = 0
        self._expected: int | None = None  # where the next kept segment must begin (None: trust its name)
        self._cut_at: int | None = None  # base offset of a segment cut in the unclean part
        self._broken: str | None = None  # why every later segment is looked at (a break of the chain)
        self._done: list[SegmentRecovery] = []
        self._kept_ends: dict[int, int] = {}  # index -> next offset of the kept segments scanned
        self._holds_records = False  # whether a segment kept so far holds (or, trusted, may hold) a record

    def next(self) -> int | None:
        """The index of the next segment to look at (None: done); decides those that need no look."""
        while self._i < len(self._segments):
            i = self._i
            segment = self._segments[i]
            if self._cut_at is not None:
                self._done.append(SegmentRecovery(segment.base_offset, SegmentAction.DELETE,
                                                  f"follows segment {self._cut_at}, which was cut",
                                                  segment.size_bytes, 0, None))
                self._i += 1
                continue
            probed = self.plan.facts.first_batches
            looked_at = (self.plan.why_scanned(i) is not None or self._broken is not None
                         or (self._expected is not None and segment.base_offset != self._expected)
                         or (bool(probed) and probed[i] is not None and probed[i] != segment.base_offset))
            if looked_at:
                return i
            self._expected = None  # trusted, not scanned: the next segment's name says where it ends
            self._holds_records = True
            self._i += 1
        return None

    def needs_previous_end(self, index: int, first_offset: int | None) -> bool:
        """Whether :meth:`first_batch` needs the next offset of the segment before ``index`` (read it, pass it).

        Only when segment ``index`` is in the wrong place and the one before it
        was trusted: its end says where the log goes on (a segment swapped with
        another leaves its offsets missing; one copied or renamed in between
        leaves none).
        """
        base = self._segments[index].base_offset
        previous_trusted = index > 0 and all(d.base_offset != self._segments[index - 1].base_offset
                                             for d in self._done)
        return previous_trusted and self._expected is None and first_offset is not None and first_offset != base

    def first_batch(self, index: int, first_offset: int | None, *, previous_end: int | None = None) -> bool:
        """Whether to scan segment ``index``, given its first batch's base offset (None: empty, or no header)."""
        assert index == self._i
        segment = self._segments[index]
        base, expected = segment.base_offset, self._expected
        reason = None
        if expected is not None and base < expected:
            reason = f"begins at {base}, inside the offsets the log already holds below {expected} (a copy?)"
        elif expected is not None and base > expected and not self._holds_records:
            self._drop_empty_head(base)
            expected = self._expected
        elif expected is not None and base > expected:
            reason = f"begins at {base}, but the log ends at {expected}: offsets {expected}..{base - 1} are missing"
        if reason is None and first_offset is not None and first_offset != base:
            reason = (f"its first batch has base offset {first_offset}, not the {base} of its name "
                      "(a segment in the wrong place)")
            if self._expected is None:  # the log goes on where the segment before it ends (or, unknown, here)
                self._expected = previous_end if previous_end is not None else base
        if reason is None:
            return True
        self._done.append(SegmentRecovery(base, SegmentAction.SET_ASIDE, reason, segment.size_bytes, 0, None))
        self._broken = self._broken or f"segment {base} was set aside"
        self._i += 1
        return False

    def scanned(self, index: int, *, valid_bytes: int, next_offset: int) -> None:
        """What the scan of segment ``index`` found: its valid bytes and the offset after its last batch."""
        assert index == self._i
        segment = self._segments[index]
        why = self.plan.why_scanned(index) or f"it follows a break of the chain ({self._broken})"
        unclean = index >= self.plan.unclean_from or self._broken is not None
        if valid_bytes < segment.size_bytes:
            action, why = SegmentAction.TRUNCATE, f"{why}; a torn or invalid batch at position {valid_bytes}"
            if unclean:
                self._cut_at = segment.base_offset
        else:
            action = SegmentAction.KEEP
        self._done.append(SegmentRecovery(segment.base_offset, action, why, segment.size_bytes, valid_bytes,
                                          next_offset))
        self._kept_ends[index] = next_offset
        self._holds_records = self._holds_records or next_offset > segment.base_offset
        self._expected = next_offset
        self._i += 1

    def _drop_empty_head(self, base: int) -> None:
        # Every segment kept so far was scanned and holds no record: the log begins at ``base``.
        for n, done in enumerate(self._done):
            if done.action in (SegmentAction.KEEP, SegmentAction.TRUNCATE):
                self._done[n] = SegmentRecovery(done.base_offset, SegmentAction.DELETE,
                                                f"holds no record, and the log's first records begin at {base}",
                                                done.file_bytes, 0, None)
                self._kept_ends.pop(self._index_of[done.base_offset], None)
        self._expected = None

    def _kept(self) -> list[int]:
        gone = {s.base_offset for s in self._done if s.action in (SegmentAction.SET_ASIDE, SegmentAction.DELETE)}
        return [i for i, s in enumerate(self._segments) if s.base_offset not in gone]

    def last_kept(self) -> tuple[int, int | None] | None:
        """The index of the last segment kept and its next offset when a scan (or the open) knows it."""
        kept = self._kept()
        if not kept:
            return None
        last = kept[-1]
        if last in self._kept_ends:
            return last, self._kept_ends[last]
        if last == len(self._segments) - 1:
            return last, self.plan.facts.active_next_offset
        return last, None

    def finish(self, *, topic: str, partition: int, log_start_checkpoint: int | None,
               last_end: int | None) -> PartitionRecovery:
        """The recovery of the partition; ``last_end``: the last kept segment's next offset (see :meth:`last_kept`)."""
        assert self.next() is None, "finish() before the walk is done"
        kept = self.last_kept()
        notes: list[str] = []
        if self.plan.record_problem is not None:
            since = self._segments[self.plan.unclean_from].base_offset if self._segments else 0
            notes.append(f"the clean-shutdown record does not match the files ({self.plan.record_problem}); "
                         f"the files win: recovered as after an unclean stop from segment {since}")
        new_segment_at = None
        if kept is None:
            # Nothing left: an empty segment where the log ended (set aside or not), so that no offset
            # the log ever gave is given again; else where the log-start checkpoint says.
            end = self._expected if self._expected is not None else max(log_start_checkpoint or 0, 0)
            new_segment_at = end
            first = end
        else:
            index, known = kept
            found = known if known is not None else last_end
            if found is None:
                raise ValueError(f"the end of segment {self._segments[index].base_offset} is needed to finish")
            end = found
            first = self._segments[self._kept()[0]].base_offset
        start, note = settle_log_start(log_start_checkpoint, first, end)
        if note is not None:
            notes.append(note)
        return PartitionRecovery(topic, partition, self.plan, tuple(self._done), start, end, new_segment_at,
                                 tuple(notes))


def settle_log_start(checkpoint: int | None, first_base_offset: int, log_end_offset: int) -> tuple[int, str | None]:
    """The log start offset from the checkpoint's entry and the files; and a warning when the entry is not believed.

    Kafka's LogLoader: ``max(checkpoint, first segment's base offset)`` -- an
    entry below the first segment is what a retention pass that deleted
    segments and was stopped before the checkpoint leaves, and is raised
    quietly. An entry above the log end cannot describe these files (segments
    were lost, or the file lies): Kafka then deletes every segment and starts
    the log at the entry; seglog deletes nothing, and starts the log at its end
    -- records below a start that was checkpointed stay hidden, as they were,
    and are still on disk for an operator (warned).
    """
    if checkpoint is None or checkpoint <= first_base_offset:
        return min(first_base_offset, log_end_offset), None
    if checkpoint > log_end_offset:
        return log_end_offset, (f"the log-start checkpoint {checkpoint} is above the log end {log_end_offset}: "
                                f"the log starts at its end (records {first_base_offset}..{log_end_offset - 1} "
                                "stay on disk, unread)")
    return checkpoint, None


# =============================================================================================
# Opening the files (blocking: in executor threads)
# =============================================================================================


@dataclass(slots=True)
class OpenedFiles:
    """One partition's opened segments and the facts they were opened from."""

    segments: list[LogSegment]
    facts: PartitionFacts


def open_partition_files_sync(
    directory: Path,
    config: LogConfig,
    now_ms: int,
    *,
    writable: bool,
    read_active_end: bool,
    probe_first_batches: bool = False,
    on_active: Callable[[LogSegment, LogConfig], None] | None = None,
) -> OpenedFiles:
    """List a partition directory, remove its leftovers (``writable``) and open every segment (blocking).

    A sealed segment's ``.log`` is only ``stat``-ed (its first read opens it);
    the active one is opened and its first batch read (time-based rolling).
    With ``read_active_end`` (after a clean stop) the active segment's log end
    is read too, from its offset index and a short walk; a segment that does
    not parse to its end is noted, not raised. With ``probe_first_batches``
    (after an unclean stop) each segment's first batch header is read (a
    sealed segment's descriptor is opened for that read only). ``on_active`` is
    called with the active segment (a read-only follower starts following it).
    On failure whatever was opened is closed.

    Raises:
        StorageError: the directory cannot be listed, a leftover not removed, a ``.log`` not opened.
    """
    listing = list_partition_dir(directory)
    if writable:
        remove_leftovers_sync(listing)
    listed = listing.segments
    opened: list[LogSegment] = []
    try:
        for i, entry in enumerate(listed):
            opened.append(
                LogSegment.open(
                    directory,
                    entry.base_offset,
                    max_index_size=config.segment_index_bytes,
                    index_interval_bytes=config.index_interval_bytes,
                    roll_jitter_ms=config.random_segment_jitter(),
                    now_ms=now_ms,
                    file_already_exists=True,
                    writable=writable,
                    index_files_existed=(entry.has_offset_index, entry.has_time_index),
                    read_first_batch=i == len(listed) - 1,  # only the active segment rolls
                    # A sealed segment's descriptor is opened by its first read: 1000 partitions x 10
                    # segments hold ~2,000 descriptors after open (active .log + .timeindex), not ~11,000.
                    defer_open=i < len(listed) - 1,
                )
            )
        end = problem = None
        firsts = _first_batches(opened) if probe_first_batches else ()
        if opened and on_active is not None:
            on_active(opened[-1], config)
        elif opened and read_active_end and listed[-1].has_offset_index and listed[-1].has_time_index:
            try:
                end = _next_offset(opened[-1])
            except CorruptRecordError as exc:
                problem = str(exc)
    except BaseException:
        close_opened([opened])
        raise
    facts = PartitionFacts(
        tuple(DiskSegment(e.base_offset, s.size, e.has_offset_index, e.has_time_index)
              for e, s in zip(listed, opened, strict=True)),
        listing.removable,
        end,
        problem,
        firsts,
    )
    return OpenedFiles(opened, facts)


def _first_batches(segments: Sequence[LogSegment]) -> tuple[int | None, ...]:
    return tuple(_base_offset_of(s.first_batch()) for s in segments)


def _base_offset_of(header: BatchHeader | None) -> int | None:
    return None if header is None else header.base_offset


def with_first_batches(opened: OpenedFiles) -> PartitionFacts:
    """``opened``'s facts with each segment's first batch read (blocking; see ``PartitionFacts.first_batches``)."""
    return dataclasses.replace(opened.facts, first_batches=_first_batches(opened.segments))


def close_opened(results: Sequence[OpenedFiles | list[LogSegment] | BaseException]) -> None:
    """Release the files of partitions opened by :func:`open_partition_files_sync`, writing nothing (blocking)."""
    for result in results:
        segments = result.segments if isinstance(result, OpenedFiles) else result
        if isinstance(segments, list):
            for segment in segments:
                with contextlib.suppress(Exception):
                    segment.close_handlers()


async def open_files_in_chunk(
    jobs: Sequence[tuple[Path, LogConfig]],
    now_ms: int,
    *,
    writable: bool,
    read_active_end: bool,
    probe_first_batches: bool = False,
    on_active: Callable[[LogSegment, LogConfig], None] | None = None,
) -> list[OpenedFiles | BaseException]:
    """Open the files of every partition of ``jobs`` (directory, config) in ONE executor hop.

    Per partition: what it opened, or the exception that stopped it (the
    others still open). If this task is cancelled, the thread's work is awaited
    and everything it opened closed.
    """

    def open_all() -> list[OpenedFiles | BaseException]:
        results: list[OpenedFiles | BaseException] = []
        for directory, config in jobs:
            try:
                results.append(open_partition_files_sync(
                    directory, config, now_ms, writable=writable, read_active_end=read_active_end,
                    probe_first_batches=probe_first_batches, on_active=on_active,
                ))
            except Exception as exc:  # reported for this partition; the others of the chunk still open
                results.append(exc)
        return results

    job = asyncio.ensure_future(in_thread(open_all))
    try:
        return await asyncio.shield(job)
    except asyncio.CancelledError:
        # The thread goes on opening files after a cancellation: release what it opened.
        with contextlib.suppress(BaseException):
            await in_thread(close_opened, await job)
        raise


# =============================================================================================
# Loading a partition (the open's driver of the walk)
# =============================================================================================


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


async def load_partition(
    directory: Path,
    config: LogConfig,
    opened: OpenedFiles,
    *,
    topic: str,
    partition: int,
    unclean: bool,
    recovery_point: int | None,
    log_start_checkpoint: int | None,
    record: ClosedPartition | None = None,
    read_only: bool = False,
    now_ms: int,
) -> tuple[LoadedLog, PartitionRecovery]:
    """Recover (as :func:`plan_recovery` and :class:`RecoveryWalk` say) one partition's opened files.

    Recovered sealed segments are durable before this returns (fsynced,
    closed and opened again as a clean open opens them, holding no
    descriptor); a recovered active segment is not synced (Kafka's rule): the
    recovery point handed over stays at or below its base offset, so the
    partition's next flush syncs it and a crash before that recovers it
    again. A read-only open recovers nothing and trusts the files (a writer
    may be appending to them). Takes ownership of ``opened``: on failure
    every segment of it is closed.

    Raises:
        UnknownTopicOrPartitionError: read-only, and the directory holds no segment.
        StorageError, SegmentOffsetOverflowError: from the files.
    """
    segments: LogSegments[LogSegment] = LogSegments()
    for segment in opened.segments:
        segments.add(segment)
    name = f"{topic}-{partition}"
    try:
        if read_only:
            active = segments.active_segment
            if active is None:
                raise UnknownTopicOrPartitionError(f"{directory}: holds no segment")
            end = await segment_read(lambda nowait: active.read_next_offset(nowait=nowait))
            first = segments.first_segment
            assert first is not None
            start, _ = settle_log_start(log_start_checkpoint, first.base_offset, end)
            plan = plan_recovery(opened.facts, unclean=False, recovery_point=None)
            return (LoadedLog(segments, start, end, end),
                    PartitionRecovery(topic, partition, plan, (), start, end, None))
        plan = plan_recovery(opened.facts, unclean=unclean, recovery_point=recovery_point, record=record)
        if plan.record_problem is not None and not opened.facts.first_batches:
            # The files are not what the clean close left: look at every segment's first batch, as after
            # an unclean stop, so that a segment in the wrong place is found before the point in doubt too.
            opened.facts = await in_thread(with_first_batches, opened)
            plan = plan_recovery(opened.facts, unclean=unclean, recovery_point=recovery_point, record=record)
        recovery, unflushed = await _walk(directory, config, plan, segments, topic=topic, partition=partition,
                                          log_start_checkpoint=log_start_checkpoint, now_ms=now_ms)
        for note in recovery.notes:
            log.warning("%s: %s", directory, note)
        if recovery.new_segment_at is not None:
            if not opened.segments:
                log.warning("%s: holds no segment (a create_topic was cut short?); starting an empty one", directory)
            segments.add(await new_segment(directory, config, recovery.new_segment_at, now_ms))
        if recovery.changes_anything:
            removed = await _remove_snapshots_after(directory, recovery.log_end_offset)
            if removed:
                recovery = dataclasses.replace(recovery, removed_snapshots=tuple(removed))
        log.debug("%s: loaded %s", name, recovery)
        end = recovery.log_end_offset
        # Everything is durable up to the log end, but a recovered active segment: below it, or below the
        # recovery point the files were durable to before the stop (Kafka keeps min(checkpoint, end)).
        point = end if unflushed is None else min(end, max(unflushed, recovery_point or 0))
        # Only a segment whose scan met a marker can need .txnindex entries back: the rest hold no abort.
        scanned = [s.base_offset for s in recovery.segments if s.next_offset is not None
                   and (seg := segments.get(s.base_offset)) is not None and seg.recovered_markers]
        return (LoadedLog(segments, recovery.log_start_offset, end, point, recovered=recovery.changes_anything,
                          txn_index_from=min(scanned, default=None)),
                recovery)
    except BaseException:
        with contextlib.suppress(Exception):
            await close_segments(segments.values())
        raise


def _past_the_end(log_end_offset: int) -> str:
    return f"past the log end offset {log_end_offset} recovery leaves (it holds batches that were cut off)"


async def _remove_snapshots_after(directory: Path, log_end_offset: int) -> list[SnapshotRemoval]:
    """Remove the producer-state snapshots past where recovery ended the log (Kafka's ``truncateAndReload``).

    Such a snapshot holds batches recovery cut off; left in place, appends
    after the open would bring its offset back inside the log, and it would
    pass for the state there (a producer's retry taken for a batch the log no
    longer holds). Returns what was removed.

    Raises:
        StorageError: the directory cannot be listed or a snapshot cannot be removed.
    """
    removed = []
    for offset in (await in_thread(list_partition_dir, directory)).snapshots:
        if offset > log_end_offset:
            name = snapshot_file_name(offset)
            log.warning("%s: removing producer snapshot %s: recovery ended the log at %d", directory, name,
                        log_end_offset)
            await remove(directory / name)
            removed.append(SnapshotRemoval(name, _past_the_end(log_end_offset)))
    return removed


def snapshot_removals(directory: Path, recovery: PartitionRecovery) -> list[SnapshotRemoval]:
    """The snapshots the open and the first load of the producer state would delete after ``recovery`` (blocking).

    The open's (:func:`_remove_snapshots_after`), then the load's
    (:func:`~seglog.engine.producer_state.plan_snapshot_load` over the
    segments recovery leaves, and the newest candidates that do not decode,
    up to the first that does). Reads the snapshot files, changes nothing.

    Raises:
        StorageError: the directory cannot be listed or a snapshot cannot be read.
    """
    start, end = recovery.log_start_offset, recovery.log_end_offset
    found = list_snapshots(directory)
    out: list[SnapshotRemoval] = []
    if recovery.changes_anything:
        out += [SnapshotRemoval(path.name, _past_the_end(end)) for offset, path in found if offset > end]
        found = [(offset, path) for offset, path in found if offset <= end]
    plan = plan_snapshot_load([o for o, _ in found], recovery.segment_bases_after(), log_start_offset=start,
                              log_end_offset=end, clean_shutdown=False)
    for offset in plan.delete:
        if offset > end:
            why = f"past the log end offset {end}"
        elif offset < start:
            why = f"below the log start offset {start}"
        else:
            why = "a stray: neither at a segment's base offset nor the newest snapshot"
        out.append(SnapshotRemoval(snapshot_file_name(offset), f"{why}; deleted when the producer state is loaded"))
    for offset in plan.candidates:
        snap = dump_snapshot(directory / snapshot_file_name(offset))
        if snap.problem is None:
            break
        out.append(SnapshotRemoval(snap.path.name, f"does not decode ({snap.problem}); deleted when the producer "
                                                   "state is loaded, which is rebuilt from the log instead"))
    return out


async def _walk(
    directory: Path,
    config: LogConfig,
    plan: PartitionPlan,
    segments: LogSegments[LogSegment],
    *,
    topic: str,
    partition: int,
    log_start_checkpoint: int | None,
    now_ms: int,
) -> tuple[PartitionRecovery, int | None]:
    """Drive a :class:`RecoveryWalk` over opened segments: scan, cut, set aside, delete; make it durable.

    Returns the recovery and, when the active segment was recovered, its base
    offset: the one recovered segment not fsynced here (below).
    """
    walk = RecoveryWalk(plan)
    listed = plan.facts.segments
    probed = plan.facts.first_batches  # read when the files were opened (after an unclean stop): not again
    max_batch = max(config.max_message_bytes, config.segment_bytes)
    recovered: list[LogSegment] = []
    while (i := walk.next()) is not None:
        segment = segments.get(listed[i].base_offset)
        assert segment is not None
        head = probed[i] if probed else _base_offset_of(await in_thread(segment.first_batch))
        previous_end = None
        if walk.needs_previous_end(i, head):
            previous = segments.get(listed[i - 1].base_offset)
            assert previous is not None
            previous_end = await in_thread(_next_offset_or_none, previous)
        if not walk.first_batch(i, head, previous_end=previous_end):
            continue
        cut, next_offset = await run_to_completion(in_thread(_recover, segment, max_batch))
        walk.scanned(i, valid_bytes=listed[i].size_bytes - cut, next_offset=next_offset)
        recovered.append(segment)
    last_end = None
    kept = walk.last_kept()
    if kept is not None and kept[1] is None:
        last = segments.get(listed[kept[0]].base_offset)
        assert last is not None
        last_end = await in_thread(_next_offset, last)
    recovery = walk.finish(topic=topic, partition=partition, log_start_checkpoint=log_start_checkpoint,
                           last_end=last_end)
    stray = f".{_now_ms()}{STRAY_SUFFIX}"
    for done in recovery.segments:
        if done.action is SegmentAction.TRUNCATE:
            log.warning("%s: truncated %d byte(s) of segment %d: %s", directory, done.truncated_bytes,
                        done.base_offset, done.reason)
        elif done.action in (SegmentAction.SET_ASIDE, SegmentAction.DELETE):
            segment = segments.remove(done.base_offset)
            assert segment is not None
            if done.action is SegmentAction.SET_ASIDE:
                log.warning("%s: setting segment %d aside (its files renamed *%s): %s", directory,
                            done.base_offset, stray, done.reason)
                try:
                    await run_to_completion(in_thread(segment.change_file_suffixes, "", stray))
                finally:
                    await close_segments([segment])
            else:
                log.warning("%s: deleting segment %d: %s", directory, done.base_offset, done.reason)
                await run_to_completion(in_thread(segment.delete))
    active = segments.active_segment
    unflushed: int | None = None
    for segment in recovered:
        if segment.base_offset not in segments:
            continue
        if segment is active:
            # Kafka's rule: not fsynced at open. The recovery point stays at or below its base offset
            # (load_partition), so the partition's next flush (a roll, flush.ms, fsync appends, the
            # clean close) syncs it, and a crash before that recovers it again.
            unflushed = segment.base_offset
            continue
        # Recovered bytes may still be only in the page cache: durable before the partition is used
        # (a sealed segment is released below, and no later flush of the partition would reach it).
        await in_thread(segment.flush)
        # A recovered sealed segment holds three descriptors (its .log, and the one Python's mmap
        # keeps per mapped index): 10,000 of them exhausted a 20,000 ulimit. Close it, and open it
        # again as a clean open opens a sealed segment (nothing mapped, the .log opened by its first read).
        await close_segments([segment])
        fresh = await _reopen_sealed(directory, config, segment.base_offset, now_ms)
        fresh.recovered_markers = segment.recovered_markers  # its .txnindex was emptied all the same
        segments.add(fresh)
    return recovery, unflushed


def _next_offset_or_none(segment: LogSegment) -> int | None:
    """A trusted segment's next offset, or None when it does not parse to its end (the caller falls back); blocking."""
    try:
        return _next_offset(segment)
    except CorruptRecordError:
        return None


def _next_offset(segment: LogSegment) -> int:
    # read_next_offset, blocking (in the caller's thread).
    found = segment.read_next_offset()
    assert found is not WOULD_BLOCK
    return found


def _recover(segment: LogSegment, max_batch_bytes: int) -> tuple[int, int]:
    # A segment's recovery and its next offset after it, in one hop: the bytes cut and the next offset.
    return segment.recover(max_batch_bytes), _next_offset(segment)


async def _reopen_sealed(directory: Path, config: LogConfig, base_offset: int, now_ms: int) -> LogSegment:
    return await in_thread(
        LogSegment.open,
        directory,
        base_offset,
        max_index_size=config.segment_index_bytes,
        index_interval_bytes=config.index_interval_bytes,
        roll_jitter_ms=config.random_segment_jitter(),
        now_ms=now_ms,
        file_already_exists=True,
        index_files_existed=(True, True),
        read_first_batch=False,
        defer_open=True,
    )


async def open_unopened(
    topic: str, partition: int, directory: Path, config: LogConfig, unopened: Unopened
) -> tuple[LoadedLog, PartitionRecovery]:
    """Open the files of a partition a clean open left unopened (its first use), checking the record against them.

    Where the record and the files disagree, the partition is recovered as
    after an unclean stop (:func:`plan_recovery`); the record never moves the
    log start and never hides a segment.
    """
    now_ms = _now_ms()
    opened = (await open_files_in_chunk([(directory, config)], now_ms, writable=True, read_active_end=True))[0]
    if isinstance(opened, BaseException):
        raise opened
    return await load_partition(
        directory, config, opened, topic=topic, partition=partition, unclean=False,
        recovery_point=unopened.recovery_point_checkpoint, log_start_checkpoint=unopened.log_start_checkpoint,
        record=unopened.record, now_ms=now_ms,
    )


# =============================================================================================
# Opening a log directory
# =============================================================================================


@dataclass(frozen=True, slots=True)
class RecoveryProgress:
    """Progress of opening a log directory, reported to ``Engine.open(on_progress=...)``.

    ``recovery`` is what the open did to the partition (what ``seglog recover
    --dry-run`` showed beforehand); ``None`` for a partition a clean open left
    for its first use.
    """

    topic: str
    partition: int
    partitions_done: int
    partitions_total: int
    segments_recovered: int
    bytes_recovered: int
    bytes_truncated: int
    recovery: PartitionRecovery | None = None


def parse_checkpoint_file(listing: _fs.LogDirListing, name: str, root: Path) -> dict[tuple[str, int], int]:
    """A checkpoint of the listing, or ``{}`` (logged) when it does not parse: recovery then starts at 0."""
    data = listing.files.get(name)
    if data is None:
        return {}
    try:
        return parse_checkpoint(data, name=name)
    except CorruptionError as exc:
        # The safe fallback: recover every segment, keep every record.
        log.warning("%s: %s; ignoring it (recovering from offset 0)", root / name, exc)
        return {}


def _parse_clean_shutdown(listing: _fs.LogDirListing, root: Path) -> dict[tuple[str, int], ClosedPartition]:
    try:
        return parse_clean_shutdown(listing.clean_shutdown_record)
    except CorruptionError as exc:
        # The safe fallback: open every partition's files now.
        log.warning("%s: %s; opening every partition now", root / _fs.CLEAN_SHUTDOWN_FILE, exc)
        return {}


@dataclass(slots=True)
class LogDirLoad:
    """What :class:`LogDirLoader` needs of the engine it loads for, and what it fills in."""

    path: Path
    config: LogConfig  # the engine's default
    owner: LogOwner
    read_only: bool
    topics: dict[str, TopicState]  # filled in
    logs: dict[tuple[str, int], PartitionLog]  # filled in; on failure the engine closes what is there
    spawn: Callable[[Coroutine[Any, Any, None], str], None]  # background work of the engine (tree removals)
    on_active: Callable[[LogSegment, LogConfig], None] | None = None  # a read-only engine's follow hook


async def load_log_dir(
    load: LogDirLoad,
    listing: _fs.LogDirListing,
    *,
    force_recovery: bool,
    on_progress: Callable[[RecoveryProgress], None] | None,
) -> bool:
    """Load every partition of a listed log directory into ``load.topics`` / ``load.logs``; whether it recovered.

    After a clean stop the partitions with a clean-shutdown record are left
    unopened (their first use opens and checks them); the others are opened,
    LOAD_CHUNK partitions per executor hop, and recovered as
    :func:`load_partition` says. A writable load also finishes what a crash
    cut short: ``-delete`` directories are removed (in the background),
    ``-create`` ones and half-made topics removed, cut-short deletes finished.
    """
    root = load.path
    recover = force_recovery or not (listing.clean_shutdown or listing.empty)
    recovery_points = parse_checkpoint_file(listing, RECOVERY_POINT_CHECKPOINT, root)
    start_offsets = parse_checkpoint_file(listing, LOG_START_OFFSET_CHECKPOINT, root)
    # After a clean close the marker says where every partition ended: those partitions open their files
    # on first use (docs/OPERATIONS.md, "Opening"), so a clean open costs about a listing of the directory.
    # Read-only engines open everything now: another process may be writing the directory, and a record
    # read now could be stale by first use.
    closed = {} if recover or load.read_only else _parse_clean_shutdown(listing, root)
    if not load.read_only:
        for stale in listing.deleted_dirs:
            load.spawn(_fs.remove_tree(root / stale), "seglog-remove-deleted-topic")
        for unfinished in listing.unfinished_dirs:
            log.warning("%s: removing a partition directory a create_topic left unfinished", root / unfinished)
            await _fs.remove_tree(root / unfinished)
    partitions = sorted(listing.partition_dirs.items())
    for (topic, partition), meta_bytes in partitions:  # the one topic.json read per topic decides
        if meta_bytes is not None and topic not in load.topics:
            load.topics[topic] = topic_of(load, topic, partition, meta_bytes)
    if not load.read_only:
        partitions = await _remove_half_made_topics(load, partitions)
        partitions = await _finish_cut_short_deletes(load, partitions, listing.deleted_dirs)
    todo: list[tuple[TopicState, int]] = []
    done = 0
    for (topic, partition), meta_bytes in partitions:
        # A topic.json was parsed (and any problem logged) by the loop above.
        state = load.topics.setdefault(
            topic, topic_of(load, topic, partition, None if topic in load.topics else meta_bytes)
        )
        key = (topic, partition)
        record = closed.get(key)
        if record is None:
            todo.append((state, partition))
            continue
        load.logs[key] = PartitionLog(
            topic, partition, root / partition_dir_name(topic, partition), state.config, load.owner,
            unopened=Unopened(record, start_offsets.get(key), recovery_points.get(key)), read_only=False,
        )
        done += 1
        if on_progress is not None:
            on_progress(RecoveryProgress(topic, partition, done, len(partitions), 0, 0, 0))
    now_ms = _now_ms()
    gate = asyncio.Semaphore(LOAD_CHUNKS_IN_FLIGHT)

    async def load_chunk(chunk: list[tuple[TopicState, int]]) -> None:
        nonlocal done
        async with gate:
            jobs = [(root / partition_dir_name(t.name, p), t.config) for t, p in chunk]
            opened = await open_files_in_chunk(jobs, now_ms, writable=not load.read_only, read_active_end=not recover,
                                               probe_first_batches=recover and not load.read_only,
                                               on_active=load.on_active)
            taken = 0  # opened[:taken] belong to a PartitionLog (or were closed by load_partition)
            try:
                for (state, partition), (directory, _), files in zip(chunk, jobs, opened, strict=True):
                    key = (state.name, partition)
                    taken += 1
                    if isinstance(files, BaseException):
                        raise files
                    loaded, recovery = await load_partition(
                        directory, state.config, files, topic=state.name, partition=partition, unclean=recover,
                        recovery_point=recovery_points.get(key), log_start_checkpoint=start_offsets.get(key),
                        read_only=load.read_only, now_ms=now_ms,
                    )
                    plog = load.logs[key] = PartitionLog(state.name, partition, directory, state.config,
                                                         load.owner, loaded=loaded, read_only=load.read_only)
                    if not load.read_only and (not recover or loaded.txn_index_from is not None):
                        # After a clean shutdown (a partition with a transaction open is not left
                        # unopened): its state is read from the snapshot at its end, so that its LSO is
                        # right from the start. After a recovery that scanned segments, now too: the scan
                        # emptied their .txnindex, and the state's replay of them writes its entries back
                        # (Kafka's LogSegment.recover does both in one pass). Left for later, a crash after
                        # the next recovery-point checkpoint would leave them empty for good: no open
                        # scans those segments again, and read_committed would serve their aborted records.
                        await plog.load_producer_state()
                    done += 1
                    if on_progress is not None:
                        scanned = [s for s in recovery.segments if s.next_offset is not None]
                        on_progress(RecoveryProgress(state.name, partition, done, len(partitions), len(scanned),
                                                     recovery.bytes_scanned, recovery.bytes_truncated, recovery))
            except BaseException:
                await in_thread(close_opened, opened[taken:])
                raise

    chunks = [todo[i : i + LOAD_CHUNK] for i in range(0, len(todo), LOAD_CHUNK)]
    results = await asyncio.gather(*(load_chunk(chunk) for chunk in chunks), return_exceptions=True)
    failures = [r for r in results if isinstance(r, BaseException)]
    if failures:
        raise failures[0]
    return recover


def topic_of(load: LogDirLoad, topic: str, partition: int, meta: bytes | None) -> TopicState:
    """The state of ``topic`` in ``load.topics`` (or a new one) as partition ``partition``'s ``topic.json`` has it."""
    return parse_topic_file(topic, partition, meta, default=load.config, existing=load.topics.get(topic),
                            log_dir=load.path)


async def _remove_half_made_topics(
    load: LogDirLoad, partitions: list[tuple[tuple[str, int], bytes | None]]
) -> list[tuple[tuple[str, int], bytes | None]]:
    """Remove topics no partition directory of which has a topic.json or a record; the rest of ``partitions``.

    What a create_topic cut short by a crash used to leave (it made the
    directory before writing its topic.json): taken for a topic, it had one
    partition and the default config, and blocked creating it again. Now a
    partition directory appears only with its topic.json. A directory that
    holds records is kept whatever it lacks.
    """
    described = set(load.topics)
    suspects: dict[str, list[int]] = {}
    for (topic, partition), _ in partitions:
        if topic not in described:
            suspects.setdefault(topic, []).append(partition)
    removed: set[str] = set()
    for topic, numbers in suspects.items():
        directories = [load.path / partition_dir_name(topic, p) for p in numbers]
        if any([await _fs.holds_records(d) for d in directories]):
            continue
        for directory in directories:
            log.warning("%s: removing a partition directory with no topic.json and no record "
                        "(a create_topic was cut short)", directory)
            await _fs.remove_tree(directory)
        removed.add(topic)
    if removed:
        await _fs.fsync_dir(load.path)
    return [item for item in partitions if item[0][0] not in removed]


async def _finish_cut_short_deletes(
    load: LogDirLoad, partitions: list[tuple[tuple[str, int], bytes | None]], deleted_dirs: list[str]
) -> list[tuple[tuple[str, int], bytes | None]]:
    """Finish the delete_topic a crash cut short; the rest of ``partitions``.

    delete_topic renames partitions 0, 1, ... in turn, so a topic whose
    partition 0 has a ``-delete`` directory while higher partitions are
    still in place was being deleted (create_topic places partitions in the
    same order, so it never leaves partition 0 missing and a higher one in
    place). Without this, the next open made partition 0 anew, empty.
    """
    by_topic: dict[str, list[int]] = {}
    for (topic, partition), _ in partitions:
        by_topic.setdefault(topic, []).append(partition)
    finished: set[str] = set()
    for topic, numbers in by_topic.items():
        if 0 in numbers or not any(is_aside_dir_of(name, topic, 0, _fs.DELETE_DIR_SUFFIX) for name in deleted_dirs):
            continue
        log.warning("topic %s: a delete_topic was cut short (partition 0 is deleted, %s are not); finishing it",
                    topic, sorted(numbers))
        for partition in numbers:
            target = load.path / aside_dir_name(topic, partition, _fs.DELETE_DIR_SUFFIX)
            await _fs.rename_dir(load.path / partition_dir_name(topic, partition), target)
            load.spawn(_fs.remove_tree(target), f"seglog-remove-{target.name}")
        load.topics.pop(topic, None)
        finished.add(topic)
    if finished:
        await _fs.fsync_dir(load.path)
    return [item for item in partitions if item[0][0] not in finished]


# =============================================================================================
# The dry run: the same rules over read-only files
# =============================================================================================


@dataclass(frozen=True, slots=True)
class RecoveryPlan:
    """What opening a log directory would recover (``seglog recover --dry-run``), computed without changing anything.

    After a clean stop, a partition that has a clean-shutdown record is
    recovered by its first use, not by the open; the plan is the same.
    """

    path: Path
    clean_shutdown: bool
    forced: bool
    recovery_checkpoint_problem: str | None
    partitions: list[PartitionRecovery] = field(default_factory=list)

    @property
    def will_recover(self) -> bool:
        """Whether the open would scan or change any segment or remove any file."""
        return any(p.changes_anything for p in self.partitions)

    @property
    def bytes_truncated(self) -> int:
        return sum(p.bytes_truncated for p in self.partitions)

    @property
    def segments_to_recover(self) -> int:
        return sum(len(p.segments) for p in self.partitions)


def _read_checkpoint(listing: _fs.LogDirListing, name: str) -> tuple[dict[tuple[str, int], int], str | None]:
    data = listing.files.get(name)
    if data is None:
        return {}, None
    try:
        return parse_checkpoint(data, name=name), None
    except CorruptionError as exc:
        return {}, str(exc)


def dry_run_recovery(
    log_dir: str | Path,
    *,
    force: bool = False,
    config: LogConfig | None = None,
    on_segment: Callable[[Path], None] | None = None,
) -> RecoveryPlan:
    """Say what ``Engine.open(log_dir, config, force_recovery=force)`` -- and each partition's first use -- would
    recover, changing nothing (blocking).

    Lists and reads every partition as the open does (the same
    :func:`open_partition_files_sync`, read-only), plans it with
    :func:`plan_recovery`, and drives the same :class:`RecoveryWalk` with
    read-only scans. ``on_segment(path)`` is called before each scan (a
    progress bar). ``config``: the engine's default (topics override it with
    their ``topic.json``).

    Raises:
        StorageError: the directory is missing or unreadable.
    """
    root = Path(log_dir)
    default = config or LogConfig()
    listing = _fs.scan_log_dir_sync(root, create=False)
    clean = listing.clean_shutdown or listing.empty
    unclean = force or not clean
    points, problem = _read_checkpoint(listing, RECOVERY_POINT_CHECKPOINT)
    starts, _ = _read_checkpoint(listing, LOG_START_OFFSET_CHECKPOINT)
    records: dict[tuple[str, int], ClosedPartition] = {}
    if not unclean:
        with contextlib.suppress(CorruptionError):
            records = parse_clean_shutdown(listing.clean_shutdown_record)
    topics: dict[str, TopicState] = {}
    for (topic, partition), meta in sorted(listing.partition_dirs.items()):
        if meta is not None and topic not in topics:
            topics[topic] = parse_topic_file(topic, partition, meta, default=default, existing=None, log_dir=root)
    plan = RecoveryPlan(root, listing.clean_shutdown, force, problem)
    now_ms = _now_ms()
    for key in sorted(listing.partition_dirs):
        topic, partition = key
        directory = root / partition_dir_name(topic, partition)
        state = topics.get(topic)
        topic_config = state.config if state is not None else default
        record = records.get(key)
        opened = open_partition_files_sync(directory, topic_config, now_ms, writable=False,
                                           read_active_end=not unclean, probe_first_batches=unclean)
        try:
            part = plan_recovery(opened.facts, unclean=unclean, recovery_point=points.get(key), record=record)
            if part.record_problem is not None and not opened.facts.first_batches:  # as the open does
                opened.facts = with_first_batches(opened)
                part = plan_recovery(opened.facts, unclean=unclean, recovery_point=points.get(key), record=record)
            walk = RecoveryWalk(part)
            by_base = {s.base_offset: s for s in opened.segments}
            listed = part.facts.segments
            probed = part.facts.first_batches
            max_batch = max(topic_config.max_message_bytes, topic_config.segment_bytes)
            while (i := walk.next()) is not None:
                segment = by_base[listed[i].base_offset]
                head = probed[i] if probed else _base_offset_of(segment.first_batch())
                previous_end = None
                if walk.needs_previous_end(i, head):
                    previous_end = _next_offset_or_none(by_base[listed[i - 1].base_offset])
                if not walk.first_batch(i, head, previous_end=previous_end):
                    continue
                if on_segment is not None:
                    on_segment(segment.log_path)
                scan = scan_segment(segment.log_path, max_batch_bytes=max_batch, base_offset=listed[i].base_offset)
                walk.scanned(i, valid_bytes=scan.valid_bytes, next_offset=scan.next_offset)
            kept = walk.last_kept()
            last_end = None
            if kept is not None and kept[1] is None:
                last_end = _next_offset(by_base[listed[kept[0]].base_offset])
            recovery = walk.finish(topic=topic, partition=partition, log_start_checkpoint=starts.get(key),
                                   last_end=last_end)
            removals = snapshot_removals(directory, recovery)
            plan.partitions.append(dataclasses.replace(recovery, removed_snapshots=tuple(removals)))
        finally:
            close_opened([opened])
    return plan
