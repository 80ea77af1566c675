"""IdPool: a client-side cache of ID ranges leased from the cluster, per tag (Leaf's double
buffer in the client; the Rust client's ``IdPool``)::

    client = LeafClient(["http://10.0.0.1:8080", "http://10.0.0.2:8080"])
    with IdPool(client) as pool:
        orders = pool.segment("orders")      # starts leasing at once
        order_id = orders.next_id()          # lock-free from this thread's chunk
        flake = pool.snowflake("payments").next_id()   # at most max_staleness old

Each tag (or snowflake key) has a buffer of leased ranges (``format=ranges``, through the
client's failover, retries and deadline), refilled in the background: the next lease is asked
for once 10% of the current one is used, its size adapting so that a lease lasts about
``lease_period``. The pool runs one refill thread for all its tags and at most
``lease_threads`` (3) lease worker threads, so at most 4 threads whatever its number of tags
(``_pool_sched``); leases of different tags run concurrently on the workers. A failed lease is retried with backoff; callers notice
nothing while buffered IDs last, then wait up to ``max_wait``. Every ID handed out lies in a
range the service leased to this pool, none twice; IDs still buffered when the process dies
are a gap, never a duplicate. See ``_pool_tag`` for the mechanics.

The source is a :class:`~leaf_client.LeafClient`, a :class:`~leaf_client.grpc.GrpcClient`, or
any object with ``lease(kind, name, count) -> IdRanges`` (``kind`` ``"segment"`` or
``"snowflake"``; tests use fakes). From asyncio code, call ``next_id`` through
``asyncio.to_thread`` (it may block up to ``max_wait``) or use ``try_next_id``.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Tuple

from . import _validate
from ._pool_sched import MAX_LEASE_THREADS, Scheduler
from ._pool_tag import TagPool, TagStats
from .errors import ConfigError, PoolClosedError
from .types import IdRanges


@dataclass(frozen=True)
class PoolOptions:
    """How an :class:`IdPool` leases and waits (seconds for times).

    - ``max_wait`` (5): how long a call with nothing buffered waits for a lease before
      :class:`~leaf_client.errors.PoolExhaustedError` (longer than a leader election plus the
      client's failover).
    - ``lease_period`` (1): how long a lease should last; the size doubles when one lasted less
      than half of it (or callers waited), halves when more than twice.
    - ``min_lease`` (100), ``initial_lease`` (1000), ``max_lease`` (1,000,000): lease sizes.
    - ``depth`` (1): leases queued behind the current one (Leaf's double buffer).
    - ``max_staleness`` (1): no snowflake ID is handed out from a range more than this after
      its lease was requested; ``tick`` (0.1) is how often the refill thread retires old ranges.
    - ``retry_min`` (0.05) .. ``retry_max`` (1): backoff of a failed lease.
    - ``local_chunk`` (64): IDs a calling thread takes per locked step (1 to 65,536).
    - ``lease_threads`` (3): lease calls the pool runs at once, each on its own worker thread
      (1 to 3); with the refill thread, the pool runs at most ``1 + lease_threads`` threads.
    """

    max_wait: float = 5.0
    lease_period: float = 1.0
    min_lease: int = 100
    max_lease: int = _validate.MAX_RANGE_BATCH
    initial_lease: int = 1000
    depth: int = 1
    max_staleness: float = 1.0
    tick: float = 0.1
    retry_min: float = 0.05
    retry_max: float = 1.0
    local_chunk: int = 64
    lease_threads: int = MAX_LEASE_THREADS

    def __post_init__(self) -> None:
        if not 1 <= self.min_lease <= self.max_lease <= _validate.MAX_RANGE_BATCH:
            raise ConfigError(
                f"need 1 <= min_lease ({self.min_lease}) <= max_lease ({self.max_lease}) <= "
                f"{_validate.MAX_RANGE_BATCH}"
            )
        if not self.min_lease <= self.initial_lease <= self.max_lease:
            raise ConfigError(f"initial_lease ({self.initial_lease}) must be within [min_lease, max_lease]")
        if not 1 <= self.depth <= 16:
            raise ConfigError(f"depth must be from 1 to 16, got {self.depth}")
        if min(self.lease_period, self.tick, self.retry_min, self.max_wait) <= 0:
            raise ConfigError("lease_period, tick, retry_min and max_wait must be above zero")
        if self.tick >= self.max_staleness:
            raise ConfigError(f"tick ({self.tick}) must be below max_staleness ({self.max_staleness})")
        if self.retry_min > self.retry_max:
            raise ConfigError("retry_min must not exceed retry_max")
        if not 1 <= self.local_chunk <= 65_536:
            raise ConfigError("local_chunk must be from 1 to 65,536")
        if not 1 <= self.lease_threads <= MAX_LEASE_THREADS:
            raise ConfigError(f"lease_threads must be from 1 to {MAX_LEASE_THREADS}, got {self.lease_threads}")


@dataclass(frozen=True)
class PoolStats:
    """A snapshot of every tag and key of an :class:`IdPool`, in name order, and how many
    threads the pool runs (at most ``1 + lease_threads``)."""

    tags: Tuple[TagStats, ...] = field(default_factory=tuple)
    threads: int = 0

    def get(self, kind: str, name: str) -> TagStats:
        """The snapshot of one tag (``kind`` ``"segment"``) or key (``"snowflake"``)."""
        for t in self.tags:
            if t.kind == kind and t.name == name:
                return t
        raise KeyError((kind, name))


def _lease_function(source: Any) -> Callable[[str, str, int], IdRanges]:
    if hasattr(source, "lease"):
        return source.lease
    if hasattr(source, "segment_ranges") and hasattr(source, "snowflake_ranges"):

        def lease(kind: str, name: str, count: int) -> IdRanges:
            if kind == "segment":
                return source.segment_ranges(name, count)
            return source.snowflake_ranges(name, count)

        return lease
    raise ConfigError("the source needs lease(kind, name, count) or segment_ranges/snowflake_ranges")


class IdPool:
    """Per-tag buffers of leased ID ranges over one source (see the module docs). Thread-safe.
    Use it as a context manager or call :meth:`close`, which stops the pool's threads."""

    def __init__(self, source: Any, options: PoolOptions = PoolOptions()) -> None:
        self._lease = _lease_function(source)
        self._options = options
        self._lock = threading.Lock()
        self._tags: Dict[Tuple[str, str], TagPool] = {}
        self._closed = False
        self._sched = Scheduler(f"{id(self):x}", options.lease_threads)

    @property
    def options(self) -> PoolOptions:
        return self._options

    def segment(self, tag: str) -> TagPool:
        """The buffer of ``tag``'s segment IDs; the first call starts leasing at once, later
        calls return the same buffer."""
        return self._handle("segment", _validate.tag(tag))

    def snowflake(self, key: str) -> TagPool:
        """The buffer of snowflake IDs leased under ``key`` (validated like a tag); IDs at most
        ``max_staleness`` old."""
        return self._handle("snowflake", _validate.tag(key, "snowflake key"))

    def next_id(self, tag: str) -> int:
        """``segment(tag).next_id()``."""
        pool = self._tags.get(("segment", tag))
        return (pool or self.segment(tag)).next_id()

    def stats(self) -> PoolStats:
        """A snapshot of every tag's and key's metrics."""
        with self._lock:
            pools = [self._tags[k] for k in sorted(self._tags)]
        return PoolStats(tuple(p.stats() for p in pools), self._sched.threads())

    def close(self) -> None:
        """Stops the refill thread and the lease workers (a lease in flight is abandoned: its IDs
        are a gap); later calls that need a lease raise
        :class:`~leaf_client.errors.PoolClosedError`."""
        with self._lock:
            self._closed = True
            pools: List[TagPool] = list(self._tags.values())
        for p in pools:
            p.close()
        self._sched.stop()

    def __enter__(self) -> "IdPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"IdPool({self._options!r}, tags={len(self._tags)})"

    def _handle(self, kind: str, name: str) -> TagPool:
        with self._lock:
            if self._closed:
                raise PoolClosedError("the pool is closed")
            pool = self._tags.get((kind, name))
            if pool is None:
                pool = TagPool(kind, name, self._lease, self._options, self._sched)
                self._tags[(kind, name)] = pool
            return pool
