"""GrpcClient against real nodes: IDs, batches, ranges, decode, gapless numbers, typed errors,
failover past a dead address, TLS with the CA, and an IdPool over gRPC."""
from __future__ import annotations

import pytest

from _harness import free_port
from leaf_client import (
    AllNodesFailedError,
    ConflictError,
    ErrorCode,
    IdPool,
    InvalidRequestError,
    LeafClient,
    NotFoundError,
    NumberState,
    TlsError,
)
from leaf_client.grpc import GrpcClient

TAG = "leaf-segment-test"


def test_ids_batches_ranges_and_decode(node):
    with GrpcClient(node.urls, timeout=3) as g:
        one = g.segment_id(TAG)
        ids = g.segment_ids(TAG, 1000)
        assert len(set(ids)) == 1000 and ids[0] > one
        ranges = g.segment_ranges(TAG, 100_000)
        assert len(ranges) == 100_000 and next(iter(ranges)) > ids[-1]
        flake = g.snowflake_id("py-grpc")
        flakes = list(g.snowflake_ranges("py-grpc", 20_000))
        assert len(set(flakes)) == 20_000 and flakes[0] > flake
        d = g.decode(flake)
        assert d.id == flake and 0 <= d.worker_id < 1024 and d.timestamp_ms > 1_600_000_000_000


def test_gapless_and_typed_errors(node):
    with LeafClient(node.urls, token=node.token) as http:
        http.create_tag("inv-grpc", 1, profile="gapless")
    # Gapless series take a token by default (auth.anonymous_gapless): this one is the admin's.
    with GrpcClient(node.urls, token=node.token, own_creates=None) as g:
        a = g.issue_number("inv-grpc", "doc-1")
        b = g.issue_number("inv-grpc", "doc-1")
        assert a.number == b.number == 1 and b.replayed and a.state is NumberState.ISSUED
        r = g.reserve_number("inv-grpc", "doc-2", hold_seconds=60)
        assert r.number == 2 and r.state is NumberState.RESERVED
        assert g.confirm_number("inv-grpc", "doc-2").state is NumberState.CONFIRMED
        g.reserve_number("inv-grpc", "doc-3")
        assert g.void_number("inv-grpc", "doc-3", "cancelled").state is NumberState.VOIDED
        with pytest.raises(NotFoundError) as e:
            g.segment_ranges("py-grpc-no-such-tag", 10)
        assert e.value.code is ErrorCode.TAG_NOT_FOUND and e.value.grpc_status == "NOT_FOUND"
        assert e.value.status == 404
        with pytest.raises(ConflictError) as e:
            g.segment_ranges("inv-grpc", 10)
        assert e.value.code is ErrorCode.WRONG_PROFILE
        with pytest.raises(NotFoundError) as e:
            g.confirm_number("inv-grpc", "never")
        assert e.value.code is ErrorCode.NUMBER_NOT_FOUND
        with pytest.raises(InvalidRequestError) as e:
            g.segment_ranges("bad tag", 1)
        assert e.value.code is ErrorCode.INVALID_TAG and e.value.node is None


def test_failover_past_a_dead_address(node):
    dead = f"http://127.0.0.1:{free_port()}"
    with GrpcClient([dead] + node.urls, timeout=2, deadline=10) as g:
        assert g.segment_id(TAG) > 0
        assert g._cfg.preferred == 1
        with IdPool(g) as pool:  # the pool leases over gRPC too
            ids = [pool.next_id(TAG) for _ in range(5000)]
            assert len(set(ids)) == 5000
    with GrpcClient([dead], timeout=1, deadline=5, retries=1) as g:
        with pytest.raises(AllNodesFailedError) as e:
            g.segment_id(TAG)
        assert e.value.is_unavailable and e.value.attempts == 2


def test_tls_with_the_ca_and_without(cluster3):
    with GrpcClient(cluster3.urls, ca_file=cluster3.ca) as g:
        assert len(g.segment_ranges(TAG, 1000)) == 1000
    with GrpcClient(cluster3.urls, retries=10) as g:
        with pytest.raises(AllNodesFailedError) as e:
            g.segment_id(TAG)
        assert isinstance(e.value.last, TlsError) and e.value.attempts == 3
