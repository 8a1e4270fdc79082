"""``seglog serve`` that kills itself (SIGKILL) right after it stored the Nth Produce carrying records.

Run as ``python serve_killed_after_store.py N serve --log-dir DIR --listen HOST:PORT``: the batch is in
the ``.log`` (as after any acknowledged append) but no answer leaves, no snapshot or clean-shutdown
marker is written -- the producer must send it again to the next server on the same directory.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
from typing import Any

from seglog.server.apis import APIS, produce
from seglog.server.broker import Broker
from seglog.server.protocol import DecodedRequest
from seglog.tools.cli import main

_KILL_AT = int(sys.argv[1])
_stored = 0


async def _handle(broker: Broker, request: DecodedRequest) -> Any:
    global _stored
    answer = await produce.handle(broker, request)
    if answer is not None and any(
        p.error_code == 0 and p.base_offset >= 0 for t in answer.responses for p in t.partition_responses
    ):
        _stored += 1
        if _stored == _KILL_AT:
            sys.stderr.write(f"killing myself after storing produce {_stored}\n")
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)
    return answer


APIS[produce.API_KEY] = dataclasses.replace(APIS[produce.API_KEY], handle=_handle)
sys.exit(main(sys.argv[2:]))
