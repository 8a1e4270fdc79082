"""``verify``: every segment, index, checkpoint and group file of a directory checked, findings reported.

Everything is read with the engine's own rules (the segment reader for every
``.log``, the listing of ``seglog.segments.files``), read-only: no lock, no
write, no event loop; a damaged file is a :class:`~seglog.engine.offline.findings.Finding`,
not an exception.

Must not import: ``tools``; nor ``seglog.engine.engine`` / ``seglog.engine.log``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from seglog.engine._fs import CLEAN_SHUTDOWN_FILE, TOPIC_FILE
from seglog.engine.checkpoints import LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT
from seglog.engine.errors import StorageError
from seglog.engine.groups import read_store
from seglog.engine.names import parse_partition_dir
from seglog.engine.offline.dump import dump_log
from seglog.engine.offline.findings import Check, Finding, Severity
from seglog.engine.offline.indexes import (
    dump_index,
    dump_txn_index,
    index_sanity_check,
    txn_index_findings,
    verify_index_against_log,
)
from seglog.engine.offline.listing import (
    GROUPS_DIR,
    SegmentInfo,
    TopicMeta,
    list_names,
    list_segments,
    partition_dirs,
    read_checkpoint,
    read_topic_file,
)
from seglog.engine.offline.segment_scan import SegmentScan, log_end_offset_of, scan_segment, tail_findings
from seglog.engine.offline.snapshots import SnapshotDump, read_snapshots, snapshot_findings
from seglog.engine.offline.txn_replay import TxnReplay, txn_index_against_log
from seglog.segments.fileio import default_ops
from seglog.segments.files import (
    FILE_NAME_DIGITS,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    list_partition_dir,
)

__all__ = ["VerifyProgress", "VerifyReport", "total_log_bytes", "verify"]


@dataclass(frozen=True, slots=True)
class VerifyProgress:
    """Reported to ``verify(on_progress=...)`` as the scan advances through the ``.log`` bytes."""

    bytes_done: int
    bytes_total: int
    path: Path


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """What :func:`verify` checked and found. ``ok`` when no finding is an error or a warning."""

    path: Path
    findings: list[Finding]
    partitions: int
    segments: int
    batches: int
    records: int
    bytes_checked: int
    indexes_checked: int
    segments_skipped: int = 0  # not modified since ``since_ms``

    @property
    def ok(self) -> bool:
        return not any(f.severity is not Severity.INFO for f in self.findings)

    @property
    def bad_files(self) -> list[Path]:
        """Files with an error or a warning, each once, in the order found."""
        seen: dict[Path, None] = {}
        for f in self.findings:
            if f.severity is not Severity.INFO:
                seen.setdefault(f.path)
        return list(seen)


class _Verifier:
    def __init__(self, on_progress: Callable[[VerifyProgress], None] | None, deep: bool,
                 since_ms: int | None) -> None:
        self.findings: list[Finding] = []
        self.on_progress = on_progress
        self.total = 0
        self.done = 0
        self.deep = deep
        self.since_ms = since_ms
        self.segments = self.batches = self.records = self.indexes = self.skipped = 0

    def selected(self, seg: SegmentInfo) -> bool:
        """Whether ``seg`` is checked: always, or (``since_ms``) when one of its files changed since then."""
        if self.since_ms is None:
            return True
        newest = 0
        for suffix in SEGMENT_SUFFIXES:
            try:
                newest = max(newest, default_ops().mtime_ns(str(seg.sibling(suffix))) // 1_000_000)
            except OSError:
                continue
        return newest >= self.since_ms

    def add(self, severity: Severity, check: Check, path: Path, message: str, *,
            position: int | None = None, offset: int | None = None) -> None:
        self.findings.append(Finding(severity, check, path, message, position, offset))

    def advance(self, n: int, path: Path) -> None:
        self.done += n
        if self.on_progress is not None:
            self.on_progress(VerifyProgress(self.done, self.total, path))

    def partition(self, directory: Path, *, clean_shutdown: bool) -> tuple[int, int] | None:
        """Verify one partition directory; returns (first base offset, log end offset) or None if empty."""
        meta = read_topic_file(directory)
        if meta.problem is not None:
            self.add(Severity.WARNING, Check.TOPIC_FILE, directory / TOPIC_FILE, meta.problem)
        self._stray_files(directory)
        segments = list_segments(directory)
        dumps, unreadable = read_snapshots(directory)
        snapshots = [d.offset for d in dumps] + [f.offset for f in unreadable if f.offset is not None]
        off_boundary: set[int] = set()
        previous_next: int | None = None
        replay = _txn_replay(segments, dumps)
        for seg in segments:
            if not self.selected(seg):
                self.skipped += 1
                replay.lose_track()
                # Not scanned: its successor's base offset cannot be checked against it.
                previous_next = None if seg.next_base_offset is not None else log_end_offset_of(
                    seg, meta.max_batch_bytes)[0]
                continue
            self.segments += 1
            try:
                next_offset = self.segment(seg, meta, clean_shutdown=clean_shutdown, snapshots=snapshots,
                                           off_boundary=off_boundary, replay=replay)
            except StorageError as exc:  # unreadable, not inconsistent: name it and go on
                self.add(Severity.ERROR, Check.DIRECTORY, seg.log_path, str(exc))
                replay.lose_track()
                previous_next = None
                continue
            if previous_next is not None:
                if seg.base_offset < previous_next:
                    self.add(Severity.ERROR, Check.OFFSETS, seg.log_path,
                             f"base offset {seg.base_offset} is below the previous segment's next offset "
                             f"{previous_next}: the segments overlap", position=0, offset=seg.base_offset)
                elif seg.base_offset > previous_next:
                    self.add(Severity.WARNING, Check.OFFSETS, seg.log_path,
                             f"offsets {previous_next}..{seg.base_offset - 1} are missing between this segment "
                             "and the previous one", position=0, offset=previous_next)
            previous_next = next_offset
        if not segments:
            self.add(Severity.WARNING, Check.DIRECTORY, directory, "partition directory holds no segment")
            return None
        assert previous_next is not None
        first = segments[0].base_offset
        self.findings.extend(unreadable)
        self.findings.extend(snapshot_findings(dumps, off_boundary=off_boundary, log_end_offset=previous_next))
        return first, previous_next

    def _stray_files(self, directory: Path) -> None:
        listing = list_partition_dir(directory)
        found = [
            *((name, Check.FILE_NAME, Severity.INFO,
               "a leftover of an interrupted deletion, swap or write; the engine removes it at open")
              for name in listing.leftovers),
            *((name, Check.FILE_NAME, Severity.WARNING,
               f"not a segment file name (a {FILE_NAME_DIGITS}-digit base offset is expected); ignored")
              for name in listing.misnamed),
            *((name, Check.ORPHAN, Severity.WARNING,
               f"index file without {name[:FILE_NAME_DIGITS]}{LOG_SUFFIX}; the engine removes it at open")
              for name in listing.orphan_indexes),
        ]
        for name, check, severity, message in sorted(found):
            self.add(severity, check, directory / name, message)

    def segment(self, seg: SegmentInfo, meta: TopicMeta, *, clean_shutdown: bool, snapshots: Sequence[int] = (),
                off_boundary: set[int] | None = None, replay: TxnReplay | None = None) -> int:
        """Verify one segment and its indexes; returns its next offset.

        ``snapshots``: the offsets of the partition's snapshot files; those in
        this segment's range that are not where a batch starts (or where its
        valid batches end) go to ``off_boundary``. ``replay``: the partition's
        transactions replayed up to this segment (a fresh one from its base
        offset when ``None``); its abort markers and ``.txnindex`` entries are
        checked against each other.
        """
        active = seg.is_active and not clean_shutdown
        scan = scan_segment(seg.log_path, max_batch_bytes=meta.max_batch_bytes, base_offset=seg.base_offset,
                            keep_batches=True, on_bytes=lambda n: self.advance(n, seg.log_path))
        if off_boundary is not None:
            off_boundary.update(o for o in snapshots if _inside_a_batch(scan, seg, o))
        self.batches += scan.batch_count
        self.records += scan.record_count
        self.findings.extend(tail_findings(scan, active=active))
        if not seg.is_active and scan.batch_count == 0 and scan.tail is None:
            self.add(Severity.INFO, Check.OFFSETS, seg.log_path, "an empty segment that is not the last one")
        if self.deep:
            deep: list[Finding] = []
            for _ in dump_log(seg.log_path, records=True, max_batch_bytes=meta.max_batch_bytes, findings=deep):
                pass
            self.findings.extend(f for f in deep if f.check is Check.RECORDS)
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            path = seg.sibling(suffix)
            size = seg.index_bytes if suffix == INDEX_SUFFIX else seg.time_index_bytes
            if size is None:
                self.add(Severity.INFO, Check.MISSING_INDEX, path,
                         "missing; the engine rebuilds it from the .log at open")
                continue
            self.indexes += 1
            try:
                sane = index_sanity_check(path, active=seg.is_active and not clean_shutdown)
                self.findings.extend(sane)
                if not any(f.severity is Severity.ERROR for f in sane):
                    dump = dump_index(path, base_offset=seg.base_offset)
                    self.findings.extend(verify_index_against_log(dump, scan, active=seg.is_active))
            except StorageError as exc:
                self.add(Severity.ERROR, Check.INDEX_SIZE, path, str(exc))
        expected = (replay or TxnReplay(seg.base_offset)).segment(scan.txn_batches)
        txn_path = seg.sibling(TXN_INDEX_SUFFIX)
        if seg.txn_index_bytes is not None:
            self.indexes += 1
            try:
                dump_txn = dump_txn_index(txn_path, base_offset=seg.base_offset)
                found = txn_index_findings(dump_txn, scan.next_offset)
                self.findings.extend(found)
                if not found:
                    self.findings.extend(txn_index_against_log(txn_path, dump_txn.entries, expected,
                                                               scan.txn_batches))
            except StorageError as exc:
                self.add(Severity.ERROR, Check.TXN_INDEX, txn_path, str(exc))
        elif expected:
            self.findings.extend(txn_index_against_log(txn_path, (), expected, scan.txn_batches))
        return scan.next_offset


def _txn_replay(segments: Sequence[SegmentInfo], snapshots: Sequence[SnapshotDump]) -> TxnReplay:
    """A replay of the partition's transactions from its first segment: exact from offset 0 or a snapshot there."""
    first = segments[0].base_offset if segments else 0
    at_first = next((d for d in snapshots if d.offset == first and d.problem is None), None)
    if first != 0 and at_first is not None:
        return TxnReplay(first, at_first.entries)
    return TxnReplay(first)


def _inside_a_batch(scan: SegmentScan, seg: SegmentInfo, offset: int) -> bool:
    """Whether ``offset`` lies in ``seg``'s range but is neither a batch's base offset nor the end of its batches."""
    if offset < seg.base_offset or (seg.next_base_offset is not None and offset >= seg.next_base_offset):
        return False
    if offset >= scan.next_offset:
        return offset > scan.next_offset and seg.next_base_offset is not None
    i = scan.batch_holding(offset)
    return i is None or scan.base_offsets[i] != offset


def total_log_bytes(dirs: Sequence[Path], keep: Callable[[SegmentInfo], bool] = lambda s: True) -> int:
    return sum(s.size_bytes for d in dirs for s in list_segments(d) if keep(s))


def verify(
    path: str | os.PathLike[str],
    *,
    deep: bool = False,
    since_ms: int | None = None,
    on_progress: Callable[[VerifyProgress], None] | None = None,
) -> VerifyReport:
    """Check every segment and index under ``path`` (a log directory or one partition directory).

    Checks: batch headers and CRCs; offsets following on within a segment (from
    the base offset in its file name) and across segments; the tail of each ``.log`` (torn write, garbage,
    preallocated zeros); every offset-index entry points at the start of the
    batch holding its offset; the time index is monotonic and each entry
    carries the largest timestamp up to its offset; index lengths are whole
    entries and untrimmed slots are reported; orphan index files; the
    transaction index (well formed, each entry the one its abort marker must
    have, each abort marker with its entry); ``topic.json`` files; the checkpoint files parse and do
    not point beyond a partition's log end; the group store parses.
    ``deep`` also decodes every record (Kafka's ``--deep-iteration``);
    ``since_ms`` checks only the segments with a file modified at or after that
    time (epoch ms; the others count as ``segments_skipped``). Opens every file
    read-only and changes nothing.

    Raises:
        StorageError: ``path`` is not a directory or cannot be listed.
    """
    root = Path(path)
    if not default_ops().is_dir(str(root)):
        raise StorageError(f"{root}: no such directory")
    ops = default_ops()
    single = (
        parse_partition_dir(root.name) is not None
        and not ops.exists(str(root / RECOVERY_POINT_CHECKPOINT))
        and any(n.endswith(LOG_SUFFIX) for n in list_names(root))
    )
    dirs = [root] if single else [d for _, d in partition_dirs(root)]
    verifier = _Verifier(on_progress, deep, since_ms)
    verifier.total = total_log_bytes(dirs, verifier.selected)
    log_dir = root.parent if single else root
    clean_shutdown = default_ops().exists(str(log_dir / CLEAN_SHUTDOWN_FILE))
    ranges: dict[tuple[str, int], tuple[int, int]] = {}
    for d in dirs:
        parsed = parse_partition_dir(d.name)
        result = verifier.partition(d, clean_shutdown=clean_shutdown)
        if parsed is not None and result is not None:
            ranges[parsed] = result
    if not single:
        _verify_checkpoints(verifier, root, ranges)
        _verify_groups(verifier, root)
    return VerifyReport(root, verifier.findings, len(dirs), verifier.segments, verifier.batches,
                        verifier.records, verifier.done, verifier.indexes, verifier.skipped)


def _verify_checkpoints(v: _Verifier, root: Path, ranges: dict[tuple[str, int], tuple[int, int]]) -> None:
    for name in (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT):
        offsets, problem = read_checkpoint(root, name)
        path = root / name
        if problem is not None:
            v.add(Severity.ERROR, Check.CHECKPOINT, path,
                  f"{problem}; the engine ignores it and recovers every partition from offset 0")
            continue
        if offsets is None:
            continue
        for (topic, partition), offset in sorted(offsets.items()):
            where = f"{topic} {partition}"
            span = ranges.get((topic, partition))
            if span is None:
                v.add(Severity.WARNING, Check.CHECKPOINT, path,
                      f"entry '{where} {offset}' names a partition with no segments here", offset=offset)
            elif offset > span[1]:
                v.add(Severity.ERROR, Check.CHECKPOINT, path,
                      f"entry '{where} {offset}' is beyond the partition's log end offset {span[1]}", offset=offset)
            elif name == LOG_START_OFFSET_CHECKPOINT and offset < span[0]:
                v.add(Severity.INFO, Check.CHECKPOINT, path,
                      f"entry '{where} {offset}' is below the first segment's base offset {span[0]} (stale)",
                      offset=offset)


def _verify_groups(v: _Verifier, root: Path) -> None:
    path = root / GROUPS_DIR
    try:
        image = read_store(root)
    except StorageError as exc:
        v.add(Severity.WARNING, Check.GROUP_FILE, path, f"unreadable group store ({exc}); the groups start over")
        return
    for problem in image.problems:
        v.add(Severity.WARNING, Check.GROUP_FILE, path,
              f"{problem} (the engine skips what is damaged; those commits are lost, their groups resume from "
              "earlier ones or start over)")
