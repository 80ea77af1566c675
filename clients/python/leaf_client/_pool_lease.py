"""What the thread and asyncio pools share about one lease: its record, and the booking of its
outcome into a tag's ranges and counters (the callers wake their waiters and schedule a retry)."""
from __future__ import annotations

from typing import Any, Deque, Dict, List, Optional, Tuple

from .errors import DecodeError, LeafError
from .types import IdRanges


class Lease:
    """One lease's IDs, as the ranges it queued refer to it."""

    __slots__ = ("size", "sent", "taken", "prefetched")

    def __init__(self, size: int, sent: float) -> None:
        self.size = size
        self.sent = sent
        self.taken = 0
        self.prefetched = False


def book(
    result: Any,
    size: int,
    sent: float,
    now: float,
    stale_after: Optional[float],
    counters: Dict[str, int],
    ranges: Deque[List[Any]],
) -> Optional[Tuple[str, bool]]:
    """Books a lease's ``result`` (``IdRanges`` or the exception it raised): a good answer is
    queued on ``ranges`` and counted, and ``None`` returned; otherwise the failure as
    ``(message, retryable)``, counted as failed. ``stale_after``: for snowflake keys, the age
    (``max_staleness - tick``) past which a lease's IDs are retired unseen."""
    failure: Tuple[str, bool]
    if isinstance(result, IdRanges):
        problem = result.check(size)
        if problem:
            failure = (f"a malformed answer: {problem}", True)
        elif stale_after is not None and sent <= now - stale_after:
            counters["leased"] += size
            counters["retired"] += size
            failure = (f"a lease took {now - sent:.3f} s: its snowflake IDs were too old to hand out", True)
        else:
            lease = Lease(size, sent)
            ranges.extend([r.start, r.end, lease] for r in result.ranges)
            counters["leased"] += size
            counters["leases_ok"] += 1
            counters["last_lease_size"] = size
            return None
    else:
        retryable = not isinstance(result, LeafError) or result.is_unavailable or isinstance(result, DecodeError)
        failure = (str(result) or type(result).__name__, retryable)
    counters["leases_failed"] += 1
    return failure
