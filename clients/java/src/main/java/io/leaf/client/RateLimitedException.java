package io.leaf.client;

import java.time.Duration;

/**
 * HTTP 429 ({@code rate_limited}): the credential's quota is used up. Never retried by the
 * client; {@link #retryAfter()} says how long the server asked to wait.
 */
public class RateLimitedException extends LeafApiException {
    private static final long serialVersionUID = 1L;

    RateLimitedException(String node, String wireCode, String message, Long leafCode, Duration retryAfter) {
        super(node, 429, wireCode, message, leafCode, retryAfter);
    }
}
