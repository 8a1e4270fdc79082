"""``seglog recover [DIR] [--dry-run]``: show, or perform, what crash recovery does to a log directory.

``--dry-run`` asks :func:`seglog.engine.loader.dry_run_recovery` -- the open's
own rules over read-only files -- which segments a forced recovery would scan,
cut, set aside or delete and why. Without it, the directory is opened with
``Engine.open(force_recovery=True)`` (taking the directory lock, so not while
another engine has it open), with a progress bar over the partitions, and
closed cleanly; the table then shows what the open did, in the same form.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from seglog.engine import Engine, RecoveryProgress, offline
from seglog.engine.loader import PartitionRecovery, dry_run_recovery
from seglog.segments.files import segment_file_name
from seglog.tools._output import (
    EXIT_OK,
    add_command,
    add_json,
    add_log_dir,
    log_dir_of,
    note,
    print_json,
    print_table,
    progress,
    run_async,
)

NOTES = """\
Recovery scans every segment from the one holding the partition's checkpointed
recovery point to the end: batches are checked (length, CRC-32C, offsets
increasing), the segment is cut after its last valid batch, its indexes are
rebuilt, and the segments after a cut one are deleted. Segments that do not
chain with the log -- a first batch whose base offset is not the file name's,
a segment overlapping the log, or one after a gap -- are set aside (renamed
*.<ms>.stray, kept on disk, never served). An engine does this by itself when
it opens a directory that was not shut down cleanly, and for a partition whose
files do not match the clean-shutdown record; 'recover' forces it (for example
after restoring files from a backup)."""


def register(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "recover",
        help="show (--dry-run) or run crash recovery: truncate torn tails, rebuild indexes",
        description="Show (--dry-run, read-only) or perform what recovery does to a log directory: which "
        "segments are after the recovery point, where each is truncated and why, which are set aside or deleted.",
        examples=[
            "seglog recover data --dry-run",
            "seglog recover data",
        ],
        notes=NOTES,
    )
    p.add_argument("dir", nargs="?", metavar="DIR", help="log directory (default: --log-dir)")
    add_log_dir(p)
    p.add_argument("--dry-run", action="store_true", help="only show what recovery would do; change nothing")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (it is off when not a TTY)")
    add_json(p, "the plan (--dry-run) or what was done, per partition")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    path = log_dir_of(args)
    if args.dry_run:
        return _dry_run(args, path)
    return _recover(args, path)


def partition_json(p: PartitionRecovery) -> dict[str, Any]:
    """One partition's recovery as the JSON of ``recover --json`` and ``recover --dry-run --json``."""
    plan = p.plan
    listed = plan.facts.segments
    return {
        "topic": p.topic,
        "partition": p.partition,
        "recovery_point": plan.recovery_point,
        "recovered_from": listed[plan.unclean_from].base_offset if plan.unclean_from < len(listed) else None,
        "why": plan.unclean_why or None,
        "record_problem": plan.record_problem,
        "removed_files": list(plan.removed_files),
        "removed_snapshots": [{"file": r.name, "reason": r.reason} for r in p.removed_snapshots],
        "segments": [
            {"base_offset": s.base_offset, "file": segment_file_name(s.base_offset), "action": s.action,
             "file_bytes": s.file_bytes, "valid_bytes": s.valid_bytes, "truncated_bytes": s.truncated_bytes,
             "next_offset": s.next_offset, "reason": s.reason}
            for s in p.segments
        ],
        "log_start_offset": p.log_start_offset,
        "log_end_offset": p.log_end_offset,
        "new_segment_at": p.new_segment_at,
        "notes": list(p.notes),
    }


def _table(partitions: list[PartitionRecovery]) -> None:
    rows = [
        (f"{p.topic}-{p.partition}", segment_file_name(s.base_offset), s.action, s.valid_bytes, s.truncated_bytes,
         "-" if s.next_offset is None else s.next_offset, s.reason)
        for p in partitions
        for s in p.segments
    ]
    print_table(["partition", "segment", "action", "valid bytes", "cut bytes", "next offset", "reason"], rows)


def _notes(path: Path, partitions: list[PartitionRecovery], *, dry_run: bool) -> None:
    for p in partitions:
        name = f"{p.topic}-{p.partition}"
        for removed in p.plan.removed_files:
            note(f"{name}: removed at open: {removed} (a leftover of interrupted work, or an index without its .log)")
        for snap in p.removed_snapshots:
            note(f"{name}: producer snapshot {snap.name} {'to be ' if dry_run else ''}deleted: {snap.reason}")
        for text in p.notes:
            note(f"{name}: {text}")
        scanned_from = p.plan.unclean_from
        note(f"{name}: recovery point {p.plan.recovery_point}, {scanned_from} segment(s) below it not scanned "
             f"(unless an index file is missing), log {p.log_start_offset}..{p.log_end_offset} after recovery")


def _dry_run(args: argparse.Namespace, path: Path) -> int:
    with progress("scan", None, enabled=not args.no_progress) as advance:
        plan = dry_run_recovery(path, force=True, on_segment=lambda _: advance(1))
    if args.json:
        print_json({"path": plan.path, "clean_shutdown": plan.clean_shutdown,
                    "recovery_checkpoint_problem": plan.recovery_checkpoint_problem,
                    "segments_to_recover": plan.segments_to_recover, "bytes_truncated": plan.bytes_truncated,
                    "partitions": [partition_json(p) for p in plan.partitions]})
        return EXIT_OK
    _table(plan.partitions)
    if plan.clean_shutdown:
        note(f"{path}: shut down cleanly; a normal open recovers only segments missing an index file and "
             "partitions whose files do not match the clean-shutdown record, 'seglog recover' does all of the above")
    else:
        note(f"{path}: not shut down cleanly; the next open does the above")
    if plan.recovery_checkpoint_problem:
        note(f"recovery-point checkpoint unreadable ({plan.recovery_checkpoint_problem}): recovering from offset 0")
    _notes(path, plan.partitions, dry_run=True)
    note(f"dry run: {plan.segments_to_recover} segment(s) to look at, {plan.bytes_truncated} byte(s) to cut or "
         "take out of the log; nothing was changed")
    return EXIT_OK


def _recover(args: argparse.Namespace, path: Path) -> int:
    events: list[RecoveryProgress] = []
    total = len(offline.describe_log_dir(path).partitions)

    async def work(advance: Any) -> None:
        def on_progress(p: RecoveryProgress) -> None:
            events.append(p)
            advance(1)

        engine = await Engine.open(path, read_only=False, on_progress=on_progress, force_recovery=True)
        await engine.close()

    with progress("recover", total, enabled=not args.no_progress) as advance:
        run_async(work(advance))
    done = [e.recovery for e in events if e.recovery is not None]
    segments = sum(e.segments_recovered for e in events)
    truncated = sum(e.bytes_truncated for e in events)
    if args.json:
        print_json({"path": path, "segments_recovered": segments, "bytes_truncated": truncated,
                    "partitions": [partition_json(p) for p in done]})
    else:
        _table(done)
        _notes(path, done, dry_run=False)
    note(f"{path}: recovered {len(events)} partition(s), {segments} segment(s), truncated {truncated} byte(s); "
         "closed cleanly")
    return EXIT_OK
