"""The server's default limits, Kafka's broker defaults (kept apart so the command line reads them cheaply).

Must not import: ``tools``.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "DEFAULT_GROUP_MAX_SESSION_TIMEOUT_MS",
    "DEFAULT_GROUP_MIN_SESSION_TIMEOUT_MS",
    "DEFAULT_IDLE_TIMEOUT_MS",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_REQUEST_BYTES",
]

DEFAULT_MAX_REQUEST_BYTES: Final = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes
DEFAULT_IDLE_TIMEOUT_MS: Final = 600_000  # Kafka's connections.max.idle.ms
DEFAULT_MAX_CONNECTIONS: Final = 1000  # Kafka's max.connections is unbounded; a file-descriptor-friendly bound
DEFAULT_GROUP_MIN_SESSION_TIMEOUT_MS: Final = 6_000  # Kafka's group.min.session.timeout.ms
DEFAULT_GROUP_MAX_SESSION_TIMEOUT_MS: Final = 1_800_000  # Kafka's group.max.session.timeout.ms
