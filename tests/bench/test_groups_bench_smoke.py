"""Smoke test of ``seglog bench --only groups``: a quick run completes and reports every row, column and ratio.

No timing is asserted (docs/PERFORMANCE.md has the figures of full runs).
"""

from __future__ import annotations

import json
from pathlib import Path

from seglog.tools.bench.groups import COLUMNS, ROWS
from seglog.tools.cli import main


def test_quick_groups_run_reports_every_row_and_ratio(tmp_path: Path) -> None:
    report_path = tmp_path / "groups.json"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    assert main(["bench", "--quick", "--only", "groups", "--json", str(report_path), "--workdir", str(scratch)]) == 0
    groups = json.loads(report_path.read_text(encoding="utf-8"))["groups"]
    assert set(groups["rows"]) == set(ROWS)
    assert all(groups["rows"]["sequential"][c] > 0 for c in COLUMNS)
    assert groups["rows"]["concurrent"]["seglog"] > 0 and groups["rows"]["concurrent"]["file_per_group"] > 0
    assert all(r["value"] is not None and r["value"] > 0 for r in groups["ratios"].values())
    assert groups["store_bytes_after_run"] > 0
    assert list(scratch.iterdir()) == []
