"""The Kafka protocol codec: frames, request headers, and kio's generated message classes.

Owns everything that knows the wire encoding of requests and responses:

* a **frame** is an int32 size followed by that many bytes; the first 8 bytes
  of a request frame are ``api_key int16, api_version int16, correlation_id
  int32`` in every header version, so a request can be routed (or refused)
  before its body is decoded;
* request and response **messages** are the frozen dataclasses of ``kio``,
  generated from Apache Kafka's own JSON message schemas (every version, the
  flexible versions' compact types and tagged fields, header v0/v1/v2 and the
  ApiVersions response-header exception);
* handlers build a response as the **newest** version the server serves, and
  :func:`downgrade` projects it onto the version the client asked for: fields
  an older version lacks are dropped, fields only it has take their schema
  defaults. (Kafka's fields only ever get added or retired, never change
  meaning, so this is exact; the tests encode every version.)

Must not import: ``tools``. Nothing outside ``server`` sees a kio type.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import struct
import types
import typing
from typing import Any, Final, NamedTuple, TypeVar

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError
from kio.static.primitive import i32

from seglog.server.errors import FrameError

__all__ = [
    "REQUEST_PREFIX_SIZE",
    "DecodedRequest",
    "decode_request",
    "downgrade",
    "encode_response",
    "peek_request",
]

REQUEST_PREFIX_SIZE: Final = 8  # api_key int16, api_version int16, correlation_id int32: in every header version
_PREFIX: Final = struct.Struct(">hhi")
_SIZE: Final = struct.Struct(">i")

T = TypeVar("T")


class RequestPrefix(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int


class DecodedRequest(NamedTuple):
    """A request decoded with the schema of its API key and version.

    ``body`` is the kio dataclass of exactly that version: fields that version
    lacks are absent (handlers read them with ``getattr(body, name, default)``).
    """

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any
    client_host: str = ""
    """The client's address as Kafka reports it (``"/127.0.0.1"``); set by the server core."""


def peek_request(frame: bytes | memoryview) -> RequestPrefix:
    """The API key, version and correlation id at the start of a request frame.

    Raises:
        FrameError: the frame is shorter than those 8 bytes.
    """
    if len(frame) < REQUEST_PREFIX_SIZE:
        raise FrameError(f"a request of {len(frame)} bytes is shorter than the {REQUEST_PREFIX_SIZE}-byte header start")
    return RequestPrefix(*_PREFIX.unpack_from(frame, 0))


def decode_request(frame: bytes) -> DecodedRequest:
    """Decode a whole request frame (without its size prefix): header and body.

    Raises:
        FrameError: an API key or version kio has no schema for, or bytes that
            do not decode as that schema says.
    """
    api_key, api_version, correlation_id = peek_request(frame)
    try:
        schema = load_request_schema(api_key, api_version)
    except Exception as exc:  # kio's UnknownAPIKey / UnknownEntity
        raise FrameError(f"no schema for API key {api_key} version {api_version}") from exc
    header_schema = schema.__header_schema__
    try:
        header, used = entity_reader(header_schema)(frame, 0)
        body, _ = entity_reader(schema)(frame, used)
    except (SerialError, ValueError, UnicodeDecodeError, OverflowError) as exc:
        raise FrameError(
            f"API key {api_key} version {api_version} (correlation id {correlation_id}) does not decode: {exc}"
        ) from exc
    return DecodedRequest(api_key, api_version, correlation_id, getattr(header, "client_id", None), body)


def encode_response(api_key: int, api_version: int, correlation_id: int, response: Any) -> bytes:
    """The frame (size prefix included) answering ``correlation_id`` with ``response``.

    ``response`` may be of a newer version than ``api_version``; it is
    projected onto that version's schema first (:func:`downgrade`).
    """
    schema = load_response_schema(api_key, api_version)
    message = downgrade(response, schema)
    header_schema = schema.__header_schema__
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    entity_writer(header_schema)(buffer, header_schema(correlation_id=i32(correlation_id)))
    entity_writer(schema)(buffer, message)
    frame = buffer.getbuffer()
    frame[0:4] = _SIZE.pack(len(frame) - 4)
    del frame
    return buffer.getvalue()


def downgrade(message: Any, target: type[T]) -> T:
    """``message`` (a kio message of any version) as an instance of ``target``, field by field, nested included.

    Raises:
        TypeError: ``target`` has a field without a default that ``message`` lacks (a programming error).
    """
    if type(message) is target:
        return message
    kwargs: dict[str, Any] = {}
    for name, nested, many in _fields_of(typing.cast(type, target)):
        if not hasattr(message, name):
            continue
        value = getattr(message, name)
        if nested is not None and value is not None:
            value = tuple(downgrade(item, nested) for item in value) if many else downgrade(value, nested)
        kwargs[name] = value
    return target(**kwargs)


@functools.cache
def _fields_of(cls: type) -> tuple[tuple[str, type | None, bool], ...]:
    """Each field of a kio dataclass: its name, the dataclass it nests (if any), and whether it is a tuple of them."""
    hints = typing.get_type_hints(cls)
    out = []
    for field in dataclasses.fields(cls):
        nested, many = _nested_type(hints[field.name])
        out.append((field.name, nested, many))
    return tuple(out)


def _nested_type(hint: Any) -> tuple[type | None, bool]:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(hint):
            if arg is not type(None):
                return _nested_type(arg)
    if origin is tuple:
        args = typing.get_args(hint)
        if args and dataclasses.is_dataclass(args[0]) and isinstance(args[0], type):
            return args[0], True
        return None, False
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return hint, False
    return None, False
