"""The packaging tests' wheel: built once per session, by pip, from a clean copy of the tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Made by builds, installs and runs of the tree; never part of the distribution's sources.
_NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".venv", "data", "reports", "build", "dist", "*.egg-info", "__pycache__", ".mypy_cache",
    ".ruff_cache", ".pytest_cache", ".hypothesis", "*.so",
)


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built by pip from a clean copy of the tree (as a user's ``pip install .`` builds it)."""
    work = tmp_path_factory.mktemp("build")
    src = work / "src"
    shutil.copytree(ROOT, src, symlinks=True, ignore=_NOT_SOURCES)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "SEGLOG_"))}
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(work / "dist"), str(src)],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    assert proc.returncode == 0, f"pip wheel exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    (built,) = (work / "dist").glob("seglog-*.whl")
    return built
