"""One HTTP attempt against one node over httpx (sync and async), and the classification of
what went wrong: a TLS handshake failure, a connection never opened, or no (complete) answer."""
from __future__ import annotations

import ssl
from typing import Dict, Optional

import httpx

from ._calls import MAX_ANSWER_BYTES, Call, Raw
from ._config import ClientConfig
from ._version import __version__
from .errors import DecodeError, LeafError, RequestTimeoutError, TlsError, TransportError

USER_AGENT = f"leaf-client-python/{__version__}"


def headers(cfg: ClientConfig, call: Call) -> Dict[str, str]:
    """The request headers: the bearer token when set, JSON content type with a body."""
    h = {"user-agent": USER_AGENT}
    if cfg.authorization is not None:
        h["authorization"] = cfg.authorization
    if call.body is not None:
        h["content-type"] = "application/json"
    return h


def _ssl_cause(e: BaseException) -> Optional[ssl.SSLError]:
    seen = set()
    cur: Optional[BaseException] = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, ssl.SSLError):
            return cur
        cur = cur.__cause__ or cur.__context__
    return None


def describe_tls(err: ssl.SSLError) -> str:
    """A TLS failure in plain words."""
    if isinstance(err, ssl.SSLCertVerificationError):
        why = err.verify_message or str(err)
        if "hostname" in why.lower() or "ip address" in why.lower():
            return f"the node's certificate does not name this host ({why})"
        return f"the node's certificate is not trusted ({why}): pass the cluster's CA file (ca_file=)"
    reason = getattr(err, "reason", None) or str(err)
    if reason and "WRONG_VERSION_NUMBER" in str(reason).upper():
        return f"the node did not answer in TLS ({reason}): use http:// for a plaintext node"
    return str(reason)


def classify(node: str, e: httpx.HTTPError, timeout: float) -> LeafError:
    """The client error of an httpx failure of one attempt."""
    tls = _ssl_cause(e)
    if tls is not None and isinstance(e, (httpx.ConnectError, httpx.ConnectTimeout)):
        return TlsError(node, describe_tls(tls))
    if isinstance(e, httpx.ConnectTimeout):
        return RequestTimeoutError(node, timeout, connect=True)
    if isinstance(e, httpx.TimeoutException):
        return RequestTimeoutError(node, timeout)
    if isinstance(e, httpx.ConnectError):
        return TransportError(node, f"cannot connect: {e}", connect=True)
    if isinstance(e, httpx.UnsupportedProtocol):
        return TransportError(node, f"unsupported URL: {e}", connect=True)
    if isinstance(e, httpx.RemoteProtocolError) and node.startswith("http://"):
        return TransportError(node, f"{e} (if the node serves TLS, use https://)", connect=False)
    return TransportError(node, str(e) or type(e).__name__, connect=False)


def _too_large(node: str, status: int) -> DecodeError:
    return DecodeError(node, status, f"more than {MAX_ANSWER_BYTES} bytes")


def send(http: httpx.Client, cfg: ClientConfig, node: str, call: Call, timeout: float) -> Raw:
    """Sends ``call`` to ``node`` and reads the whole (bounded) answer."""
    try:
        with http.stream(call.method, node + call.path, content=call.body, headers=headers(cfg, call), timeout=timeout) as r:
            body = bytearray()
            for chunk in r.iter_bytes():
                body += chunk
                if len(body) > MAX_ANSWER_BYTES:
                    raise _too_large(node, r.status_code)
            return Raw(r.status_code, r.headers, bytes(body))
    except httpx.HTTPError as e:
        raise classify(node, e, timeout) from e


async def send_async(http: httpx.AsyncClient, cfg: ClientConfig, node: str, call: Call, timeout: float) -> Raw:
    """:func:`send` for an ``httpx.AsyncClient``."""
    try:
        async with http.stream(
            call.method, node + call.path, content=call.body, headers=headers(cfg, call), timeout=timeout
        ) as r:
            body = bytearray()
            async for chunk in r.aiter_bytes():
                body += chunk
                if len(body) > MAX_ANSWER_BYTES:
                    raise _too_large(node, r.status_code)
            return Raw(r.status_code, r.headers, bytes(body))
    except httpx.HTTPError as e:
        raise classify(node, e, timeout) from e
