"""``seglog pipeline``: the Spark jobs (export, import, prepare-workload, report).

A thin shell over :mod:`seglog.tools.spark.jobs`; each subcommand starts one
SparkSession on ``--master`` (like spark-submit's; default ``local[2]``) with
the ``seglog`` source registered, runs one job and stops the session.
pyspark is the ``spark`` extra: without it the command says so and exits 1.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from typing import Any

EPILOG = """\
Subcommands:
  export            log directory -> Parquet (Kafka-source schema, hive-partitioned by
                    topic/partition); a manifest in the output makes the next export
                    continue exactly where this one stopped
  import            Parquet / JSON Lines -> log directory through the seglog writer
  prepare-workload  raw recordings -> one validated workload sorted by capture time
  report            many replay reports -> one table (JSON, CSV) and a plot

Examples:
  seglog pipeline export data exports/
  seglog pipeline import exports/ restored/ --master local[4]
  seglog pipeline prepare-workload rec-a.jsonl rec-b.parquet -o workload.parquet
  seglog pipeline report reports/ -o summary
"""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "pipeline",
        help="Spark jobs: export to Parquet, import, prepare workloads, aggregate reports",
        description="Run one of seglog's Spark jobs (needs the 'spark' extra: pip install 'seglog[spark]').",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
    )
    jobs = p.add_subparsers(dest="job", metavar="JOB", required=True)

    def job(name: str, help_text: str, example: str) -> argparse.ArgumentParser:
        q: argparse.ArgumentParser = jobs.add_parser(name, help=help_text, description=help_text,
                            formatter_class=argparse.RawDescriptionHelpFormatter, epilog=f"Example:\n  {example}")
        q.add_argument("--master", default="local[2]", help="Spark master URL, as spark-submit's (default local[2])")
        q.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting")
        q.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
        return q

    q = job("export", "export a log directory to Parquet, continuing from the last export",
            "seglog pipeline export data exports/ --topic orders")
    q.add_argument("log_dir")
    q.add_argument("out_dir")
    q.add_argument("--topic", action="append", dest="topics", metavar="TOPIC", help="topic (repeatable; default all)")
    q.set_defaults(func=_export)

    q = job("import", "import Parquet or JSON Lines files into a log directory",
            "seglog pipeline import exports/ restored/ --mode overwrite")
    q.add_argument("inputs", nargs="+", metavar="INPUT", help="files or directories")
    q.add_argument("log_dir")
    q.add_argument("--format", choices=("parquet", "json"), help="input format (default: by file suffix)")
    q.add_argument("--topic", help="write every row to this topic")
    q.add_argument("--partitions", type=int, default=1, help="partition count of topics the import creates")
    q.add_argument("--mode", choices=("append", "overwrite"), default="append",
                   help="overwrite deletes and recreates the topics written")
    q.set_defaults(func=_import)

    q = job("prepare-workload", "merge raw recordings into one validated, time-sorted replay workload",
            "seglog pipeline prepare-workload rec/*.jsonl -o workload.parquet --partitions orders=3")
    q.add_argument("inputs", nargs="+", metavar="INPUT", help="Parquet or JSON Lines recordings")
    q.add_argument("-o", "--output", required=True, help="workload file (.parquet, or .jsonl)")
    q.add_argument("--partitions", action="append", default=[], metavar="TOPIC=N",
                   help="partition count of a topic (default: highest partition seen + 1)")
    q.set_defaults(func=_prepare)

    q = job("report", "aggregate replay reports into one table and a plot",
            "seglog pipeline report reports/ -o summary")
    q.add_argument("inputs", nargs="+", metavar="INPUT", help="report files or directories of *.json")
    q.add_argument("-o", "--output", required=True, help="output prefix: writes .json, .csv and .png")
    q.set_defaults(func=_report)


def _session(args: argparse.Namespace) -> Any:
    from seglog.tools.spark.session import spark_session

    conf = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--conf {item!r}: use KEY=VALUE")
        conf[key] = value
    return spark_session(args.master, f"seglog pipeline {args.job}", conf)


def _with_spark(args: argparse.Namespace, body: Any) -> int:
    if importlib.util.find_spec("pyspark") is None:
        print("Error: pyspark is not installed; install the extra: pip install 'seglog[spark]'", file=sys.stderr)
        return 1
    spark = _session(args)
    try:
        return int(body(spark))
    finally:
        spark.stop()


def _emit(args: argparse.Namespace, doc: dict[str, Any], summary: str) -> None:
    if args.json:
        print(json.dumps(doc, sort_keys=True))
    print(summary, file=sys.stderr)


def _export(args: argparse.Namespace) -> int:
    from seglog.tools.spark.jobs import export_log

    def body(spark: Any) -> int:
        result = export_log(spark, args.log_dir, args.out_dir, topics=args.topics)
        doc = {"ranges": result.ranges, "gaps": result.gaps, "offsets": result.offsets, "manifest": result.manifest}
        gaps = f"; {len(result.gaps)} gap(s) left by retention" if result.gaps else ""
        _emit(args, doc, f"exported {result.offsets} offsets from {len(result.ranges)} partition(s) "
                         f"to {args.out_dir}{gaps}")
        return 0

    return _with_spark(args, body)


def _import(args: argparse.Namespace) -> int:
    from seglog.tools.spark.jobs import import_files

    def body(spark: Any) -> int:
        count = import_files(spark, args.inputs, args.log_dir, fmt=args.format, topic=args.topic,
                             partitions=args.partitions, mode=args.mode)
        _emit(args, {"rows": count, "log_dir": args.log_dir}, f"imported {count} rows into {args.log_dir}")
        return 0

    return _with_spark(args, body)


def _prepare(args: argparse.Namespace) -> int:
    from seglog.tools.spark.jobs import prepare_workload

    counts: dict[str, int] = {}
    for item in args.partitions:
        topic, sep, number = item.rpartition("=")
        if not sep or not number.isdigit() or int(number) < 1:
            print(f"Error: --partitions {item!r}: use TOPIC=N with N >= 1", file=sys.stderr)
            return 2
        counts[topic] = int(number)

    def body(spark: Any) -> int:
        rows, findings = prepare_workload(spark, args.inputs, args.output, partitions=counts)
        if findings:
            for f in findings[:50]:
                print(f"  {f}", file=sys.stderr)
            _emit(args, {"rows": rows, "findings": [str(f) for f in findings]},
                  f"{len(findings)} problem(s) in {rows} rows; nothing written")
            return 1
        _emit(args, {"rows": rows, "output": args.output}, f"wrote {rows} rows to {args.output}")
        return 0

    return _with_spark(args, body)


def _report(args: argparse.Namespace) -> int:
    from seglog.tools.spark.jobs import aggregate_reports

    def body(spark: Any) -> int:
        rows = aggregate_reports(spark, args.inputs, args.output)
        if not args.json:
            from rich.console import Console
            from rich.table import Table

            table = Table("run", "file", "started", "records/s", "append p99 ms", "errors", "verified")
            for i, r in enumerate(rows, 1):
                table.add_row(str(i), r["file"], str(r["started"]), str(r["records_per_s"]),
                              str(r["append_p99_ms"]), str(r["errors"]), str(r["verified"]))
            Console().print(table)
        _emit(args, {"rows": rows}, f"{len(rows)} report(s) -> {args.output}.json, .csv, .png")
        return 0

    return _with_spark(args, body)
