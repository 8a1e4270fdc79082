"""``seglog workload validate|describe|generate``: check, summarise or generate workload files.

``validate`` lists every problem with its row and column and exits 1 when it
finds any; ``describe`` summarises a valid workload; ``generate`` writes the
deterministic sample workload (the one bundled in ``examples/``).
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Any

from seglog.tools._output import Column, UsageError, note, print_json, print_table
from seglog.tools.replay.cliutil import missing_extra, print_findings, topic_count_arg

EPILOG = """\
Examples:
  seglog workload validate capture.parquet
  seglog workload validate capture.jsonl --json
  seglog workload describe examples/sample-workload.parquet
  seglog workload generate sample.parquet --seed 7 --duration 12
"""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "workload",
        help="validate, describe or generate a workload file",
        description="Work with recorded-workload files (docs/WORKLOADS.md).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
    )
    sub = p.add_subparsers(dest="workload_command", metavar="ACTION", required=True)

    v = sub.add_parser(
        "validate",
        help="list every problem of a workload file (row and column); exit 1 when any",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Example:\n  seglog workload validate capture.parquet --json",
    )
    v.add_argument("file", help="workload file (.parquet, Parquet dataset directory, .jsonl)")
    v.add_argument("--partitions", type=topic_count_arg, action="append", default=[], metavar="TOPIC=N",
                   help="partition count of a topic, overriding the file's (repeatable)")
    v.add_argument("--json", action="store_true", help="print the findings as JSON on stdout")
    v.set_defaults(func=run_validate)

    d = sub.add_parser(
        "describe",
        help="summarise a workload: rows per topic and op, producers, time span",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Example:\n  seglog workload describe examples/sample-workload.parquet",
    )
    d.add_argument("file")
    d.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    d.set_defaults(func=run_describe)

    g = sub.add_parser(
        "generate",
        help="write the deterministic sample workload",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Example:\n  seglog workload generate sample.parquet --seed 7",
    )
    g.add_argument("output", type=Path, help="file to write (.parquet or .jsonl)")
    g.add_argument("--seed", type=int, default=None, help="random seed (default 7, the bundled sample)")
    g.add_argument("--duration", type=float, default=None, metavar="SECONDS",
                   help="capture time to cover (default 12)")
    g.set_defaults(func=run_generate)


def run_validate(args: argparse.Namespace) -> int:
    """Exit 0 when the file has no problems, 1 with the findings (stderr; ``--json`` on stdout)."""
    if missing_extra():
        return 1
    from seglog.tools.replay.format import WorkloadError, read_raw
    from seglog.tools.replay.validate import validate_raw

    try:
        raw = read_raw(args.file)
    except WorkloadError as exc:
        findings = list(exc.findings)
        nrows = 0
    else:
        raw.declared_partitions.update(dict(args.partitions))
        findings = validate_raw(raw)
        nrows = raw.nrows
    if args.json:
        print_json({"path": str(args.file), "rows": nrows, "ok": not findings,
                    "findings": [f.to_json() for f in findings]})
    if findings:
        note(f"{args.file}: {len(findings)} problem(s) in {nrows} rows:")
        print_findings(findings)
        return 1
    note(f"{args.file}: {nrows} rows, no problems")
    return 0


def run_describe(args: argparse.Namespace) -> int:
    """Rows per topic and op, producers and time span of a valid workload (exit 1 when invalid)."""
    if missing_extra():
        return 1
    from seglog.tools.replay.format import WorkloadError, load_workload

    try:
        w = load_workload(args.file)
    except WorkloadError as exc:
        note(f"Error: {exc}")
        return 1
    per = Counter((r.topic, r.op) for r in w.rows)
    producers = Counter(r.producer for r in w.rows)
    span = (max(r.ts_ns for r in w.rows) - min(r.ts_ns for r in w.rows)) / 1e9
    topics = {t: {"partitions": n, **{op: c for (tt, op), c in sorted(per.items()) if tt == t}}
              for t, n in sorted(w.partitions.items())}
    if args.json:
        print_json({"path": str(args.file), "rows": len(w.rows), "span_s": round(span, 3), "topics": topics,
                    "producers": dict(sorted(producers.items()))})
        return 0
    ops = ("produce", "fetch", "fetch_time")
    print_table(
        [Column("topic"), Column("partitions", "right"), *(Column(op, "right") for op in ops)],
        [[t, spec["partitions"], *(spec.get(op, 0) for op in ops)] for t, spec in topics.items()],
        title=f"{args.file}: {len(w.rows)} rows over {span:.2f} s of capture time",
    )
    note("producers: " + ", ".join(f"{p or '(none)'} ({n})" for p, n in sorted(producers.items())))
    return 0


def run_generate(args: argparse.Namespace) -> int:
    """Write the sample workload (exit 0), or exit 1 when the extra is missing.

    Raises:
        UsageError: a non-positive --duration (exit 2).
    """
    if args.duration is not None and not args.duration > 0:
        raise UsageError("--duration must be > 0")
    if missing_extra():
        return 1
    from seglog.tools.replay.format import write_workload
    from seglog.tools.replay.sample import DEFAULT_DURATION_S, DEFAULT_SEED, generate_sample

    seed = DEFAULT_SEED if args.seed is None else args.seed
    w = generate_sample(seed, DEFAULT_DURATION_S if args.duration is None else args.duration)
    path = write_workload(args.output, w.rows, w.partitions)
    note(f"Wrote {len(w.rows)} rows (seed {seed}) to {path}")
    return 0
