"""Workload format: Parquet and JSON Lines round trips, and validator findings by row and column."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog.tools.replay.format import (
    METADATA_KEY,
    Finding,
    WorkloadError,
    WorkloadRow,
    format_timestamp_us,
    load_workload,
    read_raw,
    to_arrow,
    write_workload,
)
from seglog.tools.replay.validate import topic_name_problem, validate_file

ROWS = [
    WorkloadRow(topic="orders", ts_ns=1_000, producer="p1", seq=0, key=b"k1", value=b"v1",
                timestamp_us=1_700_000_000_123_000, headers=(("h", b"x"), ("h2", b"")), value_size=2),
    WorkloadRow(topic="orders", ts_ns=1_000, producer="p1", seq=1, key=None, value=None, value_size=300,
                partition=2),
    WorkloadRow(topic="orders", ts_ns=2_000, producer="p2", seq=0, key=b"k", value=None, value_size=-1),
    WorkloadRow(topic="orders", ts_ns=3_000, producer="c", op="fetch", partition=1, offset=0, max_bytes=4096),
    WorkloadRow(topic="clicks", ts_ns=4_000, producer="c", op="fetch_time", partition=0,
                timestamp_us=1_700_000_000_000_000),
]
PARTITIONS = {"orders": 3, "clicks": 1}


def write_jsonl(path: Path, rows: list[dict[str, Any]], meta: dict[str, Any] | None = None) -> Path:
    lines = [] if meta is None else [json.dumps({METADATA_KEY: meta})]
    lines += [json.dumps(r) for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def findings_for(path: Path) -> list[tuple[int | None, str | None]]:
    return [(f.row, f.column) for f in validate_file(path)]


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_round_trip_keeps_every_field_and_the_partition_counts(tmp_path: Path, suffix: str) -> None:
    path = write_workload(tmp_path / f"w{suffix}", ROWS, PARTITIONS)
    workload = load_workload(path)
    assert workload.rows == ROWS
    assert workload.partitions == PARTITIONS


def test_parquet_columns_start_with_sparks_kafka_source_schema(tmp_path: Path) -> None:
    path = write_workload(tmp_path / "w.parquet", ROWS, PARTITIONS)
    schema = pq.read_schema(path)
    assert schema.names[:6] == ["topic", "partition", "key", "value", "timestamp", "headers"]
    assert schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert schema.field("headers").type.value_type.field("value").type == pa.binary()
    assert json.loads(schema.metadata[METADATA_KEY.encode()])["topics"]["orders"] == {"partitions": 3}


def test_jsonl_uses_base64_and_iso_timestamps(tmp_path: Path) -> None:
    path = write_workload(tmp_path / "w.jsonl", ROWS[:1], PARTITIONS)
    first_row = json.loads(path.read_text().splitlines()[1])
    assert first_row["key"] == base64.b64encode(b"k1").decode()
    assert first_row["timestamp"] == "2023-11-14T22:13:20.123Z"
    assert first_row["headers"] == [{"key": "h", "value": "eA=="}, {"key": "h2", "value": ""}]


def test_timestamps_in_other_units_and_integer_milliseconds_are_read(tmp_path: Path) -> None:
    table = to_arrow(ROWS[:1], PARTITIONS)
    ns = table.set_column(4, "timestamp", pa.array([1_700_000_000_123_456_789], pa.timestamp("ns", tz="UTC")))
    pq.write_table(ns, tmp_path / "ns.parquet")
    assert load_workload(tmp_path / "ns.parquet").rows[0].timestamp_us == 1_700_000_000_123_456
    write_jsonl(tmp_path / "ms.jsonl", [{"topic": "t", "ts_ns": 1, "value": "", "timestamp": 1_700_000_000_123}])
    row = load_workload(tmp_path / "ms.jsonl").rows[0]
    assert row.timestamp_us == 1_700_000_000_123_000
    assert row.timestamp_ms == 1_700_000_000_123
    assert format_timestamp_us(1_700_000_000_123_456) == "2023-11-14T22:13:20.123456Z"


def test_hive_partitioned_dataset_directory_is_read(tmp_path: Path) -> None:
    table = to_arrow(ROWS[:3], PARTITIONS)
    pq.write_to_dataset(table, tmp_path / "ds", partition_cols=["topic"])
    workload = load_workload(tmp_path / "ds", {"orders": 3})
    assert sorted(r.seq or 0 for r in workload.rows) == [0, 0, 1]
    assert {r.topic for r in workload.rows} == {"orders"}


def test_a_valid_file_has_no_findings(tmp_path: Path) -> None:
    assert validate_file(write_workload(tmp_path / "w.parquet", ROWS, PARTITIONS)) == []


def test_every_finding_names_row_and_column(tmp_path: Path) -> None:
    rows: list[dict[str, Any]] = [
        {"topic": "ok", "ts_ns": 10, "value": "djE="},                                   # 0 fine
        {"topic": "bad/name", "ts_ns": 10, "value": ""},                                  # 1 topic
        {"topic": "ok", "ts_ns": None, "value": ""},                                      # 2 ts_ns
        {"topic": "ok", "ts_ns": 11, "producer": "x"},                                    # 3 value
        {"topic": "ok", "ts_ns": 12, "value": "djE=", "value_size": 5},                   # 4 value_size
        {"topic": "ok", "ts_ns": 13, "op": "delete", "value": ""},                        # 5 op
        {"topic": "ok", "ts_ns": 14, "op": "fetch", "partition": 0},                      # 6 offset
        {"topic": "ok", "ts_ns": 15, "op": "fetch", "offset": 3},                         # 7 partition
        {"topic": "ok", "ts_ns": 16, "op": "fetch_time", "partition": 0},                 # 8 timestamp
        {"topic": "ok", "ts_ns": 17, "partition": 9, "value": ""},                        # 9 partition
        {"topic": "ok", "ts_ns": 18, "value": "", "headers": [{"key": "h", "value": None}]},  # 10 headers
        {"topic": "ok", "ts_ns": 19, "value": "", "max_bytes": 0},                        # 11 max_bytes
        {"topic": "ok", "ts_ns": 20, "value": "", "value_size": -2},                      # 12 value_size
    ]
    path = write_jsonl(tmp_path / "bad.jsonl", rows, {"version": 1, "topics": {"ok": {"partitions": 2}}})
    findings = validate_file(path)
    assert [(f.row, f.column) for f in findings] == [
        (1, "topic"),
        (2, "ts_ns"),
        (3, "value"),
        (4, "value_size"),
        (5, "op"),
        (6, "offset"),
        (7, "partition"),
        (8, "timestamp"),
        (9, "partition"),
        (10, "headers"),
        (11, "max_bytes"),
        (12, "value_size"),
    ]
    # Row numbers count data rows; the metadata line shifts JSON Lines line numbers by one more.
    assert str(findings[0]).startswith("row 1 (line 3), column 'topic': topic name 'bad/name'")
    assert "declared with 2 partition(s)" in str(findings[8])


def test_decoding_problems_name_line_and_column_and_are_not_repeated(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    path.write_text(
        '{"topic": "t", "ts_ns": 1, "key": "***", "value": ""}\n'
        "not json\n"
        '{"topic": "t", "ts_ns": "soon", "value": ""}\n'
        '{"topic": "t", "ts_ns": 3, "value": "", "timestamp": "yesterday"}\n'
        '{"topic": "t", "ts_ns": 4, "value": "", "tpoic": "x"}\n',
        encoding="utf-8",
    )
    findings = validate_file(path)
    assert [(f.row, f.line, f.column) for f in findings] == [
        (0, 1, "key"),
        (None, 2, None),
        (1, 3, "ts_ns"),
        (2, 4, "timestamp"),
        (3, 5, "tpoic"),
    ]
    assert "base64" in findings[0].message


def test_per_producer_ts_ns_must_not_go_back_and_seq_must_be_unique(tmp_path: Path) -> None:
    rows = [
        {"topic": "t", "ts_ns": 100, "producer": "a", "seq": 0, "value": ""},
        {"topic": "t", "ts_ns": 50, "producer": "b", "seq": 0, "value": ""},   # other producer: fine
        {"topic": "t", "ts_ns": 90, "producer": "a", "seq": 1, "value": ""},   # goes back for 'a'
        {"topic": "t", "ts_ns": 95, "producer": "a", "seq": 1, "value": ""},   # seq repeats
        {"topic": "t", "ts_ns": 200, "producer": "b", "value": ""},            # seq missing for 'b'
    ]
    path = write_jsonl(tmp_path / "w.jsonl", rows)
    findings = validate_file(path)
    assert [(f.row, f.column) for f in findings] == [(2, "ts_ns"), (3, "seq"), (4, "seq")]
    assert "earlier than 100 of row 0" in findings[0].message


def test_seq_order_not_file_order_decides_when_given(tmp_path: Path) -> None:
    rows = [
        {"topic": "t", "ts_ns": 200, "producer": "a", "seq": 1, "value": ""},
        {"topic": "t", "ts_ns": 100, "producer": "a", "seq": 0, "value": ""},
    ]
    assert validate_file(write_jsonl(tmp_path / "w.jsonl", rows)) == []


def test_parquet_column_of_the_wrong_type_is_one_finding(tmp_path: Path) -> None:
    table = pa.table({"topic": ["t", "t"], "ts_ns": ["1", "2"], "value": [b"", b""]})
    pq.write_table(table, tmp_path / "w.parquet")
    assert findings_for(tmp_path / "w.parquet") == [(None, "ts_ns")]


def test_missing_required_column_and_empty_file(tmp_path: Path) -> None:
    pq.write_table(pa.table({"ts_ns": [1]}), tmp_path / "w.parquet")
    assert findings_for(tmp_path / "w.parquet") == [(None, "topic")]
    (tmp_path / "empty.jsonl").write_text("\n")
    assert [f.message for f in validate_file(tmp_path / "empty.jsonl")] == ["the workload has no rows"]


def test_load_raises_with_every_finding(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "w.jsonl", [{"topic": "..", "ts_ns": -1, "value": ""}])
    with pytest.raises(WorkloadError) as info:
        load_workload(path)
    assert [(f.row, f.column) for f in info.value.findings] == [(0, "topic"), (0, "ts_ns")]
    assert "seglog workload validate" in str(info.value)


def test_missing_or_foreign_files_are_errors(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="no such file"):
        read_raw(tmp_path / "nope.parquet")
    (tmp_path / "junk.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(WorkloadError, match="not a readable Parquet"):
        read_raw(tmp_path / "junk.parquet")


def test_bad_metadata_is_reported(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "w.jsonl", [{"topic": "t", "ts_ns": 1, "value": ""}],
                       {"version": 1, "topics": {"t": {"partitions": 0}}})
    assert [str(f) for f in validate_file(path)] == [
        "line 1: seglog.workload metadata: topic 't' needs 'partitions' >= 1"
    ]


@pytest.mark.parametrize(
    ("name", "ok"),
    [("orders", True), ("a.b_c-9", True), (".", False), ("..", False), ("a" * 249, True), ("a" * 250, False),
     ("../etc", False), ("", False), ("spa ce", False)],
)
def test_topic_names_follow_kafka(name: str, ok: bool) -> None:
    assert (topic_name_problem(name) is None) is ok


def test_finding_text_without_row() -> None:
    assert str(Finding(None, "topic", "required column is missing")) == "column 'topic': required column is missing"
    assert str(Finding(None, None, "x")) == "x"


_binary = st.none() | st.binary(max_size=40)
_rows = st.lists(
    st.builds(
        WorkloadRow,
        topic=st.sampled_from(["a", "b.c", "d_e-1"]),
        ts_ns=st.integers(0, 2**62),
        producer=st.sampled_from(["", "p", "q"]),
        partition=st.none() | st.integers(0, 3),
        key=_binary,
        value=st.binary(max_size=40),
        timestamp_us=st.none() | st.integers(0, 2**50),
        headers=st.lists(st.tuples(st.text(max_size=5), st.binary(max_size=5)), max_size=3).map(tuple),
        value_size=st.none(),
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=_rows)
def test_any_rows_round_trip_through_both_formats(tmp_path: Path, rows: list[WorkloadRow]) -> None:
    # ts_ns must not go back per producer: sort like a recorder would
    rows = sorted(rows, key=lambda r: r.ts_ns)
    for suffix in (".parquet", ".jsonl"):
        path = write_workload(tmp_path / f"h{suffix}", rows, {"a": 4, "b.c": 4, "d_e-1": 4})
        assert load_workload(path).rows == rows
