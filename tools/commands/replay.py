"""``seglog replay``: replay a recorded workload into a log directory and report on it.

A thin shell over :mod:`tools.replay`: load and validate the workload, build
the plan, run it (uvloop when installed), write the JSON report and the plots,
print the summary on stderr. Exit 0 when every record landed and was verified
and nothing failed; 1 for an invalid workload, a failed call or a verification
mismatch; 2 for usage errors.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from tools.replay.cliutil import (
    config_arg,
    missing_extra,
    print_findings,
    progress_bar,
    say,
    speed_arg,
    topic_count_arg,
)

EPILOG = """\
The workload is Parquet (a file or a dataset directory) or JSON Lines; see
docs/WORKLOADS.md. Pacing follows the rows' ts_ns capture times: --speed 1 is
the recorded pace, --speed 10 (or 10x) ten times faster, --speed max as fast
as possible. The report (JSON) holds throughput, HDR latency percentiles,
schedule lag, fidelity, storage figures, errors and the verification of every
partition; plots are written next to it.

Examples:
  seglog replay examples/sample-workload.parquet --log-dir data --report reports/replay.json
  seglog replay capture.jsonl --log-dir /tmp/try --speed max --consumers 2 --json > report.json
  seglog replay capture.parquet --log-dir /tmp/try --speed 4x --config segment_bytes=262144
"""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "replay",
        help="replay a recorded workload into a log directory (paced), with a report",
        description="Replay a recorded workload (produce and fetch calls) into a log directory at the "
        "recorded pace, N times faster, or as fast as possible; report latency, schedule lag and "
        "throughput, and verify that the log holds exactly the workload's records.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
    )
    p.add_argument("workload", help="workload file (.parquet, a Parquet dataset directory, or .jsonl)")
    p.add_argument("--log-dir", required=True, help="log directory to replay into (created if missing)")
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
    p.add_argument("--config", type=config_arg, action="append", default=[], metavar="KEY=VALUE",
                   help="LogConfig setting for the engine, e.g. segment_bytes=262144 (repeatable)")
    p.add_argument("--no-verify", action="store_true", help="skip reading the log back after the replay")
    p.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (it is off when not a TTY)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    err = Console(stderr=True)
    if args.consumers < 0:
        say(err, "Error: --consumers must be >= 0")
        return 2
    if missing_extra(err):
        return 1
    from engine import LogConfig
    from tools.replay.format import WorkloadError, load_workload
    from tools.replay.plan import build_plan
    from tools.replay.report import build_report, print_summary
    from tools.replay.runner import ReplayOptions, replay_into, run_async

    config_kwargs = dict(args.config)
    try:
        config = LogConfig(**config_kwargs)
    except TypeError as exc:
        say(err, f"Error: --config: {exc}")
        return 2
    try:
        workload = load_workload(args.workload, dict(args.partitions))
    except WorkloadError as exc:
        say(err, f"Error: {exc.path}: the workload has {len(exc.findings)} problem(s):")
        print_findings(exc.findings, err)
        return 1
    plan = build_plan(workload)
    # The plan lives until the end; a full collection over it and the imported modules
    # (~50,000 objects for the sample) stops the event loop for ~11 ms -- schedule lag.
    gc.collect()
    gc.freeze()
    options = ReplayOptions(speed=args.speed, consumers=args.consumers, verify=not args.no_verify)
    with progress_bar("replay", plan.total_rows, enabled=not args.no_progress, console=err) as advance:
        outcome = run_async(replay_into(args.log_dir, plan, options, config=config, progress=advance))
    report = build_report(
        workload_path=str(args.workload), plan=plan, options=options, outcome=outcome,
        log_dir=str(args.log_dir), config=config_kwargs,
    )
    written: list[Path] = []
    if args.report is not None:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        if not args.no_plots:
            from tools.replay.plots import write_plots

            report["plots"] = [str(p) for p in write_plots(report, args.report)]
        _write_json(args.report, report)
        written = [args.report, *map(Path, report.get("plots", []))]
    print_summary(report, err)
    if written:
        say(err, f"Report: {written[0]}")
        if len(written) > 1:
            say(err, "Plots:  " + ", ".join(str(p) for p in written[1:]))
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    return 0 if outcome.ok else 1


def _write_json(path: Path, report: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
