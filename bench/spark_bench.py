"""Spark benchmark: the seglog source against ``spark.read.parquet`` on the same records, and a narrow time query.

One run builds (or reuses) a log directory of ``--records`` records spread
over ``--partitions`` partitions (values of ``--value-bytes`` pseudo-random
bytes, timestamps evenly spaced over ``--span-s`` seconds), exports the same
records to Parquet once through the seglog source, then in one SparkSession:

* full scans of both into Spark's ``noop`` sink (every column materialised in
  the JVM), ``--runs`` runs each after ``--warmup`` unmeasured rounds, interleaved;
  rows/s from the median;
* the floor of PySpark's Python data source API on this machine, in the same
  session: a source (``seglog-floor``, defined here) that yields the very same
  rows from memory-mapped Arrow IPC files, already decoded, in as many input
  partitions as the seglog plan has. What seglog's reader cannot go below
  without leaving the Python data source API; reported as seglog / floor;
* a query selecting 1 % of the time range through the seglog source, with the
  reader's trace counting the bytes read from ``.log`` files (planning walks
  of the active segments' tails included) against the log's total size.

Targets (issue 7): seglog >= 0.5x Parquet rows/s; the 1 % query reads <= 5 %
of the bytes. Never run by pytest. Example::

    .venv/bin/python bench/spark_bench.py --records 1000000 --runs 5
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from seglog.engine import offline
from seglog.engine.config import LogConfig
from seglog.engine.engine import Engine
from seglog.engine.runner import run
from seglog.segments.records import Record
from seglog.tools.spark.options import DEFAULT_ROWS_PER_BATCH

BASE_TS = 1_700_000_000_000


def build_log(path: Path, records: int, partitions: int, value_bytes: int, span_ms: int) -> None:
    config = LogConfig(segment_bytes=16 << 20)
    per_partition = records // partitions
    step = span_ms / per_partition

    async def fill() -> None:
        async with Engine.open(path, config) as engine:
            await engine.create_topic("bench", partitions=partitions, config=config)
            for p in range(partitions):
                log = engine.log("bench", p)
                for start in range(0, per_partition, 1000):
                    stop = min(per_partition, start + 1000)
                    payload = os.urandom(value_bytes * (stop - start))  # incompressible, as real payloads often are
                    batch = [
                        Record(payload[(i - start) * value_bytes : (i - start + 1) * value_bytes],
                               b"key-%d" % (i % 1000), BASE_TS + int(i * step))
                        for i in range(start, stop)
                    ]
                    await log.append(batch)

    run(fill())


def floor_source() -> Any:
    """A Python data source serving Arrow IPC files as they are: the API's floor (pickled by value, from here)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from seglog.tools.spark.arrow import SCHEMA_DDL

    class FloorReader(DataSourceReader):  # type: ignore[misc]
        def __init__(self, directory: str) -> None:
            self.directory = directory

        def partitions(self) -> list[InputPartition]:
            return [InputPartition(str(p)) for p in sorted(Path(self.directory).glob("*.arrow"))]

        def read(self, partition: InputPartition) -> Any:
            import pyarrow as pa

            with pa.memory_map(partition.value) as source:
                reader = pa.ipc.open_file(source)
                for i in range(reader.num_record_batches):
                    yield reader.get_batch(i)

    class FloorSource(DataSource):  # type: ignore[misc]
        @classmethod
        def name(cls) -> str:
            return "seglog-floor"

        def schema(self) -> str:
            return SCHEMA_DDL

        def reader(self, schema: Any) -> FloorReader:
            return FloorReader(self.options["path"])

    return FloorSource


def write_floor_files(parquet_dir: Path, floor_dir: Path, parts: int) -> None:
    """The exported rows as ``parts`` Arrow IPC files in the seglog source's schema, in batches of the
    seglog source's default size (``rowsPerBatch``), so that the floor pays Spark's per-batch cost as
    often as the source does."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from seglog.tools.spark.arrow import arrow_schema

    table = pq.read_table(parquet_dir).cast(arrow_schema())
    floor_dir.mkdir(parents=True, exist_ok=True)
    step = -(-table.num_rows // parts)
    for i in range(parts):
        part = table.slice(i * step, step)
        with pa.OSFile(str(floor_dir / f"part-{i:04d}.arrow"), "wb") as sink, pa.ipc.new_file(sink, part.schema) as w:
            for batch in part.to_batches(max_chunksize=DEFAULT_ROWS_PER_BATCH):
                w.write_batch(batch)


def timed(action: Any) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--span-s", type=int, default=3600, help="time range the timestamps cover")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--warmup", type=int, default=3,
        help="unmeasured rounds first: the JVM keeps speeding up (JIT) for ~3 rounds, Parquet most",
    )
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--java-options", default="-XX:+UseParallelGC", help="spark.driver.extraJavaOptions")
    parser.add_argument("--dir", help="work directory to (re)use (default: a temporary one, removed after)")
    args = parser.parse_args()

    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="seglog-spark-bench-"))
    log_dir, parquet_dir = work / "log", work / "parquet"
    from seglog.tools.spark import read_seglog
    from seglog.tools.spark.session import spark_session

    try:
        if not log_dir.exists():
            t = timed(lambda: build_log(log_dir, args.records, args.partitions, args.value_bytes, args.span_s * 1000))
            print(f"built the log: {args.records} records in {t:.1f} s", file=sys.stderr)
        # The default JIT here, not the tests' C1-only setting: scans of a million rows are what is measured.
        conf = {"spark.driver.memory": "2g", "spark.driver.extraJavaOptions": args.java_options}
        spark = spark_session(args.master, "seglog-spark-bench", conf)
        if not parquet_dir.exists():
            read_seglog(spark, str(log_dir)).write.parquet(str(parquet_dir))
        rows = read_seglog(spark, str(log_dir)).count()
        assert spark.read.parquet(str(parquet_dir)).count() == rows

        parts = read_seglog(spark, str(log_dir)).rdd.getNumPartitions()
        floor_dir = work / f"floor-{parts}-{DEFAULT_ROWS_PER_BATCH}"
        if not floor_dir.exists():
            write_floor_files(parquet_dir, floor_dir, parts)
        spark.dataSource.register(floor_source())
        assert spark.read.format("seglog-floor").load(str(floor_dir)).count() == rows

        def floor_scan() -> None:
            spark.read.format("seglog-floor").load(str(floor_dir)).write.format("noop").mode("overwrite").save()

        def seglog_scan() -> None:
            read_seglog(spark, str(log_dir)).write.format("noop").mode("overwrite").save()

        def parquet_scan() -> None:
            spark.read.parquet(str(parquet_dir)).write.format("noop").mode("overwrite").save()

        for _ in range(args.warmup):  # Python workers started, JIT-compiled JVM code (measured: 3 rounds)
            seglog_scan(), parquet_scan(), floor_scan()
        seglog_s, parquet_s, floor_s = [], [], []
        for _ in range(args.runs):
            seglog_s.append(timed(seglog_scan))
            parquet_s.append(timed(parquet_scan))
            floor_s.append(timed(floor_scan))
        seglog_rate = rows / statistics.median(seglog_s)
        parquet_rate = rows / statistics.median(parquet_s)
        floor_rate = rows / statistics.median(floor_s)

        # The narrow query: 1 % of the time range, in the middle.
        span_ms = args.span_s * 1000
        lo = BASE_TS + span_ms // 2
        hi = lo + span_ms // 100
        trace = work / "trace.jsonl"
        trace.unlink(missing_ok=True)
        narrow = read_seglog(spark, str(log_dir), traceFile=str(trace)).where(
            f"timestamp >= timestamp_millis({lo}) AND timestamp < timestamp_millis({hi})"
        )
        narrow_s = timed(lambda: narrow.write.format("noop").mode("overwrite").save())
        matched = read_seglog(spark, str(log_dir)).where(
            f"timestamp >= timestamp_millis({lo}) AND timestamp < timestamp_millis({hi})"
        ).count()
        events = [json.loads(line) for line in trace.read_text().splitlines()]
        bytes_read = sum(int(e["bytes_read"]) for e in events)
        partitions = offline.list_partitions(log_dir)
        listed = [offline.list_segments(offline.partition_path(log_dir, t, p)) for t, p in partitions]
        total = sum(s.size_bytes for segs in listed for s in segs)
        segments = sum(len(segs) for segs in listed)
        spark.stop()
        result = {
            "records": rows,
            "log_bytes": total,
            "segments": segments,
            "parquet_bytes": sum(f.stat().st_size for f in parquet_dir.rglob("*.parquet")),
            "runs": args.runs,
            "warmup": args.warmup,
            "seglog_s": [round(x, 3) for x in seglog_s],
            "parquet_s": [round(x, 3) for x in parquet_s],
            "seglog_rows_per_s": round(seglog_rate),
            "parquet_rows_per_s": round(parquet_rate),
            "seglog_vs_parquet": round(seglog_rate / parquet_rate, 3),
            "input_partitions": parts,
            "floor_s": [round(x, 3) for x in floor_s],
            "floor_rows_per_s": round(floor_rate),
            "seglog_vs_floor": round(seglog_rate / floor_rate, 3),
            "floor_vs_parquet": round(floor_rate / parquet_rate, 3),
            "narrow_query": {
                "time_fraction": 0.01,
                "rows": matched,
                "seconds": round(narrow_s, 3),
                "bytes_read": bytes_read,
                "segments_read": len({e["path"] for e in events if e["event"] == "read"}),
                "bytes_fraction": round(bytes_read / total, 4),
            },
        }
        print(json.dumps(result, indent=1))
        print(
            f"seglog {seglog_rate / 1e6:.2f} M rows/s vs parquet {parquet_rate / 1e6:.2f} M rows/s "
            f"(ratio {seglog_rate / parquet_rate:.2f}, target >= 0.5); the Python data source floor "
            f"{floor_rate / 1e6:.2f} M rows/s (seglog {seglog_rate / floor_rate:.2f}x of it, floor "
            f"{floor_rate / parquet_rate:.2f}x of parquet); 1% time range read "
            f"{bytes_read / total:.2%} of {total / 1e6:.0f} MB (target <= 5%)",
            file=sys.stderr,
        )
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
