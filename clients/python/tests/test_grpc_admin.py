"""GrpcClient's admin calls (leaf.v1.AdminService) against a real node: every RPC of the
service, typed results, and the HTTP client's typed errors."""
from __future__ import annotations

import pytest

from leaf_client import (
    ConflictError,
    CreatedTags,
    ErrorCode,
    InvalidRequestError,
    LeafClient,
    NotFoundError,
    TagInfo,
    TemplateInfo,
    UnauthorizedError,
)
from leaf_client.grpc import GrpcClient


@pytest.fixture
def admin(node):
    with GrpcClient(node.urls, token=node.token, timeout=5, deadline=15) as g:
        yield g


def test_create_get_archive_restore_a_tag(admin):
    info = admin.create_tag("py-grpc-orders", 100, max_id=5000, description="over gRPC", upper_bound=10**12)
    assert isinstance(info, TagInfo)
    assert (info.tag, info.step, info.max_id, info.description) == ("py-grpc-orders", 100, 5000, "over gRPC")
    assert info.profile == "segment" and info.upper_bound == 10**12 and info.archived_ms is None
    assert info.created_ms > 1_600_000_000_000
    first = admin.segment_id("py-grpc-orders")
    assert first >= 5000
    got = admin.get_tag("py-grpc-orders")
    assert got.description == "over gRPC" and got.max_id > 5000
    with pytest.raises(ConflictError) as e:
        admin.create_tag("py-grpc-orders", 100)
    assert e.value.code is ErrorCode.TAG_EXISTS and e.value.grpc_status == "ALREADY_EXISTS" and e.value.status == 409
    archived = admin.archive_tag("py-grpc-orders")
    assert archived.archived_ms is not None and admin.get_tag("py-grpc-orders").archived_ms is not None
    assert admin.archive_tag("py-grpc-orders").archived_ms == archived.archived_ms, "archiving is idempotent"
    with pytest.raises(NotFoundError):
        admin.segment_id("py-grpc-orders")
    restored = admin.restore_tag("py-grpc-orders")
    assert restored.archived_ms is None and restored.max_id >= got.max_id
    assert admin.segment_id("py-grpc-orders") > first, "the counter goes on where it stopped"
    assert admin.restore_tag("py-grpc-orders").archived_ms is None, "restoring a live tag answers it as it is"


def test_profiles_and_a_batch_create(admin):
    daily = admin.create_tag("py-grpc-daily", 10, profile="daily", daily={"digits": 6, "utc_offset": "+08:00"})
    assert daily.profile == "daily" and daily.raw["daily"] == {"digits": 6, "utc_offset": "+08:00"}
    assert admin.create_tag("py-grpc-mono", 1, profile="monotonic").profile == "monotonic"
    assert admin.create_tag("py-grpc-inv", 1, profile="gapless").profile == "gapless"
    assert admin.issue_number("py-grpc-inv", "doc-1").number == 1
    names = [f"py-grpc-batch-{i}" for i in range(50)]
    done = admin.create_tags([{"tag": n, "step": 1000} for n in names] + [{"tag": "py-grpc-mono", "step": 1}])
    assert isinstance(done, CreatedTags)
    assert list(done.created) == names and list(done.existing) == ["py-grpc-mono"]
    again = admin.create_tags([{"tag": n, "step": 1000, "profile": "segment"} for n in names[:3]])
    assert again.created == () and list(again.existing) == names[:3], "a batch may be sent again"
    assert all(admin.segment_id(n) >= 1 for n in names[:5])
    with pytest.raises(InvalidRequestError) as e:
        admin.create_tags([])
    assert e.value.code is ErrorCode.INVALID_REQUEST and e.value.node is None
    with pytest.raises(InvalidRequestError) as e:
        admin.create_tags([{"step": 1}])
    assert e.value.node is None


def test_templates_put_list_delete(admin, node):
    t = admin.put_template("py-tenants", "tenant-*-orders", 500, description="per tenant", max_id=100)
    assert isinstance(t, TemplateInfo)
    assert (t.name, t.pattern, t.step, t.description, t.max_id, t.profile) == (
        "py-tenants", "tenant-*-orders", 500, "per tenant", 100, "segment")
    d = admin.put_template("py-daily", "day-*", 10, profile="daily", daily={"digits": 5})
    assert d.daily == {"digits": 5, "utc_offset": None}
    assert [x.name for x in admin.templates()] == ["py-daily", "py-tenants"]
    # A tag matching the template is made with its settings on its first ID request.
    assert admin.segment_id("tenant-acme-orders") >= 100
    assert admin.get_tag("tenant-acme-orders").step == 500
    replaced = admin.put_template("py-tenants", "tenant-*-orders", 700)
    assert replaced.step == 700 and replaced.created_ms == t.created_ms, "put replaces the settings"
    with pytest.raises(ConflictError) as e:
        admin.put_template("py-overlap", "tenant-*", 10)
    assert e.value.code is ErrorCode.TEMPLATE_CONFLICT and e.value.grpc_status == "FAILED_PRECONDITION"
    gone = admin.delete_template("py-daily")
    assert gone.name == "py-daily" and [x.name for x in admin.templates()] == ["py-tenants"]
    with pytest.raises(NotFoundError) as e:
        admin.delete_template("py-daily")
    assert e.value.code is ErrorCode.TEMPLATE_NOT_FOUND and e.value.status == 404
    with pytest.raises(InvalidRequestError) as e:
        admin.put_template("bad name", "x-*", 1)
    assert e.value.node is None
    # The HTTP API sees the same template.
    with LeafClient(node.urls, token=node.token) as http:
        assert http.get_tag("tenant-acme-orders").tag == "tenant-acme-orders"


def test_admin_errors_are_typed(admin, node):
    with pytest.raises(NotFoundError) as e:
        admin.get_tag("py-grpc-no-such-tag")
    assert e.value.code is ErrorCode.TAG_NOT_FOUND and e.value.grpc_status == "NOT_FOUND"
    with pytest.raises(NotFoundError):
        admin.archive_tag("py-grpc-no-such-tag")
    with pytest.raises(InvalidRequestError) as e:
        admin.create_tag("py-grpc-x", 1, profile="sequential")
    assert e.value.code is ErrorCode.INVALID_REQUEST and e.value.node is None
    with pytest.raises(InvalidRequestError) as e:
        admin.create_tag("py-grpc-x", 0)
    assert e.value.node is None
    # Fields that do not combine: the node's invalid_request.
    with pytest.raises(InvalidRequestError) as e:
        admin.create_tag("py-grpc-x", 1, profile="daily", upper_bound=10)
    assert e.value.code is ErrorCode.INVALID_REQUEST and e.value.node == node.url(1)
    wrong = "wrong-token-0123456789"
    with GrpcClient(node.urls, token=wrong) as bad:
        for call in (lambda: bad.get_tag("leaf-segment-test"), bad.templates,
                     lambda: bad.create_tag("py-grpc-y", 1)):
            with pytest.raises(UnauthorizedError) as e:
                call()
            assert e.value.code is ErrorCode.UNAUTHORIZED and e.value.grpc_status == "UNAUTHENTICATED"
            assert wrong not in str(e.value) and wrong not in repr(e.value)
        assert wrong not in repr(bad)
    assert node.token not in repr(admin)
