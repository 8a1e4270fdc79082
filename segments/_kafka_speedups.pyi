"""Type stubs of the optional C module segments._kafka_speedups (see segments/_kafka_speedups.c)."""

from seglog.segments.records import Record

def produced_records_ok(records: bytes, count: int, base_timestamp: int, /) -> tuple[int, bool] | None: ...
def stored_records(
    record_type: type[Record],
    section: bytes | bytearray | memoryview,
    count: int,
    base_offset: int,
    base_timestamp: int,
    max_timestamp: int,
    last_offset_delta: int,
    log_append_time: bool,
    start_offset: int,
    max_bytes: int,
    min_timestamp: int = ...,  # from the first record at or after it (a time lookup)
    /,
) -> list[Record] | None: ...
