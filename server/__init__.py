"""seglog's Kafka wire-protocol front end: real Kafka clients produce, fetch and look up offsets.

Owns: the listening socket and its connections (``seglog.server.server``), the
protocol codec over ``kio``'s generated message classes
(``seglog.server.protocol``), one module per Kafka API under ``seglog.server.apis``, the
conversion between Kafka's RecordBatch v2 and engine records
(``seglog.server.records``), the ``seglog_kafka`` pytest fixture
(``seglog.server.pytest_plugin``), and the errors of all that (``seglog.server.errors``).

Everything here goes through the engine's public API; nothing below this
layer knows the Kafka protocol. Must not import: ``tools``.

    from seglog import Engine
    from seglog.server import KafkaServer

    async with Engine.open("data") as engine:
        async with KafkaServer(engine, "127.0.0.1:0") as server:
            server.bootstrap_servers   # "127.0.0.1:PORT": give it to any Kafka client
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from seglog.server.limits import DEFAULT_IDLE_TIMEOUT_MS, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_REQUEST_BYTES

if TYPE_CHECKING:
    from seglog.server.server import KafkaServer

__all__ = [
    "DEFAULT_IDLE_TIMEOUT_MS",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_REQUEST_BYTES",
    "KafkaServer",
]


def __getattr__(name: str) -> Any:
    # Loaded on first use: the pytest plugin imports this package at pytest start-up, and kio's
    # message classes (hundreds of modules, Hypothesis hooks) should load only when a server is used.
    if name == "KafkaServer":
        return getattr(importlib.import_module("seglog.server.server"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
