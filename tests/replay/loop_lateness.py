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
from pathlib import Path
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


def run_delay_ns() -> int:
    """How long the threads of this process have waited, runnable, for a CPU (Linux schedstat), in ns; 0 unknown.

    The loop lateness above is a sample taken before a test's run; this is read before and after it,
    so a test can allow exactly the time the machine denied the process during the run (a pacer that
    drifts or blocks the loop is late without waiting for a CPU, so it is not excused by it). Summed
    over threads: generous when several wait at once, and zero on an idle machine.
    """
    total = 0
    for path in Path("/proc/self/task").glob("*/schedstat"):
        try:
            total += int(path.read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended meanwhile, or no schedstat on this kernel
    return total
