"""Docs that cannot drift: every Python block of README.md and docs/*.md runs as a test (Sybil).

pytest collects README.md and docs/ (``testpaths`` in pyproject.toml); Sybil turns each
```` ```python ```` block of a page into one test item, in page order, and runs them in one
namespace per page, so a later block uses what an earlier one defined. A block holding
``>>>`` prompts is a doctest: its printed output is compared. Each page runs in a fresh
temporary working directory, so ``Engine.open("data")`` in a page touches nothing of the
repository.

Conventions for writers of a page (the same in every .md file):

* A block is written to run as it stands, with the names the earlier blocks of its page
  defined. Set-up a reader does not need to see goes in an invisible block,
  ``<!-- invisible-code-block: python`` ... ``-->``, just before the block it serves.
* A block that cannot run here (it needs a cluster, a network service, a user's own
  application) is preceded by ``<!-- skip: next "why it cannot run" -->``. Prefer making it
  runnable; a skip must say why.
* A block that mentions ``spark``, and every later block of its page, gets the ``spark``
  marker (it starts a local JVM), so ``-m "not spark"`` leaves them out as it leaves the
  Spark tests out.
* Blocks in other languages (sh, json, plain text) are not run.
"""

from __future__ import annotations

import atexit
import gc
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from sybil import Sybil
from sybil.integration.pytest import SybilItem
from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser

ROOT = Path(__file__).resolve().parent
_CWD_KEY = "__docs_previous_cwd__"
_TMP_KEY = "__docs_tmp__"
_GC_KEY = "__docs_gc_threshold__"
_PATH_KEY = "__docs_sys_path__"


def _enter_scratch_dir(namespace: dict[str, Any]) -> None:
    namespace[_CWD_KEY] = os.getcwd()
    namespace[_GC_KEY] = gc.get_threshold()
    namespace[_PATH_KEY] = list(sys.path)
    namespace[_TMP_KEY] = tempfile.mkdtemp(prefix="seglog-docs-")
    os.chdir(namespace[_TMP_KEY])
    # A page runs as a user's script runs: the repository root is not on its path, so the layer
    # folders (engine/, tools/, ...) cannot be imported by their bare names -- only seglog, as installed.
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT]


def _leave_scratch_dir(namespace: dict[str, Any]) -> None:
    sys.path[:] = namespace[_PATH_KEY]
    os.chdir(namespace[_CWD_KEY])
    gc.set_threshold(*namespace[_GC_KEY])  # a page may tune the collector (docs/OPERATIONS.md does)
    if "pyspark" in sys.modules:
        # A Spark session outlives the page (pages share it, as the Spark tests do), and its JVM and
        # Python workers may have started in this directory: remove it only when the process ends.
        atexit.register(shutil.rmtree, namespace[_TMP_KEY], ignore_errors=True)
    else:
        shutil.rmtree(namespace[_TMP_KEY], ignore_errors=True)


pytest_collect_file = Sybil(
    parsers=[PythonCodeBlockParser(), SkipParser()],
    patterns=["README.md", "docs/*.md"],
    setup=_enter_scratch_dir,
    teardown=_leave_scratch_dir,
    name="docs",
).pytest()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # From a page's first block that mentions Spark on, its blocks use the session (or a DataFrame) it made.
    pages_using_spark: set[pytest.Collector] = set()
    for item in items:
        if not isinstance(item, SybilItem) or item.parent is None:
            continue
        if "spark" in str(item.example.parsed):
            pages_using_spark.add(item.parent)
        if item.parent in pages_using_spark:
            item.add_marker(pytest.mark.spark)
