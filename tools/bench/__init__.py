"""``seglog bench``: seglog's speed beside the raw limits of the machine and beside its peers, in one run.

Owns the benchmark workloads (``seglog.tools.bench.workloads``), the raw references and
peers they are compared with (``seglog.tools.bench.references``), the scaling runs
(``seglog.tools.bench.scaling``), the matrix of append shapes beside sqlite3, LMDB and
RocksDB (``seglog.tools.bench.shapes``, ``seglog.tools.bench.kvpeers``,
``seglog.tools.bench.shapes_report``), Kafka clients over the wire (``seglog.tools.bench.wire``,
only with ``--only wire``), the orchestration and the report — a table, JSON
and the ratios the acceptance targets of issues 4 and 8 are stated in
(``seglog.tools.bench.report``). ``docs/PERFORMANCE.md`` explains every figure.

Every figure is measured in the same process and run as its denominator, with
variants interleaved round by round: on a shared machine absolute numbers move
far more between runs than same-run ratios do (docs/PERFORMANCE.md, "Method").
Timing assertions never go into the test suite; the smoke test only checks
that a quick run emits every key.

Uses only what ``engine`` exports (plus its private ``Engine._abort_open``,
the documented way to leave a directory as a crash would), the standard
library, msgpack, google-crc32c, sqlite3, diskcache and rich, and lmdb and rocksdict when
they are installed (the dev extra).
"""

from seglog.tools.bench.report import RATIO_KEYS, ROW_KEYS, SCALING_KEYS, Report
from seglog.tools.bench.runner import ALL_SECTIONS, SECTIONS, BenchOptions, run_bench

__all__ = [
    "ALL_SECTIONS", "RATIO_KEYS", "ROW_KEYS", "SCALING_KEYS", "SECTIONS", "BenchOptions", "Report", "run_bench",
]
