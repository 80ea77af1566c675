#!/usr/bin/env python3
"""Puts per second against one etcd v3 endpoint, for bench/etcd.sh.

N concurrent putters (asyncio, grpc.aio), spread over up to 8 gRPC channels, each putting
`bench/<putter>/<n>` = 8 bytes with etcd's v3 gRPC `etcdserverpb.KV/Put`, one after another,
for SECONDS (the first 0.5 s not counted). The request is encoded by hand (PutRequest: field 1
key, field 2 value), so no generated code is needed, only grpcio. Loopback only.
Prints one line: PUTS_PER_S ERRORS.

usage: bench/etcd-put.py --endpoint 127.0.0.1:2379 [--concurrency 16] [--seconds 5]
"""
import argparse
import asyncio
import sys
import time

import grpc


def put_request(key: bytes, value: bytes) -> bytes:
    def field(tag, data):
        n, varint = len(data), bytearray()
        while True:
            b = n & 0x7F
            n >>= 7
            varint.append(b | (0x80 if n else 0))
            if not n:
                break
        return bytes([tag]) + bytes(varint) + data

    return field(0x0A, key) + field(0x12, value)


async def run(endpoint, concurrency, seconds):
    channels = [grpc.aio.insecure_channel(endpoint) for _ in range(min(8, concurrency))]
    puts = [
        c.unary_unary("/etcdserverpb.KV/Put", request_serializer=None, response_deserializer=None)
        for c in channels
    ]
    start = time.monotonic()
    counted_from, end = start + 0.5, start + 0.5 + seconds
    counts = {"ok": 0, "errors": 0}

    async def putter(i):
        put, n = puts[i % len(puts)], 0
        while time.monotonic() < end:
            n += 1
            try:
                await put(put_request(b"bench/%d/%d" % (i, n), b"12345678"), timeout=10)
                ok = True
            except grpc.aio.AioRpcError:
                ok = False
            if time.monotonic() >= counted_from:
                counts["ok" if ok else "errors"] += 1

    await asyncio.gather(*(putter(i) for i in range(concurrency)))
    for c in channels:
        await c.close()
    return counts["ok"] / seconds, counts["errors"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=5.0)
    a = ap.parse_args()
    host = a.endpoint.rsplit(":", 1)[0]
    if host not in ("127.0.0.1", "localhost", "[::1]"):
        sys.exit("--endpoint must be on this machine (127.0.0.1, localhost or [::1])")
    if not (1 <= a.concurrency <= 1024 and 0 < a.seconds <= 600):
        sys.exit("--concurrency must be 1..1024 and --seconds 0..600")
    rate, errors = asyncio.run(run(a.endpoint, a.concurrency, a.seconds))
    print(f"{rate:.0f} {errors}")


if __name__ == "__main__":
    main()
