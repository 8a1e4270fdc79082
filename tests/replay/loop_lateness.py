"""How late the event loop wakes a waiting task right now: the yardstick of the pacing tests.

The pacing tests check time itself, so they read the wall clock. On a shared machine (CI's two
vCPUs, other test runs, ``make stress``'s spinning processes) the loop thread can be descheduled
for milliseconds at a time, and no pacer can be on time while it is. Each pacing test therefore
first measures this, with the best waiting any pacer can do (yield to the loop until the deadline
has passed), and allows the pacer that lateness plus its own margin. A pacer that drifts, sleeps
past its deadlines or blocks the loop is still late by far more than the loop itself is.
"""

from __future__ import annotations

import asyncio
import time
from typing import NamedTuple


class Lateness(NamedTuple):
    """Percentiles of how late a task woke after its deadlines, in nanoseconds."""

    p50: int
    p90: int
    max: int


def percentiles(late_ns: list[int]) -> Lateness:
    """The 50th and 90th percentiles and the maximum of ``late_ns`` (not empty)."""
    ordered = sorted(late_ns)
    return Lateness(ordered[len(ordered) // 2], ordered[int(len(ordered) * 0.9)], ordered[-1])


async def loop_lateness(steps: int = 50, step_ns: int = 2_000_000) -> Lateness:
    """Yield to the loop until each of ``steps`` deadlines ``step_ns`` apart has passed; how late each came."""
    clock = time.perf_counter_ns
    origin = clock() + step_ns
    late = []
    for i in range(steps):
        deadline = origin + i * step_ns
        now = clock()
        while now < deadline:
            await asyncio.sleep(0)
            now = clock()
        late.append(now - deadline)
    return percentiles(late)
