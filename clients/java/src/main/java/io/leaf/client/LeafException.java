package io.leaf.client;

/**
 * The base of every error this library raises (unchecked). No message ever contains the
 * bearer token, credentials or key material: messages are safe to log.
 */
public class LeafException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** An error with this message. */
    public LeafException(String message) {
        super(message);
    }

    /** An error with this message and cause. */
    public LeafException(String message, Throwable cause) {
        super(message, cause);
    }

    /**
     * Whether the service was unavailable (a 503, no answer, a timeout) rather than the request
     * wrong: worth trying again later. Looks through {@link AllNodesFailedException}.
     */
    public boolean isUnavailable() {
        return false;
    }
}
