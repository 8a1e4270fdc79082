"""The README's quick start, run as written: twice in the same directory, as a user re-running it would."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def quick_start() -> str:
    section = README.read_text(encoding="utf-8").split("\n## Quick start\n", 1)[1]
    found = re.search(r"^```python\n(.*?)^```", section, re.DOTALL | re.MULTILINE)
    assert found, "README.md's quick start has no python block"
    return found.group(1)


def test_the_quick_start_runs_twice_in_the_same_directory(tmp_path: Path) -> None:
    code = quick_start()
    outputs = []
    for _ in range(2):
        run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                             timeout=120, check=False)
        assert run.returncode == 0, run.stderr
        outputs.append(run.stdout.split())
    # Each run appended one record to orders-0 and read it back.
    assert outputs == [["b'paid'", "1", "1"], ["b'paid'", "2", "2"]]
