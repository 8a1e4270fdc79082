"""The replay report: a JSON document and a rich summary for the terminal.

The JSON (``schema: seglog.replay-report/1``) is documented field by field in
``docs/WORKLOADS.md``; latencies are in milliseconds, percentiles from
HdrHistogram, and the raw histograms are included (compressed V2 base64) so
runs can be merged or re-analysed. No engine import.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import sys
from importlib import metadata
from typing import Any, Final

from rich.console import Console
from rich.table import Table

from seglog.tools.replay.plan import ReplayPlan
from seglog.tools.replay.runner import ReplayOptions, ReplayOutcome, segments_rolled

SCHEMA: Final = "seglog.replay-report/1"
LATENCY_KINDS: Final = ("append", "append_corrected", "fetch", "fetch_time", "end_to_end", "schedule_lag")


def _version() -> str:
    try:
        return metadata.version("seglog")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "unknown"


def _event_loop_name() -> str:
    return "uvloop" if "uvloop" in sys.modules else "asyncio"


def build_report(
    *,
    workload_path: str,
    plan: ReplayPlan,
    options: ReplayOptions,
    outcome: ReplayOutcome,
    log_dir: str,
    config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The report of one replay as a JSON-ready dict."""
    m = outcome.metrics
    duration_s = m.duration_ns / 1e9
    intended_s = plan.span_ns / 1e9 / options.speed if options.speed else None
    lat = {kind: getattr(m, kind).summary() for kind in LATENCY_KINDS}
    checks = [c.to_json() for c in m.checks]
    return {
        "schema": SCHEMA,
        "run": {
            "started": dt.datetime.fromtimestamp(m.started_unix_s, dt.UTC).isoformat(timespec="seconds"),
            "duration_s": round(duration_s, 3),
            "seglog_version": _version(),
            "python": platform.python_version(),
            "event_loop": _event_loop_name(),
            "host": {"cpus": os.cpu_count(), "platform": platform.platform(terse=True)},
        },
        "workload": {
            "path": workload_path,
            "rows": plan.total_rows,
            "produce_rows": plan.produce_rows,
            "fetch_rows": plan.fetch_rows,
            "producers": len(plan.streams),
            "topics": dict(sorted(plan.partitions.items())),
            "span_s": round(plan.span_ns / 1e9, 3),
            "expected_bytes": sum(e.size_bytes for e in plan.expected.values()),
        },
        "options": {
            "speed": options.speed if options.speed is not None else "max",
            "consumers": options.consumers,
            "log_dir": log_dir,
            "config": config or {},
            "topics_created": m.topics_created,
        },
        "totals": {
            "sent_records": m.sent_records,
            "acked_records": m.acked_records,
            "failed_records": m.failed_records,
            "acked_bytes": m.acked_bytes,
            "batches": m.batches,
            "fetches": m.fetches,
            "fetched_records": m.fetched_records,
            "consumed_records": m.consumed_records,
            "records_per_s": round(m.acked_records / duration_s, 1) if duration_s > 0 else None,
            "mb_per_s": round(m.acked_bytes / duration_s / 1e6, 4) if duration_s > 0 else None,
        },
        "throughput": {"interval_s": m.throughput.interval_ns / 1e9, "series": m.throughput.series()},
        "latency_ms": lat,
        "fidelity": {
            "paced": options.speed is not None,
            "intended_duration_s": None if intended_s is None else round(intended_s, 3),
            "actual_duration_s": round(duration_s, 3),
            "schedule_lag_p99_ms": lat["schedule_lag"].get("p99"),
            "interarrival_error_ms": m.interarrival_error.summary(),
            "timer_lateness_ms": m.timer_lateness.summary(),
            "reordered": m.reordered,
            "dependency_waits": m.dependency_waits,
        },
        "storage": {
            "segments_before": sum(outcome.storage_before.segments.values()),
            "segments_rolled": segments_rolled(outcome.storage_before, outcome.storage_after),
            **outcome.storage_after.to_json(),
        },
        "errors": {
            "total": sum(m.errors.values()),
            "by_type": dict(sorted(m.errors.items())),
            "samples": m.error_samples,
        },
        "verification": {
            "ok": m.verified,
            "records": sum(c.actual_records for c in m.checks),
            "partitions": checks,
        },
        "histograms": {kind: getattr(m, kind).encode() for kind in LATENCY_KINDS if getattr(m, kind).count},
    }


def _ms(summary: dict[str, Any], key: str) -> str:
    value = summary.get(key)
    return "-" if value is None else f"{value:.3f}"


def print_summary(report: dict[str, Any], console: Console | None = None) -> None:
    """A compact rich summary of a report (to stderr unless a console is given)."""
    console = console or Console(stderr=True)
    totals, fid = report["totals"], report["fidelity"]
    head = Table(title="seglog replay", show_header=False, box=None, pad_edge=False)
    head.add_column(style="bold")
    head.add_column()
    speed = report["options"]["speed"]
    head.add_row("workload", f"{report['workload']['path']} ({report['workload']['rows']} rows, "
                             f"{report['workload']['producers']} producers)")
    head.add_row("speed", f"{speed}x" if speed != "max" else "max (no pacing)")
    head.add_row("duration", f"{report['run']['duration_s']:.2f} s"
                 + (f" (intended {fid['intended_duration_s']:.2f} s)" if fid["intended_duration_s"] else ""))
    head.add_row("records", f"{totals['acked_records']} acked, {totals['failed_records']} failed, "
                            f"{totals['batches']} batches, {totals['fetches']} fetches")
    if totals["records_per_s"] is not None:
        head.add_row("throughput", f"{totals['records_per_s']:.0f} records/s, {totals['mb_per_s']:.3f} MB/s")
    storage = report["storage"]
    head.add_row("storage", f"{storage['segments']} segments ({storage['segments_rolled']} rolled), "
                            f"{storage['bytes_on_disk'] / 1e6:.2f} MB on disk")
    ver = report["verification"]
    status = {True: "[green]OK[/]", False: "[red]MISMATCH[/]", None: "skipped"}[ver["ok"]]
    head.add_row("verification", f"{status} ({ver['records']} records in {len(ver['partitions'])} partitions)")
    errors = report["errors"]
    head.add_row("errors", "none" if not errors["total"] else
                 "[red]" + ", ".join(f"{k}: {v}" for k, v in errors["by_type"].items()) + "[/]")
    console.print(head)

    table = Table(title="latency (ms)", title_justify="left")
    table.add_column("kind")
    for col in ("count", "p50", "p90", "p99", "p99.9", "max"):
        table.add_column(col, justify="right")
    for kind, summary in report["latency_ms"].items():
        if not summary.get("count"):
            continue
        table.add_row(kind, str(summary["count"]), _ms(summary, "p50"), _ms(summary, "p90"),
                      _ms(summary, "p99"), _ms(summary, "p99_9"), _ms(summary, "max"))
    for label, key in (("inter-arrival error", "interarrival_error_ms"), ("timer lateness", "timer_lateness_ms")):
        s = fid[key]
        if s.get("count"):
            table.add_row(label, str(s["count"]), _ms(s, "p50"), _ms(s, "p90"), _ms(s, "p99"),
                          _ms(s, "p99_9"), _ms(s, "max"))
    console.print(table)
    for partition in ver["partitions"]:
        if not partition["ok"]:
            console.print(
                f"[red]{partition['topic']}-{partition['partition']}: expected {partition['expected_records']} "
                f"records (checksum {partition['expected_checksum']}), log holds {partition['actual_records']} "
                f"(checksum {partition['actual_checksum']}), {partition['content_mismatches']} content "
                f"mismatch(es), {partition['out_of_order']} out of producer order[/]"
            )
