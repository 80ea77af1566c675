"""AsyncIdPool: the asyncio twin of :class:`~leaf_client.IdPool`, a client-side cache of ID
ranges leased from the cluster, per tag, refilled ahead by one asyncio task per tag (no
thread)::

    async with AsyncLeafClient(["http://10.0.0.1:8080"]) as client:
        async with AsyncIdPool(client) as pool:
            order_id = await pool.next_id("orders")          # at once while IDs are buffered
            flake = await pool.snowflake("payments").next_id()

The semantics are :class:`~leaf_client.IdPool`'s (see ``_aio_pool_tag``): leases through the
client's failover, retries and deadline, the next one asked for once 10% of the current one is
used, sized so that a lease lasts about ``lease_period``; callers wait only when nothing is
buffered, at most ``max_wait``; every ID lies in a range leased to this pool, none twice. The
:class:`~leaf_client.PoolOptions` are shared with :class:`~leaf_client.IdPool`
(``local_chunk`` and ``lease_threads`` do not apply: there are no threads).

The source is an :class:`~leaf_client.AsyncLeafClient`, or any object whose
``lease(kind, name, count)`` is a coroutine function answering
:class:`~leaf_client.IdRanges`. The pool belongs to the event loop it is first used on.
"""
from __future__ import annotations

import asyncio
import inspect
from typing import Any, Dict, List, Tuple

from . import _validate
from ._aio_pool_tag import AsyncLease, AsyncTagPool
from .errors import ConfigError, PoolClosedError
from .pool import PoolOptions, PoolStats
from .types import IdRanges


def _async_lease_function(source: Any) -> AsyncLease:
    lease = getattr(source, "lease", None)
    if lease is not None:
        if not inspect.iscoroutinefunction(lease):
            raise ConfigError("the source's lease(kind, name, count) must be a coroutine function (async def)")
        return lease
    seg, flake = getattr(source, "segment_ranges", None), getattr(source, "snowflake_ranges", None)
    if inspect.iscoroutinefunction(seg) and inspect.iscoroutinefunction(flake):

        async def lease_ranges(kind: str, name: str, count: int) -> IdRanges:
            if kind == "segment":
                return await seg(name, count)
            return await flake(name, count)

        return lease_ranges
    raise ConfigError(
        "an AsyncIdPool needs an AsyncLeafClient or a source with async lease(kind, name, count); "
        "for a LeafClient or a GrpcClient use IdPool"
    )


class AsyncIdPool:
    """Per-tag buffers of leased ID ranges over one asyncio source (see the module docs). Use
    ``async with`` or ``await pool.aclose()``, which cancels and awaits every refill task."""

    def __init__(self, source: Any, options: PoolOptions = PoolOptions()) -> None:
        self._lease = _async_lease_function(source)
        self._options = options
        self._tags: Dict[Tuple[str, str], AsyncTagPool] = {}
        self._closed = False

    @property
    def options(self) -> PoolOptions:
        return self._options

    def segment(self, tag: str) -> AsyncTagPool:
        """The buffer of ``tag``'s segment IDs; the first call (within a running event loop)
        starts its refill task, which leases at once; later calls return the same buffer."""
        return self._handle("segment", _validate.tag(tag))

    def snowflake(self, key: str) -> AsyncTagPool:
        """The buffer of snowflake IDs leased under ``key``; IDs at most ``max_staleness`` old."""
        return self._handle("snowflake", _validate.tag(key, "snowflake key"))

    async def next_id(self, tag: str) -> int:
        """``await segment(tag).next_id()``."""
        pool = self._tags.get(("segment", tag))
        return await (pool or self.segment(tag)).next_id()

    def stats(self) -> PoolStats:
        """A snapshot of every tag's and key's metrics (``threads`` is 0: tasks only)."""
        return PoolStats(tuple(self._tags[k].stats() for k in sorted(self._tags)), 0)

    def tasks(self) -> List["asyncio.Task[None]"]:
        """The refill tasks, one per tag or key (all done once the pool is closed)."""
        return [p.refill_task for p in self._tags.values()]

    async def aclose(self) -> None:
        """Cancels every refill task and awaits them (leases in flight are abandoned: their IDs
        are a gap); waiting callers get :class:`~leaf_client.errors.PoolClosedError`, and so do
        later calls that need a lease."""
        self._closed = True
        await asyncio.gather(*(p.close() for p in list(self._tags.values())))

    async def __aenter__(self) -> "AsyncIdPool":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"AsyncIdPool({self._options!r}, tags={len(self._tags)})"

    def _handle(self, kind: str, name: str) -> AsyncTagPool:
        if self._closed:
            raise PoolClosedError("the pool is closed")
        pool = self._tags.get((kind, name))
        if pool is None:
            pool = AsyncTagPool(kind, name, self._lease, self._options)
            self._tags[(kind, name)] = pool
        return pool
