"""Streaming reads: availableNow with maxOffsetsPerTrigger, and a restart that reads only what is new."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sparkdata import append_records, build_log

pytestmark = pytest.mark.spark


def test_available_now_honours_the_limit_and_resumes_from_the_checkpoint(spark: Any, tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    build_log(log_dir, {"s": [250, 100]})
    batches: list[list[tuple[int, int]]] = []

    def collect(df: Any, epoch: int) -> None:
        batches.append(sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect()))

    def run_once() -> None:
        query = (
            spark.readStream.format("seglog")
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", 150)
            .load(str(log_dir))
            .writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(180)
        assert query.exception() is None

    run_once()
    assert [len(b) for b in batches if b] == [150, 150, 50]
    seen = sorted(x for b in batches for x in b)
    assert seen == sorted([(0, i) for i in range(250)] + [(1, i) for i in range(100)])
    batches.clear()
    append_records(log_dir, "s", 0, 250, 30)
    run_once()
    assert [b for b in batches if b] == [[(0, i) for i in range(250, 280)]]
