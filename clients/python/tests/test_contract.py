"""Contract tests: the client against docs/openapi.json, the workspace version and the proto."""
from __future__ import annotations

import filecmp
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import leaf_client
from leaf_client import ErrorCode, _calls
from leaf_client._grpc_admin import AdminCalls
from leaf_client.grpc import GRPC_ADMIN_METHODS, GRPC_METHODS, GrpcClient

from _harness import REPO

HERE = Path(__file__).resolve().parent.parent
OPENAPI = json.loads((REPO / "docs" / "openapi.json").read_text())


def test_error_codes_equal_the_openapi_enum_both_ways():
    documented = set(OPENAPI["components"]["schemas"]["ErrorCode"]["enum"])
    ours = {c.value for c in ErrorCode if c is not ErrorCode.UNKNOWN}
    assert ours - documented == set(), "codes the API does not have"
    assert documented - ours == set(), "codes of the API missing from ErrorCode"
    assert ErrorCode.parse("a_code_from_the_future") is ErrorCode.UNKNOWN


def test_every_route_the_client_calls_is_in_openapi():
    paths = OPENAPI["paths"]
    for route in _calls.ROUTES:
        assert route.template in paths, route
        assert route.method.lower() in paths[route.template], route
    # Every Route constant of _calls is in ROUTES (none called without being checked).
    declared = {v for v in vars(_calls).values() if isinstance(v, _calls.Route)}
    assert declared == set(_calls.ROUTES)
    # And no path is written into a request outside a Route.
    source = (HERE / "leaf_client" / "_calls.py").read_text()
    literals = set(re.findall(r'"(/[a-z][^"]*)"', source))
    assert literals <= {r.template for r in _calls.ROUTES}, literals


def test_version_equals_the_workspace_version():
    text = (REPO / "Cargo.toml").read_text()
    section = text.split("[workspace.package]", 1)[1].split("\n[", 1)[0]
    version = re.search(r'^version\s*=\s*"([^"]+)"', section, re.M).group(1)
    assert leaf_client.__version__ == version
    pyproject = (HERE / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject and "leaf_client._version.__version__" in pyproject


def test_committed_grpc_stubs_match_the_proto(tmp_path):
    subprocess.run(
        ["bash", str(HERE / "generate.sh"), str(tmp_path)],
        check=True,
        capture_output=True,
        timeout=120,
        env=dict(os.environ, PYTHON=sys.executable),
    )
    committed = HERE / "leaf_client" / "_proto"
    for name in ("leaf_pb2.py", "leaf_pb2.pyi", "leaf_pb2_grpc.py"):
        assert filecmp.cmp(tmp_path / name, committed / name, shallow=False), (
            f"{name} is stale: run clients/python/generate.sh"
        )


def test_grpc_methods_exist_in_the_proto():
    proto = (REPO / "api" / "proto" / "leaf" / "v1" / "leaf.proto").read_text()
    service = proto.split("service IdService {", 1)[1].split("\n}", 1)[0]
    rpcs = set(re.findall(r"rpc (\w+)\(", service))
    assert set(GRPC_METHODS) <= rpcs


def test_every_admin_rpc_of_the_proto_is_called():
    proto = (REPO / "api" / "proto" / "leaf" / "v1" / "leaf.proto").read_text()
    service = proto.split("service AdminService {", 1)[1].split("\n}", 1)[0]
    rpcs = set(re.findall(r"rpc (\w+)\(", service))
    assert rpcs and set(GRPC_ADMIN_METHODS) == rpcs, "GrpcClient's admin calls differ from AdminService"
    # Which RPCs the admin methods really invoke: each method runs against a recording stub
    # (through GrpcClient's own _run), answering the RPC's empty response message.
    called = _admin_rpcs_called()
    assert set(called.values()) == rpcs, f"RPCs called {sorted(set(called.values()))}, AdminService has {sorted(rpcs)}"
    for method in called:
        assert callable(getattr(GrpcClient, method)) and getattr(GrpcClient, method).__doc__


ADMIN_CALLS = {
    "create_tag": (("rec-tag", 1000), {}),
    "create_tags": (([{"tag": "rec-tag", "step": 1000}],), {}),
    "get_tag": (("rec-tag",), {}),
    "archive_tag": (("rec-tag",), {}),
    "restore_tag": (("rec-tag",), {}),
    "templates": ((), {}),
    "put_template": (("rec-template", "rec-*", 1000), {}),
    "delete_template": (("rec-template",), {}),
}


def _admin_rpcs_called():
    """Runs every admin method of GrpcClient against a recording stub: {method: the RPC it
    invoked}. The stub knows only AdminService's RPCs (an unknown name is an AttributeError)."""
    from leaf_client._proto import leaf_pb2 as pb

    service = pb.DESCRIPTOR.services_by_name["AdminService"]
    invoked = []

    class RecordingStub:
        def __getattr__(self, name):
            rpc = service.methods_by_name.get(name)
            if rpc is None:
                raise AttributeError(f"AdminService has no RPC {name}")
            answer = getattr(pb, rpc.output_type.name)

            def call(request, timeout=None, metadata=None):
                assert type(request).__name__ == rpc.input_type.name, (name, type(request).__name__)
                invoked.append(name)
                return answer()

            return call

    g = GrpcClient(["http://127.0.0.1:1"], own_creates=None)
    g._stub = lambda idx, admin=False: RecordingStub() if admin else None
    called = {}
    for method, (args, kwargs) in ADMIN_CALLS.items():
        before = len(invoked)
        getattr(g, method)(*args, **kwargs)
        assert len(invoked) == before + 1, f"{method} made {len(invoked) - before} calls"
        called[method] = invoked[-1]
    public = {n for n in vars(AdminCalls) if not n.startswith("_") and callable(getattr(AdminCalls, n))}
    assert public == set(ADMIN_CALLS), "an admin method this test does not run"
    return called
