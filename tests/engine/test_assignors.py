"""Kafka's consumer protocol (subscriptions, assignments) and the range and roundrobin assignors."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seglog.engine.assignors import (
    assign,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)


def test_a_subscription_round_trips_and_later_versions_are_read() -> None:
    assert decode_subscription(encode_subscription(["orders", "refunds"], b"ud")).topics == ("orders", "refunds")
    # Version 1 adds owned partitions after user_data (librdkafka, Java): read past them.
    v1 = struct.pack(">hi", 1, 1) + struct.pack(">h", 6) + b"orders" + struct.pack(">i", -1)
    v1 += struct.pack(">i", 1) + struct.pack(">h", 6) + b"orders" + struct.pack(">ii", 1, 3)
    got = decode_subscription(v1)
    assert (got.version, got.topics, got.user_data) == (1, ("orders",), None)


def test_an_assignment_round_trips_and_empty_bytes_are_an_empty_assignment() -> None:
    data = encode_assignment({"orders": [0, 2], "refunds": [1]})
    assert decode_assignment(data).topic_partitions() == [("orders", 0), ("orders", 2), ("refunds", 1)]
    assert decode_assignment(b"").partitions == {}


@pytest.mark.parametrize("data", [
    b"\x00", b"\x00\x00\x7f\xff\xff\xff", b"\x00\x00\x00\x00\x00\x01\x00\x10short",
    b"\x00\x00\x00\x00\x00\x01\x00\x02\xff\xfe", b"\xff\xff",
])
def test_garbage_is_refused_with_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        decode_subscription(data)
    with pytest.raises(ValueError):
        decode_assignment(data)


@given(st.binary(max_size=64))
def test_no_bytes_make_the_decoders_fail_otherwise(data: bytes) -> None:
    for decode in (decode_subscription, decode_assignment):
        with contextlib.suppress(ValueError):
            decode(data)


def test_range_gives_each_member_a_contiguous_range_of_each_topic() -> None:
    got = assign("range", {"a": ["t", "u"], "b": ["t"], "c": ["t", "u"]}, {"t": 7, "u": 2, "missing": 3})
    assert got == {"a": {"t": [0, 1, 2], "u": [0]}, "b": {"t": [3, 4]}, "c": {"t": [5, 6], "u": [1]}}


def test_roundrobin_deals_partitions_in_turn_to_members_that_read_the_topic() -> None:
    got = assign("roundrobin", {"a": ["t"], "b": ["t", "u"]}, {"t": 3, "u": 2})
    assert got == {"a": {"t": [0, 2]}, "b": {"t": [1], "u": [0, 1]}}


@given(st.sampled_from(["range", "roundrobin"]), st.integers(1, 6), st.integers(0, 30))
def test_every_partition_goes_to_exactly_one_member(strategy: str, members: int, partitions: int) -> None:
    got = assign(strategy, {f"m{i}": ["t"] for i in range(members)}, {"t": partitions})
    dealt = sorted(p for share in got.values() for p in share.get("t", []))
    assert dealt == list(range(partitions))
    sizes = [len(share.get("t", [])) for share in got.values()]
    assert max(sizes) - min(sizes) <= 1
