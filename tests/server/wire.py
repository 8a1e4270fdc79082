"""A minimal Kafka protocol client for the server tests: kio-built requests over a raw socket.

A module of its own (not ``conftest``), as in the other test directories. It
lets a test send any version of any request, or deliberately broken frames,
without a Kafka client library in between.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import struct
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from seglog.server.apis import APIS
from seglog.server.protocol import _fields_of, downgrade

TIMEOUT = 15.0


def versions(key: int) -> list[int]:
    """Every version of API ``key`` the server answers, oldest first: what a test sweeps."""
    api = APIS[key]
    return list(range(api.min_version, api.max_version + 1))


def _project(request: Any, schema: type) -> Any:
    """``request`` as ``schema``'s version; a top-level flag that only older versions have is sent as false."""
    try:
        return downgrade(request, schema)
    except TypeError:
        kwargs: dict[str, Any] = {}
        for field in dataclasses.fields(schema):
            if hasattr(request, field.name):
                value = getattr(request, field.name)
                nested = dict((n, (c, m)) for n, c, m in _fields_of(schema)).get(field.name, (None, False))
                if nested[0] is not None and value is not None:
                    value = tuple(downgrade(v, nested[0]) for v in value) if nested[1] else downgrade(value, nested[0])
                kwargs[field.name] = value
            elif field.default is dataclasses.MISSING:
                kwargs[field.name] = False
        return schema(**kwargs)


class WireClient:
    """One connection to the server; ``await client.call(api_key, version, newest_request)``."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self._correlation = 0

    @classmethod
    async def connect(cls, address: str) -> WireClient:
        host, _, port = address.rpartition(":")
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), TIMEOUT)
        return cls(reader, writer)

    def frame(self, api_key: int, version: int, request: Any) -> tuple[int, bytes]:
        """The bytes of ``request`` (any version; projected onto ``version``), with its correlation id."""
        self._correlation += 1
        schema = load_request_schema(api_key, version)
        header_schema = schema.__header_schema__
        header = header_schema(
            request_api_key=i16(api_key), request_api_version=i16(version),
            correlation_id=i32(self._correlation), client_id="seglog-tests",
        )
        buffer = io.BytesIO()
        entity_writer(header_schema)(buffer, header)
        entity_writer(schema)(buffer, _project(request, schema))
        body = buffer.getvalue()
        return self._correlation, struct.pack(">i", len(body)) + body

    async def send(self, api_key: int, version: int, request: Any) -> int:
        correlation, data = self.frame(api_key, version, request)
        self.writer.write(data)
        await self.writer.drain()
        return correlation

    async def receive(self, api_key: int, version: int, correlation: int, *, wait_s: float = TIMEOUT) -> Any:
        schema = load_response_schema(api_key, version)
        size_bytes = await asyncio.wait_for(self.reader.readexactly(4), wait_s)
        (size,) = struct.unpack(">i", size_bytes)
        data = await asyncio.wait_for(self.reader.readexactly(size), wait_s)
        header, used = entity_reader(schema.__header_schema__)(data, 0)
        assert header.correlation_id == correlation, (header.correlation_id, correlation)
        body, _ = entity_reader(schema)(data, used)
        return body

    async def call(self, api_key: int, version: int, request: Any, *, wait_s: float = TIMEOUT) -> Any:
        correlation = await self.send(api_key, version, request)
        return await self.receive(api_key, version, correlation, wait_s=wait_s)

    async def closed_by_server(self, wait_s: float = TIMEOUT) -> bool:
        """Whether the server closes the connection (reads until EOF, ignoring any answer bytes)."""
        try:
            while await asyncio.wait_for(self.reader.read(65536), wait_s):
                pass
        except ConnectionError:
            return True
        return True

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError):
            await self.writer.wait_closed()


def fetched_records(data: bytes, start_offset: int = 0) -> list[Any]:
    """The records of a Fetch answer's record batches (back to back, any codec), from ``start_offset`` on.

    A fetch returns whole batches, the first possibly starting before the
    offset asked for; a consumer skips those records, and so does this.
    """
    from seglog.segments.batch import check_header, decode_batch, read_header, verify_crc

    out: list[Any] = []
    position = 0
    while position < len(data):
        header = read_header(data, position)
        assert header.magic == 2, "a fetch answers Kafka batches only"
        check_header(header, len(data) - position, position)
        verify_crc(data, position, header)
        out += decode_batch(data, position, header, start_offset=start_offset)
        position += header.size
    return out
