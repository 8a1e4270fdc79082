"""``seglog replay``: replay a recorded workload into a log directory and report on it.

A thin shell over :mod:`seglog.tools.replay`: load and validate the workload, build
the plan, run it (uvloop when installed), write the JSON report and the plots,
print the summary on stderr. Exit 0 when every record landed and was verified
and nothing failed; 1 for an invalid workload, a failed call or a verification
mismatch; 2 for usage errors.
"""

from __future__ import annotations

import argparse
import gc
import json
from pathlib import Path
from typing import Any

from seglog.tools._output import (
    UsageError,
    add_log_dir,
    key_value_arg,
    log_dir_of,
    note,
    print_json,
    progress,
    stderr_console,
)
from seglog.tools.replay.cliutil import (
    PLOTS_SKIPPED,
    missing_extra,
    plots_available,
    print_findings,
    speed_arg,
    topic_count_arg,
)

EPILOG = """\
The workload is Parquet (a file or a dataset directory) or JSON Lines; see
docs/WORKLOADS.md. Pacing follows the rows' ts_ns capture times: --speed 1 is
the recorded pace, --speed 10 (or 10x) ten times faster, --speed max as fast
as possible. The report (JSON) holds throughput, HDR latency percentiles,
schedule lag, fidelity, storage figures, errors and the verification of every
partition; PNG plots are written next to it when the 'plots' extra
(matplotlib) is installed.

Examples:
  seglog replay examples/sample-workload.parquet --log-dir data --report reports/replay.json
  seglog replay capture.jsonl --log-dir /tmp/try --speed max --consumers 2 --json > report.json
  seglog replay capture.parquet --log-dir /tmp/try --speed 4x --config segment.bytes=262144
"""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "replay",
        help="replay a recorded workload into a log directory (paced), with a report",
        description="Replay a recorded workload (produce and fetch calls) into a log directory at the\n"
        "recorded pace, N times faster, or as fast as possible; report latency, schedule lag and\n"
        "throughput, and verify that the log holds exactly the workload's records.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
    )
    p.add_argument("workload", help="workload file (.parquet, a Parquet dataset directory, or .jsonl)")
    add_log_dir(p)
    p.add_argument("--speed", type=speed_arg, default=1.0, metavar="1|N|Nx|max",
                   help="pace: 1 = recorded pace (default), N = N times faster, max = no pacing")
    p.add_argument("--report", type=Path, metavar="PATH",
                   help="write the JSON report here, and the plots next to it (<stem>-throughput.png, "
                        "<stem>-latency.png)")
    p.add_argument("--no-plots", action="store_true", help="do not draw the PNG plots")
    p.add_argument("--consumers", type=int, default=0, metavar="N",
                   help="tailing consumers (subscribe) that measure end-to-end latency (default 0)")
    p.add_argument("--partitions", type=topic_count_arg, action="append", default=[], metavar="TOPIC=N",
                   help="partition count of a topic, overriding the workload's (repeatable)")
    p.add_argument("--config", type=key_value_arg, action="append", default=[], metavar="KEY=VALUE",
                   help="log config for the topics it creates, Kafka's keys, e.g. segment.bytes=262144 "
                        "(repeatable)")
    p.add_argument("--no-verify", action="store_true", help="skip reading the log back after the replay")
    p.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (it is off when not a TTY)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load, validate, plan, replay, report. Exit 0 ok, 1 invalid workload / errors / mismatch.

    Raises:
        UsageError: a bad --consumers or --config value (exit 2).
    """
    if args.consumers < 0:
        raise UsageError("--consumers must be >= 0")
    if missing_extra():
        return 1
    from seglog.engine import LogConfig, errors
    from seglog.engine import run as run_async
    from seglog.tools.replay.format import WorkloadError, load_workload
    from seglog.tools.replay.plan import build_plan
    from seglog.tools.replay.report import build_report, print_summary
    from seglog.tools.replay.runner import ReplayOptions, replay_into

    try:
        config = LogConfig.from_properties(dict(args.config))
    except errors.InvalidConfigError as exc:
        raise UsageError(f"--config: {exc}") from None
    log_dir = log_dir_of(args, must_exist=False)
    try:
        workload = load_workload(args.workload, dict(args.partitions))
    except WorkloadError as exc:
        note(f"Error: {exc.path}: the workload has {len(exc.findings)} problem(s):")
        print_findings(exc.findings)
        return 1
    plan = build_plan(workload)
    # The plan lives until the end; a full collection over it and the imported modules
    # (tens of thousands of objects for the sample) would stop the event loop mid-replay -- schedule lag.
    gc.collect()
    gc.freeze()
    options = ReplayOptions(speed=args.speed, consumers=args.consumers, verify=not args.no_verify)
    with progress("replay", plan.total_rows, enabled=not args.no_progress, unit="rows") as advance:
        outcome = run_async(replay_into(log_dir, plan, options, config=config, progress=advance))
    report = build_report(
        workload_path=str(args.workload), plan=plan, options=options, outcome=outcome,
        log_dir=str(log_dir), config=dict(args.config),
    )
    if args.report is not None:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        if not args.no_plots and plots_available():
            from seglog.tools.replay.plots import write_plots

            report["plots"] = [str(p) for p in write_plots(report, args.report)]
        _write_json(args.report, report)
    print_summary(report, stderr_console())
    if args.report is not None:
        note(f"Report: {args.report}")
        if report.get("plots"):
            note("Plots:  " + ", ".join(report["plots"]))
        elif not args.no_plots:
            note("Plots:  " + PLOTS_SKIPPED)
    if args.json:
        print_json(report)
    return 0 if outcome.ok else 1


def _write_json(path: Path, report: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
