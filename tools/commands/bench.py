"""``seglog bench [--quick] [--json [PATH]] [--only NAME,...]``: seglog's speed beside its denominators, one run.

A thin shell over :mod:`seglog.tools.bench`: parse the options, run the sections,
print the table (stdout) and the JSON report (stdout or PATH). Progress lines
go to stderr. docs/PERFORMANCE.md explains every figure.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from seglog.tools._output import EXIT_OK, UsageError, epilog, note
from seglog.tools.bench import ALL_SECTIONS, SECTIONS, BenchOptions, run_bench
from seglog.tools.bench.report import markdown

NOTES = f"""\
Sections: {", ".join(SECTIONS)} (the default; shapes is the matrix of 1, 10, 100
and 1000 records per append x 100-B and 1 KiB values, each read, looked up by time,
produced and fetched beside sqlite3, LMDB and RocksDB, with one verdict per target
and shape), wire (Kafka clients through
seglog serve beside a null sink and librdkafka's mock cluster; only with --only wire,
needs the wire extra), groups (1,000 consumer groups committing 10 partitions each,
beside the previous one-file-per-group store and sqlite3; only with --only groups), and
transactions (transactional produce in transactions of 100 and 10,000 records beside
plain and idempotent appends; only with --only transactions).
Every figure is printed beside its raw reference (msgpack + os.write; read + unpack;
one executor round trip; read + CRC-32C) and beside sqlite3 WAL (synchronous=NORMAL and FULL) and diskcache
doing the same work, measured in the same run with the variants interleaved
round by round; the ratios and their targets are printed last. A full run
takes a few minutes and ~2 GB of scratch space under --workdir (default: the
system temp dir); --quick is a smoke test of a few seconds (its figures are
not meaningful). See docs/PERFORMANCE.md."""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "bench",
        help="benchmark seglog against the machine's raw limits, sqlite3 and diskcache (ratios, same run)",
        description="Measure produce, fetch, point and timestamp reads, subscribe latency, recovery, clean "
        "open and memory, each beside its raw reference and its peers, plus the scaling runs and the matrix "
        "of append shapes; print a table and the ratios the performance targets are stated in.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=epilog(
            "seglog bench --json bench.json",
            "seglog bench --quick --json",
            "seglog bench --only produce,lookup",
            "seglog bench --only shapes --json shapes.json",
            "seglog bench --only fetch --gc-threshold 50000",
            "seglog bench --only wire",
            "seglog bench --only groups",
            "seglog bench --only transactions",
            notes=NOTES,
        ),
    )
    p.add_argument("--quick", action="store_true", help="tiny sizes, one round: a smoke test (seconds)")
    p.add_argument(
        "--json",
        nargs="?",
        const="-",
        default=None,
        metavar="PATH",
        help="write the JSON report to PATH (default, or '-': stdout, and no table)",
    )
    p.add_argument("--markdown", default=None, metavar="PATH", help="also write the tables as Markdown to PATH")
    p.add_argument("--only", default=None, metavar="NAME,...",
                   help=f"run only these sections ({', '.join(ALL_SECTIONS)})")
    p.add_argument("--workdir", default=None, metavar="DIR", help="scratch directory (default: system temp dir)")
    p.add_argument("--seed", type=int, default=7, help="seed of the random offsets and timestamps (default 7)")
    p.add_argument(
        "--gc-threshold",
        type=int,
        default=None,
        metavar="N",
        help="run everything with gc.set_threshold(N) (default: Python's 700); see docs/PERFORMANCE.md",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    only = tuple(SECTIONS)
    if args.only:
        only = tuple(name.strip() for name in args.only.split(",") if name.strip())
        unknown = [name for name in only if name not in ALL_SECTIONS]
        if unknown or not only:
            raise UsageError(
                f"--only: unknown section(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(ALL_SECTIONS)}"
            )
    workdir = Path(args.workdir) if args.workdir else None
    if workdir is not None and not workdir.is_dir():
        raise UsageError(f"--workdir {workdir}: not a directory")
    if args.gc_threshold is not None and args.gc_threshold < 1:
        raise UsageError(f"--gc-threshold {args.gc_threshold}: must be at least 1")
    report = run_bench(
        BenchOptions(
            quick=args.quick, only=only, workdir=workdir, seed=args.seed, progress=note, gc_threshold=args.gc_threshold
        )
    )
    document = report.as_json()
    document["command"] = "seglog bench " + " ".join(sys.argv[2:]) if sys.argv[1:2] == ["bench"] else "seglog bench"
    if args.markdown:
        Path(args.markdown).write_text(markdown(document), encoding="utf-8")
        note(f"Markdown tables written to {args.markdown}")
    if args.json == "-":
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
        return EXIT_OK
    report.print()
    if args.json:
        Path(args.json).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        note(f"JSON report written to {args.json}")
    return EXIT_OK
