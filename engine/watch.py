"""``ChangeWatch``: wait until a predicate over some in-memory state holds, re-checked after every change.

What the group coordinator and the transaction coordinator share for their
``wait_until`` (tests and tools wait on a state change without polling or
sleeping). Call it only on the event loop that changes the state.

Must not import: ``tools`` or ``server``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["ChangeWatch"]


class ChangeWatch:
    """Waiters on a state: :meth:`notify` after each change wakes them, each re-checks its predicate."""

    __slots__ = ("_watchers",)

    def __init__(self) -> None:
        self._watchers: list[asyncio.Future[None]] = []

    def notify(self) -> None:
        """The state changed (or its owner closed): every waiter re-checks its predicate."""
        watchers, self._watchers = self._watchers, []
        for watcher in watchers:
            if not watcher.done():
                watcher.set_result(None)

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Return once ``predicate()`` holds, checked now and after every :meth:`notify`.

        Never gives up by itself: bound it with ``asyncio.timeout``.
        """
        while not predicate():
            watcher: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._watchers.append(watcher)
            await watcher
