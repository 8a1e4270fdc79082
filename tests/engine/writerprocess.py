"""A writer Engine in a child process, driven command by command over a pipe (tests of followers).

Every command is answered only after the writer finished it (an append has
returned, a roll or retention pass is done): the reply is the handshake that
orders the test, never a sleep. The child is started with ``spawn``, so it
shares nothing with the test process but the files.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import traceback
from collections.abc import AsyncIterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

REPLY_TIMEOUT_S = 60.0  # a child that stops answering fails the test instead of hanging it


def _serve(conn: Connection, directory: str, config: dict[str, Any]) -> None:
    from seglog.engine import Engine, LogConfig, Record

    async def main() -> None:
        engine = await Engine.open(directory, LogConfig(**config), retention_check_interval_ms=3_600_000)
        conn.send(("ok", None))
        transactions: dict[str, Any] = {}
        try:
            while True:
                try:
                    command, *args = await asyncio.to_thread(conn.recv)
                except EOFError:  # the test ended without "exit" (it failed): stop quietly
                    return
                try:
                    if command == "exit":
                        conn.send(("ok", None))
                        return
                    if command == "create":
                        topic, partitions, overrides = args
                        await engine.create_topic(topic, partitions, overrides)
                        result: Any = None
                    elif command == "append":
                        topic, partition, values, timestamps = args
                        records = [Record(v, timestamp=t) for v, t in zip(values, timestamps, strict=True)]
                        appended = await engine.log(topic, partition).append(records)
                        result = (appended.first_offset, appended.last_offset)
                    elif command == "appends":  # one append per value: many small batches
                        topic, partition, values, timestamps = args
                        plog = engine.log(topic, partition)
                        for v, t in zip(values, timestamps, strict=True):
                            await plog.append([Record(v, timestamp=t)])
                        result = plog.log_end_offset
                    elif command == "txn_begin":  # a native transaction, left open until "txn_end"
                        txn = engine.transaction(args[0])
                        await txn.begin()
                        transactions[args[0]] = txn
                        result = None
                    elif command == "txn_append":
                        transactional_id, topic, partition, values = args
                        appended = await transactions[transactional_id].append(
                            topic, partition, [Record(v) for v in values])
                        result = (appended.first_offset, appended.last_offset)
                    elif command == "txn_end":
                        transactional_id, commit = args
                        txn = transactions.pop(transactional_id)
                        await (txn.commit() if commit else txn.abort())
                        result = None
                    elif command == "roll":
                        await engine.log(*args).roll()
                        result = engine.log(*args).segment_count
                    elif command == "retention":
                        result = await engine.enforce_retention()
                    elif command == "delete_before":
                        topic, partition, offset = args
                        result = await engine.log(topic, partition).delete_records_before(offset)
                    elif command == "delete_topic":
                        await engine.delete_topic(args[0])
                        result = None
                    elif command == "state":
                        plog = engine.log(*args)
                        result = (plog.log_start_offset, plog.log_end_offset, plog.segment_base_offsets())
                    elif command == "reopen":  # a clean close (indexes and .log trimmed), then open again
                        await engine.close()
                        engine = await Engine.open(
                            directory, LogConfig(**config), retention_check_interval_ms=3_600_000
                        )
                        result = None
                    else:
                        raise ValueError(f"unknown command {command!r}")
                except Exception:
                    conn.send(("error", traceback.format_exc()))
                else:
                    conn.send(("ok", result))
        finally:
            await engine.close()

    asyncio.run(main())


class WriterProcess:
    """The test's end of the pipe: ``await writer.call("append", "t", 0, [b"v"], [1])``."""

    def __init__(self, conn: Connection, process: multiprocessing.process.BaseProcess) -> None:
        self._conn = conn
        self.process = process

    async def _reply(self) -> Any:
        # Received in a thread: the test's event loop (and the follower on it) keeps running meanwhile.
        ready = await asyncio.to_thread(self._conn.poll, REPLY_TIMEOUT_S)
        if not ready:
            raise TimeoutError(f"the writer process (pid {self.process.pid}) did not answer")
        status, result = self._conn.recv()
        if status != "ok":
            raise AssertionError(f"the writer process failed:\n{result}")
        return result

    async def call(self, command: str, *args: Any) -> Any:
        self._conn.send((command, *args))
        return await self._reply()

    async def kill(self) -> None:
        """SIGKILL the writer (a crash: no clean close); the context manager then only reaps it."""
        self.killed = True
        self.process.kill()
        await asyncio.to_thread(self.process.join)

    killed = False


@contextlib.asynccontextmanager
async def writer_process(directory: Path, **config: Any) -> AsyncIterator[WriterProcess]:
    """Start a writer Engine on ``directory`` (``LogConfig(**config)``) in a child process; stop it after."""
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    process = context.Process(target=_serve, args=(theirs, str(directory), config), daemon=True)
    process.start()
    theirs.close()
    writer = WriterProcess(ours, process)
    try:
        await writer._reply()  # the writer holds the directory now
        yield writer
        if not writer.killed:
            await writer.call("exit")
    finally:
        ours.close()  # after a failure the child's next receive ends it: no waiting for a timeout
        await asyncio.to_thread(process.join, REPLY_TIMEOUT_S)
        if process.is_alive():
            process.kill()
            await asyncio.to_thread(process.join)
