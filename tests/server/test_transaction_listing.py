"""DescribeTransactions (65) and ListTransactions (66) over a raw socket, at every advertised version.

Answers come from the transaction coordinator's state, with Kafka's filters
(``TransactionStateManager.listTransactionStates``) and errors
(``handleDescribeTransactions``). The confluent-kafka installed here has no
``list_transactions``/``describe_transactions`` in its AdminClient, so the
requests are kio-built; every call is bounded by the wire client's timeout.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from typing import Any, NamedTuple

import pytest
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.list_transactions.v2.request import ListTransactionsRequest
from kio.schema.types import ProducerId, TransactionalId
from kio.static.primitive import i64
from wire import TIMEOUT, WireClient

from seglog.engine import Engine
from seglog.server import KafkaServer
from seglog.server.apis import APIS

START_MS = 1_700_000_000_000


def versions(key: int) -> list[int]:
    api = APIS[key]
    return list(range(api.min_version, api.max_version + 1))


class Clock:
    def __init__(self) -> None:
        self.now_ms = START_MS

    def __call__(self) -> int:
        return self.now_ms


@pytest.fixture
async def clock(engine: Engine) -> Clock:
    """Three ids: ``empty`` (Empty), ``open`` (Ongoing on out-0 and out-1 since START_MS), ``done`` (CompleteCommit)."""
    fake = Clock()
    coordinator = engine.transactions
    coordinator.clock = fake
    await engine.create_topic("out", partitions=2)
    await coordinator.init_producer_id("empty", 60_000)
    pid, epoch = await coordinator.init_producer_id("open", 30_000)
    await coordinator.add_partitions("open", pid, epoch, [("out", 1), ("out", 0)])
    pid, epoch = await coordinator.init_producer_id("done", 60_000)
    fake.now_ms -= 5_000  # began earlier than "open"
    await coordinator.add_partitions("done", pid, epoch, [("out", 0)])
    await coordinator.end_txn("done", pid, epoch, commit=True)
    fake.now_ms = START_MS
    return fake


@pytest.fixture
async def client(server: KafkaServer) -> AsyncIterator[WireClient]:
    opened = await WireClient.connect(server.bootstrap_servers)
    yield opened
    await opened.close()


class Described(NamedTuple):
    error_code: int
    transactional_id: str
    transaction_state: str
    timeout_ms: int
    start_ms: int
    producer_id: int
    producer_epoch: int
    topics: list[tuple[str, list[int]]]


class _Reader:
    """Kafka's flexible-version primitives, read by hand: kio's reader refuses the -1 start time Kafka sends."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def fixed(self, fmt: str) -> Any:
        (value,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return value

    def varint(self) -> int:
        shift = value = 0
        while True:
            byte = self.data[self.at]
            self.at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    def string(self) -> str:
        n = self.varint() - 1
        text = self.data[self.at:self.at + n].decode()
        self.at += n
        return text

    def array(self, item: Any) -> list[Any]:
        return [item() for _ in range(self.varint() - 1)]

    def no_tags(self) -> None:
        assert self.varint() == 0


async def _describe(client: WireClient, *txn_ids: str) -> list[Described]:
    """DescribeTransactions v0, its response decoded independently of kio (layout: Kafka's message JSON)."""
    correlation = await client.send(65, 0, DescribeTransactionsRequest(
        transactional_ids=tuple(TransactionalId(t) for t in txn_ids)))
    (size,) = struct.unpack(">i", await asyncio.wait_for(client.reader.readexactly(4), TIMEOUT))
    r = _Reader(await asyncio.wait_for(client.reader.readexactly(size), TIMEOUT))
    assert r.fixed(">i") == correlation
    r.no_tags()
    r.fixed(">i")  # throttle time

    def topic() -> tuple[str, list[int]]:
        name, partitions = r.string(), r.array(lambda: r.fixed(">i"))
        r.no_tags()
        return name, partitions

    def state() -> Described:
        got = Described(r.fixed(">h"), r.string(), r.string(), r.fixed(">i"), r.fixed(">q"), r.fixed(">q"),
                        r.fixed(">h"), r.array(topic))
        r.no_tags()
        return got

    states = r.array(state)
    r.no_tags()
    assert r.at == size
    return states


def test_both_apis_are_advertised_at_the_versions_kio_knows() -> None:
    assert (APIS[65].name, APIS[65].min_version, APIS[65].max_version) == ("describe_transactions", 0, 0)
    assert (APIS[66].name, APIS[66].min_version, APIS[66].max_version) == ("list_transactions", 0, 2)


@pytest.mark.parametrize("version", versions(65))
async def test_describe_transactions_answers_each_id_from_the_coordinators_state(
    engine: Engine, clock: Clock, client: WireClient, version: int
) -> None:
    by_id = {s.transactional_id: s for s in await _describe(client, "open", "empty", "done", "nope", "")}
    assert list(by_id) == ["open", "empty", "done", "nope", ""]
    opened, empty, done = by_id["open"], by_id["empty"], by_id["done"]
    record = engine.transactions.state_of("open")
    assert record is not None
    assert opened == Described(0, "open", "Ongoing", 30_000, START_MS, record.producer_id, record.producer_epoch,
                               [("out", [0, 1])])
    assert (empty.error_code, empty.transaction_state, empty.start_ms, empty.topics) == (0, "Empty", -1, [])
    assert (done.transaction_state, done.start_ms, done.topics) == ("CompleteCommit", START_MS - 5_000, [])
    assert by_id["nope"].error_code == ErrorCode.transactional_id_not_found.value
    assert by_id[""].error_code == ErrorCode.invalid_request.value


async def _list(client: WireClient, version: int, **filters: object) -> tuple[ErrorCode, list[tuple[str, str]],
                                                                            tuple[str, ...]]:
    answer = await client.call(66, version, ListTransactionsRequest(**filters))  # type: ignore[arg-type]
    listed = sorted((s.transactional_id, s.transaction_state) for s in answer.transaction_states)
    return answer.error_code, listed, tuple(answer.unknown_state_filters)


@pytest.mark.parametrize("version", versions(66))
async def test_list_transactions_filters_by_state_and_producer_id(
    engine: Engine, clock: Clock, client: WireClient, version: int
) -> None:
    everything = [("done", "CompleteCommit"), ("empty", "Empty"), ("open", "Ongoing")]
    assert await _list(client, version) == (ErrorCode.none, everything, ())
    assert await _list(client, version, state_filters=("Ongoing", "Empty")) == (
        ErrorCode.none, [("empty", "Empty"), ("open", "Ongoing")], ())
    # Kafka's names are case-sensitive; an unknown one is reported and matches nothing.
    assert await _list(client, version, state_filters=("ongoing", "CompleteCommit")) == (
        ErrorCode.none, [("done", "CompleteCommit")], ("ongoing",))
    assert await _list(client, version, state_filters=("Bogus",)) == (ErrorCode.none, [], ("Bogus",))
    assert await _list(client, version, state_filters=("Dead",)) == (ErrorCode.none, [], ())
    done = engine.transactions.state_of("done")
    assert done is not None
    assert await _list(client, version, producer_id_filters=(ProducerId(done.producer_id), ProducerId(10**12))) == (
        ErrorCode.none, [("done", "CompleteCommit")], ())
    assert await _list(client, version, producer_id_filters=(ProducerId(done.producer_id),),
                       state_filters=("Ongoing",)) == (ErrorCode.none, [], ())


@pytest.mark.parametrize("version", versions(66)[1:])  # duration_filter exists from version 1
async def test_list_transactions_keeps_those_running_longer_than_the_duration_filter(
    clock: Clock, client: WireClient, version: int
) -> None:
    clock.now_ms = START_MS + 3_000
    # "open" began 3 s ago, "done" 8 s ago, "empty" never (-1): Kafka compares now - start with the filter.
    assert (await _list(client, version, duration_filter=i64(4_000)))[1] == [
        ("done", "CompleteCommit"), ("empty", "Empty")]
    assert (await _list(client, version, duration_filter=i64(3_000)))[1] == [
        ("done", "CompleteCommit"), ("empty", "Empty")]
    assert len((await _list(client, version, duration_filter=i64(2_999)))[1]) == 3
    assert len((await _list(client, version, duration_filter=i64(-1)))[1]) == 3


@pytest.mark.parametrize("version", versions(66)[2:])  # transactional_id_pattern exists from version 2
async def test_list_transactions_keeps_the_ids_a_pattern_matches_whole(
    clock: Clock, client: WireClient, version: int
) -> None:
    assert (await _list(client, version, transactional_id_pattern="open|d.*"))[1] == [
        ("done", "CompleteCommit"), ("open", "Ongoing")]
    assert (await _list(client, version, transactional_id_pattern="pen"))[1] == []  # matches, not finds
    assert len((await _list(client, version, transactional_id_pattern=""))[1]) == 3
    code, listed, _ = await _list(client, version, transactional_id_pattern="(")
    assert (code, listed) == (ErrorCode.invalid_regular_expression, [])


async def test_an_expired_id_is_neither_listed_nor_described(
    engine: Engine, clock: Clock, client: WireClient
) -> None:
    clock.now_ms += engine.transactions.transactional_id_expiration_ms
    assert sorted(await engine.transactions.remove_expired_transactional_ids()) == ["done", "empty"]
    assert (await _list(client, 2))[1] == [("open", "Ongoing")]
    (described,) = await _describe(client, "empty")
    assert described.error_code == ErrorCode.transactional_id_not_found.value
