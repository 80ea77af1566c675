"""A client's settings, checked once: node URLs, token, TLS trust, timeouts and retries. Shared
by :class:`~leaf_client.LeafClient`, :class:`~leaf_client.AsyncLeafClient` and
:class:`~leaf_client.grpc.GrpcClient`."""
from __future__ import annotations

import os
import re
import ssl
from typing import Iterable, List, Optional, Union
from urllib.parse import urlsplit

from ._own_creates import OwnCreates
from ._retry import Backoff
from .errors import ConfigError

Nodes = Union[str, Iterable[str]]

_TOKEN = re.compile(r"[\x21-\x7e]+\Z")


def parse_base(url: str) -> str:
    """``http(s)://host:port[/]`` -> ``http(s)://host:port``; no path, query or credentials."""
    text = url.strip().rstrip("/")
    if "@" in text:
        raise ConfigError("invalid node URL (redacted): credentials in the URL are not supported")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as e:
        raise ConfigError(f"invalid node URL {url!r}: {e}") from None
    if parts.scheme not in ("http", "https"):
        raise ConfigError(f"invalid node URL {url!r}: expected http://host:port or https://host:port")
    if not parts.hostname:
        raise ConfigError(f"invalid node URL {url!r}: no host")
    if parts.path or parts.query or parts.fragment:
        raise ConfigError(f"invalid node URL {url!r}: a node URL has no path or query")
    del port
    return f"{parts.scheme}://{parts.netloc}"


def ssl_context(ca_file: Optional[Union[str, os.PathLike]]) -> ssl.SSLContext:
    """Certificate checking for ``https://`` nodes: only the CA(s) in ``ca_file`` when given,
    else the platform's roots. Host names (and IP addresses) are checked."""
    if ca_file is None:
        return ssl.create_default_context()
    path = os.fspath(ca_file)
    try:
        return ssl.create_default_context(cafile=path)
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(f"cannot use the CA file {path}: {e}") from None


class ClientConfig:
    """The checked settings of one client (internal). ``preferred`` is the index of the node
    that answered last: the next call starts there."""

    __slots__ = ("nodes", "_auth", "timeout", "deadline", "retries", "backoff", "ca_file", "ssl", "own_creates", "preferred")

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
        urls: List[str] = [nodes] if isinstance(nodes, str) else list(nodes)
        if not urls:
            raise ConfigError("no node URLs given")
        self.nodes = [parse_base(u) for u in urls]
        if token is not None and not _TOKEN.match(token):
            raise ConfigError("the token must be printable ASCII without spaces")
        self._auth = f"Bearer {token}" if token is not None else None
        if not timeout > 0 or not deadline > 0:
            raise ConfigError("timeout and deadline must be above zero")
        if not isinstance(retries, int) or retries < 0:
            raise ConfigError("retries must be a non-negative integer")
        self.timeout = float(timeout)
        self.deadline = float(deadline)
        self.retries = retries
        self.backoff = backoff or Backoff()
        self.ca_file = os.fspath(ca_file) if ca_file is not None else None
        self.ssl = ssl_context(ca_file)
        self.own_creates = own_creates if own_creates is not None else OwnCreates()
        self.preferred = 0

    @property
    def authorization(self) -> Optional[str]:
        """The ``Authorization`` header value (never shown in ``repr``)."""
        return self._auth

    def __repr__(self) -> str:
        token = "(set)" if self._auth else None
        return (
            f"ClientConfig(nodes={self.nodes!r}, token={token}, ca_file={self.ca_file!r}, timeout={self.timeout}, "
            f"deadline={self.deadline}, retries={self.retries}, backoff={self.backoff!r})"
        )
