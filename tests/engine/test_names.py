from __future__ import annotations

import pytest

from seglog.engine.errors import InvalidTopicError
from seglog.engine.names import parse_partition_dir, partition_dir_name, validate_partition, validate_topic


@pytest.mark.parametrize("name", ["orders", "a", "A.b_c-9", "x" * 249, "..a", "a..", "-"])
def test_legal_names(name: str) -> None:
    assert validate_topic(name) == name


@pytest.mark.parametrize(
    "name",
    ["", ".", "..", "x" * 250, "a/b", "../etc", "a b", "naïve", "a\x00b", "a\\b", "~", "/abs"],
)
def test_illegal_names_never_reach_the_file_system(name: str) -> None:
    with pytest.raises(InvalidTopicError):
        validate_topic(name)
    with pytest.raises(InvalidTopicError):
        partition_dir_name(name, 0)


@pytest.mark.parametrize("name", [None, 3, b"orders"])
def test_wrong_types(name: object) -> None:
    with pytest.raises(InvalidTopicError, match="must be a str"):
        validate_topic(name)


@pytest.mark.parametrize("partition", [-1, True, "0", 1.0])
def test_bad_partitions(partition: object) -> None:
    with pytest.raises(InvalidTopicError):
        validate_partition(partition)


def test_dir_names_round_trip() -> None:
    assert partition_dir_name("my-topic", 12) == "my-topic-12"
    assert parse_partition_dir("my-topic-12") == ("my-topic", 12)
    assert parse_partition_dir("orders-0") == ("orders", 0)
    assert parse_partition_dir("--1") == ("-", 1)  # "-" is a legal topic name
    for not_a_partition in ["orders", "orders-", "orders-01", "orders-x", ".lock", "orders-0.abc-delete"]:
        assert parse_partition_dir(not_a_partition) is None, not_a_partition
