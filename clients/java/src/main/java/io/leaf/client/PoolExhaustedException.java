package io.leaf.client;

import java.time.Duration;

/**
 * An {@code IdPool} had nothing buffered and no lease arrived within its {@code maxWait}
 * (the cause, when set, is the last lease failure), or the pool is closed.
 */
public class PoolExhaustedException extends LeafException {
    private static final long serialVersionUID = 1L;

    /**
     * The error of a wait that ran out.
     *
     * @param what which IDs ("segment IDs of 'orders'")
     * @param waited how long the caller waited
     * @param lastFailure the last failed lease, or {@code null} if no lease failed (only slow)
     */
    public PoolExhaustedException(String what, Duration waited, LeafException lastFailure) {
        super("no " + what + " within " + waited.toMillis() + " ms: "
                + (lastFailure == null ? "no lease arrived in time" : lastFailure.getMessage()), lastFailure);
    }

    /** The error of a call on a closed pool. */
    public PoolExhaustedException(String what) {
        super("no " + what + ": the pool is closed");
    }
}
