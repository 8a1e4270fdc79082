"""Fixtures for the ``seglog`` CLI tests: hand-built log directories and an in-process runner."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cliharness import Result
from segfiles import simple_log_dir

from seglog.tools.cli import main


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Callable[..., Result]:
    """Run ``seglog ARGS...`` in-process through ``seglog.tools.cli.main``; returns (exit code, stdout, stderr)."""
    monkeypatch.delenv("SEGLOG_LOG_DIR", raising=False)

    def run(*args: str | Path) -> Result:
        capsys.readouterr()
        code = main([str(a) for a in args])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    """``orders`` (2 partitions; partition 0 has 3 segments of 12 records) written byte by byte, shut down cleanly."""
    return simple_log_dir(tmp_path / "data")
