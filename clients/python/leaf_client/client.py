"""LeafClient: the synchronous HTTP client of a leaf cluster (any of its nodes)."""
from __future__ import annotations

import os
import time
from typing import Any, List, Optional, Union

import httpx

from . import _calls
from ._config import ClientConfig, Nodes
from ._execute import Attempts
from ._own_creates import OwnCreates
from ._retry import Backoff
from ._transport import send
from .errors import LeafError
from .types import Health, IdRanges, IssuedNumber, SnowflakeId, TagInfo


class LeafClient:
    """A client of one leaf cluster over HTTP(S); thread-safe, one connection pool.

    ``nodes``: one URL or a list (``http://host:port`` or ``https://host:port``); any node serves
    every call. A call starts at the node that answered last and moves on to the next one after
    an error worth retrying (no answer, a transient 503), backing off between attempts
    (``backoff``), at most ``retries`` times after the first attempt, within ``deadline``
    seconds in all, each attempt within ``timeout`` seconds. ID requests, reads and gapless
    calls are retried; creating a tag only when the connection could not be opened. When more
    than one attempt failed the error is :class:`~leaf_client.errors.AllNodesFailedError`
    carrying the last one.

    ``token``: sent as ``Authorization: Bearer <token>`` (admin calls; ID calls on nodes that
    require it); never shown in a ``repr`` or an error. ``ca_file``: the cluster's CA (PEM), the
    only trust root for ``https://`` nodes (without it, the platform's roots). Environment
    proxies are not used (``trust_env=False``).

    Use it as a context manager, or call :meth:`close`.
    """

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
            nodes,
            token=token,
            ca_file=ca_file,
            timeout=timeout,
            deadline=deadline,
            retries=retries,
            backoff=backoff,
            own_creates=own_creates,
        )
        self._http = httpx.Client(verify=self._cfg.ssl, trust_env=False, timeout=self._cfg.timeout)

    @property
    def nodes(self) -> List[str]:
        """The nodes' base URLs, normalised."""
        return list(self._cfg.nodes)

    @property
    def own_creates(self) -> OwnCreates:
        """This client's memory of the tags it created, to share with another client."""
        return self._cfg.own_creates

    def __repr__(self) -> str:
        return f"LeafClient({self._cfg!r})"

    def __enter__(self) -> "LeafClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connections."""
        self._http.close()

    def _run(self, op: _calls.Op) -> Any:
        call = op.call
        attempts = Attempts(self._cfg, call.safety, call.tag)
        while True:
            idx, timeout = attempts.next()
            node = self._cfg.nodes[idx]
            try:
                answer = _calls.check(node, send(self._http, self._cfg, node, call, timeout), call.also_ok)
            except LeafError as err:
                time.sleep(attempts.failed(err))
                continue
            attempts.succeeded()
            return op.finish(answer, self._cfg)

    # ---- IDs -------------------------------------------------------------------------------

    def segment_id(self, tag: str) -> int:
        """One segment ID of ``tag`` (``GET /api/segment/get/{tag}``)."""
        return self._run(_calls.segment_id(tag))

    def segment_ids(self, tag: str, count: int) -> List[int]:
        """``count`` (1-100,000) segment IDs of ``tag``, in the order the node handed them out."""
        return self._run(_calls.segment_ids(tag, count))

    def segment_ranges(self, tag: str, count: int) -> IdRanges:
        """``count`` (1-1,000,000) segment IDs of ``tag`` as ranges ``[start, end)`` (checked:
        well-formed, exactly ``count`` IDs)."""
        return self._run(_calls.segment_ranges(tag, count))

    def snowflake_id(self, key: str) -> int:
        """One snowflake ID (``key`` is recorded for auditing, validated like a tag)."""
        return self._run(_calls.snowflake_id(key))

    def snowflake_ids(self, key: str, count: int) -> List[int]:
        """``count`` (1-100,000) snowflake IDs."""
        return self._run(_calls.snowflake_ids(key, count))

    def snowflake_ranges(self, key: str, count: int) -> IdRanges:
        """``count`` (1-1,000,000) snowflake IDs as ranges (about one per millisecond spanned)."""
        return self._run(_calls.snowflake_ranges(key, count))

    def decode(self, snowflake_id: int) -> SnowflakeId:
        """A snowflake ID's time, worker ID and sequence, as the server decodes it (the epoch is
        the server's: there is no local decode)."""
        return self._run(_calls.decode(snowflake_id))

    def health(self, mode: Optional[str] = None) -> Health:
        """``/health`` of the node the call lands on (``mode``: ``"segment"`` or
        ``"snowflake"`` for one mode's readiness). A node that is not ready answers too
        (``ready=False``)."""
        return self._run(_calls.health(mode))

    # ---- tags ------------------------------------------------------------------------------

    def create_tag(
        self,
        tag: str,
        step: int,
        *,
        max_id: Optional[int] = None,
        description: Optional[str] = None,
        profile: Optional[str] = None,
        gapless: Optional[dict] = None,
        daily: Optional[dict] = None,
        upper_bound: Optional[int] = None,
    ) -> TagInfo:
        """Creates ``tag`` (``POST /admin/tags``). ``profile``: ``segment`` (default),
        ``monotonic``, ``obfuscated``, ``daily`` or ``gapless`` (with ``gapless`` options such
        as ``{"reset": "year", "format": "INV-{yyyy}-{seq:06}"}``). At most once: retried only
        when the connection could not be opened. Raises ``ConflictError`` (``tag_exists``)."""
        return self._run(
            _calls.create_tag(
                tag,
                step,
                max_id=max_id,
                description=description,
                profile=profile,
                gapless=gapless,
                daily=daily,
                upper_bound=upper_bound,
            )
        )

    def get_tag(self, tag: str) -> TagInfo:
        """The tag as stored (``GET /admin/tags/{tag}``)."""
        return self._run(_calls.get_tag(tag))

    def archive_tag(self, tag: str) -> TagInfo:
        """Archives ``tag`` (idempotent): no ID is handed out for it again."""
        return self._run(_calls.archive_tag(tag))

    # ---- gapless series --------------------------------------------------------------------

    def issue_number(self, tag: str, key: str) -> IssuedNumber:
        """The number of gapless series ``tag`` for idempotency ``key``: the next one, or the
        one the key already has (``replayed=True``)."""
        return self._run(_calls.issue_number(tag, key))

    def reserve_number(self, tag: str, key: str, hold_seconds: Optional[int] = None) -> IssuedNumber:
        """The next number for ``key``, reserved for ``hold_seconds`` (the server's 900 s when
        ``None``): confirm or void it before its ``deadline_ms``."""
        return self._run(_calls.reserve_number(tag, key, hold_seconds))

    def confirm_number(self, tag: str, key: str) -> IssuedNumber:
        """Makes the key's reserved number final."""
        return self._run(_calls.confirm_number(tag, key))

    def void_number(self, tag: str, key: str, reason: str) -> IssuedNumber:
        """Voids the key's reserved number for ``reason``: it keeps its place, never reissued."""
        return self._run(_calls.void_number(tag, key, reason))
