"""``seglog replay``, ``seglog record`` and ``seglog workload`` through the CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from replay_helpers import SAMPLE

from seglog.tools.cli import main
from seglog.tools.replay.format import load_workload
from seglog.tools.replay.sample import generate_sample


@pytest.mark.parametrize("argv", [["replay"], ["record"], ["workload"], ["workload", "validate"],
                                  ["workload", "describe"], ["workload", "generate"]])
def test_every_help_ends_with_an_example(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "--help"]) == 0
    out = capsys.readouterr().out
    tail = out[out.rindex("Example"):]
    assert "seglog " + argv[0] in tail


def test_validate_names_row_and_column_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"topic": "ok", "ts_ns": 1, "value": ""}\n{"topic": "no/pe", "ts_ns": 2, "value": ""}\n')
    assert main(["workload", "validate", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "1 problem(s) in 2 rows" in err and "row 1 (line 2), column 'topic'" in err
    assert main(["workload", "validate", str(bad), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False and doc["findings"][0]["row"] == 1 and doc["findings"][0]["column"] == "topic"
    assert main(["workload", "validate", str(tmp_path / "missing.parquet")]) == 1
    assert "no such file" in capsys.readouterr().err


def test_validate_and_describe_the_sample(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["workload", "validate", str(SAMPLE)]) == 0
    assert "no problems" in capsys.readouterr().err
    assert main(["workload", "describe", str(SAMPLE), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["topics"]["orders"]["partitions"] == 3 and doc["topics"]["orders"]["fetch"] > 0


def test_the_checked_in_sample_is_what_the_generator_writes(tmp_path: Path) -> None:
    assert main(["workload", "generate", str(tmp_path / "s.parquet")]) == 0
    generated = load_workload(tmp_path / "s.parquet")
    bundled = load_workload(SAMPLE)
    assert generated.rows == bundled.rows == generate_sample().rows
    assert generated.partitions == bundled.partitions


@pytest.mark.parametrize("argv", [["--speed", "fast"], ["--speed", "0"], ["--partitions", "t"],
                                  ["--config", "novalue"]])
def test_usage_errors_exit_2(argv: list[str], tmp_path: Path) -> None:
    assert main(["replay", str(SAMPLE), "--log-dir", str(tmp_path / "d"), *argv]) == 2


def test_replay_of_an_invalid_workload_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"topic": "t", "ts_ns": 1}\n')
    assert main(["replay", str(bad), "--log-dir", str(tmp_path / "d")]) == 1
    assert "row 0 (line 1), column 'value'" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("setting", ["no.such.key=1", "segment.bytes=many"])
def test_bad_config_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], setting: str) -> None:
    assert main(["replay", str(SAMPLE), "--log-dir", str(tmp_path / "d"), "--config", setting]) == 2
    assert capsys.readouterr().err.startswith("Error: --config:")
    assert not (tmp_path / "d").exists()


def test_replay_record_replay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "reports" / "replay.json"
    argv = ["replay", str(SAMPLE), "--log-dir", str(tmp_path / "data"), "--speed", "max",
            "--report", str(report), "--consumers", "1", "--json"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    printed = json.loads(captured.out)
    saved = json.loads(report.read_text())
    assert printed["verification"]["ok"] is True and saved["totals"] == printed["totals"]
    assert f"Report: {report}" in captured.err and "Plots:" in captured.err
    assert [Path(p).name for p in saved["plots"]] == ["replay-throughput.png", "replay-latency.png"]
    assert all(Path(p).is_file() for p in saved["plots"])

    out = tmp_path / "recorded.parquet"
    assert main(["record", "--log-dir", str(tmp_path / "data"), "--output", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rows"] == printed["totals"]["acked_records"]
    assert main(["replay", str(out), "--log-dir", str(tmp_path / "again"), "--speed", "max", "--no-plots"]) == 0
    assert "verification  OK" in capsys.readouterr().err


def test_record_from_a_missing_directory_is_a_usage_error(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["record", "--log-dir", str(tmp_path / "none"), "-o", str(tmp_path / "w.parquet")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"Error: {tmp_path / 'none'}: no such log directory (give --log-dir DIR or set SEGLOG_LOG_DIR)"
    ]
    assert not (tmp_path / "w.parquet").exists()


def test_without_the_plots_extra_replay_writes_its_report_and_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from seglog.tools.replay import cliutil

    monkeypatch.setattr(cliutil, "PLOT_MODULES", ("no_such_module_for_seglog",))
    report = tmp_path / "replay.json"
    assert main(["replay", str(SAMPLE), "--log-dir", str(tmp_path / "d"), "--speed", "max",
                 "--report", str(report)]) == 0
    assert "Plots:  skipped: the 'plots' extra (matplotlib) is not installed: pip install 'seglog[plots]'" in (
        capsys.readouterr().err)
    assert "plots" not in json.loads(report.read_text())
    assert list(tmp_path.glob("*.png")) == []


def test_without_the_replay_extra_commands_say_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from seglog.tools.replay import cliutil

    monkeypatch.setattr(cliutil, "EXTRA_MODULES", ("pyarrow", "no_such_module_for_seglog"))
    assert main(["workload", "validate", str(SAMPLE)]) == 1
    assert main(["replay", str(SAMPLE), "--log-dir", str(tmp_path / "d")]) == 1
    err = capsys.readouterr().err
    assert err.count("pip install 'seglog[replay]' (missing: no_such_module_for_seglog)") == 2
    assert not (tmp_path / "d").exists()
