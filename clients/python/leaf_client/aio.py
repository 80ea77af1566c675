"""AsyncLeafClient: the asyncio HTTP client, the same operations as
:class:`~leaf_client.LeafClient` over ``httpx.AsyncClient``, running the same request building,
failover decisions and answer parsing (``_calls``, ``_execute``)."""
from __future__ import annotations

import asyncio
import os
from typing import Any, List, Optional, Union

import httpx

from . import _calls
from ._config import ClientConfig, Nodes
from ._execute import Attempts
from ._own_creates import OwnCreates
from ._retry import Backoff
from ._transport import send_async
from .errors import LeafError
from .types import Health, IdRanges, IssuedNumber, SnowflakeId, TagInfo


class AsyncLeafClient:
    """The asyncio twin of :class:`~leaf_client.LeafClient`: the same constructor, methods,
    failover, retries and errors; each method is a coroutine. Use ``async with`` or
    ``await client.aclose()``."""

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
        self._http = httpx.AsyncClient(verify=self._cfg.ssl, trust_env=False, timeout=self._cfg.timeout)

    @property
    def nodes(self) -> List[str]:
        """The nodes' base URLs, normalised."""
        return list(self._cfg.nodes)

    @property
    def own_creates(self) -> OwnCreates:
        """This client's memory of the tags it created, to share with another client."""
        return self._cfg.own_creates

    def __repr__(self) -> str:
        return f"AsyncLeafClient({self._cfg!r})"

    async def __aenter__(self) -> "AsyncLeafClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Closes the connections."""
        await self._http.aclose()

    async def _run(self, op: _calls.Op) -> Any:
        call = op.call
        attempts = Attempts(self._cfg, call.safety, call.tag)
        while True:
            idx, timeout = attempts.next()
            node = self._cfg.nodes[idx]
            try:
                raw = await send_async(self._http, self._cfg, node, call, timeout)
                answer = _calls.check(node, raw, call.also_ok)
            except LeafError as err:
                await asyncio.sleep(attempts.failed(err))
                continue
            attempts.succeeded()
            return op.finish(answer, self._cfg)

    async def segment_id(self, tag: str) -> int:
        """See :meth:`LeafClient.segment_id`."""
        return await self._run(_calls.segment_id(tag))

    async def segment_ids(self, tag: str, count: int) -> List[int]:
        """See :meth:`LeafClient.segment_ids`."""
        return await self._run(_calls.segment_ids(tag, count))

    async def segment_ranges(self, tag: str, count: int) -> IdRanges:
        """See :meth:`LeafClient.segment_ranges`."""
        return await self._run(_calls.segment_ranges(tag, count))

    async def snowflake_id(self, key: str) -> int:
        """See :meth:`LeafClient.snowflake_id`."""
        return await self._run(_calls.snowflake_id(key))

    async def snowflake_ids(self, key: str, count: int) -> List[int]:
        """See :meth:`LeafClient.snowflake_ids`."""
        return await self._run(_calls.snowflake_ids(key, count))

    async def snowflake_ranges(self, key: str, count: int) -> IdRanges:
        """See :meth:`LeafClient.snowflake_ranges`."""
        return await self._run(_calls.snowflake_ranges(key, count))

    async def decode(self, snowflake_id: int) -> SnowflakeId:
        """See :meth:`LeafClient.decode`."""
        return await self._run(_calls.decode(snowflake_id))

    async def health(self, mode: Optional[str] = None) -> Health:
        """See :meth:`LeafClient.health`."""
        return await self._run(_calls.health(mode))

    async def create_tag(
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
        """See :meth:`LeafClient.create_tag`."""
        return await self._run(
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

    async def get_tag(self, tag: str) -> TagInfo:
        """See :meth:`LeafClient.get_tag`."""
        return await self._run(_calls.get_tag(tag))

    async def archive_tag(self, tag: str) -> TagInfo:
        """See :meth:`LeafClient.archive_tag`."""
        return await self._run(_calls.archive_tag(tag))

    async def issue_number(self, tag: str, key: str) -> IssuedNumber:
        """See :meth:`LeafClient.issue_number`."""
        return await self._run(_calls.issue_number(tag, key))

    async def reserve_number(self, tag: str, key: str, hold_seconds: Optional[int] = None) -> IssuedNumber:
        """See :meth:`LeafClient.reserve_number`."""
        return await self._run(_calls.reserve_number(tag, key, hold_seconds))

    async def confirm_number(self, tag: str, key: str) -> IssuedNumber:
        """See :meth:`LeafClient.confirm_number`."""
        return await self._run(_calls.confirm_number(tag, key))

    async def void_number(self, tag: str, key: str, reason: str) -> IssuedNumber:
        """See :meth:`LeafClient.void_number`."""
        return await self._run(_calls.void_number(tag, key, reason))
