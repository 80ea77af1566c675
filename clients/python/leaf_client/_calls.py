"""Every HTTP operation of the client as data: the request to send (:class:`Call`) and how to
turn the answer into a value (:class:`Op`). The sync and async clients run the same
:class:`Op` objects; only sending differs."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple
from urllib.parse import quote

from . import _validate as v
from ._config import ClientConfig
from ._retry import Safety
from .errors import DecodeError, LeafError, api_error
from .types import Health, IdRanges, IssuedNumber, NumberState, SnowflakeId, TagInfo

#: Largest answer read (a batch of 100,000 IDs is about 2 MB).
MAX_ANSWER_BYTES = 16 << 20


@dataclass(frozen=True)
class Route:
    """One endpoint: method and path template as in ``docs/openapi.json``."""

    method: str
    template: str

    def path(self, *segments: str) -> str:
        """The template with its ``{...}`` parameters replaced, in order, URL-encoded."""
        out = self.template
        for seg in segments:
            start = out.index("{")
            out = out[:start] + quote(seg, safe="") + out[out.index("}", start) + 1 :]
        return out


SEGMENT_GET = Route("GET", "/api/segment/get/{tag}")
SNOWFLAKE_GET = Route("GET", "/api/snowflake/get/{key}")
SNOWFLAKE_DECODE = Route("GET", "/api/snowflake/decode/{id}")
HEALTH = Route("GET", "/health")
TAGS_CREATE = Route("POST", "/admin/tags")
TAG_GET = Route("GET", "/admin/tags/{tag}")
TAG_ARCHIVE = Route("POST", "/admin/tags/{tag}/archive")
GAPLESS_ISSUE = Route("POST", "/api/gapless/{tag}/issue")
GAPLESS_RESERVE = Route("POST", "/api/gapless/{tag}/reserve")
GAPLESS_CONFIRM = Route("POST", "/api/gapless/{tag}/confirm")
GAPLESS_VOID = Route("POST", "/api/gapless/{tag}/void")

#: Every endpoint the HTTP clients call (the contract test checks each is in openapi.json).
ROUTES: Tuple[Route, ...] = (
    SEGMENT_GET,
    SNOWFLAKE_GET,
    SNOWFLAKE_DECODE,
    HEALTH,
    TAGS_CREATE,
    TAG_GET,
    TAG_ARCHIVE,
    GAPLESS_ISSUE,
    GAPLESS_RESERVE,
    GAPLESS_CONFIRM,
    GAPLESS_VOID,
)


@dataclass(frozen=True)
class Call:
    """One request before it is sent. ``also_ok``: a non-2xx status whose body is the answer
    (``/health`` answers 503 with its report). ``tag``: the tag the call is about, so a
    ``tag_not_found`` just after this client created it is retried."""

    method: str
    path: str
    safety: Safety = Safety.IDEMPOTENT
    body: Optional[bytes] = None
    also_ok: Optional[int] = None
    tag: Optional[str] = None


@dataclass(frozen=True)
class Raw:
    """One answer of any status."""

    status: int
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True)
class Answer:
    """A successful answer and which node gave it."""

    node: str
    status: int
    body: bytes

    def text(self) -> str:
        try:
            return self.body.decode("utf-8")
        except UnicodeDecodeError:
            raise self.error("not UTF-8") from None

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except (ValueError, RecursionError) as e:  # RecursionError: nested past the parser's depth
            raise self.error(f"not JSON: {e}") from None

    def error(self, message: str) -> DecodeError:
        return DecodeError(self.node, self.status, message)


@dataclass(frozen=True)
class Op:
    """A call, how to read its answer, and what the client remembers after it succeeded."""

    call: Call
    parse: Callable[[Answer], Any]
    after: Optional[Callable[[ClientConfig, Any], None]] = field(default=None)

    def finish(self, answer: Answer, cfg: ClientConfig) -> Any:
        try:
            value = self.parse(answer)
        except (KeyError, TypeError, ValueError) as e:  # a field missing or of the wrong type
            raise answer.error(f"unexpected fields: {e!r}") from None
        if self.after is not None:
            self.after(cfg, value)
        return value


def check(node: str, raw: Raw, also_ok: Optional[int]) -> Answer:
    """A 2xx (or ``also_ok``) answer, or raises the error its body describes."""
    if 200 <= raw.status < 300 or raw.status == also_ok:
        return Answer(node, raw.status, raw.body)
    raise error_of(node, raw)


def error_of(node: str, raw: Raw) -> LeafError:
    """The typed error of a non-2xx answer."""
    try:
        body = json.loads(raw.body)
        code, message = body["code"], body["message"]
        if not isinstance(code, str) or not isinstance(message, str):
            raise TypeError
    except (ValueError, KeyError, TypeError, RecursionError):
        snippet = raw.body[:200].decode("utf-8", "replace")
        return DecodeError(node, raw.status, f"not an error body: {snippet!r}")
    leaf_code = body.get("leaf_code")
    return api_error(
        raw.status,
        code,
        message,
        leaf_code=leaf_code if isinstance(leaf_code, int) else None,
        retry_after=_retry_after(raw.headers.get("retry-after")),
        node=node,
    )


def _retry_after(value: Optional[str]) -> Optional[float]:
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    # "inf", "nan" and negative waits mean nothing a caller could act on.
    return seconds if seconds is not None and math.isfinite(seconds) and seconds >= 0 else None


# ---- answers ---------------------------------------------------------------------------------


def _parse_id(text: str) -> Optional[int]:
    t = text.strip()
    if not t.isdigit():
        return None
    n = int(t)
    return n if n < 2**63 else None


def one_id(answer: Answer) -> int:
    """The body as exactly one decimal ID."""
    text = answer.text()
    n = _parse_id(text)
    if n is None:
        raise answer.error(f"not an ID: {text[:40]!r}")
    return n


def ids(count: int) -> Callable[[Answer], List[int]]:
    """The body as exactly ``count`` decimal IDs, one per line."""

    def parse(answer: Answer) -> List[int]:
        lines = answer.text().splitlines()
        if len(lines) != count:
            raise answer.error(f"{len(lines)} IDs, asked for {count}")
        out = []
        for line in lines:
            n = _parse_id(line)
            if n is None:
                raise answer.error(f"not an ID: {line[:40]!r}")
            out.append(n)
        return out

    return parse


def ranges(count: int) -> Callable[[Answer], IdRanges]:
    """The body as well-formed ranges holding exactly ``count`` IDs."""

    def parse(answer: Answer) -> IdRanges:
        body = answer.json()
        got = IdRanges.from_pairs([(r["start"], r["end"]) for r in body["ranges"]])
        problem = got.check(count)
        if problem:
            raise answer.error(problem)
        return got

    return parse


def _number(tag: str, key: str, states: Optional[Tuple[NumberState, ...]]) -> Callable[[Answer], IssuedNumber]:
    """A gapless answer, checked: this tag and key, numbered from 1, in one of ``states``."""

    def parse(answer: Answer) -> IssuedNumber:
        n = IssuedNumber.from_json(answer.json())
        if n.tag != tag or n.key != key or n.number == 0:
            raise answer.error(
                f"asked for tag {tag!r} key {key!r}, answered number {n.number} of tag {n.tag!r} key {n.key!r}"
            )
        if states is not None and n.state not in states:
            raise answer.error(f"number {n.number} of key {key!r} answered as {n.state}")
        return n

    return parse


# ---- operations ------------------------------------------------------------------------------


def segment_id(tag: str) -> Op:
    v.tag(tag)
    return Op(Call("GET", SEGMENT_GET.path(tag), tag=tag), one_id)


def segment_ids(tag: str, count: int) -> Op:
    v.tag(tag)
    v.count(count, v.MAX_BATCH)
    return Op(Call("GET", f"{SEGMENT_GET.path(tag)}?count={count}", tag=tag), ids(count))


def segment_ranges(tag: str, count: int) -> Op:
    v.tag(tag)
    v.count(count, v.MAX_RANGE_BATCH)
    return Op(Call("GET", f"{SEGMENT_GET.path(tag)}?count={count}&format=ranges", tag=tag), ranges(count))


def snowflake_id(key: str) -> Op:
    v.tag(key, "snowflake key")
    return Op(Call("GET", SNOWFLAKE_GET.path(key)), one_id)


def snowflake_ids(key: str, count: int) -> Op:
    v.tag(key, "snowflake key")
    v.count(count, v.MAX_BATCH)
    return Op(Call("GET", f"{SNOWFLAKE_GET.path(key)}?count={count}"), ids(count))


def snowflake_ranges(key: str, count: int) -> Op:
    v.tag(key, "snowflake key")
    v.count(count, v.MAX_RANGE_BATCH)
    return Op(Call("GET", f"{SNOWFLAKE_GET.path(key)}?count={count}&format=ranges"), ranges(count))


def decode(snowflake_id: int) -> Op:
    v.snowflake_id(snowflake_id)
    return Op(Call("GET", SNOWFLAKE_DECODE.path(str(snowflake_id))), lambda a: SnowflakeId.from_json(a.json()))


def health(mode: Optional[str] = None) -> Op:
    if mode not in (None, "segment", "snowflake"):
        raise ValueError("mode must be None, 'segment' or 'snowflake'")
    path = HEALTH.path() + (f"?mode={mode}" if mode else "")
    return Op(Call("GET", path, also_ok=503), lambda a: Health.from_json(a.json()))


def _json(body: Dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def create_tag(tag: str, step: int, **fields: Any) -> Op:
    """``POST /admin/tags``: at most once (see ``_retry``); remembered for reading one's own
    creates. ``fields``: ``max_id``, ``description``, ``profile``, ``gapless``, ``daily``,
    ``upper_bound`` (``None`` values are left out)."""
    v.tag(tag)
    v.step(step)
    body: Dict[str, Any] = {"tag": tag, "step": step}
    body.update({k: val for k, val in fields.items() if val is not None})
    call = Call("POST", TAGS_CREATE.path(), Safety.AT_MOST_ONCE, _json(body))
    return Op(call, lambda a: TagInfo.from_json(a.json()), lambda cfg, info: cfg.own_creates.created([info.tag]))


def get_tag(tag: str) -> Op:
    v.tag(tag)
    return Op(Call("GET", TAG_GET.path(tag), tag=tag), lambda a: TagInfo.from_json(a.json()))


def archive_tag(tag: str) -> Op:
    v.tag(tag)
    call = Call("POST", TAG_ARCHIVE.path(tag), tag=tag)
    return Op(call, lambda a: TagInfo.from_json(a.json()), lambda cfg, _info: cfg.own_creates.forget(tag))


def issue_number(tag: str, key: str) -> Op:
    v.tag(tag)
    v.key(key)
    call = Call("POST", GAPLESS_ISSUE.path(tag), body=_json({"key": key}), tag=tag)
    return Op(call, _number(tag, key, None))


def reserve_number(tag: str, key: str, hold_seconds: Optional[int] = None) -> Op:
    v.tag(tag)
    v.key(key)
    body: Dict[str, Any] = {"key": key}
    if v.hold_seconds(hold_seconds) is not None:
        body["hold_seconds"] = hold_seconds
    call = Call("POST", GAPLESS_RESERVE.path(tag), body=_json(body), tag=tag)
    return Op(call, _number(tag, key, None))


def confirm_number(tag: str, key: str) -> Op:
    v.tag(tag)
    v.key(key)
    call = Call("POST", GAPLESS_CONFIRM.path(tag), body=_json({"key": key}), tag=tag)
    return Op(call, _number(tag, key, (NumberState.CONFIRMED, NumberState.ISSUED)))


def void_number(tag: str, key: str, reason: str) -> Op:
    v.tag(tag)
    v.key(key)
    v.reason(reason)
    call = Call("POST", GAPLESS_VOID.path(tag), body=_json({"key": key, "reason": reason}), tag=tag)
    return Op(call, _number(tag, key, (NumberState.VOIDED,)))
