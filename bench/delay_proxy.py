#!/usr/bin/env python3
"""A TCP proxy that holds every chunk of data DELAY ms in each direction, in order (a WAN link
for kernels without `sch_netem`). The delay is read from a file at each chunk, so a run can
change it without restarting the proxy (a missing or empty file: no delay).

    delay_proxy.py LISTEN_HOST LISTEN_PORT UPSTREAM_HOST UPSTREAM_PORT DELAY_FILE
"""
import asyncio
import sys


def delay_s(path):
    try:
        with open(path) as f:
            text = f.read().strip()
        return float(text) / 1000 if text else 0.0
    except OSError:
        return 0.0


async def pump(reader, writer, path):
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()

    async def send():
        while True:
            due, data = await queue.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                writer.close()
                return
            writer.write(data)
            await writer.drain()

    sender = asyncio.create_task(send())
    try:
        while True:
            data = await reader.read(65536)
            queue.put_nowait((loop.time() + delay_s(path), data))
            if not data:
                break
    finally:
        await sender


async def main():
    host, port, up_host, up_port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]

    async def handle(client_r, client_w):
        try:
            up_r, up_w = await asyncio.open_connection(up_host, up_port)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(pump(client_r, up_w, path), pump(up_r, client_w, path), return_exceptions=True)

    server = await asyncio.start_server(handle, host, port)
    async with server:
        await server.serve_forever()


asyncio.run(main())
