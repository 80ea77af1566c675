"""IdPool against fake lease sources (no server): uniqueness under many threads, lease growth
when callers wait, exhaustion after max_wait, refusal, snowflake staleness, sizing."""
from __future__ import annotations

import threading
import time

import pytest

from _harness import wait_for

from leaf_client import IdPool, IdRanges, PoolExhaustedError, PoolOptions, PoolRejectedError, UnavailableError
from leaf_client._sizing import Sizing, retry_backoff
from leaf_client.errors import ErrorCode, NotFoundError


class FakeSource:
    """Hands out consecutive ranges (each lease split in two ranges), optionally slowly,
    optionally failing."""

    def __init__(self, delay: float = 0.0, fail=None) -> None:
        self.next = 1
        self.delay = delay
        self.fail = fail
        self.sizes = []
        self.sent_at = []
        self.lock = threading.Lock()

    def lease(self, kind, name, count):
        self.sent_at.append(time.monotonic())
        if self.delay:
            time.sleep(self.delay)
        if self.fail is not None:
            raise self.fail
        with self.lock:
            start, self.next = self.next, self.next + count + 7  # a gap between leases
            self.sizes.append(count)
        half = count // 2
        return IdRanges.from_pairs([(start, start + half), (start + half, start + count)] if half else [(start, start + count)])


def test_ids_are_unique_under_many_threads():
    src = FakeSource()
    opts = PoolOptions(min_lease=100, initial_lease=100, max_lease=5000, local_chunk=16)
    with IdPool(src, opts) as pool:
        tp = pool.segment("t")
        out = [[] for _ in range(8)]

        def take(bucket):
            for _ in range(20_000):
                bucket.append(tp.next_id())

        threads = [threading.Thread(target=take, args=(b,)) for b in out]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        ids = [i for b in out for i in b]
        assert len(ids) == 160_000 and len(set(ids)) == 160_000
        for b in out:
            assert b == sorted(b), "each thread's IDs increase"
        # A lease the source answered may still be on its way into the buffer: wait for it.
        wait_for("every answered lease booked", lambda: tp.stats().ids_leased == sum(src.sizes), timeout=5)
        stats = tp.stats()
        assert stats.ids_served + stats.ids_buffered + stats.ids_retired == stats.ids_leased


def test_lease_grows_when_callers_wait():
    # Slow leases: callers run dry and wait, so each lease counts as lasting no time: it doubles.
    src = FakeSource(delay=0.05)
    opts = PoolOptions(min_lease=100, initial_lease=100, max_lease=100_000, lease_period=10.0)
    with IdPool(src, opts) as pool:
        tp = pool.segment("t")
        for _ in range(20_000):
            tp.next_id()
        stats = tp.stats()
    assert stats.waits > 0
    assert src.sizes[:4] == [100, 200, 400, 800], src.sizes
    assert stats.lease_target > 100


def test_lease_shrinks_when_it_lasts_long():
    src = FakeSource()
    opts = PoolOptions(min_lease=100, initial_lease=1000, lease_period=0.05, tick=0.01, max_staleness=1.0)
    with IdPool(src, opts) as pool:
        tp = pool.segment("t")
        deadline = time.monotonic() + 10
        while len(src.sizes) < 4 and time.monotonic() < deadline:
            tp.next_id()
            time.sleep(0.002)  # ~500 IDs/s: a lease of 1000 lasts far longer than 2 x 50 ms
    assert src.sizes[0] == 1000 and src.sizes[3] < 1000, src.sizes


def test_exhausted_after_max_wait_when_the_source_fails():
    src = FakeSource(fail=UnavailableError(503, ErrorCode.UNAVAILABLE, "no quorum", node="n"))
    with IdPool(src, PoolOptions(max_wait=0.5)) as pool:
        tp = pool.segment("t")
        started = time.monotonic()
        with pytest.raises(PoolExhaustedError) as e:
            tp.next_id()
        waited = time.monotonic() - started
        assert 0.45 <= waited < 3, waited
        assert "no quorum" in str(e.value) and e.value.last_error
        s = tp.stats()
        assert s.exhausted == 1 and s.leases_failed >= 2, "a failed lease is retried with backoff"


def test_a_refused_lease_fails_callers_at_once():
    src = FakeSource(fail=NotFoundError(404, ErrorCode.TAG_NOT_FOUND, "no tag", node="n"))
    with IdPool(src, PoolOptions(max_wait=5)) as pool:
        started = time.monotonic()
        with pytest.raises(PoolRejectedError):
            pool.segment("t").next_id()
        assert time.monotonic() - started < 2


def test_snowflake_ids_are_never_older_than_max_staleness():
    src = FakeSource()
    opts = PoolOptions(max_staleness=0.3, tick=0.05, initial_lease=100_000, min_lease=100_000, max_lease=100_000)
    with IdPool(src, opts) as pool:
        tp = pool.snowflake("k")
        first = tp.next_id()
        lease_sent = src.sent_at[0]
        time.sleep(0.5)  # the first lease is now older than max_staleness
        later = tp.next_id()
        assert time.monotonic() - lease_sent > 0.3
        assert later >= 100_001 + 7, "an ID of the stale first lease was handed out"
        assert first < 100_001
        assert tp.stats().ids_retired > 0


def test_sizing_and_backoff_arithmetic():
    s = Sizing(10, 1_000_000, 1.0)
    assert s.adapt(1000, 0.1) == 2000 and s.adapt(1000, 0.5) == 1000
    assert s.adapt(1000, 2.001) == 500 and s.adapt(800_000, 0) == 1_000_000 and s.adapt(15, 10) == 10
    assert [retry_backoff(n, 0.05, 1.0) for n in range(1, 8)] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0]


def test_options_are_checked():
    from leaf_client import ConfigError

    with pytest.raises(ConfigError):
        PoolOptions(min_lease=0)
    with pytest.raises(ConfigError):
        PoolOptions(tick=1.0, max_staleness=1.0)
    with pytest.raises(ConfigError):
        PoolOptions(initial_lease=50)
