"""Argument parsing and terminal helpers shared by ``seglog replay``, ``record`` and ``workload``.

Imports only the standard library and rich at module level, so the command
modules can register their parsers without the ``replay`` extra installed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

# Progress bars redraw at most this often: a redraw takes about a millisecond of
# event-loop time, which a paced replay would see as schedule lag.
PROGRESS_REFRESH_S: Final = 0.25
MISSING_EXTRA: Final = (
    "this command needs the 'replay' extra (pyarrow, hdrhistogram, matplotlib): pip install 'seglog[replay]'"
)
# Import names of the 'replay' extra's packages.
EXTRA_MODULES: Final = ("pyarrow", "hdrh", "matplotlib")


def speed_arg(text: str) -> float | None:
    """argparse type for ``--speed``: ``1``, ``2.5``, ``10x`` or ``max``."""
    from tools.replay.pacing import parse_speed

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


def config_arg(text: str) -> tuple[str, Any]:
    """argparse type for ``--config KEY=VALUE`` (Kafka's dotted names or LogConfig's snake_case)."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    value: Any = raw
    if raw.lower() in ("true", "false"):
        value = raw.lower() == "true"
    else:
        try:
            value = int(raw)
        except ValueError:
            value = raw
    return key.replace(".", "_").replace("-", "_"), value


def time_arg(text: str) -> int:
    """argparse type for a point in time: ISO 8601 (UTC unless a zone is given) or epoch milliseconds."""
    t = text.strip()
    if t.lstrip("-").isdigit():
        return int(t)
    try:
        when = dt.datetime.fromisoformat(t)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time: use ISO 8601 (2026-11-22T10:00:00Z) or epoch milliseconds"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


@contextmanager
def progress_bar(
    description: str, total: int | None, *, enabled: bool, console: Console | None = None
) -> Iterator[Callable[[int], None] | None]:
    """A rich progress bar on stderr yielding an ``advance(n)`` callback, or ``None`` when disabled.

    Disabled when ``enabled`` is false or stderr is not a terminal. Redraws are
    throttled to ``PROGRESS_REFRESH_S`` and done by the caller's thread (no
    refresh thread competing with the event loop).
    """
    console = console or Console(stderr=True)
    if not enabled or not console.is_terminal:
        yield None
        return
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        auto_refresh=False,
    )
    task = progress.add_task(description, total=total)
    last = 0.0

    def advance(n: int) -> None:
        nonlocal last
        progress.advance(task, n)
        now = time.monotonic()
        if now - last >= PROGRESS_REFRESH_S:
            last = now
            progress.refresh()

    with progress:
        yield advance
        progress.refresh()


def print_findings(findings: Any, console: Console, limit: int = 50) -> None:
    """One line per finding on the console, at most ``limit`` (then a count of the rest)."""
    items = list(findings)
    for finding in items[:limit]:
        say(console, f"  {finding}")
    if len(items) > limit:
        say(console, f"  ... and {len(items) - limit} more (use --json for all)")


def say(console: Console, text: str) -> None:
    """Print plain text (no markup, no highlighting, no wrapping: paths stay whole for copy and paste)."""
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def missing_extra(console: Console) -> bool:
    """Say so and return True when a package of the 'replay' extra is not installed."""
    missing = [m for m in EXTRA_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        say(console, f"Error: {MISSING_EXTRA} (missing: {', '.join(missing)})")
    return bool(missing)
