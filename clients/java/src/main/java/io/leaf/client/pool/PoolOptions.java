package io.leaf.client.pool;

import java.time.Duration;
import java.util.Objects;

/**
 * How an {@link IdPool} leases and waits; {@link #defaults()} suits a service taking from a few
 * IDs a second to tens of millions. Build others with {@link #builder()}.
 *
 * @param maxWait how long a call with nothing buffered waits for a lease before
 *     {@link io.leaf.client.PoolExhaustedException} (default 5 s: longer than a leader election
 *     plus the client's failover)
 * @param leasePeriod how long a lease should last at the measured consumption (default 1 s)
 * @param minLease the smallest lease (default 100)
 * @param maxLease the largest lease, at most 1,000,000 (the default)
 * @param initialLease the first lease's size (default 1000)
 * @param depth leases queued behind the current range before prefetching stops (default 1:
 *     the current lease and the next, Leaf's double buffer)
 * @param maxStaleness snowflake IDs: none is handed out from a range more than this after its
 *     lease was requested (default 1 s)
 * @param tick how often the refill scheduler wakes on its own, below {@code maxStaleness}
 *     (default 100 ms)
 * @param retryMin the first retry of a failed lease waits this, doubling (default 50 ms)
 * @param retryMax ...up to this (default 1 s)
 * @param localChunk IDs a thread takes from the shared buffer at once, with one atomic
 *     operation, and hands out from thread-local fields (default 64; 1 hands out every ID from
 *     the shared buffer)
 * @param refillThreads the pool's lease threads, shared by all its tags (default 4, 1 to 64);
 *     with the scheduler thread the pool runs {@code refillThreads + 1} threads whatever its
 *     number of tags
 */
public record PoolOptions(Duration maxWait, Duration leasePeriod, int minLease, int maxLease, int initialLease,
        int depth, Duration maxStaleness, Duration tick, Duration retryMin, Duration retryMax, int localChunk,
        int refillThreads) {

    /** Most IDs one lease may ask for. */
    public static final int MAX_RANGE_BATCH = 1_000_000;

    /** Checks the options are usable together ({@link IllegalArgumentException} otherwise). */
    public PoolOptions {
        for (Duration d : new Duration[] {maxWait, leasePeriod, maxStaleness, tick, retryMin, retryMax}) {
            Objects.requireNonNull(d, "a duration option is null");
        }
        if (minLease < 1 || minLease > maxLease || maxLease > MAX_RANGE_BATCH) {
            throw new IllegalArgumentException("need 1 <= minLease (" + minLease + ") <= maxLease (" + maxLease
                    + ") <= " + MAX_RANGE_BATCH);
        }
        if (initialLease < minLease || initialLease > maxLease) {
            throw new IllegalArgumentException("initialLease (" + initialLease + ") must be within [minLease, maxLease]");
        }
        if (depth < 1 || depth > 16) {
            throw new IllegalArgumentException("depth must be from 1 to 16, got " + depth);
        }
        if (!positive(leasePeriod) || !positive(tick) || !positive(retryMin) || maxWait.isNegative()) {
            throw new IllegalArgumentException("leasePeriod, tick and retryMin must be above zero, maxWait not negative");
        }
        if (tick.compareTo(maxStaleness) >= 0) {
            throw new IllegalArgumentException("tick (" + tick + ") must be below maxStaleness (" + maxStaleness + ")");
        }
        if (retryMin.compareTo(retryMax) > 0) {
            throw new IllegalArgumentException("retryMin must not exceed retryMax");
        }
        if (localChunk < 1 || localChunk > 65_536) {
            throw new IllegalArgumentException("localChunk must be from 1 to 65536, got " + localChunk);
        }
        if (refillThreads < 1 || refillThreads > 64) {
            throw new IllegalArgumentException("refillThreads must be from 1 to 64, got " + refillThreads);
        }
    }

    private static boolean positive(Duration d) {
        return !d.isZero() && !d.isNegative();
    }

    /** The defaults. */
    public static PoolOptions defaults() {
        return builder().build();
    }

    /** A builder starting from the defaults. */
    public static Builder builder() {
        return new Builder();
    }

    /** Builds {@link PoolOptions}; every setter names the record component it sets. */
    public static final class Builder {
        private Duration maxWait = Duration.ofSeconds(5);
        private Duration leasePeriod = Duration.ofSeconds(1);
        private int minLease = 100;
        private int maxLease = MAX_RANGE_BATCH;
        private int initialLease = 1000;
        private int depth = 1;
        private Duration maxStaleness = Duration.ofSeconds(1);
        private Duration tick = Duration.ofMillis(100);
        private Duration retryMin = Duration.ofMillis(50);
        private Duration retryMax = Duration.ofSeconds(1);
        private int localChunk = 64;
        private int refillThreads = 4;

        Builder() {
        }

        /** See {@link PoolOptions#maxWait()}. */
        public Builder maxWait(Duration v) {
            maxWait = v;
            return this;
        }

        /** See {@link PoolOptions#leasePeriod()}. */
        public Builder leasePeriod(Duration v) {
            leasePeriod = v;
            return this;
        }

        /** See {@link PoolOptions#minLease()}. */
        public Builder minLease(int v) {
            minLease = v;
            return this;
        }

        /** See {@link PoolOptions#maxLease()}. */
        public Builder maxLease(int v) {
            maxLease = v;
            return this;
        }

        /** See {@link PoolOptions#initialLease()}. */
        public Builder initialLease(int v) {
            initialLease = v;
            return this;
        }

        /** See {@link PoolOptions#depth()}. */
        public Builder depth(int v) {
            depth = v;
            return this;
        }

        /** See {@link PoolOptions#maxStaleness()}. */
        public Builder maxStaleness(Duration v) {
            maxStaleness = v;
            return this;
        }

        /** See {@link PoolOptions#tick()}. */
        public Builder tick(Duration v) {
            tick = v;
            return this;
        }

        /** See {@link PoolOptions#retryMin()} and {@link PoolOptions#retryMax()}. */
        public Builder retry(Duration min, Duration max) {
            retryMin = min;
            retryMax = max;
            return this;
        }

        /** See {@link PoolOptions#localChunk()}. */
        public Builder localChunk(int v) {
            localChunk = v;
            return this;
        }

        /** See {@link PoolOptions#refillThreads()}. */
        public Builder refillThreads(int v) {
            refillThreads = v;
            return this;
        }

        /** The options (checked). */
        public PoolOptions build() {
            return new PoolOptions(maxWait, leasePeriod, minLease, maxLease, initialLease, depth, maxStaleness, tick,
                    retryMin, retryMax, localChunk, refillThreads);
        }
    }
}
