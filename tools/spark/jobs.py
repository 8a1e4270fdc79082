"""The ``seglog pipeline`` jobs, each one Spark job over the ``seglog`` source or plain files.

Owns: :func:`export_log` (log directory → Parquet in the Kafka-source schema,
hive-partitioned by topic and partition, continuing from a manifest),
:func:`import_files` (Parquet / JSON Lines → log directory through the
writer), :func:`prepare_workload` (raw recordings → one validated, time-sorted
replay workload, docs/WORKLOADS.md, with ``seglog.tools.replay``'s format and validator) and
:func:`aggregate_reports` (many replay reports → one table and a plot).

The export manifest (``<out>/_seglog_export.json``, written atomically after the
Parquet files are committed)::

    {"version": 1, "log_dir": "...",
     "next": {"orders-0": 1200, ...},                  # where the next export starts
     "runs": [{"run": "...", "finished": "...",        # one entry per export that wrote rows
               "ranges": {"orders-0": [1000, 1200]},   # [start, end) offsets exported
               "gaps": {"orders-0": [900, 1000]}}]}    # deleted by retention before export

Must not import: ``seglog.tools.cli``. Imports pyspark (and pyarrow/matplotlib for the workload and report jobs).
"""

from __future__ import annotations

import datetime as dt
import glob
import json
import os
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from seglog.engine import errors, offline
from seglog.tools.spark import read_seglog
from seglog.tools.spark.options import partition_key

__all__ = [
    "MANIFEST_NAME",
    "ExportResult",
    "aggregate_reports",
    "export_log",
    "import_files",
    "prepare_workload",
]

MANIFEST_NAME: Final = "_seglog_export.json"  # leading underscore: Spark's Parquet reader skips it
MANIFEST_VERSION: Final = 1  # part of the manifest format
KAFKA_COLUMNS: Final = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers")
WRITE_COLUMNS: Final = ("topic", "partition", "key", "value", "timestamp", "headers")
JSONL_SUFFIXES: Final = (".jsonl", ".ndjson", ".json")
# The workload columns (tools.replay.format.COLUMN_TYPES) as Spark types.
WORKLOAD_SPARK_TYPES: Final = {
    "topic": "string",
    "partition": "int",
    "key": "binary",
    "value": "binary",
    "timestamp": "timestamp",
    "headers": "array<struct<key:string,value:binary>>",
    "ts_ns": "bigint",
    "producer": "string",
    "seq": "bigint",
    "value_size": "int",
    "op": "string",
    "offset": "bigint",
    "max_bytes": "int",
}
# How JSON Lines carry them where that differs: binary as base64 text, timestamp as ISO 8601 or epoch ms.
JSON_TYPES: Final = {
    "key": "string",
    "value": "string",
    "timestamp": "string",
    "headers": "array<struct<key:string,value:string>>",
}


class PipelineError(errors.SeglogError):
    """A pipeline job cannot run as asked (bad input, a manifest from another log, findings)."""


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _write_json_atomic(path: Path, doc: Any) -> None:
    fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# --------------------------------------------------------------------------------------- export


@dataclass
class ExportResult:
    """What one export did: the ranges it wrote and the gaps retention left."""

    ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    gaps: dict[str, tuple[int, int]] = field(default_factory=dict)
    manifest: str = ""

    @property
    def offsets(self) -> int:
        """Offsets covered (records, as seglog assigns offsets densely)."""
        return sum(end - start for start, end in self.ranges.values())


def export_log(spark: Any, log_dir: str, out_dir: str, *, topics: Sequence[str] | None = None) -> ExportResult:
    """Export every record not exported yet from ``log_dir`` into ``out_dir`` (Parquet, hive-partitioned).

    The range of each partition is fixed before Spark runs (from the manifest's
    ``next`` offsets, or the log start, to the log end now), so records appended
    meanwhile wait for the next export, and no record is exported twice.

    Raises:
        PipelineError: ``out_dir`` holds a manifest of another log directory.
        StorageError: the log directory cannot be read.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / MANIFEST_NAME
    log_abs = str(Path(log_dir).absolute())
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("log_dir") != log_abs:
            raise PipelineError(
                f"{manifest_path}: exports of {manifest.get('log_dir')!r}, not {log_abs!r}; "
                "use another output directory"
            )
    else:
        manifest = {"version": MANIFEST_VERSION, "log_dir": log_abs, "next": {}, "runs": []}
    starts = offline.log_start_offsets(log_dir)
    result = ExportResult(manifest=str(manifest_path))
    idle: dict[str, int] = {}  # partitions with nothing new: pinned to an empty range in the read's options
    for topic, partition in offline.list_partitions(log_dir):
        if topics is not None and topic not in topics:
            continue
        key = partition_key(topic, partition)
        segments = offline.list_segments(offline.partition_path(log_dir, topic, partition))
        log_start = max(starts.get((topic, partition), 0), segments[0].base_offset if segments else 0)
        end = offline.log_end_offset(log_dir, topic, partition)
        begin = int(manifest["next"].get(key, log_start))
        if begin < log_start:
            result.gaps[key] = (begin, log_start)
            begin = log_start
        if end > begin:
            result.ranges[key] = (begin, end)
        else:
            idle[key] = end
    if result.ranges:
        starting: dict[str, dict[str, int]] = {}
        ending: dict[str, dict[str, int]] = {}
        every = {**{k: (v, v) for k, v in idle.items()}, **result.ranges}
        for key, (begin, end) in every.items():
            topic, _, number = key.rpartition("-")
            starting.setdefault(topic, {})[number] = begin
            ending.setdefault(topic, {})[number] = end
        df = read_seglog(
            spark,
            log_dir,
            topics=",".join(sorted(starting)),
            startingOffsets=json.dumps(starting),
            endingOffsets=json.dumps(ending),
        )
        df.select(*KAFKA_COLUMNS).write.mode("append").partitionBy("topic", "partition").parquet(str(out))
    if result.ranges or result.gaps:
        manifest["runs"].append(
            {
                "run": uuid.uuid4().hex,
                "finished": _now(),
                "ranges": {k: list(v) for k, v in sorted(result.ranges.items())},
                "gaps": {k: list(v) for k, v in sorted(result.gaps.items())},
            }
        )
        for key, (_, end) in result.ranges.items():
            manifest["next"][key] = end
        for key, (_, log_start) in result.gaps.items():
            manifest["next"].setdefault(key, log_start)
            manifest["next"][key] = max(manifest["next"][key], log_start)
        _write_json_atomic(manifest_path, manifest)
    return result


# --------------------------------------------------------------------------------------- import


def _is_jsonl(paths: Sequence[str]) -> bool:
    return all(p.lower().endswith(JSONL_SUFFIXES) for p in paths)


def _read_inputs(spark: Any, paths: Sequence[str], fmt: str | None) -> Any:
    """A DataFrame of Parquet or JSON Lines files in the workload / Kafka-source field names.

    JSON Lines carry binary fields in base64 and ``timestamp`` as ISO 8601 or
    integer milliseconds (``docs/WORKLOADS.md``); lines without a ``topic``
    (the ``seglog.workload`` metadata line) are dropped.
    """
    from pyspark.sql import functions as F

    fmt = fmt or ("json" if _is_jsonl(paths) else "parquet")
    if fmt == "parquet":
        return spark.read.option("mergeSchema", "true").parquet(*paths)
    if fmt != "json":
        raise PipelineError(f"unknown input format {fmt!r}: use parquet or json")
    schema = ", ".join(
        f"{name} {JSON_TYPES.get(name, kind)}" for name, kind in WORKLOAD_SPARK_TYPES.items()
    )
    df = spark.read.schema(schema).json(list(paths)).where(F.col("topic").isNotNull())  # drops the metadata line
    df = df.withColumn("key", F.unbase64("key")).withColumn("value", F.unbase64("value"))
    ts = F.col("timestamp")
    df = df.withColumn(
        "timestamp", F.when(ts.rlike(r"^-?\d+$"), F.timestamp_millis(ts.cast("long"))).otherwise(F.to_timestamp(ts))
    )
    return df.withColumn(
        "headers",
        F.transform("headers", lambda h: F.struct(h["key"].alias("key"), F.unbase64(h["value"]).alias("value"))),
    )


def import_files(
    spark: Any,
    inputs: Sequence[str],
    log_dir: str,
    *,
    fmt: str | None = None,
    topic: str | None = None,
    partitions: int = 1,
    mode: str = "append",
) -> int:
    """Write the rows of ``inputs`` into ``log_dir`` through the seglog writer; return the row count.

    Rows keep their order within each topic-partition: by ``offset`` when the
    input has it (an export), else by ``ts_ns``/``seq`` (a workload), else by
    their position in the input. ``topic`` overrides the rows' topic;
    ``partitions`` is the partition count of topics the import creates.

    Raises:
        PipelineError: no input, an unknown format, or rows without a topic.
    """
    from pyspark.sql import functions as F

    if not inputs:
        raise PipelineError("no input files")
    if mode not in ("append", "overwrite"):
        raise PipelineError(f"mode {mode!r}: the seglog writer supports append and overwrite")
    df = _read_inputs(spark, inputs, fmt)
    if topic is not None:
        df = df.withColumn("topic", F.lit(topic))
    if "value" not in df.columns:
        raise PipelineError("the input has no 'value' column")
    # Input position breaks ties (and is the only order when the input has no offsets or capture times).
    order = [c for c in ("offset", "ts_ns", "seq") if c in df.columns] + ["_seglog_order"]
    df = df.withColumn("_seglog_order", F.monotonically_increasing_id())
    if "op" in df.columns:  # a workload: only produce rows are records
        df = df.where(F.col("op").isNull() | (F.col("op") == "produce"))
    keys = ["topic", "partition"] if "partition" in df.columns else ["topic"]
    shaped = df.repartition(*keys).sortWithinPartitions(*keys, *order)
    shaped = shaped.select(*[c for c in WRITE_COLUMNS if c in df.columns]).cache()
    try:
        count = int(shaped.count())
        shaped.write.format("seglog").mode(mode).option("partitions", str(partitions)).save(log_dir)
    finally:
        shaped.unpersist()
    return count


# --------------------------------------------------------------------------------------- prepare-workload


def prepare_workload(
    spark: Any,
    inputs: Sequence[str],
    out_path: str,
    *,
    partitions: Mapping[str, int] | None = None,
) -> tuple[int, list[Any]]:
    """Merge raw recordings into one workload file sorted by capture time; return ``(rows, findings)``.

    Spark reads every input (Parquet or JSON Lines in the workload format, in
    any order, e.g. one file per recording process), drops exact duplicate rows,
    and sorts by ``ts_ns`` (then ``producer``, ``seq``). The result is checked
    with ``seglog.tools.replay.validate``; with findings nothing is written and they
    are returned. Partition counts are ``partitions``, else derived from the rows.
    """
    from pyspark.sql import functions as F

    from seglog.tools.replay.format import COLUMN_TYPES, derive_partitions, read_raw, rows_from_raw, write_workload
    from seglog.tools.replay.validate import validate_raw

    df = _read_inputs(spark, inputs, None)
    for name in COLUMN_TYPES:
        if name not in df.columns:
            df = df.withColumn(name, F.lit(None).cast(WORKLOAD_SPARK_TYPES[name]))
    df = df.select(*(F.col(n).cast(WORKLOAD_SPARK_TYPES[n]).alias(n) for n in COLUMN_TYPES)).dropDuplicates()
    df = df.withColumn("op", F.coalesce(F.col("op"), F.lit("produce")))
    df = df.withColumn("producer", F.coalesce(F.col("producer"), F.lit("")))
    ordered = df.orderBy(F.col("ts_ns").asc_nulls_first(), "producer", F.col("seq").asc_nulls_first())
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")  # what tools.replay reads
    with tempfile.TemporaryDirectory(prefix="seglog-prepare-") as tmp:
        ordered.coalesce(1).write.mode("overwrite").parquet(tmp)
        parts = sorted(glob.glob(os.path.join(tmp, "part-*.parquet")))
        if not parts:
            raise PipelineError(f"{', '.join(inputs)}: no rows")
        raw = read_raw(parts[0])
        findings = validate_raw(raw)
        if findings:
            return raw.nrows, findings
        rows = rows_from_raw(raw)
    counts = derive_partitions(rows, dict(partitions or {}))
    write_workload(out_path, rows, counts)
    return len(rows), []


# --------------------------------------------------------------------------------------- report

REPORT_FIELDS: Final = (
    ("started", "$.run.started", "string"),
    ("workload", "$.workload.path", "string"),
    ("speed", "$.options.speed", "string"),
    ("duration_s", "$.run.duration_s", "double"),
    ("records", "$.totals.acked_records", "long"),
    ("records_per_s", "$.totals.records_per_s", "double"),
    ("mb_per_s", "$.totals.mb_per_s", "double"),
    ("append_p50_ms", "$.latency_ms.append.p50", "double"),
    ("append_p99_ms", "$.latency_ms.append.p99", "double"),
    ("append_p999_ms", "$.latency_ms.append.p999", "double"),
    ("fetch_p99_ms", "$.latency_ms.fetch.p99", "double"),
    ("end_to_end_p99_ms", "$.latency_ms.end_to_end.p99", "double"),
    ("schedule_lag_p99_ms", "$.latency_ms.schedule_lag.p99", "double"),
    ("errors", "$.errors.total", "long"),
    ("verified", "$.verification.ok", "boolean"),
)


def aggregate_reports(spark: Any, inputs: Sequence[str], out_prefix: str) -> list[dict[str, Any]]:
    """One row per replay report (``seglog.replay-report/1``), sorted by start time; writes JSON, CSV and a PNG.

    ``inputs`` are report files or directories (every ``*.json`` inside).
    Writes ``<out_prefix>.json`` (the rows), ``<out_prefix>.csv`` and
    ``<out_prefix>.png`` (throughput and append p99 per run) and returns the rows.

    Raises:
        PipelineError: no report among the inputs.
    """
    from pyspark.sql import functions as F

    files: list[str] = []
    for item in inputs:
        files += sorted(glob.glob(os.path.join(item, "*.json"))) if os.path.isdir(item) else [item]
    if not files:
        raise PipelineError(f"no report files in {', '.join(inputs)}")
    text = spark.read.text(files, wholetext=True).withColumn("file", F.input_file_name())
    text = text.where(F.get_json_object("value", "$.schema") == "seglog.replay-report/1")
    columns = [F.col("file")] + [
        F.get_json_object("value", path).cast(kind).alias(name) for name, path, kind in REPORT_FIELDS
    ]
    rows = [r.asDict() for r in text.select(*columns).orderBy("started", "file").collect()]
    if not rows:
        raise PipelineError(f"none of {len(files)} file(s) is a seglog replay report")
    for row in rows:
        row["file"] = os.path.basename(str(row["file"]))
    out = Path(out_prefix)
    out.parent.mkdir(parents=True, exist_ok=True)
    _write_json_atomic(out.with_suffix(".json"), rows)
    names = ["file", *(name for name, _, _ in REPORT_FIELDS)]
    lines = [",".join(names)] + [",".join("" if r[n] is None else str(r[n]) for n in names) for r in rows]
    out.with_suffix(".csv").write_text("\n".join(lines) + "\n")
    _plot_runs(rows, out.with_suffix(".png"))
    return rows


def _plot_runs(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{i + 1}" for i in range(len(rows))]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    top.bar(labels, [r["records_per_s"] or 0 for r in rows], color="tab:blue")
    top.set_ylabel("records/s")
    top.set_title("seglog replay runs")
    for key, colour in (("append_p50_ms", "tab:green"), ("append_p99_ms", "tab:orange"), ("append_p999_ms", "tab:red")):
        bottom.plot(labels, [r[key] if r[key] is not None else float("nan") for r in rows], marker="o",
                    color=colour, label=key.replace("_ms", ""))
    bottom.set_ylabel("append latency (ms)")
    bottom.set_xlabel("run (by start time; see the table)")
    bottom.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
