"""Argument types and checks shared by ``seglog replay``, ``record`` and ``workload``.

The conventions every ``seglog`` command shares (log directory option, time
parsing, progress bars, notes on stderr, exit codes) live in
:mod:`seglog.tools._output`; this module adds what only the workload commands need.
Imports only the standard library and :mod:`seglog.tools._output` at module level, so
the command modules can register their parsers without the ``replay`` extra.
"""

from __future__ import annotations

import argparse
import importlib.util
from collections.abc import Iterable
from typing import Final

from seglog.tools._output import note

MISSING_EXTRA: Final = (
    "this command needs the 'replay' extra (pyarrow, hdrhistogram): pip install 'seglog[replay]'"
)
# Import names of the 'replay' extra's packages.
EXTRA_MODULES: Final = ("pyarrow", "hdrh")
# Import names of the 'plots' extra's packages: optional, a report without plots is complete.
PLOT_MODULES: Final = ("matplotlib",)
PLOTS_SKIPPED: Final = "skipped: the 'plots' extra (matplotlib) is not installed: pip install 'seglog[plots]'"


def speed_arg(text: str) -> float | None:
    """argparse type for ``--speed``: ``1``, ``2.5``, ``10x`` or ``max``."""
    from seglog.tools.replay.pacing import parse_speed

    try:
        return parse_speed(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def topic_count_arg(text: str) -> tuple[str, int]:
    """argparse type for ``TOPIC=N``."""
    name, sep, count = text.rpartition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected TOPIC=N, got {text!r}")
    try:
        n = int(count)
    except ValueError:
        raise argparse.ArgumentTypeError(f"partition count in {text!r} is not an integer") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"partition count in {text!r} must be >= 1")
    return name, n


def missing_extra() -> bool:
    """Say so on stderr and return True when a package of the 'replay' extra is not installed."""
    missing = [m for m in EXTRA_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        note(f"Error: {MISSING_EXTRA} (missing: {', '.join(missing)})")
    return bool(missing)


def plots_available() -> bool:
    """True when the 'plots' extra is installed (``seglog replay`` then draws PNG plots beside its report)."""
    return all(importlib.util.find_spec(m) is not None for m in PLOT_MODULES)


def print_findings(findings: Iterable[object], limit: int = 50) -> None:
    """One line per finding on stderr, at most ``limit`` (then a count of the rest)."""
    items = list(findings)
    for finding in items[:limit]:
        note(f"  {finding}")
    if len(items) > limit:
        note(f"  ... and {len(items) - limit} more (use --json for all)")
