"""Smoke test of ``seglog bench --only transactions``: a quick run completes and reports every row and ratio.

No timing is asserted (docs/PERFORMANCE.md has the figures of full runs).
"""

from __future__ import annotations

import json
from pathlib import Path

from seglog.tools.bench.transactions import COLUMNS
from seglog.tools.cli import main


def test_quick_transactions_run_reports_every_row_and_ratio(tmp_path: Path) -> None:
    report_path = tmp_path / "txn.json"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    code = main(["bench", "--quick", "--only", "transactions", "--json", str(report_path), "--workdir", str(scratch),
                 "--markdown", str(tmp_path / "txn.md")])
    assert code == 0
    section = json.loads(report_path.read_text(encoding="utf-8"))["transactions"]
    assert set(section["rows"]) == set(COLUMNS)
    assert all(section["rows"][c]["records_per_s"] > 0 for c in COLUMNS)
    assert all(r["value"] is not None and r["value"] > 0 for r in section["ratios"].values())
    assert "transactions of 100 records" in section["rows"]["txn_small"]["label"]
    assert "| transactions ratio (same run) | value |" in (tmp_path / "txn.md").read_text(encoding="utf-8")
    assert list(scratch.iterdir()) == []
