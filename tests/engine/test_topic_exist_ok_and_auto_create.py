"""``create_topic(exist_ok=True)``, auto-creation of topics on produce (Kafka's ``auto.create.topics.enable``)
and ``Engine.log_or_create``, the mechanism both use."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from seglog.engine import Engine, LogConfig, Record, errors
from seglog.engine import _fs as engine_fs
from seglog.engine.testing import assert_topic_holds

# ------------------------------------------------------------------------------------------ exist_ok


async def test_exist_ok_accepts_a_topic_that_exists_as_asked_for(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("orders", partitions=3, config={"retention.ms": 3_600_000}, exist_ok=True)
        await engine.produce("orders", b"paid", partition=1)
        await engine.create_topic("orders", partitions=3, config={"retention.ms": 3_600_000}, exist_ok=True)
        await engine.create_topic("orders", partitions=3, exist_ok=True)  # config=None: whatever it has
        # Nothing was re-created: the record is still there, the override too.
        await assert_topic_holds(engine, "orders", [b"paid"], partition=1)
        assert engine.topic_config("orders").retention_ms == 3_600_000
    async with Engine.open(tmp_path) as engine:  # and after a reopen, from topic.json
        await engine.create_topic("orders", partitions=3, exist_ok=True)
        assert engine.partitions_for("orders") == 3


async def test_exist_ok_with_another_partition_count_names_both_counts(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("orders", partitions=3)
        with pytest.raises(errors.TopicExistsError, match=r"exists with 3 partition\(s\), not the 1 asked for"):
            await engine.create_topic("orders", exist_ok=True)
        assert engine.partitions_for("orders") == 3


async def test_exist_ok_with_another_config_names_the_key_and_both_values(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("orders", config={"retention.ms": 3_600_000})
        with pytest.raises(errors.TopicExistsError, match=r"retention\.ms is 3600000, asked for 60000\b"):
            await engine.create_topic("orders", config={"retention_ms": 60_000}, exist_ok=True)
        with pytest.raises(errors.TopicExistsError, match=r"retention\.ms is 3600000, asked for 604800000"):
            await engine.create_topic("orders", config=LogConfig(), exist_ok=True)


async def test_without_exist_ok_an_existing_topic_is_still_an_error(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("orders")
        with pytest.raises(errors.TopicExistsError, match="already exists with 1 partition"):
            await engine.create_topic("orders")


# ------------------------------------------------------------------------------------------ auto-create


async def test_produce_to_a_missing_topic_is_an_error_unless_auto_create_is_on(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        assert engine.auto_create_topics is False
        with pytest.raises(errors.UnknownTopicOrPartitionError, match="unknown topic 'orders'"):
            await engine.produce("orders", b"paid")
        assert engine.topics() == []


async def test_produce_auto_creates_a_topic_with_the_default_partitions_and_config(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=64 * 1024)
    async with Engine.open(tmp_path, config, auto_create_topics=True, auto_create_partitions=3) as engine:
        meta = await engine.produce("orders", b"paid", key=b"order-1")
        assert engine.topics() == ["orders"] and engine.partitions_for("orders") == 3
        assert engine.topic_overrides("orders") == {} and engine.topic_config("orders") == config
        await assert_topic_holds(engine, "orders", [b"paid"], partition=meta.partition)
        # An existing topic keeps its own partition count: auto-create never adds partitions.
        await engine.create_topic("audit", partitions=1)
        with pytest.raises(errors.UnknownTopicOrPartitionError, match="has 1 partition"):
            await engine.produce("audit", b"x", partition=2)
        # A missing topic gets auto_create_partitions; a partition beyond them is still unknown.
        with pytest.raises(errors.UnknownTopicOrPartitionError, match="has 3 partition"):
            await engine.produce("billing", b"x", partition=5)
        assert engine.partitions_for("billing") == 3
    async with Engine.open(tmp_path) as engine:  # the auto-created topic is an ordinary topic on disk
        assert engine.partitions_for("orders") == 3


async def test_auto_create_refuses_an_illegal_topic_name(tmp_path: Path) -> None:
    async with Engine.open(tmp_path / "data", auto_create_topics=True) as engine:
        with pytest.raises(errors.InvalidTopicError):
            await engine.produce("../evil", b"x")
        for not_a_name in (["orders"], b"orders", None):
            with pytest.raises(errors.InvalidTopicError):
                await engine.produce(not_a_name, b"x")  # type: ignore[arg-type]
            with pytest.raises(errors.InvalidTopicError):
                await engine.log_or_create(not_a_name)  # type: ignore[arg-type]
        assert engine.topics() == [] and not (tmp_path / "evil-0").exists()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"auto_create_partitions": 0}, "auto_create_partitions must be a positive int"),
        ({"auto_create_partitions": True}, "auto_create_partitions must be a positive int"),
        ({"auto_create_topics": "yes"}, "auto_create_topics must be a bool"),
    ],
)
def test_open_refuses_bad_auto_create_settings(tmp_path: Path, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(errors.InvalidConfigError, match=match):
        Engine.open(tmp_path, **kwargs)


async def test_log_or_create_creates_once_and_then_returns_the_log(tmp_path: Path) -> None:
    async with Engine.open(tmp_path, auto_create_partitions=2) as engine:  # works without auto_create_topics
        log = await engine.log_or_create("orders", 1)
        assert engine.partitions_for("orders") == 2 and log is engine.log("orders", 1)
        await log.append([Record(b"v")])
        assert await engine.log_or_create("orders", 1) is log  # existing: used as it is
        assert engine.partitions_for("orders") == 2
        await engine.log_or_create("audit", partitions=4)
        assert engine.partitions_for("audit") == 4
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            await engine.log_or_create("orders", 2)


async def test_log_or_create_on_a_read_only_engine_returns_existing_topics_only(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("orders")
    async with Engine.open(tmp_path, read_only=True) as engine:
        assert (await engine.log_or_create("orders")).topic == "orders"
        with pytest.raises(errors.ClosedError, match="read-only"):
            await engine.log_or_create("billing")


async def test_a_producer_waits_for_a_topic_another_producer_is_auto_creating(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second producer arrives while the first one's create_topic has registered the topic but not yet
    made its partitions (held where it places their directories)."""
    gate, reached = asyncio.Event(), asyncio.Event()
    place = engine_fs.place_new_partition_dirs

    async def place_when_released(*args: Any, **kwargs: Any) -> Any:
        reached.set()
        await gate.wait()
        return await place(*args, **kwargs)

    monkeypatch.setattr(engine_fs, "place_new_partition_dirs", place_when_released)
    async with Engine.open(tmp_path, auto_create_topics=True, auto_create_partitions=3) as engine:
        first = asyncio.create_task(engine.produce("orders", b"first", partition=0))
        try:
            async with asyncio.timeout(30):  # not reached: create_topic no longer places partitions there
                await reached.wait()
            assert engine.partitions_for("orders") == 3  # registered, its partitions not yet made
            second = asyncio.create_task(engine.produce("orders", b"second", partition=2))
            # While the first creation is held, the second producer neither fails nor finishes: it waits.
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(asyncio.shield(second), 0.1)
        finally:
            gate.set()
        await asyncio.gather(first, second)
        await assert_topic_holds(engine, "orders", [b"first"], partition=0)
        await assert_topic_holds(engine, "orders", [b"second"], partition=2)
