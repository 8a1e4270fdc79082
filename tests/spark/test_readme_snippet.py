"""The README's Spark snippet, run as written in a fresh process on ``local[2]`` and ``local-cluster[2,1,1024]``.

The process has no ``PYSPARK_PYTHON`` and a ``python3`` first on ``PATH`` that is not this interpreter (it
fails when started), which is where Spark starts its Python workers unless told otherwise: the snippet
works only because ``register(spark)`` points them at the running interpreter. ``local-cluster`` runs the
executors as processes of their own, in directories of their own, as a real cluster would.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

README = Path(__file__).resolve().parents[2] / "README.md"
NOT_THIS_PYTHON = "#!/bin/sh\necho 'this python3 is not the interpreter that runs the test' >&2\nexit 3\n"


def readme_block(heading: str) -> str:
    section = README.read_text(encoding="utf-8").split(f"\n## {heading}\n", 1)[1]
    found = re.search(r"^```python\n(.*?)^```", section, re.DOTALL | re.MULTILINE)
    assert found, f"README.md's {heading} section has no python block"
    return found.group(1)


def run_python(code: str, cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


@pytest.mark.parametrize("master", ["local[2]", "local-cluster[2,1,1024]"])
def test_the_readme_spark_snippet_runs_as_written(tmp_path: Path, master: str) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(NOT_THIS_PYTHON)
    (bin_dir / "python3").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in {"PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"}}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    quick_start = run_python(readme_block("Quick start"), tmp_path, env, 120)
    assert quick_start.returncode == 0, quick_start.stderr
    snippet = readme_block("Spark")
    assert 'master("local[2]")' in snippet
    code = snippet.replace('master("local[2]")', f"master({master!r})")
    # The snippet appended the quick start's record to it: count it through read_seglog and through a
    # relative load(), which the executors of local-cluster (working directories of their own) resolve only
    # because the source makes the path absolute where the query is planned.
    code += "print('rows', read_seglog(spark, data).count(), spark.read.format('seglog').load('data').count())\n"
    code += "spark.stop()\n"
    run = run_python(code, tmp_path, env, 600)
    assert run.returncode == 0, run.stderr[-5000:]
    assert run.stdout.split() == ["rows", "2", "2"], run.stdout
