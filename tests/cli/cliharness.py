"""Running ``seglog`` in tests: in-process results and a real subprocess of the console script.

A module of its own (not ``conftest``): every test directory has a ``conftest``, so
``from conftest import ...`` picks whichever was imported first when the whole suite runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]


class Result(NamedTuple):
    code: int
    out: str
    err: str


def run_seglog(*args: str | Path, stdin: bytes | None = None, env: dict[str, str] | None = None,
               timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    """Run the installed console script (``.venv/bin/seglog``) in a real subprocess."""
    script = Path(sys.executable).parent / "seglog"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "seglog.tools.cli"]
    full_env = {k: v for k, v in os.environ.items() if k != "SEGLOG_LOG_DIR"}
    full_env.update(env or {})
    return subprocess.run([*cmd, *map(str, args)], input=stdin, capture_output=True, timeout=timeout,
                          cwd=ROOT, env=full_env, check=False)


def seglog_command() -> list[str]:
    """The argv prefix that starts ``seglog`` (for tests that manage the process themselves)."""
    script = Path(sys.executable).parent / "seglog"
    return [str(script)] if script.exists() else [sys.executable, "-m", "seglog.tools.cli"]
