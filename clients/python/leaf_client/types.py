"""What the service answers, as frozen dataclasses. Each ``from_json`` ignores fields it does
not know (a newer server's) and keeps the whole answer in ``raw`` where useful."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, Optional, Sequence, Tuple


@dataclass(frozen=True)
class IdRange:
    """The IDs ``start, start + 1, ..., end - 1`` (``end`` exclusive)."""

    start: int
    end: int

    def __len__(self) -> int:
        return self.end - self.start

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.start, self.end))


@dataclass(frozen=True)
class IdRanges:
    """A batch of IDs as ascending, non-overlapping, non-empty ranges, in the order the node
    handed them out. ``len()`` is the number of IDs; iterating yields every ID."""

    ranges: Tuple[IdRange, ...]

    def __len__(self) -> int:
        return sum(len(r) for r in self.ranges)

    def __iter__(self) -> Iterator[int]:
        for r in self.ranges:
            yield from range(r.start, r.end)

    def check(self, count: int) -> Optional[str]:
        """What is wrong with these ranges as an answer for ``count`` IDs (``None``: nothing):
        each non-empty and non-negative, ascending, not overlapping, ``count`` IDs in all."""
        prev_end = None
        total = 0
        for r in self.ranges:
            if r.start < 0 or r.end <= r.start or r.end > 2**63 - 1:
                return f"a malformed range [{r.start}, {r.end})"
            if prev_end is not None and r.start < prev_end:
                return f"range [{r.start}, {r.end}) overlaps or precedes the one before it"
            prev_end = r.end
            total += r.end - r.start
        if total != count:
            return f"{total} IDs in the ranges, asked for {count}"
        return None

    @classmethod
    def from_pairs(cls, pairs: Sequence[Tuple[int, int]]) -> "IdRanges":
        return cls(tuple(IdRange(int(s), int(e)) for s, e in pairs))


@dataclass(frozen=True)
class SnowflakeId:
    """A decoded snowflake ID: its logical time, the worker that made it and its sequence."""

    id: int
    timestamp_ms: int
    timestamp: str
    worker_id: int
    sequence: int

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "SnowflakeId":
        return cls(
            id=int(d["id"]),
            timestamp_ms=int(d["timestamp_ms"]),
            timestamp=str(d["timestamp"]),
            worker_id=int(d["worker_id"]),
            sequence=int(d["sequence"]),
        )


@dataclass(frozen=True)
class Health:
    """A node's ``/health``: whether it is ready (segment and snowflake), who it thinks leads.
    ``snowflake`` is the snowflake section as answered (state, worker ID, ...)."""

    ready: bool
    node_id: int
    term: int
    segment_ready: Optional[bool] = None
    leader_id: Optional[int] = None
    last_applied_index: Optional[int] = None
    quorum_ack_age_ms: Optional[int] = None
    reason: Optional[str] = None
    snowflake: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Health":
        return cls(
            ready=bool(d["ready"]),
            node_id=int(d["node_id"]),
            term=int(d["term"]),
            segment_ready=d.get("segment_ready"),
            leader_id=d.get("leader_id"),
            last_applied_index=d.get("last_applied_index"),
            quorum_ack_age_ms=d.get("quorum_ack_age_ms"),
            reason=d.get("reason"),
            snowflake=dict(d.get("snowflake") or {}),
        )


@dataclass(frozen=True)
class TagInfo:
    """A tag as stored (``GET /admin/tags/{tag}``). ``max_id`` is the next unallocated ID;
    ``raw`` holds every field answered (profile options, archive time, ...)."""

    tag: str
    max_id: int
    step: int
    description: str
    created_ms: int
    updated_ms: int
    profile: Optional[str] = None
    upper_bound: Optional[int] = None
    archived_ms: Optional[int] = None
    raw: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "TagInfo":
        return cls(
            tag=str(d["tag"]),
            max_id=int(d["max_id"]),
            step=int(d["step"]),
            description=str(d.get("description") or ""),
            created_ms=int(d["created_ms"]),
            updated_ms=int(d["updated_ms"]),
            profile=d.get("profile"),
            upper_bound=d.get("upper_bound"),
            archived_ms=d.get("archived_ms"),
            raw=dict(d),
        )


class NumberState(str, enum.Enum):
    """A gapless number's state in the ledger."""

    ISSUED = "issued"
    RESERVED = "reserved"
    CONFIRMED = "confirmed"
    VOIDED = "voided"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class IssuedNumber:
    """A number of a gapless series, as an issue, reserve, confirm or void answers it.
    ``replayed`` is true when the request repeated an earlier one of the same key (nothing
    changed)."""

    tag: str
    period: int
    number: int
    key: str
    state: NumberState
    issued_ms: int
    replayed: bool
    display: Optional[str] = None
    deadline_ms: Optional[int] = None
    reason: Optional[str] = None

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "IssuedNumber":
        return cls(
            tag=str(d["tag"]),
            period=int(d["period"]),
            number=int(d["number"]),
            key=str(d["key"]),
            state=NumberState(d["state"]),
            issued_ms=int(d["issued_ms"]),
            replayed=bool(d["replayed"]),
            display=d.get("display"),
            deadline_ms=d.get("deadline_ms"),
            reason=d.get("reason"),
        )


@dataclass(frozen=True)
class TemplateInfo:
    """A tag template as the cluster holds it: tags that match ``pattern`` (one ``*``) are
    created with these settings on their first ID request. ``daily`` is a daily template's
    options (``{"digits", "utc_offset"}``), ``None`` for the other profiles."""

    name: str
    pattern: str
    step: int
    description: str
    profile: str
    created_ms: int
    updated_ms: int
    max_id: Optional[int] = None
    upper_bound: Optional[int] = None
    daily: Optional[Dict[str, Any]] = None


@dataclass(frozen=True)
class CreatedTags:
    """What a batch create did: the tags it created and those that existed already (left as
    they were), each in the request's order."""

    created: Tuple[str, ...]
    existing: Tuple[str, ...]
