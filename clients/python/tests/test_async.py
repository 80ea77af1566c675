"""AsyncLeafClient against a real node: the same calls and errors as the sync client, and a
failover past a dead address. Plain tests running asyncio.run (no plugin needed)."""
from __future__ import annotations

import asyncio

import pytest

from _harness import free_port
from leaf_client import (
    AllNodesFailedError,
    AsyncLeafClient,
    ConflictError,
    ErrorCode,
    InvalidRequestError,
    NotFoundError,
    NumberState,
    UnauthorizedError,
)

TAG = "leaf-segment-test"


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_ids_ranges_decode_health_and_tags(node):
    async def main():
        async with AsyncLeafClient(node.urls, token=node.token) as c:
            one = await c.segment_id(TAG)
            batch = await c.segment_ids(TAG, 100)
            ranges = await c.segment_ranges(TAG, 5000)
            assert batch[0] > one and len(set(batch)) == 100 and len(ranges) == 5000
            flakes = await asyncio.gather(*(c.snowflake_id("py-async") for _ in range(50)))
            assert len(set(flakes)) == 50
            assert len(await c.snowflake_ids("py-async", 10)) == 10
            assert len(await c.snowflake_ranges("py-async", 10_000)) == 10_000
            assert (await c.decode(flakes[0])).id == flakes[0]
            assert (await c.health()).ready
            info = await c.create_tag("py-async-tag", 10)
            assert info.tag == "py-async-tag" and await c.segment_id("py-async-tag") >= 1
            assert (await c.get_tag("py-async-tag")).step == 10
            with pytest.raises(ConflictError):
                await c.create_tag("py-async-tag", 10)
            assert (await c.archive_tag("py-async-tag")).archived_ms is not None

    run(main())


def test_errors_and_gapless(node):
    async def main():
        async with AsyncLeafClient(node.urls, token=node.token) as c:
            with pytest.raises(InvalidRequestError) as e:
                await c.segment_ids(TAG, 0)
            assert e.value.code is ErrorCode.INVALID_COUNT
            with pytest.raises(NotFoundError) as e:
                await c.segment_id("py-async-missing")
            assert e.value.code is ErrorCode.TAG_NOT_FOUND
            await c.create_tag("inv-async", 1, profile="gapless")
            a, b = await c.issue_number("inv-async", "k"), await c.issue_number("inv-async", "k")
            assert a.number == b.number == 1 and b.replayed
            await c.reserve_number("inv-async", "k2")
            assert (await c.confirm_number("inv-async", "k2")).state is NumberState.CONFIRMED
            await c.reserve_number("inv-async", "k3")
            assert (await c.void_number("inv-async", "k3", "no")).state is NumberState.VOIDED
        async with AsyncLeafClient(node.urls, token="not-the-token-123") as bad:
            with pytest.raises(UnauthorizedError):
                await bad.get_tag(TAG)

    run(main())


def test_failover_past_a_dead_address(node):
    async def main():
        dead = f"http://127.0.0.1:{free_port()}"
        async with AsyncLeafClient([dead] + node.urls, timeout=2, deadline=10) as c:
            ids = [await c.segment_id(TAG) for _ in range(5)]
            assert len(set(ids)) == 5 and c._cfg.preferred == 1
        async with AsyncLeafClient([dead], timeout=1, deadline=5, retries=2) as c:
            with pytest.raises(AllNodesFailedError) as e:
                await c.segment_id(TAG)
            assert e.value.attempts == 3

    run(main())
