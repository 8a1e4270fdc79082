"""ListGroups (key 16), versions 0-5: every group, with its protocol type (and state, version 4 on).

Groups with members and groups that only have committed offsets (``Empty``)
are listed. Version 4's ``states_filter`` keeps groups in those states
(case-insensitive); version 5's ``types_filter`` keeps ``classic`` groups, the
only type seglog has (the KIP-848 ``consumer`` type is not served).

Must not import: ``tools``.
"""

from __future__ import annotations

from typing import Final

from kio.schema.errors import ErrorCode
from kio.schema.list_groups.v5.response import ListedGroup, ListGroupsResponse
from kio.schema.types import GroupId

from seglog.server.apis._common import NO_THROTTLE
from seglog.server.broker import Broker
from seglog.server.protocol import DecodedRequest

API_KEY: Final = 16
MIN_VERSION: Final = 0
MAX_VERSION: Final = 5

_CLASSIC: Final = "classic"


async def handle(broker: Broker, request: DecodedRequest) -> ListGroupsResponse:
    body = request.body
    states = {s.lower() for s in getattr(body, "states_filter", ()) or ()}
    types = {t.lower() for t in getattr(body, "types_filter", ()) or ()}
    groups = [] if types and _CLASSIC not in types else [
        g for g in broker.engine.coordinator.list_groups() if not states or g.state.value.lower() in states
    ]
    return ListGroupsResponse(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        groups=tuple(
            ListedGroup(group_id=GroupId(g.group_id), protocol_type=g.protocol_type, group_state=g.state.value,
                        group_type=_CLASSIC)
            for g in groups
        ),
    )
