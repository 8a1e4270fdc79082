"""Consumer groups with the real Kafka clients: commits that survive a restart, rebalances, expiry, mixed groups.

Records are appended through the engine (the clients' produce path is tested
elsewhere); members subscribe with short session and heartbeat intervals.
Ordering comes from what the members report (their assignments) and from
the coordinator's state; every call and wait is bounded.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from group_members import LibraryMember, Member, Seen, close_all, member, poll_all
from kafka_clients import CLIENTS, TIMEOUT_S, need
from kio.schema.errors import ErrorCode
from kio.schema.join_group.v5.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.sync_group.v3.request import SyncGroupRequest
from kio.schema.types import GroupId
from kio.static.primitive import i32, i32Timedelta
from wire import WireClient

from seglog.engine import Engine, Record
from seglog.engine.assignors import decode_assignment, encode_subscription
from seglog.server import KafkaServer

FAST_SERVER = {"group_min_session_timeout_ms": 100}


async def fill(engine: Engine, topic: str, partitions: int, per_partition: int) -> set[tuple[int, int]]:
    await engine.create_topic(topic, partitions=partitions, exist_ok=True)
    sent = set()
    for p in range(partitions):
        res = await engine.log(topic, p).append([Record(b"%d" % i) for i in range(per_partition)])
        sent |= {(p, o) for o in range(res.first_offset, res.last_offset + 1)}
    return sent


def everything(seen: dict[str, Seen]) -> list[tuple[int, int]]:
    return sorted(r for records in seen.values() for r in records)


def total_at_least(seen: dict[str, Seen], n: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return sum(len(v) for v in seen.values()) >= n
    return check


@pytest.mark.parametrize("client", CLIENTS)
async def test_each_client_resumes_from_its_committed_offsets_after_a_server_restart(
    client: str, tmp_path: Path
) -> None:
    need(client)
    data = tmp_path / "data"
    seen: dict[str, Seen] = {}
    async with Engine.open(data) as engine:
        sent = await fill(engine, "orders", 2, 10)
        async with KafkaServer(engine, **FAST_SERVER) as server:
            first = member(client, server.bootstrap_servers, "billing", "orders")
            await first.start()
            try:
                await poll_all([first], seen, total_at_least(seen, 1))  # (commits what it read)
            finally:
                await close_all([first])
        committed = engine.group_offsets("billing")
    read = everything(seen)
    assert committed == {("orders", p): max(o for q, o in read if q == p) + 1 for p in {q for q, _ in read}}
    async with Engine.open(data) as engine:
        assert engine.group_offsets("billing") == committed  # the commits survived the restart
        sent |= await fill(engine, "orders", 2, 5)
        async with KafkaServer(engine, **FAST_SERVER) as server:
            second = member(client, server.bootstrap_servers, "billing", "orders")
            again: dict[str, Seen] = {}
            await second.start()
            try:
                await poll_all([second], again, total_at_least(again, len(sent) - len(read)))
            finally:
                await close_all([second])
    resumed = everything(again)
    assert sorted(read + resumed) == sorted(sent)  # from each committed offset on: nothing lost or read twice


@pytest.mark.parametrize("client", CLIENTS)
async def test_two_members_split_four_partitions_and_one_takes_all_when_the_other_leaves(
    client: str, engine: Engine, make_server: Callable[..., Awaitable[KafkaServer]]
) -> None:
    need(client)
    server = await make_server(**FAST_SERVER)
    address = server.bootstrap_servers
    sent = await fill(engine, "orders", 4, 5)
    seen: dict[str, Seen] = {}
    a = member(client, address, "split", "orders")
    b = member(client, address, "split", "orders")
    a.name, b.name = "a", "b"
    try:
        await a.start()
        await poll_all([a], seen, total_at_least(seen, len(sent)))  # a alone reads (and commits) what is there

        async def split() -> bool:
            return len(await a.assignment()) == 2 and len(await b.assignment()) == 2

        await b.start()
        await poll_all([a, b], seen, split)
        assert not (await a.assignment()) & (await b.assignment())
        b_partitions = await b.assignment()
        sent |= await fill(engine, "orders", 4, 5)
        await poll_all([a, b], seen, total_at_least(seen, len(sent)))
        assert {p for p, _ in seen.get("b", [])} == b_partitions  # b read only its own partitions
        await b.close()

        async def a_has_all() -> bool:
            return len(await a.assignment()) == 4

        await poll_all([a], seen, a_has_all)
        sent |= await fill(engine, "orders", 4, 5)
        await poll_all([a], seen, total_at_least(seen, len(sent)))
    finally:
        await close_all([a, b])
    assert everything(seen) == sorted(sent)  # every record once, across the split and the leave


def _join(member_id: str, session_ms: int) -> JoinGroupRequest:
    timeout = i32Timedelta.parse(datetime.timedelta(milliseconds=session_ms))
    return JoinGroupRequest(
        group_id=GroupId("expiry"), session_timeout=timeout, rebalance_timeout=timeout, member_id=member_id,
        group_instance_id=None, protocol_type="consumer",
        protocols=(
            JoinGroupRequestProtocol(name="range", metadata=encode_subscription(["orders"])),
            JoinGroupRequestProtocol(name="roundrobin", metadata=encode_subscription(["orders"])),
        ),
    )


@pytest.mark.parametrize("client", CLIENTS)
async def test_a_member_that_stops_heartbeating_is_expired_and_its_partitions_move(
    client: str, engine: Engine, make_server: Callable[..., Awaitable[KafkaServer]]
) -> None:
    need(client)
    server = await make_server(**FAST_SERVER)
    await fill(engine, "orders", 4, 1)
    seen: dict[str, Seen] = {}
    c = member(client, server.bootstrap_servers, "expiry", "orders")
    silent = await WireClient.connect(server.bootstrap_servers)
    try:
        await c.start()

        async def has(n: int) -> bool:
            return len(await c.assignment()) == n

        await poll_all([c], seen, lambda: has(4))
        # A raw member joins (its JoinGroup parks until c rejoins), takes its share, then never heartbeats.
        first = await silent.call(11, 5, _join("", 1_000))
        assert first.error_code == ErrorCode.member_id_required
        joining = asyncio.create_task(silent.call(11, 5, _join(first.member_id, 1_000), wait_s=TIMEOUT_S))

        async def joined() -> bool:
            return joining.done()

        await poll_all([c], seen, joined)
        answer = joining.result()
        assert answer.error_code == ErrorCode.none and answer.leader != answer.member_id  # c leads
        syncing = asyncio.create_task(silent.call(14, 3, SyncGroupRequest(
            group_id=GroupId("expiry"), generation_id=i32(answer.generation_id), member_id=answer.member_id,
            group_instance_id=None, assignments=()), wait_s=TIMEOUT_S))

        async def synced() -> bool:
            return syncing.done() and await has(2)

        await poll_all([c], seen, synced)
        share = decode_assignment(syncing.result().assignment).topic_partitions()
        assert len(share) == 2 and not {p for _, p in share} & await c.assignment()
        # One second without heartbeats: the silent member is removed and c gets its partitions back.
        await poll_all([c], seen, lambda: has(4))
        assert engine.coordinator.describe("expiry").members[0].client_id != "seglog-tests"  # type: ignore[union-attr]
    finally:
        await silent.close()
        await close_all([c])


async def test_mixed_clients_and_a_library_consumer_share_one_group(
    engine: Engine, make_server: Callable[..., Awaitable[KafkaServer]]
) -> None:
    for client in CLIENTS:
        need(client)
    server = await make_server(**FAST_SERVER)
    address = server.bootstrap_servers
    await engine.create_topic("mixed", partitions=8)
    members: list[Member] = [member(c, address, "mixed", "mixed") for c in CLIENTS]
    members.append(LibraryMember(engine, "mixed", "mixed"))
    seen: dict[str, Seen] = {}
    try:
        for m in members:
            await m.start()

        async def shared() -> bool:
            shares = [await m.assignment() for m in members]
            return all(shares) and sum(map(len, shares)) == 8 and set().union(*shares) == set(range(8))

        await poll_all(members, seen, shared)
        owners = {p: m.name for m in members for p in await m.assignment()}
        assert len(owners) == 8 and set(owners.values()) == {m.name for m in members}
        sent = await fill(engine, "mixed", 8, 5)
        await poll_all(members, seen, total_at_least(seen, len(sent)))
        for name, records in seen.items():
            assert {owners[p] for p, _ in records} == {name}  # each read only its own partitions
        desc = engine.coordinator.describe("mixed")
        assert desc is not None and desc.protocol == "roundrobin"  # the one protocol aiokafka lists too
        assert {m.client_host for m in desc.members} == {"/127.0.0.1", f"in-process (pid {os.getpid()})"}
    finally:
        await close_all(members)
    assert everything(seen) == sorted(sent)


def _seglog(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """``seglog ARGS`` in a process of its own (it reads the directory while this test's engine holds it)."""
    return subprocess.run([sys.executable, "-m", "seglog.tools.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=TIMEOUT_S * 2, check=False)


async def test_seglog_groups_shows_a_group_of_kafka_clients_and_refuses_to_reset_it(
    tmp_path: Path
) -> None:
    need("aiokafka")
    data = tmp_path / "data"
    async with Engine.open(data) as engine:
        await fill(engine, "orders", 2, 10)
        async with KafkaServer(engine, **FAST_SERVER) as server:
            consumer = member("aiokafka", server.bootstrap_servers, "billing", "orders")
            seen: dict[str, Seen] = {}
            try:
                await consumer.start()
                await poll_all([consumer], seen, total_at_least(seen, 20))  # read all, committed
                await engine.log("orders", 0).append([Record(b"new")] * 3)  # lag 3 on partition 0
                listed = await asyncio.to_thread(_seglog, "groups", "list", "--state", "--json", "--log-dir", data)
                described = await asyncio.to_thread(_seglog, "groups", "describe", "billing", "--json",
                                                    "--log-dir", data)
                members = await asyncio.to_thread(_seglog, "groups", "describe", "billing", "--members", "--json",
                                                  "--log-dir", data)
                reset = await asyncio.to_thread(_seglog, "groups", "reset", "billing", "--topic", "orders",
                                                "--to-earliest", "--log-dir", data)
            finally:
                await close_all([consumer])
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == [
        {"group": "billing", "state": "Stable", "members": 1, "protocol": "roundrobin", "lag": 3}
    ]
    assert described.returncode == 0, described.stderr
    rows = json.loads(described.stdout)
    assert [(r["partition"], r["committed"], r["lag"], r["host"]) for r in rows] == [
        (0, 10, 3, "/127.0.0.1"), (1, 10, 0, "/127.0.0.1")]
    assert rows[0]["client_id"].startswith("aiokafka") and rows[0]["member_id"]
    assert "Stable" in described.stderr
    (only,) = json.loads(members.stdout)
    assert (only["member_id"], only["host"], only["partitions"]) == (rows[0]["member_id"], "/127.0.0.1",
                                                                      [["orders", [0, 1]]])
    assert reset.returncode == 1 and "active member" in reset.stderr
    # The server stopped: the group has no members, and a reset goes through.
    reset = await asyncio.to_thread(_seglog, "groups", "reset", "billing", "--topic", "orders", "--to-earliest",
                                    "--execute", "--log-dir", data)
    assert reset.returncode == 0, reset.stderr
    listed = await asyncio.to_thread(_seglog, "groups", "list", "--state", "--json", "--log-dir", data)
    assert json.loads(listed.stdout) == [
        {"group": "billing", "state": "Empty", "members": 0, "protocol": None, "lag": 23}]


@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka"])
async def test_admin_clients_list_and_describe_groups_and_their_offsets(
    client: str, engine: Engine, make_server: Callable[..., Awaitable[KafkaServer]]
) -> None:
    need(client)
    server = await make_server(**FAST_SERVER)
    address = server.bootstrap_servers
    await engine.create_topic("t", partitions=2)
    await engine.commit_offset("old", "t", 0, 1)
    async with engine.consumer("live", ["t"]) as consumer:
        assert len(consumer.assignment()) == 2

        def with_kafka_python() -> tuple[object, object, object]:
            from kafka.admin import KafkaAdminClient

            admin = KafkaAdminClient(bootstrap_servers=address, request_timeout_ms=int(TIMEOUT_S * 1000))
            try:
                listed = {g["group_id"]: g["group_state"] for g in admin.list_groups()}
                live = admin.describe_groups(["live"])["live"]
                described = (live["group_state"], [m["member_assignment"]["assigned_partitions"]
                                                   for m in live["members"]])
                found = admin.list_group_offsets("old")["old"]
                offsets = {(tp.topic, tp.partition): o.offset for tp, o in found.items()}
            finally:
                admin.close()
            return listed, described, offsets

        def with_confluent() -> tuple[object, object, object]:
            from confluent_kafka import ConsumerGroupTopicPartitions
            from confluent_kafka.admin import AdminClient

            admin = AdminClient({"bootstrap.servers": address})
            result = admin.list_consumer_groups(request_timeout=TIMEOUT_S).result(TIMEOUT_S)
            listed = {g.group_id: g.state.name.title() for g in result.valid}
            live = admin.describe_consumer_groups(["live"], request_timeout=TIMEOUT_S)["live"].result(TIMEOUT_S)
            described = (live.state.name.title(), [[{"topic": "t", "partitions": sorted(
                tp.partition for tp in m.assignment.topic_partitions)}] for m in live.members])
            found = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("old")])["old"].result(TIMEOUT_S)
            offsets = {(tp.topic, tp.partition): tp.offset for tp in found.topic_partitions}
            return listed, described, offsets

        work = with_kafka_python if client == "kafka-python" else with_confluent
        listed, described, offsets = await asyncio.wait_for(asyncio.to_thread(work), TIMEOUT_S * 2)
    assert listed == {"live": "Stable", "old": "Empty"}
    assert described == ("Stable", [[{"topic": "t", "partitions": [0, 1]}]])
    assert offsets == {("t", 0): 1}
