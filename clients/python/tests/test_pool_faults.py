"""IdPool and AsyncIdPool when leases fail or the machinery meets an unexpected error (fake
sources, no server): a failed prefetch is retried while IDs remain, without spinning; jobs
submitted back to back each get a lease worker; an unexpected exception (a BaseException
subclass, an answer that cannot be booked, an error in a tag's service) is a failed lease of
that tag, and the pool's threads (or the tag's refill task) keep serving every tag."""
from __future__ import annotations

import asyncio
import threading
import time

from _harness import wait_for

from leaf_client import AsyncIdPool, IdPool, IdRanges, PoolOptions, UnavailableError
from leaf_client._pool_sched import Scheduler
from leaf_client.errors import ErrorCode

# Few _service calls / refill turns are expected between a failed prefetch and its retry (the
# failure's wake, the retry's timer, the landing's wake); a spinning refill makes thousands.
MAX_TURNS = 50

OPTS = PoolOptions(
    min_lease=1000, initial_lease=1000, max_lease=1000, local_chunk=1, retry_min=0.2, retry_max=0.2, max_wait=5
)


class _Odd(BaseException):
    """An exception outside ``Exception`` (not SystemExit / KeyboardInterrupt)."""


class _BadRanges(IdRanges):
    """An answer whose booking raises."""

    def check(self, count):
        raise RuntimeError("this answer cannot be checked")


class Script:
    """Answers consecutive ranges; ``plan[name]`` lists what the first calls of ``name`` do
    instead: ``"fail"`` (UnavailableError), ``"odd"`` (raise _Odd), ``"bad"`` (a _BadRanges)."""

    def __init__(self, plan=None):
        self.plan = {k: list(v) for k, v in (plan or {}).items()}
        self.calls = {}
        self.lock = threading.Lock()
        self.next = 1

    def _answer(self, name, count):
        with self.lock:
            self.calls[name] = self.calls.get(name, 0) + 1
            step = self.plan.get(name, [])
            what = step.pop(0) if step else "ok"
            start, self.next = self.next, self.next + count
        if what == "fail":
            raise UnavailableError(ErrorCode.UNAVAILABLE, "node down", node="fake")
        if what == "odd":
            raise _Odd("not an Exception")
        cls = _BadRanges if what == "bad" else IdRanges
        return cls.from_pairs([(start, start + count)])

    def lease(self, kind, name, count):
        return self._answer(name, count)


class AsyncScript(Script):
    async def lease(self, kind, name, count):
        await asyncio.sleep(0)
        return self._answer(name, count)


# ---- finding: a failed prefetch is retried, and the refill does not spin --------------------


def test_a_failed_prefetch_is_retried_without_spinning():
    src = Script({"t": ["ok", "fail"]})  # the first lease, then a failed prefetch, then fine
    with IdPool(src, OPTS) as pool:
        tp = pool.segment("t")
        served = [0]
        real = tp._service

        def counting(now):
            served[0] += 1
            return real(now)

        tp._service = counting  # the refill thread looks it up on the tag each time
        wait_for("the first lease", lambda: tp.stats().leases_ok == 1, timeout=5)
        for _ in range(101):  # past 10% of the lease: the prefetch is asked for
            assert tp.try_next_id() is not None
        wait_for("the prefetch to fail", lambda: tp.stats().leases_failed == 1, timeout=5)
        start = served[0]

        def retried():
            turns = served[0] - start
            assert turns <= MAX_TURNS, f"the refill thread spins: {turns} _service calls"
            return tp.stats().leases_ok == 2

        # Nobody waits: 899 IDs are still buffered; the failed prefetch is retried on its own.
        wait_for("the retried prefetch", retried, timeout=5, every=0.01)
        assert src.calls["t"] == 3
        assert tp.stats().ids_buffered == 2000 - 101


def test_async_a_failed_prefetch_is_retried_without_spinning():
    async def main():
        src = AsyncScript({"t": ["ok", "fail"]})
        async with AsyncIdPool(src, OPTS) as pool:
            tp = pool.segment("t")
            turns = [0]
            real = tp._needs_lease

            def counting():
                turns[0] += 1
                return real()

            tp._needs_lease = counting  # looked up on each turn of the refill task
            deadline = time.monotonic() + 5
            while tp.stats().leases_ok < 1:
                assert time.monotonic() < deadline, "the first lease"
                await asyncio.sleep(0.01)
            for _ in range(101):
                assert tp.try_next_id() is not None
            while tp.stats().leases_failed < 1:
                assert time.monotonic() < deadline, "the prefetch to fail"
                await asyncio.sleep(0.01)
            start = turns[0]
            while tp.stats().leases_ok < 2:  # nobody waits: IDs are still buffered
                assert turns[0] - start <= MAX_TURNS, f"the refill task spins: {turns[0] - start} turns"
                assert time.monotonic() < deadline, "the retried prefetch"
                await asyncio.sleep(0.01)
            assert turns[0] - start <= MAX_TURNS
            assert src.calls["t"] == 3

    asyncio.run(asyncio.wait_for(main(), 30))


# ---- finding: jobs submitted back to back each get a worker ---------------------------------


def test_jobs_submitted_back_to_back_with_one_idle_worker_run_at_once():
    sched = Scheduler("back-to-back", 3)
    release = threading.Event()
    try:
        warm = threading.Event()
        sched.submit(warm.set)
        assert warm.wait(5)
        wait_for("one idle worker", lambda: sched._idle == 1, timeout=5, every=0.01)
        a_started, b_started = threading.Event(), threading.Event()

        def a():  # tag A's lease: hangs
            a_started.set()
            release.wait(30)

        sched.submit(a)  # one batch of the refill thread: A, then B, back to back
        sched.submit(b_started.set)
        assert b_started.wait(5), "B's lease waited behind A's"
        assert a_started.is_set() and not release.is_set()
        assert sched.threads() == 2
    finally:
        release.set()
        sched.stop()


# ---- finding: unexpected exceptions are a tag's failed lease, the machinery keeps running -----


def test_a_lease_raising_a_base_exception_does_not_kill_the_worker():
    src = Script({"a": ["odd"]})
    opts = PoolOptions(lease_threads=1, retry_min=0.05, retry_max=0.05, max_wait=5)
    with IdPool(src, opts) as pool:
        a = pool.segment("a")
        assert a.next_id() > 0  # the failed lease is retried on the (only) worker
        assert pool.segment("b").next_id() > 0
        assert a.stats().leases_failed == 1 and a.stats().leases_ok >= 1
        assert pool.stats().threads == 2


def test_an_answer_that_cannot_be_booked_is_a_failed_lease():
    src = Script({"a": ["bad"]})
    opts = PoolOptions(lease_threads=1, retry_min=0.05, retry_max=0.05, max_wait=5)
    with IdPool(src, opts) as pool:
        a = pool.segment("a")
        assert a.next_id() > 0
        assert pool.segment("b").next_id() > 0
        st = a.stats()
        assert st.leases_failed == 1 and st.leases_ok >= 1
        assert pool.stats().threads == 2


class _FakeTag:
    def __init__(self, raises=0):
        self._timer_seq = -1
        self.raises = raises
        self.served = 0
        self.faults = []

    def _service(self, now):
        self.served += 1
        if self.raises:
            self.raises -= 1
            raise _Odd("in _service")
        return None

    def _fault(self, error, now):
        self.faults.append(error)
        return now + 0.01  # retried soon


def test_an_error_in_a_tags_service_does_not_kill_the_refill_thread():
    sched = Scheduler("service-error", 1)
    try:
        bad, good = _FakeTag(raises=1), _FakeTag()
        sched.wake(bad)
        sched.wake(good)
        wait_for("both tags served", lambda: bad.served >= 2 and good.served >= 1, timeout=5, every=0.01)
        assert len(bad.faults) == 1
        later = _FakeTag()
        sched.wake(later)
        wait_for("a later tag served", lambda: later.served == 1, timeout=5, every=0.01)
    finally:
        sched.stop()


def test_an_error_in_a_real_tags_service_is_its_failed_lease():
    src = Script()
    opts = PoolOptions(retry_min=0.05, retry_max=0.05, max_wait=5)
    with IdPool(src, opts) as pool:
        a = pool.segment("a")
        assert a.next_id() > 0
        real = a._retire
        calls = [0]

        def broken(now):  # the next _service of "a" raises
            calls[0] += 1
            if calls[0] == 1:
                raise _Odd("in _service")
            return real(now)

        a._snowflake = True  # have _service call _retire (the refill's own code path)
        a._retire = broken
        with a._lock:
            a._kick()
        wait_for("the error booked", lambda: a.stats().leases_failed == 1, timeout=5, every=0.01)
        a._snowflake = False
        assert pool.segment("b").next_id() > 0
        for _ in range(1500):  # "a" needs new leases: its refill still runs
            assert a.next_id() > 0


def test_async_unexpected_lease_errors_are_failed_leases():
    async def main():
        src = AsyncScript({"odd": ["odd"], "bad": ["bad"]})
        opts = PoolOptions(retry_min=0.05, retry_max=0.05, max_wait=5)
        async with AsyncIdPool(src, opts) as pool:
            for name in ("odd", "bad"):
                tp = pool.segment(name)
                assert await tp.next_id() > 0, name
                assert not tp.refill_task.done(), name
                st = tp.stats()
                assert st.leases_failed == 1 and st.leases_ok >= 1, (name, st)
                for _ in range(2500):  # more leases: the refill task is alive
                    assert await tp.next_id() > 0
            assert await pool.next_id("other") > 0

    asyncio.run(asyncio.wait_for(main(), 30))
