"""Batch reads through the seglog source: schema, contents, options, and every pushdown by segments opened."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from sparkdata import BASE_TS, build_log, reads, record

from seglog.engine import offline
from seglog.tools.spark import read_seglog

pytestmark = pytest.mark.spark

LAYOUT = {"a": [1000, 150], "b": [80]}


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("log")
    build_log(path, LAYOUT)
    return path


def rows_of(df: Any) -> list[tuple[Any, ...]]:
    return sorted((r.topic, r.partition, r.offset) for r in df.select("topic", "partition", "offset").collect())


def expected_rows(predicate: Any = lambda t, p, i: True) -> list[tuple[str, int, int]]:
    return sorted((t, p, i) for t, counts in LAYOUT.items() for p, n in enumerate(counts) for i in range(n)
                  if predicate(t, p, i))


def overlapping(log_dir: Path, topic: str, partition: int, first: int, last: int) -> list[str]:
    """Segment files of a partition holding any offset in ``[first, last]``."""
    return [
        f"{topic}-{partition}/{s.log_path.name}"
        for s in offline.list_segments(offline.partition_path(log_dir, topic, partition))
        if s.base_offset <= last and (s.next_base_offset is None or s.next_base_offset > first)
    ]


def test_schema_count_and_contents(spark: Any, log_dir: Path) -> None:
    df = read_seglog(spark, str(log_dir))
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    assert read_seglog(spark, str(log_dir)).count() == 1230
    got = {(r.topic, r.partition, r.offset): r for r in read_seglog(spark, str(log_dir)).collect()}
    assert sorted(got) == expected_rows()
    for (topic, partition, offset), row in got.items():
        want = record(topic, partition, offset)
        assert (row.key, row.value, row.timestampType) == (want.key, want.value, 0)
        assert row.timestamp == dt.datetime.fromtimestamp(want.timestamp / 1000, dt.UTC).replace(tzinfo=None)
        assert [(h.key, h.value) for h in row.headers] == list(want.headers)
    # maxPartitionBytes=1: one Spark partition per segment, the directory spread over tasks. By default
    # the small segments are packed as Spark packs small files (here: 11 segments into 3 tasks on 2
    # cores), with the same rows.
    partitions = offline.list_partitions(log_dir)
    segments = sum(len(offline.list_segments(offline.partition_path(log_dir, t, p))) for t, p in partitions)
    assert segments >= 8
    assert read_seglog(spark, str(log_dir), maxPartitionBytes=1).rdd.getNumPartitions() == segments
    assert read_seglog(spark, str(log_dir), maxPartitionBytes=1).count() == 1230
    packed = read_seglog(spark, str(log_dir))
    assert 2 <= packed.rdd.getNumPartitions() < segments
    assert sorted((r.topic, r.partition, r.offset) for r in read_seglog(spark, str(log_dir)).collect()) == sorted(got)


def test_every_pushdown_opens_only_the_segments_it_needs(spark: Any, log_dir: Path, tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"

    def query(where: str) -> list[tuple[Any, ...]]:
        return rows_of(read_seglog(spark, str(log_dir), traceFile=str(trace)).where(where))

    ts = BASE_TS + 6000  # record 600 of every partition that has one
    cases = [
        ("topic = 'b'", lambda t, p, i: t == "b", overlapping(log_dir, "b", 0, 0, 79)),
        ("topic LIKE 'b%'", lambda t, p, i: t == "b", overlapping(log_dir, "b", 0, 0, 79)),
        ("topic IN ('a') AND partition = 1", lambda t, p, i: (t, p) == ("a", 1), overlapping(log_dir, "a", 1, 0, 149)),
        (
            "topic = 'a' AND partition = 0 AND offset >= 500 AND offset < 520",
            lambda t, p, i: (t, p) == ("a", 0) and 500 <= i < 520,
            overlapping(log_dir, "a", 0, 500, 519),
        ),
        (
            "offset BETWEEN 140 AND 145",
            lambda t, p, i: 140 <= i <= 145,
            overlapping(log_dir, "a", 0, 140, 145) + overlapping(log_dir, "a", 1, 140, 145),
        ),
        (
            f"timestamp >= timestamp_millis({ts}) AND timestamp < timestamp_millis({ts + 200})",
            lambda t, p, i: 600 <= i < 620,
            overlapping(log_dir, "a", 0, 600, 620),  # the read stops in the batch holding offset 620
        ),
        ("topic = 'nothing'", lambda t, p, i: False, []),
    ]
    for where, predicate, segments in cases:
        assert query(where) == expected_rows(predicate), where
        assert reads(trace) == sorted(segments), where


def test_a_reused_dataframe_is_not_needed_read_seglog_plans_afresh(spark: Any, log_dir: Path) -> None:
    narrow = read_seglog(spark, str(log_dir)).where("offset < 3").count()
    assert narrow == 9
    assert read_seglog(spark, str(log_dir)).count() == 1230  # a new load(): no stale partitions


def test_kafka_style_options(spark: Any, log_dir: Path) -> None:
    def count(**options: Any) -> int:
        return int(read_seglog(spark, str(log_dir), **options).count())

    assert count(topics="b") == 80
    assert count(subscribePattern="a") == 1150
    assert count(topics="a", startingOffsets='{"a":{"0":990}}', endingOffsets='{"a":{"0":995,"1":-1}}') == 5 + 150
    assert count(startingTimestamp=BASE_TS + 9950) == 5  # only a-0 has records at or after i=995
    assert count(endingTimestamp=BASE_TS + 50) == 15  # offsets 0..4 of every partition
    got = rows_of(read_seglog(spark, str(log_dir), startingOffsetsByTimestamp=f'{{"a":{{"1":{BASE_TS + 1400}}}}}',
                              topics="a"))
    assert got == expected_rows(lambda t, p, i: t == "a" and (p == 0 or i >= 140))
    with pytest.raises(Exception, match="subscribePattern"):
        read_seglog(spark, str(log_dir), topics="a", subscribePattern="a").count()
