"""LeafClient against one real node: IDs, ranges, decode, health, tags, typed errors, gapless."""
from __future__ import annotations

import pytest

from leaf_client import (
    AllNodesFailedError,
    ConflictError,
    ErrorCode,
    InvalidRequestError,
    LeafClient,
    NotFoundError,
    NumberState,
    UnauthorizedError,
)

TAG = "leaf-segment-test"


@pytest.fixture
def client(node):
    with LeafClient(node.urls, token=node.token, timeout=3, deadline=10) as c:
        yield c


def test_segment_ids_single_batch_and_ranges(client):
    a = client.segment_id(TAG)
    batch = client.segment_ids(TAG, 500)
    assert len(batch) == 500 and len(set(batch)) == 500
    assert batch == sorted(batch) and batch[0] > a
    ranges = client.segment_ranges(TAG, 10_000)
    assert len(ranges) == 10_000
    ids = list(ranges)
    assert len(set(ids)) == 10_000 and min(ids) > batch[-1]
    assert not set(ids) & set(batch) and a not in ids


def test_snowflake_ids_ranges_and_decode(client):
    one = client.snowflake_id("py-key")
    many = client.snowflake_ids("py-key", 1000)
    assert len(set(many)) == 1000 and many == sorted(many) and many[0] > one
    ranges = client.snowflake_ranges("py-key", 50_000)
    ids = list(ranges)
    assert len(ids) == 50_000 and len(set(ids)) == 50_000 and ids == sorted(ids)
    assert ids[0] > many[-1]
    d = client.decode(one)
    assert d.id == one and d.timestamp_ms > 1_600_000_000_000 and 0 <= d.worker_id < 1024
    assert d.timestamp.endswith("Z")


def test_health(client):
    h = client.health()
    assert h.ready and h.node_id == 1 and h.leader_id == 1
    assert h.snowflake.get("state") == "serving"
    assert client.health("segment").segment_ready


def test_create_tag_then_ids_and_get_and_archive(client):
    info = client.create_tag("py-orders", 100, max_id=5000, description="python test")
    assert info.tag == "py-orders" and info.step == 100 and info.max_id == 5000
    first = client.segment_id("py-orders")
    assert first >= 5000
    got = client.get_tag("py-orders")
    assert got.description == "python test" and got.max_id > 5000
    with pytest.raises(ConflictError) as e:
        client.create_tag("py-orders", 100)
    assert e.value.code is ErrorCode.TAG_EXISTS and e.value.status == 409
    archived = client.archive_tag("py-orders")
    assert archived.archived_ms is not None
    assert not client.own_creates.within_grace("py-orders")


def test_errors_are_typed(client, node):
    # Refused locally, before any request: the code the server would answer.
    with pytest.raises(InvalidRequestError) as e:
        client.segment_id("no spaces allowed")
    assert e.value.code is ErrorCode.INVALID_TAG and e.value.status == 400 and e.value.node is None
    with pytest.raises(InvalidRequestError) as e:
        client.segment_ids(TAG, 100_001)
    assert e.value.code is ErrorCode.INVALID_COUNT
    # The server's 400: a count the node refuses, past its 1,000,000 (a raw call bypasses the
    # client's own, smaller limit: it reads a text batch whole).
    with pytest.raises(InvalidRequestError) as e:
        client._run(_raw_get(f"/api/segment/get/{TAG}?count=1000001"))
    assert e.value.code is ErrorCode.INVALID_COUNT and e.value.node == node.url(1)
    # Unknown tag: 404 tag_not_found, Leaf's -2; not retried.
    with pytest.raises(NotFoundError) as e:
        client.segment_id("py-no-such-tag")
    assert e.value.code is ErrorCode.TAG_NOT_FOUND and e.value.leaf_code == -2
    assert not isinstance(e.value, AllNodesFailedError)
    # Wrong token on an admin call: 401, and the token is never in the text.
    with LeafClient(node.urls, token="wrong-token-0123456789") as bad:
        with pytest.raises(UnauthorizedError) as e:
            bad.get_tag(TAG)
        assert e.value.code is ErrorCode.UNAUTHORIZED
        assert "wrong-token" not in str(e.value) and "wrong-token" not in repr(bad)
    assert node.token not in repr(client)


def test_gapless_issue_reserve_confirm_void(client):
    client.create_tag("inv", 1, profile="gapless")
    a = client.issue_number("inv", "order-1")
    again = client.issue_number("inv", "order-1")
    assert a.number == again.number == 1 and not a.replayed and again.replayed
    assert a.state is NumberState.ISSUED
    r = client.reserve_number("inv", "order-2", hold_seconds=600)
    assert r.number == 2 and r.state is NumberState.RESERVED and r.deadline_ms is not None
    c = client.confirm_number("inv", "order-2")
    assert c.number == 2 and c.state is NumberState.CONFIRMED
    r3 = client.reserve_number("inv", "order-3")
    v = client.void_number("inv", "order-3", "customer cancelled")
    assert v.number == r3.number == 3 and v.state is NumberState.VOIDED and v.reason == "customer cancelled"
    with pytest.raises(NotFoundError) as e:
        client.confirm_number("inv", "never-reserved")
    assert e.value.code is ErrorCode.NUMBER_NOT_FOUND
    with pytest.raises(ConflictError) as e:
        client.segment_id("inv")
    assert e.value.code is ErrorCode.WRONG_PROFILE


def test_failover_past_a_dead_address(node):
    from _harness import free_port

    dead = f"http://127.0.0.1:{free_port()}"
    with LeafClient([dead] + node.urls, timeout=2, deadline=10) as c:
        assert c.segment_id(TAG) > 0
        assert c._cfg.preferred == 1, "later calls start at the node that answered"
    with LeafClient([dead], timeout=1, deadline=5, retries=2) as c:
        with pytest.raises(AllNodesFailedError) as e:
            c.segment_id(TAG)
        assert e.value.attempts == 3 and e.value.is_unavailable


def _raw_get(path):
    from leaf_client import _calls

    return _calls.Op(_calls.Call("GET", path), _calls.one_id)
