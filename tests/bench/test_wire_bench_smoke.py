"""Smoke test of ``seglog bench --only wire``: a quick run completes and reports every row and ratio.

No timing is asserted (docs/PERFORMANCE.md has the figures of full runs).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seglog.tools.bench.wire import RATIOS, ROWS
from seglog.tools.cli import main


def test_quick_wire_run_reports_every_row_and_ratio(tmp_path: Path) -> None:
    pytest.importorskip("confluent_kafka", reason="the wire bench needs the wire extra")
    pytest.importorskip("aiokafka", reason="the wire bench needs the wire extra")
    report_path = tmp_path / "wire.json"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    assert main(["bench", "--quick", "--only", "wire", "--json", str(report_path), "--workdir", str(scratch)]) == 0
    wire = json.loads(report_path.read_text(encoding="utf-8"))["wire"]
    assert set(wire["rows"]) == set(ROWS)
    assert all(cells["seglog"] > 0 and cells["null_sink"] > 0 for cells in wire["rows"].values())
    assert set(wire["ratios"]) == set(RATIOS)
    assert all(r["value"] is not None and r["value"] > 0 for r in wire["ratios"].values())
    assert list(scratch.iterdir()) == []
