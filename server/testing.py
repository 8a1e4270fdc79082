"""``serve_in_thread``: a log directory served over the Kafka protocol from a background thread.

For tests that drive blocking Kafka clients (kafka-python, confluent-kafka)
from plain synchronous code, or that want a server independent of their own
event loop: the engine and the server live on an event loop in a thread of
their own, so the calling thread may block as it likes. The ``seglog_kafka``
pytest fixture is built on it.

Must not import: ``tools``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from seglog.engine import Engine, LogConfig
from seglog.engine.errors import SeglogError
from seglog.server.server import KafkaServer

__all__ = ["serve_in_thread"]

_START_TIMEOUT_S: Final = 60.0


@contextmanager
def serve_in_thread(
    log_dir: str | Path, config: LogConfig | None = None, *, listen: str = "127.0.0.1:0", **server_options: Any
) -> Iterator[str]:
    """Open ``log_dir`` and serve it on ``listen`` from a background thread; yields the bootstrap address.

    ``server_options`` go to :class:`KafkaServer` (``auto_create``,
    ``auto_create_partitions``, ``idle_timeout_ms``...). On exit the server
    and the engine are closed cleanly and the thread joined.

    Raises:
        SeglogError: the engine or the server failed to start (the cause is chained).
    """
    ready = threading.Event()
    state: dict[str, Any] = {}

    async def main() -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()

        def request_stop() -> None:
            # The loop may already be closed: a server that failed (or stopped) lets asyncio.run
            # close it at any moment after it wakes the caller; then there is nothing left to stop.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stop.set)

        state["stop"] = request_stop
        try:
            async with Engine.open(log_dir, config) as engine, KafkaServer(engine, listen, **server_options) as server:
                state["address"] = server.bootstrap_servers
                ready.set()
                await stop.wait()
        except BaseException as exc:
            state["error"] = exc
            raise
        finally:
            ready.set()

    def run() -> None:
        with contextlib.suppress(BaseException):  # reported to the caller through state["error"]
            asyncio.run(main())

    thread = threading.Thread(target=run, name="seglog-kafka-server", daemon=True)
    thread.start()
    if not ready.wait(_START_TIMEOUT_S) or "address" not in state:
        stop = state.get("stop")
        if stop is not None:
            stop()
        thread.join(_START_TIMEOUT_S)
        error = state.get("error")
        raise SeglogError(f"the Kafka server on {log_dir} did not start: {error!r}") from error
    try:
        yield state["address"]
    finally:
        state["stop"]()
        thread.join(_START_TIMEOUT_S)
        if thread.is_alive():
            raise SeglogError(f"the Kafka server on {log_dir} did not stop within {_START_TIMEOUT_S:g} s")
        if "error" in state:
            raise SeglogError(f"the Kafka server on {log_dir} failed: {state['error']!r}") from state["error"]
