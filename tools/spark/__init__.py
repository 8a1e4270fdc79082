"""seglog on Apache Spark: the ``seglog`` PySpark data source and the pipeline jobs.

Owns: :func:`register` (registers the source with a session and turns on
``spark.sql.python.filterPushdown.enabled``, without which pyspark 4.3.0 fails
every query of a source that implements ``pushFilters``; on a local master it
points Spark's Python workers at this interpreter, see :func:`use_this_python`), :func:`read_seglog`
(a fresh ``load()`` per call: pyspark 4.3.0 reuses a DataFrame's first plan,
docs/SPARK.md §1), the source (:mod:`seglog.tools.spark.source`), the
writer (:mod:`seglog.tools.spark.writer`), the session builder
(:mod:`seglog.tools.spark.session`) and the ``seglog pipeline`` jobs
(:mod:`seglog.tools.spark.jobs`). ``docs/SPARK.md`` is the user's guide.

Spark's Python workers import this package, so it must be installed on every
executor (``pip install 'seglog[spark]'``), not reached through ``sys.path``.

Must not import: ``seglog.tools.cli``. Importing this package imports pyspark.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from seglog.tools.spark.source import SeglogDataSource

__all__ = ["FORMAT", "SeglogDataSource", "read_seglog", "register", "use_this_python"]

FORMAT = "seglog"
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: Any) -> None:
    """Register the ``seglog`` format with ``spark`` and enable Python filter pushdown for the session.

    On a local master (``local[...]``, ``local-cluster[...]``) whose Python the
    caller did not choose, Spark's Python workers are pointed at this
    interpreter first (:func:`use_this_python`): the source is imported there.
    """
    use_this_python(spark)
    spark.conf.set(PUSHDOWN_CONF, "true")
    spark.dataSource.register(SeglogDataSource)


def use_this_python(spark: Any) -> bool:
    """On a local master, make Spark's Python workers run this interpreter unless the caller chose one.

    Spark starts its Python workers with ``PYSPARK_PYTHON`` (default: whatever
    ``python3`` is on ``PATH``), fixed when the session's SparkContext starts,
    and pickles the data source together with that name when it is
    registered. Outside an activated virtual environment that ``python3`` has
    no seglog, and every read fails with ``ModuleNotFoundError``. A local
    master's workers run on this machine, so this interpreter (which has
    seglog) is right for them: when neither ``PYSPARK_PYTHON`` nor
    ``spark.pyspark.python`` is set, this sets ``PYSPARK_PYTHON`` and
    ``PYSPARK_DRIVER_PYTHON`` to ``sys.executable`` and points the running
    SparkContext at it. On a cluster the executors' Python is the cluster's
    (``spark.pyspark.python``) and nothing is changed. Returns whether it
    changed anything.
    """
    try:
        context = spark.sparkContext
        master = str(context.master)
    except Exception:  # Spark Connect sessions have no SparkContext: the server's Python runs the source
        return False
    if not master.startswith("local") or "PYSPARK_PYTHON" in os.environ:
        return False
    if context.getConf().get("spark.pyspark.python") is not None:
        return False
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    context.pythonExec = sys.executable
    return True


def read_seglog(spark: Any, path: str, **options: Any) -> Any:
    """``spark.read.format("seglog").options(**options).load(path)``, a new plan every call.

    Call it once per query rather than reusing the DataFrame: pyspark 4.3.0
    keeps the partitions planned by a DataFrame's first action, so a reused
    DataFrame silently misses rows (after a pushed filter) or new segments.
    """
    register(spark)
    # Python's current directory, which a caller means; Spark alone would use its JVM's working directory.
    path = os.path.abspath(path)
    reader = spark.read.format(FORMAT)
    if not any(key.lower() == "minpartitions" for key in options):
        # Spark's file sources pack small files by the cluster's parallelism; a Python source's
        # reader cannot see it, so it is passed here (docs/SPARK.md §3, maxPartitionBytes).
        parallelism = _default_parallelism(spark)
        if parallelism is not None:
            reader = reader.option("minPartitions", str(parallelism))
    for key, value in options.items():
        reader = reader.option(key, str(value).lower() if isinstance(value, bool) else str(value))
    return reader.load(path)


def _default_parallelism(spark: Any) -> int | None:
    """The session's ``defaultParallelism``, or ``None`` where there is no SparkContext (Spark Connect)."""
    try:
        return int(spark.sparkContext.defaultParallelism)
    except Exception:  # Spark Connect sessions raise on .sparkContext; the source's default then applies
        return None
