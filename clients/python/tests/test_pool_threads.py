"""IdPool's thread budget against a real node: 1,000 pooled tags in one pool are all served,
every ID unique, by at most 4 threads of the pool (one refill thread, up to 3 lease workers);
and a slow lease of one tag does not hold up the refills of the others."""
from __future__ import annotations

import threading
import time

from _harness import wait_for
from leaf_client import IdPool, IdRanges, LeafClient, PoolOptions

TAGS = 1000
PER_TAG = 30


def _create_tags(node, names):
    r = node.http().post(
        node.url(1) + "/admin/tags:batch",
        json={"tags": [{"tag": n, "step": 1000} for n in names]},
        headers={"Authorization": f"Bearer {node.token}"},
        timeout=60,
    )
    assert r.status_code == 200, r.text
    assert len(r.json()["created"]) == len(names)


def _pool_threads():
    return [t for t in threading.enumerate() if t.name.startswith("leaf-pool-")]


def test_one_thousand_tags_with_at_most_four_threads(node):
    names = [f"py-many-{i:04d}" for i in range(TAGS)]
    _create_tags(node, names)
    with LeafClient(node.urls, timeout=10, deadline=30) as client:
        client.segment_id(names[0])  # the connection pool is warm; httpx starts no threads
        before = threading.active_count()
        growth = 0
        with IdPool(client, PoolOptions(initial_lease=100, min_lease=100, max_wait=30)) as pool:
            handles = [pool.segment(n) for n in names]  # every tag starts leasing at once
            growth = max(growth, threading.active_count() - before)
            ids = {}
            for rnd in range(PER_TAG):
                for n, h in zip(names, handles):
                    ids.setdefault(n, []).append(h.next_id())
                growth = max(growth, threading.active_count() - before)
            stats = pool.stats()
            growth = max(growth, threading.active_count() - before)
            ours = _pool_threads()
            print(f"threading.active_count() growth with {TAGS} pooled tags: {growth} "
                  f"(pool threads: {sorted(t.name for t in ours)}; stats.threads={stats.threads})")
            assert growth <= 4, growth
            assert len(ours) <= 4 and stats.threads <= 4
        every = [i for n in names for i in ids[n]]
        assert len(every) == TAGS * PER_TAG
        for n in names:
            assert len(set(ids[n])) == PER_TAG, n
            assert ids[n] == sorted(ids[n]), "one thread's IDs of a tag increase"
        assert all(stats.get("segment", n).leases_ok >= 1 for n in names), "every tag was served"
        # close() stops the pool's threads (the refill thread at once, idle workers with it).
        wait_for("the pool's threads to end", lambda: not _pool_threads(), timeout=10)
        assert threading.active_count() <= before


class _SlowTagSource:
    """Answers at once, except for the tag ``slow``, whose leases block until released."""

    def __init__(self):
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.next = 1

    def lease(self, kind, name, count):
        if name == "slow":
            self.release.wait(30)
        with self.lock:
            start, self.next = self.next, self.next + count
        return IdRanges.from_pairs([(start, start + count)])


def test_a_slow_lease_does_not_block_the_other_tags():
    src = _SlowTagSource()
    opts = PoolOptions(initial_lease=100, min_lease=100, max_lease=100, max_wait=10)
    try:
        with IdPool(src, opts) as pool:
            slow = pool.segment("slow")
            assert slow.try_next_id() is None
            started = time.monotonic()
            for i in range(20):  # each tag needs several leases while "slow" hangs on a worker
                tp = pool.segment(f"fast-{i}")
                got = [tp.next_id() for _ in range(450)]
                assert len(set(got)) == 450
            assert time.monotonic() - started < 10
            assert slow.stats().leases_ok == 0
            src.release.set()
            assert slow.next_id() > 0
            assert pool.stats().threads <= 4
    finally:
        src.release.set()
