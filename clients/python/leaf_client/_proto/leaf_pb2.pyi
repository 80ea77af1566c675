from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class NumberState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NUMBER_STATE_ISSUED: _ClassVar[NumberState]
    NUMBER_STATE_RESERVED: _ClassVar[NumberState]
    NUMBER_STATE_CONFIRMED: _ClassVar[NumberState]
    NUMBER_STATE_VOIDED: _ClassVar[NumberState]

class Profile(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROFILE_SEGMENT: _ClassVar[Profile]
    PROFILE_MONOTONIC: _ClassVar[Profile]
    PROFILE_OBFUSCATED: _ClassVar[Profile]
    PROFILE_DAILY: _ClassVar[Profile]
    PROFILE_GAPLESS: _ClassVar[Profile]
NUMBER_STATE_ISSUED: NumberState
NUMBER_STATE_RESERVED: NumberState
NUMBER_STATE_CONFIRMED: NumberState
NUMBER_STATE_VOIDED: NumberState
PROFILE_SEGMENT: Profile
PROFILE_MONOTONIC: Profile
PROFILE_OBFUSCATED: Profile
PROFILE_DAILY: Profile
PROFILE_GAPLESS: Profile

class IssueNumberRequest(_message.Message):
    __slots__ = ("tag", "key", "secret")
    TAG_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    tag: str
    key: str
    secret: str
    def __init__(self, tag: _Optional[str] = ..., key: _Optional[str] = ..., secret: _Optional[str] = ...) -> None: ...

class ReserveNumberRequest(_message.Message):
    __slots__ = ("tag", "key", "hold_seconds", "secret")
    TAG_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    HOLD_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    tag: str
    key: str
    hold_seconds: int
    secret: str
    def __init__(self, tag: _Optional[str] = ..., key: _Optional[str] = ..., hold_seconds: _Optional[int] = ..., secret: _Optional[str] = ...) -> None: ...

class VoidNumberRequest(_message.Message):
    __slots__ = ("tag", "key", "reason", "secret")
    TAG_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    tag: str
    key: str
    reason: str
    secret: str
    def __init__(self, tag: _Optional[str] = ..., key: _Optional[str] = ..., reason: _Optional[str] = ..., secret: _Optional[str] = ...) -> None: ...

class IssuedNumber(_message.Message):
    __slots__ = ("tag", "period", "number", "display", "key", "state", "issued_ms", "replayed", "deadline_ms", "reason", "secret")
    TAG_FIELD_NUMBER: _ClassVar[int]
    PERIOD_FIELD_NUMBER: _ClassVar[int]
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ISSUED_MS_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    tag: str
    period: int
    number: int
    display: str
    key: str
    state: NumberState
    issued_ms: int
    replayed: bool
    deadline_ms: int
    reason: str
    secret: str
    def __init__(self, tag: _Optional[str] = ..., period: _Optional[int] = ..., number: _Optional[int] = ..., display: _Optional[str] = ..., key: _Optional[str] = ..., state: _Optional[_Union[NumberState, str]] = ..., issued_ms: _Optional[int] = ..., replayed: _Optional[bool] = ..., deadline_ms: _Optional[int] = ..., reason: _Optional[str] = ..., secret: _Optional[str] = ...) -> None: ...

class IdList(_message.Message):
    __slots__ = ("ids",)
    IDS_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, ids: _Optional[_Iterable[int]] = ...) -> None: ...

class DailyOptions(_message.Message):
    __slots__ = ("digits", "utc_offset")
    DIGITS_FIELD_NUMBER: _ClassVar[int]
    UTC_OFFSET_FIELD_NUMBER: _ClassVar[int]
    digits: int
    utc_offset: str
    def __init__(self, digits: _Optional[int] = ..., utc_offset: _Optional[str] = ...) -> None: ...

class CreateTagRequest(_message.Message):
    __slots__ = ("tag", "step", "max_id", "description", "profile", "daily", "upper_bound")
    TAG_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    MAX_ID_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    DAILY_FIELD_NUMBER: _ClassVar[int]
    UPPER_BOUND_FIELD_NUMBER: _ClassVar[int]
    tag: str
    step: int
    max_id: int
    description: str
    profile: Profile
    daily: DailyOptions
    upper_bound: int
    def __init__(self, tag: _Optional[str] = ..., step: _Optional[int] = ..., max_id: _Optional[int] = ..., description: _Optional[str] = ..., profile: _Optional[_Union[Profile, str]] = ..., daily: _Optional[_Union[DailyOptions, _Mapping]] = ..., upper_bound: _Optional[int] = ...) -> None: ...

class CreateTagsRequest(_message.Message):
    __slots__ = ("tags",)
    TAGS_FIELD_NUMBER: _ClassVar[int]
    tags: _containers.RepeatedCompositeFieldContainer[CreateTagRequest]
    def __init__(self, tags: _Optional[_Iterable[_Union[CreateTagRequest, _Mapping]]] = ...) -> None: ...

class CreateTagsResponse(_message.Message):
    __slots__ = ("created", "existing")
    CREATED_FIELD_NUMBER: _ClassVar[int]
    EXISTING_FIELD_NUMBER: _ClassVar[int]
    created: _containers.RepeatedScalarFieldContainer[str]
    existing: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, created: _Optional[_Iterable[str]] = ..., existing: _Optional[_Iterable[str]] = ...) -> None: ...

class GetTagRequest(_message.Message):
    __slots__ = ("tag",)
    TAG_FIELD_NUMBER: _ClassVar[int]
    tag: str
    def __init__(self, tag: _Optional[str] = ...) -> None: ...

class Tag(_message.Message):
    __slots__ = ("tag", "max_id", "step", "description", "created_ms", "updated_ms", "profile", "daily", "day", "upper_bound", "archived_ms")
    TAG_FIELD_NUMBER: _ClassVar[int]
    MAX_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CREATED_MS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_MS_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    DAILY_FIELD_NUMBER: _ClassVar[int]
    DAY_FIELD_NUMBER: _ClassVar[int]
    UPPER_BOUND_FIELD_NUMBER: _ClassVar[int]
    ARCHIVED_MS_FIELD_NUMBER: _ClassVar[int]
    tag: str
    max_id: int
    step: int
    description: str
    created_ms: int
    updated_ms: int
    profile: Profile
    daily: DailyOptions
    day: int
    upper_bound: int
    archived_ms: int
    def __init__(self, tag: _Optional[str] = ..., max_id: _Optional[int] = ..., step: _Optional[int] = ..., description: _Optional[str] = ..., created_ms: _Optional[int] = ..., updated_ms: _Optional[int] = ..., profile: _Optional[_Union[Profile, str]] = ..., daily: _Optional[_Union[DailyOptions, _Mapping]] = ..., day: _Optional[int] = ..., upper_bound: _Optional[int] = ..., archived_ms: _Optional[int] = ...) -> None: ...

class GetSegmentIdsRequest(_message.Message):
    __slots__ = ("tag", "count")
    TAG_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    tag: str
    count: int
    def __init__(self, tag: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class GetSnowflakeIdsRequest(_message.Message):
    __slots__ = ("key", "count")
    KEY_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    key: str
    count: int
    def __init__(self, key: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class IdRange(_message.Message):
    __slots__ = ("start", "end")
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    start: int
    end: int
    def __init__(self, start: _Optional[int] = ..., end: _Optional[int] = ...) -> None: ...

class IdRanges(_message.Message):
    __slots__ = ("ranges",)
    RANGES_FIELD_NUMBER: _ClassVar[int]
    ranges: _containers.RepeatedCompositeFieldContainer[IdRange]
    def __init__(self, ranges: _Optional[_Iterable[_Union[IdRange, _Mapping]]] = ...) -> None: ...

class DecodeSnowflakeRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    def __init__(self, id: _Optional[int] = ...) -> None: ...

class SnowflakeParts(_message.Message):
    __slots__ = ("id", "timestamp_ms", "timestamp", "worker_id", "sequence")
    ID_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    id: int
    timestamp_ms: int
    timestamp: str
    worker_id: int
    sequence: int
    def __init__(self, id: _Optional[int] = ..., timestamp_ms: _Optional[int] = ..., timestamp: _Optional[str] = ..., worker_id: _Optional[int] = ..., sequence: _Optional[int] = ...) -> None: ...

class ListTemplatesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TemplateList(_message.Message):
    __slots__ = ("templates",)
    TEMPLATES_FIELD_NUMBER: _ClassVar[int]
    templates: _containers.RepeatedCompositeFieldContainer[Template]
    def __init__(self, templates: _Optional[_Iterable[_Union[Template, _Mapping]]] = ...) -> None: ...

class PutTemplateRequest(_message.Message):
    __slots__ = ("name", "pattern", "step", "max_id", "description", "profile", "daily", "upper_bound")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    MAX_ID_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    DAILY_FIELD_NUMBER: _ClassVar[int]
    UPPER_BOUND_FIELD_NUMBER: _ClassVar[int]
    name: str
    pattern: str
    step: int
    max_id: int
    description: str
    profile: Profile
    daily: DailyOptions
    upper_bound: int
    def __init__(self, name: _Optional[str] = ..., pattern: _Optional[str] = ..., step: _Optional[int] = ..., max_id: _Optional[int] = ..., description: _Optional[str] = ..., profile: _Optional[_Union[Profile, str]] = ..., daily: _Optional[_Union[DailyOptions, _Mapping]] = ..., upper_bound: _Optional[int] = ...) -> None: ...

class DeleteTemplateRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class Template(_message.Message):
    __slots__ = ("name", "pattern", "step", "max_id", "description", "profile", "daily", "upper_bound", "created_ms", "updated_ms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    MAX_ID_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    DAILY_FIELD_NUMBER: _ClassVar[int]
    UPPER_BOUND_FIELD_NUMBER: _ClassVar[int]
    CREATED_MS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_MS_FIELD_NUMBER: _ClassVar[int]
    name: str
    pattern: str
    step: int
    max_id: int
    description: str
    profile: Profile
    daily: DailyOptions
    upper_bound: int
    created_ms: int
    updated_ms: int
    def __init__(self, name: _Optional[str] = ..., pattern: _Optional[str] = ..., step: _Optional[int] = ..., max_id: _Optional[int] = ..., description: _Optional[str] = ..., profile: _Optional[_Union[Profile, str]] = ..., daily: _Optional[_Union[DailyOptions, _Mapping]] = ..., upper_bound: _Optional[int] = ..., created_ms: _Optional[int] = ..., updated_ms: _Optional[int] = ...) -> None: ...
