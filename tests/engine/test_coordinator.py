"""The group coordinator's rules (Kafka's GroupCoordinator), driven in-process without a network.

Every wait is on the coordinator's own state (``wait_until``) or on a parked
call's future, bounded by ``asyncio.timeout``; timers under test (session,
rebalance timeouts) are set short and are what the test waits for, but no shorter than
a second: a timer that is not the one under test must not fire while the loop thread is
descheduled on a busy machine (a shorter one made these tests depend on the machine's load).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from seglog.engine import Engine, errors
from seglog.engine.coordinator import GroupCoordinator, GroupErrorCode, GroupState, JoinResult
from seglog.engine.groups import GROUPS_DIR, GroupStore

E = GroupErrorCode
BOUND_S = 10.0


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[GroupStore]:
    opened = GroupStore(tmp_path / GROUPS_DIR, read_only=False)
    await opened.load()
    yield opened
    await opened.close()


@pytest.fixture
async def coord(store: GroupStore) -> AsyncIterator[GroupCoordinator]:
    coordinator = GroupCoordinator(store)
    yield coordinator
    await coordinator.close()


async def join(
    coord: GroupCoordinator, member_id: str = "", *, group: str = "g", protocols: tuple[tuple[str, bytes], ...] = (
        ("range", b"meta"),), session_ms: int = 10_000, rebalance_ms: int = 10_000, instance: str | None = None,
    require_known: bool = False,
) -> JoinResult:
    async with asyncio.timeout(BOUND_S):
        return await coord.join(
            group, member_id, protocol_type="consumer", protocols=protocols, session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms, group_instance_id=instance, require_known_member_id=require_known,
            client_id="test",
        )


async def until(coord: GroupCoordinator, predicate: Callable[[], bool]) -> None:
    async with asyncio.timeout(BOUND_S):
        await coord.wait_until(predicate)


def state(coord: GroupCoordinator, group: str = "g") -> GroupState | None:
    desc = coord.describe(group)
    return None if desc is None else desc.state


def members(coord: GroupCoordinator, group: str = "g") -> set[str]:
    desc = coord.describe(group)
    return set() if desc is None else {m.member_id for m in desc.members}


async def stable_pair(coord: GroupCoordinator, **options: int) -> tuple[JoinResult, JoinResult]:
    """Members a (leader) and b, synced at generation 2."""
    a = await join(coord, **options)  # type: ignore[arg-type]
    await coord.sync("g", a.generation_id, a.member_id, assignments={a.member_id: b"A"})
    b_task = asyncio.create_task(join(coord, **options))  # type: ignore[arg-type]
    await until(coord, lambda: state(coord) is GroupState.PREPARING_REBALANCE)
    a = await join(coord, a.member_id, **options)  # type: ignore[arg-type]
    b = await b_task
    syncs = [
        asyncio.create_task(coord.sync("g", b.generation_id, b.member_id)),
        asyncio.create_task(coord.sync("g", a.generation_id, a.member_id,
                                       assignments={a.member_id: b"A2", b.member_id: b"B2"})),
    ]
    async with asyncio.timeout(BOUND_S):
        got = await asyncio.gather(*syncs)
    assert [s.assignment for s in got] == [b"B2", b"A2"]
    return a, b


async def test_the_first_member_leads_and_the_group_is_stable_after_its_sync(coord: GroupCoordinator) -> None:
    a = await join(coord)
    assert (a.error, a.generation_id, a.leader_id, a.protocol_name) == (E.NONE, 1, a.member_id, "range")
    assert [(m.member_id, m.metadata) for m in a.members] == [(a.member_id, b"meta")]
    assert state(coord) is GroupState.COMPLETING_REBALANCE
    synced = await coord.sync("g", 1, a.member_id, assignments={a.member_id: b"all"})
    assert (synced.error, synced.assignment) == (E.NONE, b"all")
    assert state(coord) is GroupState.STABLE
    assert coord.heartbeat("g", a.member_id, 1) is E.NONE


async def test_a_new_member_gets_its_id_first_when_known_member_ids_are_required(coord: GroupCoordinator) -> None:
    first = await join(coord, require_known=True)
    assert first.error is E.MEMBER_ID_REQUIRED and first.member_id.startswith("test-")
    assert members(coord) == set()  # pending, not a member yet
    second = await join(coord, first.member_id, require_known=True)
    assert (second.error, second.member_id, second.generation_id) == (E.NONE, first.member_id, 1)


async def test_a_join_waits_until_every_known_member_rejoins(coord: GroupCoordinator) -> None:
    a = await join(coord)
    await coord.sync("g", 1, a.member_id, assignments={a.member_id: b"A"})
    b_task = asyncio.create_task(join(coord, protocols=(("range", b"b-meta"),)))
    await until(coord, lambda: state(coord) is GroupState.PREPARING_REBALANCE and len(members(coord)) == 2)
    assert not b_task.done()  # parked until the leader rejoins
    assert coord.heartbeat("g", a.member_id, 1) is E.REBALANCE_IN_PROGRESS
    a2 = await join(coord, a.member_id)
    b = await b_task
    assert a2.generation_id == b.generation_id == 2
    assert a2.leader_id == b.leader_id == a.member_id
    assert {m.member_id: m.metadata for m in a2.members} == {a.member_id: b"meta", b.member_id: b"b-meta"}
    assert b.members == ()  # only the leader sees the members


async def test_a_member_that_does_not_rejoin_within_the_rebalance_timeout_is_removed(coord: GroupCoordinator) -> None:
    a, b = await stable_pair(coord, rebalance_ms=1_000)
    c_task = asyncio.create_task(join(coord, rebalance_ms=1_000))
    await until(coord, lambda: state(coord) is GroupState.PREPARING_REBALANCE)
    a3 = await join(coord, a.member_id, rebalance_ms=1_000)  # b never rejoins
    c = await c_task
    assert a3.generation_id == c.generation_id == 3
    assert {m.member_id for m in a3.members} == {a.member_id, c.member_id}
    assert coord.heartbeat("g", b.member_id, 2) is E.UNKNOWN_MEMBER_ID


async def test_a_member_without_heartbeats_is_expired_and_the_group_rebalances(coord: GroupCoordinator) -> None:
    a = await join(coord, session_ms=10_000)
    await coord.sync("g", 1, a.member_id, assignments={a.member_id: b"A"})
    b_task = asyncio.create_task(join(coord, session_ms=1_000))
    await until(coord, lambda: state(coord) is GroupState.PREPARING_REBALANCE)
    a2 = await join(coord, a.member_id, session_ms=10_000)
    b = await b_task
    syncs = asyncio.gather(coord.sync("g", 2, b.member_id),
                           coord.sync("g", 2, a.member_id, assignments={a.member_id: b"A", b.member_id: b"B"}))
    async with asyncio.timeout(BOUND_S):
        await syncs
    assert a2.generation_id == 2
    # b sends no heartbeat: after its 1 s session it is removed, and the group asks a to rejoin.
    await until(coord, lambda: b.member_id not in members(coord))
    assert state(coord) is GroupState.PREPARING_REBALANCE
    assert coord.heartbeat("g", a.member_id, 2) is E.REBALANCE_IN_PROGRESS
    a3 = await join(coord, a.member_id)
    assert (a3.generation_id, [m.member_id for m in a3.members]) == (3, [a.member_id])


async def test_heartbeats_keep_a_member_alive_past_its_session_timeout(coord: GroupCoordinator) -> None:
    a = await join(coord, session_ms=1_000)
    await coord.sync("g", 1, a.member_id, assignments={a.member_id: b"A"})
    loop = asyncio.get_running_loop()
    end = loop.time() + 2.2  # past two session timeouts
    while loop.time() < end:
        assert coord.heartbeat("g", a.member_id, 1) is E.NONE
        await asyncio.sleep(0.1)  # the heartbeat interval under test, not an ordering device
    assert members(coord) == {a.member_id}


async def test_the_protocol_is_one_every_member_lists(coord: GroupCoordinator) -> None:
    a = await join(coord, protocols=(("range", b"r"), ("roundrobin", b"rr")))
    await coord.sync("g", 1, a.member_id, assignments={})
    b_task = asyncio.create_task(join(coord, protocols=(("roundrobin", b"rr-b"), ("sticky", b"s"))))
    await until(coord, lambda: state(coord) is GroupState.PREPARING_REBALANCE)
    a2 = await join(coord, a.member_id, protocols=(("range", b"r"), ("roundrobin", b"rr")))
    b = await b_task
    assert a2.protocol_name == b.protocol_name == "roundrobin"
    assert {m.metadata for m in a2.members} == {b"rr", b"rr-b"}  # each member's metadata for that protocol
    refused = await join(coord, protocols=(("cooperative-sticky", b""),))
    assert refused.error is E.INCONSISTENT_GROUP_PROTOCOL


async def test_a_protocol_listed_twice_by_one_member_is_not_taken_for_a_common_one(coord: GroupCoordinator) -> None:
    a = await join(coord, protocols=(("range", b"r"), ("range", b"r"), ("roundrobin", b"rr")))
    await coord.sync("g", 1, a.member_id, assignments={})
    b_task = asyncio.create_task(join(coord, protocols=(("roundrobin", b"rr-b"),)))
    await until(coord, lambda: state(coord) is GroupState.PREPARING_REBALANCE)
    a2 = await join(coord, a.member_id, protocols=(("range", b"r"), ("range", b"r"), ("roundrobin", b"rr")))
    b = await b_task
    assert a2.protocol_name == b.protocol_name == "roundrobin"


async def test_a_restarted_static_member_keeps_its_assignment_without_a_rebalance(coord: GroupCoordinator) -> None:
    a = await join(coord, instance="i-a")
    await coord.sync("g", 1, a.member_id, assignments={a.member_id: b"A"})
    b_task = asyncio.create_task(join(coord))
    await until(coord, lambda: state(coord) is GroupState.PREPARING_REBALANCE)
    a = await join(coord, a.member_id, instance="i-a")
    b = await b_task
    async with asyncio.timeout(BOUND_S):
        await asyncio.gather(
            coord.sync("g", 2, b.member_id),
            coord.sync("g", 2, a.member_id, group_instance_id="i-a",
                       assignments={a.member_id: b"A2", b.member_id: b"B2"}),
        )
    # The leader, a static member, restarts: a new member id, the same instance id, no rebalance.
    again = await join(coord, instance="i-a")
    assert (again.error, again.generation_id) == (E.NONE, 2)
    assert again.member_id != a.member_id and again.leader_id == a.member_id  # told the old id: it runs no assignment
    assert state(coord) is GroupState.STABLE
    synced = await coord.sync("g", 2, again.member_id, group_instance_id="i-a")
    assert synced.assignment == b"A2"
    assert coord.heartbeat("g", a.member_id, 2, group_instance_id="i-a") is E.FENCED_INSTANCE_ID
    assert coord.heartbeat("g", again.member_id, 2, group_instance_id="i-a") is E.NONE


async def test_commits_outside_the_group_are_accepted_only_while_it_is_empty(coord: GroupCoordinator) -> None:
    assert await coord.commit_offsets("g", {("t", 0): 5}) is E.NONE  # nobody joined: an assign()-only consumer
    a = await join(coord)
    assert await coord.commit_offsets("g", {("t", 0): 6}) is E.UNKNOWN_MEMBER_ID
    assert await coord.commit_offsets("g", {("t", 0): 6}, member_id=a.member_id, generation_id=1) is (
        E.REBALANCE_IN_PROGRESS  # joined, but the leader has not handed in the assignment
    )
    await coord.sync("g", 1, a.member_id, assignments={a.member_id: b""})
    assert await coord.commit_offsets("g", {("t", 0): 7}, member_id=a.member_id, generation_id=0) is (
        E.ILLEGAL_GENERATION
    )
    assert await coord.commit_offsets("g", {("t", 0): 8}, member_id=a.member_id, generation_id=1) is E.NONE
    coord.leave("g", [(a.member_id, None)])
    assert state(coord) is GroupState.EMPTY
    assert await coord.commit_offsets("g", {("t", 0): 9}) is E.NONE
    assert coord.committed("g", "t", 0) == (9, "")


async def test_leave_group_removes_members_and_static_members_by_instance_id(coord: GroupCoordinator) -> None:
    a, b = await stable_pair(coord)
    group_error, member_errors = coord.leave("g", [(b.member_id, None), ("nobody", None)])
    assert (group_error, member_errors) == (E.NONE, [E.NONE, E.UNKNOWN_MEMBER_ID])
    assert state(coord) is GroupState.PREPARING_REBALANCE
    a = await join(coord, a.member_id)
    await coord.sync("g", a.generation_id, a.member_id, assignments={})
    s = await join(coord, instance="static-1", group="h")
    await coord.sync("h", s.generation_id, s.member_id, group_instance_id="static-1", assignments={})
    assert coord.leave("h", [("", "static-1")]) == (E.NONE, [E.NONE])
    assert state(coord, "h") is GroupState.EMPTY


async def test_members_that_send_no_sync_within_the_rebalance_timeout_are_removed(coord: GroupCoordinator) -> None:
    a, b = await stable_pair(coord, rebalance_ms=1_000)
    c_task = asyncio.create_task(join(coord, rebalance_ms=1_000))
    await until(coord, lambda: state(coord) is GroupState.PREPARING_REBALANCE)
    b_task = asyncio.create_task(join(coord, b.member_id, rebalance_ms=1_000))
    a3 = await join(coord, a.member_id, rebalance_ms=1_000)
    c, b3 = await c_task, await b_task
    assert a3.generation_id == 3
    # Only the leader syncs; b and c never do: after the rebalance timeout they are removed.
    leader_sync = asyncio.create_task(coord.sync("g", 3, a.member_id, assignments={a.member_id: b"A"}))
    assert (await leader_sync).assignment == b"A"
    await until(coord, lambda: members(coord) == {a.member_id})
    assert state(coord) is GroupState.PREPARING_REBALANCE
    assert coord.heartbeat("g", c.member_id, 3) is E.UNKNOWN_MEMBER_ID
    assert b3.generation_id == 3


async def test_a_member_left_out_of_the_leaders_assignment_gets_nothing(coord: GroupCoordinator) -> None:
    a = await join(coord)
    await coord.sync("g", 1, a.member_id, assignments={})
    b_task = asyncio.create_task(join(coord))
    await until(coord, lambda: state(coord) is GroupState.PREPARING_REBALANCE)
    a = await join(coord, a.member_id)
    b = await b_task
    b_sync = asyncio.create_task(coord.sync("g", 2, b.member_id))
    await coord.sync("g", 2, a.member_id, assignments={a.member_id: b"everything"})
    assert (await b_sync).assignment == b""


async def test_close_answers_parked_calls(coord: GroupCoordinator) -> None:
    a = await join(coord)
    await coord.sync("g", 1, a.member_id, assignments={})
    parked = asyncio.create_task(join(coord))
    await until(coord, lambda: state(coord) is GroupState.PREPARING_REBALANCE)
    await coord.close()
    assert (await parked).error is E.COORDINATOR_NOT_AVAILABLE


async def test_engine_commits_and_deletions_are_refused_while_the_group_has_members(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("t")
        await engine.commit_offset("g", "t", 0, 3)
        a = await join(engine.coordinator)
        with pytest.raises(errors.NonEmptyGroupError, match="active member"):
            await engine.commit_offset("g", "t", 0, 4)
        with pytest.raises(errors.NonEmptyGroupError, match="active member"):
            await engine.delete_group("g")
        assert await engine.committed("g", "t", 0) == 3
        engine.coordinator.leave("g", [(a.member_id, None)])
        await engine.commit_offset("g", "t", 0, 4)
        assert await engine.delete_group("g") is True


async def test_generations_go_on_after_a_restart(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        a = await join(engine.coordinator)
        await engine.coordinator.sync("g", 1, a.member_id, assignments={})
        engine.coordinator.leave("g", [(a.member_id, None)])  # empty at generation 2
    async with Engine.open(tmp_path) as engine:
        again = await join(engine.coordinator)
        assert again.generation_id == 3


async def test_groups_are_listed_while_they_have_members_or_offsets(coord: GroupCoordinator) -> None:
    a = await join(coord, group="members")
    refused = await join(coord, group="ghost", protocols=())  # refused: no protocol; leaves nothing listed
    assert refused.error is E.INCONSISTENT_GROUP_PROTOCOL
    assert await coord.commit_offsets("offsets", {("t", 0): 1}) is E.NONE
    assert [(g.group_id, g.state) for g in coord.list_groups()] == [
        ("members", GroupState.COMPLETING_REBALANCE), ("offsets", GroupState.EMPTY)]
    coord.leave("members", [(a.member_id, None)])
    assert [g.group_id for g in coord.list_groups()] == ["offsets"]
