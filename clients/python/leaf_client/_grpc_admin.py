"""The admin calls of :class:`~leaf_client.grpc.GrpcClient` (``leaf.v1.AdminService``): tags
(create one or many, get, archive, restore) and tag templates (list, put, delete), with the
HTTP client's typed results (:class:`~leaf_client.TagInfo`, :class:`~leaf_client.TemplateInfo`,
:class:`~leaf_client.CreatedTags`), retry safety and typed errors.

Every call needs the admin credentials of the HTTP ``/admin`` routes: the client's ``token``
(sent as ``authorization`` metadata, never shown) or, on a node without a token, a loopback
connection. A refusal is :class:`~leaf_client.errors.UnauthorizedError` /
:class:`~leaf_client.errors.ForbiddenError`, as over HTTP.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Tuple

from . import _validate as v
from ._proto import leaf_pb2 as pb
from ._retry import Safety
from .errors import ErrorCode, local_error
from .types import CreatedTags, TagInfo, TemplateInfo

#: The AdminService RPCs this client calls: every one of the proto's (the contract test checks).
GRPC_ADMIN_METHODS = (
    "CreateTag",
    "GetTag",
    "ArchiveTag",
    "RestoreTag",
    "CreateTags",
    "ListTemplates",
    "PutTemplate",
    "DeleteTemplate",
)

#: Most tags of one batch create.
MAX_BATCH_TAGS = 10_000

_PROFILES = {
    "segment": pb.PROFILE_SEGMENT,
    "monotonic": pb.PROFILE_MONOTONIC,
    "obfuscated": pb.PROFILE_OBFUSCATED,
    "daily": pb.PROFILE_DAILY,
    "gapless": pb.PROFILE_GAPLESS,
}
_PROFILE_NAMES = {number: name for name, number in _PROFILES.items()}


def _profile(value: Optional[str]) -> int:
    if value is None:
        return pb.PROFILE_SEGMENT
    try:
        return _PROFILES[value]
    except (KeyError, TypeError):
        raise local_error(ErrorCode.INVALID_REQUEST, f"profile {value!r} must be one of {', '.join(_PROFILES)}") from None


def _daily_options(daily: Optional[Mapping[str, Any]]) -> Optional[Any]:
    if daily is None:
        return None
    unknown = set(daily) - {"digits", "utc_offset"}
    if unknown:
        raise local_error(ErrorCode.INVALID_REQUEST, f"daily options have no {sorted(unknown)}")
    return pb.DailyOptions(digits=daily.get("digits") or 0, utc_offset=daily.get("utc_offset") or "")


def _daily_dict(msg: Any) -> Dict[str, Any]:
    return {"digits": msg.daily.digits or None, "utc_offset": msg.daily.utc_offset or None}


def _optional(msg: Any, name: str) -> Any:
    return getattr(msg, name) if msg.HasField(name) else None


def tag_request(
    tag: str,
    step: int,
    *,
    max_id: Optional[int] = None,
    description: Optional[str] = None,
    profile: Optional[str] = None,
    daily: Optional[Mapping[str, Any]] = None,
    upper_bound: Optional[int] = None,
) -> Any:
    """A checked ``CreateTagRequest`` (the settings of ``LeafClient.create_tag`` but
    ``gapless``: a gapless tag made over gRPC has the defaults)."""
    v.tag(tag)
    v.step(step)
    req = pb.CreateTagRequest(tag=tag, step=step, description=description or "", profile=_profile(profile))
    if max_id is not None:
        req.max_id = max_id
    if upper_bound is not None:
        req.upper_bound = upper_bound
    options = _daily_options(daily)
    if options is not None:
        req.daily.CopyFrom(options)
    return req


def tag_info(_node: str, msg: Any) -> TagInfo:
    """A ``Tag`` message as :class:`TagInfo`; ``raw`` holds the fields as the HTTP API names
    them (``daily`` and ``day`` included when set)."""
    raw: Dict[str, Any] = {
        "tag": msg.tag,
        "max_id": msg.max_id,
        "step": msg.step,
        "description": msg.description,
        "created_ms": msg.created_ms,
        "updated_ms": msg.updated_ms,
        "profile": _PROFILE_NAMES.get(msg.profile, "unknown"),
    }
    for name in ("day", "upper_bound", "archived_ms"):
        if msg.HasField(name):
            raw[name] = getattr(msg, name)
    if msg.HasField("daily"):
        raw["daily"] = _daily_dict(msg)
    return TagInfo.from_json(raw)


def template_info(_node: str, msg: Any) -> TemplateInfo:
    """A ``Template`` message as :class:`TemplateInfo`."""
    return TemplateInfo(
        name=msg.name,
        pattern=msg.pattern,
        step=msg.step,
        description=msg.description,
        profile=_PROFILE_NAMES.get(msg.profile, "unknown"),
        created_ms=msg.created_ms,
        updated_ms=msg.updated_ms,
        max_id=_optional(msg, "max_id"),
        upper_bound=_optional(msg, "upper_bound"),
        daily=_daily_dict(msg) if msg.HasField("daily") else None,
    )


class AdminCalls:
    """The ``AdminService`` methods of :class:`~leaf_client.grpc.GrpcClient` (a mixin: it runs
    them through the client's ``_run`` with the admin stub)."""

    _cfg: Any
    _run: Callable[..., Any]  # GrpcClient._run

    def create_tag(
        self,
        tag: str,
        step: int,
        *,
        max_id: Optional[int] = None,
        description: Optional[str] = None,
        profile: Optional[str] = None,
        daily: Optional[Mapping[str, Any]] = None,
        upper_bound: Optional[int] = None,
    ) -> TagInfo:
        """Creates ``tag`` (``CreateTag``): ``profile`` ``segment`` (default), ``monotonic``,
        ``obfuscated``, ``daily`` (``daily={"digits": 8, "utc_offset": "+08:00"}``) or
        ``gapless`` (with its defaults). At most once: retried only when the connection could
        not be opened. ``ConflictError`` (``tag_exists``) if it exists."""
        req = tag_request(
            tag, step, max_id=max_id, description=description, profile=profile, daily=daily, upper_bound=upper_bound
        )
        info = self._run("CreateTag", req, tag_info, admin=True, safety=Safety.AT_MOST_ONCE)
        self._cfg.own_creates.created([info.tag])
        return info

    def create_tags(self, tags: Iterable[Mapping[str, Any]]) -> CreatedTags:
        """Creates many tags (``CreateTags``, 1 to 10,000), each a mapping of ``create_tag``'s
        arguments (``{"tag": "orders", "step": 1000, "profile": "monotonic"}``). Tags that exist
        are reported in ``existing`` and left as they are, so the call is retried safely."""
        specs = list(tags)
        if not 1 <= len(specs) <= MAX_BATCH_TAGS:
            raise local_error(ErrorCode.INVALID_REQUEST, f"a batch holds 1 to {MAX_BATCH_TAGS:,} tags, got {len(specs)}")
        reqs = []
        for spec in specs:
            fields = dict(spec)
            try:
                reqs.append(tag_request(fields.pop("tag"), fields.pop("step"), **fields))
            except (KeyError, TypeError) as e:
                raise local_error(ErrorCode.INVALID_REQUEST, f"a tag of the batch: {e!r}") from None

        def parse(_node: str, msg: Any) -> CreatedTags:
            return CreatedTags(tuple(msg.created), tuple(msg.existing))

        done = self._run("CreateTags", pb.CreateTagsRequest(tags=reqs), parse, admin=True)
        self._cfg.own_creates.created(done.created)
        return done

    def get_tag(self, tag: str) -> TagInfo:
        """The tag as stored (``GetTag``); ``NotFoundError`` (``tag_not_found``) if none."""
        v.tag(tag)
        return self._run("GetTag", pb.GetTagRequest(tag=tag), tag_info, tag, admin=True)

    def archive_tag(self, tag: str) -> TagInfo:
        """Archives ``tag`` (``ArchiveTag``, idempotent): no ID is handed out for it again, its
        name is never reused; :meth:`restore_tag` brings it back."""
        v.tag(tag)
        info = self._run("ArchiveTag", pb.GetTagRequest(tag=tag), tag_info, tag, admin=True)
        self._cfg.own_creates.forget(tag)
        return info

    def restore_tag(self, tag: str) -> TagInfo:
        """Brings an archived tag back, its counter where it stopped (``RestoreTag``,
        idempotent: a tag that is not archived is answered as it is)."""
        v.tag(tag)
        return self._run("RestoreTag", pb.GetTagRequest(tag=tag), tag_info, tag, admin=True)

    def templates(self) -> Tuple[TemplateInfo, ...]:
        """Every tag template, by name (``ListTemplates``; the admin token only)."""

        def parse(node: str, msg: Any) -> Tuple[TemplateInfo, ...]:
            return tuple(template_info(node, t) for t in msg.templates)

        return self._run("ListTemplates", pb.ListTemplatesRequest(), parse, admin=True)

    def put_template(
        self,
        name: str,
        pattern: str,
        step: int,
        *,
        max_id: Optional[int] = None,
        description: Optional[str] = None,
        profile: Optional[str] = None,
        daily: Optional[Mapping[str, Any]] = None,
        upper_bound: Optional[int] = None,
    ) -> TemplateInfo:
        """Creates template ``name`` or replaces its pattern and settings (``PutTemplate``,
        idempotent). ``pattern`` is a tag name with one ``*`` (``"tenant-*-invoice"``); the
        settings are ``create_tag``'s. ``ConflictError`` (``template_conflict``) if the pattern
        overlaps another template's."""
        v.template_name(name)
        if not isinstance(pattern, str) or not pattern:
            raise local_error(ErrorCode.INVALID_REQUEST, "pattern must be a tag name with one '*'")
        v.step(step)
        req = pb.PutTemplateRequest(
            name=name, pattern=pattern, step=step, description=description or "", profile=_profile(profile)
        )
        if max_id is not None:
            req.max_id = max_id
        if upper_bound is not None:
            req.upper_bound = upper_bound
        options = _daily_options(daily)
        if options is not None:
            req.daily.CopyFrom(options)
        return self._run("PutTemplate", req, template_info, admin=True)

    def delete_template(self, name: str) -> TemplateInfo:
        """Deletes template ``name`` and answers it as it was (``DeleteTemplate``); the tags it
        made stay. At most once (a repeat would answer ``template_not_found``).
        ``NotFoundError`` (``template_not_found``) if there is none of that name."""
        v.template_name(name)
        req = pb.DeleteTemplateRequest(name=name)
        return self._run("DeleteTemplate", req, template_info, admin=True, safety=Safety.AT_MOST_ONCE)
