"""AsyncTagPool: one tag's (or snowflake key's) buffer of leased ID ranges for asyncio code, and
its refill task: :class:`~leaf_client._pool_tag.TagPool`'s semantics on one event loop.

**Fast path.** Everything runs on one event loop, so taking an ID is a plain step on the head
range of a deque, with no lock: :meth:`AsyncTagPool.try_next_id` never awaits, and
:meth:`AsyncTagPool.next_id` awaits only when nothing is buffered. A snowflake key drops the
ranges leased ``max_staleness - tick`` ago or earlier before it hands out an ID.

**Refill.** One task per tag asks for the next lease once 10% of the current one is taken (or
when nothing is left) while fewer than ``depth`` leases are queued behind the current one,
adapts the size (``_sizing``) and retries a failed lease with backoff. The lease is awaited in
that task, so leases of different tags run concurrently and a slow one holds up only its tag.

**Waiting.** A caller that finds nothing waits at most ``max_wait`` for a lease
(:class:`PoolExhaustedError`), or fails at once when the last lease was refused in a way
waiting does not fix (:class:`PoolRejectedError`); :meth:`AsyncTagPool.close` fails waiting
callers with :class:`PoolClosedError`.
"""
from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any, Awaitable, Callable, Deque, List, Optional

from ._pool_lease import book
from ._pool_tag import TagStats
from ._sizing import Sizing, rate, retry_backoff
from .errors import PoolClosedError, PoolExhaustedError, PoolRejectedError
from .types import IdRanges

AsyncLease = Callable[[str, str, int], Awaitable[IdRanges]]


class AsyncTagPool:
    """The buffer of one tag's segment IDs or one key's snowflake IDs; from
    :meth:`AsyncIdPool.segment` / :meth:`AsyncIdPool.snowflake`. Use it on the event loop
    that created it."""

    def __init__(self, kind: str, name: str, lease: AsyncLease, options: Any) -> None:
        o = options
        self.kind = kind
        self.name = name
        self._lease_fn = lease
        self._o = o
        self._snowflake = kind == "snowflake"
        period = min(o.lease_period, o.max_staleness / 2) if self._snowflake else o.lease_period
        self._sizing = Sizing(o.min_lease, o.max_lease, period)
        self._ranges: Deque[List[Any]] = deque()  # [start, end, _pool_lease.Lease]
        self._wanted = True
        self._closed = False
        self._failure: Optional[tuple] = None  # (message, retryable)
        self._wake = asyncio.Event()  # the refill task waits here
        self._changed = asyncio.Event()  # callers wait here; replaced after each set
        self._c = dict.fromkeys(
            ("served", "leased", "retired", "leases_ok", "leases_failed", "last_lease_size", "target",
             "waits", "exhausted", "rejected"), 0)
        self._rate = 0.0
        self._wait_time = 0.0
        self._task = asyncio.get_running_loop().create_task(self._refill(), name=f"leaf-pool-refill-{name}")

    def __repr__(self) -> str:
        return f"AsyncTagPool(kind={self.kind!r}, name={self.name!r})"

    # ---- callers -----------------------------------------------------------------------------

    async def next_id(self) -> int:
        """The next ID: at once when one is buffered; otherwise waits up to ``max_wait`` for a
        lease. Raises :class:`PoolExhaustedError`, :class:`PoolRejectedError` or
        :class:`PoolClosedError`."""
        got = self._take()
        if got is not None:
            return got
        return await self._wait()

    def try_next_id(self) -> Optional[int]:
        """An ID if one is buffered, never waiting; ``None`` asks the refill task for a lease."""
        return self._take()

    async def _wait(self) -> int:
        started = time.monotonic()
        self._c["waits"] += 1
        self._want()
        try:
            while True:
                got = self._take()
                if got is not None:
                    return got
                if self._closed:
                    raise PoolClosedError(f"the pool of {self.kind} {self.name!r} is closed")
                if self._failure is not None and not self._failure[1]:
                    self._c["rejected"] += 1
                    raise PoolRejectedError(self.kind, self.name, self._failure[0])
                waited = time.monotonic() - started
                if waited >= self._o.max_wait:
                    self._c["exhausted"] += 1
                    last = self._failure[0] if self._failure else None
                    raise PoolExhaustedError(self.kind, self.name, waited, last)
                try:
                    await asyncio.wait_for(self._changed.wait(), self._o.max_wait - waited)
                except asyncio.TimeoutError:
                    pass
        finally:
            self._wait_time += time.monotonic() - started

    def _take(self) -> Optional[int]:
        """One ID of the head range, or ``None`` (asking for a lease)."""
        ranges = self._ranges
        if self._snowflake and ranges:
            self._retire(time.monotonic())
        if not ranges:
            if not self._closed:
                self._want()
            return None
        r = ranges[0]
        n = r[0]
        r[0] = n + 1
        lease = r[2]
        lease.taken += 1
        if r[0] >= r[1]:
            ranges.popleft()
            if not ranges:
                self._want()
        if not lease.prefetched and lease.taken > lease.size // 10:
            lease.prefetched = True
            self._want()
        self._c["served"] += 1
        return n

    def _want(self) -> None:
        self._wanted = True
        self._wake.set()

    def _notify(self) -> None:
        """Wakes every waiting caller."""
        self._changed.set()
        self._changed = asyncio.Event()

    # ---- the refill task ---------------------------------------------------------------------

    def _retire(self, now: float) -> None:
        """Drops snowflake ranges leased ``max_staleness - tick`` ago or earlier."""
        cutoff = now - (self._o.max_staleness - self._o.tick)
        ranges = self._ranges
        while ranges and ranges[0][2].sent <= cutoff:
            start, end, _ = ranges.popleft()
            self._c["retired"] += end - start

    def _needs_lease(self) -> bool:
        queued = len({id(r[2]) for r in self._ranges}) - 1
        if queued >= self._o.depth:
            self._wanted = False
            return False
        wanted, self._wanted = self._wanted, False
        return wanted or not self._ranges

    async def _refill(self) -> None:
        o = self._o
        target = self._sizing.clamp(o.initial_lease)
        self._c["target"] = target
        failures = 0
        retry_at: Optional[float] = None
        last_request: Optional[tuple] = None  # (at, served, waits)
        while not self._closed:
            self._wake.clear()  # before looking: a want from now on sets it again
            now = time.monotonic()
            if self._snowflake:
                self._retire(now)
            if retry_at is not None and now >= retry_at:
                retry_at = None  # used: a failed lease left _wanted set, so it is retried now
            if retry_at is None and self._needs_lease():
                if failures == 0:
                    served, waits = self._c["served"], self._c["waits"]
                    if last_request is not None:
                        at, served_then, waits_then = last_request
                        self._rate = rate(served - served_then, now - at)
                        target = self._sizing.adapt(target, 0.0 if waits > waits_then else now - at)
                        self._c["target"] = target
                    last_request = (now, served, waits)
                try:
                    result: Any = await self._lease_fn(self.kind, self.name, target)
                except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
                    raise
                except BaseException as e:  # noqa: BLE001 - every failure is a failed lease
                    result = e
                try:
                    ok = self._landed(result, target, now, time.monotonic())
                except (KeyboardInterrupt, SystemExit):
                    raise
                except BaseException as e:  # noqa: BLE001 - an answer that cannot be booked failed
                    self._c["leases_failed"] += 1
                    self._failure = (f"an unexpected error: {e!r}", True)
                    self._notify()
                    ok = False
                if ok:
                    failures, retry_at = 0, None
                else:
                    failures += 1
                    retry_at = time.monotonic() + retry_backoff(failures, o.retry_min, o.retry_max)
                    self._wanted = True  # the lease is still wanted: retried at retry_at
                continue
            timeout = None if retry_at is None else max(0.0, retry_at - now)
            if self._snowflake:
                timeout = o.tick if timeout is None else min(timeout, o.tick)
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except asyncio.TimeoutError:
                pass

    def _landed(self, result: Any, size: int, sent: float, now: float) -> bool:
        """Books a lease's outcome; whether it was good."""
        stale_after = self._o.max_staleness - self._o.tick if self._snowflake else None
        self._failure = book(result, size, sent, now, stale_after, self._c, self._ranges)
        self._notify()
        return self._failure is None

    # ---- the rest ----------------------------------------------------------------------------

    def stats(self) -> TagStats:
        """A snapshot of this tag's metrics."""
        c = self._c
        return TagStats(
            kind=self.kind,
            name=self.name,
            ids_served=c["served"],
            ids_leased=c["leased"],
            ids_retired=c["retired"],
            ids_buffered=sum(r[1] - r[0] for r in self._ranges),
            leases_ok=c["leases_ok"],
            leases_failed=c["leases_failed"],
            last_lease_size=c["last_lease_size"],
            lease_target=c["target"],
            rate_per_sec=self._rate,
            waits=c["waits"],
            wait_time=self._wait_time,
            exhausted=c["exhausted"],
            rejected=c["rejected"],
        )

    async def close(self) -> None:
        """Cancels the refill task and awaits it (a lease in flight is abandoned: its IDs are a
        gap); waiting callers get :class:`PoolClosedError`. IDs still buffered are handed out."""
        self._closed = True
        self._notify()
        self._task.cancel()
        # The task's end (cancelled) is collected; a cancellation of the caller still propagates.
        await asyncio.gather(self._task, return_exceptions=True)

    @property
    def refill_task(self) -> "asyncio.Task[None]":
        """The refill task (done once the pool is closed)."""
        return self._task
