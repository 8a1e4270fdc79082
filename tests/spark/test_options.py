"""The source's option parsing, filter pushdown and rate limit, without a Spark session (no JVM)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from pyspark.sql.datasource import (
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)

from seglog.tools.spark.options import EARLIEST, LATEST, OptionError, parse_read_options, split_partition_key
from seglog.tools.spark.source import PushedBounds, _push, _rate_limit


def test_defaults_follow_the_kafka_source() -> None:
    batch = parse_read_options({"path": "d"}, streaming=False)
    stream = parse_read_options({"path": "d"}, streaming=True)
    assert (batch.starting.default, batch.ending.default, stream.starting.default) == (EARLIEST, LATEST, LATEST)
    assert batch.topics is None and batch.selects("anything") and batch.timestamp_pushdown == "offsets"
    assert (batch.rows_per_batch, batch.bytes_per_batch) == (262_144, 64 << 20)
    small = parse_read_options({"path": "d", "rowsperbatch": "10", "bytesperbatch": "4096"}, streaming=False)
    assert (small.rows_per_batch, small.bytes_per_batch) == (10, 4096)


def test_offsets_json_timestamps_and_topics() -> None:
    o = parse_read_options(
        {"path": "d", "topics": "a, b", "startingoffsets": '{"a":{"0":23,"1":-2}}', "endingtimestamp": "99"},
        streaming=False,
    )
    assert o.topics == ("a", "b") and o.selects("a") and not o.selects("c")
    assert (o.starting.for_partition("a", 0), o.starting.for_partition("a", 1), o.starting.for_partition("b", 0)) == (
        23, EARLIEST, EARLIEST)
    assert o.ending.by_timestamp and o.ending.default == 99
    p = parse_read_options({"path": "d", "subscribepattern": "ord.*"}, streaming=True)
    assert p.selects("orders") and not p.selects("xorders")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "no log directory"),
        ({"path": "d", "topics": "a", "subscribepattern": "a"}, "not both"),
        ({"path": "d", "startingoffsets": "[1]"}, "JSON object"),
        ({"path": "d", "startingoffsets": '{"a":{"x":1}}'}, "not int -> int"),
        ({"path": "d", "endingoffsets": "earliest"}, "not allowed"),
        ({"path": "d", "maxoffsetspertrigger": "0"}, "at least 1"),
        ({"path": "d", "bytesperbatch": "0"}, "bytesPerBatch=0 must be at least 1"),
        ({"path": "d", "rowsperbatch": "many"}, "rowsPerBatch='many' is not an integer"),
        ({"path": "d", "timestamppushdown": "maybe"}, "offsets, start, none"),
        ({"path": "d", "subscribepattern": "("}, "regular expression"),
    ],
)
def test_bad_options_name_the_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        parse_read_options(options, streaming=False)


def test_partition_keys() -> None:
    assert split_partition_key("my-topic-12") == ("my-topic", 12)
    with pytest.raises(OptionError):
        split_partition_key("nodash")


def test_pushdown_narrows_and_keeps_what_spark_must_check() -> None:
    when = dt.datetime(2026, 1, 1, 0, 0, 0, 1500, tzinfo=dt.UTC)  # 1.5 ms past a millisecond
    ms = int(dt.datetime(2026, 1, 1, tzinfo=dt.UTC).timestamp() * 1000)
    b = PushedBounds()
    kept = [f for f in [
        IsNotNull(("offset",)),
        EqualTo(("topic",), "a"),
        In(("partition",), [0, 2]),
        GreaterThanOrEqual(("offset",), 10),
        LessThan(("offset",), 20),
        GreaterThan(("timestamp",), when),
        LessThanOrEqual(("timestamp",), when),
        StringStartsWith(("topic",), "a"),
        Not(EqualTo(("offset",), 5)),
    ] if not _push(b, f, "offsets")]
    assert (b.topics, b.partitions, b.start_offset, b.end_offset) == ({"a"}, {0, 2}, 10, 20)
    assert (b.from_timestamp, b.until_timestamp) == (ms + 1, ms + 2)  # floor of 1.5 ms, floor + 1
    assert b.topic_prefixes == ["a"]
    assert [type(f).__name__ for f in kept] == ["GreaterThan", "LessThanOrEqual", "Not"]
    start_only = PushedBounds()
    _push(start_only, LessThan(("timestamp",), when), "start")
    assert start_only.until_timestamp is None


def test_rate_limit_splits_by_backlog_and_never_overshoots() -> None:
    got = _rate_limit({"a-0": 0, "a-1": 100}, {"a-0": 300, "a-1": 200}, 200)
    assert sum(got[k] - b for k, b in {"a-0": 0, "a-1": 100}.items()) == 200
    assert got == {"a-0": 150, "a-1": 150}
    assert _rate_limit({"a-0": 0}, {"a-0": 5}, 10) == {"a-0": 5}


def test_pipeline_command_refuses_bad_arguments_before_starting_spark(capsys: pytest.CaptureFixture[str]) -> None:
    from seglog.tools.cli import main

    assert main(["pipeline", "prepare-workload", "in.jsonl", "-o", "w.parquet", "--partitions", "orders"]) == 2
    assert "TOPIC=N" in capsys.readouterr().err
    assert main(["pipeline", "import", "only-one-arg"]) == 2  # INPUT... and LOG_DIR
    assert "required: log_dir" in capsys.readouterr().err


def _ranges(sizes_mib: list[int]) -> list[Any]:
    from seglog.engine.offline import SegmentRange

    return [
        SegmentRange("t", i // 2, f"/x/{i}.log", 0, 0, size << 20, 0, 2**63 - 1) for i, size in enumerate(sizes_mib)
    ]


def test_segment_ranges_are_packed_into_tasks_as_spark_packs_files() -> None:
    from seglog.tools.spark.source import pack_ranges

    def shape(sizes: list[int], max_bytes: int, min_partitions: int) -> list[int]:
        packed = pack_ranges(_ranges(sizes), max_bytes, min_partitions)
        flat = [r for p in packed for r in p.ranges]
        assert flat == _ranges(sizes)  # every range once, in plan order
        return [len(p.ranges) for p in packed]

    assert shape([16] * 8, 128 << 20, 2) == [4, 4]  # 2 cores: two balanced tasks of four 16 MiB segments
    assert shape([16] * 8, 128 << 20, 8) == [1] * 8  # the default without read_seglog: as many as before
    assert shape([16] * 8, 1, 2) == [1] * 8  # maxPartitionBytes=1: one task per segment
    assert shape([1024, 16, 16, 1024], 128 << 20, 2) == [1, 2, 1]  # a 1 GiB segment is a task of its own
    assert shape([0, 0, 0], 128 << 20, 2) == [1, 1, 1]  # tiny segments: the 4 MiB open cost keeps them apart
    assert shape([], 128 << 20, 2) == []


def test_min_partitions_and_max_partition_bytes_options() -> None:
    o = parse_read_options({"path": "d"}, streaming=False)
    assert (o.max_partition_bytes, o.min_partitions) == (128 << 20, 8)
    o = parse_read_options({"path": "d", "minpartitions": "2", "maxpartitionbytes": "1"}, streaming=False)
    assert (o.max_partition_bytes, o.min_partitions) == (1, 2)
    with pytest.raises(OptionError, match="minPartitions=0 must be at least 1"):
        parse_read_options({"path": "d", "minpartitions": "0"}, streaming=False)


def test_read_seglog_passes_the_session_parallelism_when_it_has_one() -> None:
    from seglog.tools.spark import _default_parallelism

    class Local:
        class sparkContext:  # mimics pyspark's attribute
            defaultParallelism = 6

    class Connect:
        @property
        def sparkContext(self) -> Any:  # Spark Connect raises here
            raise RuntimeError("[JVM_ATTRIBUTE_NOT_SUPPORTED] sparkContext is not supported in Spark Connect")

    assert _default_parallelism(Local()) == 6
    assert _default_parallelism(Connect()) is None


def test_isolation_level_is_read_committed_unless_an_option_says_otherwise() -> None:
    assert parse_read_options({"path": "d"}, streaming=False).isolation == "read_committed"
    for name in ("isolation.level", "kafka.isolation.level"):
        assert parse_read_options({"path": "d", name: "READ_UNCOMMITTED"}, streaming=True).isolation == (
            "read_uncommitted")
    with pytest.raises(OptionError, match=r"isolation\.level='committed'"):
        parse_read_options({"path": "d", "isolation.level": "committed"}, streaming=False)
    with pytest.raises(OptionError, match="disagree"):
        parse_read_options({"path": "d", "isolation.level": "read_committed",
                            "kafka.isolation.level": "read_uncommitted"}, streaming=False)
