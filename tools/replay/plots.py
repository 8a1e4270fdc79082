"""PNG plots of a replay report: throughput over time and latency percentile curves.

Drawn with matplotlib's Agg backend (no display needed) from the report dict,
so a saved report can be re-plotted. The percentile plot uses the HdrHistogram
convention: x is ``1 / (1 - percentile)`` on a log scale, so the tail (99 %,
99.9 %) gets as much room as the median. No engine import.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from hdrh.histogram import HdrHistogram

from seglog.tools.replay.stats import CURVE_PERCENTILES

# Curves drawn in the latency plot, in legend order.
CURVE_KINDS: Final = ("append", "append_corrected", "fetch", "fetch_time", "end_to_end", "schedule_lag")
_TICKS: Final = ((50.0, "50%"), (90.0, "90%"), (99.0, "99%"), (99.9, "99.9%"), (99.99, "99.99%"))
_MAX_X_PERCENTILE: Final = 99.999  # 100 % has no finite x; it is drawn at 99.999 %


def _x(percentile: float) -> float:
    return 1.0 / (1.0 - min(percentile, _MAX_X_PERCENTILE) / 100.0)


def plot_throughput(report: dict[str, Any], path: Path) -> Path:
    """Records/s (and MB/s on the right axis) per interval of the run."""
    series = report["throughput"]["series"]
    fig, ax = plt.subplots(figsize=(8, 3.6), dpi=110)
    try:
        if series:
            t = [p["t_s"] for p in series]
            ax.step(t, [p["records_per_s"] for p in series], where="post", color="tab:blue", label="records/s")
            ax.fill_between(t, [p["records_per_s"] for p in series], step="post", alpha=0.2, color="tab:blue")
            ax2 = ax.twinx()
            ax2.step(t, [p["mb_per_s"] for p in series], where="post", color="tab:orange", lw=1, label="MB/s")
            ax2.set_ylabel("MB/s", color="tab:orange")
            ax2.set_ylim(bottom=0)
        ax.set_xlabel(f"time since start (s), {report['throughput']['interval_s']:g} s buckets")
        ax.set_ylabel("records/s acknowledged", color="tab:blue")
        ax.set_ylim(bottom=0)
        speed = report["options"]["speed"]
        ax.set_title(f"seglog replay throughput ({report['workload']['path']}, speed {speed})", fontsize=9)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)
    return path


def plot_latency(report: dict[str, Any], path: Path) -> Path:
    """Latency by percentile for every recorded kind (from the encoded histograms)."""
    fig, ax = plt.subplots(figsize=(8, 4.2), dpi=110)
    try:
        for kind in CURVE_KINDS:
            encoded = report.get("histograms", {}).get(kind)
            if not encoded:
                continue
            hist = HdrHistogram.decode(encoded.encode("ascii"))
            # HDR values are µs; 1 µs is the floor of a log axis in ms.
            points = [(q, max(hist.get_value_at_percentile(q), 1) / 1000.0) for q in CURVE_PERCENTILES if q > 0]
            ax.plot([_x(q) for q, _ in points], [v for _, v in points], marker=".", label=kind.replace("_", " "))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks([_x(q) for q, _ in _TICKS], [label for _, label in _TICKS])
        ax.set_xlabel("percentile")
        ax.set_ylabel("latency (ms)")
        ax.set_title("seglog replay latency by percentile (HdrHistogram)", fontsize=9)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8, loc="upper left")
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)
    return path


def write_plots(report: dict[str, Any], report_path: Path) -> list[Path]:
    """Both plots next to the report: ``<stem>-throughput.png`` and ``<stem>-latency.png``."""
    base = report_path.with_suffix("")
    return [
        plot_throughput(report, base.with_name(base.name + "-throughput.png")),
        plot_latency(report, base.with_name(base.name + "-latency.png")),
    ]
