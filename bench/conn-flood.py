#!/usr/bin/env python3
"""Connection flood against one local leaf node: RSS before, during and after.

Opens N idle TCP connections to the node (loopback only), sends one request (a decode, always 200) on each so
the node parses a request on every one of them, holds them, closes them all, and reports the
node's RSS (VmRSS of its pid) at each point, plus how many connections got 200 and how many
were refused with 503. Bounded: N connections, each with a 5 s timeout, one pass.

usage: bench/conn-flood.py --pid PID --port PORT [--connections 15000] [--settle 3]
"""
import argparse, resource, socket, sys, time


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise SystemExit(f"no VmRSS for pid {pid}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--connections", type=int, default=15000)
    ap.add_argument("--settle", type=float, default=3.0, help="seconds to wait after closing")
    a = ap.parse_args()
    if not (1 <= a.connections <= 60000):
        sys.exit("--connections must be from 1 to 60000")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = a.connections + 100
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    before = rss_mb(a.pid)
    socks, ok, busy, other = [], 0, 0, 0
    req = b"GET /api/snowflake/decode/1 HTTP/1.1\r\nhost: flood\r\n\r\n"
    for _ in range(a.connections):
        s = socket.create_connection(("127.0.0.1", a.port), timeout=5)
        s.sendall(req)
        socks.append(s)
    for s in socks:
        try:
            head = s.recv(64)
        except OSError:
            head = b""
        if head.startswith(b"HTTP/1.1 200"):
            ok += 1
        elif head.startswith(b"HTTP/1.1 503"):
            busy += 1
        else:
            other += 1
    during = rss_mb(a.pid)
    for s in socks:
        s.close()
    time.sleep(a.settle)
    after = rss_mb(a.pid)
    print(f"connections {a.connections}: 200 {ok}, 503 {busy}, other {other}")
    print(f"RSS MB: before {before:.1f}, during {during:.1f}, after {after:.1f} (+{a.settle:.0f} s)")


if __name__ == "__main__":
    main()
