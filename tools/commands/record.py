"""``seglog record``: write a workload from the records of an existing log directory.

A thin shell over :func:`seglog.tools.replay.recorder.record_log` (the engine's public
read API only). To record an application's own calls instead, wrap its engine
in :class:`seglog.tools.replay.recorder.RecordingEngine` (see docs/WORKLOADS.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from seglog.tools._output import UsageError, add_log_dir, log_dir_of, note, print_json, progress, time_arg
from seglog.tools.replay.cliutil import missing_extra

EPILOG = """\
Each record becomes a produce row with its partition, its timestamp and
ts_ns = its timestamp (clamped so capture time never goes back within a
partition); one producer per partition keeps every partition's order. A time
range selects offsets as Kafka's ListOffsets does: [offset for --from-time,
offset for --to-time).

Examples:
  seglog record --log-dir data --output capture.parquet
  seglog record --log-dir data --topic orders --from-time 2026-11-22T10:00:00Z \\
      --to-time 2026-11-22T10:05:00Z --output orders.jsonl --json
"""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "record",
        help="write a workload file from the records of a log directory",
        description="Record the records of a log directory (all topics or some, optionally a time\n"
        "range) as a workload file that 'seglog replay' can replay.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
    )
    add_log_dir(p)
    p.add_argument("-o", "--output", required=True, type=Path,
                   help="workload file to write: .parquet (default) or .jsonl")
    p.add_argument("--topic", action="append", default=None, dest="topics", metavar="TOPIC",
                   help="topic to record (repeatable; default: every topic)")
    p.add_argument("--from-time", type=time_arg, metavar="TIME",
                   help="first record time (ISO 8601 or epoch ms), inclusive")
    p.add_argument("--to-time", type=time_arg, metavar="TIME",
                   help="end time (ISO 8601 or epoch ms), exclusive")
    p.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (it is off when not a TTY)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Record the log directory into a workload file. Exit 0, or 1 when the extra is missing.

    Raises:
        UsageError: no such log directory, or an empty time range (exit 2).
    """
    log_dir = log_dir_of(args)
    if args.from_time is not None and args.to_time is not None and args.to_time <= args.from_time:
        raise UsageError("--to-time must be after --from-time")
    if missing_extra():
        return 1
    from seglog.engine import Engine
    from seglog.engine import run as run_async
    from seglog.tools.replay.format import write_workload
    from seglog.tools.replay.recorder import record_log

    async def record() -> Any:
        async with Engine.open(log_dir) as engine:
            with progress("record", None, enabled=not args.no_progress, unit="records") as advance:
                return await record_log(engine, topics=args.topics, from_ms=args.from_time,
                                        to_ms=args.to_time, progress=advance)

    workload = run_async(record())
    path = write_workload(args.output, workload.rows, workload.partitions)
    span = (workload.rows[-1].ts_ns - workload.rows[0].ts_ns) / 1e9 if workload.rows else 0.0
    note(f"Recorded {len(workload.rows)} records from {len(workload.partitions)} topic(s) "
         f"({span:.1f} s of record time) into {path}")
    if args.json:
        print_json({"path": str(path), "rows": len(workload.rows),
                    "topics": dict(sorted(workload.partitions.items())), "span_s": round(span, 3)})
    return 0
