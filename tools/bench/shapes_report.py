"""The shapes matrix in the report of ``seglog bench``: its tables, its verdicts, its Markdown.

Reads the document :func:`seglog.tools.bench.shapes.run_section` returns (the
``shapes`` key of the ``--json`` report); adds the targets issue 22 states on
the scaling section's figures (the 10⁷ / 10⁵ lookup ratios), which that
section measures for one shape only.
"""

from __future__ import annotations

import math
from typing import Any, Final

from seglog.tools._output import Column, print_table

COLUMN_LABELS: Final = {"seglog": "seglog", "sqlite": "sqlite3", "lmdb": "LMDB", "rocksdb": "RocksDB", "raw": "raw"}
PEER_COLUMNS: Final = ("sqlite", "lmdb", "rocksdb", "raw")
SUMMARY_ENDS: Final = ("best shape (by margin to its bound)", "worst shape (by margin to its bound)")
SCALING_BOUND: Final = 1.2  # issue 22: the 10⁷ / 10⁵ ratio of point-read and time-lookup p50
# The compact table (README.md): one column per target, in this order, with a short heading.
SHORT_HEADINGS: Final = {
    "point_read_vs_sqlite": "point read ÷ sqlite",
    "timestamp_read_vs_sqlite": "time lookup + read ÷ sqlite",
    "timestamp_read_vs_hop": "time lookup + read ÷ executor round trip",
    "produce_vs_sqlite": "produce ÷ sqlite, one append awaited",
    "produce_concurrent_vs_sqlite": "produce ÷ sqlite, 100 concurrent callers",
    "fetch_vs_raw": "fetch ÷ raw read + unpack",
}


def scaling_targets(scaling: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Issue 22's lookup scaling targets from the scaling section's figures (``None`` when it did not run)."""
    out: dict[str, dict[str, Any]] = {}
    for key, what in (("point", "point read"), ("timestamp", "timestamp lookup + read")):
        small, large = scaling.get(f"lookup_{key}_small_us"), scaling.get(f"lookup_{key}_large_us")
        value = None if not small or large is None else large / small
        out[f"{key}_scaling"] = {
            "label": f"{what} p50, 10⁷ / 10⁵ records (scaling section: 1-B values, 100 per append)",
            "value": value,
            "target": f"<= {SCALING_BOUND:g}",
            "holds": None if value is None else value <= SCALING_BOUND,
        }
    return out


def _num(x: float | None, unit: str) -> str:
    if x is None or math.isnan(x):
        return "-"
    if unit == "rec/s":
        for div, suffix in ((1e6, "M"), (1e3, "k")):
            if x >= div:
                return f"{x / div:.3g}{suffix}"
        return f"{x:.3g}"
    return f"{x:.1f}" if x < 1000 else f"{x:,.0f}"


def _cell(cell: dict[str, Any] | None, unit: str) -> str:
    if cell is None:
        return "-"
    text = _num(cell["value"], unit)
    if cell.get("p99") is not None:
        text += f" ({_num(cell['p99'], unit)})"
    return text


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _verdict(holds: bool | None) -> str:
    return "-" if holds is None else ("holds" if holds else "MISS")


def matrix_rows(doc: dict[str, Any]) -> list[list[str]]:
    """Operation, shape, unit, a figure per column, seglog ÷ each other column, the raw reference."""
    rows = []
    for op, spec in doc["operations"].items():
        for shape, about in doc["shapes"].items():
            cells, ratios = doc["cells"][shape][op], doc["ratios"][shape][op]
            rows.append([
                spec["label"], about["label"], spec["unit"],
                *(_cell(cells.get(c), spec["unit"]) for c in ("seglog", *PEER_COLUMNS)),
                *(_ratio(ratios.get(c)) for c in PEER_COLUMNS),
                spec["raw_label"],
            ])
    return rows


def verdict_rows(doc: dict[str, Any]) -> list[list[str]]:
    """One line per target and shape: the verdict first, then what, the shape, the ratio and the bound."""
    rows = []
    for target in doc["targets"].values():
        for shape, cell in target["by_shape"].items():
            rows.append([_verdict(cell["holds"]), target["label"], doc["shapes"][shape]["label"],
                         _ratio(cell["value"]), cell["target"]])
    rows.extend([_verdict(t["holds"]), t["label"], "-", _ratio(t["value"]), t["target"]]
                for t in doc.get("scaling_targets", {}).values())
    return rows


def summary_rows(doc: dict[str, Any]) -> list[list[str]]:
    """Per target: in how many shapes it holds, the best shape and the worst, with their ratios."""
    rows = []
    for target in doc["targets"].values():

        def which(end: dict[str, Any] | None) -> str:
            return "-" if end is None else f"{doc['shapes'][end['shape']]['label']}: {end['value']:.2f}"

        rows.append([target["label"], f"{target['holding']} of {target['measured']}", which(target["best"]),
                     which(target["worst"])])
    return rows


def print_shapes(doc: dict[str, Any]) -> None:
    heads = [COLUMN_LABELS[c] for c in ("seglog", *PEER_COLUMNS)]
    print_table(
        ["operation", "shape (records per append x value)", "unit", *(Column(h, "right") for h in heads),
         *(Column(f"seglog/{COLUMN_LABELS[c]}", "right") for c in PEER_COLUMNS), "raw reference"],
        matrix_rows(doc),
        title="every shape: median of rounds (latencies: p50, p99 in brackets); seglog/x: median of the "
        "per-round ratios",
    )
    if doc["missing_peers"]:
        print(f"not measured (package not installed; the dev extra has them): {', '.join(doc['missing_peers'])}")
    print_table(["target", "holds in", *SUMMARY_ENDS], summary_rows(doc),
                title="issue 22's targets over the shapes")
    print_table(["verdict", "target", "shape", Column("ratio", "right"), "bound"], verdict_rows(doc),
                title="issue 22's targets, one verdict per shape")


def _heading(key: str, target: dict[str, Any]) -> str:
    """A compact column heading: the short name and the bound (the bounds of every shape when they differ)."""
    bounds = list(dict.fromkeys(cell["target"] for cell in target["by_shape"].values()))
    return f"{SHORT_HEADINGS.get(key, target['label'])} ({' / '.join(bounds)})"


def markdown_lines(doc: dict[str, Any]) -> list[str]:
    """The compact matrix (one row per shape, one column per target), the summary, then the full matrix."""
    targets = doc["targets"]
    lines = ["", "| shape | " + " | ".join(_heading(key, target) for key, target in targets.items()) + " |",
             "| --- | " + " | ".join("---:" for _ in targets) + " |"]
    for shape, about in doc["shapes"].items():
        shown = []
        for target in targets.values():
            cell = target["by_shape"][shape]
            shown.append(_ratio(cell["value"]) + (" **MISS**" if cell["holds"] is False else ""))
        lines.append(f"| {about['label']} | " + " | ".join(shown) + " |")
    lines += ["", f"| target | holds in | {' | '.join(SUMMARY_ENDS)} |", "| --- | --- | --- | --- |"]
    lines += ["| " + " | ".join(row) + " |" for row in summary_rows(doc)]
    scaling = doc.get("scaling_targets", {})
    if scaling:
        lines += ["", "| scaling target | value | target | verdict |", "| --- | ---: | --- | --- |"]
        lines += [f"| {t['label']} | {_ratio(t['value'])} | {t['target']} | {_verdict(t['holds'])} |"
                  for t in scaling.values()]
    heads = [COLUMN_LABELS[c] for c in ("seglog", *PEER_COLUMNS)]
    lines += ["", "| operation | shape | unit | " + " | ".join(heads) + " | "
              + " | ".join(f"seglog/{COLUMN_LABELS[c]}" for c in PEER_COLUMNS) + " | raw reference |",
              "| --- | --- | --- | " + " | ".join("---:" for _ in range(len(heads) + len(PEER_COLUMNS))) + " | --- |"]
    lines += ["| " + " | ".join(row) + " |" for row in matrix_rows(doc)]
    return lines
