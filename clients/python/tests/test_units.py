"""Pure unit tests (no server): retry rules, backoff, failover decisions, argument checks, URL
checks, own creates, error parsing and token redaction."""
from __future__ import annotations

import pytest

from leaf_client import (
    AllNodesFailedError,
    Backoff,
    ConfigError,
    DecodeError,
    ErrorCode,
    InvalidRequestError,
    LeafClient,
    NotFoundError,
    TlsError,
    TransportError,
    UnavailableError,
)
from leaf_client._calls import Answer, Raw, error_of
from leaf_client._config import ClientConfig, parse_base
from leaf_client._execute import Attempts
from leaf_client._own_creates import OwnCreates
from leaf_client._retry import Safety, gives_up_on_tls, retryable
from leaf_client.errors import ApiError, RequestTimeoutError


def api(status, code):
    return ApiError(status, code, "m", node="n")


def test_what_is_retried():
    refused = TransportError("n", "refused", connect=True)
    reset = TransportError("n", "reset", connect=False)
    timeout = RequestTimeoutError("n", 1.0)
    for s in Safety:
        assert retryable(refused, s) and retryable(TlsError("n", "x"), s)
    assert retryable(reset, Safety.IDEMPOTENT) and retryable(timeout, Safety.IDEMPOTENT)
    assert not retryable(reset, Safety.AT_MOST_ONCE) and not retryable(timeout, Safety.AT_MOST_ONCE)
    for code in (ErrorCode.UNAVAILABLE, ErrorCode.SEGMENTS_NOT_READY, ErrorCode.SHUTTING_DOWN, ErrorCode.NOT_READY,
                 ErrorCode.SNOWFLAKE_UNAVAILABLE, ErrorCode.CLOCK_MOVED_BACKWARDS):
        assert retryable(api(503, code), Safety.IDEMPOTENT)
        assert not retryable(api(503, code), Safety.AT_MOST_ONCE)
    assert not retryable(api(503, ErrorCode.WORKER_IDS_EXHAUSTED), Safety.IDEMPOTENT)
    for status, code in ((400, ErrorCode.INVALID_COUNT), (401, ErrorCode.UNAUTHORIZED), (403, ErrorCode.FORBIDDEN),
                         (404, ErrorCode.TAG_NOT_FOUND), (409, ErrorCode.TAG_EXISTS), (429, ErrorCode.RATE_LIMITED)):
        assert not retryable(api(status, code), Safety.IDEMPOTENT)
    assert retryable(DecodeError("n", 503, "html"), Safety.IDEMPOTENT)
    assert not retryable(DecodeError("n", 200, "garbage"), Safety.IDEMPOTENT)
    assert gives_up_on_tls(TlsError("n", "x"), 3, 3) and not gives_up_on_tls(TlsError("n", "x"), 3, 2)
    assert not gives_up_on_tls(refused, 1, 5)


def test_backoff_grows_to_its_cap_with_jitter():
    b = Backoff(0.01, 0.1)
    for _ in range(200):
        assert 0.005 <= b.delay(0) <= 0.01
        assert 0.02 <= b.delay(2) <= 0.04
        assert 0.05 <= b.delay(40) <= 0.1


def test_attempts_move_round_the_nodes_and_give_up_with_the_last_error():
    cfg = ClientConfig(["http://a:1", "http://b:1", "http://c:1"], retries=2, backoff=Backoff(0.001, 0.002))
    cfg.preferred = 1
    att = Attempts(cfg, Safety.IDEMPOTENT)
    seen = []
    err = TransportError("x", "refused", connect=True)
    with pytest.raises(AllNodesFailedError) as e:
        while True:
            idx, timeout = att.next()
            seen.append(idx)
            assert 0 < timeout <= cfg.timeout
            att.failed(err)
    assert seen == [1, 2, 0] and e.value.attempts == 3 and e.value.last is err
    # A non-retryable error on the first attempt is raised as it is.
    att = Attempts(cfg, Safety.IDEMPOTENT)
    att.next()
    nf = NotFoundError(404, ErrorCode.TAG_NOT_FOUND, "x")
    with pytest.raises(NotFoundError):
        att.failed(nf)


def test_a_tag_just_created_is_retried_through_tag_not_found():
    cfg = ClientConfig(["http://a:1"], retries=0)
    cfg.own_creates.created(["fresh"])
    att = Attempts(cfg, Safety.IDEMPOTENT, tag="fresh")
    att.next()
    nf = NotFoundError(404, ErrorCode.TAG_NOT_FOUND, "x")
    assert att.failed(nf) == pytest.approx(0.05), "retried without spending the budget of 0 retries"
    cfg.own_creates.forget("fresh")
    att.next()
    with pytest.raises(NotFoundError):  # forgotten (archived): the 404 is the answer
        att.failed(nf)


def test_own_creates_remember_share_and_forget():
    own = OwnCreates()
    own.created(["a", "b"])
    assert own.within_grace("a") and not own.within_grace("c")
    own.forget("a")
    assert not own.within_grace("a") and own.within_grace("b")


def test_arguments_are_checked_locally():
    c = LeafClient("http://127.0.0.1:9")  # never contacted
    cases = [
        (lambda: c.segment_id(""), ErrorCode.INVALID_TAG),
        (lambda: c.segment_id("x" * 129), ErrorCode.INVALID_TAG),
        (lambda: c.snowflake_id("a/b"), ErrorCode.INVALID_TAG),
        (lambda: c.segment_ids("t", 0), ErrorCode.INVALID_COUNT),
        (lambda: c.segment_ranges("t", 1_000_001), ErrorCode.INVALID_COUNT),
        (lambda: c.issue_number("t", ""), ErrorCode.INVALID_REQUEST),
        (lambda: c.issue_number("t", "é"), ErrorCode.INVALID_REQUEST),
        (lambda: c.void_number("t", "k", "   "), ErrorCode.INVALID_REQUEST),
        (lambda: c.reserve_number("t", "k", hold_seconds=0), ErrorCode.INVALID_REQUEST),
        (lambda: c.decode(-1), ErrorCode.INVALID_REQUEST),
    ]
    for call, code in cases:
        with pytest.raises(InvalidRequestError) as e:
            call()
        assert e.value.code is code and e.value.status == 400
    c.close()


def test_node_urls_and_tokens_are_checked_and_never_echoed():
    assert parse_base("http://127.0.0.1:8080/") == "http://127.0.0.1:8080"
    assert parse_base("https://[::1]:8443") == "https://[::1]:8443"
    for bad in ["", "127.0.0.1:8080", "ftp://x", "http://", "http://h:1/api", "https://h:1?x=1"]:
        with pytest.raises(ConfigError):
            parse_base(bad)
    with pytest.raises(ConfigError) as e:
        parse_base("http://admin:hunter2@leaf1:8080")
    assert "hunter2" not in str(e.value)
    with pytest.raises(ConfigError) as e:
        LeafClient("http://h:1", token="bad token s3cret")
    assert "s3cret" not in str(e.value)
    with pytest.raises(ConfigError):
        LeafClient([])
    with pytest.raises(ConfigError) as e:
        LeafClient("https://h:1", ca_file="/nonexistent/ca.pem")
    assert "/nonexistent/ca.pem" in str(e.value)
    with LeafClient("http://h:1", token="s3cret-token-value") as c:
        assert "s3cret" not in repr(c) and "s3cret" not in repr(c._cfg)


def test_error_bodies_become_typed_errors():
    e = error_of("n", Raw(503, {"retry-after": "1"}, b'{"code":"unavailable","message":"no quorum"}'))
    assert isinstance(e, UnavailableError) and e.retry_after == 1.0 and e.code is ErrorCode.UNAVAILABLE
    for nonsense in ("-3", "inf", "nan", "soon"):
        e = error_of("n", Raw(429, {"retry-after": nonsense}, b'{"code":"rate_limited","message":"x"}'))
        assert e.retry_after is None, nonsense
    e = error_of("n", Raw(404, {}, b'{"code":"tag_not_found","message":"x","leaf_code":-2}'))
    assert isinstance(e, NotFoundError) and e.leaf_code == -2
    e = error_of("n", Raw(418, {}, b'{"code":"teapot_brewing","message":"x"}'))
    assert type(e) is ApiError and e.code is ErrorCode.UNKNOWN and e.raw_code == "teapot_brewing"
    e = error_of("n", Raw(503, {}, b"<html>bad gateway</html>"))
    assert isinstance(e, DecodeError) and e.is_unavailable
    wrapped = AllNodesFailedError(3, UnavailableError(503, ErrorCode.NOT_READY, "x", node="n"))
    assert wrapped.code is ErrorCode.NOT_READY and wrapped.status == 503 and wrapped.is_unavailable


def test_answers_nested_past_the_parsers_depth_are_decode_errors():
    deep = b"[" * 100_000
    e = error_of("n", Raw(503, {}, deep))
    assert isinstance(e, DecodeError) and e.status == 503, e
    with pytest.raises(DecodeError):
        Answer("n", 200, deep).json()
