"""Arguments checked before anything is sent, as the server checks them (``docs/openapi.json``):
a refusal is an :class:`~leaf_client.errors.InvalidRequestError` with the code the server would
answer, raised without a request."""
from __future__ import annotations

import re
from typing import Optional

from .errors import ErrorCode, local_error

_TAG = re.compile(r"[A-Za-z0-9_.:\-]{1,128}\Z")
_KEY = re.compile(r"[ -~]{1,128}\Z")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")

#: Most IDs of a batch answered one per line.
MAX_BATCH = 100_000
#: Most IDs of a batch answered as ranges.
MAX_RANGE_BATCH = 1_000_000
#: Longest reservation hold, in seconds (30 days).
MAX_HOLD_SECONDS = 2_592_000
#: Largest step of a tag.
MAX_STEP = 1_000_000_000


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def tag(value: object, what: str = "tag") -> str:
    """A tag (or snowflake key): 1 to 128 characters of ``[A-Za-z0-9_.:-]``."""
    if not isinstance(value, str) or not _TAG.match(value):
        raise local_error(
            ErrorCode.INVALID_TAG, f"{what} {_short(value)} must be 1 to 128 characters of [A-Za-z0-9_.:-]"
        )
    return value


def count(value: object, most: int) -> int:
    """A batch size from 1 to ``most``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise local_error(ErrorCode.INVALID_COUNT, f"count {_short(value)} must be an integer from 1 to {most:,}")
    return value


def key(value: object) -> str:
    """A gapless idempotency key: 1 to 128 characters of printable ASCII."""
    if not isinstance(value, str) or not _KEY.match(value):
        raise local_error(ErrorCode.INVALID_REQUEST, f"key {_short(value)} must be 1 to 128 printable ASCII characters")
    return value


def reason(value: object) -> str:
    """A void's reason: 1 to 256 characters, no control character, not only spaces."""
    if (
        not isinstance(value, str)
        or not 1 <= len(value) <= 256
        or _CONTROL.search(value)
        or not value.strip(" ")
    ):
        raise local_error(
            ErrorCode.INVALID_REQUEST,
            "reason must be 1 to 256 characters without control characters, not only spaces",
        )
    return value


def hold_seconds(value: Optional[int]) -> Optional[int]:
    """A reservation hold: ``None`` (the server's 900 s) or 1 to 2,592,000 seconds."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_HOLD_SECONDS:
        raise local_error(ErrorCode.INVALID_REQUEST, f"hold_seconds must be from 1 to {MAX_HOLD_SECONDS:,}")
    return value


def step(value: object) -> int:
    """A tag's step: 1 to 1,000,000,000."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_STEP:
        raise local_error(ErrorCode.INVALID_REQUEST, f"step {_short(value)} must be from 1 to {MAX_STEP:,}")
    return value


def snowflake_id(value: object) -> int:
    """A snowflake ID to decode: a non-negative 64-bit integer."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        raise local_error(ErrorCode.INVALID_REQUEST, f"id {_short(value)} must be from 0 to 2^63 - 1")
    return value


_TEMPLATE = re.compile(r"[A-Za-z0-9_.:\-]{1,64}\Z")


def template_name(value: object) -> str:
    """A template's name: 1 to 64 characters of ``[A-Za-z0-9_.:-]``."""
    if not isinstance(value, str) or not _TEMPLATE.match(value):
        raise local_error(
            ErrorCode.INVALID_REQUEST, f"template name {_short(value)} must be 1 to 64 characters of [A-Za-z0-9_.:-]"
        )
    return value
