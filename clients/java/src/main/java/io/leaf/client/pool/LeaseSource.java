package io.leaf.client.pool;

import io.leaf.client.IdRange;
import io.leaf.client.LeafClient;
import java.util.List;

/**
 * Where an {@link IdPool} leases its ranges: usually a {@link LeafClient} ({@link #of}), with
 * its failover, retries and deadline; a fake in tests.
 *
 * <p>Every ID an implementation returns must be its own: never returned before, to anyone. The
 * pool checks the answer (ascending, non-overlapping ranges holding exactly {@code count} IDs)
 * and treats a malformed one as a failed, retryable lease. A failure is a
 * {@link io.leaf.client.LeafException}: retried with backoff, and callers with nothing buffered
 * fail at once when it is not {@link io.leaf.client.LeafException#isUnavailable() unavailable}
 * (an unknown tag, a rejected token, a TLS setup problem).
 */
@FunctionalInterface
public interface LeaseSource {
    /** {@code count} IDs of tag (or snowflake key) {@code name}, as ranges. Called on the pool's refill thread. */
    List<IdRange> lease(IdKind kind, String name, int count);

    /** The cluster behind {@code client}: {@code ranges} / {@code snowflakeRanges}. */
    static LeaseSource of(LeafClient client) {
        return (kind, name, count) -> kind == IdKind.SEGMENT ? client.ranges(name, count)
                : client.snowflakeRanges(name, count);
    }
}
