"""Python client of the ``leaf`` ID service.

- :class:`LeafClient` (sync) and :class:`AsyncLeafClient` (asyncio): every HTTP operation with
  failover over a list of nodes, safe retries, typed errors.
- :class:`IdPool`: a client-side buffer of leased ID ranges with a background refill thread and
  a per-thread fast path.
- :class:`leaf_client.grpc.GrpcClient`: IDs and gapless numbers over gRPC (import
  ``leaf_client.grpc``; it loads grpcio and the generated stubs).
"""
from ._own_creates import OwnCreates
from ._retry import Backoff
from ._version import __version__
from .aio import AsyncLeafClient
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
from .types import Health, IdRange, IdRanges, IssuedNumber, NumberState, SnowflakeId, TagInfo

__all__ = [
    "__version__",
    "AllNodesFailedError",
    "ApiError",
    "AsyncLeafClient",
    "Backoff",
    "ConfigError",
    "ConflictError",
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
    "TlsError",
    "TransportError",
    "UnauthorizedError",
    "UnavailableError",
]
