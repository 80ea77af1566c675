"""Failover of one call over the nodes, as ``execute()`` of the Rust client: start at the node
that answered last, move to the next one after an error worth retrying, back off between
attempts, within the retry budget and the deadline; a tag this client just created is retried
through ``tag_not_found``. The decisions live here, free of I/O, so the sync, async and gRPC
clients share them and differ only in how they send and sleep."""
from __future__ import annotations

import time
from typing import Optional, Tuple

from . import _own_creates
from ._config import ClientConfig
from ._retry import Safety, gives_up_on_tls, retryable
from .errors import AllNodesFailedError, ErrorCode, LeafError, NotFoundError, TlsError


class Attempts:
    """The attempts of one call: which node next, how long the next attempt may take, and what
    to do after a failure."""

    __slots__ = ("_cfg", "_safety", "_tag", "_deadline", "_first", "_n", "attempt", "_tls_failures", "_idx")

    def __init__(self, cfg: ClientConfig, safety: Safety, tag: Optional[str] = None, nodes: Optional[int] = None):
        self._cfg = cfg
        self._safety = safety
        self._tag = tag
        self._deadline = time.monotonic() + cfg.deadline
        self._n = nodes if nodes is not None else len(cfg.nodes)
        self._first = cfg.preferred % self._n
        self.attempt = 0
        self._tls_failures = 0
        self._idx = self._first

    def next(self) -> Tuple[int, float]:
        """The index of the node to try now and the time this attempt may take (seconds)."""
        self._idx = (self._first + self.attempt) % self._n
        left = self._deadline - time.monotonic()
        return self._idx, max(0.001, min(self._cfg.timeout, left))

    def succeeded(self) -> None:
        """The node just tried answered: later calls start with it."""
        self._cfg.preferred = self._idx

    def failed(self, err: LeafError) -> float:
        """After an attempt failed with ``err``: the seconds to wait before the next attempt,
        or raises the error the call ends with."""
        own_create = (
            isinstance(err, NotFoundError)
            and err.code is ErrorCode.TAG_NOT_FOUND
            and self._tag is not None
            and self._cfg.own_creates.within_grace(self._tag)
        )
        if not own_create and not retryable(err, self._safety):
            raise err
        if isinstance(err, TlsError):
            self._tls_failures += 1
        if (not own_create and self.attempt >= self._cfg.retries) or gives_up_on_tls(
            err, self._n, self._tls_failures
        ):
            raise self._give_up(err)
        wait = _own_creates.RETRY_EVERY if own_create else self._cfg.backoff.delay(self.attempt)
        if time.monotonic() + wait >= self._deadline:
            raise self._give_up(err)
        self.attempt += 1
        return wait

    def _give_up(self, err: LeafError) -> LeafError:
        if self.attempt == 0:
            return err
        return AllNodesFailedError(self.attempt + 1, err)
