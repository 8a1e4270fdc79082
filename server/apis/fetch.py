"""Fetch (key 1), versions 4-12: records from each partition, long-polling until there are enough.

For each partition the stored batches from the one holding ``fetch_offset`` on
are read (``PartitionLog.read_batches``): a Kafka batch (produced over the
wire) goes as it is on disk, compressed or not; a seglog batch (appended
natively) is converted to uncompressed RecordBatch v2 (``seglog.server.records``). Sizes
follow Kafka: ``partition_max_bytes`` per partition and ``max_bytes`` for the
whole response, except that the first partition with records returns at least
one batch however large (KIP-74), so a consumer always progresses.

Long poll: while fewer than ``min_bytes`` are ready and ``max_wait_ms`` has
not passed, the request parks on the partitions' append notification
(``PartitionLog.wait_for_append``, woken by the next append to any of them;
no polling) and then reads again. A partition error (unknown partition,
``OFFSET_OUT_OF_RANGE`` below the log start or above the high watermark)
answers at once, as Kafka does.

``isolation_level`` 1 (``read_committed``, librdkafka's default) returns only
the batches below the partition's last stable offset (the first offset of the
oldest transaction still open there) and lists the aborted transactions that
overlap the batches returned (producer id and first offset, Kafka's
``collectAbortedTxns``): the consumer drops those producers' batches up to
their abort markers. Under ``read_uncommitted`` everything up to the high
watermark is returned, aborted records included; control batches (the
markers) are returned either way, as Kafka does, and clients skip them.
``last_stable_offset`` is reported in every answer. Fetch sessions (KIP-227)
are not kept: every answer says session 0, which tells a client to send full
fetch requests.

Must not import: ``tools``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Final, NamedTuple

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.response import AbortedTransaction, FetchableTopicResponse, FetchResponse, PartitionData
from kio.schema.types import BrokerId, ProducerId, TopicName
from kio.static.primitive import Records, i32, i64

from seglog.engine import Isolation
from seglog.engine.errors import SeglogError
from seglog.server.apis._common import NO_THROTTLE
from seglog.server.broker import LEADER_EPOCH, Broker, error_code_of
from seglog.server.protocol import DecodedRequest
from seglog.server.records import fetch_payload

API_KEY: Final = 1
MIN_VERSION: Final = 4
MAX_VERSION: Final = 12

log = logging.getLogger("seglog.server")

_EMPTY: Final = Records(b"")
_NO_REPLICA: Final = BrokerId(-1)
_READ_COMMITTED: Final = 1  # Kafka's IsolationLevel.READ_COMMITTED


class _Wanted(NamedTuple):
    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int


async def handle(broker: Broker, request: DecodedRequest) -> FetchResponse:
    body = request.body
    if int(getattr(body, "session_id", 0)) != 0:
        # We never hand out a session id, so a request naming one refers to another broker's session.
        return FetchResponse(
            throttle_time=NO_THROTTLE, error_code=ErrorCode.fetch_session_id_not_found, session_id=i32(0), responses=()
        )
    wanted = [
        _Wanted(topic.topic, int(p.partition), int(p.fetch_offset), int(p.partition_max_bytes))
        for topic in body.topics or ()
        for p in topic.partitions or ()
    ]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0.0, body.max_wait.total_seconds())
    min_bytes = int(body.min_bytes)
    max_bytes = int(body.max_bytes)
    isolation: Isolation = (
        "read_committed" if int(getattr(body, "isolation_level", 0)) == _READ_COMMITTED else "read_uncommitted"
    )
    while True:
        answers, size, failed = await _read(broker, wanted, max_bytes, isolation)
        remaining = deadline - loop.time()
        if size >= min_bytes or failed or remaining <= 0:
            break
        await _wait_for_append(broker, wanted, remaining)
    by_topic: dict[str, list[PartitionData]] = {}
    for want, answer in zip(wanted, answers, strict=True):
        by_topic.setdefault(want.topic, []).append(answer)
    return FetchResponse(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        session_id=i32(0),
        responses=tuple(
            FetchableTopicResponse(topic=TopicName(name), partitions=tuple(parts)) for name, parts in by_topic.items()
        ),
    )


async def _read(
    broker: Broker, wanted: list[_Wanted], max_bytes: int, isolation: Isolation
) -> tuple[list[PartitionData], int, bool]:
    answers = []
    total = 0
    failed = False
    for want in wanted:
        budget = min(want.max_bytes, max_bytes - total)
        try:
            plog = broker.log_of(want.topic, want.partition)
            data = b""
            aborted: tuple[AbortedTransaction, ...] = ()
            # The first partition with records answers whatever its size (KIP-74); later ones only within budget.
            if budget > 0 or total == 0:
                batches = await plog.read_batches(want.fetch_offset, max(budget, 1), isolation=isolation)
                if batches:
                    data = fetch_payload(
                        batches, want.fetch_offset, log_append_time=plog.config.timestamp_is_log_append_time,
                        leader_epoch=LEADER_EPOCH,
                    )
                    if isolation == "read_committed":
                        aborted = tuple(
                            AbortedTransaction(producer_id=ProducerId(txn.producer_id),
                                               first_offset=i64(txn.first_offset))
                            for txn in plog.aborted_transactions(want.fetch_offset, batches[-1][0].next_offset)
                        )
            high_watermark = plog.high_watermark
            answers.append(
                PartitionData(
                    partition_index=i32(want.partition),
                    error_code=ErrorCode.none,
                    high_watermark=i64(high_watermark),
                    last_stable_offset=i64(plog.last_stable_offset),
                    log_start_offset=i64(plog.log_start_offset),
                    aborted_transactions=aborted,
                    preferred_read_replica=_NO_REPLICA,
                    records=Records(data),
                )
            )
            total += len(data)
        except SeglogError as exc:
            code = error_code_of(exc)
            log.warning("fetch of %s-%d at %d failed (%s): %s", want.topic, want.partition, want.fetch_offset,
                        code.name, exc)
            failed = True
            answers.append(
                PartitionData(
                    partition_index=i32(want.partition),
                    error_code=code,
                    high_watermark=i64(-1),
                    last_stable_offset=i64(-1),
                    log_start_offset=i64(-1),
                    aborted_transactions=None,
                    records=_EMPTY,
                )
            )
    return answers, total, failed


async def _wait_for_append(broker: Broker, wanted: list[_Wanted], seconds: float) -> None:
    """Until an append to any of ``wanted``'s partitions, or ``seconds``."""
    waits = []
    for want in wanted:
        try:
            plog = broker.log_of(want.topic, want.partition)
        except SeglogError:
            continue
        # Beyond what the log holds now: records already there did not reach min_bytes.
        waits.append(asyncio.ensure_future(plog.wait_for_append(max(want.fetch_offset, plog.log_end_offset))))
    if not waits:
        await asyncio.sleep(seconds)  # nothing can wake this request: it waits its max_wait_ms, as Kafka's does
        return
    try:
        await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
        await asyncio.gather(*waits, return_exceptions=True)
