"""Imports only point down: tools -> server -> engine -> segments -> indexes, all under the one package ``seglog``.

import-linter checks the same contract in `make lint`; this test keeps it in the
plain pytest run too, forbids *lazy* (function-level) upward imports, and forbids
the bare folder names (``import engine``): the installed distribution has only
``seglog``, so such an import works from a checkout and fails for every user.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ["tools", "server", "engine", "segments", "indexes"]  # top to bottom
PACKAGES = [*LAYERS, "seglog"]


def _imports(path: Path) -> set[str]:
    """The layer of every absolute import in ``path``: ``seglog.engine.x`` -> ``engine``; bare names as they are."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    found: set[str] = set()
    for name in names:
        parts = name.split(".")
        found.add(parts[1] if parts[0] == "seglog" and len(parts) > 1 else parts[0])
    return found


def _sources(layer: str) -> list[Path]:
    return sorted((ROOT / layer).rglob("*.py"))


@pytest.mark.parametrize("layer", LAYERS)
def test_layer_imports_only_point_down(layer: str) -> None:
    forbidden = set(LAYERS[: LAYERS.index(layer)])
    offenders = []
    for path in _sources(layer):
        bad = _imports(path) & forbidden
        if bad:
            offenders.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not offenders, "upward imports:\n" + "\n".join(offenders)


@pytest.mark.parametrize("folder", [*LAYERS, "tests", "bench"])
def test_code_imports_the_layers_through_seglog_only(folder: str) -> None:
    offenders = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            roots = []
            if isinstance(node, ast.Import):
                roots = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                roots = [node.module.split(".")[0]]
            offenders += [f"{path.relative_to(ROOT)}:{node.lineno} imports {r}" for r in roots if r in LAYERS]
    assert not offenders, "imports by folder name instead of seglog.<layer>:\n" + "\n".join(offenders)


@pytest.mark.parametrize("package", PACKAGES)
def test_every_package_has_py_typed(package: str) -> None:
    assert (ROOT / package / "py.typed").is_file()


@pytest.mark.parametrize("layer", LAYERS)
def test_seglog_links_each_layer_folder(layer: str) -> None:
    link = ROOT / "seglog" / layer
    assert link.is_symlink(), f"seglog/{layer} should be a relative symlink to ../{layer}"
    assert link.resolve() == (ROOT / layer).resolve()


# Inside engine (import-linter's second contract): top to bottom; a module may import only modules below it.
ENGINE_LAYERS = [
    ["engine"],
    ["follow", "consumer", "opening"],
    ["loader", "topic_admin", "background", "services"],
    ["log", "offline"],  # independent: neither imports the other
    ["topics", "retention", "checkpoints", "groups", "coordinator", "assignors", "partitioner", "results", "validate",
     "names", "config", "_fs", "errors"],
]


def _engine_modules_imported(path: Path) -> set[str]:
    """The ``seglog.engine.<module>`` names ``path`` imports anywhere in it (function level and TYPE_CHECKING too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[:2] == ["seglog", "engine"]:
                found.update([parts[2]] if len(parts) > 2 else [alias.name for alias in node.names])
    return found


@pytest.mark.parametrize("level", range(1, len(ENGINE_LAYERS)))
def test_inside_engine_no_module_imports_what_owns_it(level: int) -> None:
    above = {name for layer in ENGINE_LAYERS[:level] for name in layer}
    offenders = []
    for name in ENGINE_LAYERS[level]:
        # The modules of a level are independent of each other (import-linter's "|"), except the plain
        # modules at the bottom (its ":").
        siblings = set(ENGINE_LAYERS[level]) - {name} if level < len(ENGINE_LAYERS) - 1 else set()
        forbidden = above | siblings
        package = ROOT / "engine" / name
        paths = sorted(package.rglob("*.py")) if package.is_dir() else [ROOT / "engine" / f"{name}.py"]
        for path in paths:
            bad = _engine_modules_imported(path) & forbidden
            if bad:
                offenders.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not offenders, "upward imports inside engine (the Engine -> PartitionLog cycle):\n" + "\n".join(offenders)
