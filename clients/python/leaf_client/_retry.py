"""When a failed attempt may be repeated (on the same or the next node), and how long to wait
first: the rules of the Rust client's ``retry.rs``.

Each call declares its safety:

- **idempotent**: repeating it cannot change what the caller ends up with. Reads; ID requests
  (an ID range handed to an answer that was lost is never handed out again: a retry makes a
  *gap*, never a duplicate); tag updates and archives (absolute); gapless issue, reserve,
  confirm and void (keyed: the key keeps a repeat to its number).
- **at most once**: creating a tag. If a first attempt committed but its answer was lost, a
  retry would answer ``tag_exists``; so it is retried only when the connection could not be
  opened (the request never left this process).

A TLS handshake failure means the node processed nothing, so another node may be tried
whatever the safety; waiting does not cure it, so a call gives up once every node failed so.

Errors worth retrying: no answer (transport error, timeout) and a 503 whose code says the node
or the cluster is temporarily unable (``unavailable``, ``not_ready``, ``segments_not_ready``,
``shutting_down``, ``snowflake_unavailable``, ``clock_moved_backwards``), or a 503 without a
readable error body. Everything else (400s, 401, 403, 404, 409, 429, ``worker_ids_exhausted``)
is the answer, raised at once.
"""
from __future__ import annotations

import enum
import random
from dataclasses import dataclass

from .errors import ApiError, DecodeError, ErrorCode, LeafError, TlsError, TransportError

#: 503 codes that another node, or the same node a little later, may not answer.
TRANSIENT_CODES = frozenset(
    {
        ErrorCode.UNAVAILABLE,
        ErrorCode.NOT_READY,
        ErrorCode.SEGMENTS_NOT_READY,
        ErrorCode.SHUTTING_DOWN,
        ErrorCode.SNOWFLAKE_UNAVAILABLE,
        ErrorCode.CLOCK_MOVED_BACKWARDS,
    }
)


class Safety(enum.Enum):
    """Whether a call may be repeated after it may have reached a node."""

    IDEMPOTENT = "idempotent"
    AT_MOST_ONCE = "at_most_once"


def retryable(err: LeafError, safety: Safety) -> bool:
    """Whether ``err``, from one attempt of a call with ``safety``, may be retried."""
    if isinstance(err, TlsError) or (isinstance(err, TransportError) and err.connect):
        return True
    if safety is Safety.AT_MOST_ONCE:
        return False
    if isinstance(err, TransportError):
        return True
    if isinstance(err, ApiError):
        return err.status == 503 and err.code in TRANSIENT_CODES
    if isinstance(err, DecodeError):
        return err.status == 503
    return False


def gives_up_on_tls(err: LeafError, nodes: int, tls_failures: int) -> bool:
    """Whether a call over ``nodes`` nodes stops after ``err`` when ``tls_failures`` of its
    attempts (this one included) failed in the TLS handshake: every node had its turn."""
    return isinstance(err, TlsError) and tls_failures >= nodes


@dataclass(frozen=True)
class Backoff:
    """Capped exponential backoff with jitter: before retry ``n`` (0-based) it waits a random
    time between half and all of ``min(cap, base * 2**n)`` seconds."""

    base: float = 0.05
    cap: float = 1.0

    def __post_init__(self) -> None:
        if self.base <= 0 or self.cap < self.base:
            raise ValueError("backoff needs 0 < base <= cap")

    def delay(self, retry: int) -> float:
        """The wait before retry ``retry`` (0-based), in seconds."""
        full = min(self.cap, self.base * (1 << min(retry, 20)))
        half = full / 2
        return half + random.uniform(0, half)
