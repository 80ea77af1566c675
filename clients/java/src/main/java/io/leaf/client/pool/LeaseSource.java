package io.leaf.client.pool;

import io.leaf.client.IdRange;
import io.leaf.client.LeafClient;
import java.util.List;
import java.util.concurrent.CompletableFuture;

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
    /** {@code count} IDs of tag (or snowflake key) {@code name}, as ranges. Called on one of the pool's lease threads. */
    List<IdRange> lease(IdKind kind, String name, int count);

    /**
     * The same lease without holding the calling thread while it is out: the pool calls this
     * (on one of its lease threads). The default calls {@link #lease} there, holding that
     * thread until it answers; a source that can wait without a thread overrides it.
     */
    default CompletableFuture<List<IdRange>> leaseAsync(IdKind kind, String name, int count) {
        return CompletableFuture.completedFuture(lease(kind, name, count));
    }

    /**
     * The cluster behind {@code client}: {@code ranges} / {@code snowflakeRanges}, blocking, and
     * through {@link LeafClient#async()} for {@link #leaseAsync} (no thread held while a node
     * takes its time).
     */
    static LeaseSource of(LeafClient client) {
        return new LeaseSource() {
            @Override
            public List<IdRange> lease(IdKind kind, String name, int count) {
                return kind == IdKind.SEGMENT ? client.ranges(name, count) : client.snowflakeRanges(name, count);
            }

            @Override
            public CompletableFuture<List<IdRange>> leaseAsync(IdKind kind, String name, int count) {
                return kind == IdKind.SEGMENT ? client.async().ranges(name, count)
                        : client.async().snowflakeRanges(name, count);
            }

            @Override
            public String toString() {
                return "LeaseSource[" + client + "]";
            }
        };
    }
}
