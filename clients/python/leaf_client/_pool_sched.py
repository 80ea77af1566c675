"""The threads of an :class:`~leaf_client.IdPool`, whatever its number of tags: one refill
thread (a scheduler) and a small bounded set of lease workers.

**The refill thread** serves every tag of the pool. A tag asks for its attention with
:meth:`Scheduler.wake` (a caller reached a prefetch point or found nothing, a lease landed) or
by returning a due time from its ``_service`` (a failed lease's retry, a snowflake key's
retirement tick); the thread then calls the tag's ``_service``, which decides under the tag's
own lock whether to lease. Timers live in one heap; a tag re-scheduled before its timer fired
makes the older entry stale (skipped by its sequence number).

**The lease workers** (``lease_threads``, at most 3, started when first needed) run the lease
calls, so the refill thread never blocks on the network and one slow lease does not hold up
the refills of other tags: up to ``lease_threads`` leases (of different tags; one per tag) are
in flight at once, and each is bounded by the client's own timeout and deadline. A worker books
its answer into the tag (``_landed``) and wakes the refill thread for it.

A pool therefore runs at most ``1 + lease_threads`` (4) threads, all daemon threads: a lease
still in flight when the process exits does not keep it alive (its IDs are a gap).
"""
from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from typing import Any, Callable, Deque, List, Optional, Tuple

#: Most lease worker threads of one pool (with the refill thread: at most 4 threads a pool).
MAX_LEASE_THREADS = 3


class Scheduler:
    """The refill thread and lease workers of one pool (internal)."""

    def __init__(self, name: str, lease_threads: int) -> None:
        self._name = name
        self._max_workers = max(1, min(MAX_LEASE_THREADS, lease_threads))
        lock = threading.Lock()
        self._cond = threading.Condition(lock)  # the refill thread waits here
        self._work_cond = threading.Condition(lock)  # idle lease workers wait here
        self._woken: Deque[Any] = deque()  # tags to serve now
        self._timers: List[Tuple[float, int, Any]] = []  # (due, seq, tag): a heap
        self._seq = itertools.count()
        self._jobs: Deque[Callable[[], None]] = deque()
        self._idle = 0
        self._workers: List[threading.Thread] = []
        self._stopped = False
        self._thread: Optional[threading.Thread] = None

    # ---- from tags and callers ---------------------------------------------------------------

    def wake(self, tag: Any) -> None:
        """Serve ``tag`` soon. Called with the tag's lock held (lock order: tag, scheduler)."""
        with self._cond:
            if self._stopped:
                return
            self._woken.append(tag)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=f"leaf-pool-refill-{self._name}", daemon=True)
                self._thread.start()
            self._cond.notify()

    def submit(self, job: Callable[[], None]) -> None:
        """Runs ``job`` (a lease and its booking) on a lease worker; never blocks."""
        with self._cond:
            if self._stopped:
                return
            self._jobs.append(job)
            # An idle worker counts as idle until it wakes: jobs submitted back to back may
            # outnumber the idle workers already, and each of those jobs needs a worker of its own.
            if len(self._jobs) > self._idle and len(self._workers) < self._max_workers:
                n = len(self._workers) + 1
                t = threading.Thread(target=self._work, name=f"leaf-pool-lease-{self._name}-{n}", daemon=True)
                self._workers.append(t)
                try:
                    t.start()
                except BaseException:
                    self._workers.remove(t)
                    if not self._workers:  # nobody would ever run the job
                        self._jobs.remove(job)
                        raise
            self._work_cond.notify()

    def threads(self) -> int:
        """How many of this pool's threads are alive."""
        with self._cond:
            ts = ([self._thread] if self._thread is not None else []) + self._workers
        return sum(1 for t in ts if t.is_alive())

    def stop(self, timeout: float = 1.0) -> None:
        """Stops the refill thread and the idle workers (a worker in a lease call finishes it
        and then stops; its answer is dropped). Waits up to ``timeout`` for the refill thread."""
        with self._cond:
            self._stopped = True
            self._woken.clear()
            self._timers.clear()
            self._jobs.clear()
            self._cond.notify_all()
            self._work_cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    # ---- the refill thread -------------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            with self._cond:
                batch = self._due_tags()
                while not batch and not self._stopped:
                    timeout = None
                    if self._timers:
                        timeout = max(0.0, self._timers[0][0] - time.monotonic())
                    self._cond.wait(timeout)
                    batch = self._due_tags()
                if self._stopped:
                    return
            for tag in batch:
                due = self._serve(tag)
                if due is not None:
                    self._at(tag, due)

    @staticmethod
    def _serve(tag: Any) -> Optional[float]:
        """One ``_service`` of ``tag``; an unexpected error of it is the tag's failed lease
        (retried with backoff), never the end of the refill thread."""
        try:
            return tag._service(time.monotonic())
        except BaseException as e:  # noqa: BLE001 - the thread serves every tag of the pool
            try:
                return tag._fault(e, time.monotonic())
            except BaseException:  # noqa: BLE001
                return time.monotonic() + 1.0

    def _due_tags(self) -> List[Any]:
        """The tags to serve now (lock held): every woken tag, and those whose timer is due
        (skipping stale timers), each once."""
        out: List[Any] = []
        seen = set()
        while self._woken:
            tag = self._woken.popleft()
            if id(tag) not in seen:
                seen.add(id(tag))
                out.append(tag)
        now = time.monotonic()
        timers = self._timers
        while timers and timers[0][0] <= now:
            _, seq, tag = heapq.heappop(timers)
            if tag._timer_seq == seq and id(tag) not in seen:
                seen.add(id(tag))
                out.append(tag)
        return out

    def _at(self, tag: Any, due: float) -> None:
        with self._cond:
            if self._stopped:
                return
            seq = next(self._seq)
            tag._timer_seq = seq  # older timers of this tag are stale now
            heapq.heappush(self._timers, (due, seq, tag))
            if self._timers[0][1] == seq:
                self._cond.notify()

    # ---- the lease workers -------------------------------------------------------------------

    def _work(self) -> None:
        try:
            while True:
                with self._cond:
                    self._idle += 1
                    while not self._jobs and not self._stopped:
                        self._work_cond.wait()
                    self._idle -= 1
                    if self._stopped:
                        return
                    job = self._jobs.popleft()
                try:
                    job()
                except BaseException:  # noqa: BLE001 - a job books its own failures; the worker stays
                    pass
        finally:
            with self._cond:
                me = threading.current_thread()
                if me in self._workers:
                    self._workers.remove(me)
