"""The engine-backed commands: topics, produce, consume, offsets, groups, recover; and verify/explain on
directories the real engine wrote (the verifier must find nothing wrong with what the writer leaves behind)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from cliharness import ROOT, Result, run_seglog, seglog_command
from segfiles import T0, truncate

from seglog.engine import offline
from seglog.engine.partitioner import partition_for_key

Cli = Callable[..., Result]

SMALL = ["--config", "segment.bytes=2048", "--config", "index.interval.bytes=128"]


@pytest.fixture
def data(cli: Cli, tmp_path: Path) -> Path:
    path = tmp_path / "data"
    r = cli("topics", "create", "orders", "--partitions", "3", *SMALL, "--log-dir", path)
    assert r.code == 0, r
    return path


def produce(cli: Cli, data: Path, lines: str, *args: str, monkeypatch: pytest.MonkeyPatch) -> Result:
    import io

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(lines.encode())))
    return cli("produce", "orders", "--log-dir", data, *args)


def consume_json(cli: Cli, data: Path, *args: str) -> list[dict[str, object]]:
    r = cli("consume", "orders", "--log-dir", data, "--format", "json", *args)
    assert r.code == 0, r
    return [json.loads(line) for line in r.out.splitlines()]


def fill(cli: Cli, data: Path, monkeypatch: pytest.MonkeyPatch, n: int = 200) -> None:
    lines = "".join(json.dumps({"key": f"k{i % 11}", "value": f"value-{i}", "timestamp": T0 + i * 10}) + "\n"
                    for i in range(n))
    r = produce(cli, data, lines, "--format", "json", monkeypatch=monkeypatch)
    assert r.code == 0, r


# ------------------------------------------------------------------------------------------ topics


def test_topics_create_list_describe_delete(cli: Cli, data: Path) -> None:
    r = cli("topics", "list", "--log-dir", data)
    assert (r.code, r.out) == (0, "orders\n")
    r = cli("topics", "describe", "orders", "--log-dir", data, "--json")
    (doc,) = json.loads(r.out)
    assert [p["partition"] for p in doc["partitions"]] == [0, 1, 2]
    assert doc["overrides"]["segment.bytes"] in (2048, "2048") and doc["config"]["segment.bytes"] == "2048"
    r = cli("topics", "create", "orders", "--log-dir", data)
    assert r.code == 1 and r.err.startswith("Error: ") and "already exists" in r.err
    assert cli("topics", "create", "orders", "--if-not-exists", "--log-dir", data).code == 0
    r = cli("topics", "create", "../evil", "--log-dir", data)
    assert r.code == 1 and r.err.startswith("Error: ") and not (data.parent / "evil-0").exists()
    r = cli("topics", "create", "x", "--config", "segment.bytez=5", "--log-dir", data)
    assert r.code == 1 and "unknown log config" in r.err
    assert cli("topics", "delete", "orders", "--log-dir", data).code == 0
    assert cli("topics", "list", "--log-dir", data).out == ""
    r = cli("topics", "delete", "orders", "--log-dir", data)
    assert r.code == 1 and "unknown topic" in r.err
    assert cli("topics", "delete", "orders", "--if-exists", "--log-dir", data).code == 0


# ------------------------------------------------------------------------------------------ produce / consume


def test_produce_lines_then_consume_them(cli: Cli, data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    r = produce(cli, data, "a:1\nb:2\nc:3\n", "--key-separator", ":", "--header", "src=cli",
                "--timestamp", "2026-11-22T10:00:00Z", "--json", monkeypatch=monkeypatch)
    assert r.code == 0 and "produced 3 record(s)" in r.err
    placed = [json.loads(line) for line in r.out.splitlines()]
    assert sorted(p["partition"] for p in placed) == sorted(partition_for_key(k, 3) for k in (b"a", b"b", b"c"))
    got = consume_json(cli, data)
    assert all(g["partition"] == partition_for_key(str(g["key"]).encode(), 3) for g in got)
    assert sorted((g["key"], g["value"]) for g in got) == [("a", "1"), ("b", "2"), ("c", "3")]
    assert all(g["headers"] == [["src", "cli"]] and g["timestamp"] == 1795341600000 for g in got)
    r = cli("consume", "orders", "--log-dir", data, "--print-key", "--print-metadata", "-p", "0", "-p", "1", "-p", "2")
    assert sorted(line.split("\t")[-2:] for line in r.out.splitlines()) == [["a", "1"], ["b", "2"], ["c", "3"]]


def test_produce_json_binary_and_raw_consume(cli: Cli, data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = json.dumps({"value": {"base64": "AP8="}, "partition": 1, "headers": {"h": "x"}}) + "\n"
    assert produce(cli, data, lines, "--format", "json", monkeypatch=monkeypatch).code == 0
    (rec,) = consume_json(cli, data, "-p", "1")
    assert rec["value"] == {"base64": "AP8="} and rec["key"] is None and rec["headers"] == [["h", "x"]]
    p = run_seglog("consume", "orders", "-p", "1", "--format", "raw", "--delimiter", "", "--log-dir", data)
    assert (p.returncode, p.stdout) == (0, b"\x00\xff")


def test_produce_bad_input_is_a_usage_error(cli: Cli, data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    r = produce(cli, data, "{not json\n", "--format", "json", monkeypatch=monkeypatch)
    assert r.code == 2 and r.err.startswith("Error: line 1: not JSON")
    r = produce(cli, data, "x\n", "--partition", "7", monkeypatch=monkeypatch)
    assert r.code == 2 and "has 3 partition(s)" in r.err
    r = produce(cli, data, "x\n", monkeypatch=monkeypatch)
    assert r.code == 0
    r = cli("produce", "nope", "--log-dir", data)
    assert r.code == 1 and r.err.startswith("Error: ") and "unknown topic" in r.err


def test_consume_by_offset_time_and_limits(cli: Cli, data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fill(cli, data, monkeypatch)
    everything = consume_json(cli, data)
    assert len(everything) == 200
    p0 = [g for g in everything if g["partition"] == 0]
    offsets = [g["offset"] for g in p0]
    assert offsets == list(range(len(p0)))
    assert [g["offset"] for g in consume_json(cli, data, "-p", "0", "--from", "5", "--to-offset", "9")] == [5, 6, 7, 8]
    assert len(consume_json(cli, data, "-n", "7")) == 7
    assert consume_json(cli, data, "--from", "latest") == []
    # The earliest offset whose timestamp is >= T, per partition.
    cut = T0 + 1000
    got = consume_json(cli, data, "--from-time", str(cut))
    assert {g["value"] for g in got} == {f"value-{i}" for i in range(100, 200)}
    got = consume_json(cli, data, "--from-time", str(T0 + 500), "--to-time", "2025-11-22T08:26:41.000Z")
    assert {g["value"] for g in got} == {f"value-{i}" for i in range(50, 100)}
    r = cli("consume", "orders", "--from", "soon", "--log-dir", data)
    assert r.code == 2


def test_consume_with_a_group_commits_and_groups_show_lag(cli: Cli, data: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    fill(cli, data, monkeypatch, n=60)
    assert len(consume_json(cli, data, "--group", "billing", "-p", "0", "-n", "4")) == 4
    assert [g["offset"] for g in consume_json(cli, data, "--group", "billing", "-p", "0", "-n", "2")] == [4, 5]
    r = cli("groups", "list", "--log-dir", data)
    assert r.out == "billing\n"
    rows = json.loads(cli("groups", "describe", "billing", "--log-dir", data, "--json").out)
    (row,) = rows
    assert (row["partition"], row["committed"]) == (0, 6) and row["lag"] == row["log_end_offset"] - 6
    r = cli("groups", "reset", "billing", "--topic", "orders", "--to-earliest", "--log-dir", data)
    assert r.code == 0 and "dry run" in r.err
    assert json.loads(cli("groups", "describe", "billing", "--json", "--log-dir", data).out)[0]["committed"] == 6
    r = cli("groups", "reset", "billing", "--topic", "orders", "--to-datetime", str(T0 + 300), "--execute",
            "--json", "--log-dir", data)
    plan = json.loads(r.out)
    assert r.code == 0 and len(plan) == 3 and plan[0]["previous"] == 6
    after = {row["partition"]: row["committed"] for row in json.loads(
        cli("groups", "describe", "billing", "--json", "--log-dir", data).out)}
    assert after == {p["partition"]: p["new"] for p in plan}
    assert cli("groups", "delete", "billing", "--log-dir", data).code == 0
    r = cli("groups", "describe", "billing", "--log-dir", data)
    assert r.code == 1 and "no committed offsets" in r.err


# ------------------------------------------------------------------------------------------ offsets


def test_offsets(cli: Cli, data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fill(cli, data, monkeypatch)
    latest = cli("offsets", "orders", "--log-dir", data).out.split()
    ends = {int(line.split(":")[1]): int(line.split(":")[2]) for line in latest}
    assert sum(ends.values()) == 200
    assert cli("offsets", "orders", "--time", "earliest", "--log-dir", data).out.split() == [
        "orders:0:0", "orders:1:0", "orders:2:0"]
    rows = json.loads(cli("offsets", "orders", "--time", "max-timestamp", "--json", "--log-dir", data).out)
    assert max(r["timestamp"] for r in rows) == T0 + 1990
    r = cli("offsets", "orders", "--time", "2099-01-01T00:00:00Z", "-p", "1", "--log-dir", data)
    assert r.out == "orders:1:-1\n"
    assert cli("offsets", "orders", "--time", "whenever", "--log-dir", data).code == 2


# ------------------------------------------------------------------------------------------ verify / explain / recover


def test_verify_finds_nothing_wrong_with_what_the_engine_wrote(cli: Cli, data: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    fill(cli, data, monkeypatch, n=600)
    info = offline.describe_log_dir(data)
    assert max(len(p.segments) for p in info.partitions) >= 3  # small segments: several rolls
    r = cli("verify", data, "--deep", "-v")
    assert (r.code, r.out) == (0, ""), r


def test_explain_agrees_with_the_engine(cli: Cli, data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Out-of-order timestamps on one partition.
    ts = [(i * 7919) % 1000 for i in range(150)]
    lines = "".join(json.dumps({"value": f"v{i}", "timestamp": T0 + t, "partition": 0}) + "\n"
                    for i, t in enumerate(ts))
    assert produce(cli, data, lines, "--format", "json", "--batch-size", "3", monkeypatch=monkeypatch).code == 0
    from seglog.engine.engine import Engine
    from seglog.engine.runner import run

    async def engine_answers() -> dict[int, int | None]:
        async with Engine.open(data, read_only=True) as engine:
            log = engine.log("orders", 0)
            out: dict[int, int | None] = {}
            for t in range(-5, 1010, 37):
                hit = await log.offset_for_timestamp(T0 + t)
                out[t] = None if hit is None else hit.offset
            return out

    for t, want in run(engine_answers()).items():
        assert offline.explain_timestamp(data, "orders", 0, T0 + t).result_offset == want, t
    for offset in range(0, 150, 13):
        assert offline.explain_offset(data, "orders", 0, offset).result_offset == offset


def test_recover_dry_run_predicts_what_recover_does(cli: Cli, data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fill(cli, data, monkeypatch, n=300)
    (data / ".clean-shutdown").unlink()
    (data / "recovery-point-offset-checkpoint").write_text("0\n0\n")  # recover every segment
    last = offline.list_segments(data / "orders-1")[-1]
    positions = offline.scan_segment(last.log_path, max_batch_bytes=1 << 20, keep_batches=True).positions
    truncate(last.log_path, positions[-1] + 7)  # a torn write
    plan = json.loads(cli("recover", data, "--dry-run", "--json").out)
    p1 = next(p for p in plan["partitions"] if p["partition"] == 1)
    assert p1["segments"][-1]["action"] == "truncate" and p1["segments"][-1]["valid_bytes"] == positions[-1]
    r = cli("recover", data, "--json")
    assert r.code == 0, r
    assert json.loads(r.out)["partitions"] == plan["partitions"]  # what the dry run said, segment by segment
    assert offline.verify(data).ok
    after = {p.partition: p.log_end_offset for p in offline.describe_log_dir(data).partitions}
    assert after[1] == p1["log_end_offset"]


# ------------------------------------------------------------------------------------------ real processes


def test_produce_and_consume_through_real_processes(data: Path) -> None:
    p = run_seglog("produce", "orders", "--log-dir", data, "--partition", "2", stdin=b"one\ntwo\nthree\n")
    assert p.returncode == 0 and b"produced 3 record(s)" in p.stderr
    p = run_seglog("consume", "orders", "-p", "2", "--log-dir", data)
    assert (p.returncode, p.stdout) == (0, b"one\ntwo\nthree\n")


def test_consume_follow_sees_appends_from_another_process(data: Path) -> None:
    # From the log end: the follower can only print records appended after it said it follows.
    follower = subprocess.Popen(
        [*seglog_command(), "consume", "orders", "-p", "0", "--from", "latest", "--follow", "--poll-ms", "50",
         "-n", "2", "--log-dir", str(data)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
    )
    try:
        assert follower.stderr is not None
        said = follower.stderr.readline()
        assert said.startswith(b"following orders"), said  # it has read to the end and polls
        assert follower.poll() is None  # still waiting: nothing to read yet
        p = run_seglog("produce", "orders", "--log-dir", data, "--partition", "0", stdin=b"x\ny\n")
        assert p.returncode == 0
        out, err = follower.communicate(timeout=60)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
    assert (out, follower.returncode) == (b"x\ny\n", 0), err


def test_a_locked_directory_is_a_one_line_error(data: Path) -> None:
    from seglog.engine.engine import Engine

    async def hold() -> subprocess.CompletedProcess[bytes]:
        async with Engine.open(data):
            return await asyncio.to_thread(run_seglog, "topics", "create", "other", "--log-dir", data)

    p = asyncio.run(hold())
    assert p.returncode == 1
    err = p.stderr.decode()
    assert err.startswith("Error: ") and "another seglog Engine" in err and len(err.splitlines()) == 1


def test_read_only_commands_beside_a_live_engine(data: Path) -> None:
    from seglog.engine import Engine, Record

    async def live() -> list[subprocess.CompletedProcess[bytes]]:
        async with Engine.open(data) as engine:
            log = engine.log("orders", 1)
            for i in range(40):
                await log.append([Record(b"live-%d" % i)])
            commands = (
                ("verify", data),
                ("consume", "orders", "-p", "1", "--log-dir", data),
                ("offsets", "orders", "--log-dir", data),
                ("explain", "orders", "1", "--offset", "39", "--log-dir", data),
            )
            first = [await asyncio.to_thread(run_seglog, *argv) for argv in commands]
            await engine.close()  # trims the indexes the readers looked at
            return first

    verify, consume, offsets, explain = asyncio.run(live())
    assert verify.returncode == 0, verify.stderr  # preallocated index slots of the active segment are info only
    assert consume.stdout.splitlines() == [b"live-%d" % i for i in range(40)]
    assert b"orders:1:40" in offsets.stdout
    assert b"result:        offset 39" in explain.stdout
    assert run_seglog("verify", data).returncode == 0
