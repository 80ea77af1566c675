package io.leaf.client.pool;

import io.leaf.client.IdRange;
import io.leaf.client.LeafException;
import io.leaf.client.PoolExhaustedException;
import io.leaf.client.PoolRejectedException;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One tag's buffer of leased ranges: the {@link Range} being handed out ({@code current}) and
 * the ranges queued behind it.
 *
 * <p><b>The hit path</b> ({@link #take}) reads {@code current} (a volatile field) and claims
 * tickets with one {@code getAndAdd}: no lock, allocation or clock. <b>The slow path</b>, under
 * {@code lock}, switches to the next queued range once {@code current} is used up (every ticket
 * of it claimed, so no ID of it is lost or repeated), or reports the buffer empty; callers then
 * wait on {@code ready} for the refiller, which appends leases under the same lock.
 */
final class TagBuffer {
    final IdKind kind;
    final String name;
    final String what;
    private final Duration maxWait;
    private final Runnable wakeRefill;

    private volatile Range current = Range.EMPTY;
    private final ArrayDeque<Range> queued = new ArrayDeque<>();
    private long tailLease;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition ready = lock.newCondition();

    /** A caller asked for the next lease (reached a prefetch point, or found nothing). */
    volatile boolean wanted = true;
    /** The last lease's failure, cleared by a successful lease. */
    volatile LeafException failure;
    volatile boolean failurePermanent;
    private volatile boolean closed;

    final AtomicLong leased = new AtomicLong();
    final AtomicLong retired = new AtomicLong();
    final AtomicLong leasesOk = new AtomicLong();
    final AtomicLong leasesFailed = new AtomicLong();
    final AtomicLong waits = new AtomicLong();
    final AtomicLong waitNanos = new AtomicLong();
    final AtomicLong exhausted = new AtomicLong();
    final AtomicLong rejected = new AtomicLong();
    volatile long lastLeaseSize;
    volatile long leaseTarget;
    volatile double rate;

    TagBuffer(IdKind kind, String name, Duration maxWait, Runnable wakeRefill) {
        this.kind = kind;
        this.name = name;
        this.what = kind + " IDs of '" + name + "'";
        this.maxWait = maxWait;
        this.wakeRefill = wakeRefill;
    }

    /** Claims up to {@code n} IDs into {@code run}; false when nothing is buffered. Lock-free on a hit. */
    boolean take(LocalRun run, long n) {
        Range r = current;
        long k = r.take(n);
        if (k < r.len) {
            hit(run, r, k, n);
            return true;
        }
        return takeSlow(run, n);
    }

    private void hit(LocalRun run, Range r, long k, long n) {
        long count = Math.min(n, r.len - k);
        run.set(r, r.start + k, r.start + k + count);
        if (r.prefetchAt >= k && r.prefetchAt < k + count) {
            want();
        }
    }

    private boolean takeSlow(LocalRun run, long n) {
        lock.lock();
        try {
            return takeLocked(run, n);
        } finally {
            lock.unlock();
        }
    }

    /** Under the lock: takes from {@code current}, switching to queued ranges as they are used up. */
    private boolean takeLocked(LocalRun run, long n) {
        while (true) {
            Range r = current;
            long k = r.take(n);
            if (k < r.len) {
                hit(run, r, k, n);
                return true;
            }
            Range next = queued.poll();
            if (next == null) {
                want();
                return false;
            }
            current = next;
        }
    }

    /** Takes {@code n} IDs, waiting up to {@code maxWait} for a lease when nothing is buffered. */
    void takeWaiting(LocalRun run, long n) {
        if (take(run, n)) {
            return;
        }
        long started = System.nanoTime();
        waits.incrementAndGet();
        lock.lock();
        try {
            long left = maxWait.toNanos();
            while (true) {
                if (takeLocked(run, n)) {
                    return;
                }
                if (closed) {
                    throw new PoolExhaustedException(what);
                }
                LeafException f = failure;
                if (f != null && failurePermanent) {
                    rejected.incrementAndGet();
                    throw new PoolRejectedException(what, f);
                }
                if (left <= 0) {
                    exhausted.incrementAndGet();
                    throw new PoolExhaustedException(what, maxWait, f);
                }
                try {
                    left = ready.awaitNanos(left);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new PoolExhaustedException(what, Duration.ofNanos(System.nanoTime() - started), f);
                }
            }
        } finally {
            lock.unlock();
            waitNanos.addAndGet(System.nanoTime() - started);
        }
    }

    /** Asks the refiller for the next lease. */
    void want() {
        wanted = true;
        wakeRefill.run();
    }

    /** Leases queued behind the current range. */
    long queuedLeases() {
        lock.lock();
        try {
            return queued.isEmpty() ? 0 : tailLease - current.lease;
        } finally {
            lock.unlock();
        }
    }

    /** Whether nothing is left to take. */
    boolean empty() {
        lock.lock();
        try {
            return queued.isEmpty() && current.left() == 0;
        } finally {
            lock.unlock();
        }
    }

    /** IDs leased and not taken. */
    long buffered() {
        lock.lock();
        try {
            long n = current.left();
            for (Range r : queued) {
                n += r.left();
            }
            return n;
        } finally {
            lock.unlock();
        }
    }

    /** Appends lease {@code lease} (its {@code ranges}, checked, of {@code size} IDs) and wakes the waiters. */
    void credit(List<IdRange> ranges, long size, long lease, long leasedAt) {
        long prefetch = Math.max(0, size / 10);
        lock.lock();
        try {
            if (closed) {
                return; // the pool is closed: a late answer's IDs are a gap
            }
            long offset = 0;
            for (IdRange r : ranges) {
                long len = r.count();
                long at = prefetch >= offset && prefetch < offset + len ? prefetch - offset : -1;
                queued.add(new Range(r.start(), len, lease, leasedAt, at));
                offset += len;
            }
            tailLease = lease;
            leased.addAndGet(size);
            ready.signalAll();
        } finally {
            lock.unlock();
        }
    }

    /** Retires every range leased at or before {@code cutoff} (snowflake freshness); returns how many IDs. */
    long retireLeasedUntil(long cutoff) {
        lock.lock();
        try {
            long n = 0;
            Range c = current;
            if (c.len > 0 && c.leasedAt - cutoff <= 0) {
                n += c.retire();
            }
            while (!queued.isEmpty() && queued.peekFirst().leasedAt - cutoff <= 0) {
                Range r = queued.pollFirst();
                n += r.retire();
            }
            retired.addAndGet(n);
            return n;
        } finally {
            lock.unlock();
        }
    }

    /** Wakes the waiters (a lease failed: a permanent failure fails them at once). */
    void notifyWaiters() {
        lock.lock();
        try {
            ready.signalAll();
        } finally {
            lock.unlock();
        }
    }

    /**
     * Fails every waiter and every later wait on an empty buffer. A snowflake buffer is retired
     * whole (current range, queued ranges and, through {@link Range#retired}, the threads' local
     * runs): with the refiller stopped nothing would retire its ranges for age, so a closed
     * pool hands out no snowflake ID at all. A segment buffer keeps handing out what it holds.
     */
    void close() {
        lock.lock();
        try {
            closed = true;
            if (kind == IdKind.SNOWFLAKE) {
                long n = current.len > 0 ? current.retire() : 0;
                for (Range r = queued.poll(); r != null; r = queued.poll()) {
                    n += r.retire();
                }
                retired.addAndGet(n);
            }
            ready.signalAll();
        } finally {
            lock.unlock();
        }
    }

    boolean isClosed() {
        return closed;
    }

    TagStats stats() {
        long buffered = buffered();
        long l = leased.get();
        long r = retired.get();
        return new TagStats(kind, name, Math.max(0, l - r - buffered), l, r, buffered, leasesOk.get(),
                leasesFailed.get(), lastLeaseSize, leaseTarget, rate, waits.get(),
                Duration.ofNanos(waitNanos.get()), exhausted.get(), rejected.get());
    }
}
