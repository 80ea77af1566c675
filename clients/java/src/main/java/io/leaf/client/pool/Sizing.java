package io.leaf.client.pool;

import java.time.Duration;

/**
 * The adaptive lease size (Leaf's dynamic step, in the client). A lease should last about
 * {@code period}: one that lasted less than half of it doubles the next, one that lasted more
 * than twice halves it, always within {@code [min, max]}. When callers had to wait since the
 * previous request, the refiller counts the lease as lasting no time (it doubles): the
 * time then includes the wait, and halving would starve the callers further.
 */
record Sizing(int min, int max, Duration period) {
    /** The size of the next lease, given the current one and how long the last lease lasted. */
    int adapt(int current, Duration lasted) {
        int c = clamp(current);
        if (lasted.compareTo(period.dividedBy(2)) < 0) {
            return clamp((int) Math.min(Integer.MAX_VALUE, 2L * c));
        }
        if (lasted.compareTo(period.multipliedBy(2)) > 0) {
            return clamp(c / 2);
        }
        return c;
    }

    /** {@code size} within {@code [min, max]}. */
    int clamp(int size) {
        return Math.max(min, Math.min(max, size));
    }

    /** IDs per second: {@code ids} used over {@code nanos} (0 for no time). */
    static double rate(long ids, long nanos) {
        return nanos > 0 ? ids * 1e9 / nanos : 0.0;
    }
}
