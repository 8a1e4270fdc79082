"""``seglog verify [DIR]``: check every segment and index of a log directory; exit 1 on findings.

A thin shell over :func:`seglog.engine.offline.verify` (read-only: no lock, no write).
Findings go to stdout, one per line (``severity [check] FILE @POSITION
(offset N): message``), the summary to stderr. Exit 0 when no error or warning was found,
1 otherwise, 2 when DIR is not a directory.
"""

from __future__ import annotations

import argparse
from typing import Any

from seglog.engine import offline
from seglog.engine.offline import Severity
from seglog.tools._output import (
    EXIT_FINDINGS,
    EXIT_OK,
    add_command,
    add_json,
    add_log_dir,
    log_dir_of,
    note,
    print_json,
    scan_progress,
    time_arg,
)

NOTES = """\
Checks: batch headers and CRC-32C; offsets increasing inside a segment and
following on across segments; the tail of every .log (torn write, garbage,
preallocated zeros); every offset-index entry points at the start of the batch
holding its offset; the time index is monotonic and each entry carries the
largest timestamp up to its offset; index lengths are whole entries; orphan
index files; the transaction index; topic.json, checkpoint and consumer-group
files. Severities: error (recovery would cut or rebuild something), warning
(consistent but not what seglog leaves behind), info (normal for a running or
crashed engine; shown with --verbose). Exit 0: no error or warning; 1: findings."""


def register(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "verify",
        help="check every segment and index of a log directory (read-only); exit 1 on findings",
        description="Check every segment, index and state file of a log directory (or one partition "
        "directory) without changing anything, and name each bad file.",
        examples=[
            "seglog verify data",
            "seglog verify data/orders-0 --deep --json > report.json",
        ],
        notes=NOTES,
    )
    p.add_argument("dir", nargs="?", metavar="DIR", help="log directory or partition directory (default: --log-dir)")
    add_log_dir(p)
    p.add_argument("--deep", action="store_true", help="also decode every record (slower)")
    p.add_argument("--since", type=time_arg, metavar="T",
                   help="check only segments with a file modified at or after T (ISO 8601 or epoch ms)")
    p.add_argument("-v", "--verbose", action="store_true", help="also print info findings")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (it is off when not a TTY)")
    add_json(p, "the report (every finding, info included)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    path = log_dir_of(args)
    with scan_progress("verify", enabled=not args.no_progress) as on_progress:
        report = offline.verify(path, deep=args.deep, since_ms=args.since, on_progress=on_progress)
    if args.json:
        print_json({"ok": report.ok, "bad_files": report.bad_files, **_summary(report), "findings": report.findings})
    else:
        for f in report.findings:
            if args.verbose or f.severity is not Severity.INFO:
                print(f)
    errors = sum(f.severity is Severity.ERROR for f in report.findings)
    warnings = sum(f.severity is Severity.WARNING for f in report.findings)
    note(
        f"{path}: {report.partitions} partition(s), {report.segments} segment(s), {report.batches} batch(es), "
        f"{report.records} record(s), {report.bytes_checked} bytes, {report.indexes_checked} index file(s) checked"
        + (f" ({report.segments_skipped} segment(s) unchanged since --since, skipped)" if report.segments_skipped
           else "")
        + ": "
        + ("consistent" if report.ok
           else f"{errors} error(s), {warnings} warning(s) in {len(report.bad_files)} file(s)")
    )
    return EXIT_OK if report.ok else EXIT_FINDINGS


def _summary(report: offline.VerifyReport) -> dict[str, Any]:
    return {
        "path": report.path, "partitions": report.partitions, "segments": report.segments,
        "batches": report.batches, "records": report.records, "bytes_checked": report.bytes_checked,
        "indexes_checked": report.indexes_checked, "segments_skipped": report.segments_skipped,
    }
