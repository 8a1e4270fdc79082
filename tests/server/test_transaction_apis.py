"""The transaction APIs over a raw socket, at every advertised version: the coordinator's answers as Kafka gives
them (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn, FindCoordinator for a
transactional id), and Fetch / ListOffsets / OffsetFetch under read_committed."""

from __future__ import annotations

import datetime
import warnings
from collections.abc import AsyncIterator

import pytest
from kio.schema.add_offsets_to_txn.v3.request import AddOffsetsToTxnRequest
from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.find_coordinator.v2.request import FindCoordinatorRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest, OffsetFetchRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.txn_offset_commit.v3.request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from kio.schema.types import BrokerId, GroupId, ProducerId, TopicName, TransactionalId
from kio.static.primitive import Records, i8, i16, i32, i32Timedelta, i64
from wire import WireClient, versions

from seglog.engine import Engine
from seglog.server import KafkaServer

TIMEOUT = i32Timedelta.parse(datetime.timedelta(milliseconds=60_000))
ZERO = i32Timedelta.parse(datetime.timedelta(0))


@pytest.fixture
async def client(server: KafkaServer, engine: Engine) -> AsyncIterator[WireClient]:
    await engine.create_topic("out", partitions=2, exist_ok=True)
    opened = await WireClient.connect(server.bootstrap_servers)
    yield opened
    await opened.close()


async def _init(client: WireClient, txn_id: str, version: int = 4) -> tuple[int, int]:
    answer = await client.call(22, version, InitProducerIdRequest(
        transactional_id=TransactionalId(txn_id), transaction_timeout=TIMEOUT
    ))
    assert answer.error_code == ErrorCode.none, answer
    return int(answer.producer_id), int(answer.producer_epoch)


def _add(txn_id: str, pid: int, epoch: int, *partitions: tuple[str, int]) -> AddPartitionsToTxnRequest:
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(partition)
    return AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=TransactionalId(txn_id), v3_and_below_producer_id=ProducerId(pid),
        v3_and_below_producer_epoch=i16(epoch),
        v3_and_below_topics=tuple(
            AddPartitionsToTxnTopic(name=TopicName(t), partitions=tuple(i32(p) for p in ps))
            for t, ps in topics.items()
        ),
    )


def _end(txn_id: str, pid: int, epoch: int, commit: bool) -> EndTxnRequest:
    return EndTxnRequest(transactional_id=TransactionalId(txn_id), producer_id=ProducerId(pid),
                         producer_epoch=i16(epoch), committed=commit)


def _txn_batch(pid: int, epoch: int, sequence: int, *values: bytes) -> bytes:
    """A transactional RecordBatch v2 built by kafka-python's own builder (not by the code under test)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # kafka-python's import uses a deprecated importlib call
        from kafka.record.default_records import DefaultRecordBatchBuilder
    builder = DefaultRecordBatchBuilder(2, 0, True, pid, epoch, sequence, 1 << 20)
    for i, value in enumerate(values):
        builder.append(i, timestamp=1_700_000_000_000, key=None, value=value, headers=[])
    return bytes(builder.build())


def _produce(topic: str, partition: int, batch: bytes, txn_id: str | None = None) -> ProduceRequest:
    return ProduceRequest(
        acks=i16(-1), timeout=TIMEOUT, transactional_id=None if txn_id is None else TransactionalId(txn_id),
        topic_data=(TopicProduceData(name=TopicName(topic), partition_data=(
            PartitionProduceData(index=i32(partition), records=Records(batch)),
        )),),
    )


def _fetch(topic: str, partition: int, isolation: int) -> FetchRequest:
    return FetchRequest(
        max_wait=ZERO, min_bytes=i32(0), max_bytes=i32(1 << 20), isolation_level=i8(isolation),
        session_id=i32(0), session_epoch=i32(-1),
        topics=(FetchTopic(topic=TopicName(topic), partitions=(FetchPartition(
            partition=i32(partition), fetch_offset=i64(0), log_start_offset=i64(-1), partition_max_bytes=i32(1 << 20),
        ),)),),
        forgotten_topics_data=(), rack_id="",
    )


def _latest(topic: str, partition: int, isolation: int) -> ListOffsetsRequest:
    return ListOffsetsRequest(replica_id=BrokerId(-1), isolation_level=i8(isolation), topics=(
        ListOffsetsTopic(name=TopicName(topic), partitions=(
            ListOffsetsPartition(partition_index=i32(partition), timestamp=i64(-1)),
        )),
    ))


@pytest.mark.parametrize("version", versions(10)[1:])  # key_type exists from version 1
async def test_find_coordinator_names_this_node_for_a_transactional_id(
    server: KafkaServer, client: WireClient, version: int
) -> None:
    answer = await client.call(10, version, FindCoordinatorRequest(key="txn", key_type=i8(1)))
    host, port = server.bootstrap_servers.rsplit(":", 1)
    assert (answer.error_code, answer.node_id, answer.host, answer.port) == (ErrorCode.none, 0, host, int(port))
    unknown = await client.call(10, version, FindCoordinatorRequest(key="txn", key_type=i8(5)))
    assert unknown.error_code == ErrorCode.invalid_request


@pytest.mark.parametrize("version", versions(22))
async def test_init_producer_id_with_a_transactional_id_bumps_its_epoch_and_checks_the_timeout(
    client: WireClient, version: int
) -> None:
    pid, epoch = await _init(client, f"t{version}", version)
    again = await _init(client, f"t{version}", version)
    assert again == (pid, epoch + 1)
    too_long = await client.call(22, version, InitProducerIdRequest(
        transactional_id=TransactionalId("x"), transaction_timeout=i32Timedelta.parse(datetime.timedelta(hours=1))
    ))
    assert too_long.error_code == ErrorCode.invalid_transaction_timeout
    empty = await client.call(22, version, InitProducerIdRequest(transactional_id=TransactionalId(""),
                                                                 transaction_timeout=TIMEOUT))
    assert empty.error_code == ErrorCode.invalid_request


@pytest.mark.parametrize("version", versions(24))
async def test_add_partitions_answers_each_partition(client: WireClient, version: int) -> None:
    pid, epoch = await _init(client, "t")
    answer = await client.call(24, version, _add("t", pid, epoch, ("out", 0), ("out", 1)))
    codes = {(t.name, p.partition_index): p.partition_error_code
             for t in answer.results_by_topic_v3_and_below for p in t.results_by_partition}
    assert codes == {("out", 0): ErrorCode.none, ("out", 1): ErrorCode.none}
    missing = await client.call(24, version, _add("t", pid, epoch, ("out", 0), ("nope", 0), ("out", 7)))
    codes = {(t.name, p.partition_index): p.partition_error_code
             for t in missing.results_by_topic_v3_and_below for p in t.results_by_partition}
    assert codes == {("out", 0): ErrorCode.operation_not_attempted, ("nope", 0): ErrorCode.unknown_topic_or_partition,
                     ("out", 7): ErrorCode.unknown_topic_or_partition}
    stale = await client.call(24, version, _add("t", pid, epoch - 1 if epoch else epoch + 1, ("out", 0)))
    fenced = ErrorCode.producer_fenced if version >= 2 else ErrorCode.invalid_producer_epoch
    assert stale.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == fenced
    unknown = await client.call(24, version, _add("never-initialised", pid, epoch, ("out", 0)))
    assert unknown.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == (
        ErrorCode.invalid_producer_id_mapping
    )


@pytest.mark.parametrize("version", versions(26))
async def test_end_txn_commits_and_answers_retries_and_wrong_states_as_kafka(client: WireClient, version: int) -> None:
    pid, epoch = await _init(client, "t")
    nothing = await client.call(26, version, _end("t", pid, epoch, True))
    assert nothing.error_code == ErrorCode.invalid_txn_state  # nothing was added
    assert (await client.call(24, 3, _add("t", pid, epoch, ("out", 0)))).results_by_topic_v3_and_below
    assert (await client.call(26, version, _end("t", pid, epoch, True))).error_code == ErrorCode.none
    assert (await client.call(26, version, _end("t", pid, epoch, True))).error_code == ErrorCode.none  # a retry
    assert (await client.call(26, version, _end("t", pid, epoch, False))).error_code == ErrorCode.invalid_txn_state
    stale = await client.call(26, version, _end("t", pid, epoch + 1, True))
    assert stale.error_code == (ErrorCode.producer_fenced if version >= 2 else ErrorCode.invalid_producer_epoch)


@pytest.mark.parametrize("version", versions(28))
async def test_txn_offset_commit_is_pending_until_the_commit(client: WireClient, engine: Engine, version: int) -> None:
    group = f"g{version}"
    pid, epoch = await _init(client, "t")
    commit = TxnOffsetCommitRequest(
        transactional_id=TransactionalId("t"), group_id=GroupId(group), producer_id=ProducerId(pid),
        producer_epoch=i16(epoch), generation_id=i32(-1), member_id="", group_instance_id=None,
        topics=(TxnOffsetCommitRequestTopic(name=TopicName("out"), partitions=(
            TxnOffsetCommitRequestPartition(partition_index=i32(0), committed_offset=i64(7), committed_metadata="m"),
            TxnOffsetCommitRequestPartition(partition_index=i32(9), committed_offset=i64(7), committed_metadata=""),
        )),),
    )
    not_added = await client.call(28, version, commit)
    assert not_added.topics[0].partitions[0].error_code == ErrorCode.invalid_txn_state
    added = await client.call(25, min(version, 3), AddOffsetsToTxnRequest(
        transactional_id=TransactionalId("t"), producer_id=ProducerId(pid), producer_epoch=i16(epoch),
        group_id=GroupId(group),
    ))
    assert added.error_code == ErrorCode.none
    answer = await client.call(28, version, commit)
    assert [p.error_code for p in answer.topics[0].partitions] == [ErrorCode.none, ErrorCode.unknown_topic_or_partition]
    fetch = OffsetFetchRequest(group_id=GroupId(group), require_stable=True, topics=(
        OffsetFetchRequestTopic(name=TopicName("out"), partition_indexes=(i32(0),)),
    ))
    pending = await client.call(9, 7, fetch)
    assert pending.topics[0].partitions[0].error_code == ErrorCode.unstable_offset_commit
    assert await engine.committed(group, "out", 0) is None
    assert (await client.call(26, 3, _end("t", pid, epoch, True))).error_code == ErrorCode.none
    stable = await client.call(9, 7, fetch)
    part = stable.topics[0].partitions[0]
    assert (part.error_code, part.committed_offset, part.metadata) == (ErrorCode.none, 7, "m")


@pytest.mark.parametrize("version", versions(25))
async def test_add_offsets_refuses_a_bad_group_and_a_fenced_producer(client: WireClient, version: int) -> None:
    pid, epoch = await _init(client, "t")

    def request(group: str, epoch: int) -> AddOffsetsToTxnRequest:
        return AddOffsetsToTxnRequest(transactional_id=TransactionalId("t"), producer_id=ProducerId(pid),
                                      producer_epoch=i16(epoch), group_id=GroupId(group))

    assert (await client.call(25, version, request("g", epoch))).error_code == ErrorCode.none
    assert (await client.call(25, version, request("", epoch))).error_code == ErrorCode.invalid_group_id
    fenced = (await client.call(25, version, request("g", epoch + 1))).error_code
    assert fenced == (ErrorCode.producer_fenced if version >= 2 else ErrorCode.invalid_producer_epoch)


async def test_read_committed_fetch_stops_at_an_open_transaction_and_lists_aborted_ones(client: WireClient) -> None:
    pid, epoch = await _init(client, "t")
    await client.call(24, 3, _add("t", pid, epoch, ("out", 0)))
    produced = await client.call(0, 9, _produce("out", 0, _txn_batch(pid, epoch, 0, b"a", b"b"), "t"))
    assert produced.responses[0].partition_responses[0].error_code == ErrorCode.none
    # Open: read_committed sees nothing and ListOffsets answers the LSO (0), read_uncommitted the HW (2).
    open_fetch = (await client.call(1, 12, _fetch("out", 0, 1))).responses[0].partitions[0]
    assert (open_fetch.high_watermark, open_fetch.last_stable_offset, bytes(open_fetch.records or b"")) == (2, 0, b"")
    assert (await client.call(2, 7, _latest("out", 0, 1))).topics[0].partitions[0].offset == 0
    assert (await client.call(2, 7, _latest("out", 0, 0))).topics[0].partitions[0].offset == 2
    assert (await client.call(26, 3, _end("t", pid, epoch, False))).error_code == ErrorCode.none
    # Aborted: the batch and the marker are below the LSO now, and the fetch names the aborted transaction.
    done = (await client.call(1, 12, _fetch("out", 0, 1))).responses[0].partitions[0]
    assert (done.high_watermark, done.last_stable_offset) == (3, 3)
    assert [(t.producer_id, t.first_offset) for t in done.aborted_transactions] == [(pid, 0)]
    assert (await client.call(2, 7, _latest("out", 0, 1))).topics[0].partitions[0].offset == 3
    uncommitted = (await client.call(1, 12, _fetch("out", 0, 0))).responses[0].partitions[0]
    assert uncommitted.aborted_transactions == ()


@pytest.mark.parametrize("version", versions(0))
async def test_a_transactional_batch_is_stored_only_in_a_transaction_that_added_its_partition(
    client: WireClient, engine: Engine, version: int
) -> None:
    # Kafka's produce-time verification (KIP-890): a batch the coordinator does not vouch for would
    # open a transaction no one will end, and hold read_committed consumers at the LSO for good.
    def code(answer: object) -> ErrorCode:
        return answer.responses[0].partition_responses[0].error_code  # type: ignore[attr-defined, no-any-return]

    pid, epoch = await _init(client, "t")
    batch = _txn_batch(pid, epoch, 0, b"a")
    log = engine.log("out", 0)
    assert code(await client.call(0, version, _produce("out", 0, batch, "t"))) == ErrorCode.invalid_txn_state
    assert code(await client.call(0, version, _produce("out", 0, batch))) == (
        ErrorCode.transactional_id_authorization_failed)
    assert code(await client.call(0, version, _produce("out", 0, batch, "other"))) == (
        ErrorCode.invalid_producer_id_mapping)
    assert log.log_end_offset == 0 and log.last_stable_offset == 0
    await client.call(24, 3, _add("t", pid, epoch, ("out", 0)))
    assert code(await client.call(0, version, _produce("out", 1, batch, "t"))) == ErrorCode.invalid_txn_state
    assert code(await client.call(0, version, _produce("out", 0, _txn_batch(pid, epoch + 1, 0, b"a"), "t"))) == (
        ErrorCode.invalid_producer_epoch)
    assert code(await client.call(0, version, _produce("out", 0, batch, "t"))) == ErrorCode.none
    assert (await client.call(26, 3, _end("t", pid, epoch, True))).error_code == ErrorCode.none
    await engine.transactions.wait_until(lambda: engine.transactions.is_idle("t"))
    end = log.log_end_offset  # the batch and the commit marker
    late = _txn_batch(pid, epoch, 1, b"late")  # the ended transaction's straggler
    assert code(await client.call(0, version, _produce("out", 0, late, "t"))) == ErrorCode.invalid_txn_state
    assert (log.log_end_offset, log.last_stable_offset) == (end, end)
