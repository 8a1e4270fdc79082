"""The group coordinator: Kafka's classic consumer-group protocol, for library consumers and Kafka clients alike.

One ``GroupCoordinator`` per engine (``engine.coordinator``) holds every
group's membership; a library consumer (``engine.consumer``) calls it
directly, the Kafka front end (``seglog serve``) calls it from its JoinGroup,
SyncGroup, Heartbeat, LeaveGroup and OffsetCommit handlers, so members of both
kinds meet in one group. The rules are those of Kafka's ``GroupCoordinator``
and ``GroupMetadata`` (``core/src/main/scala/kafka/coordinator/group/``):

* **States**: ``Empty`` (no members; offsets may be committed by anyone),
  ``PreparingRebalance`` (members are asked to rejoin: JoinGroup waits,
  Heartbeat answers ``REBALANCE_IN_PROGRESS``), ``CompletingRebalance``
  (the new generation is formed, waiting for the leader's SyncGroup),
  ``Stable``, and ``Dead`` (deleted).
* **Join**: a new member gets an id (with ``require_known_member_id``, the
  JoinGroup v4+ rule, first only the id and ``MEMBER_ID_REQUIRED``); the join
  phase ends when every known member has rejoined, or when the longest
  rebalance timeout of the members has passed (those that did not rejoin are
  removed, static members excepted). The leader is the first member; the
  protocol is one every member lists, chosen by the members' votes (each
  votes for the first it lists). The leader gets every member's metadata,
  runs the assignment (client side) and hands it over in SyncGroup.
* **Liveness**: a member that sends no heartbeat for its session timeout is
  removed and the group rebalances; members that do not send SyncGroup within
  the rebalance timeout after the join phase are removed too.
* **Static membership** (``group_instance_id``, KIP-345): a static member that
  restarts keeps its place and its assignment without a rebalance when the
  group is stable; an older instance with the same id is fenced
  (``FENCED_INSTANCE_ID``).
* **Offsets**: members commit with their member id and generation; a commit
  with generation -1 and no member id (an ``assign()``-only Kafka consumer,
  ``Engine.commit_offset``) is accepted while the group is ``Empty`` and
  refused while it has members.

Nothing here sleeps: waiting JoinGroup and SyncGroup calls park on futures
that the state machine resolves, and every timeout is one ``call_later``
handle, rescheduled or cancelled as members act. Every state change happens
on the engine's event loop without an ``await`` in between, as Kafka's group
lock would make it. The membership of each group is written to the group
store as a snapshot at each change (``seglog groups`` shows it); committed
offsets go to the group store (``engine.groups``) and survive restarts,
membership does not: after a restart every group starts ``Empty``, at the
generation it had, and its members rejoin.

Must not import: ``tools`` or ``server``.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from seglog.engine.assignors import CONSUMER_PROTOCOL_TYPE, decode_assignment
from seglog.engine.errors import ClosedError, NonEmptyGroupError, SeglogError
from seglog.engine.groups import GroupStore
from seglog.engine.watch import ChangeWatch

__all__ = [
    "NO_MEMBER",
    "CommitMember",
    "GroupCoordinator",
    "GroupDescription",
    "GroupErrorCode",
    "GroupOverview",
    "GroupState",
    "JoinResult",
    "JoinedMember",
    "MemberDescription",
    "SyncResult",
]

log = logging.getLogger("seglog.groups")

# Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a new member whose JoinGroup never completes is dropped.
NEW_MEMBER_JOIN_TIMEOUT_MS: Final = 5 * 60 * 1000
TopicPartition = tuple[str, int]
Protocols = Sequence[tuple[str, bytes]]


class GroupErrorCode(enum.IntEnum):
    """The answers of the coordinator: Kafka's error codes (``org.apache.kafka.common.protocol.Errors``)."""

    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    UNKNOWN_TOPIC_OR_PARTITION = 3
    OFFSET_METADATA_TOO_LARGE = 12
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    MEMBER_ID_REQUIRED = 79
    FENCED_INSTANCE_ID = 82


class GroupState(enum.Enum):
    """A group's state; the values are Kafka's names (DescribeGroups and ListGroups report them)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: Final[dict[GroupState, frozenset[GroupState]]] = {
    GroupState.DEAD: frozenset(GroupState),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
}


@dataclass(frozen=True, slots=True)
class JoinedMember:
    """A member as the leader sees it in the JoinGroup answer: its metadata for the chosen protocol."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    """The answer to a join: the member's id and generation, the protocol, the leader, and (to the leader) members."""

    error: GroupErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: tuple[JoinedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncResult:
    """The answer to a sync: the member's assignment (opaque bytes, the leader's)."""

    error: GroupErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """A group as DescribeGroups reports it (protocol, metadata and assignments only when ``Stable``)."""

    group_id: str
    state: GroupState
    protocol_type: str
    protocol: str
    generation_id: int
    leader_id: str
    members: tuple[MemberDescription, ...]


@dataclass(frozen=True, slots=True)
class GroupOverview:
    group_id: str
    protocol_type: str
    state: GroupState


class _Member:
    __slots__ = (
        "assignment",
        "client_host",
        "client_id",
        "expiry",
        "group_instance_id",
        "is_new",
        "join_waiter",
        "member_id",
        "on_rebalance",
        "protocol_type",
        "protocols",
        "rebalance_timeout_ms",
        "session_timeout_ms",
        "sync_waiter",
    )

    def __init__(
        self, member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
        rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str, protocols: Protocols,
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols: list[tuple[str, bytes]] = list(protocols)
        self.assignment = b""
        self.join_waiter: asyncio.Future[JoinResult] | None = None
        self.sync_waiter: asyncio.Future[SyncResult] | None = None
        self.expiry: asyncio.TimerHandle | None = None
        self.is_new = False
        self.on_rebalance: Callable[[], None] | None = None

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None and not self.join_waiter.done()

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_waiter is not None and not self.sync_waiter.done()

    def protocol_names(self) -> list[str]:
        # Each name once: a member listing one twice must not count as two members supporting it.
        return list(dict.fromkeys(name for name, _ in self.protocols))

    def metadata(self, protocol: str | None) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def matches(self, protocols: Protocols) -> bool:
        return list(protocols) == self.protocols

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise AssertionError("a member without a candidate protocol was admitted")  # supports_protocols prevents it

    def answer_join(self, result: JoinResult) -> bool:
        waiter, self.join_waiter = self.join_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(result)
            return True
        return False

    def answer_sync(self, result: SyncResult) -> bool:
        waiter, self.sync_waiter = self.sync_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(result)
            return True
        return False

    def cancel_expiry(self) -> None:
        if self.expiry is not None:
            self.expiry.cancel()
            self.expiry = None


class _Group:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, _Member] = {}
        self.pending_members: dict[str, asyncio.TimerHandle] = {}
        self.static_members: dict[str, str] = {}  # group instance id -> member id
        self.pending_sync: set[str] = set()
        self.supported: Counter[str] = Counter()
        self.join_timer: asyncio.TimerHandle | None = None
        self.sync_timer: asyncio.TimerHandle | None = None

    def __repr__(self) -> str:
        return (f"<group {self.group_id!r} {self.state.value} generation {self.generation_id} "
                f"members {len(self.members)}>")

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def transition(self, target: GroupState) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise AssertionError(f"group {self.group_id!r}: {self.state.value} -> {target.value} is not a transition")
        self.state = target

    def candidate_protocols(self) -> set[str]:
        return {name for name, count in self.supported.items() if count == len(self.members)}

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(set(names) & self.candidate_protocols())

    def select_protocol(self) -> str:
        candidates = self.candidate_protocols()
        votes = Counter(member.vote(candidates) for member in self.members.values())
        most = max(votes.values())
        # Ties go to the protocol the leader (the longest-standing member) prefers, for a stable choice.
        leader = self.members.get(self.leader_id or "") or next(iter(self.members.values()))
        for name in leader.protocol_names():
            if votes.get(name) == most:
                return name
        return max(votes, key=lambda n: votes[n])

    def add(self, member: _Member, waiter: asyncio.Future[JoinResult] | None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported.update(member.protocol_names())
        member.join_waiter = waiter
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        timer = self.pending_members.pop(member.member_id, None)
        if timer is not None:
            timer.cancel()

    def remove(self, member_id: str) -> _Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported.subtract(member.protocol_names())
            self.supported += Counter()  # drop zero counts
            member.cancel_expiry()
            if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
                del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        timer = self.pending_members.pop(member_id, None)
        if timer is not None:
            timer.cancel()
        self.pending_sync.discard(member_id)
        return member

    def update_member(
        self, member: _Member, protocols: Protocols, rebalance_timeout_ms: int, session_timeout_ms: int,
        waiter: asyncio.Future[JoinResult] | None,
    ) -> None:
        self.supported.subtract(member.protocol_names())
        member.protocols = list(protocols)
        self.supported.update(member.protocol_names())
        self.supported += Counter()
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        # A JoinGroup still parked for this member (its client gave up and retried elsewhere) is answered.
        member.answer_join(JoinResult(GroupErrorCode.UNKNOWN_MEMBER_ID, member.member_id))
        member.join_waiter = waiter

    def has_all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def maybe_elect_new_joined_leader(self) -> bool:
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.awaiting_join:
                self.leader_id = member_id
                return True
        return False

    def member_metadata(self) -> tuple[JoinedMember, ...]:
        return tuple(
            JoinedMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        )


class CommitMember(NamedTuple):
    """Who commits a group's offsets: a member of a generation, or (the defaults) no member, generation -1."""

    member_id: str = ""
    generation_id: int = -1
    group_instance_id: str | None = None


NO_MEMBER: Final = CommitMember()


class GroupCoordinator:
    """Every consumer group of one engine: membership in memory, offsets and snapshots in the group store.

    Call it only on the engine's event loop. The async methods that wait
    (``join``, ``sync``) park until the group answers; the others answer at once.
    """

    def __init__(self, store: GroupStore) -> None:
        self._store = store
        self._groups: dict[str, _Group] = {}
        self._closed = False
        self._watch = ChangeWatch()  # wakes wait_until callers after each change
        self._on_close: set[Callable[[], Awaitable[None]]] = set()

    # -- membership ----------------------------------------------------------------------------

    async def join(
        self,
        group_id: str,
        member_id: str = "",
        *,
        protocol_type: str,
        protocols: Protocols,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        group_instance_id: str | None = None,
        require_known_member_id: bool = False,
        client_id: str = "",
        client_host: str = "",
        on_rebalance: Callable[[], None] | None = None,
    ) -> JoinResult:
        """Join (or rejoin) ``group_id``; returns when the join phase ends (JoinGroup).

        ``member_id`` is ``""`` for a new member. ``on_rebalance`` (in-process
        members) is called when the group starts a rebalance, so the member
        rejoins without waiting for its next heartbeat.
        """
        if self._closed:
            return JoinResult(GroupErrorCode.COORDINATOR_NOT_AVAILABLE, member_id)
        if not group_id:
            return JoinResult(GroupErrorCode.INVALID_GROUP_ID, member_id)
        waiter: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        args = _JoinArgs(
            member_id, group_instance_id, require_known_member_id, client_id, client_host,
            rebalance_timeout_ms, session_timeout_ms, protocol_type, list(protocols), on_rebalance,
        )
        self._handle_join(group_id, waiter, args)
        return await waiter

    def _handle_join(self, group_id: str, waiter: asyncio.Future[JoinResult], a: _JoinArgs) -> None:
        unknown = a.member_id == ""
        group = self._groups.get(group_id)
        if group is None:
            if not unknown:
                waiter.set_result(JoinResult(GroupErrorCode.UNKNOWN_MEMBER_ID, a.member_id))
                return
            group = self._group(group_id)
        if group.state is GroupState.DEAD:
            waiter.set_result(JoinResult(GroupErrorCode.COORDINATOR_NOT_AVAILABLE, a.member_id))
        elif unknown:
            self._join_new_member(group, waiter, a)
        else:
            self._join_current_member(group, waiter, a)
        if group.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(group)
        self._watch.notify()

    def _join_new_member(self, group: _Group, waiter: asyncio.Future[JoinResult], a: _JoinArgs) -> None:
        if not group.supports_protocols(a.protocol_type, [n for n, _ in a.protocols]):
            waiter.set_result(JoinResult(GroupErrorCode.INCONSISTENT_GROUP_PROTOCOL, ""))
            return
        new_id = f"{a.group_instance_id or a.client_id or 'member'}-{uuid.uuid4()}"
        if a.group_instance_id is not None:
            old_id = group.static_members.get(a.group_instance_id)
            if old_id is not None:
                self._update_static_member_and_rebalance(group, old_id, new_id, waiter, a)
            else:
                self._add_member_and_rebalance(group, new_id, waiter, a)
        elif a.require_known_member_id:
            # JoinGroup v4+: hand out the id first; the member rejoins with it (KIP-394).
            loop = asyncio.get_running_loop()
            group.pending_members[new_id] = loop.call_later(
                a.session_timeout_ms / 1000, self._expire_pending_member, group, new_id
            )
            waiter.set_result(JoinResult(GroupErrorCode.MEMBER_ID_REQUIRED, new_id))
        else:
            self._add_member_and_rebalance(group, new_id, waiter, a)

    def _join_current_member(self, group: _Group, waiter: asyncio.Future[JoinResult], a: _JoinArgs) -> None:
        member_id = a.member_id
        if not group.supports_protocols(a.protocol_type, [n for n, _ in a.protocols]):
            waiter.set_result(JoinResult(GroupErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        if member_id in group.pending_members:
            if a.group_instance_id is not None:  # pending members are never static (Kafka refuses the same)
                waiter.set_result(JoinResult(GroupErrorCode.UNKNOWN_MEMBER_ID, member_id))
            else:
                self._add_member_and_rebalance(group, member_id, waiter, a)
            return
        error = self._validate_member(group, member_id, a.group_instance_id)
        if error is not GroupErrorCode.NONE:
            waiter.set_result(JoinResult(error, member_id))
            return
        member = group.members[member_id]
        member.on_rebalance = a.on_rebalance
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, waiter, a)
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(a.protocols):
                # The member missed the join answer: the same answer again.
                waiter.set_result(self._join_result(group, member))
            else:
                self._update_member_and_rebalance(group, member, waiter, a)
        elif state is GroupState.STABLE:
            if group.leader_id == member_id or not member.matches(a.protocols):
                # A leader's JoinGroup forces a rebalance (it saw the topics change); so do new metadata.
                self._update_member_and_rebalance(group, member, waiter, a)
            else:
                waiter.set_result(self._join_result(group, member, with_members=False))
        else:
            waiter.set_result(JoinResult(GroupErrorCode.UNKNOWN_MEMBER_ID, member_id))

    def _add_member_and_rebalance(
        self, group: _Group, member_id: str, waiter: asyncio.Future[JoinResult], a: _JoinArgs
    ) -> None:
        member = _Member(member_id, a.group_instance_id, a.client_id, a.client_host, a.rebalance_timeout_ms,
                         a.session_timeout_ms, a.protocol_type, a.protocols)
        member.is_new = True
        member.on_rebalance = a.on_rebalance
        group.add(member, waiter)
        # A new member cannot heartbeat before its join completes: it is dropped only if that takes too long.
        self._schedule_expiry(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"member {member_id} joined")

    def _update_member_and_rebalance(
        self, group: _Group, member: _Member, waiter: asyncio.Future[JoinResult], a: _JoinArgs
    ) -> None:
        group.update_member(member, a.protocols, a.rebalance_timeout_ms, a.session_timeout_ms, waiter)
        self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")

    def _update_static_member_and_rebalance(
        self, group: _Group, old_id: str, new_id: str, waiter: asyncio.Future[JoinResult], a: _JoinArgs
    ) -> None:
        previous_leader = group.leader_id or ""
        member = group.members.pop(old_id)
        # The previous instance is fenced: its parked calls are answered, its heartbeats fail from now on.
        member.answer_join(JoinResult(GroupErrorCode.FENCED_INSTANCE_ID, old_id))
        member.answer_sync(SyncResult(GroupErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_id
        group.members[new_id] = member
        if group.leader_id == old_id:
            group.leader_id = new_id
        assert a.group_instance_id is not None
        group.static_members[a.group_instance_id] = new_id
        if old_id in group.pending_sync:
            group.pending_sync.discard(old_id)
            group.pending_sync.add(new_id)
        member.client_id, member.client_host, member.on_rebalance = a.client_id, a.client_host, a.on_rebalance
        self._schedule_expiry(group, member, member.session_timeout_ms)
        group.update_member(member, a.protocols, a.rebalance_timeout_ms, a.session_timeout_ms, waiter)
        state = group.state
        if state is GroupState.STABLE:
            if group.select_protocol() == group.protocol_name:
                # No rebalance: the restarted instance takes its predecessor's assignment. The answer
                # names the previous leader id, so that a restarted leader does not run an assignment
                # that a stable group would never hand out.
                member.answer_join(JoinResult(
                    GroupErrorCode.NONE, new_id, group.generation_id, group.protocol_type, group.protocol_name,
                    previous_leader,
                ))
                self._persist(group)
            else:
                self._maybe_prepare_rebalance(group, f"static member {a.group_instance_id} changed its protocols")
        elif state is GroupState.COMPLETING_REBALANCE:
            # The leader may have been given the old member id: assign again.
            self._prepare_rebalance(group, f"static member {a.group_instance_id} rejoined during the sync phase")
        # PreparingRebalance: the member waits with the others.

    def _join_result(self, group: _Group, member: _Member, *, with_members: bool = True) -> JoinResult:
        leader = group.leader_id or ""
        return JoinResult(
            GroupErrorCode.NONE, member.member_id, group.generation_id, group.protocol_type, group.protocol_name,
            leader, group.member_metadata() if with_members and member.member_id == leader else (),
        )

    async def sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        *,
        group_instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        assignments: Mapping[str, bytes] | None = None,
    ) -> SyncResult:
        """Hand in the leader's assignment (SyncGroup) or wait for it; returns this member's assignment."""
        if self._closed:
            return SyncResult(GroupErrorCode.COORDINATOR_NOT_AVAILABLE)
        group = self._groups.get(group_id)
        if group is None:
            return SyncResult(GroupErrorCode.UNKNOWN_MEMBER_ID)
        error = GroupErrorCode.COORDINATOR_NOT_AVAILABLE if group.state is GroupState.DEAD else (
            self._validate_member(group, member_id, group_instance_id)
        )
        if error is GroupErrorCode.NONE:
            if generation_id != group.generation_id:
                error = GroupErrorCode.ILLEGAL_GENERATION
            elif (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol_name is not None and protocol_name != group.protocol_name
            ):
                error = GroupErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if error is not GroupErrorCode.NONE:
            return SyncResult(error)
        member = group.members[member_id]
        state = group.state
        if state is GroupState.EMPTY:
            return SyncResult(GroupErrorCode.UNKNOWN_MEMBER_ID)
        if state is GroupState.PREPARING_REBALANCE:
            return SyncResult(GroupErrorCode.REBALANCE_IN_PROGRESS)
        if state is GroupState.STABLE:
            self._sync_received(group, member_id)
            self._schedule_expiry(group, member, member.session_timeout_ms)
            return SyncResult(GroupErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name)
        # CompletingRebalance: park until the leader's assignment.
        waiter: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        member.answer_sync(SyncResult(GroupErrorCode.REBALANCE_IN_PROGRESS))  # a retried SyncGroup replaces one parked
        member.sync_waiter = waiter
        self._sync_received(group, member_id)
        if member_id == group.leader_id:
            given = dict(assignments or {})
            missing = [m for m in group.members if m not in given]
            if missing:
                log.warning("group %s generation %d: the leader's assignment leaves out %s (they get nothing)",
                            group.group_id, group.generation_id, ", ".join(missing))
            for mid, m in group.members.items():
                m.assignment = given.get(mid, b"")
            group.transition(GroupState.STABLE)
            log.info("group %s: stable at generation %d with %d member(s), protocol %s", group.group_id,
                     group.generation_id, len(group.members), group.protocol_name)
            for m in list(group.members.values()):
                if m.answer_sync(SyncResult(GroupErrorCode.NONE, m.assignment, group.protocol_type,
                                            group.protocol_name)):
                    self._schedule_expiry(group, m, m.session_timeout_ms)
            self._persist(group)
            self._watch.notify()
        return await waiter

    def _sync_received(self, group: _Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync and group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None

    def heartbeat(
        self, group_id: str, member_id: str, generation_id: int, *, group_instance_id: str | None = None
    ) -> GroupErrorCode:
        """A member is alive (Heartbeat); ``REBALANCE_IN_PROGRESS`` asks it to rejoin."""
        if self._closed:
            return GroupErrorCode.COORDINATOR_NOT_AVAILABLE
        group = self._groups.get(group_id)
        if group is None:
            return GroupErrorCode.UNKNOWN_MEMBER_ID
        if group.state is GroupState.DEAD:
            return GroupErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_member(group, member_id, group_instance_id)
        if error is not GroupErrorCode.NONE:
            return error
        if generation_id != group.generation_id:
            return GroupErrorCode.ILLEGAL_GENERATION
        if group.state is GroupState.EMPTY:
            return GroupErrorCode.UNKNOWN_MEMBER_ID
        member = group.members[member_id]
        self._schedule_expiry(group, member, member.session_timeout_ms)
        if group.state is GroupState.PREPARING_REBALANCE:
            return GroupErrorCode.REBALANCE_IN_PROGRESS
        return GroupErrorCode.NONE  # Stable, or CompletingRebalance (a member may heartbeat before its sync)

    def leave(
        self, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> tuple[GroupErrorCode, list[GroupErrorCode]]:
        """Members leave (LeaveGroup): ``(member_id, group_instance_id)`` pairs; a member id of ``""``
        removes the static member of that instance id. Returns the group's error and one per member."""
        if self._closed:
            return GroupErrorCode.COORDINATOR_NOT_AVAILABLE, []
        if not group_id:
            return GroupErrorCode.INVALID_GROUP_ID, []
        group = self._groups.get(group_id)
        if group is None:
            return GroupErrorCode.NONE, [GroupErrorCode.UNKNOWN_MEMBER_ID] * len(members)
        if group.state is GroupState.DEAD:
            return GroupErrorCode.COORDINATOR_NOT_AVAILABLE, []
        errors = []
        for member_id, instance_id in members:
            if not member_id:
                current = group.static_members.get(instance_id) if instance_id is not None else None
                if current is None:
                    errors.append(GroupErrorCode.UNKNOWN_MEMBER_ID)
                else:
                    self._remove_member_and_update_group(group, group.members[current], "left (by instance id)")
                    errors.append(GroupErrorCode.NONE)
            elif member_id in group.pending_members:
                group.pending_members.pop(member_id).cancel()
                if group.state is GroupState.PREPARING_REBALANCE:
                    self._maybe_complete_join(group)
                errors.append(GroupErrorCode.NONE)
            else:
                error = self._validate_member(group, member_id, instance_id)
                if error is GroupErrorCode.NONE:
                    self._remove_member_and_update_group(group, group.members[member_id], "left the group")
                errors.append(error)
        self._watch.notify()
        return GroupErrorCode.NONE, errors

    # -- the state machine ------------------------------------------------------------------

    def _group(self, group_id: str) -> _Group:
        group = _Group(group_id)
        snapshot = self._store.snapshot(group_id)
        if snapshot is not None:
            # Generations go on increasing across restarts: a member of an earlier run cannot pass for current.
            generation = snapshot.get("generation")
            if isinstance(generation, int) and not isinstance(generation, bool) and generation >= 0:
                group.generation_id = generation
        self._groups[group_id] = group
        return group

    def _validate_member(self, group: _Group, member_id: str, instance_id: str | None) -> GroupErrorCode:
        if instance_id is not None:
            current = group.static_members.get(instance_id)
            if current is None:
                return GroupErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                return GroupErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return GroupErrorCode.UNKNOWN_MEMBER_ID
        return GroupErrorCode.NONE

    def _maybe_prepare_rebalance(self, group: _Group, reason: str) -> None:
        if group.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]:
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: _Group, reason: str) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            self._reset_assignments(group, GroupErrorCode.REBALANCE_IN_PROGRESS)
        group.pending_sync.clear()
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None
        group.transition(GroupState.PREPARING_REBALANCE)
        log.info("group %s: rebalancing from generation %d (%s)", group.group_id, group.generation_id, reason)
        if group.join_timer is not None:
            group.join_timer.cancel()
        group.join_timer = asyncio.get_running_loop().call_later(
            group.rebalance_timeout_ms / 1000, self._complete_join, group
        )
        for member in list(group.members.values()):
            if member.on_rebalance is not None and not member.awaiting_join:
                try:
                    member.on_rebalance()
                except Exception:  # a member's hook must not break the group
                    log.exception("group %s: the rebalance hook of member %s failed", group.group_id, member.member_id)
        self._persist(group)
        self._maybe_complete_join(group)

    def _reset_assignments(self, group: _Group, error: GroupErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
            member.answer_sync(SyncResult(error))

    def _maybe_complete_join(self, group: _Group) -> None:
        if group.state is GroupState.PREPARING_REBALANCE and group.has_all_members_joined():
            self._complete_join(group)

    def _complete_join(self, group: _Group) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        for member in [m for m in group.members.values() if not m.awaiting_join and m.group_instance_id is None]:
            log.info("group %s: member %s did not rejoin in time; removed", group.group_id, member.member_id)
            group.remove(member.member_id)
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members are left and none rejoined: wait another rebalance timeout (or their expiry).
            log.warning("group %s: no member rejoined; waiting for them", group.group_id)
            group.join_timer = asyncio.get_running_loop().call_later(
                group.rebalance_timeout_ms / 1000, self._complete_join, group
            )
            return
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None
            group.transition(GroupState.EMPTY)
            log.info("group %s: empty at generation %d", group.group_id, group.generation_id)
            self._persist(group)
            self._watch.notify()
            return
        group.protocol_name = group.select_protocol()
        group.transition(GroupState.COMPLETING_REBALANCE)
        for member in list(group.members.values()):
            member.answer_join(self._join_result(group, member))
            self._schedule_expiry(group, member, member.session_timeout_ms)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        group.sync_timer = asyncio.get_running_loop().call_later(
            group.rebalance_timeout_ms / 1000, self._expire_pending_sync, group, group.generation_id
        )
        self._persist(group)
        self._watch.notify()

    def _expire_pending_sync(self, group: _Group, generation_id: int) -> None:
        group.sync_timer = None
        if generation_id != group.generation_id or group.state not in (
            GroupState.COMPLETING_REBALANCE, GroupState.STABLE
        ) or not group.pending_sync:
            return
        late = sorted(group.pending_sync)
        for member_id in late:
            group.remove(member_id)
        self._prepare_rebalance(group, f"member(s) {', '.join(late)} sent no SyncGroup within the rebalance timeout")
        self._watch.notify()

    def _schedule_expiry(self, group: _Group, member: _Member, timeout_ms: int) -> None:
        member.cancel_expiry()
        member.expiry = asyncio.get_running_loop().call_later(timeout_ms / 1000, self._expire_member, group, member)

    def _expire_member(self, group: _Group, member: _Member) -> None:
        member.expiry = None
        if group.members.get(member.member_id) is not member:
            return  # left, was removed, or replaced by a newer instance
        if not member.is_new and (member.awaiting_join or member.awaiting_sync):
            return  # parked in a JoinGroup or SyncGroup: alive (the end of that phase reschedules it)
        log.info("group %s: member %s sent no heartbeat for %d ms; removed", group.group_id, member.member_id,
                 member.session_timeout_ms)
        self._remove_member_and_update_group(group, member, "session timeout")
        self._watch.notify()

    def _expire_pending_member(self, group: _Group, member_id: str) -> None:
        if group.pending_members.pop(member_id, None) is not None and (
            group.state is GroupState.PREPARING_REBALANCE
        ):
            self._maybe_complete_join(group)
            self._watch.notify()

    def _remove_member_and_update_group(self, group: _Group, member: _Member, reason: str) -> None:
        member.answer_join(JoinResult(GroupErrorCode.UNKNOWN_MEMBER_ID, ""))
        member.answer_sync(SyncResult(GroupErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        state = group.state
        if state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, f"member {member.member_id} {reason}")
        elif state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(group)

    # -- offsets ------------------------------------------------------------------------------

    def check_commit(
        self, group_id: str, committer: CommitMember = NO_MEMBER, *, transactional: bool = False
    ) -> GroupErrorCode:
        """Whether ``committer`` may commit offsets for ``group_id`` now (Kafka's validateOffsetCommit).

        A member of the current generation refreshes its session by committing.
        A transactional commit (TxnOffsetCommit) without a member id and
        generation is accepted whatever the group's state: its older versions
        carry neither, and the transaction coordinator has fenced zombies
        already (Kafka's rule).
        """
        member_id, generation_id, group_instance_id = committer
        if self._closed:
            return GroupErrorCode.COORDINATOR_NOT_AVAILABLE
        group = self._groups.get(group_id)
        if group is None:
            # A group nobody joined: commits outside a generation (assign()-only consumers) are fine.
            return GroupErrorCode.NONE if generation_id < 0 else GroupErrorCode.ILLEGAL_GENERATION
        if group.state is GroupState.DEAD:
            return GroupErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.state is GroupState.EMPTY:
            return GroupErrorCode.NONE
        if generation_id >= 0 or member_id or group_instance_id is not None:
            error = self._validate_member(group, member_id, group_instance_id)
            if error is not GroupErrorCode.NONE:
                return error
            if generation_id != group.generation_id:
                return GroupErrorCode.ILLEGAL_GENERATION
        elif group.state is not GroupState.EMPTY and not transactional:
            return GroupErrorCode.UNKNOWN_MEMBER_ID  # only members commit while the group has any
        if group.state is GroupState.COMPLETING_REBALANCE and not transactional:
            return GroupErrorCode.REBALANCE_IN_PROGRESS
        member = group.members.get(member_id)
        if member is not None:
            self._schedule_expiry(group, member, member.session_timeout_ms)
        return GroupErrorCode.NONE

    async def commit_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
        *,
        metadata: Mapping[TopicPartition, str] | None = None,
        member_id: str = "",
        generation_id: int = -1,
        group_instance_id: str | None = None,
    ) -> GroupErrorCode:
        """Commit ``offsets`` for ``group_id`` if :meth:`check_commit` allows it; durable when this returns.

        Raises:
            StorageError: the group store could not write them (nothing is committed then).
        """
        error = self.check_commit(group_id, CommitMember(member_id, generation_id, group_instance_id))
        if error is GroupErrorCode.NONE and offsets:
            await self._store.commit(group_id, offsets, metadata)
        return error

    async def commit_outside_group(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit as ``Engine.commit_offset`` does: no member, generation -1; refused while the group has members.

        Raises:
            NonEmptyGroupError: the group has active members.
            ClosedError: the coordinator is closed.
            StorageError: the group store could not write the offsets.
        """
        error = await self.commit_offsets(group_id, offsets)
        if error is GroupErrorCode.NONE:
            return
        if error is GroupErrorCode.COORDINATOR_NOT_AVAILABLE:
            self.check_open()
        group = self._groups.get(group_id)
        raise NonEmptyGroupError(
            f"group {group_id!r} has active member(s) (state {group.state.value if group else '?'}): only its "
            "members commit its offsets now (Kafka answers UNKNOWN_MEMBER_ID); stop its consumers first, or "
            "commit through a consumer of the group",
            error.name,
        )

    async def txn_commit_offsets(
        self,
        group_id: str,
        producer_id: int,
        offsets: Mapping[TopicPartition, int],
        *,
        metadata: Mapping[TopicPartition, str] | None = None,
        committer: CommitMember = NO_MEMBER,
    ) -> GroupErrorCode:
        """Record ``offsets`` as ``producer_id``'s pending transactional commit (Kafka's TxnOffsetCommit).

        They are durable when this returns but not committed: the end of the
        transaction (:meth:`end_txn`) makes them the group's committed offsets
        or drops them. The transaction coordinator checks the producer first.

        Raises:
            StorageError: the group store could not write them.
        """
        error = self.check_commit(group_id, committer, transactional=True)
        if error is GroupErrorCode.NONE and offsets:
            await self._store.txn_commit(group_id, producer_id, offsets, metadata)
        return error

    async def end_txn(self, group_id: str, producer_id: int, commit: bool) -> None:
        """End ``producer_id``'s transaction in ``group_id`` (the marker Kafka writes to ``__consumer_offsets``).

        Its pending offsets become the group's committed offsets (``commit``;
        a partition committed outside the transaction since keeps that later
        offset) or are dropped. Idempotent.

        Raises:
            StorageError: the group store could not write it (nothing changed).
        """
        await self._store.txn_end(group_id, producer_id, commit)

    def pending_partitions(self, group_id: str) -> set[TopicPartition]:
        """Partitions of ``group_id`` with a transactional commit not ended yet (OffsetFetch's
        ``UNSTABLE_OFFSET_COMMIT``)."""
        return self._store.pending_partitions(group_id)

    def committed(self, group_id: str, topic: str, partition: int) -> tuple[int, str] | None:
        """The committed offset and metadata string of one partition, or ``None``."""
        offset = self._store.committed(group_id, topic, partition)
        return None if offset is None else (offset, self._store.committed_metadata(group_id, topic, partition))

    def committed_partitions(self, group_id: str) -> dict[TopicPartition, int]:
        return self._store.offsets(group_id)

    # -- what exists ----------------------------------------------------------------------------

    def state_of(self, group_id: str) -> GroupState | None:
        """The state of ``group_id``; ``Empty`` for a group that only has committed offsets; ``None``: unknown."""
        group = self._groups.get(group_id)
        if group is not None:
            return group.state
        if self._store.has_offsets(group_id):
            return GroupState.EMPTY
        return None

    def list_groups(self) -> list[GroupOverview]:
        """Every group that has members or committed offsets."""
        out = {
            g.group_id: GroupOverview(g.group_id, g.protocol_type or "", g.state)
            for g in self._groups.values()
            # An empty group without offsets is gone, as Kafka's periodic cleanup removes it.
            if g.state not in (GroupState.DEAD, GroupState.EMPTY) or self._store.has_offsets(g.group_id)
        }
        for group_id in self._store.groups():
            if group_id not in out:
                snapshot = self._store.snapshot(group_id) or {}
                protocol_type = snapshot.get("protocol_type")
                out[group_id] = GroupOverview(
                    group_id, protocol_type if isinstance(protocol_type, str) else "", GroupState.EMPTY
                )
        return [out[k] for k in sorted(out)]

    def describe(self, group_id: str) -> GroupDescription | None:
        """``group_id`` as DescribeGroups reports it; ``None`` when it is unknown (Kafka: ``Dead``)."""
        group = self._groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            if self._store.has_offsets(group_id):
                return GroupDescription(group_id, GroupState.EMPTY, "", "", 0, "", ())
            return None
        stable = group.state is GroupState.STABLE
        members = tuple(
            MemberDescription(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                m.metadata(group.protocol_name) if stable else b"", m.assignment if stable else b"",
            )
            for m in group.members.values()
        )
        return GroupDescription(
            group_id, group.state, group.protocol_type or "", (group.protocol_name or "") if stable else "",
            group.generation_id, group.leader_id or "", members,
        )

    def has_members(self, group_id: str) -> bool:
        group = self._groups.get(group_id)
        return group is not None and bool(group.members)

    async def delete_group(self, group_id: str) -> bool:
        """Forget ``group_id``: its offsets and snapshot; whether it had offsets.

        Raises:
            NonEmptyGroupError: the group has members.
            StorageError: the group store could not write the deletion.
        """
        group = self._groups.get(group_id)
        if group is not None and group.members:
            raise NonEmptyGroupError(
                f"group {group_id!r} has {len(group.members)} active member(s) (state {group.state.value}); "
                "stop its consumers first (Kafka refuses to delete a non-empty group too)",
                "NON_EMPTY_GROUP",
            )
        if group is not None:
            group.transition(GroupState.DEAD)
            del self._groups[group_id]
        existed = await self._store.delete(group_id)
        self._watch.notify()
        return existed

    # -- snapshots, watchers, close ------------------------------------------------------------

    def _persist(self, group: _Group) -> None:
        """Queue the group's membership snapshot in the group store (what ``seglog groups`` shows)."""
        snapshot = {
            "state": group.state.value,
            "generation": group.generation_id,
            "protocol_type": group.protocol_type or "",
            "protocol": group.protocol_name or "",
            "leader": group.leader_id or "",
            "members": [_member_snapshot(m, group) for m in group.members.values()],
            "updated_ms": time.time_ns() // 1_000_000,
        }
        try:
            written = self._store.put_snapshot(group.group_id, snapshot)
        except SeglogError as exc:
            log.warning("group %s: membership snapshot not written: %s", group.group_id, exc)
            return
        written.add_done_callback(_log_snapshot_failure)

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Return once ``predicate()`` holds, checked after every membership change (for tests and tools).

        Bound it with ``asyncio.timeout``: the coordinator never gives up by itself.
        """
        await self._watch.wait_until(predicate)

    def on_close(self, callback: Callable[[], Awaitable[None]]) -> Callable[[], None]:
        """Call ``callback`` when the coordinator closes (library consumers stop then); returns the undo."""
        self._on_close.add(callback)
        return lambda: self._on_close.discard(callback)

    async def close(self) -> None:
        """Stop the library consumers, answer parked calls with ``COORDINATOR_NOT_AVAILABLE``. Idempotent."""
        if self._closed:
            return
        callbacks = list(self._on_close)
        self._on_close.clear()
        for callback in callbacks:  # consumers commit and leave while the coordinator still answers
            with contextlib.suppress(Exception):
                await callback()
        self._closed = True
        for group in self._groups.values():
            for timer in (group.join_timer, group.sync_timer, *group.pending_members.values()):
                if timer is not None:
                    timer.cancel()
            for member in group.members.values():
                member.cancel_expiry()
                member.answer_join(JoinResult(GroupErrorCode.COORDINATOR_NOT_AVAILABLE, member.member_id))
                member.answer_sync(SyncResult(GroupErrorCode.COORDINATOR_NOT_AVAILABLE))
        self._watch.notify()

    def check_open(self) -> None:
        if self._closed:
            raise ClosedError("the engine is closed: its group coordinator no longer answers")


@dataclass(frozen=True, slots=True)
class _JoinArgs:
    member_id: str
    group_instance_id: str | None
    require_known_member_id: bool
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    on_rebalance: Callable[[], None] | None


def _member_snapshot(member: _Member, group: _Group) -> dict[str, Any]:
    assignment: list[list[Any]] | None = None
    if group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.state is GroupState.STABLE:
        try:
            decoded = decode_assignment(member.assignment)
            assignment = [[t, sorted(ps)] for t, ps in sorted(decoded.partitions.items())]
        except ValueError:
            assignment = None
    return {
        "member_id": member.member_id,
        "group_instance_id": member.group_instance_id,
        "client_id": member.client_id,
        "client_host": member.client_host,
        "session_timeout_ms": member.session_timeout_ms,
        "assignment": assignment,
    }


def _log_snapshot_failure(future: asyncio.Future[Any]) -> None:
    if future.cancelled():
        return
    exc = future.exception()
    if exc is not None:
        log.warning("a group membership snapshot was not written: %s", exc)
