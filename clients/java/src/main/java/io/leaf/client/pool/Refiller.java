package io.leaf.client.pool;

import io.leaf.client.IdRange;
import io.leaf.client.LeafDecodeException;
import io.leaf.client.LeafException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

/**
 * The refill machinery of one {@link IdPool}, shared by all its tags: one scheduler thread
 * ({@code <prefix>-refill}) and a fixed executor of {@code refillThreads} lease threads
 * ({@code <prefix>-lease-<n>}), never a caller's thread and never one thread per tag. The
 * scheduler sleeps until woken (a prefetch point reached, a caller found nothing, a lease
 * finished), a retry is due, or the tick; then, per tag with no lease in flight:
 * <ol>
 *   <li>retires snowflake ranges that got too old: every range whose lease was requested at
 *       least {@code maxStaleness - tick} ago, so that, checked every tick, none is handed out
 *       more than {@code maxStaleness} after its lease was requested;
 *   <li>starts a lease, on a lease thread, when fewer than {@code depth} leases are queued
 *       behind the current range and a caller asked for one (at 10% of a lease, or with nothing
 *       left) or nothing is left. A new request (not a retry) first adapts the size to how long
 *       the previous lease lasted ({@link Sizing}; a lease callers waited for counts as lasting
 *       zero);
 *   <li>when the lease answers, credits the ranges (checked: a malformed answer, or snowflake
 *       ranges that arrive already too old, are a failed lease) and wakes the waiters; or
 *       records the failure, wakes the waiters (a refused lease fails them at once) and retries
 *       after a capped exponential backoff ({@code retryMin} doubling to {@code retryMax}) while
 *       IDs are wanted.
 * </ol>
 * A tag has at most one lease in flight; different tags' leases run side by side, at most
 * {@code 4 * refillThreads} at once (the pool's tags take turns when more are due, so 1,000 tags
 * never make 1,000 requests at once). A source with {@link LeaseSource#leaseAsync} (a
 * {@link io.leaf.client.LeafClient}'s) holds no thread while its request is out: a stalled
 * node delays only the tags it serves (each holding one of the in-flight places). A blocking
 * source holds one lease thread per lease in flight, so a tag whose leases stall takes one of
 * the {@code refillThreads} and the other tags go on with the rest.
 */
final class Refiller implements Runnable {
    /**
     * One tag's lease state: touched by the scheduler while no lease is in flight, and by the
     * lease's threads while one is ({@link #inFlight} hands it over).
     */
    static final class Lessee {
        volatile boolean inFlight;
        /** The lease in flight, cancelled by {@link Refiller#close}. */
        volatile CompletableFuture<List<IdRange>> pending;
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

    /** Leases in flight at once per lease thread (so 16 with the default 4 threads). */
    static final int MAX_IN_FLIGHT_PER_THREAD = 4;

    private final LeaseSource source;
    private final PoolOptions options;
    private final CopyOnWriteArrayList<Lessee> lessees = new CopyOnWriteArrayList<>();
    private final Thread thread;
    private final ExecutorService leasers;
    /** Leases in flight, all tags together, at most {@link #maxInFlight}. */
    private final AtomicInteger leasing = new AtomicInteger();
    private final int maxInFlight;
    private volatile boolean closed;

    /** A refiller whose threads' names start with {@code prefix + "-"}. */
    Refiller(LeaseSource source, PoolOptions options, String prefix) {
        this.source = source;
        this.options = options;
        this.maxInFlight = MAX_IN_FLIGHT_PER_THREAD * options.refillThreads();
        this.thread = new Thread(this, prefix + "-refill");
        thread.setDaemon(true);
        AtomicInteger n = new AtomicInteger();
        this.leasers = Executors.newFixedThreadPool(options.refillThreads(), r -> {
            Thread t = new Thread(r, prefix + "-lease-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        });
    }

    void start() {
        thread.start();
    }

    /** Wakes the scheduler (a caller wants a lease, or a lease finished). */
    void wake() {
        LockSupport.unpark(thread);
    }

    void add(Lessee lessee) {
        lessees.add(lessee);
        wake();
    }

    /** Stops the scheduler and the lease threads (leases in flight are interrupted), waiting at most {@code wait}. */
    void close(Duration wait) throws InterruptedException {
        closed = true;
        thread.interrupt();
        leasers.shutdownNow();
        for (Lessee s : lessees) {
            CompletableFuture<List<IdRange>> p = s.pending;
            if (p != null) {
                p.cancel(true);
            }
        }
        long end = System.nanoTime() + wait.toNanos();
        thread.join(Math.max(1, wait.toMillis()));
        leasers.awaitTermination(Math.max(0, end - System.nanoTime()), TimeUnit.NANOSECONDS);
    }

    @Override
    public void run() {
        long staleAfter = options.maxStaleness().minus(options.tick()).toNanos();
        long tick = options.tick().toNanos();
        int cursor = 0;
        while (!closed) {
            long now = System.nanoTime();
            long sleep = tick;
            Lessee[] all = lessees.toArray(new Lessee[0]);
            int n = all.length;
            int from = n == 0 ? 0 : cursor % n;
            boolean full = false;
            for (int k = 0; k < n; k++) {
                if (closed) {
                    return;
                }
                Lessee s = all[(from + k) % n];
                TagBuffer b = s.buffer;
                if (b.kind == IdKind.SNOWFLAKE) {
                    b.retireLeasedUntil(now - staleAfter);
                }
                if (s.inFlight) {
                    continue;
                }
                boolean due = !s.retryPending || now - s.retryAt >= 0;
                if (due && b.queuedLeases() < options.depth() && (b.wanted || b.empty())) {
                    if (leasing.get() >= maxInFlight) {
                        if (!full) {
                            full = true;
                            cursor = (from + k) % n; // the next pass starts with the first tag left waiting
                        }
                        continue; // woken when a lease finishes
                    }
                    s.inFlight = true;
                    leasing.incrementAndGet();
                    try {
                        leasers.execute(() -> lease(s, staleAfter));
                    } catch (RejectedExecutionException e) {
                        return; // closed
                    }
                } else if (s.retryPending && s.retryAt - now > 0) {
                    sleep = Math.min(sleep, s.retryAt - now);
                }
            }
            if (!full && n > 0) {
                cursor = (from + 1) % n;
            }
            if (sleep > 0 && !closed) {
                LockSupport.parkNanos(this, sleep);
            }
        }
    }

    /**
     * On a lease thread: sizes and sends {@code s}'s lease; it finishes in {@link #leased} (maybe
     * on another thread). Whatever is thrown here (by the source, even an {@link Error}) is a
     * failed lease: the tag's in-flight mark and the in-flight count are always released, so the
     * tag is leased again.
     */
    private void lease(Lessee s, long staleAfter) {
        boolean handedOver = false;
        try {
            handedOver = send(s, staleAfter);
        } catch (Throwable t) {
            try {
                if (!closed) {
                    failed(s, new LeafException("a lease failed: " + t, t));
                }
            } catch (Throwable ignored) {
                // released below all the same
            }
        } finally {
            if (!handedOver) {
                s.pending = null;
                s.inFlight = false;
                leasing.decrementAndGet();
                wake();
            }
        }
    }

    /** Sends the lease; true once its completion (which releases the tag) is registered. */
    private boolean send(Lessee s, long staleAfter) {
        TagBuffer b = s.buffer;
        long now = System.nanoTime();
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
        CompletableFuture<List<IdRange>> answer;
        try {
            answer = source.leaseAsync(b.kind, b.name, size);
            if (answer == null) {
                answer = CompletableFuture.failedFuture(new NullPointerException("leaseAsync returned null"));
            }
        } catch (Throwable e) { // an Error too: a failed lease, never a tag stuck in flight
            answer = CompletableFuture.failedFuture(e);
        }
        s.pending = answer;
        if (closed) {
            answer.cancel(true);
        }
        answer.whenComplete((ranges, t) -> {
            s.pending = null;
            try {
                leased(s, size, sent, staleAfter, ranges, t);
            } finally {
                s.inFlight = false;
                leasing.decrementAndGet();
                wake();
            }
        });
        return true;
    }

    private void leased(Lessee s, int size, long sent, long staleAfter, List<IdRange> ranges, Throwable t) {
        TagBuffer b = s.buffer;
        if (closed) {
            return; // the pool is closed: an answer's IDs are a gap
        }
        if (t != null) {
            Throwable c = t instanceof CompletionException && t.getCause() != null ? t.getCause() : t;
            failed(s, c instanceof LeafException ? (LeafException) c : new LeafException("a lease failed: " + c, c));
            return;
        }
        try {
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
            failed(s, e);
        } catch (RuntimeException e) {
            failed(s, new LeafException("a lease failed: " + e, e));
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

    /**
     * Records a failed lease. Unavailable or garbled (or a plain failure of a source): tried
     * again. A refusal (unknown tag, bad token, TLS setup): permanent, callers fail at once.
     */
    private void failed(Lessee s, LeafException e) {
        boolean retryable = e.isUnavailable() || e instanceof LeafDecodeException || e.getClass() == LeafException.class;
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
