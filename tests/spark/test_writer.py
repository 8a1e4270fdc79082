"""Writes through the seglog source: round trip, partitioning by key, overwrite, a retried and a failed task."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from sparkdata import build_log

from seglog.engine.partitioner import partition_for_key
from seglog.tools.spark import read_seglog
from seglog.tools.spark.writer import STAGING_DIR

pytestmark = pytest.mark.spark

WRITE_SCHEMA = (
    "topic string, partition int, key binary, value binary, timestamp timestamp, "
    "headers array<struct<key:string,value:binary>>"
)


def contents(spark: Any, path: Path, topic: str | None = None) -> list[tuple[Any, ...]]:
    df = read_seglog(spark, str(path), **({"topics": topic} if topic else {}))
    return sorted(
        (r.topic, r.partition, r.offset, r.key, r.value, r.timestamp, [(h.key, h.value) for h in r.headers])
        for r in df.collect()
    )


def test_write_then_read_round_trip_and_partition_by_key(spark: Any, tmp_path: Path) -> None:
    when = dt.datetime(2026, 1, 2, 3, 4, 5, 678000)
    rows = [
        ("w", i % 2, b"k%d" % i, b"v%d" % i, when + dt.timedelta(milliseconds=i), [("h", b"%d" % i)] if i % 3 else [])
        for i in range(300)
    ]
    df = spark.createDataFrame(rows, WRITE_SCHEMA).repartition(1)  # one task: the input order is the log order
    df.write.format("seglog").mode("append").save(str(tmp_path))
    got = contents(spark, tmp_path)
    assert len(got) == 300
    for partition in (0, 1):
        mine = [r for r in rows if r[1] == partition]
        back = [g for g in got if g[1] == partition]
        assert [g[2] for g in back] == list(range(len(mine)))  # dense offsets from 0, in input order
        assert [(g[3], g[4], g[5], g[6]) for g in back] == [(r[2], r[3], r[4], r[5]) for r in mine]
    # No partition column: Kafka's murmur2 of the key over the new topic's 3 partitions.
    keyed = spark.createDataFrame([(b"user-%d" % i, b"v%d" % i) for i in range(60)], "key binary, value binary")
    keyed.write.format("seglog").mode("append").option("topic", "keyed").option("partitions", "3").save(str(tmp_path))
    placed = {(r.key, r.partition) for r in read_seglog(spark, str(tmp_path), topics="keyed").collect()}
    assert placed == {(b"user-%d" % i, partition_for_key(b"user-%d" % i, 3)) for i in range(60)}
    # A second append continues the offsets; overwrite replaces only the topics written.
    df.limit(10).write.format("seglog").mode("append").save(str(tmp_path))
    assert len(contents(spark, tmp_path, "w")) == 310
    spark.createDataFrame([("w", 0, None, b"only", None, None)], WRITE_SCHEMA).write.format("seglog").mode(
        "overwrite"
    ).save(str(tmp_path))
    assert [(g[1], g[2], g[4]) for g in contents(spark, tmp_path, "w")] == [(0, 0, b"only")]
    assert len(contents(spark, tmp_path, "keyed")) == 60
    # A topic name that would climb out of the staging directory is refused in the task.
    evil = spark.createDataFrame([("../../escape", 0, None, b"x", None, None)], WRITE_SCHEMA)
    with pytest.raises(Exception, match="illegal character"):
        evil.write.format("seglog").mode("append").save(str(tmp_path))
    assert not list(tmp_path.parent.glob("escape*"))
    assert not (tmp_path / STAGING_DIR).exists() or not any((tmp_path / STAGING_DIR).iterdir())


def _flaky_frame(spark: Any, fail_always: bool) -> Any:
    from pyspark import TaskContext
    from pyspark.sql.functions import udf

    @udf("binary", useArrow=False)  # type: ignore[misc]  # Arrow UDFs need pandas
    def value(i: int) -> bytes:
        context = TaskContext.get()
        if i == 5500 and (fail_always or context.attemptNumber() == 0):
            raise RuntimeError("injected task failure")
        return b"row %d" % i

    return spark.range(0, 6000, numPartitions=2).selectExpr("'r' AS topic", "0 AS partition", "id").withColumn(
        "value", value("id")
    ).drop("id")


def test_a_retried_task_leaves_no_duplicates_and_a_failed_job_leaves_nothing(spark: Any, tmp_path: Path) -> None:
    build_log(tmp_path, {"r": [5]})
    before = contents(spark, tmp_path)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "500")  # the writer stages before the failure
    try:
        with pytest.raises(Exception, match="injected task failure"):
            _flaky_frame(spark, fail_always=True).write.format("seglog").mode("append").save(str(tmp_path))
        assert contents(spark, tmp_path) == before
        assert not any((tmp_path / STAGING_DIR).iterdir())
        # The first attempt of one task fails after staging some batches; Spark retries it (local[2,2]).
        _flaky_frame(spark, fail_always=False).write.format("seglog").mode("append").save(str(tmp_path))
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    got = read_seglog(spark, str(tmp_path)).selectExpr("offset", "value").collect()
    assert len(got) == 6005
    assert sorted(r.offset for r in got) == list(range(6005))
    assert sorted(r.value for r in got if r.offset >= 5) == sorted(b"row %d" % i for i in range(6000))
    assert not any((tmp_path / STAGING_DIR).iterdir())
