"""Type stubs of the optional C module segments._speedups (see segments/_speedups.c)."""

from collections.abc import Callable, Sequence

from seglog.segments.records import Record

def encode_body(records: Sequence[Record], log_append_time: bool, now_ms: int, /) -> tuple[bytes, int, int] | None: ...
def encode_small_batch(
    records: Sequence[Record], log_append_time: bool, now_ms: int, max_bytes: int, /
) -> tuple[bytearray, int] | None: ...
class Plan:
    @property
    def size(self) -> int: ...
    @property
    def base_ts(self) -> int: ...
    @property
    def max_ts(self) -> int: ...
    def write(self) -> bytes: ...

def body_plan(records: tuple[Record, ...], log_append_time: bool, now_ms: int, /) -> Plan | None: ...
def range_ok(
    timestamp_deltas: tuple[int, ...] | None,
    keys: tuple[bytes | None, ...],
    values: tuple[bytes | None, ...],
    headers: tuple[tuple[tuple[str, bytes], ...], ...] | None,
    lo: int,
    hi: int,
    min_delta: int,
    top: int,
    check_values: bool,
    check_top: bool,
    /,
) -> bool: ...
def build_records(
    record_type: type[Record],
    values: tuple[bytes | None, ...],
    keys: tuple[bytes | None, ...],
    timestamp_deltas: tuple[int, ...] | None,
    headers: tuple[tuple[tuple[str, bytes], ...], ...] | None,
    offset_deltas: Sequence[int] | None,
    lo: int,
    hi: int,
    base_offset: int,
    base_timestamp: int,
    fixed_timestamp: int,
    /,
) -> list[Record] | None: ...
def arrow_batch(
    buf: bytes | bytearray | memoryview,
    body_start: int,
    body_end: int,
    count: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    log_append_time: bool,
    lo: int,
    hi: int,
    keys_base: int,
    values_base: int,
    /,
) -> (
    tuple[bytes, bytes, bytes, bytes | None, bytes, bytes, bytes | None, list[tuple[tuple[str, bytes], ...]] | None]
    | None
): ...
def decode_records(
    record_type: type[Record],
    buf: bytes | bytearray | memoryview,
    body_start: int,
    body_end: int,
    count: int,
    last_offset_delta: int,
    base_offset: int,
    base_timestamp: int,
    max_timestamp: int,
    log_append_time: int,
    lo: int,
    max_bytes: int,
    /,
) -> list[Record] | None: ...
def find_timestamp(
    buf: bytes | bytearray | memoryview,
    body_start: int,
    body_end: int,
    count: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    log_append_time: int,
    lo: int,
    timestamp: int,
    /,
) -> tuple[int, int] | None: ...
def record_at_time(
    record_type: type[Record],
    crc32c: Callable[[bytes], int],
    buf: bytes | bytearray | memoryview,
    base_offset: int,
    last_offset: int,
    timestamp: int,
    start_offset: int,
    /,
) -> Record | None: ...
def pread_spans(
    fd: int, spans: tuple[tuple[int, int], ...], file_size: int, /
) -> list[bytes | bytearray] | None: ...  # bytes objects only (typed as read_cached_spans returns them)
def batch_records(
    record_type: type[Record],
    crc32c: Callable[[bytes], int],
    buf: bytes | bytearray | memoryview,
    start_offset: int,
    max_bytes: int,
    min_timestamp: int = ...,  # a Kafka batch only: from the first record at or after it
    /,
) -> list[Record] | None: ...
def batches_records(
    record_type: type[Record],
    crc32c: Callable[[bytes], int],
    buf: bytes | bytearray | memoryview,
    position: int,
    start_offset: int,
    max_batch_bytes: int,
    expected: int,
    into: list[Record],
    /,
) -> tuple[int, int]: ...
def walk_headers(
    window: bytes | bytearray, at: int, position: int, end: int, stop_at: int, expected: int, max_entries: int, /
) -> tuple[int, int, int, bytes, bytes, bytes]: ...
def whole_batches_length(buf: bytes | bytearray | memoryview, first_size: int, /) -> int | None: ...
def use_native_crc32c(path: str, check: bytes, expected: int, /) -> bool: ...
def native_crc32c_in_use() -> bool: ...
