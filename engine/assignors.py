"""Kafka's consumer protocol inside a group: subscriptions, assignments, and the range and round-robin assignors.

A group's members run the assignment themselves (the coordinator only picks
a leader and a protocol every member lists); what they exchange through
JoinGroup and SyncGroup are opaque bytes in the format of Kafka's
``ConsumerProtocol``, so a library consumer and a Kafka client (aiokafka,
kafka-python, librdkafka, Java) can be members of one group and assign
partitions to each other::

    Subscription: int16 version, [string topic], bytes user_data
                  (version 1 on adds owned partitions, 2 a generation, 3 a rack: read past, never needed)
    Assignment:   int16 version, [string topic, [int32 partition]], bytes user_data

(``[x]`` is an int32 count then the items; a string an int16 length then UTF-8;
bytes an int32 length, -1 for null.) Encoded at version 0, which every client
reads; decoded at any version, every length checked against the bytes left:
these bytes come from other members, over the network.

Must not import: ``tools`` or ``server``.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "ASSIGNORS",
    "CONSUMER_PROTOCOL_TYPE",
    "Assignment",
    "Subscription",
    "assign",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
]

CONSUMER_PROTOCOL_TYPE: Final = "consumer"  # the protocol type of Kafka's consumer groups
ASSIGNORS: Final = ("range", "roundrobin")  # what a library consumer can run as the group's leader

_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class Subscription:
    """A member's subscription: the topics it reads."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    version: int = 0


@dataclass(frozen=True, slots=True)
class Assignment:
    """A member's share: partitions by topic."""

    partitions: dict[str, list[int]] = field(default_factory=dict)
    user_data: bytes | None = None
    version: int = 0

    def topic_partitions(self) -> list[tuple[str, int]]:
        return sorted((t, p) for t, parts in self.partitions.items() for p in parts)


# -- encoding ----------------------------------------------------------------------------------


def _string(text: str) -> bytes:
    data = text.encode("utf-8")
    return _I16.pack(len(data)) + data


def _bytes(data: bytes | None) -> bytes:
    return _I32.pack(-1) if data is None else _I32.pack(len(data)) + data


def encode_subscription(topics: Sequence[str], user_data: bytes | None = None) -> bytes:
    """A version-0 subscription of ``topics``."""
    return (
        _I16.pack(0) + _I32.pack(len(topics)) + b"".join(_string(t) for t in topics) + _bytes(user_data)
    )


def encode_assignment(partitions: Mapping[str, Sequence[int]], user_data: bytes | None = None) -> bytes:
    """A version-0 assignment of ``partitions`` (by topic)."""
    out = [_I16.pack(0), _I32.pack(len(partitions))]
    for topic, parts in sorted(partitions.items()):
        out.append(_string(topic))
        out.append(_I32.pack(len(parts)))
        out.extend(_I32.pack(p) for p in parts)
    out.append(_bytes(user_data))
    return b"".join(out)


# -- decoding (never trusts a length) ------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, size: int) -> bytes:
        if size < 0 or self.pos + size > len(self.data):
            raise ValueError(f"needs {size} bytes at byte {self.pos} of {len(self.data)}")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def i16(self) -> int:
        value: int = _I16.unpack(self.take(2))[0]
        return value

    def i32(self) -> int:
        value: int = _I32.unpack(self.take(4))[0]
        return value

    def count(self, item_bytes: int) -> int:
        n = self.i32()
        if n == -1:
            return 0
        if n < 0 or n * item_bytes > len(self.data) - self.pos:
            raise ValueError(f"an array of {n} items does not fit the {len(self.data) - self.pos} bytes left")
        return n

    def string(self) -> str:
        size = self.i16()
        if size < 0:
            raise ValueError("a null string where a topic name belongs")
        return self.take(size).decode("utf-8")

    def nullable_bytes(self) -> bytes | None:
        size = self.i32()
        return None if size == -1 else self.take(size)

    def at_end(self) -> bool:
        return self.pos >= len(self.data)


def decode_subscription(data: bytes) -> Subscription:
    """A subscription of any version.

    Raises:
        ValueError: the bytes are not a subscription (a length runs past the end, bad UTF-8...).
    """
    try:
        r = _Reader(bytes(data))
        version = r.i16()
        if version < 0:
            raise ValueError(f"subscription version {version}")
        topics = tuple(r.string() for _ in range(r.count(2)))
        user_data = r.nullable_bytes() if not r.at_end() else None
    except (UnicodeDecodeError, struct.error) as exc:
        raise ValueError(str(exc)) from exc
    return Subscription(topics, user_data, version)


def decode_assignment(data: bytes) -> Assignment:
    """An assignment of any version; empty bytes are an empty assignment (Kafka's "nothing for you").

    Raises:
        ValueError: the bytes are not an assignment.
    """
    if not data:
        return Assignment()
    try:
        r = _Reader(bytes(data))
        version = r.i16()
        if version < 0:
            raise ValueError(f"assignment version {version}")
        partitions: dict[str, list[int]] = {}
        for _ in range(r.count(6)):
            topic = r.string()
            parts = [r.i32() for _ in range(r.count(4))]
            if any(p < 0 for p in parts):
                raise ValueError(f"a negative partition of topic {topic!r}")
            partitions.setdefault(topic, []).extend(parts)
        user_data = r.nullable_bytes() if not r.at_end() else None
    except (UnicodeDecodeError, struct.error) as exc:
        raise ValueError(str(exc)) from exc
    return Assignment(partitions, user_data, version)


# -- assignors -----------------------------------------------------------------------------------


def assign(
    strategy: str, subscriptions: Mapping[str, Sequence[str]], partitions_per_topic: Mapping[str, int]
) -> dict[str, dict[str, list[int]]]:
    """Kafka's ``range`` or ``roundrobin`` assignment of the topics' partitions to the members.

    ``subscriptions`` maps each member id (in the order members should be
    ranked: Kafka ranks by group instance id, else member id) to its topics;
    topics missing from ``partitions_per_topic`` (unknown) are skipped. Every
    member gets an entry, maybe empty.

    Raises:
        ValueError: an unknown strategy.
    """
    out: dict[str, dict[str, list[int]]] = {member: {} for member in subscriptions}
    members = list(subscriptions)
    topics = sorted({t for topics in subscriptions.values() for t in topics if t in partitions_per_topic})
    if strategy == "range":
        for topic in topics:
            takers = [m for m in members if topic in subscriptions[m]]
            count = partitions_per_topic[topic]
            each, extra = divmod(count, len(takers))
            for i, member in enumerate(takers):
                start = each * i + min(i, extra)
                length = each + (1 if i < extra else 0)
                if length:
                    out[member][topic] = list(range(start, start + length))
        return out
    if strategy == "roundrobin":
        turn = 0
        for topic in topics:
            for partition in range(partitions_per_topic[topic]):
                for _ in range(len(members)):  # the next member, in turn, that reads this topic
                    member = members[turn % len(members)]
                    turn += 1
                    if topic in subscriptions[member]:
                        out[member].setdefault(topic, []).append(partition)
                        break
        return out
    raise ValueError(f"unknown assignment strategy {strategy!r}; choose from {', '.join(ASSIGNORS)}")
