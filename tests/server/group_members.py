"""Group consumers of the three Python Kafka clients (and the library's) behind one async interface.

Every call is bounded in time. aiokafka runs on the test's event loop;
kafka-python and confluent-kafka block, so their calls run in worker threads
while the loop keeps serving. Short session and heartbeat intervals make
rebalances quick (the servers these tests start accept them).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from kafka_clients import TIMEOUT_S, need

SESSION_MS = 3_000
HEARTBEAT_MS = 200

Seen = list[tuple[int, int]]  # (partition, offset) of each record handed out


class Member:
    """One consumer of ``topic`` in ``group``; ``poll`` returns (partition, offset) pairs."""

    name = "?"

    async def start(self) -> None:
        raise NotImplementedError

    async def poll(self, timeout_s: float = 0.1) -> Seen:
        raise NotImplementedError

    async def assignment(self) -> set[int]:
        raise NotImplementedError

    async def commit(self) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError


class AioMember(Member):
    name = "aiokafka"

    def __init__(self, address: str, group: str, topic: str, **extra: Any) -> None:
        need("aiokafka")
        from aiokafka import AIOKafkaConsumer

        self.consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=address, group_id=group, enable_auto_commit=False,
            auto_offset_reset="earliest", session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS,
            request_timeout_ms=int(TIMEOUT_S * 1000), fetch_max_wait_ms=100, retry_backoff_ms=50, **extra,
        )

    async def start(self) -> None:
        await asyncio.wait_for(self.consumer.start(), TIMEOUT_S)  # aiokafka retries FindCoordinator forever

    async def poll(self, timeout_s: float = 0.1) -> Seen:
        got = await asyncio.wait_for(self.consumer.getmany(timeout_ms=int(timeout_s * 1000)), TIMEOUT_S)
        return [(m.partition, m.offset) for msgs in got.values() for m in msgs]

    async def assignment(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    async def commit(self) -> None:
        await asyncio.wait_for(self.consumer.commit(), TIMEOUT_S)

    async def close(self) -> None:
        await asyncio.wait_for(self.consumer.stop(), TIMEOUT_S)


class KafkaPythonMember(Member):
    name = "kafka-python"

    def __init__(self, address: str, group: str, topic: str, **extra: Any) -> None:
        need("kafka-python")
        self.args = (address, group, topic, extra)
        self.consumer: Any = None

    async def start(self) -> None:
        from kafka import KafkaConsumer

        address, group, topic, extra = self.args

        def make() -> Any:
            # kafka-python wants request_timeout_ms above session_timeout_ms for group consumers.
            return KafkaConsumer(
                topic, bootstrap_servers=address, group_id=group, enable_auto_commit=False,
                auto_offset_reset="earliest", session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS,
                request_timeout_ms=int(TIMEOUT_S * 1000), fetch_max_wait_ms=100, retry_backoff_ms=50, **extra,
            )

        self.consumer = await asyncio.wait_for(asyncio.to_thread(make), TIMEOUT_S)
        # kafka-python keeps one Metadata request in flight and lets its answer settle every refresh asked
        # meanwhile. The consumer asks for one before it subscribes (so it names no topic); if that answer
        # lands after the member led its first rebalance, the member assigned nothing and only rebalances
        # again at metadata_max_age_ms. So the member polls only once its metadata holds the topic:
        # partitions_for_topic waits out the request in flight, then fetches again.
        partitions = await asyncio.wait_for(asyncio.to_thread(self.consumer.partitions_for_topic, topic), TIMEOUT_S)
        assert partitions, f"kafka-python's metadata has no partitions for topic {topic!r}"

    async def poll(self, timeout_s: float = 0.1) -> Seen:
        got = await asyncio.wait_for(asyncio.to_thread(self.consumer.poll, timeout_ms=int(timeout_s * 1000)),
                                     TIMEOUT_S)
        return [(m.partition, m.offset) for msgs in got.values() for m in msgs]

    async def assignment(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    async def commit(self) -> None:
        await asyncio.wait_for(asyncio.to_thread(self.consumer.commit), TIMEOUT_S)

    async def close(self) -> None:
        await asyncio.wait_for(asyncio.to_thread(self.consumer.close, autocommit=False), TIMEOUT_S)


class ConfluentMember(Member):
    name = "confluent-kafka"

    def __init__(self, address: str, group: str, topic: str, **extra: Any) -> None:
        need("confluent-kafka")
        from confluent_kafka import Consumer

        self.consumer = Consumer({
            "bootstrap.servers": address, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS, "socket.timeout.ms": int(TIMEOUT_S * 1000),
            "fetch.wait.max.ms": 100, "reconnect.backoff.ms": 50, **extra,
        })
        self.topic = topic

    async def start(self) -> None:
        self.consumer.subscribe([self.topic])

    async def poll(self, timeout_s: float = 0.1) -> Seen:
        messages = await asyncio.wait_for(
            asyncio.to_thread(self.consumer.consume, num_messages=500, timeout=timeout_s), TIMEOUT_S
        )
        out = []
        for m in messages:
            if m.error() is None:
                out.append((m.partition(), m.offset()))
        return out

    async def assignment(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    async def commit(self) -> None:
        from confluent_kafka import KafkaError, KafkaException

        try:
            await asyncio.wait_for(asyncio.to_thread(self.consumer.commit, asynchronous=False), TIMEOUT_S)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError._NO_OFFSET:  # nothing consumed since the last commit
                raise

    async def close(self) -> None:
        await asyncio.wait_for(asyncio.to_thread(self.consumer.close), TIMEOUT_S)


class LibraryMember(Member):
    """The library's own group consumer, on the server's engine (in-process)."""

    name = "library"

    def __init__(self, engine: Any, group: str, topic: str, **extra: Any) -> None:
        self.consumer = engine.consumer(group, [topic], enable_auto_commit=False, session_timeout_ms=SESSION_MS,
                                        heartbeat_interval_ms=HEARTBEAT_MS, **extra)

    async def start(self) -> None:
        await asyncio.wait_for(self.consumer.start(), TIMEOUT_S)

    async def poll(self, timeout_s: float = 0.1) -> Seen:
        got = await self.consumer.getmany(timeout_ms=int(timeout_s * 1000))
        return [(r.partition, r.offset) for records in got.values() for r in records]

    async def assignment(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    async def commit(self) -> None:
        await self.consumer.commit()

    async def close(self) -> None:
        await self.consumer.stop()


MEMBERS: dict[str, type[Member]] = {
    "aiokafka": AioMember, "kafka-python": KafkaPythonMember, "confluent-kafka": ConfluentMember,
}


def member(client: str, address: str, group: str, topic: str, **extra: Any) -> Member:
    return MEMBERS[client](address, group, topic, **extra)


async def poll_all(members: list[Member], seen: dict[str, Seen], until: Any, *, bound_s: float = TIMEOUT_S,
                   commit: bool = True) -> None:
    """Poll every member at once (each takes part in rebalances only while it polls) until ``until()``.

    Records are committed after each poll that returned some, so a rebalance
    never hands a committed record to another member.
    """
    async def one(m: Member) -> None:
        got = await m.poll()
        seen.setdefault(m.name, []).extend(got)
        if got and commit:
            await m.commit()

    async with asyncio.timeout(bound_s):
        while not await until():
            await asyncio.gather(*(one(m) for m in members))


async def close_all(members: list[Member]) -> None:
    for m in members:
        with contextlib.suppress(Exception):
            await m.close()
