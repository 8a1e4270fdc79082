"""The process's open-file budget: which idle files give back their descriptor (LevelDB's table cache).

Owns: :class:`OpenFileBudget` (the bounded set of files that hold a
descriptor or a memory map now), :class:`HandleHolder` (what such a file
offers it), the process-wide budget (:func:`open_file_budget`) and its
default size (:func:`default_max_open_files`).

Must not import: ``segments``, ``engine`` or ``tools``.

Why: a partition's segments each hold a ``.log`` descriptor and, once read,
two writable index maps (CPython's ``mmap`` keeps a duplicate of the
descriptor it maps); thousands of partitions would exhaust the process's
descriptor limit (``ulimit -n``, often 1024). Kafka asks the operator for a
high limit instead; LevelDB and RocksDB keep a ``max_open_files`` budget and
reopen a table on its next use. seglog does the latter: past the budget, the
least recently used *idle* files close their descriptor or unmap, and their
next use reopens them, checking that the path still names the same file.

The budget is per process, as the descriptor limit is: every file of every
engine in the process counts against it. Eviction is second chance (CLOCK):
a file marks itself used (one attribute store, on its hot paths), and the
sweep moves a marked file to the back once instead of releasing it. A file
that is in use (a read or write in flight) refuses to release and stays
registered; the budget may then be exceeded until those calls end, never a
descriptor closed under a call.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from typing import Final, Protocol

__all__ = [
    "DEFAULT_MIN_OPEN_FILES",
    "HandleHolder",
    "OpenFileBudget",
    "default_max_open_files",
    "open_file_budget",
]

#: The smallest budget accepted: a partition's append and a read of another segment need a few files at once.
DEFAULT_MIN_OPEN_FILES: Final = 16
# What the default leaves to everything else in the process (sockets, checkpoints, the lock, Python's
# own files): half the soft descriptor limit.
_SHARE_OF_LIMIT: Final = 2
# The default where the limit is unlimited or unknown.
_UNLIMITED_DEFAULT: Final = 1 << 16


def default_max_open_files() -> int:
    """Half the process's soft descriptor limit (``RLIMIT_NOFILE``), at least 16: the default budget.

    Under ``ulimit -n 1024`` that is 512 files, whatever the number of
    partitions; the other half stays free for sockets and short-lived files.
    """
    try:
        import resource  # POSIX only
    except ImportError:  # pragma: no cover - Windows has no descriptor limit of this kind
        return _UNLIMITED_DEFAULT
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return _UNLIMITED_DEFAULT
    return max(DEFAULT_MIN_OPEN_FILES, soft // _SHARE_OF_LIMIT)


class HandleHolder(Protocol):
    """A file that holds one descriptor (or map) while open and can give it back while idle.

    ``handle_used`` is set by the file whenever it uses the descriptor; the
    budget's sweep clears it. :meth:`release_handle` runs in whichever thread
    opened another file past the budget: it must not block on a lock held
    during I/O of the file (try-acquire it), and returns ``False`` only while
    the file still holds its descriptor because a call is using it.
    """

    handle_used: bool

    def release_handle(self) -> bool:
        """Close the descriptor (unmap) now unless a call is using it; ``True`` when none is held after."""
        ...


class OpenFileBudget:
    """At most ``max_open_files`` registered files hold a descriptor; past that, idle ones give theirs back.

    Files register themselves when they open a descriptor or map
    (:meth:`opened`) and unregister when they close (:meth:`forget`). The
    budget holds weak references only: a file that is collected unclosed still
    warns and releases itself.

    Concurrency: one ``threading.RLock`` around the registry, never held while
    a file releases its descriptor (a file calls :meth:`opened` holding its own
    lock; releasing another file under the registry lock could deadlock).
    """

    def __init__(self, max_open_files: int) -> None:
        """A budget of ``max_open_files`` descriptors.

        Raises:
            ValueError: ``max_open_files`` is below :data:`DEFAULT_MIN_OPEN_FILES`.
        """
        self._check(max_open_files)
        self._max_open_files = max_open_files
        self._open: OrderedDict[int, weakref.ref[HandleHolder]] = OrderedDict()
        # Reentrant: a file collected unclosed while this thread holds the lock forgets itself from __del__.
        self._lock = threading.RLock()
        self._evictions = 0
        self._refusals = 0

    @staticmethod
    def _check(max_open_files: int) -> None:
        if isinstance(max_open_files, bool) or not isinstance(max_open_files, int):
            raise TypeError(f"max_open_files must be an int, not {type(max_open_files).__name__}")
        if max_open_files < DEFAULT_MIN_OPEN_FILES:
            raise ValueError(
                f"max_open_files {max_open_files} is below {DEFAULT_MIN_OPEN_FILES}; "
                "give at least that many (an append and a read hold a few files at once)"
            )

    @property
    def max_open_files(self) -> int:
        """How many files may hold a descriptor at once (in-flight calls aside)."""
        return self._max_open_files

    @property
    def open_files(self) -> int:
        """Registered files now (holding a descriptor, or collected and not swept yet)."""
        return len(self._open)

    @property
    def evictions(self) -> int:
        """How many descriptors the budget has taken back since it was made."""
        return self._evictions

    @property
    def refusals(self) -> int:
        """How many times a file picked for release was in use and kept its descriptor."""
        return self._refusals

    def resize(self, max_open_files: int) -> None:
        """Change the budget; a smaller one releases idle files now (blocking: closes descriptors).

        Raises:
            ValueError, TypeError: as the constructor.
        """
        self._check(max_open_files)
        self._max_open_files = max_open_files
        self._evict(None)

    def opened(self, holder: HandleHolder) -> None:
        """``holder`` opened (or reopened) its descriptor: count it, and release idle files past the budget."""
        holder.handle_used = True
        key = id(holder)
        with self._lock:
            self._open[key] = weakref.ref(holder)
            self._open.move_to_end(key)
            over = len(self._open) > self._max_open_files
        if over:
            self._evict(holder)

    def forget(self, holder: HandleHolder) -> None:
        """``holder`` released its descriptor itself (closed): stop counting it."""
        key = id(holder)
        with self._lock:
            ref = self._open.get(key)
            if ref is not None and ref() is holder:
                del self._open[key]

    def _evict(self, keep: HandleHolder | None) -> None:
        # Pick victims under the lock (second chance: a used file goes to the back once), release
        # them outside it; a file busy now goes back to the back, registered.
        while True:
            victims: list[HandleHolder] = []
            with self._lock:
                excess = len(self._open) - self._max_open_files
                budget_of_looks = 2 * len(self._open)
                while excess > 0 and budget_of_looks > 0 and self._open:
                    budget_of_looks -= 1
                    key, ref = self._open.popitem(last=False)
                    holder = ref()
                    if holder is None:  # collected: its own __del__ released the descriptor
                        excess -= 1
                        continue
                    if holder is keep or holder.handle_used:
                        holder.handle_used = False
                        self._open[key] = ref
                        continue
                    victims.append(holder)
                    excess -= 1
            if not victims:
                return
            busy: list[HandleHolder] = []
            for holder in victims:
                if holder.release_handle():
                    self._evictions += 1
                else:
                    busy.append(holder)
            if busy:
                self._refusals += len(busy)
                with self._lock:
                    for holder in busy:
                        self._open[id(holder)] = weakref.ref(holder)
                return  # what is left over is in use: it is given back by a later sweep


class _Process:
    budget: OpenFileBudget | None = None
    lock = threading.Lock()


def open_file_budget() -> OpenFileBudget:
    """The process's budget (made on first use with :func:`default_max_open_files`)."""
    budget = _Process.budget
    if budget is None:
        with _Process.lock:
            budget = _Process.budget
            if budget is None:
                budget = _Process.budget = OpenFileBudget(default_max_open_files())
    return budget


def _forget_after_fork() -> None:
    # A forked child (Spark's workers) inherits the descriptors but not the threads; its budget
    # starts over so that no lock held by a parent thread at fork time is inherited locked.
    _Process.budget = None
    _Process.lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
