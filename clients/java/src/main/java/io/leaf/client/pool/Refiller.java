package io.leaf.client.pool;

import io.leaf.client.IdRange;
import io.leaf.client.LeafDecodeException;
import io.leaf.client.LeafException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.locks.LockSupport;

/**
 * The refill thread of one {@link IdPool}: a scheduler loop over the pool's tags (one daemon
 * thread per pool, never a caller's thread). It sleeps until woken (a prefetch point reached,
 * a caller found nothing), a retry is due, or the tick; then, per tag:
 * <ol>
 *   <li>retires snowflake ranges that got too old: every range whose lease was requested at
 *       least {@code maxStaleness - tick} ago, so that, checked every tick, none is handed out
 *       more than {@code maxStaleness} after its lease was requested;
 *   <li>leases when fewer than {@code depth} leases are queued behind the current range and a
 *       caller asked for one (at 10% of a lease, or with nothing left) or nothing is left. A new
 *       request (not a retry) first adapts the size to how long the previous lease lasted
 *       ({@link Sizing}; a lease callers waited for counts as lasting zero);
 *   <li>credits the ranges (checked: a malformed answer, or snowflake ranges that arrive already
 *       too old, are a failed lease) and wakes the waiters; or records the failure, wakes the
 *       waiters (a refused lease fails them at once) and retries after a capped exponential
 *       backoff ({@code retryMin} doubling to {@code retryMax}) while IDs are wanted.
 * </ol>
 * Leases are fetched one at a time, through the source's own failover and deadline: a slow
 * lease of one tag delays the other tags' leases of the same pool.
 */
final class Refiller implements Runnable {
    /** One tag's lease state, touched by the refill thread only. */
    static final class Lessee {
        final TagBuffer buffer;
        final Sizing sizing;
        int target;
        long nextLease = 1;
        int failures;
        long retryAt;
        boolean retryPending;
        boolean hasLast;
        long lastRequestAt;
        long servedThen;
        long waitsThen;

        Lessee(TagBuffer buffer, Sizing sizing, int initial) {
            this.buffer = buffer;
            this.sizing = sizing;
            this.target = sizing.clamp(initial);
            buffer.leaseTarget = target;
        }
    }

    private final LeaseSource source;
    private final PoolOptions options;
    private final CopyOnWriteArrayList<Lessee> lessees = new CopyOnWriteArrayList<>();
    private final Thread thread;
    private volatile boolean closed;

    Refiller(LeaseSource source, PoolOptions options, String threadName) {
        this.source = source;
        this.options = options;
        this.thread = new Thread(this, threadName);
        thread.setDaemon(true);
    }

    void start() {
        thread.start();
    }

    /** Wakes the loop (a caller wants a lease). */
    void wake() {
        LockSupport.unpark(thread);
    }

    void add(Lessee lessee) {
        lessees.add(lessee);
        wake();
    }

    /** Stops the loop (a lease in flight is interrupted) and waits for it, at most {@code wait}. */
    void close(Duration wait) throws InterruptedException {
        closed = true;
        thread.interrupt();
        thread.join(wait.toMillis());
    }

    @Override
    public void run() {
        long staleAfter = options.maxStaleness().minus(options.tick()).toNanos();
        long tick = options.tick().toNanos();
        while (!closed) {
            long now = System.nanoTime();
            long sleep = tick;
            for (Lessee s : lessees) {
                if (closed) {
                    return;
                }
                TagBuffer b = s.buffer;
                if (b.kind == IdKind.SNOWFLAKE) {
                    b.retireLeasedUntil(now - staleAfter);
                }
                boolean due = !s.retryPending || now - s.retryAt >= 0;
                if (due && b.queuedLeases() < options.depth() && (b.wanted || b.empty())) {
                    lease(s, now, staleAfter);
                    now = System.nanoTime();
                }
                if (s.retryPending) {
                    sleep = Math.min(sleep, s.retryAt - now);
                }
            }
            if (sleep > 0 && !closed) {
                LockSupport.parkNanos(this, sleep);
            }
        }
    }

    private void lease(Lessee s, long now, long staleAfter) {
        TagBuffer b = s.buffer;
        if (s.failures == 0) {
            long waits = b.waits.get();
            long served = Math.max(0, b.leased.get() - b.retired.get() - b.buffered());
            if (s.hasLast) {
                long lasted = now - s.lastRequestAt;
                b.rate = Sizing.rate(served - s.servedThen, lasted);
                s.target = s.sizing.adapt(s.target, waits > s.waitsThen ? Duration.ZERO : Duration.ofNanos(lasted));
                b.leaseTarget = s.target;
            }
            s.hasLast = true;
            s.lastRequestAt = now;
            s.servedThen = served;
            s.waitsThen = waits;
        }
        s.retryPending = false;
        b.wanted = false;
        int size = s.target;
        long sent = System.nanoTime();
        try {
            List<IdRange> ranges = source.lease(b.kind, b.name, size);
            check(ranges, size);
            if (b.kind == IdKind.SNOWFLAKE && System.nanoTime() - sent >= staleAfter) {
                b.leased.addAndGet(size);
                b.retired.addAndGet(size);
                throw new LeafException("a lease took " + (System.nanoTime() - sent) / 1_000_000
                        + " ms: its snowflake IDs were too old to hand out");
            }
            b.credit(ranges, size, s.nextLease++, sent);
            b.leasesOk.incrementAndGet();
            b.lastLeaseSize = size;
            s.failures = 0;
            b.failure = null;
            b.failurePermanent = false;
        } catch (LeafException e) {
            // Unavailable or garbled: try again. A refusal (unknown tag, bad token, TLS setup): permanent.
            failed(s, e, e.isUnavailable() || e instanceof LeafDecodeException || e.getClass() == LeafException.class);
        } catch (RuntimeException e) {
            failed(s, new LeafException("a lease failed: " + e, e), true);
        }
    }

    /** Ascending, non-overlapping ranges holding exactly {@code size} IDs. */
    private static void check(List<IdRange> ranges, int size) {
        long total = 0;
        long previousEnd = Long.MIN_VALUE;
        for (IdRange r : ranges) {
            if (r.start() < previousEnd) {
                throw new IllegalStateException("a malformed answer: ranges not ascending at " + r);
            }
            previousEnd = r.end();
            total += r.count();
        }
        if (total != size) {
            throw new IllegalStateException("a malformed answer: " + total + " IDs, asked for " + size);
        }
    }

    private void failed(Lessee s, LeafException e, boolean retryable) {
        TagBuffer b = s.buffer;
        b.leasesFailed.incrementAndGet();
        s.failures = Math.min(s.failures + 1, 1000);
        s.retryAt = System.nanoTime() + backoff(s.failures, options.retryMin(), options.retryMax()).toNanos();
        s.retryPending = true;
        b.failurePermanent = !retryable;
        b.failure = e;
        b.wanted = true;
        b.notifyWaiters();
    }

    /** The wait before retry {@code failures} (1, 2, ...): {@code min}, doubling, at most {@code max}. */
    static Duration backoff(int failures, Duration min, Duration max) {
        int shift = Math.min(Math.max(failures - 1, 0), 20);
        Duration d = min.multipliedBy(1L << shift);
        return d.compareTo(max) > 0 ? max : d;
    }
}
