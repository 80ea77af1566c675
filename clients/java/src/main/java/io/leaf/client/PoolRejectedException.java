package io.leaf.client;

/**
 * An {@code IdPool} had nothing buffered and its last lease was refused for a reason waiting
 * does not fix (an unknown tag, a rejected token, a TLS setup problem): thrown at once rather
 * than after {@code maxWait}. The cause is the lease's error. The pool keeps retrying with
 * backoff, so a later call succeeds once the cause is gone.
 */
public class PoolRejectedException extends LeafException {
    private static final long serialVersionUID = 1L;

    /** The refusal of {@code what} ("segment IDs of 'orders'"), caused by {@code cause}. */
    public PoolRejectedException(String what, LeafException cause) {
        super(what + " refused: " + cause.getMessage(), cause);
    }
}
