"""The pacing clock (absolute deadlines, sleep then spin) and the latency/throughput statistics."""

from __future__ import annotations

import asyncio

import pytest
from hdrh.histogram import HdrHistogram
from loop_lateness import loop_lateness, percentiles

from seglog.tools.replay.pacing import Pacer, parse_speed
from seglog.tools.replay.stats import Latency, Throughput, throughput_interval_ns


@pytest.mark.parametrize(("text", "speed"), [("1", 1.0), ("2.5", 2.5), ("10x", 10.0), ("MAX", None), ("inf", None)])
def test_parse_speed(text: str, speed: float | None) -> None:
    assert parse_speed(text) == speed


@pytest.mark.parametrize("text", ["0", "-1", "fast", "x", "1e999", "nan"])
def test_parse_speed_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="speed"):
        parse_speed(text)


def test_deadlines_are_absolute_and_scaled_by_speed() -> None:
    now = [1_000]
    pacer = Pacer(4.0, clock_ns=lambda: now[0])
    origin = pacer.start(lead_ns=10)
    assert origin == 1_010
    assert pacer.deadline_ns(0) == 1_010
    assert pacer.deadline_ns(4_000_000_000) == 1_010 + 1_000_000_000
    unpaced = Pacer(None, clock_ns=lambda: now[0])
    unpaced.start()
    assert not unpaced.paced and unpaced.deadline_ns(10**12) == unpaced.origin_ns
    with pytest.raises(ValueError, match="speed"):
        Pacer(0.0)


async def test_wait_until_never_returns_early_and_is_late_by_little_more_than_the_loop_itself() -> None:
    # 150 deadlines 3 ms apart (0.45 s); the accumulated-sleep approach would drift by ~0.5 ms per step,
    # 75 ms over these steps. The bounds are the loop's own lateness, measured just before, plus a
    # margin for the pacer (its sleep may wake late by up to its spin time); a stall of the machine
    # during one attempt spoils that attempt only.
    for _attempt in range(3):
        yardstick = await loop_lateness()
        pacer = Pacer(1.0)
        origin = pacer.start(lead_ns=5_000_000)
        lags = []
        for i in range(150):
            deadline = origin + i * 3_000_000
            woke = await pacer.wait_until(deadline)
            assert woke >= deadline
            lags.append(woke - deadline)
        drift = percentiles(lags[-30:]).p50 - percentiles(lags[:30]).p50
        got = percentiles(lags)
        on_time = (
            got.p50 < yardstick.p90 + 1_000_000
            and got.p90 < yardstick.max + 5_000_000
            and drift < yardstick.max + 5_000_000
        )
        if on_time:
            return
    raise AssertionError(f"lateness {got}, drift {drift} ns; the loop itself: {yardstick}")


async def test_max_speed_does_not_wait() -> None:
    pacer = Pacer(None, clock_ns=lambda: 0)
    pacer.start()
    waiting = pacer.wait_until(10**10).__await__()
    with pytest.raises(StopIteration) as returned:
        next(waiting)  # finishes without ever suspending
    assert returned.value.value == 0


async def test_spinning_producers_do_not_block_each_other() -> None:
    # A clock that only the test moves: a producer spinning towards its deadline must let the loop
    # run the others (here one whose deadline has passed) instead of holding it until time moves.
    now = [0]
    reads = 0

    def clock() -> int:
        nonlocal reads
        reads += 1
        if reads > 100_000:  # a spin that never yields would hold the loop for ever: fail instead
            raise AssertionError("the spinning producer never let the loop run the others")
        return now[0]

    pacer = Pacer(1.0, spin_ns=1_000_000, clock_ns=clock)
    origin = pacer.start()
    spinning = asyncio.ensure_future(pacer.wait_until(origin + 500_000))  # within the spin: no sleep
    due = asyncio.ensure_future(pacer.wait_until(origin))
    assert await asyncio.wait_for(due, 30) == 0
    assert not spinning.done()
    now[0] = 500_000
    assert await asyncio.wait_for(spinning, 30) == 500_000


def test_latency_summary_percentiles_are_sane() -> None:
    lat = Latency()
    for ms in range(1, 1001):
        lat.record_ns(ms * 1_000_000)
    s = lat.summary()
    assert s["count"] == 1000
    assert s["p50"] == pytest.approx(500, rel=0.002)
    assert s["p99"] == pytest.approx(990, rel=0.002)
    assert s["min"] == pytest.approx(1, rel=0.002) and s["max"] == pytest.approx(1000, rel=0.002)
    assert s["mean"] == pytest.approx(500.5, rel=0.001)
    keys = ["p50", "p75", "p90", "p95", "p99", "p99_9", "p99_99", "max"]
    assert [s[k] for k in keys] == sorted(s[k] for k in keys)
    decoded = HdrHistogram.decode(lat.encode().encode())
    assert decoded.get_total_count() == 1000
    assert Latency().summary() == {"count": 0}
    neg = Latency()
    neg.record_ns(-5)
    assert neg.summary()["max"] == 0.001  # floored at the histogram's lowest value, 1 µs


def test_throughput_series_has_every_bucket() -> None:
    tp = Throughput(interval_ns=100_000_000)
    tp.add(50_000_000, 10, 1000)
    tp.add(350_000_000, 5, 500)
    series = tp.series()
    assert [p["t_s"] for p in series] == [0.0, 0.1, 0.2, 0.3]
    assert [p["records_per_s"] for p in series] == [100.0, 0.0, 0.0, 50.0]
    assert series[0]["mb_per_s"] == pytest.approx(0.01)
    assert Throughput(1).series() == []


def test_throughput_interval() -> None:
    assert throughput_interval_ns(120) == 1_000_000_000
    assert throughput_interval_ns(12) == 200_000_000
    assert throughput_interval_ns(0.1) == 50_000_000
