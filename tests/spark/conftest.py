"""One SparkSession for every Spark test (a session start costs seconds); the data helpers live in ``sparkdata``.

The session is ``local[2,2]``: two threads, and a failed task is tried once
more, so the writer's retry path runs for real. It starts lazily: a run that
selects no Spark test starts no JVM.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark")


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from seglog.tools.spark.session import spark_session

    session = spark_session(
        "local[2,2]",
        "seglog-tests",
        {
            "spark.driver.memory": "1g",
            "spark.sql.warehouse.dir": str(tmp_path_factory.mktemp("warehouse")),
        },
    )
    yield session
    session.stop()

