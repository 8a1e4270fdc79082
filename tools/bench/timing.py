"""Timing primitives of ``seglog bench``: clocks, percentiles, rounds of interleaved variants."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

now = time.perf_counter


def percentile(samples: Sequence[float], p: float) -> float:
    """Nearest-rank percentile of ``samples`` (``p`` in [0, 100]); NaN when empty."""
    ordered = sorted(samples)
    if not ordered:
        return float("nan")
    rank = max(0, min(len(ordered) - 1, round(p / 100.0 * len(ordered) + 0.5) - 1))
    return ordered[rank]


@dataclass(slots=True)
class Rate:
    """A throughput: items done per second in each round; the median round is reported."""

    items: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    value_bytes: int = 0  # bytes of values per item (for MB/s); 0 when not meaningful

    def add(self, items: int, seconds: float) -> None:
        self.items.append(items)
        self.seconds.append(seconds)

    @property
    def per_second(self) -> float:
        if not self.seconds:
            return float("nan")
        return statistics.median(n / s for n, s in zip(self.items, self.seconds, strict=True))


@dataclass(slots=True)
class Latency:
    """Single-operation latencies in seconds, pooled over every round."""

    samples: list[float] = field(default_factory=list)

    def p(self, pct: float) -> float:
        return percentile(self.samples, pct)


@dataclass(slots=True)
class Rounds:
    """How many rounds to run and whether the first is a discarded warm-up."""

    count: int
    warmup: bool

    def indexes(self) -> range:
        """Round numbers; round 0 is the warm-up when there is one (callers skip recording it)."""
        return range(self.count + (1 if self.warmup else 0))

    def recorded(self, round_no: int) -> bool:
        return not (self.warmup and round_no == 0)


async def interleave(rounds: Rounds, variants: Sequence[Callable[[bool], Awaitable[None]]]) -> None:
    """Run every variant once per round, round-robin; each gets ``record`` (False in the warm-up).

    Garbage is collected before each variant so one variant's garbage is not
    paid for by the next one.
    """
    for round_no in rounds.indexes():
        for variant in variants:
            gc.collect()
            await variant(rounds.recorded(round_no))


def settle() -> None:
    """Collect, then move everything alive now (the benchmark's input data) out of the cyclic GC's view.

    Without this, collections inside timed loops rescan millions of setup
    objects that a steady-state server would not have.
    """
    gc.collect()
    gc.freeze()


def timed_sync(fn: Callable[[], object]) -> float:
    start = now()
    fn()
    return now() - start
