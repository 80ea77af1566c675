"""AsyncIdPool: against a real node (uniqueness under many concurrent coroutines, refill ahead,
snowflake keys, a clean close) and against fake async sources (max wait, refusal, lease growth
when callers wait). Plain tests running asyncio.run (no plugin needed)."""
from __future__ import annotations

import asyncio
import os
import random
import time

import pytest

from leaf_client import (
    AsyncIdPool,
    AsyncLeafClient,
    ConfigError,
    ErrorCode,
    IdRanges,
    LeafClient,
    NotFoundError,
    PoolClosedError,
    PoolExhaustedError,
    PoolOptions,
    PoolRejectedError,
    UnavailableError,
)

TAG = "leaf-segment-test"


def run(coro, timeout=90):
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def until(what, cond, timeout=20.0):
    """Awaits ``cond()`` (polled); fails after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.01)


def test_unique_ids_under_many_coroutines(node):
    seed = int(os.environ.get("LEAF_TEST_SEED", random.randrange(2**32)))
    print(f"seed {seed} (LEAF_TEST_SEED to repeat)")
    rng = random.Random(seed)

    async def main():
        async with AsyncLeafClient(node.urls, timeout=5, deadline=20) as client:
            opts = PoolOptions(initial_lease=200, min_lease=100, max_wait=20)
            async with AsyncIdPool(client, opts) as pool:
                out = []

                async def worker(n):
                    got = []
                    for _ in range(n):
                        got.append(await pool.next_id(TAG))
                        if rng.random() < 0.05:
                            await asyncio.sleep(0)  # interleave with the refill and the others
                    out.append(got)

                counts = [rng.randrange(200, 800) for _ in range(200)]
                await asyncio.gather(*(worker(n) for n in counts))
                ids = [i for got in out for i in got]
                assert len(ids) == sum(counts) and len(set(ids)) == len(ids), "an ID was handed out twice"
                for got in out:
                    assert got == sorted(got), "one coroutine's segment IDs increase"
                s = pool.stats().get("segment", TAG)
                assert s.leases_ok >= 2 and s.ids_served == len(ids)
                assert s.ids_served + s.ids_buffered <= s.ids_leased
                flakes = await asyncio.gather(*(pool.snowflake("py-aio").next_id() for _ in range(3000)))
                assert len(set(flakes)) == 3000
                # IDs from the pool never collide with IDs the node hands out directly.
                direct = await client.segment_ids(TAG, 1000)
                assert not set(direct) & set(ids)

    run(main())


def test_refill_ahead_and_close(node):
    async def main():
        async with AsyncLeafClient(node.urls, timeout=5, deadline=20) as client:
            opts = PoolOptions(initial_lease=1000, min_lease=1000, max_lease=1000, max_wait=20)
            pool = AsyncIdPool(client, opts)
            tp = pool.segment(TAG)
            first = await tp.next_id()  # waits for the first lease
            for _ in range(150):  # past 10% of the lease
                assert tp.try_next_id() is not None
            # The next lease lands while IDs are still buffered: nobody waits for it.
            await until("the lease ahead", lambda: tp.stats().leases_ok == 2)
            s = tp.stats()
            assert s.waits == 1 and s.ids_buffered == 2000 - 151, s
            ids = [await tp.next_id() for _ in range(1500)]
            assert tp.stats().waits == 1, "a caller waited although the lease was asked for ahead"
            assert first not in ids and len(set(ids)) == 1500
            other = pool.segment("py-aio-never")  # no such tag: refused at once
            with pytest.raises(PoolRejectedError):
                await other.next_id()
            assert await pool.snowflake("py-aio-close").next_id() > 0
            tasks = pool.tasks()
            assert len(tasks) == 3 and not any(t.done() for t in tasks)
            await pool.aclose()
            assert all(t.done() for t in tasks), "aclose awaits every refill task"
            with pytest.raises(PoolClosedError):
                pool.segment("py-aio-late")
            while tp.try_next_id() is not None:  # buffered IDs are still handed out...
                pass
            with pytest.raises(PoolClosedError):  # ...then nothing: the refill is gone
                await tp.next_id()
            left = [t for t in asyncio.all_tasks() if t.get_name().startswith("leaf-pool-")]
            assert left == [], "no refill task left behind"

    run(main())


class FakeAsyncSource:
    def __init__(self, delay=0.0, fail=None):
        self.next = 1
        self.delay = delay
        self.fail = fail
        self.sizes = []

    async def lease(self, kind, name, count):
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.fail is not None:
            raise self.fail
        start, self.next = self.next, self.next + count + 3
        self.sizes.append(count)
        return IdRanges.from_pairs([(start, start + count)])


def test_close_cancels_a_lease_in_flight_and_fails_waiting_callers():
    async def main():
        pool = AsyncIdPool(FakeAsyncSource(delay=60), PoolOptions(max_wait=60))
        tp = pool.segment("t")
        waiter = asyncio.ensure_future(tp.next_id())
        await until("the caller to wait", lambda: tp.stats().waits == 1)
        started = time.monotonic()
        await pool.aclose()
        assert time.monotonic() - started < 2, "the lease in flight was awaited, not cancelled"
        assert all(t.cancelled() for t in pool.tasks())
        with pytest.raises(PoolClosedError):
            await waiter

    run(main())


def test_exhausted_after_max_wait_and_refused_at_once():
    async def main():
        src = FakeAsyncSource(fail=UnavailableError(503, ErrorCode.UNAVAILABLE, "no quorum", node="n"))
        async with AsyncIdPool(src, PoolOptions(max_wait=0.5)) as pool:
            started = time.monotonic()
            with pytest.raises(PoolExhaustedError) as e:
                await pool.next_id("t")
            assert 0.45 <= time.monotonic() - started < 5 and "no quorum" in str(e.value)
            assert pool.stats().get("segment", "t").leases_failed >= 2, "retried with backoff"
        src = FakeAsyncSource(fail=NotFoundError(404, ErrorCode.TAG_NOT_FOUND, "no tag", node="n"))
        async with AsyncIdPool(src, PoolOptions(max_wait=5)) as pool:
            started = time.monotonic()
            with pytest.raises(PoolRejectedError):
                await pool.next_id("t")
            assert time.monotonic() - started < 2

    run(main())


def test_lease_grows_when_callers_wait_and_sync_sources_are_refused(node):
    async def main():
        src = FakeAsyncSource(delay=0.02)
        opts = PoolOptions(min_lease=100, initial_lease=100, max_lease=100_000, lease_period=10.0)
        async with AsyncIdPool(src, opts) as pool:
            ids = [await pool.next_id("t") for _ in range(5000)]
            assert len(set(ids)) == 5000
            assert src.sizes[:4] == [100, 200, 400, 800], src.sizes

    run(main())
    with LeafClient(node.urls) as sync_client:
        with pytest.raises(ConfigError):
            AsyncIdPool(sync_client)
