"""seglog installed from a wheel into a user's project that has its own ``engine`` and ``tools`` packages.

One fresh venv for the module: ``pip install seglog-*.whl[testing]`` (the wheel of this tree that
conftest.py builds, as a user gets it; pip's cache supplies the dependencies). The throwaway project then runs its
own pytest suite with no conftest and no ini file: the plugin's fixtures must work in pytest-asyncio's
default strict mode and in auto mode, ``from engine import ...`` must be the project's own package, and the
test examples of README.md and docs/TESTING.md must pass as written.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.packaging, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

USER_ENGINE = '''"""The user's own package named engine: seglog must not shadow it, nor be shadowed by it."""
OWNER = "the user's engine"
'''

USER_TOOLS = '''"""The user's own package named tools."""
def shout(text: str) -> str:
    return text.upper()
'''

USER_TESTS = '''
import seglog
from engine import OWNER
from tools import shout

from seglog import Engine, Record


def test_the_projects_own_packages_win_and_seglog_is_the_installed_one():
    assert OWNER == "the user's engine" and shout("a") == "A"
    assert "site-packages" in seglog.__file__


async def test_produce_then_fetch(seglog_engine, seglog_dir):
    assert isinstance(seglog_engine, Engine) and seglog_engine.path == seglog_dir
    await seglog_engine.create_topic("orders")
    log = seglog_engine.log("orders")
    res = await log.append([Record(shout("paid").encode(), key=b"order-1")])
    got = await log.read(res.first_offset)
    assert [(r.key, r.value) for r in got.records] == [(b"order-1", b"PAID")]


def test_sync_fixtures(seglog_config, seglog):
    assert seglog_config.segment_bytes == 64 * 1024 and hasattr(seglog, "assert_topic_holds")
'''


def _python_test_blocks(markdown: Path) -> list[str]:
    """The fenced ``python`` blocks of ``markdown`` that define a test: each is a test module as written.

    Blocks using ``seglog_kafka`` are left to the Kafka tests: they need a Kafka client library, which
    the ``testing`` extra does not bring.
    """
    blocks = re.findall(r"^```python\n(.*?)^```", markdown.read_text(encoding="utf-8"), re.DOTALL | re.MULTILINE)
    return [block for block in blocks
            if re.search(r"^(async )?def test_", block, re.MULTILINE) and "seglog_kafka" not in block]


def _env() -> dict[str, str]:
    """This process's environment without what would point the fresh venv back at this tree or venv."""
    drop = {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "SEGLOG_LOG_DIR", "PYTEST_ADDOPTS", "PYTEST_PLUGINS"}
    return {k: v for k, v in os.environ.items() if k not in drop} | {"PYTHONNOUSERSITE": "1"}


def _run(cmd: list[str | Path], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=timeout, check=False)


@pytest.fixture(scope="module")
def user_project(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Iterator[tuple[Path, Path]]:
    """(project directory, the venv's python) with seglog[testing] installed from the wheel of this tree."""
    base = tmp_path_factory.mktemp("user-project")
    venv = base / "venv"
    python = venv / "bin" / "python"
    # The venv gets no pip of its own (ensurepip is slow): this interpreter's pip installs into it.
    made = _run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", venv], base, 120)
    assert made.returncode == 0, made.stderr
    installed = _run([sys.executable, "-m", "pip", "--python", python, "install", "--quiet",
                      f"{wheel}[testing]"], base, 600)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    project = base / "project"
    (project / "engine").mkdir(parents=True)
    (project / "engine" / "__init__.py").write_text(USER_ENGINE)
    (project / "tools").mkdir()
    (project / "tools" / "__init__.py").write_text(USER_TOOLS)
    tests = project / "tests"
    tests.mkdir()
    (tests / "test_service.py").write_text(USER_TESTS)
    for doc in ("README.md", "docs/TESTING.md"):
        for i, block in enumerate(_python_test_blocks(ROOT / doc)):
            (tests / f"test_{Path(doc).stem.lower()}_example_{i}.py").write_text(block)
    yield project, python


def _pytest(user_project: tuple[Path, Path], *args: str) -> subprocess.CompletedProcess[str]:
    project, python = user_project
    assert not list(project.rglob("conftest.py")) and not list(project.glob("*.ini")) and not list(
        project.glob("*.toml")) and not list(project.glob("*.cfg")), "the project must have no pytest settings"
    return _run([python, "-m", "pytest", "-p", "no:cacheprovider", "-rA", *args], project, 300)


def test_the_docs_have_test_examples_to_run() -> None:
    assert _python_test_blocks(ROOT / "README.md"), "README.md lost its pytest example"
    assert len(_python_test_blocks(ROOT / "docs" / "TESTING.md")) >= 3


def test_fixtures_in_strict_mode_with_no_settings(user_project: tuple[Path, Path]) -> None:
    result = _pytest(user_project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "mode=strict" in result.stdout or "mode=Mode.STRICT" in result.stdout
    assert "seglog-" in result.stdout  # the plugin was loaded from its entry point
    assert re.search(r"\b\d+ passed\b", result.stdout) and " failed" not in result.stdout


def test_fixtures_in_auto_mode(user_project: tuple[Path, Path]) -> None:
    result = _pytest(user_project, "-o", "asyncio_mode=auto")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "mode=auto" in result.stdout or "mode=Mode.AUTO" in result.stdout


def test_from_engine_import_is_the_users_package(user_project: tuple[Path, Path]) -> None:
    project, python = user_project
    probe = "import engine, seglog.engine; print(engine.OWNER); print(seglog.engine.Engine.__module__)"
    result = _run([python, "-c", probe], project, 60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["the user's engine", "seglog.engine.engine"]
