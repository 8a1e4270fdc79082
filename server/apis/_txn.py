"""What the transaction APIs share: the error code a refusal is answered with, for the version asked.

Must not import: ``tools``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable

from kio.schema.errors import ErrorCode

from seglog.engine.errors import ProducerFencedError, SeglogError
from seglog.server.broker import error_code_of

__all__ = ["txn_error_code", "txn_outcome"]

log = logging.getLogger("seglog.server")


def txn_error_code(exc: SeglogError, what: str, version: int, fenced_from: int) -> ErrorCode:
    """The answer to a transaction call refused with ``exc``, logged.

    ``PRODUCER_FENCED`` exists from version ``fenced_from`` of the API on
    (KIP-588); older versions are answered ``INVALID_PRODUCER_EPOCH``, as
    Kafka does, which their clients treat as fencing too.
    """
    if isinstance(exc, ProducerFencedError) and version < fenced_from:
        code = ErrorCode.invalid_producer_epoch
    else:
        code = error_code_of(exc)
    log.info("%s refused (%s): %s", what, code.name, exc)
    return code


async def txn_outcome(call: Awaitable[object], what: str, version: int, fenced_from: int) -> ErrorCode:
    """``NONE`` once the transaction call ``call`` is done; if it is refused, its :func:`txn_error_code`."""
    try:
        await call
    except SeglogError as exc:
        return txn_error_code(exc, what, version, fenced_from)
    return ErrorCode.none
