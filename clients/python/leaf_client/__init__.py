"""Python client of the ``leaf`` ID service.

- :class:`LeafClient` (sync) and :class:`AsyncLeafClient` (asyncio): every HTTP operation with
  failover over a list of nodes, safe retries, typed errors.
- :class:`IdPool`: a client-side buffer of leased ID ranges with a per-thread fast path, refilled
  ahead by one refill thread per pool (and at most 3 lease workers), whatever its number of tags.
- :class:`AsyncIdPool`: the same over :class:`AsyncLeafClient`, refilled by asyncio tasks.
- :class:`leaf_client.grpc.GrpcClient`: IDs, gapless numbers and tag/template administration over
  gRPC (import ``leaf_client.grpc``; it loads grpcio and the generated stubs).
"""
from ._own_creates import OwnCreates
from ._retry import Backoff
from ._version import __version__
from .aio import AsyncLeafClient
from .aio_pool import AsyncIdPool, AsyncTagPool
from .client import LeafClient
from .errors import (
    AllNodesFailedError,
    ApiError,
    ConfigError,
    ConflictError,
    DecodeError,
    ErrorCode,
    ForbiddenError,
    InvalidRequestError,
    LeafError,
    NotFoundError,
    PoolClosedError,
    PoolError,
    PoolExhaustedError,
    PoolRejectedError,
    RateLimitedError,
    RequestTimeoutError,
    TlsError,
    TransportError,
    UnauthorizedError,
    UnavailableError,
)
from .pool import IdPool, PoolOptions, PoolStats, TagPool
from .types import (
    CreatedTags,
    Health,
    IdRange,
    IdRanges,
    IssuedNumber,
    NumberState,
    SnowflakeId,
    TagInfo,
    TemplateInfo,
)

__all__ = [
    "__version__",
    "AllNodesFailedError",
    "ApiError",
    "AsyncIdPool",
    "AsyncLeafClient",
    "AsyncTagPool",
    "Backoff",
    "ConfigError",
    "ConflictError",
    "CreatedTags",
    "DecodeError",
    "ErrorCode",
    "ForbiddenError",
    "Health",
    "IdPool",
    "IdRange",
    "IdRanges",
    "InvalidRequestError",
    "IssuedNumber",
    "LeafClient",
    "LeafError",
    "NotFoundError",
    "NumberState",
    "OwnCreates",
    "PoolClosedError",
    "PoolError",
    "PoolExhaustedError",
    "PoolOptions",
    "PoolRejectedError",
    "PoolStats",
    "RateLimitedError",
    "RequestTimeoutError",
    "SnowflakeId",
    "TagInfo",
    "TagPool",
    "TemplateInfo",
    "TlsError",
    "TransportError",
    "UnauthorizedError",
    "UnavailableError",
]
