"""TagPool: one tag's (or snowflake key's) buffer of leased ID ranges and its refill state (the
Rust client's ``pool/handle.rs`` + ``refill.rs``, re-expressed with a lock, a condition and
thread-local chunks). The threads that run the refill are the pool's, shared by all its tags
(``_pool_sched``).

**Fast path.** Each calling thread holds a chunk of consecutive IDs in ``threading.local``
fields, taken from the shared buffer with one locked step; :meth:`TagPool.next_id` hands them
out without a lock. Threads' IDs therefore interleave by chunk (segment IDs stay
trend-increasing), and IDs left in a thread's chunk when it ends are a gap, never a duplicate.
A snowflake chunk also checks its lease time against the retirement watermark on every ID.

**Refill.** The pool's refill thread serves this tag (``_service``) when it is woken (a caller
reached 10% of the current lease or found nothing, a lease landed) or a timer is due (a retry,
a snowflake key's tick). It asks for the next lease while fewer than ``depth`` leases are
queued behind the current one, at most one lease of the tag in flight; it adapts the size
(``_sizing``), retries a failed lease with backoff and retires snowflake ranges that got too
old. The lease call runs on one of the pool's lease workers (``_lease``), which books its
answer here, so the refill thread keeps serving other tags (and ticks) while a lease is slow.

**Waiting.** A caller that finds nothing waits at most ``max_wait`` for a lease
(:class:`PoolExhaustedError`), or fails at once when the last lease was refused in a way
waiting does not fix (:class:`PoolRejectedError`).
"""
from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Deque, List, Optional

from ._pool_lease import book
from ._sizing import Sizing, rate, retry_backoff
from .errors import PoolClosedError, PoolExhaustedError, PoolRejectedError
from .types import IdRanges

_NEVER = float("-inf")


@dataclass(frozen=True)
class TagStats:
    """A snapshot of one tag's (or key's) pool. ``ids_served`` counts IDs handed to calling
    threads' chunks (up to ``local_chunk - 1`` per thread may still be unused)."""

    kind: str
    name: str
    ids_served: int
    ids_leased: int
    ids_retired: int
    ids_buffered: int
    leases_ok: int
    leases_failed: int
    last_lease_size: int
    lease_target: int
    rate_per_sec: float
    waits: int
    wait_time: float
    exhausted: int
    rejected: int


class _Local(threading.local):
    def __init__(self) -> None:
        self.next = 0
        self.end = 0
        self.leased_at = 0.0


class TagPool:
    """The buffer of one tag's segment IDs or one key's snowflake IDs; from
    :meth:`IdPool.segment` / :meth:`IdPool.snowflake`. Thread-safe."""

    def __init__(
        self, kind: str, name: str, lease: Callable[[str, str, int], IdRanges], options: Any, sched: Any
    ) -> None:
        o = options
        self.kind = kind
        self.name = name
        self._lease_fn = lease
        self._o = o
        self._sched = sched
        self._snowflake = kind == "snowflake"
        period = min(o.lease_period, o.max_staleness / 2) if self._snowflake else o.lease_period
        self._sizing = Sizing(o.min_lease, o.max_lease, period)
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)  # callers wait here
        self._ranges: Deque[List[Any]] = deque()  # [start, end, _pool_lease.Lease]
        self._local = _Local()
        self._retired_below = _NEVER
        self._wanted = True
        self._queued = False  # woken, not served yet
        self._timer_seq = -1  # the scheduler's: which of this tag's timers is current
        self._closed = False
        self._failure: Optional[tuple] = None  # (message, retryable)
        # The refill's state (the tag's lock held).
        self._target = self._sizing.clamp(o.initial_lease)
        self._failures = 0
        self._retry_at: Optional[float] = None
        self._inflight: Optional[tuple] = None  # (size, sent)
        self._last_request: Optional[tuple] = None  # (at, served, waits)
        self._c = dict.fromkeys(
            ("served", "leased", "retired", "leases_ok", "leases_failed", "last_lease_size", "target",
             "waits", "exhausted", "rejected"), 0)
        self._c["target"] = self._target
        self._rate = 0.0
        self._wait_time = 0.0
        with self._lock:
            self._kick()

    def __repr__(self) -> str:
        return f"TagPool(kind={self.kind!r}, name={self.name!r})"

    # ---- callers -----------------------------------------------------------------------------

    def next_id(self) -> int:
        """The next ID: lock-free from this thread's chunk; otherwise takes a chunk, waiting up
        to ``max_wait`` when nothing is buffered. Raises :class:`PoolExhaustedError`,
        :class:`PoolRejectedError` or :class:`PoolClosedError`."""
        loc = self._local
        n = loc.next
        if n < loc.end and loc.leased_at > self._retired_below:
            loc.next = n + 1
            return n
        return self._take(True)

    def try_next_id(self) -> Optional[int]:
        """An ID if one is buffered (or in this thread's chunk), never waiting; ``None`` asks
        the refill thread for a lease."""
        loc = self._local
        n = loc.next
        if n < loc.end and loc.leased_at > self._retired_below:
            loc.next = n + 1
            return n
        return self._take(False)

    def _take(self, wait: bool) -> Optional[int]:
        loc = self._local
        with self._lock:
            if loc.next < loc.end:  # a chunk of a retired range: drop what is left
                self._c["retired"] += loc.end - loc.next
                self._c["served"] -= loc.end - loc.next
                loc.next = loc.end
            got = self._take_chunk(loc)
            if got is not None or not wait:
                if got is None:
                    self._want()
                return got
            return self._wait(loc)

    def _wait(self, loc: _Local) -> int:
        started = time.monotonic()
        self._c["waits"] += 1
        self._want()
        try:
            while True:
                got = self._take_chunk(loc)
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
                self._ready.wait(self._o.max_wait - waited)
        finally:
            self._wait_time += time.monotonic() - started

    def _take_chunk(self, loc: _Local) -> Optional[int]:
        """Moves up to ``local_chunk`` IDs of the current range into ``loc`` (lock held)."""
        if self._snowflake:
            self._retire(time.monotonic())
        ranges = self._ranges
        while ranges:
            r = ranges[0]
            start, end, lease = r
            n = min(self._o.local_chunk, end - start)
            r[0] = start + n
            if r[0] >= end:
                ranges.popleft()
            lease.taken += n
            if not lease.prefetched and lease.taken > lease.size // 10:
                lease.prefetched = True
                self._want()
            if not ranges:
                self._want()
            self._c["served"] += n
            loc.next, loc.end, loc.leased_at = start + 1, start + n, lease.sent
            return start
        return None

    def _want(self) -> None:
        """Asks the refill thread for a lease (lock held)."""
        self._wanted = True
        self._kick()

    def _kick(self) -> None:
        """Has the refill thread serve this tag soon (lock held)."""
        if not self._queued:
            self._queued = True
            self._sched.wake(self)

    # ---- the refill (on the pool's refill thread and lease workers) -----------------------

    def _retire(self, now: float) -> None:
        """Drops snowflake ranges leased ``max_staleness - tick`` ago or earlier (lock held)."""
        cutoff = now - (self._o.max_staleness - self._o.tick)
        ranges = self._ranges
        while ranges and ranges[0][2].sent <= cutoff:
            start, end, _ = ranges.popleft()
            self._c["retired"] += end - start
        if cutoff > self._retired_below:
            self._retired_below = cutoff

    def _needs_lease(self) -> bool:
        queued = len({id(r[2]) for r in self._ranges}) - 1
        if queued >= self._o.depth:
            self._wanted = False
            return False
        wanted, self._wanted = self._wanted, False
        return wanted or not self._ranges

    def _service(self, now: float) -> Optional[float]:
        """One turn of the refill thread for this tag: retires stale snowflake ranges and asks
        a lease worker for a lease when one is due. Returns when to be served again without a
        wake (a retry, a snowflake tick), or ``None``."""
        with self._lock:
            self._queued = False
            if self._closed:
                return None
            if self._snowflake:
                self._retire(now)
            size = None
            if self._retry_at is not None and now >= self._retry_at:
                self._retry_at = None  # used: a failed lease left _wanted set, so it is retried now
            if self._inflight is None and self._retry_at is None and self._needs_lease():
                if self._failures == 0:
                    served, waits = self._c["served"], self._c["waits"]
                    if self._last_request is not None:
                        at, served_then, waits_then = self._last_request
                        lasted = now - at
                        self._rate = rate(served - served_then, lasted)
                        self._target = self._sizing.adapt(self._target, 0.0 if waits > waits_then else lasted)
                        self._c["target"] = self._target
                    self._last_request = (now, served, waits)
                size = self._target
                self._inflight = mine = (size, now)
            # A retry still to come (never a past time: the refill thread would spin on it).
            again = self._retry_at if self._inflight is None else None
            if self._snowflake:
                tick = now + self._o.tick
                again = tick if again is None else min(again, tick)
        if size is not None:
            try:
                self._sched.submit(lambda: self._lease(size))
            except BaseException as e:  # noqa: BLE001 - e.g. no thread could be started
                with self._lock:
                    if self._inflight is mine and not self._closed:
                        self._landed(e, time.monotonic())
                        again = self._retry_at
        return again

    def _fault(self, error: BaseException, now: float) -> Optional[float]:
        """Books an unexpected error of the refill (not of a lease call) as a failed lease, to
        be retried with backoff (lock not held); when to be served again."""
        with self._lock:
            self._queued = False
            if self._closed:
                return None
            self._landed_error(error, now)
            return self._retry_at if self._inflight is None else None

    def _lease(self, size: int) -> None:
        """On a lease worker: one lease call, booked into the buffer."""
        try:
            result: Any = self._lease_fn(self.kind, self.name, size)
        except BaseException as e:  # noqa: BLE001 - every failure is a failed lease
            result = e
        with self._lock:
            if self._closed or self._inflight is None:
                return
            try:
                self._landed(result, time.monotonic())
            except BaseException as e:  # noqa: BLE001 - a bad answer is a failed lease
                self._inflight = None
                self._landed_error(e, time.monotonic())
            self._kick()

    def _landed_error(self, error: BaseException, now: float) -> None:
        """Books an answer that could not be booked as a failed lease (lock held)."""
        self._c["leases_failed"] += 1
        self._failure = (f"an unexpected error: {error!r}", True)
        self._failures += 1
        self._wanted = True
        self._retry_at = now + retry_backoff(self._failures, self._o.retry_min, self._o.retry_max)
        self._ready.notify_all()

    def _landed(self, result: Any, now: float) -> None:
        """Books a lease's outcome (lock held)."""
        size, sent = self._inflight
        self._inflight = None
        stale_after = self._o.max_staleness - self._o.tick if self._snowflake else None
        self._failure = book(result, size, sent, now, stale_after, self._c, self._ranges)
        if self._failure is None:
            self._failures = 0
        else:
            self._failures += 1
            self._wanted = True  # the lease is still wanted: retried at _retry_at
            self._retry_at = now + retry_backoff(self._failures, self._o.retry_min, self._o.retry_max)
        self._ready.notify_all()

    # ---- the rest ----------------------------------------------------------------------------

    def stats(self) -> TagStats:
        """A snapshot of this tag's metrics."""
        with self._lock:
            c = self._c
            buffered = sum(r[1] - r[0] for r in self._ranges)
            return TagStats(
                kind=self.kind,
                name=self.name,
                ids_served=c["served"],
                ids_leased=c["leased"],
                ids_retired=c["retired"],
                ids_buffered=buffered,
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

    def close(self) -> None:
        """Stops the refill of this tag; waiting callers get :class:`PoolClosedError`. A lease
        in flight is abandoned (its IDs are a gap)."""
        with self._lock:
            self._closed = True
            self._ready.notify_all()
