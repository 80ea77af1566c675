package io.leaf.client.pool;

/**
 * A thread's run of consecutive IDs taken from a tag's buffer with one atomic operation, handed
 * out from these plain fields: {@code next .. end - 1} are left. Owned by one thread (a
 * {@link ThreadLocal} of its {@link TagPool}); IDs left when the thread dies are a gap.
 */
final class LocalRun {
    Range range;
    long next;
    long end;

    void set(Range r, long first, long end) {
        this.range = r;
        this.next = first;
        this.end = end;
    }

    /** IDs left. */
    long left() {
        return end - next;
    }
}
