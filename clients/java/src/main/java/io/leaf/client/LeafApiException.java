package io.leaf.client;

import java.time.Duration;
import java.util.Optional;

/**
 * A node answered with an error body ({@code {"code", "message", "leaf_code"}}), or the client
 * refused the request locally before sending it ({@link #isLocal()}, e.g. an invalid tag).
 *
 * <p>Catch a category subclass ({@link NotFoundException}, {@link ConflictException},
 * {@link UnauthorizedException}, {@link ForbiddenException}, {@link RateLimitedException},
 * {@link UnavailableException}, {@link InvalidRequestException}) or this class and switch on
 * {@link #code()}.
 */
public class LeafApiException extends LeafException {
    private static final long serialVersionUID = 1L;

    private final String node;
    private final int status;
    private final ErrorCode code;
    private final String wireCode;
    private final String serverMessage;
    private final Long leafCode;
    private final Duration retryAfter;

    /**
     * An API error.
     *
     * @param node the node that answered ({@code null}: raised locally)
     * @param status the HTTP status
     * @param wireCode the code as the server wrote it
     * @param message the server's message
     * @param leafCode Leaf's numeric code, when the server gave one
     * @param retryAfter the {@code Retry-After} of a 429, else {@code null}
     */
    protected LeafApiException(String node, int status, String wireCode, String message, Long leafCode,
            Duration retryAfter) {
        super((node == null ? "" : node + ": ") + "HTTP " + status + ": " + wireCode + ": " + message);
        this.node = node;
        this.status = status;
        this.code = ErrorCode.fromWire(wireCode);
        this.wireCode = wireCode;
        this.serverMessage = message;
        this.leafCode = leafCode;
        this.retryAfter = retryAfter;
    }

    /** The error of a node's answer, as the subclass of its status's category. */
    static LeafApiException of(String node, int status, String wireCode, String message, Long leafCode,
            Duration retryAfter) {
        switch (status) {
            case 400:
            case 405:
            case 413:
                return new InvalidRequestException(node, status, wireCode, message, leafCode);
            case 401:
                return new UnauthorizedException(node, wireCode, message, leafCode);
            case 403:
                return new ForbiddenException(node, wireCode, message, leafCode);
            case 404:
                return new NotFoundException(node, wireCode, message, leafCode);
            case 409:
                return new ConflictException(node, wireCode, message, leafCode);
            case 429:
                return new RateLimitedException(node, wireCode, message, leafCode, retryAfter);
            case 503:
                return new UnavailableException(node, wireCode, message, leafCode);
            default:
                return new LeafApiException(node, status, wireCode, message, leafCode, retryAfter);
        }
    }

    /** The node that answered, {@code null} when the client refused the request itself. */
    public String node() {
        return node;
    }

    /** Whether the client refused the request before sending it. */
    public boolean isLocal() {
        return node == null;
    }

    /** The HTTP status (400 for a local refusal). */
    public int status() {
        return status;
    }

    /** The error code ({@link ErrorCode#UNKNOWN} for a code this client does not know). */
    public ErrorCode code() {
        return code;
    }

    /** The code exactly as the server wrote it (useful with {@link ErrorCode#UNKNOWN}). */
    public String wireCode() {
        return wireCode;
    }

    /** The server's (or the local check's) message alone. */
    public String serverMessage() {
        return serverMessage;
    }

    /** Leaf's numeric code, when the answer carried one. */
    public Optional<Long> leafCode() {
        return Optional.ofNullable(leafCode);
    }

    /** How long the server asked to wait ({@code Retry-After} of a 429), when it said. */
    public Optional<Duration> retryAfter() {
        return Optional.ofNullable(retryAfter);
    }

    @Override
    public boolean isUnavailable() {
        return status == 503;
    }
}
