"""The adaptive lease size of an ID pool (the Rust client's ``pool/sizing.rs``), pure arithmetic.

The refill thread measures how long a lease lasted (from one lease request to the next) and
aims for ``period``: shorter than ``period / 2`` doubles the size, longer than ``2 * period``
halves it, otherwise it stays; always within ``[min, max]``. When callers had to wait since the
previous request, the lease counts as lasting no time (it doubles): the measured time then
includes the wait, and halving would starve the callers further.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sizing:
    """Bounds and aim of the lease size (``period`` in seconds)."""

    min: int
    max: int
    period: float

    def adapt(self, current: int, lasted: float) -> int:
        """The next lease's size, given the current one and how long the last lease lasted."""
        current = self.clamp(current)
        if lasted < self.period / 2:
            return self.clamp(current * 2)
        if lasted > self.period * 2:
            return self.clamp(current // 2)
        return current

    def clamp(self, size: int) -> int:
        """``size`` within ``[min, max]``."""
        return max(self.min, min(self.max, size))


def retry_backoff(failures: int, least: float, most: float) -> float:
    """The wait before retrying a failed lease after ``failures`` (1, 2, ...) failures in a row:
    ``least``, doubling, at most ``most``."""
    return min(most, least * (1 << min(max(failures - 1, 0), 20)))


def rate(ids: int, elapsed: float) -> float:
    """IDs per second (0 for no time)."""
    return ids / elapsed if elapsed > 0 else 0.0
