"""Key-value peers of ``seglog bench --only shapes``: LMDB (``lmdb``) and RocksDB (``rocksdict``) used as a log.

Both store what the raw references store: the row ``[offset, timestamp, key,
value, []]`` packed with msgpack, under its offset as an 8-byte big-endian key
(so keys sort in offset order and appends go to the end of the key space). A
second table — an LMDB named database, a RocksDB column family — maps the
8-byte big-endian timestamp to the offset key: the index a time lookup needs,
written only when the read logs are built (the produce rows write the main
table alone, the stronger baseline, as sqlite's produce has no index on ``ts``).

Neither syncs on commit (LMDB ``sync=False``; RocksDB's default write options
write its WAL without an fsync), as seglog's produce without ``flush.messages``
and sqlite's ``synchronous=NORMAL`` do not. Every read opens what a server
answering one request would: a read transaction (LMDB) or an iterator
(RocksDB's time lookup) per call. Each read checks it found the right row.

Both packages are development dependencies (the ``dev`` extra):
:func:`available` says which are installed, and the section leaves a missing
one's columns empty rather than failing.
"""

from __future__ import annotations

import importlib.util
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, Protocol

import msgpack

from seglog.tools.bench.timing import now

_KEY: Final = struct.Struct(">Q")
LMDB_MAP_BYTES: Final = 4 << 30  # address space reserved, not disk: the file grows with the data
PEERS: Final = ("lmdb", "rocksdb")
_MODULES: Final = {"lmdb": "lmdb", "rocksdb": "rocksdict"}


def available() -> tuple[str, ...]:
    """The key-value peers whose package is installed."""
    return tuple(peer for peer in PEERS if importlib.util.find_spec(_MODULES[peer]) is not None)


def _key(number: int) -> bytes:
    return _KEY.pack(number)


class KvPeer(Protocol):
    """What the shapes section asks of a key-value peer."""

    def append(self, batches: Sequence[Sequence[list[Any]]], *, with_time_index: bool = False) -> float:
        """One atomic write (transaction or write batch) per batch; seconds."""
        ...

    def ready_for_reads(self) -> None:
        """Called once the read log is written, before any read is timed."""
        ...

    def point_reads(self, targets: Sequence[int], out: list[float]) -> None:
        """Get and unpack the row of each offset in ``targets``; one latency (seconds) each into ``out``."""
        ...

    def timestamp_reads(self, timestamps: Sequence[int], out: list[float]) -> None:
        """The first row with timestamp >= each target: seek the time table, then get the row."""
        ...

    def sequential(self, expected: int) -> float:
        """Iterate every row in key order, unpacking each; seconds."""
        ...

    def close(self) -> None: ...


class LmdbPeer:
    """LMDB: ``putmulti(append=True)`` per batch in one write transaction; no fsync at commit."""

    def __init__(self, path: Path) -> None:
        import lmdb

        self.env = lmdb.open(str(path), map_size=LMDB_MAP_BYTES, max_dbs=2, sync=False, metasync=False)
        self.rows = self.env.open_db(b"rows")
        self.times = self.env.open_db(b"times")
        self._pack = msgpack.Packer().pack

    def append(self, batches: Sequence[Sequence[list[Any]]], *, with_time_index: bool = False) -> float:
        begin, pack, rows_db, times_db = self.env.begin, self._pack, self.rows, self.times
        start = now()
        for batch in batches:
            with begin(write=True) as txn:
                txn.cursor(rows_db).putmulti([(_key(r[0]), pack(r)) for r in batch], append=True)
                if with_time_index:
                    txn.cursor(times_db).putmulti([(_key(r[1]), _key(r[0])) for r in batch], append=True)
        return now() - start

    def ready_for_reads(self) -> None:
        """Nothing to do: readers see every committed transaction in the map."""

    def point_reads(self, targets: Sequence[int], out: list[float]) -> None:
        begin, unpackb, rows_db = self.env.begin, msgpack.unpackb, self.rows
        for target in targets:
            start = now()
            with begin(db=rows_db) as txn:
                row = unpackb(txn.get(_key(target)))
            out.append(now() - start)
            if row[0] != target:
                raise RuntimeError("lmdb point read found the wrong row")

    def timestamp_reads(self, timestamps: Sequence[int], out: list[float]) -> None:
        begin, unpackb, rows_db, times_db = self.env.begin, msgpack.unpackb, self.rows, self.times
        for ts in timestamps:
            start = now()
            with begin() as txn:
                cursor = txn.cursor(times_db)
                row = unpackb(txn.get(cursor.value(), db=rows_db)) if cursor.set_range(_key(ts)) else None
            out.append(now() - start)
            if row is None or row[1] != ts:
                raise RuntimeError("lmdb timestamp lookup found the wrong row")

    def sequential(self, expected: int) -> float:
        unpackb = msgpack.unpackb
        count = 0
        start = now()
        with self.env.begin(db=self.rows) as txn:
            for value in txn.cursor().iternext(keys=False, values=True):
                unpackb(value)
                count += 1
        elapsed = now() - start
        if count != expected:
            raise RuntimeError(f"lmdb read {count} rows, expected {expected}")
        return elapsed

    def close(self) -> None:
        self.env.close()


class RocksPeer:
    """RocksDB through rocksdict (raw bytes mode): one ``WriteBatch`` per batch; WAL written, not synced."""

    def __init__(self, path: Path) -> None:
        from rocksdict import Options, Rdict

        options = Options(raw_mode=True)
        options.create_if_missing(True)
        self.db: Any = Rdict(str(path), options)
        self.times: Any = self.db.create_column_family("times", Options(raw_mode=True))
        self._times_handle = self.db.get_column_family_handle("times")
        self._pack = msgpack.Packer().pack

    def append(self, batches: Sequence[Sequence[list[Any]]], *, with_time_index: bool = False) -> float:
        from rocksdict import WriteBatch

        write, pack, times = self.db.write, self._pack, self._times_handle
        start = now()
        for batch in batches:
            wb = WriteBatch(raw_mode=True)
            put = wb.put
            for r in batch:
                key = _key(r[0])
                put(key, pack(r))
                if with_time_index:
                    put(_key(r[1]), key, times)
            write(wb)
        return now() - start

    def ready_for_reads(self) -> None:
        """Flush the memtables: reads then go to the table files, as after a restart with the WAL replayed."""
        self.db.flush()
        self.times.flush()

    def point_reads(self, targets: Sequence[int], out: list[float]) -> None:
        get, unpackb = self.db.__getitem__, msgpack.unpackb
        for target in targets:
            start = now()
            row = unpackb(get(_key(target)))
            out.append(now() - start)
            if row[0] != target:
                raise RuntimeError("rocksdb point read found the wrong row")

    def timestamp_reads(self, timestamps: Sequence[int], out: list[float]) -> None:
        get, unpackb, iterate = self.db.__getitem__, msgpack.unpackb, self.times.iter
        for ts in timestamps:
            start = now()
            it = iterate()
            it.seek(_key(ts))
            row = unpackb(get(it.value())) if it.valid() else None
            out.append(now() - start)
            if row is None or row[1] != ts:
                raise RuntimeError("rocksdb timestamp lookup found the wrong row")

    def sequential(self, expected: int) -> float:
        unpackb = msgpack.unpackb
        count = 0
        start = now()
        for value in self.db.values():
            unpackb(value)
            count += 1
        elapsed = now() - start
        if count != expected:
            raise RuntimeError(f"rocksdb read {count} rows, expected {expected}")
        return elapsed

    def close(self) -> None:
        self.times.close()
        self.db.close()


def open_peer(name: str, path: Path) -> KvPeer:
    """A fresh store of peer ``name`` (one of :data:`PEERS`) at ``path``."""
    if name == "lmdb":
        return LmdbPeer(path)
    if name == "rocksdb":
        return RocksPeer(path)
    raise ValueError(f"unknown key-value peer {name!r}; choose from {', '.join(PEERS)}")
