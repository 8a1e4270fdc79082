"""seglog's Kafka wire-protocol front end: real Kafka clients produce, fetch and look up offsets.

Owns: the listening socket and its connections (``server.server``), the
protocol codec over ``kio``'s generated message classes
(``server.protocol``), one module per Kafka API under ``server.apis``, the
conversion between Kafka's RecordBatch v2 and engine records
(``server.records``), the ``seglog_kafka`` pytest fixture
(``server.pytest_plugin``), and the errors of all that (``server.errors``).

Everything here goes through the engine's public API; nothing below this
layer knows the Kafka protocol. Must not import: ``tools``.

    from seglog import Engine
    from seglog.server import KafkaServer

    async with Engine.open("data") as engine:
        async with KafkaServer(engine, "127.0.0.1:0") as server:
            server.bootstrap_servers   # "127.0.0.1:PORT": give it to any Kafka client
"""

from seglog.server.server import (
    DEFAULT_IDLE_TIMEOUT_MS,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_REQUEST_BYTES,
    KafkaServer,
)

__all__ = [
    "DEFAULT_IDLE_TIMEOUT_MS",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_REQUEST_BYTES",
    "KafkaServer",
]
