"""Latency histograms (HdrHistogram) and throughput-over-time series for replay reports.

Latencies are recorded in microseconds into an HdrHistogram covering 1 µs to
one hour with 3 significant digits (relative error ≤ 0.1 %), the resolution
OMB and wrk2 use; the report shows them in milliseconds. Negative values (a
clock reading before a deadline cannot happen with the pacer, but a caller
may pass one) are recorded as 0. Imports ``hdrh`` (the ``replay`` extra).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from hdrh.histogram import HdrHistogram

LOWEST_US: Final = 1
HIGHEST_US: Final = 3_600_000_000  # one hour
SIGNIFICANT_DIGITS: Final = 3
# Percentiles in every latency summary, with the report key of each.
PERCENTILES: Final = ((50.0, "p50"), (75.0, "p75"), (90.0, "p90"), (95.0, "p95"),
                      (99.0, "p99"), (99.9, "p99_9"), (99.99, "p99_99"))
# Points of the percentile curve drawn in the latency plot (x = 1 / (1 - q)).
CURVE_PERCENTILES: Final = (0.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 98.0, 99.0, 99.5,
                            99.9, 99.95, 99.99, 99.999, 100.0)


class Latency:
    """One latency distribution; values in nanoseconds in, milliseconds out."""

    def __init__(self) -> None:
        self.hist = HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)
        self.total_ns = 0

    @property
    def count(self) -> int:
        return int(self.hist.get_total_count())

    def record_ns(self, ns: int) -> None:
        us = max(ns, 0) // 1000
        self.hist.record_value(min(max(us, LOWEST_US), HIGHEST_US))
        self.total_ns += max(ns, 0)

    def value_ms(self, percentile: float) -> float:
        return float(self.hist.get_value_at_percentile(percentile)) / 1000.0

    def summary(self) -> dict[str, Any]:
        """count, mean, min, the percentiles of ``PERCENTILES`` and max, in ms (3 decimals)."""
        n = self.count
        if n == 0:
            return {"count": 0}
        out: dict[str, Any] = {
            "count": n,
            "mean": round(self.total_ns / n / 1e6, 3),
            "min": round(self.hist.get_min_value() / 1000.0, 3),
        }
        for q, name in PERCENTILES:
            out[name] = round(self.value_ms(q), 3)
        out["max"] = round(self.hist.get_max_value() / 1000.0, 3)
        return out

    def curve(self) -> list[tuple[float, float]]:
        """(percentile, ms) points for a percentile plot."""
        if self.count == 0:
            return []
        return [(q, self.value_ms(q)) for q in CURVE_PERCENTILES]

    def encode(self) -> str:
        """The histogram in HdrHistogram's compressed V2 base64 form (readable by every HDR port)."""
        encoded: bytes = self.hist.encode()
        return encoded.decode("ascii")


@dataclass(slots=True)
class Throughput:
    """Records and bytes acknowledged per time bucket since the replay started."""

    interval_ns: int
    records: dict[int, int] = field(default_factory=dict)
    size_bytes: dict[int, int] = field(default_factory=dict)

    def add(self, at_ns: int, records: int, size_bytes: int) -> None:
        bucket = max(at_ns, 0) // self.interval_ns
        self.records[bucket] = self.records.get(bucket, 0) + records
        self.size_bytes[bucket] = self.size_bytes.get(bucket, 0) + size_bytes

    def series(self) -> list[dict[str, float]]:
        """One point per bucket from the first to the last (empty buckets included)."""
        if not self.records:
            return []
        seconds = self.interval_ns / 1e9
        last = max(self.records)
        return [
            {
                "t_s": round(b * seconds, 3),
                "records_per_s": round(self.records.get(b, 0) / seconds, 1),
                "mb_per_s": round(self.size_bytes.get(b, 0) / seconds / 1e6, 4),
            }
            for b in range(last + 1)
        ]


def throughput_interval_ns(expected_duration_s: float) -> int:
    """Bucket width: 1 s for runs of a minute or more, else about 1/50 of the run in 50 ms steps.

    Fifty points show the bursts of a short replay (the sample's last ~100 ms)
    without turning the plot into noise.
    """
    if expected_duration_s >= 60:
        return 1_000_000_000
    return max(50_000_000, int(expected_duration_s / 50 * 1e9) // 50_000_000 * 50_000_000)
