"""``seglog dump``, ``verify``, ``recover --dry-run`` and ``explain`` on hand-built files (no Engine needed)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from cliharness import Result, run_seglog
from segfiles import append_bytes, flip_byte, truncate

from seglog.engine import offline

Cli = Callable[..., Result]


def seg(log_dir: Path, base: int, suffix: str = ".log", partition: int = 0) -> Path:
    return log_dir / f"orders-{partition}" / f"{base:020d}{suffix}"


# ------------------------------------------------------------------------------------------ verify


def test_verify_clean_exits_0(cli: Cli, log_dir: Path) -> None:
    r = cli("verify", log_dir)
    assert r.code == 0 and r.out == ""
    assert "4 segment(s)" in r.err and "consistent" in r.err


def test_verify_corrupted_index_exits_1_and_names_the_file(cli: Cli, log_dir: Path) -> None:
    idx = seg(log_dir, 12, ".index")
    flip_byte(idx, 7)  # the first entry's position
    r = cli("verify", log_dir)
    assert r.code == 1
    (line,) = r.out.splitlines()
    assert line.startswith(f"error [offset-index] {idx} @0 (offset 17): slot 0")
    assert "1 error(s)" in r.err


def test_verify_torn_tail_names_the_position(cli: Cli, log_dir: Path) -> None:
    log = seg(log_dir, 24)
    positions = offline.scan_segment(log, max_batch_bytes=1 << 20, keep_batches=True).positions
    truncate(log, positions[-1] + 10)
    r = cli("verify", "--log-dir", log_dir)
    assert r.code == 1
    line = next(line for line in r.out.splitlines() if "torn write" in line)
    assert f"{log} @{positions[-1]}" in line


def test_verify_json_report(cli: Cli, log_dir: Path) -> None:
    append_bytes(seg(log_dir, 0, ".timeindex"), b"\x00")
    r = cli("verify", log_dir, "--json")
    assert r.code == 1
    doc = json.loads(r.out)
    assert doc["ok"] is False and doc["bad_files"] == [str(seg(log_dir, 0, ".timeindex"))]
    (f,) = doc["findings"]
    assert (f["severity"], f["check"], f["position"]) == ("error", "index-size", 36)


def test_verify_verbose_shows_info(cli: Cli, log_dir: Path) -> None:
    (log_dir / ".clean-shutdown").unlink()
    append_bytes(seg(log_dir, 24, ".index"), bytes(16))  # an active segment's preallocated slots
    quiet = cli("verify", log_dir)
    assert (quiet.code, quiet.out) == (0, "")
    r = cli("verify", log_dir, "-v")
    assert r.code == 0 and r.out.startswith("info [index-size] ")


def test_verify_one_partition_dir_and_deep(cli: Cli, log_dir: Path) -> None:
    r = cli("verify", log_dir / "orders-0", "--deep")
    assert r.code == 0 and "1 partition(s)" in r.err


def test_verify_missing_directory_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    r = cli("verify", tmp_path / "nope")
    assert r.code == 2
    assert r.err.startswith("Error: ") and "no such log directory" in r.err and len(r.err.splitlines()) == 1


def test_verify_uses_the_environment_log_dir(log_dir: Path) -> None:
    flip_byte(seg(log_dir, 0), 30)
    p = run_seglog("verify", env={"SEGLOG_LOG_DIR": str(log_dir)})
    assert p.returncode == 1 and str(seg(log_dir, 0)).encode() in p.stdout


# ------------------------------------------------------------------------------------------ dump


def test_dump_log_headers_and_data(cli: Cli, log_dir: Path) -> None:
    r = cli("dump", seg(log_dir, 12))
    assert r.code == 0
    lines = r.out.splitlines()
    assert len(lines) == 4 and lines[0].startswith("baseOffset: 12 lastOffset: 14 count: 3 position: 0")
    r = cli("dump", seg(log_dir, 12), "--print-data")
    assert r.code == 0 and "| offset: 12 " in r.out and "payload: v0" in r.out
    r = cli("dump", seg(log_dir, 12), "--deep-iteration")
    assert "| offset: 23 " in r.out and "payload" not in r.out
    r = cli("dump", seg(log_dir, 12), "--max-bytes", "100")
    assert len(r.out.splitlines()) == 2


def test_dump_json(cli: Cli, log_dir: Path) -> None:
    r = cli("dump", seg(log_dir, 0), seg(log_dir, 0, ".index"), seg(log_dir, 0, ".timeindex"), "--print-data",
            "--json")
    assert r.code == 0
    files = json.loads(r.out)["files"]
    assert [f["kind"] for f in files] == ["log", "index", "timeindex"]
    assert files[0]["batches"][1]["records"][0] == {"offset": 3, "timestamp": files[0]["batches"][1]["base_timestamp"],
                                                    "key": None, "value": "v0", "headers": []}
    assert files[1]["entries"][0] == {"offset": 5, "position": files[0]["batches"][1]["position"]}
    assert all(f["findings"] == [] for f in files)


def test_dump_index_mismatch_and_sanity(cli: Cli, log_dir: Path) -> None:
    idx = seg(log_dir, 0, ".index")
    entry = idx.read_bytes()[:8]
    position = int.from_bytes(entry[4:], "big")
    idx.write_bytes(entry[:4] + (position + 1).to_bytes(4, "big") + idx.read_bytes()[8:])  # one byte into a batch
    r = cli("dump", idx, "--verify-index-only")
    assert r.code == 1 and r.out == "" and "not the start of a batch" in r.err
    r = cli("dump", idx, "--index-sanity-check")
    assert r.code == 0 and "passed sanity check" in r.err
    append_bytes(idx, b"\x01")
    r = cli("dump", idx, "--index-sanity-check")
    assert r.code == 1 and "not a multiple" in r.err


def test_dump_torn_log_and_unknown_and_missing_files(cli: Cli, log_dir: Path) -> None:
    log = seg(log_dir, 0)
    truncate(log, log.stat().st_size - 3)
    r = cli("dump", log)
    assert r.code == 1 and len(r.out.splitlines()) == 3 and "torn write" in r.err
    other = log_dir / "orders-0" / "topic.json"
    r = cli("dump", other)
    assert r.code == 0 and "Ignoring unknown file" in r.err
    r = cli("dump", log_dir / "nope.log")
    assert r.code == 2 and r.err.startswith("Error: ")


def test_dump_txnindex(cli: Cli, log_dir: Path) -> None:
    from seglog.indexes import AbortedTxn, TransactionIndex

    path = seg(log_dir, 0, ".txnindex")
    txn = TransactionIndex(path, 0)
    txn.append(AbortedTxn(7, 0, 2, 0))
    txn.close()
    r = cli("dump", path)
    assert r.code == 0 and r.out.strip() == "version: 0 producerId: 7 firstOffset: 0 lastOffset: 2 lastStableOffset: 0"


# ------------------------------------------------------------------------------------------ recover --dry-run


def test_recover_dry_run_changes_nothing(cli: Cli, log_dir: Path) -> None:
    (log_dir / ".clean-shutdown").unlink()
    (log_dir / "recovery-point-offset-checkpoint").write_text("0\n1\norders 0 0\n")
    log = seg(log_dir, 12)
    flip_byte(log, 150)
    before = {p: p.read_bytes() for p in log_dir.rglob("*") if p.is_file()}
    r = cli("recover", log_dir, "--dry-run")
    assert r.code == 0
    assert {p: p.read_bytes() for p in log_dir.rglob("*") if p.is_file()} == before
    rows = [line.split("\t") for line in r.out.splitlines()]
    assert rows[0][:3] == ["partition", "segment", "action"]
    actions = {(row[0], row[1]): row[2] for row in rows[1:]}
    assert actions[("orders-0", log.name)] == "truncate"
    assert actions[("orders-0", seg(log_dir, 24).name)] == "delete"
    assert actions[("orders-0", seg(log_dir, 0).name)] == "keep"
    assert "not shut down cleanly" in r.err and "nothing was changed" in r.err


def test_recover_dry_run_json(cli: Cli, log_dir: Path) -> None:
    r = cli("recover", "--log-dir", log_dir, "--dry-run", "--json")
    doc = json.loads(r.out)
    assert r.code == 0 and doc["clean_shutdown"] is True and doc["bytes_truncated"] == 0
    assert {p["partition"] for p in doc["partitions"]} == {0, 1}


# ------------------------------------------------------------------------------------------ explain


def test_explain_offset_text_and_json(cli: Cli, log_dir: Path) -> None:
    r = cli("explain", "orders", "0", "--offset", "17", "--log-dir", log_dir)
    assert r.code == 0
    assert f"segment:       {seg(log_dir, 12)}" in r.out and "result:        offset 17" in r.out
    doc = json.loads(cli("explain", "orders", "0", "--offset", "17", "--log-dir", log_dir, "--json").out)
    assert doc["result_offset"] == 17 and doc["segment_base_offset"] == 12
    assert doc["offset_index_entry"] == {"offset": 17, "position": doc["result_position"]}


def test_explain_timestamp(cli: Cli, log_dir: Path) -> None:
    r = cli("explain", "orders", "0", "--timestamp", "2025-11-22T08:26:40.505Z", "--log-dir", log_dir, "--json")
    doc = json.loads(r.out)
    assert r.code == 0 and doc["result_offset"] == 16 and doc["segment_base_offset"] == 12
    r = cli("explain", "orders", "0", "--timestamp", "2099-01-01T00:00:00Z", "--log-dir", log_dir)
    assert r.code == 0 and "returns None" in r.out


def test_explain_errors(cli: Cli, log_dir: Path) -> None:
    r = cli("explain", "orders", "9", "--offset", "0", "--log-dir", log_dir)
    assert r.code == 1 and r.err.startswith("Error: ") and len(r.err.splitlines()) == 1
    r = cli("explain", "orders", "0", "--log-dir", log_dir)
    assert r.code == 2  # --offset or --timestamp is required
    r = cli("explain", "orders", "0", "--timestamp", "yesterday", "--log-dir", log_dir)
    assert r.code == 2 and "not a time" in r.err


def test_explain_subprocess(log_dir: Path) -> None:
    p = run_seglog("explain", "orders", "0", "--offset", "5", "--log-dir", log_dir)
    assert p.returncode == 0 and b"result:        offset 5" in p.stdout


def test_verify_since(cli: Cli, log_dir: Path) -> None:
    import os

    for p in log_dir.rglob("*"):
        os.utime(p, (1_700_000_000, 1_700_000_000))
    r = cli("verify", log_dir, "--since", "2024-01-01T00:00:00Z")
    assert r.code == 0 and "0 segment(s)" in r.err and "4 segment(s) unchanged since --since, skipped" in r.err
    assert cli("verify", log_dir, "--since", "2023-01-01").err.count("skipped") == 0
