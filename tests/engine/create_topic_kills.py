"""Run by test_atomic_topics.py: SIGKILL a create_topic (or delete_topic) at each of its file-system steps.

Usage: ``python create_topic_kills.py BASE_DIR RESULT_JSON create|delete [LAST_STEP]``

For K = 1, 2, 3, ...: fork a child that opens an engine in ``BASE_DIR/K`` and calls
``create_topic("t", partitions=3, config={"retention.ms": 123456})`` (``delete``: creates that
topic, appends a record to each partition, then calls ``delete_topic("t")``) with every call that
changes the file system (mkdir, an open for writing, write, fsync, rename, unlink, rmdir, truncate,
fallocate) counted from the call on; the K-th one stops the child before it runs and tells this
process, which SIGKILLs it there. When the call finishes before step K, the child SIGKILLs itself
right after it returned, and the loop ends. With ``LAST_STEP``, after step LAST_STEP comes only that
last run. Deterministic up to the first step a background task takes (a deleted partition's
removal): each directory holds what K-1 steps made. The parent test opens every directory and
checks the topic is complete or absent.

The children are forked from this process before it starts any thread (forking a process that
runs threads is unsafe), so each costs a fork, not an interpreter start.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from seglog.engine import Engine, Record

TOPIC = "t"
PARTITIONS = 3
OVERRIDES = {"retention.ms": 123456}
QUIET_MS = 3_600_000  # no background work (checkpoints, retention, flushes) during the create
_REPORT: Final = os.write  # reports are not steps: bound before the counting wrappers go in

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_MUTATIONS = (
    "mkdir", "rename", "replace", "unlink", "remove", "rmdir", "write", "pwrite", "pwritev",
    "fsync", "fdatasync", "ftruncate", "truncate", "posix_fallocate",
)


def _arm(stop_at: int, report_fd: int) -> Callable[[], int]:
    """Count file-system changes from now on; stop (forever) at number ``stop_at``. Returns the counter."""
    lock = threading.Lock()
    count = 0

    def step(name: str, target: object) -> None:
        nonlocal count
        with lock:
            count += 1
            here = count
        if here == stop_at:
            _REPORT(report_fd, json.dumps({"step": here, "op": name, "path": str(target)}).encode() + b"\n")
            threading.Event().wait()  # stopped here until the SIGKILL

    def counted(name: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            step(name, args[0] if args else "")
            return call(*args, **kwargs)

        return wrapper

    original_open = os.open

    def open_counted(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & _WRITE_FLAGS:
            step("open", path)
        return original_open(path, flags, *args, **kwargs)

    for name in _MUTATIONS:
        setattr(os, name, counted(name, getattr(os, name)))
    os.open = open_counted  # type: ignore[assignment]
    return lambda: count


def value(partition: int) -> bytes:
    return f"record of partition {partition}".encode()


async def _run(mode: str, directory: Path, stop_at: int, report_fd: int) -> None:
    engine = await Engine.open(
        directory, retention_check_interval_ms=QUIET_MS, checkpoint_interval_ms=QUIET_MS,
        flush_check_interval_ms=QUIET_MS,
    )
    if mode == "delete":
        await engine.create_topic(TOPIC, partitions=PARTITIONS, config=OVERRIDES)
        for partition in range(PARTITIONS):
            await engine.log(TOPIC, partition).append([Record(value(partition))])
    steps = _arm(stop_at, report_fd)
    if mode == "delete":
        await engine.delete_topic(TOPIC)
    else:
        await engine.create_topic(TOPIC, partitions=PARTITIONS, config=OVERRIDES)
    _REPORT(report_fd, json.dumps({"done": steps()}).encode() + b"\n")
    os.kill(os.getpid(), signal.SIGKILL)  # a crash right after create_topic returned


def _child(mode: str, directory: Path, stop_at: int, report_fd: int) -> None:
    try:
        asyncio.run(_run(mode, directory, stop_at, report_fd))
    except BaseException as exc:  # reported, so that the parent test can say what went wrong
        _REPORT(report_fd, json.dumps({"error": repr(exc)}).encode() + b"\n")
    os._exit(1)


def _read_line(fd: int, timeout_s: float) -> str:
    data = b""
    while not data.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], timeout_s)
        if not ready:
            return json.dumps({"error": f"no report within {timeout_s} s"})
        chunk = os.read(fd, 4096)
        if not chunk:
            return json.dumps({"error": "the child exited without a report"})
        data += chunk
    return data.decode()


def main(base: Path, result_path: Path, mode: str, last_step: int) -> None:
    results: list[dict[str, Any]] = []
    stop_at = 1
    while stop_at < 10_000:
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            _child(mode, base / str(stop_at), stop_at, write_fd)
        os.close(write_fd)
        report = json.loads(_read_line(read_fd, 60))
        os.close(read_fd)
        if "error" not in report:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        report["killed"] = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        report["dir"] = str(base / str(stop_at))
        results.append(report)
        if "step" not in report:
            break
        stop_at = stop_at + 1 if stop_at < last_step else 10_000 - 1  # then one run that completes
    result_path.write_text(json.dumps(results))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 10_000)
