"""Every version inside each advertised range works: each API answered at each version over a raw socket."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.api_versions.v4.request import ApiVersionsRequest
from kio.schema.create_topics.v7.request import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.find_coordinator.v2.request import FindCoordinatorRequest
from kio.schema.heartbeat.v3.request import HeartbeatRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.join_group.v5.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.leave_group.v0.request import LeaveGroupRequest as LeaveGroupRequestV0
from kio.schema.leave_group.v3.request import LeaveGroupRequest, MemberIdentity
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest, OffsetFetchRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.sync_group.v3.request import SyncGroupRequest, SyncGroupRequestAssignment
from kio.schema.types import BrokerId, GroupId, ProducerId, TopicName
from kio.static.primitive import Records, i8, i16, i32, i32Timedelta, i64
from wire import WireClient, fetched_records, versions

from seglog.engine import Engine, Record
from seglog.server import KafkaServer
from seglog.server.apis import APIS
from seglog.server.records import encode_batch

MS = i32Timedelta.parse(datetime.timedelta(milliseconds=1000))
ZERO = i32Timedelta.parse(datetime.timedelta(0))


def test_the_advertised_ranges_are_the_ones_documented() -> None:
    ranges = {api.name: (api.min_version, api.max_version) for api in APIS.values()}
    assert ranges == {
        "produce": (3, 9), "fetch": (4, 12), "list_offsets": (1, 7), "metadata": (0, 12), "api_versions": (0, 4),
        "create_topics": (2, 7), "delete_topics": (1, 6), "init_producer_id": (0, 4), "describe_configs": (1, 4),
        "find_coordinator": (0, 2), "join_group": (0, 5), "sync_group": (0, 3), "heartbeat": (0, 3),
        "leave_group": (0, 3), "offset_commit": (2, 8), "offset_fetch": (1, 7), "list_groups": (0, 5),
        "describe_groups": (0, 5), "add_partitions_to_txn": (0, 3), "add_offsets_to_txn": (0, 3), "end_txn": (0, 3),
        "txn_offset_commit": (0, 3), "describe_transactions": (0, 0), "list_transactions": (0, 2),
    }


@pytest.mark.parametrize("version", versions(18))
async def test_api_versions_lists_every_api_at_every_version(server: KafkaServer, version: int) -> None:
    client = await WireClient.connect(server.bootstrap_servers)
    try:
        request = ApiVersionsRequest(client_software_name="t", client_software_version="1")
        answer = await client.call(18, version, request)
    finally:
        await client.close()
    assert answer.error_code == ErrorCode.none
    assert {(k.api_key, k.min_version, k.max_version) for k in answer.api_keys} == {
        (a.key, a.min_version, a.max_version) for a in APIS.values()
    }


@pytest.mark.parametrize("version", versions(3))
async def test_metadata_names_this_node_as_leader_and_creates_topics(server: KafkaServer, version: int) -> None:
    client = await WireClient.connect(server.bootstrap_servers)
    request = MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name=TopicName(f"meta{version}")),),
        allow_auto_topic_creation=True, include_topic_authorized_operations=False,
    )
    try:
        answer = await client.call(3, version, request)
        everything = await client.call(3, version, MetadataRequest(
            topics=() if version == 0 else None, include_topic_authorized_operations=False
        ))
    finally:
        await client.close()
    host, port = server.bootstrap_servers.rsplit(":", 1)
    assert [(b.node_id, b.host, b.port) for b in answer.brokers] == [(0, host, int(port))]
    (topic,) = answer.topics
    assert (topic.error_code, topic.name) == (ErrorCode.none, f"meta{version}")
    assert [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes) for p in topic.partitions] == [
        (0, 0, (0,), (0,))
    ]
    assert f"meta{version}" in [t.name for t in everything.topics]


async def test_metadata_without_auto_creation_answers_unknown_topic(engine: Engine) -> None:
    async with KafkaServer(engine, "127.0.0.1:0", auto_create=False) as server:
        client = await WireClient.connect(server.bootstrap_servers)
        try:
            answer = await client.call(3, 12, MetadataRequest(
                topics=(MetadataRequestTopic(topic_id=None, name=TopicName("nope")),),
                include_topic_authorized_operations=False,
            ))
            refused = await client.call(3, 12, MetadataRequest(
                topics=(MetadataRequestTopic(topic_id=None, name=TopicName("bad/name")),),
                include_topic_authorized_operations=False,
            ))
        finally:
            await client.close()
    assert answer.topics[0].error_code == ErrorCode.unknown_topic_or_partition
    assert refused.topics[0].error_code == ErrorCode.invalid_topic_exception
    assert engine.topics() == []


def _produce(topic: str, records: list[Record], acks: int = 1) -> ProduceRequest:
    batch = encode_batch([r._replace(offset=i) for i, r in enumerate(records)])
    return ProduceRequest(
        acks=i16(acks), timeout=MS,
        topic_data=(TopicProduceData(name=TopicName(topic), partition_data=(
            PartitionProduceData(index=i32(0), records=Records(batch)),
        )),),
    )


def _fetch(topic: str, offset: int, *, max_wait_ms: int = 0, min_bytes: int = 1, max_bytes: int = 1 << 20,
           partition_max_bytes: int = 1 << 20) -> FetchRequest:
    return FetchRequest(
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=max_wait_ms)), min_bytes=i32(min_bytes),
        max_bytes=i32(max_bytes), isolation_level=i8(0), session_id=i32(0), session_epoch=i32(-1),
        topics=(FetchTopic(topic=TopicName(topic), partitions=(
            FetchPartition(partition=i32(0), fetch_offset=i64(offset), partition_max_bytes=i32(partition_max_bytes)),
        )),),
        forgotten_topics_data=(), rack_id="",
    )


async def test_produce_and_fetch_at_every_version_round_trip(server: KafkaServer, engine: Engine) -> None:
    client = await WireClient.connect(server.bootstrap_servers)
    expected: list[Record] = []
    try:
        for version in versions(0):
            records = [Record(f"v{version}-{i}".encode(), key=b"k" if i else None, timestamp=1000 + i,
                              headers=(("h", b"x"),) if i == 1 else ()) for i in range(3)]
            answer = await client.call(0, version, _produce("rt", records))
            (part,) = answer.responses[0].partition_responses
            assert (part.error_code, part.base_offset) == (ErrorCode.none, len(expected))
            expected += records
        for version in versions(1):
            offset = version % len(expected)
            answer = await client.call(1, version, _fetch("rt", offset))
            assert getattr(answer, "error_code", ErrorCode.none) == ErrorCode.none  # top-level from v7 on
            (part,) = answer.responses[0].partitions
            assert (part.error_code, part.high_watermark, part.last_stable_offset) == (
                ErrorCode.none, len(expected), len(expected)
            )
            got = fetched_records(part.records, offset)
            assert [(r.value, r.key, r.timestamp, r.headers) for r in got] == [
                (r.value, r.key, r.timestamp, r.headers) for r in expected[offset:]
            ]
    finally:
        await client.close()
    native = await engine.log("rt").read(0)
    assert [r.value for r in native.records] == [r.value for r in expected]


async def test_fetch_out_of_range_and_unknown_partitions_answer_errors(server: KafkaServer, engine: Engine) -> None:
    await engine.create_topic("t")
    await engine.log("t").append([Record(b"a"), Record(b"b")])
    client = await WireClient.connect(server.bootstrap_servers)
    try:
        past = await client.call(1, 12, _fetch("t", 3, max_wait_ms=5000))  # an error answers at once
        at_end = await client.call(1, 12, _fetch("t", 2))
        unknown = await client.call(1, 4, _fetch("missing", 0))
    finally:
        await client.close()
    assert past.responses[0].partitions[0].error_code == ErrorCode.offset_out_of_range
    assert (at_end.responses[0].partitions[0].error_code, at_end.responses[0].partitions[0].records) == (
        ErrorCode.none, b""
    )
    assert unknown.responses[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition


async def test_fetch_returns_one_batch_even_past_max_bytes(server: KafkaServer, engine: Engine) -> None:
    await engine.create_topic("big")
    await engine.log("big").append([Record(b"x" * 5000)])
    await engine.log("big").append([Record(b"y" * 5000)])
    client = await WireClient.connect(server.bootstrap_servers)
    try:
        answer = await client.call(1, 12, _fetch("big", 0, max_bytes=100, partition_max_bytes=100))
    finally:
        await client.close()
    got = fetched_records(answer.responses[0].partitions[0].records)
    assert [r.value for r in got] == [b"x" * 5000]


@pytest.mark.parametrize("version", versions(2))
async def test_list_offsets_at_every_version(server: KafkaServer, engine: Engine, version: int) -> None:
    await engine.create_topic("lo")
    await engine.log("lo").append(
        [Record(b"a", timestamp=100), Record(b"b", timestamp=300), Record(b"c", timestamp=200)]
    )
    client = await WireClient.connect(server.bootstrap_servers)

    async def lookup(timestamp: int) -> tuple[int, int, int]:
        request = ListOffsetsRequest(replica_id=BrokerId(-1), isolation_level=i8(1), topics=(
            ListOffsetsTopic(name=TopicName("lo"), partitions=(
                ListOffsetsPartition(partition_index=i32(0), timestamp=i64(timestamp)),
            )),
        ))
        answer = await client.call(2, version, request)
        part = answer.topics[0].partitions[0]
        return part.error_code, part.offset, part.timestamp

    try:
        assert await lookup(-2) == (ErrorCode.none, 0, -1)
        assert await lookup(-1) == (ErrorCode.none, 3, -1)
        assert await lookup(150) == (ErrorCode.none, 1, 300)  # out of order: the earliest offset with ts >= 150
        assert await lookup(250) == (ErrorCode.none, 1, 300)
        assert await lookup(301) == (ErrorCode.none, -1, -1)  # no record that late: -1 without an error
        if version >= 7:
            assert await lookup(-3) == (ErrorCode.none, 1, 300)
        else:
            assert (await lookup(-3))[0] == ErrorCode.unsupported_version
    finally:
        await client.close()


@pytest.mark.parametrize("version", versions(19))
async def test_create_topics_at_every_version(server: KafkaServer, engine: Engine, version: int) -> None:
    client = await WireClient.connect(server.bootstrap_servers)

    def create(name: str, partitions: int = 2, replication: int = 1, configs: tuple[tuple[str, str], ...] = (),
               validate_only: bool = False) -> CreateTopicsRequest:
        return CreateTopicsRequest(topics=(CreatableTopic(
            name=TopicName(name), num_partitions=i32(partitions), replication_factor=i16(replication), assignments=(),
            configs=tuple(CreatableTopicConfig(name=k, value=v) for k, v in configs),
        ),), timeout=MS, validate_only=validate_only)

    try:
        made = (await client.call(19, version, create("made", configs=(("retention.ms", "1000"),)))).topics[0]
        again = (await client.call(19, version, create("made"))).topics[0]
        replicated = (await client.call(19, version, create("r3", replication=3))).topics[0]
        bad_config = (await client.call(19, version, create("bc", configs=(("no.such.key", "1"),)))).topics[0]
        checked = (await client.call(19, version, create("dry", validate_only=True))).topics[0]
    finally:
        await client.close()
    assert made.error_code == ErrorCode.none
    assert engine.partitions_for("made") == 2 and engine.topic_config("made").retention_ms == 1000
    if version >= 5:
        assert made.num_partitions == 2 and ("retention.ms", "1000", 1) in {
            (c.name, c.value, c.config_source) for c in made.configs
        }
    assert again.error_code == ErrorCode.topic_already_exists
    assert replicated.error_code == ErrorCode.invalid_replication_factor
    assert bad_config.error_code == ErrorCode.invalid_config
    assert checked.error_code == ErrorCode.none and "dry" not in engine.topics()


@pytest.mark.parametrize("version", versions(20))
async def test_delete_topics_at_every_version(server: KafkaServer, engine: Engine, version: int) -> None:
    await engine.create_topic("gone")
    if version >= 6:
        request = DeleteTopicsRequest(topics=(
            DeleteTopicState(name=TopicName("gone"), topic_id=None),
            DeleteTopicState(name=TopicName("never"), topic_id=None),
        ), timeout=MS)
    else:
        request = load_request_schema(20, version)(topic_names=(TopicName("gone"), TopicName("never")), timeout=MS)
    client = await WireClient.connect(server.bootstrap_servers)
    try:
        answer = await client.call(20, version, request)
    finally:
        await client.close()
    assert [(r.name, r.error_code) for r in answer.responses] == [
        ("gone", ErrorCode.none), ("never", ErrorCode.unknown_topic_or_partition)
    ]
    assert "gone" not in engine.topics()


@pytest.mark.parametrize("version", versions(32))
async def test_describe_configs_at_every_version(server: KafkaServer, engine: Engine, version: int) -> None:
    await engine.create_topic("dc", config={"retention.ms": 5000})
    client = await WireClient.connect(server.bootstrap_servers)
    try:
        answer = await client.call(32, version, DescribeConfigsRequest(resources=(
            DescribeConfigsResource(resource_type=i8(2), resource_name="dc", configuration_keys=None),
            DescribeConfigsResource(resource_type=i8(2), resource_name="missing", configuration_keys=None),
            DescribeConfigsResource(resource_type=i8(4), resource_name="0", configuration_keys=("segment.bytes",)),
        ), include_synonyms=True))
    finally:
        await client.close()
    topic, missing, broker = answer.results
    configs = {c.name: (c.value, c.config_source) for c in topic.configs}
    assert topic.error_code == ErrorCode.none and configs["retention.ms"][0] == "5000"
    assert configs["segment.bytes"][0] == str(engine.topic_config("dc").segment_bytes)
    if version >= 1:
        assert configs["retention.ms"][1] == 1 and configs["segment.bytes"][1] == 5
    assert missing.error_code == ErrorCode.unknown_topic_or_partition
    assert [c.name for c in broker.configs] == ["segment.bytes"]


@pytest.mark.parametrize("version", versions(22))
async def test_init_producer_id_hands_out_increasing_ids(server: KafkaServer, version: int) -> None:
    client = await WireClient.connect(server.bootstrap_servers)
    request = InitProducerIdRequest(transactional_id=None, transaction_timeout=MS)
    try:
        first = await client.call(22, version, request)
        second = await client.call(22, version, request)
        txn = await client.call(22, version, InitProducerIdRequest(transactional_id="tx", transaction_timeout=MS))
        bumped = await client.call(22, version, InitProducerIdRequest(
            transactional_id=None, transaction_timeout=MS, producer_id=ProducerId(first.producer_id),
            producer_epoch=i16(0),
        ))
    finally:
        await client.close()
    assert first.error_code == second.error_code == ErrorCode.none
    assert second.producer_id > first.producer_id >= 0 and first.producer_epoch == 0
    assert txn.error_code == ErrorCode.none and txn.producer_epoch == 0  # a transactional id: its coordinator's
    if version >= 3:  # KIP-360: the same id, the next epoch
        assert (bumped.producer_id, bumped.producer_epoch) == (first.producer_id, 1)


# -- consumer groups ------------------------------------------------------------------------------

SESSION = i32Timedelta.parse(datetime.timedelta(milliseconds=10_000))


def _join(group: str, member_id: str = "", *, instance: str | None = None,
          metadata: bytes = b"\x00\x00\x00\x00\x00\x01\x00\x02gt\xff\xff\xff\xff") -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=GroupId(group), session_timeout=SESSION, rebalance_timeout=SESSION, member_id=member_id,
        group_instance_id=instance, protocol_type="consumer",
        protocols=(JoinGroupRequestProtocol(name="range", metadata=metadata),),
    )


async def _joined(client: WireClient, version: int, group: str, instance: str | None = None) -> Any:
    """JoinGroup at ``version`` until admitted (version 4 on: MEMBER_ID_REQUIRED first, then with the id)."""
    answer = await client.call(11, version, _join(group, instance=instance))
    if version >= 4 and instance is None:
        assert answer.error_code == ErrorCode.member_id_required and answer.member_id
        answer = await client.call(11, version, _join(group, answer.member_id, instance=instance))
    assert answer.error_code == ErrorCode.none, answer
    return answer


@pytest.mark.parametrize("version", versions(10))
async def test_find_coordinator_names_this_node_at_every_version(server: KafkaServer, version: int) -> None:
    client = await WireClient.connect(server.bootstrap_servers)
    try:
        answer = await client.call(10, version, FindCoordinatorRequest(key="billing", key_type=i8(0)))
    finally:
        await client.close()
    host, port = server.bootstrap_servers.rsplit(":", 1)
    assert (answer.error_code, answer.node_id, answer.host, answer.port) == (ErrorCode.none, 0, host, int(port))


@pytest.mark.parametrize("version", versions(11))
async def test_join_group_at_every_version(server: KafkaServer, engine: Engine, version: int) -> None:
    client = await WireClient.connect(server.bootstrap_servers)
    try:
        answer = await _joined(client, version, f"join{version}")
        refused = await client.call(11, version, _join(""))
        stranger = await client.call(11, version, _join(f"join{version}", "not-a-member"))
    finally:
        await client.close()
    assert (answer.generation_id, answer.protocol_name, answer.leader) == (1, "range", answer.member_id)
    assert [m.member_id for m in answer.members] == [answer.member_id]
    assert refused.error_code == ErrorCode.invalid_group_id
    assert stranger.error_code == ErrorCode.unknown_member_id
    assert engine.coordinator.describe(f"join{version}").state.value == "CompletingRebalance"  # type: ignore[union-attr]


async def test_join_group_v5_with_a_group_instance_id_needs_no_member_id_round_trip(server: KafkaServer) -> None:
    client = await WireClient.connect(server.bootstrap_servers)
    try:
        answer = await client.call(11, 5, _join("static", instance="instance-1"))
    finally:
        await client.close()
    assert answer.error_code == ErrorCode.none and answer.member_id.startswith("instance-1-")


async def test_join_group_refuses_a_session_timeout_outside_the_bounds(server: KafkaServer) -> None:
    client = await WireClient.connect(server.bootstrap_servers)
    request = _join("bounds")
    try:
        short = await client.call(11, 5, dataclasses.replace(
            request, session_timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=10))))
    finally:
        await client.close()
    assert short.error_code == ErrorCode.invalid_session_timeout


@pytest.mark.parametrize("version", range(4))  # SyncGroup, Heartbeat and LeaveGroup each serve 0-3
async def test_sync_heartbeat_and_leave_at_every_version(server: KafkaServer, engine: Engine, version: int) -> None:
    assert versions(14) == versions(12) == versions(13) == list(range(4))
    group = f"shl{version}"
    client = await WireClient.connect(server.bootstrap_servers)
    try:
        joined = await _joined(client, 5, group)
        member, generation = joined.member_id, joined.generation_id
        synced = await client.call(14, version, SyncGroupRequest(
            group_id=GroupId(group), generation_id=i32(generation), member_id=member, group_instance_id=None,
            assignments=(SyncGroupRequestAssignment(member_id=member, assignment=b"share"),),
        ))
        beat = await client.call(12, version, HeartbeatRequest(
            group_id=GroupId(group), generation_id=i32(generation), member_id=member, group_instance_id=None))
        stale = await client.call(12, version, HeartbeatRequest(
            group_id=GroupId(group), generation_id=i32(generation + 7), member_id=member, group_instance_id=None))
        if version >= 3:
            left = await client.call(13, version, LeaveGroupRequest(group_id=GroupId(group), members=(
                MemberIdentity(member_id=member, group_instance_id=None),
                MemberIdentity(member_id="nobody", group_instance_id=None),
            )))
        else:
            left = await client.call(13, version, LeaveGroupRequestV0(group_id=GroupId(group), member_id=member))
    finally:
        await client.close()
    assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"share")
    assert beat.error_code == ErrorCode.none
    assert stale.error_code == ErrorCode.illegal_generation
    assert left.error_code == ErrorCode.none
    if version >= 3:
        assert [(m.member_id, m.error_code) for m in left.members] == [
            (member, ErrorCode.none), ("nobody", ErrorCode.unknown_member_id)]
    assert engine.coordinator.describe(group).state.value == "Empty"  # type: ignore[union-attr]


def _commit(group: str, offsets: dict[tuple[str, int], int], *, generation: int = -1, member: str = "",
            metadata: str = "") -> OffsetCommitRequest:
    topics: dict[str, list[OffsetCommitRequestPartition]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(OffsetCommitRequestPartition(
            partition_index=i32(partition), committed_offset=i64(offset), committed_leader_epoch=i32(-1),
            committed_metadata=metadata))
    return OffsetCommitRequest(
        group_id=GroupId(group), generation_id_or_member_epoch=i32(generation), member_id=member,
        group_instance_id=None,
        topics=tuple(OffsetCommitRequestTopic(name=TopicName(t), partitions=tuple(ps)) for t, ps in topics.items()),
    )


@pytest.mark.parametrize("version", versions(8))
async def test_offset_commit_at_every_version(server: KafkaServer, engine: Engine, version: int) -> None:
    await engine.create_topic("oc", partitions=2, exist_ok=True)
    group = f"oc{version}"
    client = await WireClient.connect(server.bootstrap_servers)
    try:
        done = await client.call(8, version, _commit(group, {("oc", 0): 5, ("oc", 1): 6}, metadata="note"))
        bad = await client.call(8, version, _commit(group, {("oc", 2): 1, ("nope", 0): 1}))
        big = await client.call(8, version, _commit(group, {("oc", 0): 9}, metadata="x" * 5000))
        joined = await _joined(client, 5, group)
        outsider = await client.call(8, version, _commit(group, {("oc", 0): 7}))
        member = await client.call(8, version, _commit(group, {("oc", 0): 8}, generation=joined.generation_id,
                                                       member=joined.member_id))
    finally:
        await client.close()
    codes = {(t.name, p.partition_index): p.error_code for t in done.topics for p in t.partitions}
    assert codes == {("oc", 0): ErrorCode.none, ("oc", 1): ErrorCode.none}
    assert {p.error_code for t in bad.topics for p in t.partitions} == {ErrorCode.unknown_topic_or_partition}
    assert big.topics[0].partitions[0].error_code == ErrorCode.offset_metadata_too_large
    assert outsider.topics[0].partitions[0].error_code == ErrorCode.unknown_member_id  # the group has a member now
    assert member.topics[0].partitions[0].error_code == ErrorCode.rebalance_in_progress  # joined, not yet synced
    assert engine.group_offsets(group) == {("oc", 0): 5, ("oc", 1): 6}
    assert engine.coordinator.committed(group, "oc", 0) == (5, "note")


@pytest.mark.parametrize("version", versions(9))
async def test_offset_fetch_at_every_version(server: KafkaServer, engine: Engine, version: int) -> None:
    await engine.create_topic("of", partitions=3, exist_ok=True)
    group = f"of{version}"
    await engine.commit_offsets(group, {("of", 0): 4, ("of", 2): 6})
    client = await WireClient.connect(server.bootstrap_servers)
    try:
        some = await client.call(9, version, OffsetFetchRequest(group_id=GroupId(group), topics=(
            OffsetFetchRequestTopic(name=TopicName("of"), partition_indexes=(i32(0), i32(1))),), require_stable=True))
        everything = await client.call(9, version, OffsetFetchRequest(
            group_id=GroupId(group), topics=None, require_stable=False)) if version >= 2 else None
    finally:
        await client.close()
    assert [(p.partition_index, p.committed_offset, p.error_code) for p in some.topics[0].partitions] == [
        (0, 4, ErrorCode.none), (1, -1, ErrorCode.none)]
    if everything is not None:
        assert [(t.name, p.partition_index, p.committed_offset) for t in everything.topics for p in t.partitions] == [
            ("of", 0, 4), ("of", 2, 6)]


@pytest.mark.parametrize("version", range(6))  # ListGroups and DescribeGroups each serve 0-5
async def test_list_and_describe_groups_at_every_version(server: KafkaServer, engine: Engine, version: int) -> None:
    assert versions(16) == versions(15) == list(range(6))
    await engine.create_topic("ld", exist_ok=True)
    await engine.commit_offset("only-offsets", "ld", 0, 1)
    client = await WireClient.connect(server.bootstrap_servers)
    try:
        joined = await _joined(client, 5, "active")
        await client.call(14, 3, SyncGroupRequest(
            group_id=GroupId("active"), generation_id=i32(joined.generation_id), member_id=joined.member_id,
            group_instance_id=None,
            assignments=(SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b"a"),),
        ))
        listed = await client.call(16, version, ListGroupsRequest(states_filter=(), types_filter=()))
        described = await client.call(15, version, DescribeGroupsRequest(
            groups=(GroupId("active"), GroupId("only-offsets"), GroupId("unknown")),
            include_authorized_operations=False))
        filtered = await client.call(16, version, ListGroupsRequest(states_filter=("stable",), types_filter=()))
    finally:
        await client.close()
    assert {(g.group_id, g.protocol_type) for g in listed.groups} == {("active", "consumer"), ("only-offsets", "")}
    if version >= 4:
        assert [g.group_id for g in filtered.groups] == ["active"]
        assert {g.group_id: g.group_state for g in listed.groups} == {"active": "Stable", "only-offsets": "Empty"}
    active, offsets_only, unknown = described.groups
    assert (active.group_state, active.protocol_type, active.protocol_data) == ("Stable", "consumer", "range")
    (member,) = active.members
    assert (member.member_id, member.client_id, member.member_assignment) == (joined.member_id, "seglog-tests", b"a")
    assert member.client_host == "/127.0.0.1"
    assert (offsets_only.group_state, unknown.group_state) == ("Empty", "Dead")
