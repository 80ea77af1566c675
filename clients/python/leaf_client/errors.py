"""What can go wrong building a client or calling a node.

Every error is a :class:`LeafError`. A node's error answer (``{"code", "message",
"leaf_code"?}``) is an :class:`ApiError` of a category subclass chosen by its HTTP status
(:class:`NotFoundError`, :class:`ConflictError`, ...), carrying the stable :class:`ErrorCode`.
No answer is a :class:`TransportError` (or :class:`RequestTimeoutError`), a failed TLS handshake
a :class:`TlsError`, and a call that failed on more than one attempt an
:class:`AllNodesFailedError` carrying the last error.

No error text or ``repr`` ever holds the client's token: error messages are safe to log.
"""
from __future__ import annotations

import enum
from typing import Optional


class ErrorCode(str, enum.Enum):
    """The stable error codes of the HTTP API (``docs/openapi.json`` ``ErrorCode``), plus
    :attr:`UNKNOWN` for a code this client does not know (a newer server's)."""

    INVALID_TAG = "invalid_tag"
    INVALID_COUNT = "invalid_count"
    INVALID_REQUEST = "invalid_request"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    TAG_NOT_FOUND = "tag_not_found"
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    TAG_EXISTS = "tag_exists"
    TAG_EXHAUSTED = "tag_exhausted"
    SEGMENTS_NOT_READY = "segments_not_ready"
    NOT_READY = "not_ready"
    UNAVAILABLE = "unavailable"
    SHUTTING_DOWN = "shutting_down"
    MEMBER_EXISTS = "member_exists"
    NODE_ID_RETIRED = "node_id_retired"
    MEMBER_NOT_FOUND = "member_not_found"
    SNOWFLAKE_UNAVAILABLE = "snowflake_unavailable"
    CLOCK_MOVED_BACKWARDS = "clock_moved_backwards"
    WORKER_IDS_EXHAUSTED = "worker_ids_exhausted"
    RATE_LIMITED = "rate_limited"
    TOKEN_NOT_FOUND = "token_not_found"
    TEMPLATE_NOT_FOUND = "template_not_found"
    TEMPLATE_CONFLICT = "template_conflict"
    WRONG_PROFILE = "wrong_profile"
    NUMBER_NOT_FOUND = "number_not_found"
    NUMBER_CONFLICT = "number_conflict"
    FEATURE_NOT_ACTIVE = "feature_not_active"
    MEMBERSHIP_CONFLICT = "membership_conflict"
    TOKEN_EXISTS = "token_exists"
    REGION_CONFLICT = "region_conflict"
    UNKNOWN = "unknown"

    @classmethod
    def parse(cls, text: str) -> "ErrorCode":
        """The member for ``text``; :attr:`UNKNOWN` for a code this client does not know."""
        try:
            code = cls(text)
        except ValueError:
            return cls.UNKNOWN
        return code

    def __str__(self) -> str:
        return self.value


#: The HTTP status each code is answered with (``docs/src/http-api.md``, "Errors"); used for
#: errors raised locally and for gRPC errors, which carry the code but no HTTP status.
STATUS_OF_CODE = {
    ErrorCode.INVALID_TAG: 400,
    ErrorCode.INVALID_COUNT: 400,
    ErrorCode.INVALID_REQUEST: 400,
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.FORBIDDEN: 403,
    ErrorCode.TAG_NOT_FOUND: 404,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.MEMBER_NOT_FOUND: 404,
    ErrorCode.TOKEN_NOT_FOUND: 404,
    ErrorCode.TEMPLATE_NOT_FOUND: 404,
    ErrorCode.NUMBER_NOT_FOUND: 404,
    ErrorCode.METHOD_NOT_ALLOWED: 405,
    ErrorCode.TAG_EXISTS: 409,
    ErrorCode.TAG_EXHAUSTED: 409,
    ErrorCode.MEMBER_EXISTS: 409,
    ErrorCode.NODE_ID_RETIRED: 409,
    ErrorCode.TEMPLATE_CONFLICT: 409,
    ErrorCode.WRONG_PROFILE: 409,
    ErrorCode.NUMBER_CONFLICT: 409,
    ErrorCode.FEATURE_NOT_ACTIVE: 409,
    ErrorCode.MEMBERSHIP_CONFLICT: 409,
    ErrorCode.TOKEN_EXISTS: 409,
    ErrorCode.REGION_CONFLICT: 409,
    ErrorCode.PAYLOAD_TOO_LARGE: 413,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.SEGMENTS_NOT_READY: 503,
    ErrorCode.NOT_READY: 503,
    ErrorCode.UNAVAILABLE: 503,
    ErrorCode.SHUTTING_DOWN: 503,
    ErrorCode.SNOWFLAKE_UNAVAILABLE: 503,
    ErrorCode.CLOCK_MOVED_BACKWARDS: 503,
    ErrorCode.WORKER_IDS_EXHAUSTED: 503,
}


class LeafError(Exception):
    """Base class of every error this package raises."""

    @property
    def code(self) -> Optional[ErrorCode]:
        """The API error code, when a node answered with one (or the check made locally)."""
        return None

    @property
    def status(self) -> Optional[int]:
        """The HTTP status of the answer, when there was one."""
        return None

    @property
    def is_unavailable(self) -> bool:
        """The service is unavailable (a 503, no answer, a timeout) rather than the request
        wrong: worth trying again later."""
        return False


class ConfigError(LeafError, ValueError):
    """The client's configuration is unusable (no nodes, a bad URL, a bad token, an
    unreadable CA file). The text never echoes a token or URL credentials."""


class ApiError(LeafError):
    """A node (or the local argument check) answered with an error code.

    Attributes: ``status`` (HTTP status), ``code`` (:class:`ErrorCode`), ``raw_code`` (the code
    as sent, useful when ``code`` is ``UNKNOWN``), ``message``, ``leaf_code`` (Leaf's numeric
    result code, e.g. -2, when the server gives one), ``retry_after`` (seconds, from a 429's or
    503's ``Retry-After``), ``node`` (which node answered; ``None`` for a local check),
    ``grpc_status`` (the gRPC status name, for errors of :class:`~leaf_client.grpc.GrpcClient`).
    """

    def __init__(
        self,
        status: int,
        code: ErrorCode,
        message: str,
        *,
        raw_code: Optional[str] = None,
        leaf_code: Optional[int] = None,
        retry_after: Optional[float] = None,
        node: Optional[str] = None,
        grpc_status: Optional[str] = None,
    ) -> None:
        self._status = status
        self._code = code
        self.raw_code = raw_code if raw_code is not None else code.value
        self.message = message
        self.leaf_code = leaf_code
        self.retry_after = retry_after
        self.node = node
        self.grpc_status = grpc_status
        where = f"{node}: " if node else ("" if grpc_status else "(checked locally) ")
        super().__init__(f"{where}HTTP {status}: {self.raw_code}: {message}")

    @property
    def code(self) -> ErrorCode:
        return self._code

    @property
    def status(self) -> int:
        return self._status

    @property
    def is_unavailable(self) -> bool:
        return self._status == 503


class InvalidRequestError(ApiError):
    """400 (``invalid_tag``, ``invalid_count``, ``invalid_request``) or 413: the request is
    wrong. Also raised before sending when an argument fails the local check."""


class UnauthorizedError(ApiError):
    """401 ``unauthorized``: a token missing or wrong."""


class ForbiddenError(ApiError):
    """403 ``forbidden``: the credential lacks the right, or a non-loopback caller without one."""


class NotFoundError(ApiError):
    """404: ``tag_not_found``, ``number_not_found``, ``not_found``, ..."""


class ConflictError(ApiError):
    """409: ``tag_exists``, ``tag_exhausted``, ``wrong_profile``, ``number_conflict``, ..."""


class RateLimitedError(ApiError):
    """429 ``rate_limited``; ``retry_after`` says when to try again."""


class UnavailableError(ApiError):
    """503: the node or the cluster cannot answer now (not ready, no quorum, shutting down,
    snowflake unavailable, ``worker_ids_exhausted``)."""


_CATEGORY = {
    400: InvalidRequestError,
    413: InvalidRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    429: RateLimitedError,
    503: UnavailableError,
}


def api_error(status: int, raw_code: str, message: str, **kw) -> ApiError:
    """The :class:`ApiError` of the category subclass for ``status``."""
    cls = _CATEGORY.get(status, ApiError)
    return cls(status, ErrorCode.parse(raw_code), message, raw_code=raw_code, **kw)


def local_error(code: ErrorCode, message: str) -> InvalidRequestError:
    """An argument refused before anything was sent, as the server would refuse it."""
    return InvalidRequestError(STATUS_OF_CODE.get(code, 400), code, message)


class DecodeError(LeafError):
    """An answer that is not what the endpoint returns (not JSON, the wrong number of IDs, too
    large), or an error status without an error body (a proxy's page). A 503 of this kind is
    retried like an unavailable node."""

    def __init__(self, node: str, status: int, message: str) -> None:
        self.node = node
        self._status = status
        self.message = message
        super().__init__(f"{node}: HTTP {status}: unexpected answer: {message}")

    @property
    def status(self) -> int:
        return self._status

    @property
    def is_unavailable(self) -> bool:
        return self._status == 503


class TransportError(LeafError):
    """No answer: connection refused or reset, or closed by the node. ``connect`` is true when
    the request was never sent (the connection could not be opened)."""

    def __init__(self, node: str, message: str, *, connect: bool) -> None:
        self.node = node
        self.message = message
        self.connect = connect
        super().__init__(f"{node}: {message}")

    @property
    def is_unavailable(self) -> bool:
        return True


class RequestTimeoutError(TransportError):
    """No complete answer within the per-attempt timeout (or what was left of the deadline)."""

    def __init__(self, node: str, timeout: float, *, connect: bool = False) -> None:
        super().__init__(node, f"no answer within {timeout:.3f} s", connect=connect)
        self.timeout = timeout


class TlsError(LeafError):
    """The TLS handshake with a node failed (untrusted certificate, wrong name, a plaintext
    port): a setup problem, not an outage. The node processed no request."""

    def __init__(self, node: str, message: str) -> None:
        self.node = node
        self.message = message
        super().__init__(f"{node}: TLS handshake failed: {message}")


class AllNodesFailedError(LeafError):
    """Every allowed attempt failed with an error worth retrying; ``last`` is the final one
    (``code``, ``status`` and ``is_unavailable`` look through to it)."""

    def __init__(self, attempts: int, last: LeafError) -> None:
        self.attempts = attempts
        self.last = last
        super().__init__(f"gave up after {attempts} attempts: {last}")

    @property
    def code(self) -> Optional[ErrorCode]:
        return self.last.code

    @property
    def status(self) -> Optional[int]:
        return self.last.status

    @property
    def is_unavailable(self) -> bool:
        return self.last.is_unavailable


class PoolError(LeafError):
    """An :class:`~leaf_client.pool.IdPool` could not hand out an ID."""


class PoolExhaustedError(PoolError):
    """Nothing was buffered and no lease arrived within ``max_wait``. ``last_error`` is the
    last lease failure in words (``None``: the lease was only slow)."""

    def __init__(self, kind: str, name: str, waited: float, last_error: Optional[str]) -> None:
        self.kind = kind
        self.name = name
        self.waited = waited
        self.last_error = last_error
        super().__init__(
            f"no {kind} ID of {name!r} within {waited:.3f} s: {last_error or 'no lease arrived in time'}"
        )


class PoolRejectedError(PoolError):
    """Nothing is buffered and the last lease was refused for a reason waiting does not fix
    (an unknown tag, a rejected token, a TLS setup problem): raised at once. The pool's refill
    keeps trying with backoff, so a later call succeeds once the cause is gone."""

    def __init__(self, kind: str, name: str, error: str) -> None:
        self.kind = kind
        self.name = name
        self.error = error
        super().__init__(f"{kind} IDs of {name!r} refused: {error}")


class PoolClosedError(PoolError):
    """The pool was closed."""
