package io.leaf.client.pool;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * One leased range in a tag's buffer: {@code len} IDs from {@code start}, handed out by one
 * atomic {@code getAndAdd} on {@code cursor} per take (a ticket {@code k < len} is the ID
 * {@code start + k}; a ticket past the end is a miss). Each ticket is returned by one
 * {@code getAndAdd} only, so no ID is handed out twice; the cursor only moves forward.
 */
final class Range {
    private static final VarHandle CURSOR;

    static {
        try {
            CURSOR = MethodHandles.lookup().findVarHandle(Range.class, "cursor", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** The empty placeholder a buffer starts with. */
    static final Range EMPTY = new Range(0, 0, 0, 0, -1);

    final long start;
    final long len;
    /** The lease this range came in (1, 2, ...; 0 for the placeholder). */
    final long lease;
    /** When its lease was requested ({@link System#nanoTime()}). */
    final long leasedAt;
    /** The ticket whose take asks for the next lease (10% into the lease), or -1. */
    final long prefetchAt;

    @SuppressWarnings("unused") // through CURSOR
    private volatile long cursor;
    /** Set when the range got too old (snowflake): local runs of it stop handing out its IDs. */
    volatile boolean retired;

    Range(long start, long len, long lease, long leasedAt, long prefetchAt) {
        this.start = start;
        this.len = len;
        this.lease = lease;
        this.leasedAt = leasedAt;
        this.prefetchAt = prefetchAt;
        if (len == 0) {
            cursor = 0;
        }
    }

    /** Claims {@code n} tickets: the first one's number (a hit when below {@link #len}). */
    long take(long n) {
        return (long) CURSOR.getAndAdd(this, n);
    }

    /** IDs not claimed yet. */
    long left() {
        return Math.max(0, len - (long) CURSOR.getVolatile(this));
    }

    /** Stops the range: every later take misses. Returns the IDs it still held. */
    long retire() {
        retired = true;
        while (true) {
            long c = (long) CURSOR.getVolatile(this);
            if (c >= len) {
                return 0;
            }
            if (CURSOR.compareAndSet(this, c, len)) {
                return len - c;
            }
        }
    }
}
