"""ApiVersions (key 18), versions 0-4: which APIs and versions this server answers.

Every client sends it first on a new connection and then uses, per API, the
highest version both sides know. A request above version 4 gets the version-0
body with ``UNSUPPORTED_VERSION`` and the full list, as Kafka answers it, so a
newer client retries at a version we serve (kafka-python starts at 4,
librdkafka at 3, aiokafka at 0).

Must not import: ``tools``.
"""

from __future__ import annotations

from typing import Final

from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v4.response import ApiVersion, ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16

from seglog.server.apis._common import NO_THROTTLE
from seglog.server.broker import Broker
from seglog.server.protocol import DecodedRequest

API_KEY: Final = 18
MIN_VERSION: Final = 0
MAX_VERSION: Final = 4


Ranges = tuple[tuple[int, int, int], ...]


async def handle(broker: Broker, request: DecodedRequest) -> ApiVersionsResponse:
    return answer(broker.api_versions)


def answer(ranges: Ranges) -> ApiVersionsResponse:
    """The answer listing ``(api_key, min_version, max_version)`` of every API served."""
    return ApiVersionsResponse(
        error_code=ErrorCode.none,
        api_keys=tuple(
            ApiVersion(api_key=i16(key), min_version=i16(low), max_version=i16(high)) for key, low, high in ranges
        ),
        throttle_time=NO_THROTTLE,
    )


def unsupported_version_answer(ranges: Ranges) -> ApiVersionsResponseV0:
    """The version-0 body Kafka sends to an ApiVersions request above the version it serves."""
    return ApiVersionsResponseV0(
        error_code=ErrorCode.unsupported_version,
        api_keys=tuple(
            ApiVersionV0(api_key=i16(key), min_version=i16(low), max_version=i16(high)) for key, low, high in ranges
        ),
    )
