"""``seglog recover [DIR] [--dry-run]``: show, or perform, what crash recovery does to a log directory.

``--dry-run`` asks :func:`seglog.engine.offline.plan_recovery` (read-only) which
segments a forced recovery would scan, where each would be cut and why, and
which indexes it would rebuild. Without it, the directory is opened with
``Engine.open(force_recovery=True)`` (taking the directory lock, so not while
another engine has it open), with a progress bar over the partitions, and
closed cleanly.
"""

from __future__ import annotations

import argparse
from typing import Any

from seglog.engine import Engine, RecoveryProgress, offline
from seglog.tools._output import (
    EXIT_OK,
    Column,
    add_command,
    add_json,
    add_log_dir,
    log_dir_of,
    note,
    print_json,
    print_table,
    progress,
    run_async,
    scan_progress,
)

NOTES = """\
Recovery scans every segment from the one holding the partition's checkpointed
recovery point to the end: batches are checked (length, CRC-32C, offsets
increasing), the segment is cut after its last valid batch, its indexes are
rebuilt, and the segments after a cut one are deleted. An engine does this by
itself when it opens a directory that was not shut down cleanly; 'recover'
forces it (for example after restoring files from a backup)."""


def register(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "recover",
        help="show (--dry-run) or run crash recovery: truncate torn tails, rebuild indexes",
        description="Show (--dry-run, read-only) or perform what recovery does to a log directory: which "
        "segments are after the recovery point, where each is truncated and why, which indexes are rebuilt.",
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
    add_json(p, "the plan (--dry-run) or the result per partition")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    path = log_dir_of(args)
    if args.dry_run:
        return _dry_run(args, path)
    return _recover(args, path)


def _dry_run(args: argparse.Namespace, path: Any) -> int:
    with scan_progress("scan", enabled=not args.no_progress) as on_progress:
        plan = offline.plan_recovery(path, force=True, on_progress=on_progress)
    if args.json:
        print_json({"path": plan.path, "clean_shutdown": plan.clean_shutdown,
                    "recovery_checkpoint_problem": plan.recovery_checkpoint_problem,
                    "segments_to_recover": plan.segments_to_recover, "bytes_truncated": plan.bytes_truncated,
                    "partitions": plan.partitions})
        return EXIT_OK
    rows = [
        (f"{part.topic}-{part.partition}", s.path.name, s.action, s.valid_bytes, s.truncated_bytes, s.next_offset,
         ", ".join(s.rebuilt_indexes) or "-", s.reason)
        for part in plan.partitions
        for s in part.segments
    ]
    print_table(["partition", "segment", "action", "valid bytes", "cut bytes", "next offset", "rebuilt", "reason"],
                rows)
    if plan.clean_shutdown:
        note(f"{path}: shut down cleanly; a normal open recovers only segments missing an index file, "
             "'seglog recover' does all of the above")
    else:
        note(f"{path}: not shut down cleanly; the next open does the above")
    for part in plan.partitions:
        for removed in part.removed_files:
            note(f"removed at open: {removed} (a leftover of interrupted work, or an index without its .log)")
    if plan.recovery_checkpoint_problem:
        note(f"recovery-point checkpoint unreadable ({plan.recovery_checkpoint_problem}): recovering from offset 0")
    for part in plan.partitions:
        note(f"{part.topic}-{part.partition}: recovery point {part.recovery_point}, {part.segments_before} segment(s) "
             f"below it not scanned, log end offset after recovery {part.log_end_offset_after}")
    note(f"dry run: {plan.segments_to_recover} segment(s) to scan, {plan.bytes_truncated} byte(s) to cut; "
         "nothing was changed")
    return EXIT_OK


def _recover(args: argparse.Namespace, path: Any) -> int:
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
    if args.json:
        print_json({"path": path, "partitions": events,
                    "segments_recovered": sum(e.segments_recovered for e in events),
                    "bytes_truncated": sum(e.bytes_truncated for e in events)})
    else:
        print_table([Column("partition"), Column("segments", "right"), Column("bytes scanned", "right"),
                     Column("bytes truncated", "right")],
                    [(f"{e.topic}-{e.partition}", e.segments_recovered, e.bytes_recovered, e.bytes_truncated)
                     for e in events])
    note(f"{path}: recovered {len(events)} partition(s), {sum(e.segments_recovered for e in events)} segment(s), "
         f"truncated {sum(e.bytes_truncated for e in events)} byte(s); closed cleanly")
    return EXIT_OK
