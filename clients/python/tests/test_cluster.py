"""The 3-node TLS cluster: HTTPS with the cluster CA, a client without it failing with a TLS
error, and the must-show: an IdPool riding over kill -9 of the leader, then of the node it
talks to, with zero errors."""
from __future__ import annotations

import bisect
import threading
import time

import pytest

from _harness import free_port, wait_for
from leaf_client import AllNodesFailedError, Backoff, IdPool, LeafClient, PoolOptions, TlsError


def test_https_with_the_ca_and_a_tls_error_without_it(cluster3):
    with LeafClient(cluster3.urls, ca_file=cluster3.ca, token=cluster3.token) as c:
        assert c.health().ready
        c.create_tag("py-tls", 1000)
        ids = c.segment_ids("py-tls", 100)
        assert len(set(ids)) == 100
    started = time.monotonic()
    with LeafClient(cluster3.urls, retries=10, deadline=30) as no_ca:
        with pytest.raises(AllNodesFailedError) as e:
            no_ca.segment_id("py-tls")
    assert isinstance(e.value.last, TlsError), e.value
    assert e.value.attempts == 3, "one handshake per node, then it gives up"
    assert "not trusted" in str(e.value)
    assert time.monotonic() - started < 10, "a TLS failure is not retried until the deadline"


def _assert_inside_committed_allocations(cluster, node_id, tag, ids):
    """Every ID lies in a range ``[start, end)`` the cluster committed for ``tag``, as node
    ``node_id`` (never killed: its journal is complete) applied them."""
    r = cluster.http().get(
        cluster.url(node_id) + "/admin/allocations",
        params={"tag": tag},
        headers={"Authorization": f"Bearer {cluster.token}"},
    )
    assert r.status_code == 200, r.text
    journal = r.json()
    assert journal["complete_from_index"] == 0, journal["complete_from_index"]
    ranges = sorted((a["start"], a["end"]) for a in journal["allocations"])
    starts = [start for start, _ in ranges]
    for v in ids:
        i = bisect.bisect_right(starts, v) - 1
        assert i >= 0 and v < ranges[i][1], f"ID {v} is in no allocation the cluster committed"


def _app_thread(tp, stop, progress, ids, errors):
    def run():
        while not stop.is_set():
            for _ in range(200):
                try:
                    ids.append(tp.next_id())
                except Exception as e:  # noqa: BLE001 - every error counts against the test
                    errors.append(repr(e))
            with progress[1]:
                progress[0] += 200
            time.sleep(0.001)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_pool_rides_over_kill_9_of_the_leader_and_of_its_own_node_with_zero_errors(cluster3):
    leader = cluster3.wait_leader_among([1, 2, 3])
    follower = next(i for i in (1, 2, 3) if i != leader)
    other = next(i for i in (1, 2, 3) if i not in (leader, follower))
    with LeafClient(cluster3.url(leader), ca_file=cluster3.ca, token=cluster3.token) as admin:
        admin.create_tag("pooled", 1000)
    dead = f"https://127.0.0.1:{free_port()}"
    urls = [dead, cluster3.url(follower), cluster3.url(leader), cluster3.url(other)]
    client = LeafClient(
        urls, ca_file=cluster3.ca, timeout=2, deadline=8, retries=10, backoff=Backoff(0.02, 0.3)
    )
    options = PoolOptions(lease_period=0.3, initial_lease=500, max_lease=50_000, max_wait=10)
    pool = IdPool(client, options)
    stop = threading.Event()
    progress = [0, threading.Lock()]
    ids_per_thread = [[], []]
    errors = []
    threads = [_app_thread(pool.segment("pooled"), stop, progress, ids_per_thread[i], errors) for i in range(2)]
    flakes: list = []
    threads.append(_app_thread(pool.snowflake("pooled-key"), stop, [0, threading.Lock()], flakes, errors))

    def taken():
        with progress[1]:
            return progress[0]

    try:
        wait_for("progress before the kill", lambda: taken() >= 50_000, timeout=60)
        cluster3.nodes[leader].kill()
        at_kill = taken()
        survivors = [follower, other]
        new_leader = cluster3.wait_leader_among(survivors, timeout=30)
        assert new_leader in survivors
        wait_for("100,000 IDs after the kill", lambda: taken() >= at_kill + 100_000, timeout=60)
        # Then the node the pool talks to, once the old leader is back: its client fails over.
        cluster3.nodes[leader].start()
        cluster3.wait_ready([leader])
        at_restart = taken()
        wait_for("50,000 IDs after the restart", lambda: taken() >= at_restart + 50_000, timeout=60)
        cluster3.nodes[follower].kill()
        at_kill = taken()
        cluster3.wait_leader_among([leader, other], timeout=30)
        wait_for("100,000 IDs after the pool's node's kill", lambda: taken() >= at_kill + 100_000, timeout=60)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        stats = pool.stats().get("segment", "pooled")
        pool.close()
        client.close()
    all_ids = ids_per_thread[0] + ids_per_thread[1]
    assert errors == [], f"the application saw {len(errors)} errors, first: {errors[:1]}"
    assert len(all_ids) >= 300_000
    assert len(set(all_ids)) == len(all_ids), "duplicate IDs"
    _assert_inside_committed_allocations(cluster3, other, "pooled", all_ids)
    assert flakes, "the snowflake thread took no ID"
    assert len(set(flakes)) == len(flakes), "duplicate snowflake IDs"
    assert stats.leases_ok >= 10, stats
    print(f"new leader {new_leader}; {len(all_ids)} IDs; {stats}")
