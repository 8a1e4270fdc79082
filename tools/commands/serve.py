"""``seglog serve``: serve a log directory to Kafka clients over the Kafka wire protocol.

A thin shell over :class:`seglog.server.KafkaServer`: opens the directory
(taking its lock), listens, prints ``listening on HOST:PORT`` on stdout once
connections are accepted, logs one line per connection event and per error on
stderr, and shuts down cleanly (exit 0) on SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from typing import Any

from seglog.engine import Engine
from seglog.server.limits import (
    DEFAULT_GROUP_MAX_SESSION_TIMEOUT_MS,
    DEFAULT_GROUP_MIN_SESSION_TIMEOUT_MS,
    DEFAULT_IDLE_TIMEOUT_MS,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_REQUEST_BYTES,
)
from seglog.tools._output import EXIT_OK, UsageError, add_command, add_log_dir, log_dir_of, run_async

NOTES = """\
Clients bootstrap from the printed address (or --advertise). Served: ApiVersions 0-4,
Metadata 0-12, Produce 3-9, Fetch 4-12, ListOffsets 1-7, CreateTopics 2-7,
DeleteTopics 1-6, DescribeConfigs 1-4, and consumer groups (Kafka's classic protocol):
FindCoordinator 0-2, JoinGroup 0-5, SyncGroup 0-3, Heartbeat 0-3, LeaveGroup 0-3,
OffsetCommit 2-8, OffsetFetch 1-7, ListGroups 0-5, DescribeGroups 0-5 (docs/KAFKA.md).
One node, no replication, no TLS/SASL, no transactions yet. `seglog groups` shows the
groups, their members and lag while the server runs."""


def register(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "serve",
        help="serve a log directory to Kafka clients (the Kafka wire protocol)",
        description="Serve a log directory over the Kafka wire protocol, so that Kafka clients "
        "(aiokafka, kafka-python, confluent-kafka, kcat, ...) produce, fetch and look up offsets.",
        examples=[
            "seglog serve --log-dir data --listen 127.0.0.1:9092",
            "seglog serve --log-dir data --listen 0.0.0.0:9092 --advertise myhost:9092 --auto-create-partitions 3",
        ],
        notes=NOTES,
        func=serve,
    )
    add_log_dir(p)
    p.add_argument("--listen", default="127.0.0.1:9092", metavar="HOST:PORT",
                   help="address to listen on; port 0 picks a free port (default 127.0.0.1:9092)")
    p.add_argument("--advertise", metavar="HOST:PORT",
                   help="address clients are told to connect to (default: the bound address)")
    p.add_argument("--auto-create-partitions", type=int, default=1, metavar="N",
                   help="partitions of a topic created on first use (default 1)")
    p.add_argument("--no-auto-create", action="store_true",
                   help="do not create topics on first use (Metadata/Produce of an unknown topic fail)")
    p.add_argument("--max-connections", type=int, default=DEFAULT_MAX_CONNECTIONS, metavar="N",
                   help=f"connections open at once; more are closed on arrival (default {DEFAULT_MAX_CONNECTIONS})")
    p.add_argument("--max-request-bytes", type=int, default=DEFAULT_MAX_REQUEST_BYTES, metavar="BYTES",
                   help="largest request frame; larger ones close the connection "
                   f"(default {DEFAULT_MAX_REQUEST_BYTES}, Kafka's socket.request.max.bytes)")
    p.add_argument("--idle-timeout-ms", type=int, default=DEFAULT_IDLE_TIMEOUT_MS, metavar="MS",
                   help="close a connection silent this long, between or inside frames "
                   f"(default {DEFAULT_IDLE_TIMEOUT_MS}, Kafka's connections.max.idle.ms)")
    p.add_argument("--group-min-session-timeout-ms", type=int, default=DEFAULT_GROUP_MIN_SESSION_TIMEOUT_MS,
                   metavar="MS", help="shortest session timeout a group member may ask for "
                   f"(default {DEFAULT_GROUP_MIN_SESSION_TIMEOUT_MS}, Kafka's group.min.session.timeout.ms)")
    p.add_argument("--group-max-session-timeout-ms", type=int, default=DEFAULT_GROUP_MAX_SESSION_TIMEOUT_MS,
                   metavar="MS", help="longest session timeout a group member may ask for "
                   f"(default {DEFAULT_GROUP_MAX_SESSION_TIMEOUT_MS}, Kafka's group.max.session.timeout.ms)")
    p.add_argument("--max-open-files", type=int, default=None, metavar="N",
                   help="descriptors and index maps segments may hold at once; idle ones close and reopen "
                   "on next use (default: half the soft ulimit -n; LevelDB's max_open_files)")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                   help="what is logged on stderr (default INFO: every connection event and error)")


def serve(args: argparse.Namespace) -> int:
    path = log_dir_of(args, must_exist=False)
    for name in ("auto_create_partitions", "max_connections", "max_request_bytes", "idle_timeout_ms",
                 "group_min_session_timeout_ms", "group_max_session_timeout_ms"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    logging.basicConfig(level=args.log_level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s")
    run_async(_serve(args, path))
    return EXIT_OK


async def _serve(args: argparse.Namespace, path: Any) -> None:
    # Imported here: the protocol library takes a moment to load, and only this command needs it.
    from seglog.server import KafkaServer

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        async with Engine.open(path, max_open_files=args.max_open_files) as engine, KafkaServer(
            engine,
            args.listen,
            advertise=args.advertise,
            auto_create=not args.no_auto_create,
            auto_create_partitions=args.auto_create_partitions,
            max_connections=args.max_connections,
            max_request_bytes=args.max_request_bytes,
            idle_timeout_ms=args.idle_timeout_ms,
            group_min_session_timeout_ms=args.group_min_session_timeout_ms,
            group_max_session_timeout_ms=args.group_max_session_timeout_ms,
        ) as server:
            host, port = server.address
            print(f"listening on {host}:{port}", flush=True)
            await stop.wait()
            logging.getLogger("seglog.server").info("shutting down (signal received)")
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
