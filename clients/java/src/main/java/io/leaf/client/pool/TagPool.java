package io.leaf.client.pool;

/**
 * The IDs of one tag (or snowflake key) of an {@link IdPool}: {@link #nextId()} hands them out
 * from the pool's leased ranges. Thread-safe; get it once ({@link IdPool#segment}) and share it.
 *
 * <p><b>The fast path.</b> Each calling thread takes a chunk of {@code localChunk} consecutive
 * IDs (64 by default) from the shared buffer with one atomic {@code getAndAdd}, and hands them
 * out from thread-local fields: most calls are a {@link ThreadLocal} lookup and a field
 * increment, with no lock and no shared write. IDs stay unique and come from ranges the pool
 * leased; different threads' IDs interleave by chunk (segment IDs stay trend-increasing); IDs
 * left in a thread's chunk when the thread ends are a gap, never a duplicate. A snowflake chunk
 * checks on every ID that its range was not retired for age (one volatile read).
 */
public final class TagPool {
    private final TagBuffer buffer;
    private final long chunk;
    private final boolean snowflake;
    private final ThreadLocal<LocalRun> local = ThreadLocal.withInitial(LocalRun::new);

    TagPool(TagBuffer buffer, int chunk) {
        this.buffer = buffer;
        this.chunk = chunk;
        this.snowflake = buffer.kind == IdKind.SNOWFLAKE;
    }

    /**
     * The next ID. Blocks only when nothing is buffered, at most the pool's {@code maxWait}.
     *
     * @throws io.leaf.client.PoolExhaustedException nothing buffered and no lease within
     *     {@code maxWait}, or the pool is closed
     * @throws io.leaf.client.PoolRejectedException nothing buffered and the last lease was refused
     *     (unknown tag, rejected token, TLS setup)
     */
    public long nextId() {
        LocalRun run = local.get();
        long next = run.next;
        if (next < run.end && !(snowflake && run.range.retired)) {
            run.next = next + 1;
            return next;
        }
        return refill(run);
    }

    private long refill(LocalRun run) {
        long left = run.left();
        if (left > 0) {
            buffer.retired.addAndGet(left); // a retired snowflake range's IDs
        }
        run.set(null, 0, 0);
        buffer.takeWaiting(run, chunk);
        return run.next++;
    }

    /** Whether these are segment or snowflake IDs. */
    public IdKind kind() {
        return buffer.kind;
    }

    /** The tag (or snowflake key). */
    public String name() {
        return buffer.name;
    }

    /** A snapshot of this tag's metrics. */
    public TagStats stats() {
        return buffer.stats();
    }

    @Override
    public String toString() {
        return "TagPool[" + buffer.what + "]";
    }
}
