"""The generator of the bundled sample workload (``examples/sample-workload.parquet``).

Deterministic for a seed: the same seed gives byte-identical rows. The
workload is small (about 2,500 rows over 12 s of capture time) and shows what
the format can say:

- four topics: ``orders`` (3 partitions, partitioned by key), ``clicks``
  (4 partitions, keyed and key-less rows), ``payments`` (2 partitions, explicit
  partitions, some tombstones) and ``audit`` (1 partition);
- producers with different arrival shapes: Poisson arrivals for checkout and
  payments, bursts for the web click producers (dozens of records within
  100 ms, several sharing an instant so they go out as one batch);
- keys with Zipf skew (a few customers and users dominate);
- out-of-order record timestamps (buffered mobile clicks, late audit events);
- value-less rows with only ``value_size`` (redacted payloads);
- two consumer sessions replaying recorded reads: ``billing`` fetches
  ``orders`` by offset (only offsets that existed at that time), ``analytics``
  looks up ``clicks`` offsets by time.

Pure and synchronous; no engine import.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import random
from typing import Final

from seglog.engine.partitioner import partition_for_key
from seglog.tools.replay.format import OP_FETCH, OP_FETCH_TIME, TOMBSTONE_SIZE, Workload, WorkloadRow

DEFAULT_SEED: Final = 7
DEFAULT_DURATION_S: Final = 12.0
# Capture starts here (wall clock), so record timestamps look like a real morning.
BASE_TIME: Final = dt.datetime(2026, 11, 22, 10, 0, 0, tzinfo=dt.UTC)
PARTITIONS: Final = {"orders": 3, "clicks": 4, "payments": 2, "audit": 1}


def _zipf_weights(n: int, s: float) -> list[float]:
    return list(itertools.accumulate(1.0 / (k**s) for k in range(1, n + 1)))


def _poisson_times(rng: random.Random, rate_per_s: float, duration_s: float) -> list[float]:
    out, t = [], rng.expovariate(rate_per_s)
    while t < duration_s:
        out.append(t)
        t += rng.expovariate(rate_per_s)
    return out


def _bursty_times(rng: random.Random, duration_s: float) -> list[float]:
    """Background Poisson traffic plus bursts of 20-60 records within 100 ms, in same-instant groups."""
    times = _poisson_times(rng, 12.0, duration_s)
    t = rng.uniform(0.2, 1.5)
    while t < duration_s - 0.2:
        remaining = rng.randint(20, 60)
        at = t
        while remaining > 0:
            group = min(remaining, rng.randint(1, 4))
            # Round to whole microseconds: the group shares one capture instant.
            times.extend([round(at, 6)] * group)
            remaining -= group
            at += rng.uniform(0.0005, 0.004)
        t += rng.uniform(0.8, 2.0)
    return sorted(times)


def generate_sample(seed: int = DEFAULT_SEED, duration_s: float = DEFAULT_DURATION_S) -> Workload:
    """The sample workload for ``seed`` (see the module docstring)."""
    rng = random.Random(seed)
    base_ns = int(BASE_TIME.timestamp()) * 1_000_000_000
    base_us = int(BASE_TIME.timestamp()) * 1_000_000
    rows: list[WorkloadRow] = []
    seqs: dict[str, itertools.count[int]] = {}

    def add(producer: str, t: float, **kw: object) -> None:
        seq = next(seqs.setdefault(producer, itertools.count()))
        rows.append(WorkloadRow(producer=producer, ts_ns=base_ns + int(t * 1e9), seq=seq, **kw))  # type: ignore[arg-type]

    def ts_us(t: float) -> int:
        return base_us + int(t * 1000) * 1000  # record timestamps are whole milliseconds

    customers = [f"customer-{i:04d}".encode() for i in range(1, 201)]
    customer_cum = _zipf_weights(len(customers), 1.2)
    order_times: list[tuple[float, int]] = []  # (capture time, partition) of each order
    order_no = itertools.count(1000)
    for producer in ("checkout-1", "checkout-2"):
        for t in _poisson_times(rng, 25.0, duration_s):
            key = rng.choices(customers, cum_weights=customer_cum)[0]
            value = json.dumps(
                {"order": next(order_no), "customer": key.decode(), "amount_cents": rng.randint(199, 99_900),
                 "items": rng.randint(1, 6)},
                separators=(",", ":"),
            ).encode()
            headers = (("source", rng.choice((b"web", b"app"))), ("schema", b"order.v2"))
            add(producer, t, topic="orders", key=key, value=value, timestamp_us=ts_us(t), headers=headers)
            order_times.append((t, partition_for_key(key, PARTITIONS["orders"])))

    users = [f"user-{i:05d}".encode() for i in range(1, 1001)]
    user_cum = _zipf_weights(len(users), 1.05)
    for producer in ("web-1", "web-2", "web-3"):
        for t in _bursty_times(rng, duration_s):
            click_key: bytes | None = None if rng.random() < 0.15 else rng.choices(users, cum_weights=user_cum)[0]
            event_t = t - rng.uniform(0.2, 2.0) if rng.random() < 0.06 else t  # buffered mobile clicks
            add(producer, t, topic="clicks", key=click_key, value_size=rng.randint(80, 1500),
                timestamp_us=ts_us(max(event_t, 0.0)))

    for t in _poisson_times(rng, 5.0, duration_s):
        account = f"acct-{rng.randint(1, 40):03d}".encode()
        partition = int.from_bytes(account[-3:], "big") % PARTITIONS["payments"]
        if rng.random() < 0.1:
            add("payments", t, topic="payments", partition=partition, key=account,
                value_size=TOMBSTONE_SIZE, timestamp_us=ts_us(t))
        else:
            value = json.dumps({"account": account.decode(), "balance_cents": rng.randint(0, 10**7)}).encode()
            add("payments", t, topic="payments", partition=partition, key=account, value=value,
                timestamp_us=ts_us(t))

    for t in _poisson_times(rng, 8.0, duration_s):
        late = rng.random() < 0.12
        event_t = max(t - rng.uniform(0.5, 3.0), 0.0) if late else t
        add("auditor", t, topic="audit", partition=0, value=f"audit event at {t:.3f}s".encode(),
            timestamp_us=ts_us(event_t), headers=(("late", b"1" if late else b"0"),))

    order_times.sort()
    for t in _poisson_times(rng, 2.0, duration_s):
        partition = rng.randrange(PARTITIONS["orders"])
        produced = sum(1 for ot, p in order_times if ot < t - 0.05 and p == partition)
        if produced == 0:
            continue
        add("billing", t, topic="orders", partition=partition, op=OP_FETCH,
            offset=rng.randrange(produced), max_bytes=64 * 1024)
    for t in _poisson_times(rng, 2.0, duration_s):
        add("analytics", t, topic="clicks", partition=rng.randrange(PARTITIONS["clicks"]), op=OP_FETCH_TIME,
            timestamp_us=ts_us(max(t - rng.uniform(0.5, 5.0), 0.0)))

    rows.sort(key=lambda r: (r.ts_ns, r.producer, r.seq))
    return Workload(rows, dict(PARTITIONS), f"<sample seed={seed}>")
