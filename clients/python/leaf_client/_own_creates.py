"""Reading one's own creates (the Rust client's ``own_creates.rs``).

A node caught up with its leader answers a request for a tag it does not hold with 404 from its
own state. A tag just created through another node may therefore be unknown on this one for a
moment (up to about two heartbeats). So the client remembers the tags it created in the last
:data:`GRACE` seconds and retries a ``tag_not_found`` for one of them every
:data:`RETRY_EVERY` seconds until the grace runs out, without spending its retry budget.
Archiving a tag through the client forgets it (an archived tag is 404 for good). Clients may
share one :class:`OwnCreates` (``own_creates=`` of the constructors).
"""
from __future__ import annotations

import threading
import time
from collections import deque
from typing import Deque, Iterable, Tuple

#: How long after its create a tag's ``tag_not_found`` is retried, in seconds.
GRACE = 3.0
#: The wait between such retries, in seconds.
RETRY_EVERY = 0.05
#: Tags remembered at most (the oldest are forgotten first).
KEEP = 1024


class OwnCreates:
    """The tags a client created recently; thread-safe, shareable between clients."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._recent: Deque[Tuple[str, float]] = deque()

    def created(self, tags: Iterable[str]) -> None:
        """Remembers that this client created ``tags`` just now."""
        now = time.monotonic()
        with self._lock:
            while self._recent and now - self._recent[0][1] > GRACE:
                self._recent.popleft()
            for tag in tags:
                if len(self._recent) >= KEEP:
                    self._recent.popleft()
                self._recent.append((tag, now))

    def forget(self, tag: str) -> None:
        """Forgets ``tag`` (archived: its 404 is the answer)."""
        with self._lock:
            self._recent = deque(e for e in self._recent if e[0] != tag)

    def within_grace(self, tag: str) -> bool:
        """Whether this client created ``tag`` less than :data:`GRACE` seconds ago."""
        now = time.monotonic()
        with self._lock:
            return any(t == tag and now - at < GRACE for t, at in reversed(self._recent))

    def __repr__(self) -> str:
        return f"OwnCreates({len(self._recent)} recent)"
