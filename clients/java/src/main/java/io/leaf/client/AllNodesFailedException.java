package io.leaf.client;

/**
 * Every attempt the call was allowed (its retry budget, its deadline, or one TLS handshake per
 * node) failed with an error worth retrying; {@link #last()} is the final one.
 */
public class AllNodesFailedException extends LeafException {
    private static final long serialVersionUID = 1L;

    private final int attempts;
    private final LeafException last;

    AllNodesFailedException(int attempts, LeafException last) {
        super("gave up after " + attempts + " attempts: " + last.getMessage(), last);
        this.attempts = attempts;
        this.last = last;
    }

    /** How many attempts were made. */
    public int attempts() {
        return attempts;
    }

    /** The last attempt's error. */
    public LeafException last() {
        return last;
    }

    @Override
    public boolean isUnavailable() {
        return last.isUnavailable();
    }
}
