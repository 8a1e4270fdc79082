"""One module per Kafka API, named after it; this table maps API keys to them.

Each module defines ``API_KEY``, ``MIN_VERSION``, ``MAX_VERSION`` (the range
advertised in ApiVersions: every version inside it is served) and
``async handle(broker, request)``, which returns the response built as the
newest version (the core projects it onto the version asked), or ``None`` for
no response (Produce with ``acks=0``). Handlers are thin: decode (done by the
core), call the engine's public API, build the answer.

Must not import: ``tools``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final

from seglog.server.apis import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    api_versions,
    create_topics,
    delete_topics,
    describe_configs,
    describe_groups,
    describe_transactions,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_transactions,
    metadata,
    offset_commit,
    offset_fetch,
    produce,
    sync_group,
    txn_offset_commit,
)
from seglog.server.broker import Broker
from seglog.server.protocol import DecodedRequest

__all__ = ["APIS", "Api"]

Handler = Callable[[Broker, DecodedRequest], Awaitable[Any | None]]


@dataclass(frozen=True, slots=True)
class Api:
    key: int
    name: str
    min_version: int
    max_version: int
    handle: Handler


def _api(module: ModuleType) -> Api:
    return Api(
        module.API_KEY, module.__name__.rsplit(".", 1)[-1], module.MIN_VERSION, module.MAX_VERSION, module.handle
    )


APIS: Final[dict[int, Api]] = {
    api.key: api
    for api in sorted(
        (_api(m) for m in (produce, fetch, list_offsets, metadata, api_versions, create_topics, delete_topics,
                           init_producer_id, describe_configs, find_coordinator, join_group, sync_group, heartbeat,
                           leave_group, offset_commit, offset_fetch, list_groups, describe_groups,
                           add_partitions_to_txn, add_offsets_to_txn, end_txn, txn_offset_commit, describe_transactions,
                           list_transactions)),
        key=lambda a: a.key,
    )
}
