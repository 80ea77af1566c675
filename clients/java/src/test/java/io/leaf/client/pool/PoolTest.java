package io.leaf.client.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.leaf.client.IdRange;
import io.leaf.client.LeafApiException;
import io.leaf.client.LeafException;
import io.leaf.client.PoolExhaustedException;
import io.leaf.client.PoolRejectedException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The pool against fake lease sources: no server. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class PoolTest {
    /** Hands out consecutive IDs from 1, each lease split in two ranges with a gap between leases. */
    static final class Sequential implements LeaseSource {
        final AtomicLong next = new AtomicLong(1);
        final AtomicInteger leases = new AtomicInteger();
        final long delayMillis;

        Sequential(long delayMillis) {
            this.delayMillis = delayMillis;
        }

        @Override
        public List<IdRange> lease(IdKind kind, String name, int count) {
            sleep(delayMillis);
            leases.incrementAndGet();
            long start = next.getAndAdd(count + 7L); // 7 IDs of gap, never handed out
            int half = count / 2;
            List<IdRange> out = new ArrayList<>();
            if (half > 0) {
                out.add(new IdRange(start, start + half));
            }
            out.add(new IdRange(start + half, start + count));
            return out;
        }
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new LeafException("interrupted");
        }
    }

    private static PoolOptions.Builder small() {
        return PoolOptions.builder().minLease(10).initialLease(100).maxLease(5_000).leasePeriod(Duration.ofMillis(50));
    }

    @ParameterizedTest
    @ValueSource(ints = {1, 64})
    void everyIdOnceUnderManyThreads(int chunk) throws Exception {
        Sequential source = new Sequential(0);
        int threads = 8;
        int each = 100_000;
        long[][] got = new long[threads][each];
        try (IdPool pool = IdPool.create(source, small().localChunk(chunk).build())) {
            TagPool tag = pool.segment("t");
            List<Thread> ts = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int me = t;
                Thread th = new Thread(() -> {
                    for (int i = 0; i < each; i++) {
                        got[me][i] = tag.nextId();
                    }
                });
                th.start();
                ts.add(th);
            }
            for (Thread th : ts) {
                th.join();
            }
            long[] all = Arrays.stream(got).flatMapToLong(Arrays::stream).sorted().toArray();
            for (int i = 1; i < all.length; i++) {
                assertTrue(all[i] != all[i - 1], "duplicate " + all[i]);
            }
            assertTrue(all[0] >= 1 && all[all.length - 1] < source.next.get(), "every ID from a leased range");
            TagStats s = pool.stats().get(IdKind.SEGMENT, "t").orElseThrow();
            assertTrue(s.leasesOk() >= 2, s.toString());
            assertEquals(s.idsLeased(), s.idsServed() + s.idsBuffered() + s.idsRetired(), s.toString());
        }
    }

    @Test
    void leasesGrowWhenCallersWait() throws Exception {
        // Each lease takes 60 ms, far above the 20 ms period: measured by time alone the size would
        // halve, but callers wait for every lease, so it must double instead.
        Sequential source = new Sequential(60);
        PoolOptions o = PoolOptions.builder().minLease(100).initialLease(100).maxLease(100_000)
                .leasePeriod(Duration.ofMillis(20)).localChunk(1).build();
        try (IdPool pool = IdPool.create(source, o)) {
            TagPool tag = pool.segment("t");
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            TagStats s = tag.stats();
            while (s.lastLeaseSize() < 1600 && System.nanoTime() < end) {
                for (int i = 0; i < 1000; i++) {
                    tag.nextId();
                }
                s = tag.stats();
            }
            assertTrue(s.lastLeaseSize() >= 1600, "leases grew: " + s);
            assertTrue(s.waits() > 0, s.toString());
        }
    }

    @Test
    void sizingDoublesHalvesAndStaysInBounds() {
        Sizing s = new Sizing(10, 1_000_000, Duration.ofSeconds(1));
        assertEquals(2000, s.adapt(1000, Duration.ofMillis(499)));
        assertEquals(1000, s.adapt(1000, Duration.ofMillis(500)));
        assertEquals(1000, s.adapt(1000, Duration.ofSeconds(2)));
        assertEquals(500, s.adapt(1000, Duration.ofMillis(2001)));
        assertEquals(1_000_000, s.adapt(800_000, Duration.ZERO));
        assertEquals(10, s.adapt(15, Duration.ofSeconds(10)));
        assertEquals(1_000_000, s.adapt(Integer.MAX_VALUE, Duration.ofSeconds(1)));
        assertEquals(Duration.ofMillis(50), Refiller.backoff(1, Duration.ofMillis(50), Duration.ofSeconds(1)));
        assertEquals(Duration.ofMillis(400), Refiller.backoff(4, Duration.ofMillis(50), Duration.ofSeconds(1)));
        assertEquals(Duration.ofSeconds(1), Refiller.backoff(1000, Duration.ofMillis(50), Duration.ofSeconds(1)));
    }

    @Test
    void exhaustedAfterMaxWaitWhenTheSourceFails() throws Exception {
        AtomicInteger calls = new AtomicInteger();
        LeaseSource down = (kind, name, count) -> {
            calls.incrementAndGet();
            throw new LeafException("every node is down");
        };
        try (IdPool pool = IdPool.create(down, small().maxWait(Duration.ofMillis(300)).build())) {
            TagPool tag = pool.segment("t");
            long started = System.nanoTime();
            PoolExhaustedException e = assertThrows(PoolExhaustedException.class, tag::nextId);
            long waited = System.nanoTime() - started;
            assertTrue(waited >= TimeUnit.MILLISECONDS.toNanos(290), "waited " + waited);
            assertTrue(e.getMessage().contains("every node is down"), e.getMessage());
            assertTrue(calls.get() >= 2, "the failed lease is retried with backoff");
            TagStats s = tag.stats();
            assertEquals(1, s.exhausted());
            assertTrue(s.leasesFailed() >= 2);
        }
    }

    /** A refusal the way a node answers it (404 tag_not_found). */
    static final class Refused extends LeafApiException {
        private static final long serialVersionUID = 1L;

        Refused() {
            super("n", 404, "tag_not_found", "no such tag", null, null);
        }
    }

    @Test
    void aRefusedLeaseFailsCallersAtOnce() throws Exception {
        LeaseSource refusing = (kind, name, count) -> {
            throw new Refused();
        };
        try (IdPool pool = IdPool.create(refusing, small().maxWait(Duration.ofSeconds(20)).build())) {
            TagPool tag = pool.segment("t");
            long started = System.nanoTime();
            PoolRejectedException e = assertThrows(PoolRejectedException.class, tag::nextId);
            assertTrue(System.nanoTime() - started < TimeUnit.SECONDS.toNanos(10), "not after maxWait");
            assertInstanceOf(Refused.class, e.getCause());
        }
    }

    @Test
    void snowflakeIdsAreNeverHandedOutFromAStaleRange() throws Exception {
        AtomicInteger leases = new AtomicInteger();
        LeaseSource flakes = (kind, name, count) -> {
            assertEquals(IdKind.SNOWFLAKE, kind);
            long start = leases.incrementAndGet() * 10_000_000L;
            return List.of(new IdRange(start, start + count));
        };
        PoolOptions o = small().maxStaleness(Duration.ofMillis(300)).tick(Duration.ofMillis(50)).build();
        try (IdPool pool = IdPool.create(flakes, o)) {
            TagPool key = pool.snowflake("k");
            long first = key.nextId(); // this thread now holds a local chunk of the first lease
            long firstLease = first / 10_000_000L;
            // Past maxStaleness the scheduler retires the first lease (and this thread's chunk of it).
            io.leaf.client.LeafNodes.waitFor(Duration.ofSeconds(10), "the first lease retired",
                    () -> key.stats().idsRetired() > 0);
            long later = key.nextId();
            assertTrue(later / 10_000_000L > firstLease, "an ID of a newer lease, got " + later + " after " + first);
            TagStats s = key.stats();
            assertTrue(s.idsRetired() > 0, s.toString());
        }
    }

    @Test
    void closeStopsTheRefillAndFailsLaterWaits() throws Exception {
        Sequential source = new Sequential(0);
        IdPool pool = IdPool.create(source, small().localChunk(1).build());
        TagPool tag = pool.segment("t");
        tag.nextId();
        pool.close();
        int after = source.leases.get();
        // Once the pool's threads are gone, nothing can lease any more.
        String prefix = pool.threadNamePrefix();
        io.leaf.client.LeafNodes.waitFor(Duration.ofSeconds(10), "the pool's threads to end",
                () -> Thread.getAllStackTraces().keySet().stream().noneMatch(t -> t.getName().startsWith(prefix)));
        assertEquals(after, source.leases.get(), "no lease after close");
        assertThrows(PoolExhaustedException.class, () -> {
            for (int i = 0; i < 1_000_000; i++) {
                tag.nextId();
            }
        });
        assertThrows(IllegalStateException.class, () -> pool.segment("other"));
    }

    /** Finding: after close, a snowflake key handed out buffered IDs of any age (nothing retired them). */
    @Test
    void afterCloseNoSnowflakeIdIsHandedOut() throws Exception {
        AtomicInteger leases = new AtomicInteger();
        LeaseSource flakes = (kind, name, count) -> {
            long start = leases.incrementAndGet() * 10_000_000L;
            return List.of(new IdRange(start, start + count));
        };
        PoolOptions o = small().maxStaleness(Duration.ofMillis(300)).tick(Duration.ofMillis(50)).build();
        IdPool pool = IdPool.create(flakes, o);
        TagPool key = pool.snowflake("k");
        TagPool seg = pool.segment("s");
        key.nextId(); // this thread holds a local chunk of the lease, and the buffer holds the rest
        long segId = seg.nextId();
        pool.close();
        // Neither this thread's chunk nor the buffer's ranges: nothing would retire them for age.
        assertThrows(PoolExhaustedException.class, key::nextId);
        Thread other = new Thread(() -> assertThrows(PoolExhaustedException.class, key::nextId));
        java.util.concurrent.atomic.AtomicReference<Throwable> failed = new java.util.concurrent.atomic.AtomicReference<>();
        other.setUncaughtExceptionHandler((t, e) -> failed.set(e));
        other.start();
        other.join();
        assertEquals(null, failed.get(), "another thread got a snowflake ID after close");
        assertTrue(key.stats().idsRetired() > 0, key.stats().toString());
        assertEquals(0, key.stats().idsBuffered(), key.stats().toString());
        // Segment IDs still buffered are still handed out (as documented).
        assertTrue(seg.nextId() > segId);
    }

    /** Finding: an Error thrown by the source escaped the lease thread and left the tag in flight forever. */
    @Test
    void anErrorFromTheSourceIsAFailedLeaseAndTheTagRecovers() throws Exception {
        Sequential ok = new Sequential(0);
        AtomicInteger calls = new AtomicInteger();
        LeaseSource flaky = (kind, name, count) -> {
            if (calls.incrementAndGet() == 1) {
                throw new AssertionError("a broken source");
            }
            return ok.lease(kind, name, count);
        };
        PoolOptions o = small().maxWait(Duration.ofSeconds(20)).retry(Duration.ofMillis(10), Duration.ofMillis(50)).build();
        try (IdPool pool = IdPool.create(flaky, o)) {
            TagPool tag = pool.segment("t");
            long started = System.nanoTime();
            assertTrue(tag.nextId() > 0);
            assertTrue(System.nanoTime() - started < TimeUnit.SECONDS.toNanos(10), "served after a retry, not maxWait");
            TagStats s = tag.stats();
            assertEquals(1, s.leasesFailed(), s.toString());
            assertTrue(calls.get() >= 2);
            io.leaf.client.LeafNodes.waitFor(Duration.ofSeconds(10), "the lease counted", () -> tag.stats().leasesOk() >= 1);
        }
    }

    @Test
    void optionsAndNamesAreChecked() throws Exception {
        assertThrows(IllegalArgumentException.class, () -> PoolOptions.builder().minLease(0).build());
        assertThrows(IllegalArgumentException.class, () -> PoolOptions.builder().initialLease(5).build());
        assertThrows(IllegalArgumentException.class, () -> PoolOptions.builder().maxLease(2_000_000).build());
        assertThrows(IllegalArgumentException.class,
                () -> PoolOptions.builder().tick(Duration.ofSeconds(2)).build());
        try (IdPool pool = IdPool.create(new Sequential(0), PoolOptions.defaults())) {
            assertThrows(IllegalArgumentException.class, () -> pool.segment("bad tag"));
            assertTrue(pool.segment("ok") == pool.segment("ok"), "one handle per tag");
        }
    }
}
