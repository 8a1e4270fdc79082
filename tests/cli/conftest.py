"""Fixtures for the ``seglog`` CLI tests: hand-built log directories and an in-process runner."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from segfiles import simple_log_dir

from tools.cli import main

ROOT = Path(__file__).resolve().parents[2]


class Result(NamedTuple):
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Callable[..., Result]:
    """Run ``seglog ARGS...`` in-process through ``tools.cli.main``; returns (exit code, stdout, stderr)."""
    monkeypatch.delenv("SEGLOG_LOG_DIR", raising=False)

    def run(*args: str | Path) -> Result:
        capsys.readouterr()
        code = main([str(a) for a in args])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


def run_seglog(*args: str | Path, stdin: bytes | None = None, env: dict[str, str] | None = None,
               timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    """Run the installed console script (``.venv/bin/seglog``) in a real subprocess."""
    script = Path(sys.executable).parent / "seglog"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "tools.cli"]
    full_env = {k: v for k, v in os.environ.items() if k != "SEGLOG_LOG_DIR"}
    full_env.update(env or {})
    return subprocess.run([*cmd, *map(str, args)], input=stdin, capture_output=True, timeout=timeout,
                          cwd=ROOT, env=full_env, check=False)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    """``orders`` (2 partitions; partition 0 has 3 segments of 12 records) written byte by byte, shut down cleanly."""
    return simple_log_dir(tmp_path / "data")
