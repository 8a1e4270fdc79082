"""Smoke test of ``seglog bench``: a quick run completes and its JSON report carries every key.

No timing is asserted (figures from a shared machine are noise to a test);
the full benchmark is run by hand (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from seglog.tools.bench import RATIO_KEYS, ROW_KEYS, SCALING_KEYS
from seglog.tools.bench.report import COLUMNS
from seglog.tools.cli import main


def test_quick_run_emits_every_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report_path = tmp_path / "bench.json"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    markdown_path = tmp_path / "bench.md"
    code = main(["bench", "--quick", "--json", str(report_path), "--markdown", str(markdown_path),
                 "--workdir", str(scratch)])
    out = capsys.readouterr().out
    assert code == 0
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert set(report["rows"]) == set(ROW_KEYS)
    assert set(report["ratios"]) == set(RATIO_KEYS)
    assert set(report["scaling"]) == set(SCALING_KEYS)
    for key, row in report["rows"].items():
        assert set(COLUMNS) <= set(row), key
        cell = row["seglog"] if row["seglog"] is not None else row["raw"]
        assert cell is not None and math.isfinite(cell["value"]) and cell["value"] > 0, key
    for key, ratio in report["ratios"].items():
        assert ratio["value"] is not None and ratio["value"] > 0, key
        assert ratio["holds"] in (True, False, None), key
    assert all(report["scaling"][key] is not None for key in SCALING_KEYS)
    assert {c["name"] for c in report["scaling"]["recovery_cases"]} == {
        "total 4X, after 4X", "total 4X, after 2X", "total 4X, after 1X", "total 2X, after 1X"
    }
    # The table is printed too, ratios last; and the scratch directory is left empty.
    assert out.rstrip().splitlines()[-1].startswith(report["ratios"][RATIO_KEYS[-1]]["label"])
    assert list(scratch.iterdir()) == []
    tables = markdown_path.read_text(encoding="utf-8")
    assert all(report["ratios"][key]["label"] in tables for key in RATIO_KEYS)


def test_unknown_section_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--quick", "--only", "produce,nope"]) == 2
    assert "unknown section(s) nope" in capsys.readouterr().err


def test_gc_threshold_applies_to_the_run_and_is_restored(tmp_path: Path) -> None:
    import gc

    before = gc.get_threshold()
    report_path = tmp_path / "bench.json"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    assert main(["bench", "--quick", "--only", "fetch", "--gc-threshold", "50000", "--json", str(report_path),
                 "--workdir", str(scratch)]) == 0
    assert json.loads(report_path.read_text(encoding="utf-8"))["options"]["gc_threshold"] == 50000
    assert gc.get_threshold() == before
    assert main(["bench", "--quick", "--gc-threshold", "0"]) == 2
