"""Kafka's default partitioner for keyed records: ``murmur2(key) & 0x7fffffff % partitions``.

Byte-for-byte the hash of Kafka's ``Utils.murmur2`` (seed 0x9747b28c), so a key
lands in the same partition number as it would with a Kafka producer — which
keeps per-key order when a workload moves between Kafka and seglog. Records
without a key are spread round-robin (Kafka's clients use a "sticky" partition
per batch; seglog's ``produce`` sends one record per call, so round-robin is the
equivalent).

Must not import: ``tools``.
"""

from __future__ import annotations

import itertools
from typing import Final

__all__ = ["KeyPartitioner", "murmur2", "partition_for_key"]

_SEED: Final = 0x9747B28C
_M: Final = 0x5BD1E995
_MASK32: Final = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 of ``data``, as a signed Java int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    whole = length & ~3
    for i in range(0, whole, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    rest = length & 3
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for ``key`` among ``partitions``."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


class KeyPartitioner:
    """Picks a partition: by key hash when there is a key, round-robin otherwise."""

    __slots__ = ("_counter",)

    def __init__(self) -> None:
        self._counter = itertools.count()

    def partition(self, key: bytes | None, partitions: int) -> int:
        if key is None:
            return next(self._counter) % partitions
        return partition_for_key(key, partitions)
