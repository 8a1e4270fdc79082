"""The seglog pipeline jobs end to end on the shared session: export (twice), import, prepare-workload, report."""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path
from typing import Any

import pytest
from sparkdata import append_records, build_log

from seglog.tools.replay.format import WorkloadRow, load_workload, row_to_json
from seglog.tools.spark import read_seglog
from seglog.tools.spark.jobs import MANIFEST_NAME, aggregate_reports, export_log, import_files, prepare_workload

pytestmark = pytest.mark.spark


def kafka_rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted(
        (r.topic, r.partition, r.offset, r.key, r.value, r.timestamp, r.timestampType,
         [(h.key, h.value) for h in r.headers])
        for r in df.collect()
    )


def test_export_continues_where_it_stopped_and_import_restores_the_log(spark: Any, tmp_path: Path) -> None:
    log_dir, out, restored = tmp_path / "log", tmp_path / "export", tmp_path / "restored"
    build_log(log_dir, {"e": [120, 60], "f": [10]})
    first = export_log(spark, str(log_dir), str(out))
    assert first.ranges == {"e-0": (0, 120), "e-1": (0, 60), "f-0": (0, 10)}
    append_records(log_dir, "e", 0, 120, 25)
    second = export_log(spark, str(log_dir), str(out))
    assert second.ranges == {"e-0": (120, 145)}
    assert export_log(spark, str(log_dir), str(out)).ranges == {}
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    assert manifest["next"] == {"e-0": 145, "e-1": 60, "f-0": 10} and len(manifest["runs"]) == 2
    assert (out / "topic=e" / "partition=0").is_dir()
    exported = spark.read.parquet(str(out))
    original = kafka_rows(read_seglog(spark, str(log_dir)))
    assert kafka_rows(exported.select(*read_seglog(spark, str(log_dir)).columns)) == original  # once each
    # Import the export into a new directory: same partitions, offsets, keys, values, timestamps, headers.
    assert import_files(spark, [str(out)], str(restored)) == 215
    assert kafka_rows(read_seglog(spark, str(restored))) == original


def test_import_json_lines_with_base64_fields(spark: Any, tmp_path: Path) -> None:
    lines = [
        {"topic": "j", "partition": 0, "key": base64.b64encode(b"k%d" % i).decode(),
         "value": base64.b64encode(b"v%d" % i).decode(), "timestamp": 1_700_000_000_000 + i,
         "headers": [{"key": "h", "value": base64.b64encode(b"x").decode()}]}
        for i in range(20)
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    assert import_files(spark, [str(src)], str(tmp_path / "log"), topic="renamed") == 20
    got = read_seglog(spark, str(tmp_path / "log")).orderBy("offset").collect()
    want = [("renamed", i, b"k%d" % i, b"v%d" % i) for i in range(20)]
    assert [(r.topic, r.offset, r.key, r.value) for r in got] == want
    assert got[3].timestamp.timestamp() == pytest.approx(1_700_000_000.003)
    assert [(h.key, h.value) for h in got[0].headers] == [("h", b"x")]


def test_prepare_workload_merges_sorts_and_validates(spark: Any, tmp_path: Path) -> None:
    rows = [
        WorkloadRow(topic="orders", ts_ns=1_000_000 * i, producer=f"p{i % 2}", partition=i % 3,
                    key=b"k%d" % i, value=b"v%d" % i, timestamp_us=1_700_000_000_000_000 + i, seq=i // 2)
        for i in range(40)
    ]
    shuffled = rows[:]
    random.Random(7).shuffle(shuffled)
    for name, part in (("a.jsonl", shuffled[:25]), ("b.jsonl", shuffled[15:])):  # overlapping recordings
        (tmp_path / name).write_text("\n".join(json.dumps(row_to_json(r)) for r in part) + "\n")
    out = tmp_path / "workload.parquet"
    count, findings = prepare_workload(spark, [str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")], str(out),
                                       partitions={"orders": 4})
    assert (count, findings) == (40, [])
    workload = load_workload(out)
    assert workload.rows == rows and workload.partitions == {"orders": 4}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(row_to_json(WorkloadRow(topic="no/slash", ts_ns=1, value=b"x"))) + "\n")
    count, findings = prepare_workload(spark, [str(bad)], str(tmp_path / "never.parquet"))
    assert count == 1 and any("topic" in str(f) for f in findings)
    assert not (tmp_path / "never.parquet").exists()


def test_report_aggregates_replay_reports(spark: Any, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    for i, started in enumerate(("2026-11-22T10:00:00+00:00", "2026-11-21T10:00:00+00:00")):
        doc = {
            "schema": "seglog.replay-report/1",
            "run": {"started": started, "duration_s": 2.0 + i},
            "workload": {"path": f"w{i}.parquet"},
            "options": {"speed": 1.0},
            "totals": {"acked_records": 1000 * (i + 1), "records_per_s": 500.0 * (i + 1), "mb_per_s": 0.1},
            "latency_ms": {"append": {"p50": 0.5, "p99": 2.5 + i, "p999": 9.0}, "fetch": {"p99": 1.0},
                           "end_to_end": {}, "schedule_lag": {"p99": 0.2}},
            "errors": {"total": i},
            "verification": {"ok": True},
        }
        (reports / f"r{i}.json").write_text(json.dumps(doc))
    (reports / "other.json").write_text('{"schema": "something else"}')
    rows = aggregate_reports(spark, [str(reports)], str(tmp_path / "summary"))
    assert [(r["file"], r["records"], r["append_p99_ms"], r["errors"]) for r in rows] == [
        ("r1.json", 2000, 3.5, 1),
        ("r0.json", 1000, 2.5, 0),
    ]
    assert (tmp_path / "summary.png").stat().st_size > 1000
    assert (tmp_path / "summary.csv").read_text().splitlines()[0].startswith("file,started,workload")
    assert json.loads((tmp_path / "summary.json").read_text())[0]["end_to_end_p99_ms"] is None
