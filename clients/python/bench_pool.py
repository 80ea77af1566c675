"""Benchmark of IdPool.next_id() against a real single node.

    python3 clients/python/bench_pool.py [--rounds N] [--ids N]

Starts a node (LEAF_BIN or target/debug/leaf) in a temp dir, warms a pool of the tag
`leaf-segment-test`, then per round measures IDs/s per thread of pool next_id() on 1 thread and on
2 threads, and same-run baselines on one thread: itertools.count().__next__ and a lock-protected
int counter. Prints each round and the medians.
"""
from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "tests"))

from _harness import start_single  # noqa: E402
from leaf_client import IdPool, LeafClient, PoolOptions  # noqa: E402

TAG = "leaf-segment-test"


def per_thread_rate(fn, n: int, threads: int) -> float:
    """IDs/s per thread of ``threads`` threads each calling ``fn`` ``n`` times."""
    barrier = threading.Barrier(threads + 1)
    times = []

    def work():
        barrier.wait()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        times.append(time.perf_counter() - t0)

    ts = [threading.Thread(target=work) for _ in range(threads)]
    for t in ts:
        t.start()
    barrier.wait()
    for t in ts:
        t.join()
    return n / max(times)


def locked_counter():
    lock = threading.Lock()
    state = [0]

    def nxt():
        with lock:
            state[0] += 1
            return state[0]

    return nxt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ids", type=int, default=2_000_000, help="IDs per thread per measurement")
    args = ap.parse_args()
    node = start_single()
    try:
        with LeafClient(node.urls) as client, IdPool(client, PoolOptions()) as pool:
            tp = pool.segment(TAG)
            for _ in range(args.ids):  # warm: the lease size grows to the consumption
                tp.next_id()
            rows = {"pool 1 thread": [], "pool 2 threads": [], "itertools.count": [], "locked int": []}
            for r in range(1, args.rounds + 1):
                got = {
                    "pool 1 thread": per_thread_rate(tp.next_id, args.ids, 1),
                    "pool 2 threads": per_thread_rate(tp.next_id, args.ids, 2),
                    "itertools.count": per_thread_rate(itertools.count().__next__, args.ids, 1),
                    "locked int": per_thread_rate(locked_counter(), args.ids, 1),
                }
                for k, v in got.items():
                    rows[k].append(v)
                print(f"round {r}: " + ", ".join(f"{k} {v / 1e6:.2f} M/s" for k, v in got.items()), flush=True)
            print("median (IDs/s per thread): " + ", ".join(f"{k} {statistics.median(v) / 1e6:.2f} M/s" for k, v in rows.items()))
            s = tp.stats()
            print(f"pool: {s.leases_ok} leases, last {s.last_lease_size} IDs, {s.waits} waits, {s.exhausted} exhausted")
    finally:
        node.close()


if __name__ == "__main__":
    main()
