"""Imports only point down: tools -> engine -> segments -> indexes.

import-linter checks the same contract in `make lint`; this test keeps it in the
plain pytest run too, and also forbids *lazy* (function-level) upward imports.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ["tools", "engine", "segments", "indexes"]  # top to bottom


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("layer", LAYERS)
def test_layer_imports_only_point_down(layer: str) -> None:
    forbidden = set(LAYERS[: LAYERS.index(layer)])
    offenders = []
    for path in sorted((ROOT / layer).rglob("*.py")):
        bad = _imports(path) & forbidden
        if bad:
            offenders.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not offenders, "upward imports:\n" + "\n".join(offenders)


@pytest.mark.parametrize("layer", LAYERS)
def test_every_package_has_py_typed(layer: str) -> None:
    assert (ROOT / layer / "py.typed").is_file()
