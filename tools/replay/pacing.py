"""The pacing clock: absolute deadlines on a monotonic clock, sleep then spin.

Every send has an intended time ``origin + due / speed`` fixed when the replay
starts; a producer waits for that absolute deadline, never for "the gap since
my last send", so a late send does not push every later one back (accumulated
sleeps drift by the sum of their overshoots). ``asyncio.sleep`` wakes up to
about a millisecond late (epoll's timeout is in whole milliseconds and the
loop fires timers up to its clock resolution early or late), so the pacer
sleeps until ``SPIN_NS`` before the deadline and then yields to the loop
(``asyncio.sleep(0)``) until the deadline passes: other producers keep
running during the spin, and the spin costs up to about a millisecond of CPU
per send. With ``speed=None`` ("max") there is no deadline at all.

No engine import; the clock is injectable for tests.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Final

# Sleep until this long before a deadline, then spin. libuv timers count whole
# milliseconds, so wake-ups come up to a millisecond early (and a fraction of one
# late); one millisecond covers the early side, and spinning longer only burns CPU
# the engine's threads need (docs/PERFORMANCE.md, "Measurements behind the code").
SPIN_NS: Final = 1_000_000


class Pacer:
    """Maps workload time (ns since the first capture) to absolute monotonic deadlines.

    Concurrency: one pacer is shared by every producer task of a replay; it
    holds no mutable state after :meth:`start`, so tasks may call it freely.
    """

    def __init__(
        self,
        speed: float | None,
        *,
        spin_ns: int = SPIN_NS,
        clock_ns: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        if speed is not None and not speed > 0:
            raise ValueError(f"speed must be > 0 (or None for as fast as possible), got {speed}")
        self.speed = speed
        self.spin_ns = spin_ns
        self.clock_ns = clock_ns
        self.origin_ns = 0

    @property
    def paced(self) -> bool:
        return self.speed is not None

    def start(self, lead_ns: int = 0) -> int:
        """Fix the origin ``lead_ns`` from now (time for tasks to start); returns it."""
        self.origin_ns = self.clock_ns() + lead_ns
        return self.origin_ns

    def deadline_ns(self, due_ns: int) -> int:
        """The absolute intended time of a step due ``due_ns`` after the first capture."""
        if self.speed is None:
            return self.origin_ns
        return self.origin_ns + round(due_ns / self.speed)

    async def wait_until(self, deadline_ns: int) -> int:
        """Return at (never before) ``deadline_ns``; returns the clock reading then."""
        if self.speed is None:
            return self.clock_ns()
        now = self.clock_ns()
        remaining = deadline_ns - now
        if remaining > self.spin_ns:
            await asyncio.sleep((remaining - self.spin_ns) / 1e9)
            now = self.clock_ns()
        while now < deadline_ns:
            await asyncio.sleep(0)
            now = self.clock_ns()
        return now


def parse_speed(text: str) -> float | None:
    """``"1"``, ``"2.5"``, ``"10x"`` -> a factor; ``"max"`` -> ``None`` (as fast as possible).

    Raises:
        ValueError: not a positive number, ``Nx`` or ``max``.
    """
    t = text.strip().lower()
    if t in ("max", "inf", "unlimited"):
        return None
    if t.endswith("x"):
        t = t[:-1]
    try:
        speed = float(t)
    except ValueError:
        raise ValueError(f"speed {text!r} is not a number, 'Nx' or 'max'") from None
    if not speed > 0 or speed == float("inf"):
        raise ValueError(f"speed {text!r} must be a positive number (or 'max')")
    return speed
