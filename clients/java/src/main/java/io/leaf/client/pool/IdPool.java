package io.leaf.client.pool;

import io.leaf.client.LeafClient;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A client-side cache of ID ranges leased from the cluster, per tag: Leaf's double buffer in
 * the client, with a lock-free {@link TagPool#nextId()}.
 *
 * <pre>{@code
 * try (IdPool pool = IdPool.create(client, PoolOptions.defaults())) {
 *     TagPool orders = pool.segment("orders"); // starts leasing at once
 *     long id = orders.nextId();               // from any thread
 * }
 * }</pre>
 *
 * <p><b>How it works.</b> Each tag (or snowflake key) has a buffer of leased ranges: the current
 * lease and up to {@code depth} leases queued behind it, filled through a {@link LeaseSource}
 * (a {@link LeafClient}: {@code ranges} / {@code snowflakeRanges}, with the client's failover
 * across nodes, retries and deadline) by the pool's refill threads: one scheduler and a fixed
 * executor of {@code refillThreads} (4) lease threads shared by all its tags, whatever their
 * number; a tag's slow lease holds none of them while out (a client's leases are sent
 * asynchronously) and never delays another tag's. When 10% of a lease is
 * used the next one is fetched in the background; its size adapts so that a lease lasts about
 * {@code leasePeriod}. A failed lease is retried with backoff; callers notice nothing while
 * buffered IDs last, then wait up to {@code maxWait}. Every ID handed out lies in a range the
 * service leased to this pool, and none twice; IDs still buffered when the process dies are
 * lost (a gap, never a duplicate). {@link #close()} stops the refill threads and retires the
 * buffered snowflake IDs; buffered segment IDs are still handed out.
 */
public final class IdPool implements AutoCloseable {
    private static final AtomicInteger POOLS = new AtomicInteger();

    private final PoolOptions options;
    private final String threadPrefix;
    private final Refiller refiller;
    private final Map<String, TagPool> tags = new LinkedHashMap<>();
    private final List<TagBuffer> buffers = new ArrayList<>();
    private boolean closed;

    private IdPool(LeaseSource source, PoolOptions options) {
        this.options = options;
        this.threadPrefix = "leaf-id-pool-" + POOLS.incrementAndGet() + "-";
        this.refiller = new Refiller(source, options, threadPrefix.substring(0, threadPrefix.length() - 1));
        refiller.start();
    }

    /** A pool leasing from the cluster behind {@code client}. */
    public static IdPool create(LeafClient client, PoolOptions options) {
        return new IdPool(LeaseSource.of(client), options);
    }

    /** A pool leasing from {@code source}. */
    public static IdPool create(LeaseSource source, PoolOptions options) {
        return new IdPool(source, options);
    }

    /**
     * The prefix of the names of this pool's threads ({@code leaf-id-pool-<n>-}): its scheduler
     * ({@code ...-refill}) and its {@code refillThreads} lease threads ({@code ...-lease-<i>}),
     * shared by all its tags.
     */
    public String threadNamePrefix() {
        return threadPrefix;
    }

    /** The options the pool was built with. */
    public PoolOptions options() {
        return options;
    }

    /** The handle of {@code tag}'s segment IDs; the first call starts leasing, later calls return the same. */
    public TagPool segment(String tag) {
        return handle(IdKind.SEGMENT, tag);
    }

    /**
     * The handle of snowflake IDs leased under {@code key} (validated like a tag); no ID is
     * handed out more than {@code maxStaleness} after its lease was requested.
     */
    public TagPool snowflake(String key) {
        return handle(IdKind.SNOWFLAKE, key);
    }

    /** A snapshot of every tag's and key's metrics. */
    public synchronized PoolStats stats() {
        List<TagStats> out = new ArrayList<>();
        for (TagBuffer b : buffers) {
            out.add(b.stats());
        }
        return new PoolStats(List.copyOf(out));
    }

    private synchronized TagPool handle(IdKind kind, String name) {
        checkName(kind, name);
        if (closed) {
            throw new IllegalStateException("the pool is closed");
        }
        String key = kind + "/" + name;
        TagPool pool = tags.get(key);
        if (pool != null) {
            return pool;
        }
        TagBuffer buffer = new TagBuffer(kind, name, options.maxWait(), refiller::wake);
        Duration period = options.leasePeriod();
        if (kind == IdKind.SNOWFLAKE) {
            // Snowflake leases aim to last half the staleness bound, so that few IDs are retired.
            Duration half = options.maxStaleness().dividedBy(2);
            period = period.compareTo(half) < 0 ? period : half;
        }
        Sizing sizing = new Sizing(options.minLease(), options.maxLease(), period);
        pool = new TagPool(buffer, options.localChunk());
        tags.put(key, pool);
        buffers.add(buffer);
        refiller.add(new Refiller.Lessee(buffer, sizing, options.initialLease()));
        return pool;
    }

    private static void checkName(IdKind kind, String name) {
        boolean ok = name != null && !name.isEmpty() && name.length() <= 128
                && name.chars().allMatch(c -> (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
                        || c == '_' || c == '.' || c == ':' || c == '-');
        if (!ok) {
            throw new IllegalArgumentException("invalid " + kind + " name " + (name == null ? "null" : "'" + name + "'")
                    + ": 1 to 128 characters of A-Z a-z 0-9 _ . : -");
        }
    }

    /**
     * Stops the refill threads (a lease in flight is abandoned: its IDs are a gap). Segment IDs
     * still buffered are still handed out after close; snowflake IDs are not (with no refill
     * thread left to retire ranges for age, they would outlive {@code maxStaleness}): every
     * snowflake range still buffered, including the chunks threads hold, is retired at close
     * (a gap). Callers waiting on an empty buffer, later calls that find nothing, and every
     * later {@code nextId()} of a snowflake key get a {@link io.leaf.client.PoolExhaustedException}.
     */
    @Override
    public void close() {
        List<TagBuffer> all;
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            all = List.copyOf(buffers);
        }
        try {
            refiller.close(Duration.ofSeconds(5));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        for (TagBuffer b : all) {
            b.close();
        }
    }

    @Override
    public String toString() {
        return "IdPool[" + options + "]";
    }
}
