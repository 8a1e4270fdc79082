from __future__ import annotations

from collections import Counter

import pytest

from seglog.engine.partitioner import KeyPartitioner, murmur2, partition_for_key

# Apache Kafka's UtilsTest.testMurmur2 vectors: placement must match a Kafka producer's.
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
    b"": 275646681,
}


@pytest.mark.parametrize(("key", "expected"), KAFKA_VECTORS.items())
def test_murmur2_matches_kafka(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_partition_uses_to_positive_modulo() -> None:
    # (-790332482 & 0x7fffffff) % 50 == 16
    assert partition_for_key(b"foobar", 50) == 16


def test_same_key_same_partition_and_null_keys_round_robin() -> None:
    p = KeyPartitioner()
    assert {p.partition(b"user-1", 7) for _ in range(10)} == {partition_for_key(b"user-1", 7)}
    counts = Counter(p.partition(None, 3) for _ in range(30))
    assert counts == {0: 10, 1: 10, 2: 10}
