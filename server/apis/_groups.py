"""What the group APIs share: error-code conversion, group id checks, durations in ms, offset-commit checks.

Must not import: ``tools``.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple, Protocol, TypeVar

from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i32

from seglog.engine.coordinator import GroupErrorCode
from seglog.engine.errors import SeglogError
from seglog.engine.groups import MAX_METADATA_BYTES
from seglog.engine.validate import validate_group
from seglog.server.broker import Broker

TopicT = TypeVar("TopicT")

__all__ = ["OffsetCommitPlan", "code", "group_id_problem", "ms", "plan_offset_commit"]


def code(error: GroupErrorCode) -> ErrorCode:
    """The wire form of a coordinator's answer (the numbers are Kafka's in both)."""
    return ErrorCode(int(error))


def ms(duration: datetime.timedelta) -> int:
    return int(duration.total_seconds() * 1000)


def group_id_problem(group_id: str | None) -> bool:
    """Whether ``group_id`` cannot name a group here (empty, NUL, not UTF-8, too long): ``INVALID_GROUP_ID``."""
    if group_id is None:
        return True
    try:
        validate_group(group_id)
    except SeglogError:
        return True
    return False


class _CommitPartition(Protocol):
    @property
    def partition_index(self) -> int: ...
    @property
    def committed_offset(self) -> int: ...
    @property
    def committed_metadata(self) -> str | None: ...


class _CommitTopic(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def partitions(self) -> Sequence[_CommitPartition] | None: ...


class OffsetCommitPlan(NamedTuple):
    """An OffsetCommit's or a TxnOffsetCommit's partitions, checked: what to commit and what is refused."""

    offsets: dict[tuple[str, int], int]
    """The partitions that passed, with their offsets: the commit to send the engine."""
    metadata: dict[tuple[str, int], str]
    """The non-empty metadata of those partitions."""
    errors: dict[tuple[str, int], ErrorCode]
    """The refused partitions, with why."""
    order: list[tuple[str, int]]
    """Every partition as the request named it (repeats included): the answer's order."""

    def answer_topics(
        self, outcome: ErrorCode, topic: Callable[..., TopicT], partition: Callable[..., object]
    ) -> tuple[TopicT, ...]:
        """The answer's topics, built with the response's ``topic`` and ``partition`` classes.

        Each partition once, in request order, grouped by topic; a committed
        partition gets ``outcome``, a refused one its refusal.
        """
        by_topic: dict[str, list[object]] = {}
        for tp in dict.fromkeys(self.order):
            error = outcome if tp in self.offsets else self.errors[tp]
            by_topic.setdefault(tp[0], []).append(partition(partition_index=i32(tp[1]), error_code=error))
        return tuple(topic(name=TopicName(name), partitions=tuple(parts)) for name, parts in by_topic.items())


def plan_offset_commit(broker: Broker, topics: Iterable[_CommitTopic] | None) -> OffsetCommitPlan:
    """Check each partition of an offset commit as Kafka does, in this order.

    ``UNKNOWN_TOPIC_OR_PARTITION`` for a partition that does not exist,
    ``OFFSET_METADATA_TOO_LARGE`` above the group store's metadata bound (in
    UTF-8 bytes), ``OFFSET_OUT_OF_RANGE`` for a negative offset; the rest go
    into the plan's offsets.
    """
    plan = OffsetCommitPlan({}, {}, {}, [])
    for topic in topics or ():
        try:
            count = broker.engine.partitions_for(topic.name)
        except SeglogError:
            count = 0
        for p in topic.partitions or ():
            tp = (topic.name, int(p.partition_index))
            plan.order.append(tp)
            text = p.committed_metadata or ""
            if not 0 <= tp[1] < count:
                plan.errors[tp] = ErrorCode.unknown_topic_or_partition
            elif len(text.encode("utf-8", "surrogatepass")) > MAX_METADATA_BYTES:
                plan.errors[tp] = ErrorCode.offset_metadata_too_large
            elif int(p.committed_offset) < 0:
                plan.errors[tp] = ErrorCode.offset_out_of_range
            else:
                plan.offsets[tp] = int(p.committed_offset)
                if text:
                    plan.metadata[tp] = text
    return plan
