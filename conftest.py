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
* A block that mentions Spark (any case), or reads a name that such a block of its page bound
  (a DataFrame, say), gets the ``spark`` marker (it needs a local JVM), so
  ``-m "not spark"`` leaves it out as it leaves the Spark tests out.
* Blocks in other languages (sh, json, plain text) are not run.
"""

from __future__ import annotations

import ast
import atexit
import gc
import os
import shutil
import sys
import tempfile
import textwrap
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


def _source(item: SybilItem) -> str:
    parsed = item.example.parsed
    return str(getattr(parsed, "source", parsed))  # a doctest example keeps its code in .source


def _names(source: str) -> tuple[set[str], set[str]]:
    """(names the code reads, names it binds); both empty when it does not parse."""
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return set(), set()
    loads: set[str] = set()
    stores: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loads if isinstance(node.ctx, ast.Load) else stores).add(node.id)
        elif isinstance(node, ast.alias):
            stores.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            stores.add(node.name)
    return loads, stores


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A block uses Spark when it says "spark" or reads a name that a Spark block of its page bound last.
    bound_by_spark: dict[pytest.Collector, dict[str, bool]] = {}
    for item in items:
        if not isinstance(item, SybilItem) or item.parent is None:
            continue
        source = _source(item)
        loads, stores = _names(source)
        page = bound_by_spark.setdefault(item.parent, {})
        uses_spark = "spark" in source.lower() or any(page.get(name, False) for name in loads)
        for name in stores:
            page[name] = uses_spark
        if uses_spark:
            item.add_marker(pytest.mark.spark)
