"""Engine-written log directories for the Spark tests, and the trace of segments the readers opened.

Every query in these tests goes through ``read_seglog`` (a fresh ``load()``:
pyspark 4.3.0 reuses a DataFrame's first plan).
"""

from __future__ import annotations

import json
from pathlib import Path

from seglog.engine import offline
from seglog.engine.config import LogConfig
from seglog.engine.runner import run
from seglog.segments.records import Record

SMALL = LogConfig(segment_bytes=16 * 1024, index_interval_bytes=1024, segment_index_bytes=4096)
BASE_TS = 1_700_000_000_000


def record(topic: str, partition: int, i: int) -> Record:
    """Record ``i`` of a test partition: a 100-byte value, a key, timestamps 10 ms apart, a header on every 4th."""
    return Record(
        value=b"%s/%d/%05d:" % (topic.encode(), partition, i) + b"x" * 90,
        key=b"k%d" % (i % 7),
        timestamp=BASE_TS + i * 10,
        headers=(("n", b"%d" % i),) if i % 4 == 0 else (),
    )


def build_log(path: Path, layout: dict[str, list[int]], *, per_batch: int = 10) -> dict[tuple[str, int], int]:
    """Create topics with ``layout[topic][p]`` records in partition ``p``; return records per partition."""
    from seglog.engine.engine import Engine

    async def fill() -> None:
        async with Engine.open(path, SMALL) as engine:
            for topic, counts in layout.items():
                await engine.create_topic(topic, partitions=len(counts))
                for p, count in enumerate(counts):
                    log = engine.log(topic, p)
                    for start in range(0, count, per_batch):
                        await log.append([record(topic, p, i) for i in range(start, min(count, start + per_batch))])

    run(fill())
    return {(t, p): n for t, counts in layout.items() for p, n in enumerate(counts)}


def append_records(path: Path, topic: str, partition: int, first: int, count: int) -> None:
    from seglog.engine.engine import Engine

    async def fill() -> None:
        async with Engine.open(path, SMALL) as engine:
            log = engine.log(topic, partition)
            await log.append([record(topic, partition, i) for i in range(first, first + count)])

    run(fill())


def reads(trace: Path) -> list[str]:
    """The segment files the readers opened (one trace line per range read), then clear the trace."""
    if not trace.exists():
        return []
    paths = [json.loads(line)["path"] for line in trace.read_text().splitlines()]
    events = [json.loads(line)["event"] for line in trace.read_text().splitlines()]
    trace.unlink()
    return sorted(Path(p).parent.name + "/" + Path(p).name for p, e in zip(paths, events, strict=True) if e == "read")


def segment_count(path: Path, topic: str, partition: int) -> int:
    return len(offline.list_segments(offline.partition_path(path, topic, partition)))
