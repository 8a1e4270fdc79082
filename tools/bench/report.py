"""The report of ``seglog bench``: rows (seglog beside its denominators), scaling runs, ratios and targets.

A *row* is one workload: seglog's figure and, measured in the same run, its raw
reference and the peers (sqlite3 WAL ``NORMAL``/``FULL``, diskcache) doing the
same work. A *scaling* entry is one point of a scaling run. A *ratio* is what
the acceptance targets of issues 4 and 8 are stated in, computed only from
figures of the same run; ``holds`` is ``None`` when a figure is missing (the
section was not run) or the ratio is reported without a target.
"""

from __future__ import annotations

import math
import platform
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from seglog.tools._output import Column, print_table
from seglog.tools.bench.shapes_report import markdown_lines, print_shapes, scaling_targets

Unit = Literal["rec/s", "us", "MB/s", "s", "MB"]
COLUMNS: Final = ("seglog", "raw", "sqlite_normal", "sqlite_full", "diskcache")
HIGHER_IS_BETTER: Final[frozenset[str]] = frozenset({"rec/s", "MB/s"})


@dataclass(frozen=True, slots=True)
class RowSpec:
    label: str
    unit: Unit
    raw_label: str  # what the raw column measures
    peer: str = "sqlite_normal"  # the sqlite column the seglog/sqlite ratio divides by


ROWS: Final[dict[str, RowSpec]] = {
    "produce_b1000": RowSpec("produce, batches of 1000 x 100 B, no fsync", "rec/s", "msgpack + os.write per batch"),
    "produce_b100": RowSpec("produce, batches of 100 x 100 B, no fsync", "rec/s", "msgpack + os.write per batch"),
    "produce_b1": RowSpec("produce, 1 record per append, one caller", "rec/s", "msgpack + os.write per record"),
    "produce_concurrent": RowSpec(
        "produce, 1 record per append, 100 concurrent callers", "rec/s", "one executor hop per record (os.write)"
    ),
    "produce_b1000_1k": RowSpec("produce, batches of 1000 x 1 KiB, no fsync", "rec/s", "msgpack + os.write per batch"),
    "produce_b1000_fsync": RowSpec(
        "durable produce, fsync per batch of 1000", "rec/s", "+ fdatasync per batch", "sqlite_full"
    ),
    "produce_b100_fsync": RowSpec(
        "durable produce, fsync per batch of 100", "rec/s", "+ fdatasync per batch", "sqlite_full"
    ),
    "produce_b1_fsync": RowSpec("durable produce, fsync per record", "rec/s", "+ fdatasync per record", "sqlite_full"),
    "fetch_sequential": RowSpec("sequential fetch (1 MiB reads, decoded)", "rec/s", "pread 1 MiB + Unpacker"),
    "point_read": RowSpec("point read by offset, p50 (batches of 100)", "us", "pread + unpackb, position known"),
    "point_read_b1000": RowSpec("point read by offset, p50 (batches of 1000)", "us", "pread + unpackb, position known"),
    "timestamp_read": RowSpec("offset_for_timestamp + 1-record read, p50", "us", "one executor round trip"),
    "subscribe_latency": RowSpec("subscribe end-to-end latency, p50", "us", "one executor round trip"),
    "executor_round_trip": RowSpec("one executor round trip (run_in_executor), p50", "us", "run_in_executor(noop)"),
    "recovery_scan": RowSpec("unclean open: recovery scan", "MB/s", "pread 4 MiB + CRC-32C"),
    "clean_open": RowSpec("clean open, partitions x 10 segments", "s", "listing the same directory"),
    "memory_peak": RowSpec("peak traced memory, produce + fetch", "MB", "msgpack + os.write, read + unpack"),
    "follow_latency": RowSpec(
        "read-only follower in another process: append returned -> subscribe yielded, p50", "us", "(none)"
    ),
    "follow_latency_poll": RowSpec(
        "the same follower polling every 100 ms (no inotify), p50", "us", "(none)"
    ),
}
ROW_KEYS: Final = tuple(ROWS)


@dataclass(frozen=True, slots=True)
class RatioSpec:
    label: str
    target: str  # human-readable, e.g. ">= 0.6"
    check: Callable[[float], bool] | None  # None: reported, no target


def _at_least(x: float) -> Callable[[float], bool]:
    return lambda v: v >= x


def _at_most(x: float) -> Callable[[float], bool]:
    return lambda v: v <= x


def _below(x: float) -> Callable[[float], bool]:
    return lambda v: v < x


RATIOS: Final[dict[str, RatioSpec]] = {
    "produce_vs_raw": RatioSpec("produce (1000 x 100 B) / raw msgpack + os.write", ">= 0.6", _at_least(0.6)),
    "produce_1k_vs_raw": RatioSpec("produce (1000 x 1 KiB) / raw", ">= 0.8", _at_least(0.8)),
    "fetch_vs_raw": RatioSpec("sequential fetch / raw read + unpack", ">= 0.4", _at_least(0.4)),
    "timestamp_read_vs_hop": RatioSpec(
        "offset_for_timestamp + read p50 / executor round trip p50", "<= 0.5", _at_most(0.5)
    ),
    "produce_vs_sqlite": RatioSpec("produce (1000 x 100 B) / sqlite3 WAL NORMAL", ">= 5", _at_least(5.0)),
    "durable_vs_sqlite_full": RatioSpec("durable produce (fsync/1000) / sqlite3 WAL FULL", ">= 2", _at_least(2.0)),
    "concurrent_vs_hop_rate": RatioSpec(
        "100 concurrent 1-record producers / one-record-per-hop rate", ">= 20", _at_least(20.0)
    ),
    "point_read_vs_sqlite": RatioSpec("point read p50 / sqlite3 point read p50", "<= 2", _at_most(2.0)),
    "subscribe_vs_hop": RatioSpec("subscribe end-to-end p50 / executor round trip p50", "< 2", _below(2.0)),
    "lookup_scaling": RatioSpec("point read p50 at the large / the small log", "<= 1.3", _at_most(1.3)),
    "timestamp_scaling": RatioSpec("timestamp lookup + read p50, large / small log", "<= 1.3", _at_most(1.3)),
    # Issue 4: "takes about as long as listing it"; within 2x of the listing counts as about as long.
    "clean_open_vs_listing": RatioSpec("clean open / listing the directory", "<= 2 (about a listing)", _at_most(2.0)),
    "clean_open_10x_data": RatioSpec("clean open with 10x the data / with 1x", "<= 1.3 (flat)", _at_most(1.3)),
    "recovery_double_after": RatioSpec(
        "recovery time, 2x bytes after the recovery point / 1x", "1.6-2.4 (linear)", lambda v: 1.6 <= v <= 2.4
    ),
    "recovery_double_total": RatioSpec(
        "recovery time, 2x total bytes, same bytes after / 1x", "<= 1.3 (flat)", _at_most(1.3)
    ),
    "recovery_vs_read_crc": RatioSpec("recovery scan MB/s / raw read + CRC-32C MB/s", "reported", None),
    # Issue 17: a follower in another process sees an append within 1 second (p99).
    "follow_p99_s": RatioSpec("follower p99 latency, append returned -> subscribe yielded (s)", "< 1", _below(1.0)),
}
RATIO_KEYS: Final = tuple(RATIOS)

SCALING_KEYS: Final = (
    "lookup_point_small_us",
    "lookup_point_large_us",
    "lookup_timestamp_small_us",
    "lookup_timestamp_large_us",
    "lookup_small_records",
    "lookup_large_records",
    "open_partitions",
    "open_segments",
    "open_s",
    "open_10x_data_s",
    "open_then_use_s",
    "listing_s",
    "open_bytes",
    "open_10x_data_bytes",
    "recovery_cases",
)


@dataclass(slots=True)
class Cell:
    value: float
    p99: float | None = None

    def as_json(self) -> dict[str, float | None]:
        return {"value": _finite(self.value), "p99": _finite(self.p99) if self.p99 is not None else None}


def _finite(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) or math.isinf(x) else round(x, 6)


@dataclass(slots=True)
class Report:
    """Everything one ``seglog bench`` run measured; :meth:`as_json` is the ``--json`` document."""

    options: dict[str, Any]
    rows: dict[str, dict[str, Cell]] = field(default_factory=dict)
    scaling: dict[str, Any] = field(default_factory=dict)
    wire: dict[str, Any] = field(default_factory=dict)  # tools.bench.wire's rows and ratios (--only wire)
    groups: dict[str, Any] = field(default_factory=dict)  # tools.bench.groups's rows and ratios (--only groups)
    shapes: dict[str, Any] = field(default_factory=dict)  # tools.bench.shapes's matrix and verdicts
    # tools.bench.transactions's rows and ratios (--only transactions)
    transactions: dict[str, Any] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    def put(self, row: str, column: str, value: float, p99: float | None = None) -> None:
        assert row in ROWS and column in COLUMNS, (row, column)  # programmer error: a new key needs a spec
        self.rows.setdefault(row, {})[column] = Cell(value, p99)

    def get(self, row: str, column: str) -> float | None:
        cell = self.rows.get(row, {}).get(column)
        return None if cell is None or math.isnan(cell.value) else cell.value

    # ------------------------------------------------------------------------------------ ratios

    def ratios(self) -> dict[str, float | None]:
        g = self.get
        s = self.scaling

        def div(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None or b == 0 else a / b

        cases = {c["name"]: c for c in s.get("recovery_cases", [])}

        def rec(name: str) -> float | None:
            case = cases.get(name)
            return None if case is None else float(case["seconds"])

        return {
            "produce_vs_raw": div(g("produce_b1000", "seglog"), g("produce_b1000", "raw")),
            "produce_1k_vs_raw": div(g("produce_b1000_1k", "seglog"), g("produce_b1000_1k", "raw")),
            "fetch_vs_raw": div(g("fetch_sequential", "seglog"), g("fetch_sequential", "raw")),
            "timestamp_read_vs_hop": div(g("timestamp_read", "seglog"), g("executor_round_trip", "raw")),
            "produce_vs_sqlite": div(g("produce_b1000", "seglog"), g("produce_b1000", "sqlite_normal")),
            "durable_vs_sqlite_full": div(g("produce_b1000_fsync", "seglog"), g("produce_b1000_fsync", "sqlite_full")),
            "concurrent_vs_hop_rate": div(g("produce_concurrent", "seglog"), g("produce_concurrent", "raw")),
            "point_read_vs_sqlite": div(g("point_read", "seglog"), g("point_read", "sqlite_normal")),
            "subscribe_vs_hop": div(g("subscribe_latency", "seglog"), g("executor_round_trip", "raw")),
            "lookup_scaling": div(s.get("lookup_point_large_us"), s.get("lookup_point_small_us")),
            "timestamp_scaling": div(s.get("lookup_timestamp_large_us"), s.get("lookup_timestamp_small_us")),
            "clean_open_vs_listing": div(s.get("open_s"), s.get("listing_s")),
            "clean_open_10x_data": div(s.get("open_10x_data_s"), s.get("open_s")),
            "recovery_double_after": div(rec("total 4X, after 2X"), rec("total 4X, after 1X")),
            "recovery_double_total": div(rec("total 4X, after 1X"), rec("total 2X, after 1X")),
            "recovery_vs_read_crc": div(g("recovery_scan", "seglog"), g("recovery_scan", "raw")),
            "follow_p99_s": div(self.p99("follow_latency", "seglog"), 1e6),
        }

    def p99(self, row: str, column: str) -> float | None:
        cell = self.rows.get(row, {}).get(column)
        return None if cell is None or cell.p99 is None or math.isnan(cell.p99) else cell.p99

    def verdicts(self) -> dict[str, bool | None]:
        out: dict[str, bool | None] = {}
        for key, value in self.ratios().items():
            check = RATIOS[key].check
            out[key] = None if value is None or check is None else bool(check(value))
        return out

    # ------------------------------------------------------------------------------------ output

    def _print_wire(self) -> None:
        _print_wire_of(self)

    def as_json(self) -> dict[str, Any]:
        ratios, verdicts = self.ratios(), self.verdicts()
        return {
            "machine": {
                "python": platform.python_version(),
                "implementation": platform.python_implementation(),
                "platform": platform.platform(),
                "cpus": _cpus(),
            },
            "options": self.options,
            "seconds": round(self.seconds, 1),
            "rows": {
                key: {
                    "label": ROWS[key].label,
                    "unit": ROWS[key].unit,
                    "raw_label": ROWS[key].raw_label,
                    **{col: (self.rows[key][col].as_json() if col in self.rows.get(key, {}) else None)
                       for col in COLUMNS},
                }
                for key in ROW_KEYS
            },
            "scaling": {key: self.scaling.get(key) for key in SCALING_KEYS},
            "ratios": {
                key: {
                    "label": RATIOS[key].label,
                    "value": _finite(ratios[key]),
                    "target": RATIOS[key].target,
                    "holds": verdicts[key],
                }
                for key in RATIO_KEYS
            },
            "notes": self.notes,
            **({"wire": self.wire} if self.wire else {}),
            **({"groups": self.groups} if self.groups else {}),
            **({"shapes": {**self.shapes, "scaling_targets": scaling_targets(self.scaling)}} if self.shapes else {}),
            **({"transactions": self.transactions} if self.transactions else {}),
        }

    def print(self) -> None:
        """The rows, the scaling runs, then the ratios (last, as the issue asks), on stdout."""
        rows = []
        for key in ROW_KEYS:
            spec = ROWS[key]
            cells = self.rows.get(key, {})
            if not cells:
                continue
            rows.append([spec.label, spec.unit, *(_fmt(cells.get(c), spec.unit) for c in COLUMNS),
                         _vs(cells, "raw", spec.unit), _vs(cells, spec.peer, spec.unit), spec.raw_label])
        print_table(
            ["workload", "unit", *(Column(c, "right") for c in ("seglog", "raw", "sqlite NORMAL", "sqlite FULL",
                                                                 "diskcache", "seglog/raw", "seglog/sqlite")),
             "raw reference"],
            rows,
            title="seglog bench: each figure beside its denominators, same run (latencies: p50, p99 in brackets; "
        "seglog/sqlite divides by FULL for the durable rows, NORMAL otherwise)",
        )
        s = self.scaling
        srows: list[list[object]] = []
        if s.get("lookup_point_small_us") is not None:
            srows.extend(
                [f"{what} p50, {s[f'lookup_{size}_records']:,} records", f"{s[f'lookup_{key}_{size}_us']:.1f} us"]
                for what, key in (("point read", "point"), ("timestamp lookup + read", "timestamp"))
                for size in ("small", "large")
            )
        if s.get("open_s") is not None:
            parts = f"{s['open_partitions']} partitions x {s['open_segments'] // s['open_partitions']} segments"
            srows.append([f"listing the directory ({parts})", f"{s['listing_s'] * 1000:.1f} ms"])
            srows.append([f"clean open ({parts}, {s['open_bytes'] / 1e6:.0f} MB)", f"{s['open_s'] * 1000:.0f} ms"])
            srows.append([f"clean open, 10x data ({s['open_10x_data_bytes'] / 1e6:.0f} MB)",
                          f"{s['open_10x_data_s'] * 1000:.0f} ms"])
            if s.get("open_then_use_s") is not None:
                srows.append(["clean open, then a read from every partition (files opened on first use)",
                              f"{s['open_then_use_s'] * 1000:.0f} ms"])
        srows.extend(
            [f"unclean open, {case['name']} ({case['bytes_after'] / 1e6:.0f} MB after the recovery point)",
             f"{case['seconds'] * 1000:.0f} ms"]
            for case in s.get("recovery_cases") or []
        )
        if srows:
            print_table(["scaling run", Column("result", "right")], srows, title="scaling runs")
        self._print_wire()
        _print_groups_of(self)
        if self.shapes:
            print_shapes({**self.shapes, "scaling_targets": scaling_targets(self.scaling)})
        _print_transactions_of(self)
        ratios, verdicts = self.ratios(), self.verdicts()
        rrows = []
        for key in RATIO_KEYS:
            value, verdict = ratios[key], verdicts[key]
            shown = "-" if value is None else f"{value:.2f}"
            mark = "-" if verdict is None else ("holds" if verdict else "MISSED")
            rrows.append([RATIOS[key].label, shown, RATIOS[key].target, mark])
        print_table(["ratio (same run)", Column("value", "right"), "target", "verdict"], rrows,
                    title="ratios and targets")


def _print_wire_of(report: Report) -> None:
    rows, ratios = report.wire.get("rows"), report.wire.get("ratios")
    if not rows or not ratios:
        return
    print_table(
        ["Kafka clients over the wire", "unit", *(Column(c, "right") for c in ("seglog", "null sink", "mock cluster"))],
        [[cells["label"], "rec/s", *(_num(cells[c], "rec/s") if cells.get(c) else "-"
                                     for c in ("seglog", "null_sink", "mock_cluster"))] for cells in rows.values()],
        title="seglog serve beside the clients' own limits, same run",
    )
    cpu = report.wire.get("server_cpu_us_per_record") or {}
    if any(cpu.values()):
        print_table(
            ["server process CPU per record", Column("seglog serve", "right"), Column("null sink", "right")],
            [[rows[row]["label"], *(f"{cells[c]:.2f} us" if c in cells else "-" for c in ("seglog", "null_sink"))]
             for row, cells in cpu.items() if cells],
            title="the servers' own CPU (user + system) per record, median round",
        )
    print_table(
        ["wire ratio (same run)", Column("value", "right"), "target", "verdict"],
        [[r["label"], "-" if r["value"] is None else f"{r['value']:.2f}", r["target"],
          "-" if r["holds"] is None else ("holds" if r["holds"] else "MISSED")] for r in ratios.values()],
        title="wire ratios and targets",
    )


_GROUP_COLUMNS: Final = (("seglog", "seglog"), ("file_per_group", "file per group"), ("sqlite_full", "sqlite FULL"),
                          ("sqlite_normal", "sqlite NORMAL"))


def _print_ratios(what: str, ratios: dict[str, Any], title: str) -> None:
    """A section's same-run ratios, without targets: label and value."""
    print_table(
        [f"{what} ratio (same run)", Column("value", "right")],
        [[r["label"], "-" if r["value"] is None else f"{r['value']:.2f}"] for r in ratios.values()],
        title=title,
    )


def _print_groups_of(report: Report) -> None:
    rows, ratios = report.groups.get("rows"), report.groups.get("ratios")
    if not rows or not ratios:
        return
    print_table(
        ["consumer-group commits", "unit", *(Column(label, "right") for _, label in _GROUP_COLUMNS)],
        [[cells["label"], "commits/s", *(_num(cells[c], "rec/s") if cells.get(c) else "-" for c, _ in _GROUP_COLUMNS)]
         for cells in rows.values()],
        title=f"{report.groups['groups']} groups x {report.groups['partitions_per_commit']} partitions, "
        "every commit durable on return (sqlite NORMAL: not fsynced), same run",
    )
    _print_ratios("group-store", ratios, "group store ratios")


def _print_transactions_of(report: Report) -> None:
    t = report.transactions
    rows, ratios = t.get("rows"), t.get("ratios")
    if not rows or not ratios:
        return
    print_table(
        ["produce to one partition", "unit", Column("seglog", "right")],
        [[cells["label"], "records/s", _num(cells["records_per_s"], "rec/s") if cells.get("records_per_s") else "-"]
         for cells in rows.values()],
        title=f"{t['records_per_round']:,} records of {t['value_bytes']} B a round, batches of {t['batch_records']}, "
        "same run",
    )
    _print_ratios("transactions", ratios, "transactional produce beside plain appends")


def _transactions_markdown(document: dict[str, Any]) -> list[str]:
    t = document.get("transactions") or {}
    if not t.get("rows"):
        return []
    lines = ["", "| produce to one partition | records/s |", "| --- | ---: |"]
    lines += [f"| {c['label']} | {_num(c['records_per_s'], 'rec/s') if c.get('records_per_s') else '-'} |"
              for c in t["rows"].values()]
    lines += ["", "| transactions ratio (same run) | value |", "| --- | ---: |"]
    lines += [f"| {r['label']} | {'-' if r['value'] is None else format(r['value'], '.2f')} |"
              for r in t["ratios"].values()]
    return lines


def _groups_markdown(document: dict[str, Any]) -> list[str]:
    groups = document.get("groups") or {}
    if not groups.get("rows"):
        return []
    lines = ["", "| consumer-group commits (commits/s) | " + " | ".join(label for _, label in _GROUP_COLUMNS) + " |",
             "| --- | " + " | ".join("---:" for _ in _GROUP_COLUMNS) + " |"]
    for cells in groups["rows"].values():
        shown = [_num(cells[c], "rec/s") if cells.get(c) else "-" for c, _ in _GROUP_COLUMNS]
        lines.append(f"| {cells['label']} | " + " | ".join(shown) + " |")
    lines += ["", "| group-store ratio (same run) | value |", "| --- | ---: |"]
    lines += [f"| {r['label']} | {'-' if r['value'] is None else format(r['value'], '.2f')} |"
              for r in groups["ratios"].values()]
    return lines


def _cpus() -> int:
    import os

    return os.cpu_count() or 0


def _fmt(cell: Cell | None, unit: str) -> str:
    if cell is None or math.isnan(cell.value):
        return "-"
    text = _num(cell.value, unit)
    if cell.p99 is not None:
        text += f" ({_num(cell.p99, unit)})"
    return text


def _num(x: float, unit: str) -> str:
    if unit == "rec/s":
        for div, suffix in ((1e6, "M"), (1e3, "k")):
            if x >= div:
                return f"{x / div:.3g}{suffix}"
        return f"{x:.3g}"
    if unit == "s":
        return f"{x:.3f}"
    return f"{x:.1f}" if x < 1000 else f"{x:,.0f}"


def _vs(cells: dict[str, Cell], column: str, unit: str) -> str:
    mine, other = cells.get("seglog"), cells.get(column)
    if mine is None or other is None or other.value == 0 or math.isnan(mine.value) or math.isnan(other.value):
        return "-"
    return f"{mine.value / other.value:.2f}"


def markdown(document: dict[str, Any]) -> str:
    """The rows, scaling runs and ratios of a ``--json`` document as Markdown tables (docs/PERFORMANCE.md)."""
    heads = ["seglog", "raw", "sqlite NORMAL", "sqlite FULL", "diskcache"]
    out = [
        "| workload | unit | " + " | ".join(heads) + " | seglog/raw | seglog/sqlite | raw reference |",
        "| --- | --- | " + " | ".join("---:" for _ in heads) + " | ---: | ---: | --- |",
    ]
    for key in ROW_KEYS:
        row = document["rows"].get(key)
        if row is None or all(row.get(c) is None for c in COLUMNS):
            continue
        unit = row["unit"]
        cells = {c: Cell(row[c]["value"], row[c]["p99"]) for c in COLUMNS if row.get(c) and row[c]["value"] is not None}
        out.append(
            f"| {row['label']} | {unit} | "
            + " | ".join(_fmt(cells.get(c), unit) for c in COLUMNS)
            + f" | {_vs(cells, 'raw', unit)} | {_vs(cells, ROWS[key].peer, unit)} | {row['raw_label']} |"
        )
    s = document["scaling"]
    scaling = ["", "| scaling run | result |", "| --- | ---: |"]
    if s.get("lookup_point_small_us") is not None:
        scaling.extend(
            f"| {what} p50, {s[f'lookup_{size}_records']:,} records | {s[f'lookup_{key}_{size}_us']:.1f} us |"
            for what, key in (("point read", "point"), ("timestamp lookup + read", "timestamp"))
            for size in ("small", "large")
        )
    if s.get("open_s") is not None:
        parts = f"{s['open_partitions']} partitions x {s['open_segments'] // s['open_partitions']} segments"
        scaling.append(f"| listing the directory ({parts}) | {s['listing_s'] * 1000:.1f} ms |")
        scaling.append(f"| clean open ({parts}, {s['open_bytes'] / 1e6:.0f} MB) | {s['open_s'] * 1000:.0f} ms |")
        scaling.append(f"| clean open, 10x data ({s['open_10x_data_bytes'] / 1e6:.0f} MB) "
                       f"| {s['open_10x_data_s'] * 1000:.0f} ms |")
        if s.get("open_then_use_s") is not None:
            scaling.append("| clean open, then a read from every partition (files opened on first use) "
                           f"| {s['open_then_use_s'] * 1000:.0f} ms |")
    scaling.extend(
        f"| unclean open, {c['name']} ({c['bytes_after'] / 1e6:.0f} MB after the recovery point) "
        f"| {c['seconds'] * 1000:.0f} ms |"
        for c in s.get("recovery_cases") or []
    )
    ratios = ["", "| ratio (same run) | value | target | verdict |", "| --- | ---: | --- | --- |"]
    for key in RATIO_KEYS:
        r = document["ratios"][key]
        value = "-" if r["value"] is None else f"{r['value']:.2f}"
        verdict = "-" if r["holds"] is None else ("holds" if r["holds"] else "**missed**")
        ratios.append(f"| {r['label']} | {value} | {r['target']} | {verdict} |")
    return "\n".join(
        out + (scaling if len(scaling) > 3 else []) + _wire_markdown(document) + _groups_markdown(document)
        + (markdown_lines(document["shapes"]) if document.get("shapes") else [])
        + _transactions_markdown(document) + ratios
    ) + "\n"


def _wire_markdown(document: dict[str, Any]) -> list[str]:
    wire = document.get("wire") or {}
    if not wire.get("rows"):
        return []
    lines = ["", "| Kafka clients over the wire | seglog | null sink | mock cluster |", "| --- | ---: | ---: | ---: |"]
    for cells in wire["rows"].values():
        shown = [_num(cells[c], "rec/s") if cells.get(c) else "-" for c in ("seglog", "null_sink", "mock_cluster")]
        lines.append(f"| {cells['label']} | " + " | ".join(shown) + " |")
    cpu = wire.get("server_cpu_us_per_record") or {}
    if any(cpu.values()):
        lines += ["", "| server process CPU per record | seglog serve | null sink |", "| --- | ---: | ---: |"]
        lines += [f"| {wire['rows'][row]['label']} | "
                  + " | ".join(f"{cells[c]:.2f} us" if c in cells else "-" for c in ("seglog", "null_sink")) + " |"
                  for row, cells in cpu.items() if cells]
    lines += ["", "| wire ratio (same run) | value | target | verdict |", "| --- | ---: | --- | --- |"]
    for r in wire["ratios"].values():
        value = "-" if r["value"] is None else f"{r['value']:.2f}"
        verdict = "-" if r["holds"] is None else ("holds" if r["holds"] else "**missed**")
        lines.append(f"| {r['label']} | {value} | {r['target']} | {verdict} |")
    return lines
