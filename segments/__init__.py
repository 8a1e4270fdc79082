"""seglog's segment layer: one ``.log`` file of record batches with its indexes.

Owns: the record-batch format (framing, CRC-32C, msgpack bodies), the async
file layer (the only module that talks to ``aiofiles``), ``LogSegment``
(append, read, time lookup, roll decisions, recovery, truncation).

Must not import: ``engine`` or ``tools``. Segments know nothing of topics,
partitions or clocks: roll parameters, ``now_ms`` and the index interval arrive
as arguments.
"""
