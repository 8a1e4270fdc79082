"""``KafkaServer``: the listening socket, one task per connection, and the dispatch of requests to the APIs.

Concurrency contract: a ``KafkaServer`` runs on the event loop of its
``Engine``. Each connection is one task that reads a request, answers it, and
only then reads the next, so answers leave in the order requests came (the
clients match them first-in first-out) and a producer's requests to one
partition are appended in order. A slow request (a long-polling Fetch) holds
up only its own connection, as on a Kafka broker.

Defences, each ending the connection with one log line and never touching the
others: a frame size below the 8-byte request header start or above
``max_request_bytes`` (Kafka's ``socket.request.max.bytes``, 100 MiB) is
refused before anything is read or allocated for it; a connection silent for
``idle_timeout_ms`` (Kafka's ``connections.max.idle.ms``) in the middle of a
frame or between frames is closed; an unknown API key, an unsupported version
(except ApiVersions, answered as Kafka does) or a body that does not decode
closes the connection; connections beyond ``max_connections`` are closed on
arrival.

Must not import: ``tools``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import warnings
from collections.abc import Callable
from types import TracebackType
from typing import Final, Self

from seglog.engine import Engine
from seglog.engine.errors import InvalidConfigError, SeglogError, StorageError
from seglog.server.apis import APIS, api_versions
from seglog.server.broker import Broker
from seglog.server.errors import FrameError
from seglog.server.limits import (
    DEFAULT_GROUP_MAX_SESSION_TIMEOUT_MS,
    DEFAULT_GROUP_MIN_SESSION_TIMEOUT_MS,
    DEFAULT_IDLE_TIMEOUT_MS,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_REQUEST_BYTES,
)
from seglog.server.protocol import REQUEST_PREFIX_SIZE, decode_request, encode_response, peek_request

__all__ = [
    "DEFAULT_IDLE_TIMEOUT_MS",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_REQUEST_BYTES",
    "KafkaServer",
    "parse_address",
]

log = logging.getLogger("seglog.server")

_SIZE: Final = struct.Struct(">i")


def parse_address(address: str, *, what: str = "address") -> tuple[str, int]:
    """``"HOST:PORT"`` (``"[::1]:9092"`` for IPv6) as ``(host, port)``.

    Raises:
        InvalidConfigError: no port, a port outside 0-65535, or an empty host.
    """
    host, sep, port_text = address.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise InvalidConfigError(
            f"{what} must be HOST:PORT with a port in 0-65535 (e.g. 127.0.0.1:9092), got {address!r}"
        )
    return host, int(port_text)


class KafkaServer:
    """Serves an open ``Engine`` to Kafka clients over the Kafka wire protocol.

    ::

        async with Engine.open("data") as engine:
            async with KafkaServer(engine, "127.0.0.1:0") as server:
                server.bootstrap_servers   # "127.0.0.1:PORT": give it to any Kafka client

    ``listen`` is ``HOST:PORT`` (port 0: a free port). ``advertise`` is the
    address clients are told to connect to (Metadata); by default the bound
    one. Topics are created on first use by Metadata and Produce unless
    ``auto_create`` is false, with ``auto_create_partitions`` partitions.
    Consumer groups are coordinated by the engine's coordinator (shared with
    library consumers of the same engine); a JoinGroup whose session timeout
    lies outside ``group_min_session_timeout_ms``-``group_max_session_timeout_ms``
    (Kafka's ``group.min/max.session.timeout.ms``) is refused. The server does
    not own the engine: close the engine after the server.
    """

    def __init__(
        self,
        engine: Engine,
        listen: str = "127.0.0.1:0",
        *,
        advertise: str | None = None,
        auto_create: bool = True,
        auto_create_partitions: int = 1,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        idle_timeout_ms: int = DEFAULT_IDLE_TIMEOUT_MS,
        group_min_session_timeout_ms: int = DEFAULT_GROUP_MIN_SESSION_TIMEOUT_MS,
        group_max_session_timeout_ms: int = DEFAULT_GROUP_MAX_SESSION_TIMEOUT_MS,
    ) -> None:
        self._engine = engine
        self._listen = parse_address(listen, what="listen")
        self._advertise = parse_address(advertise, what="advertise") if advertise is not None else None
        for name, value in (("auto_create_partitions", auto_create_partitions), ("max_connections", max_connections),
                            ("max_request_bytes", max_request_bytes), ("idle_timeout_ms", idle_timeout_ms),
                            ("group_min_session_timeout_ms", group_min_session_timeout_ms),
                            ("group_max_session_timeout_ms", group_max_session_timeout_ms)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidConfigError(f"{name} must be a positive int, got {value!r}")
        if group_min_session_timeout_ms > group_max_session_timeout_ms:
            raise InvalidConfigError(
                f"group_min_session_timeout_ms ({group_min_session_timeout_ms}) is above "
                f"group_max_session_timeout_ms ({group_max_session_timeout_ms})"
            )
        self._session_bounds = (group_min_session_timeout_ms, group_max_session_timeout_ms)
        self._auto_create = auto_create
        self._auto_create_partitions = auto_create_partitions
        self._max_connections = max_connections
        self._max_request_bytes = max_request_bytes
        self._idle_timeout = idle_timeout_ms / 1000
        self._server: asyncio.Server | None = None
        self._broker: Broker | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._bound: tuple[str, int] | None = None
        self._closing = False

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Bind and start accepting connections.

        Raises:
            StorageError: the address cannot be bound (in use, not local...).
        """
        if self._server is not None:
            return
        host, port = self._listen
        try:
            self._server = await asyncio.start_server(self._serve_connection, host, port)
        except OSError as exc:
            raise StorageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
        bound = self._server.sockets[0].getsockname()
        self._bound = (str(bound[0]), int(bound[1]))
        adv_host, adv_port = self._advertise or self._bound
        if self._advertise is None and adv_host in ("0.0.0.0", "::"):
            # A wildcard cannot be connected to; clients on this machine reach the loopback.
            log.warning("listening on all interfaces: advertising 127.0.0.1; set advertise=HOST:PORT for others")
            adv_host = "127.0.0.1"
        self._broker = Broker(
            self._engine,
            adv_host,
            adv_port,
            auto_create=self._auto_create,
            auto_create_partitions=self._auto_create_partitions,
            api_versions=tuple((a.key, a.min_version, a.max_version) for a in APIS.values()),
            group_min_session_timeout_ms=self._session_bounds[0],
            group_max_session_timeout_ms=self._session_bounds[1],
        )
        log.info("listening on %s:%d (advertised as %s:%d)", *self._bound, adv_host, adv_port)

    @property
    def bootstrap_servers(self) -> str:
        """``HOST:PORT`` that Kafka clients bootstrap from (the advertised address)."""
        broker = self._require_started()
        host = f"[{broker.host}]" if ":" in broker.host else broker.host
        return f"{host}:{broker.port}"

    @property
    def address(self) -> tuple[str, int]:
        """The bound ``(host, port)``."""
        self._require_started()
        assert self._bound is not None
        return self._bound

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def close(self) -> None:
        """Stop accepting, end every connection (requests in flight are cancelled), and wait for them."""
        server, self._server = self._server, None
        if server is None:
            return
        self._closing = True
        server.close()
        tasks = list(self._connections)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()
        log.info("stopped listening on %s:%d", *(self._bound or ("?", 0)))

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        state = "closed" if self._server is None else f"listening on {self._bound[0]}:{self._bound[1]}" if (
            self._bound) else "starting"
        return f"<KafkaServer {state} connections={len(self._connections)}>"

    def __del__(self, _warn: Callable[..., None] = warnings.warn) -> None:
        if getattr(self, "_server", None) is not None:  # (None also when __init__ refused its arguments)
            _warn(f"unclosed {self!r}: use 'async with KafkaServer(...)' or await close()", ResourceWarning,
                  stacklevel=2, source=self)

    def _require_started(self) -> Broker:
        if self._broker is None:
            raise SeglogError("the KafkaServer is not started; use 'async with KafkaServer(...)' or await start()")
        return self._broker

    # -- connections -------------------------------------------------------------------------

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = _peer(writer)
        task = asyncio.current_task()
        if self._server is None or task is None or len(self._connections) >= self._max_connections:
            log.warning("connection from %s refused: %d connections open, the limit is %d",
                        peer, len(self._connections), self._max_connections)
            writer.close()
            return
        self._connections.add(task)
        log.info("connection from %s accepted", peer)
        reason = "closed by the client"
        level = logging.WARNING  # a close for any other reason than the client's or the server's own is an error
        try:
            reason = await self._serve_requests(reader, writer, peer)
            level = logging.INFO
        except asyncio.CancelledError:
            reason, level = "the server is closing", logging.INFO
            if not self._closing:
                raise
            # Cancelled by close(): end normally (asyncio's stream callback reports a cancelled
            # connection task as an error on Python 3.11).
            task.uncancel()
        except FrameError as exc:
            reason = str(exc)
        except asyncio.IncompleteReadError:
            reason = "the client closed it in the middle of a frame"
        except TimeoutError:
            reason = f"idle for {self._idle_timeout:g} s (in the middle of a frame, between frames, or not reading)"
        except ConnectionError as exc:
            reason = f"connection lost: {exc}"
        except SeglogError as exc:
            reason = f"the request failed: {exc}"
        except Exception as exc:
            log.exception("connection from %s: internal error", peer)
            reason = f"internal error: {exc!r}"
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await writer.wait_closed()
            log.log(level, "connection from %s closed: %s", peer, reason)

    async def _serve_requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str) -> str:
        broker = self._require_started()
        limit = self._max_request_bytes
        host = "/" + peer.rsplit(":", 1)[0].strip("[]")  # as Kafka reports a member's client host
        while True:
            async with asyncio.timeout(self._idle_timeout):
                head = await reader.read(4)
                if not head:
                    return "closed by the client"
                if len(head) < 4:
                    head += await reader.readexactly(4 - len(head))
            (size,) = _SIZE.unpack(head)
            if size < REQUEST_PREFIX_SIZE or size > limit:
                raise FrameError(
                    f"refused a frame of {size} bytes: a request is {REQUEST_PREFIX_SIZE} to {limit} bytes "
                    "(the limit is max_request_bytes, Kafka's socket.request.max.bytes)"
                )
            async with asyncio.timeout(self._idle_timeout):
                frame = await reader.readexactly(size)
            key, version, correlation_id = peek_request(frame)
            api = APIS.get(key)
            if api is None:
                raise FrameError(f"unknown API key {key} (version {version}, correlation id {correlation_id})")
            if not api.min_version <= version <= api.max_version:
                if key != api_versions.API_KEY:
                    raise FrameError(
                        f"{api.name} version {version} is not served (versions {api.min_version}-{api.max_version}); "
                        "the client should have used ApiVersions"
                    )
                log.info("connection from %s: ApiVersions v%d answered with v0 and UNSUPPORTED_VERSION", peer, version)
                refusal = api_versions.unsupported_version_answer(broker.api_versions)
                answer = encode_response(key, 0, correlation_id, refusal)
            else:
                request = decode_request(frame)._replace(client_host=host)
                response = await api.handle(broker, request)
                if response is None:
                    continue
                answer = encode_response(key, version, correlation_id, response)
            writer.write(answer)
            async with asyncio.timeout(self._idle_timeout):  # a client that stops reading is dropped too
                await writer.drain()


def _peer(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)
