"""``run``: start an asyncio program on uvloop when it is installed, else on asyncio's loop.

uvloop makes a loop turn and a thread hop markedly cheaper than asyncio's own
loop (docs/PERFORMANCE.md, "Measurements behind the code"), so the
command line, the replay tool and the benchmarks start their loop through here. A library user
who runs their own loop keeps it: seglog works on any asyncio loop.

Must not import: ``tools``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run", "uvloop_available"]

_T = TypeVar("_T")


def uvloop_available() -> bool:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def run(main: Coroutine[Any, Any, _T], *, debug: bool | None = None) -> _T:
    """Run ``main`` to completion on a new event loop (uvloop when installed) and return its result."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main, debug=debug)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop, debug=debug) as runner:
        return runner.run(main)
