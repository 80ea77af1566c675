"""GrpcClient: segment and snowflake IDs, batches as ranges, decoding and gapless numbers over
gRPC (``leaf.v1.IdService``), and tag and template administration (``leaf.v1.AdminService``,
in ``_grpc_admin``), through the stubs generated into ``leaf_client._proto``, with the same
failover, retries, deadline and typed errors as :class:`~leaf_client.LeafClient`.

A failed call carries a gRPC status and, in the trailing metadata key ``leaf-code``, the HTTP
API's stable error code; it is raised as the same :class:`~leaf_client.errors.ApiError`
category (``status`` is the HTTP status that code is answered with; ``grpc_status`` the gRPC
status name). A status without ``leaf-code`` (the connection failed, a deadline passed) is a
:class:`~leaf_client.errors.TransportError`, :class:`~leaf_client.errors.RequestTimeoutError`
or :class:`~leaf_client.errors.TlsError`.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import grpc

from . import _validate as v
from ._config import ClientConfig, Nodes
from ._execute import Attempts
from ._grpc_admin import GRPC_ADMIN_METHODS, AdminCalls
from ._own_creates import OwnCreates
from ._proto import leaf_pb2 as pb
from ._proto import leaf_pb2_grpc as pb_grpc
from ._retry import Backoff, Safety
from .errors import (
    STATUS_OF_CODE,
    ApiError,
    DecodeError,
    ErrorCode,
    LeafError,
    RequestTimeoutError,
    TlsError,
    TransportError,
    api_error,
)
from .types import IdRanges, IssuedNumber, NumberState, SnowflakeId

__all__ = ["GRPC_ADMIN_METHODS", "GRPC_METHODS", "GrpcClient", "error_of"]

#: The IdService RPCs this client calls (the contract test checks them against the proto).
GRPC_METHODS = (
    "GetSegmentIds",
    "GetSnowflakeIds",
    "DecodeSnowflake",
    "GetSegmentIdList",
    "IssueNumber",
    "ReserveNumber",
    "ConfirmNumber",
    "VoidNumber",
)

#: The HTTP status a gRPC status stands for when no ``leaf-code`` says more.
_HTTP_OF_GRPC = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.FAILED_PRECONDITION: 409,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.UNAVAILABLE: 503,
}

_STATES = {
    pb.NUMBER_STATE_ISSUED: NumberState.ISSUED,
    pb.NUMBER_STATE_RESERVED: NumberState.RESERVED,
    pb.NUMBER_STATE_CONFIRMED: NumberState.CONFIRMED,
    pb.NUMBER_STATE_VOIDED: NumberState.VOIDED,
}

_TLS_WORDS = ("ssl", "tls", "handshake", "certificate")


def error_of(node: str, e: grpc.RpcError, timeout: float) -> LeafError:
    """The client error of a failed RPC."""
    code = e.code() if hasattr(e, "code") else grpc.StatusCode.UNKNOWN
    details = (e.details() if hasattr(e, "details") else None) or ""
    metadata = dict(e.trailing_metadata() or ()) if hasattr(e, "trailing_metadata") else {}
    leaf_code = metadata.get("leaf-code")
    if isinstance(leaf_code, bytes):
        leaf_code = leaf_code.decode("ascii", "replace")
    if leaf_code:
        status = STATUS_OF_CODE.get(ErrorCode.parse(leaf_code), _HTTP_OF_GRPC.get(code, 500))
        return api_error(status, leaf_code, details, node=node, grpc_status=code.name)
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return RequestTimeoutError(node, timeout)
    if code is grpc.StatusCode.UNAVAILABLE:
        if any(w in details.lower() for w in _TLS_WORDS):
            return TlsError(node, details)
        connect = "failed to connect" in details.lower() or "connection refused" in details.lower()
        return TransportError(node, f"gRPC UNAVAILABLE: {details}", connect=connect)
    status = _HTTP_OF_GRPC.get(code, 500)
    return ApiError(status, ErrorCode.UNKNOWN, details, raw_code=code.name.lower(), node=node, grpc_status=code.name)


def _ranges(node: str, msg: Any, count: int) -> IdRanges:
    got = IdRanges.from_pairs([(r.start, r.end) for r in msg.ranges])
    problem = got.check(count)
    if problem:
        raise DecodeError(node, 200, problem)
    return got


def _number(node: str, msg: Any, tag: str, key: str, states: Optional[Tuple[NumberState, ...]]) -> IssuedNumber:
    n = IssuedNumber(
        tag=msg.tag,
        period=msg.period,
        number=msg.number,
        key=msg.key,
        state=_STATES.get(msg.state, NumberState.ISSUED),
        issued_ms=msg.issued_ms,
        replayed=msg.replayed,
        display=msg.display if msg.HasField("display") else None,
        deadline_ms=msg.deadline_ms if msg.HasField("deadline_ms") else None,
        reason=msg.reason if msg.HasField("reason") else None,
    )
    if n.tag != tag or n.key != key or n.number == 0:
        raise DecodeError(node, 200, f"asked for tag {tag!r} key {key!r}, answered {n.number} of {n.tag!r} {n.key!r}")
    if states is not None and n.state not in states:
        raise DecodeError(node, 200, f"number {n.number} of key {key!r} answered as {n.state}")
    return n


class GrpcClient(AdminCalls):
    """A gRPC client of a leaf cluster; thread-safe. The same arguments as
    :class:`~leaf_client.LeafClient`: node URLs (``http://`` for h2c, ``https://`` for TLS with
    ``ca_file`` as the only trust root, through ``grpc.ssl_channel_credentials``), ``token``
    (sent as ``authorization`` metadata), timeouts, retries, backoff. One channel per node,
    opened on first use. The ID and gapless calls are idempotent (IDs, keyed gapless calls);
    the admin calls (``create_tag``, ``create_tags``, ``get_tag``, ``archive_tag``,
    ``restore_tag``, ``templates``, ``put_template``, ``delete_template``) have the HTTP
    client's retry safety: creating one tag and deleting a template are at most once."""

    def __init__(
        self,
        nodes: Nodes,
        *,
        token: Optional[str] = None,
        ca_file: Optional[Union[str, os.PathLike]] = None,
        timeout: float = 5.0,
        deadline: float = 15.0,
        retries: int = 3,
        backoff: Optional[Backoff] = None,
        own_creates: Optional[OwnCreates] = None,
    ) -> None:
        self._cfg = ClientConfig(
            nodes, token=token, ca_file=ca_file, timeout=timeout, deadline=deadline, retries=retries,
            backoff=backoff, own_creates=own_creates,
        )
        root = None
        if self._cfg.ca_file is not None:
            with open(self._cfg.ca_file, "rb") as f:
                root = f.read()
        self._creds = grpc.ssl_channel_credentials(root_certificates=root)
        self._metadata = (("authorization", self._cfg.authorization),) if self._cfg.authorization else ()
        self._lock = threading.Lock()
        self._stubs: Dict[int, Tuple[grpc.Channel, Any, Any]] = {}

    @property
    def nodes(self) -> List[str]:
        return list(self._cfg.nodes)

    def __repr__(self) -> str:
        return f"GrpcClient({self._cfg!r})"

    def __enter__(self) -> "GrpcClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Closes every channel."""
        with self._lock:
            stubs, self._stubs = self._stubs, {}
        for channel, _, _ in stubs.values():
            channel.close()

    def _stub(self, idx: int, admin: bool = False) -> Any:
        with self._lock:
            got = self._stubs.get(idx)
            if got is None:
                url = self._cfg.nodes[idx]
                target = url.split("://", 1)[1]
                if url.startswith("https://"):
                    channel = grpc.secure_channel(target, self._creds)
                else:
                    channel = grpc.insecure_channel(target)
                got = (channel, pb_grpc.IdServiceStub(channel), pb_grpc.AdminServiceStub(channel))
                self._stubs[idx] = got
            return got[2] if admin else got[1]

    def _run(
        self,
        method: str,
        request: Any,
        parse: Callable[[str, Any], Any],
        tag: Optional[str] = None,
        *,
        admin: bool = False,
        safety: Safety = Safety.IDEMPOTENT,
    ) -> Any:
        attempts = Attempts(self._cfg, safety, tag)
        while True:
            idx, timeout = attempts.next()
            node = self._cfg.nodes[idx]
            try:
                answer = getattr(self._stub(idx, admin), method)(request, timeout=timeout, metadata=self._metadata)
            except grpc.RpcError as e:
                time.sleep(attempts.failed(error_of(node, e, timeout)))
                continue
            attempts.succeeded()
            return parse(node, answer)

    # ---- IDs -------------------------------------------------------------------------------

    def segment_ranges(self, tag: str, count: int) -> IdRanges:
        """``count`` (1-1,000,000) segment IDs of ``tag`` as ranges (``GetSegmentIds``)."""
        v.tag(tag)
        v.count(count, v.MAX_RANGE_BATCH)
        req = pb.GetSegmentIdsRequest(tag=tag, count=count)
        return self._run("GetSegmentIds", req, lambda n, m: _ranges(n, m, count), tag)

    def segment_id(self, tag: str) -> int:
        """One segment ID of ``tag``."""
        return self.segment_ranges(tag, 1).ranges[0].start

    def segment_ids(self, tag: str, count: int) -> List[int]:
        """``count`` (1-100,000) segment IDs one by one (``GetSegmentIdList``; any profile)."""
        v.tag(tag)
        v.count(count, v.MAX_BATCH)

        def parse(node: str, msg: Any) -> List[int]:
            if len(msg.ids) != count:
                raise DecodeError(node, 200, f"{len(msg.ids)} IDs, asked for {count}")
            return list(msg.ids)

        return self._run("GetSegmentIdList", pb.GetSegmentIdsRequest(tag=tag, count=count), parse, tag)

    def snowflake_ranges(self, key: str, count: int) -> IdRanges:
        """``count`` (1-1,000,000) snowflake IDs as ranges (``GetSnowflakeIds``)."""
        v.tag(key, "snowflake key")
        v.count(count, v.MAX_RANGE_BATCH)
        req = pb.GetSnowflakeIdsRequest(key=key, count=count)
        return self._run("GetSnowflakeIds", req, lambda n, m: _ranges(n, m, count))

    def snowflake_id(self, key: str) -> int:
        """One snowflake ID."""
        return self.snowflake_ranges(key, 1).ranges[0].start

    def decode(self, snowflake_id: int) -> SnowflakeId:
        """A snowflake ID's parts, as the server decodes them (``DecodeSnowflake``)."""
        v.snowflake_id(snowflake_id)

        def parse(_node: str, m: Any) -> SnowflakeId:
            return SnowflakeId(m.id, m.timestamp_ms, m.timestamp, m.worker_id, m.sequence)

        return self._run("DecodeSnowflake", pb.DecodeSnowflakeRequest(id=snowflake_id), parse)

    # ---- gapless ---------------------------------------------------------------------------

    def issue_number(self, tag: str, key: str) -> IssuedNumber:
        """See :meth:`leaf_client.LeafClient.issue_number` (``IssueNumber``)."""
        v.tag(tag)
        v.key(key)
        req = pb.IssueNumberRequest(tag=tag, key=key)
        return self._run("IssueNumber", req, lambda n, m: _number(n, m, tag, key, None), tag)

    def reserve_number(self, tag: str, key: str, hold_seconds: Optional[int] = None) -> IssuedNumber:
        """See :meth:`leaf_client.LeafClient.reserve_number` (``ReserveNumber``)."""
        v.tag(tag)
        v.key(key)
        req = pb.ReserveNumberRequest(tag=tag, key=key, hold_seconds=v.hold_seconds(hold_seconds) or 0)
        return self._run("ReserveNumber", req, lambda n, m: _number(n, m, tag, key, None), tag)

    def confirm_number(self, tag: str, key: str) -> IssuedNumber:
        """See :meth:`leaf_client.LeafClient.confirm_number` (``ConfirmNumber``)."""
        v.tag(tag)
        v.key(key)
        ok = (NumberState.CONFIRMED, NumberState.ISSUED)
        req = pb.IssueNumberRequest(tag=tag, key=key)
        return self._run("ConfirmNumber", req, lambda n, m: _number(n, m, tag, key, ok), tag)

    def void_number(self, tag: str, key: str, reason: str) -> IssuedNumber:
        """See :meth:`leaf_client.LeafClient.void_number` (``VoidNumber``)."""
        v.tag(tag)
        v.key(key)
        v.reason(reason)
        req = pb.VoidNumberRequest(tag=tag, key=key, reason=reason)
        return self._run("VoidNumber", req, lambda n, m: _number(n, m, tag, key, (NumberState.VOIDED,)), tag)
