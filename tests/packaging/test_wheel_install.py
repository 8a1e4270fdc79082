"""The built distribution: one import package, ``seglog``, that installs beside anything.

The wheel must hold ``seglog/`` and its dist-info only -- no top-level ``engine``,
``segments``, ``indexes`` or ``tools`` that would merge with (or shadow) a user's
packages of those names; the PyPI package called ``segments`` is the real-world
case. These tests build the wheel from a copy of the tree (the ``seglog/``
symlinks followed, as setuptools follows them), install it in a fresh virtual
environment without system site-packages beside ``segments`` from PyPI, and run
the ``seglog`` console script there. They need the network (PyPI, through pip's
cache) and take about a minute: ``-m "not packaging"`` leaves them out. The wheel
fixture (conftest.py) is shared with the user-project tests.
"""

from __future__ import annotations

import os
import re
import subprocess
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import seglog

pytestmark = [pytest.mark.packaging, pytest.mark.slow]


def _run(*argv: str | Path, cwd: Path | None = None, stdin: str | None = None,
         timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "SEGLOG_"))}
    proc = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, input=stdin, capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert proc.returncode == 0, f"{' '.join(map(str, argv))} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Iterator[Path]:
    """A new venv (no system site-packages) holding the wheel and PyPI's ``segments``; yields its bin/."""
    home = tmp_path_factory.mktemp("venv") / "env"
    venv.EnvBuilder(with_pip=True, system_site_packages=False, clear=True).create(home)
    bin_dir = home / "bin"
    _run(bin_dir / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check", wheel, "segments")
    yield bin_dir


def test_wheel_holds_only_the_seglog_package_and_its_dist_info(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    top = {name.split("/", 1)[0] for name in names}
    assert top == {"seglog", f"seglog-{seglog.__version__}.dist-info"}
    # The layers are inside it, by their files (the symlinks of the tree are followed, not stored).
    for layer in ("engine", "segments", "indexes", "server", "tools"):
        assert f"seglog/{layer}/__init__.py" in names
        assert f"seglog/{layer}/py.typed" in names
    assert "seglog/py.typed" in names
    assert any(re.fullmatch(r"seglog/segments/_speedups\..*\.so", n) for n in names), "the C module was not built"
    assert f"seglog-{seglog.__version__}.dist-info/licenses/LICENSE" in names


def test_wheel_declares_the_console_script_and_the_pytest_plugin(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        entry_points = zf.read(f"seglog-{seglog.__version__}.dist-info/entry_points.txt").decode()
    assert "seglog = seglog.tools.cli:main" in entry_points
    # The server's plugin: it re-exports the engine's fixtures and adds seglog_kafka (the engine cannot import it).
    assert re.search(r"\[pytest11\]\s+seglog = seglog\.server\.pytest_plugin", entry_points)


def test_cli_runs_beside_the_pypi_package_named_segments(fresh_venv: Path, tmp_path: Path) -> None:
    assert _run(fresh_venv / "seglog", "--version").stdout == f"seglog {seglog.__version__}\n"
    data = tmp_path / "data"
    data.mkdir()
    _run(fresh_venv / "seglog", "topics", "create", "orders", "--partitions", "2", "--log-dir", data)
    listed = _run(fresh_venv / "seglog", "topics", "list", "--log-dir", data).stdout
    assert listed.split() == ["orders"]
    _run(fresh_venv / "seglog", "produce", "orders", "--partition", "1", "--log-dir", data, stdin="paid\nshipped\n")
    consumed = _run(fresh_venv / "seglog", "consume", "orders", "--partition", "1", "--log-dir", data).stdout
    assert consumed.split() == ["paid", "shipped"]
    _run(fresh_venv / "seglog", "verify", data)


def test_both_packages_named_segments_import_intact(fresh_venv: Path) -> None:
    probe = (
        "import segments, seglog.segments, seglog.segments.errors as e;"
        "print(segments.__file__); print(seglog.segments.__file__); print(e.CorruptRecordError.__name__)"
    )
    theirs, ours, name = _run(fresh_venv / "python", "-c", probe, cwd=fresh_venv).stdout.split()
    assert Path(theirs).parent.name == "segments" and Path(theirs).parent.parent.name == "site-packages"
    assert Path(ours).parent.parent.name == "seglog"
    assert name == "CorruptRecordError"
