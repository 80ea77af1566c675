package io.leaf.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.junit.jupiter.api.Test;

/** What is retried, the backoff, the memory of own creates, errors and paths. */
class RetryRulesTest {
    private static LeafApiException api(int status, String code) {
        return LeafApiException.of("n", status, code, "m", null, null);
    }

    @Test
    void whatIsRetried() {
        LeafTransportException refused = new LeafTransportException("n", "refused", true, null);
        LeafTransportException reset = new LeafTransportException("n", "reset", false, null);
        LeafTimeoutException timeout = new LeafTimeoutException("n", Duration.ofSeconds(1));
        LeafTlsException tls = new LeafTlsException("n", "PKIX", null);
        for (Safety s : Safety.values()) {
            assertTrue(s.retryable(refused), "a request never sent is always retried");
            assertTrue(s.retryable(tls), "a failed handshake processed nothing");
        }
        assertTrue(Safety.IDEMPOTENT.retryable(reset));
        assertTrue(Safety.IDEMPOTENT.retryable(timeout));
        assertFalse(Safety.AT_MOST_ONCE.retryable(reset));
        assertFalse(Safety.AT_MOST_ONCE.retryable(timeout));
        for (String code : new String[] {"unavailable", "not_ready", "segments_not_ready", "shutting_down",
            "snowflake_unavailable", "clock_moved_backwards"}) {
            assertTrue(Safety.IDEMPOTENT.retryable(api(503, code)), code);
            assertFalse(Safety.AT_MOST_ONCE.retryable(api(503, code)), code);
        }
        assertFalse(Safety.IDEMPOTENT.retryable(api(503, "worker_ids_exhausted")));
        for (int status : new int[] {400, 401, 403, 404, 409, 429}) {
            assertFalse(Safety.IDEMPOTENT.retryable(api(status, "x")), "HTTP " + status);
        }
        assertTrue(Safety.IDEMPOTENT.retryable(new LeafDecodeException("n", 503, "html")), "a proxy's 503");
        assertFalse(Safety.IDEMPOTENT.retryable(new LeafDecodeException("n", 200, "junk")));
    }

    @Test
    void errorsAreTypedByStatusWithRetryAfter() {
        assertTrue(api(404, "tag_not_found") instanceof NotFoundException);
        assertTrue(api(409, "tag_exists") instanceof ConflictException);
        assertTrue(api(401, "unauthorized") instanceof UnauthorizedException);
        assertTrue(api(403, "forbidden") instanceof ForbiddenException);
        assertTrue(api(400, "invalid_count") instanceof InvalidRequestException);
        assertTrue(api(503, "unavailable") instanceof UnavailableException);
        LeafException limited = Answers.error("n", 429,
                "{\"code\":\"rate_limited\",\"message\":\"slow down\",\"leaf_code\":null}".getBytes(), "7");
        assertTrue(limited instanceof RateLimitedException);
        assertEquals(Duration.ofSeconds(7), ((RateLimitedException) limited).retryAfter().orElseThrow());
        for (String nonsense : new String[] {"-3", "soon", "1.5"}) {
            LeafException e = Answers.error("n", 429,
                    "{\"code\":\"rate_limited\",\"message\":\"slow down\"}".getBytes(), nonsense);
            assertTrue(((RateLimitedException) e).retryAfter().isEmpty(), nonsense);
        }
        LeafApiException future = api(400, "some_new_code");
        assertEquals(ErrorCode.UNKNOWN, future.code());
        assertEquals("some_new_code", future.wireCode());
        LeafException proxy = Answers.error("n", 503, "<html>".getBytes(), null);
        assertTrue(proxy instanceof LeafDecodeException && proxy.isUnavailable());
    }

    @Test
    void backoffGrowsToItsCapWithJitter() {
        Backoff b = new Backoff(Duration.ofMillis(10), Duration.ofMillis(100));
        for (int i = 0; i < 200; i++) {
            long d0 = b.delay(0).toNanos();
            assertTrue(d0 >= 5_000_000 && d0 <= 10_000_000, "" + d0);
            long d2 = b.delay(2).toNanos();
            assertTrue(d2 >= 20_000_000 && d2 <= 40_000_000, "" + d2);
            long big = b.delay(40).toNanos();
            assertTrue(big >= 50_000_000 && big <= 100_000_000, "" + big);
        }
    }

    @Test
    void ownCreatesRememberAndAnArchiveForgets() {
        OwnCreates own = new OwnCreates();
        assertFalse(own.withinGrace("a"));
        own.created("a");
        own.created("b");
        assertTrue(own.withinGrace("a") && own.withinGrace("b") && !own.withinGrace("c"));
        own.forget("a");
        assertFalse(own.withinGrace("a"));
        for (int i = 0; i < OwnCreates.KEEP; i++) {
            own.created("t" + i);
        }
        assertFalse(own.withinGrace("b"), "pushed out by newer creates");
    }

    @Test
    void pathsAreFilledAndEncoded() {
        assertEquals("/api/segment/get/a:b.c-d_e", Paths.fill(Paths.SEGMENT_GET, "a:b.c-d_e"));
        assertEquals("/admin/tags/a%20b%2F%C3%A9/archive", Paths.fill(Paths.ADMIN_TAG_ARCHIVE, "a b/é"));
    }

    @Test
    void urlsAreCheckedAndCredentialsNeverEchoed() {
        assertEquals("http://h:1", LeafClientBuilder.normalise("http://h:1/"));
        IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> LeafClientBuilder.normalise("http://user:s3cret@h:1"));
        assertFalse(e.getMessage().contains("s3cret"));
        org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> LeafClientBuilder.normalise("ftp://h:1"));
        org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> LeafClient.builder().build());
    }
}
