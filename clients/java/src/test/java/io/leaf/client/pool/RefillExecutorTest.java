package io.leaf.client.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.leaf.client.CreateTag;
import io.leaf.client.CreateTagsResult;
import io.leaf.client.IdRange;
import io.leaf.client.LeafClient;
import io.leaf.client.LeafNodes;
import io.leaf.client.Stubs;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The pool's shared refill executor against a real node: a stalled tag delays no other; 1,000 tags on a few threads. */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class RefillExecutorTest {
    private static final String TAG = "leaf-segment-test";
    private static LeafNodes node;
    private static LeafClient client;

    @BeforeAll
    static void start() throws Exception {
        node = LeafNodes.single();
        client = LeafClient.builder().nodes(node.url(1)).token(LeafNodes.TOKEN).build();
    }

    @AfterAll
    static void stop() {
        if (client != null) {
            client.close();
        }
        if (node != null) {
            node.close();
        }
    }

    /** Live threads whose name starts with {@code prefix}. */
    static int threadsNamed(String prefix) {
        return (int) Thread.getAllStackTraces().keySet().stream()
                .filter(t -> t.isAlive() && t.getName().startsWith(prefix)).count();
    }

    /** Threads of the pool, counted by its thread-name prefix. */
    static int poolThreads(IdPool pool) {
        String prefix = pool.threadNamePrefix();
        return (int) Thread.getAllStackTraces().keySet().stream()
                .filter(t -> t.isAlive() && t.getName().startsWith(prefix)).count();
    }

    /**
     * Tag {@code stalled-*} leases from a node that accepts the connection and never answers
     * (a lease of it stays in flight for the whole test: 120 s timeout); every other tag from
     * the real node. {@code async}: through the client's async calls ({@code LeaseSource.of});
     * else a blocking source, which holds one of the pool's lease threads for the stalled lease.
     */
    private static LeaseSource routed(LeafClient stalled, boolean async) {
        LeaseSource hung = LeaseSource.of(stalled);
        LeaseSource real = LeaseSource.of(client);
        if (!async) {
            return (kind, name, count) -> (name.startsWith("stalled-") ? hung : real).lease(kind, name, count);
        }
        return new LeaseSource() {
            @Override
            public List<IdRange> lease(IdKind kind, String name, int count) {
                throw new AssertionError("the pool leases through leaseAsync");
            }

            @Override
            public CompletableFuture<List<IdRange>> leaseAsync(IdKind kind, String name, int count) {
                return (name.startsWith("stalled-") ? hung : real).leaseAsync(kind, name, count);
            }
        };
    }

    @ParameterizedTest(name = "async source: {0}")
    @ValueSource(booleans = {false, true})
    void aStalledTagDelaysNoOtherTagsRefill(boolean async) throws Exception {
        try (Stubs.Stalled hung = new Stubs.Stalled();
                LeafClient stalledClient = LeafClient.builder().nodes(hung.url()).timeout(Duration.ofSeconds(120))
                        .deadline(Duration.ofSeconds(120)).retries(0).build()) {
            // Leases of 50 IDs, one thread-local chunk of 1: 1,000 IDs take 20 leases of the healthy tag.
            PoolOptions o = PoolOptions.builder().minLease(50).initialLease(50).maxLease(50).localChunk(1)
                    .refillThreads(2).maxWait(Duration.ofSeconds(60)).build();
            Thread waiter;
            try (IdPool pool = IdPool.create(routed(stalledClient, async), o)) {
                TagPool stalled = pool.segment("stalled-orders"); // first in the pool's order
                LeafNodes.waitFor(Duration.ofSeconds(30), "the stalled tag's lease in flight", () -> hung.accepted() >= 1);
                long stalledSince = System.nanoTime();
                // A caller of the stalled tag waits (up to maxWait, 60 s) the whole time.
                waiter = new Thread(() -> {
                    try {
                        stalled.nextId();
                    } catch (io.leaf.client.PoolExhaustedException e) {
                        // the pool closed under it: expected
                    }
                }, "stalled-tag-caller");
                waiter.start();
                TagPool healthy = pool.segment(TAG);
                Set<Long> seen = new HashSet<>();
                long slowest = 0;
                for (int i = 0; i < 1000; i++) {
                    long t0 = System.nanoTime();
                    long id = healthy.nextId();
                    slowest = Math.max(slowest, System.nanoTime() - t0);
                    assertTrue(seen.add(id), "duplicate " + id);
                }
                // leasesOk is counted just after the IDs are credited: wait for the last lease's count.
                LeafNodes.waitFor(Duration.ofSeconds(30), "20 leases counted", () -> healthy.stats().leasesOk() >= 20);
                TagStats h = healthy.stats();
                TagStats s = stalled.stats();
                assertTrue(waiter.isAlive(), "the stalled tag's caller is still waiting");
                assertEquals(1, s.waits(), s.toString());
                long stalledFor = System.nanoTime() - stalledSince;
                System.out.printf("stalled tag (async source %s): healthy tag served 1000 IDs in %d leases, slowest "
                        + "nextId %d ms, waits %d (%d ms in all); the stalled lease in flight for %d ms; %d pool threads%n",
                        async, h.leasesOk(), slowest / 1_000_000, h.waits(), h.waitTime().toMillis(),
                        stalledFor / 1_000_000, poolThreads(pool));
                assertTrue(h.leasesOk() >= 20, "the healthy tag was refilled lease after lease: " + h);
                assertEquals(0, s.leasesOk() + s.leasesFailed(), "the stalled lease is still in flight: " + s);
                assertEquals(1, hung.accepted(), "one lease of the stalled tag at a time");
                // A wait is one lease's round trip to the real node, never the stalled lease's 120 s.
                assertTrue(slowest < TimeUnit.SECONDS.toNanos(5), "slowest nextId " + slowest / 1_000_000 + " ms");
                assertTrue(h.waitTime().compareTo(Duration.ofSeconds(15)) < 0, "waited in all " + h.waitTime());
                assertTrue(poolThreads(pool) <= o.refillThreads() + 1, "threads: " + poolThreads(pool));
            }
            waiter.join(TimeUnit.SECONDS.toMillis(30));
            assertTrue(!waiter.isAlive(), "closing the pool fails the waiting caller");
        }
    }

    @Test
    void aThousandTagsOnAFewThreads() throws Exception {
        long seed = System.nanoTime();
        System.out.println("aThousandTagsOnAFewThreads: seed " + seed);
        Random random = new Random(seed);
        int tags = 1000;
        List<CreateTag> batch = new ArrayList<>();
        for (int i = 0; i < tags; i++) {
            batch.add(CreateTag.of(String.format("pool-%04d", i), 10 + random.nextInt(90)));
        }
        CreateTagsResult created = client.admin().createTags(batch);
        assertEquals(tags, created.created().size());
        PoolOptions o = PoolOptions.builder().minLease(10).initialLease(10).maxLease(20).localChunk(1).build();
        int maxThreads = 0;
        int maxHttp = 0;
        try (IdPool pool = IdPool.create(client, o)) {
            List<TagPool> handles = new ArrayList<>();
            for (CreateTag c : batch) {
                handles.add(pool.segment(c.tag()));
            }
            Set<String> seen = new HashSet<>();
            // Every tag, in a random order, three times over: the pool serves all of them.
            for (int round = 0; round < 3; round++) {
                List<TagPool> order = new ArrayList<>(handles);
                java.util.Collections.shuffle(order, random);
                for (int i = 0; i < order.size(); i++) {
                    TagPool t = order.get(i);
                    long id = t.nextId();
                    assertTrue(seen.add(t.name() + "/" + id), "duplicate " + id + " of " + t.name());
                    if (i % 100 == 0) {
                        maxThreads = Math.max(maxThreads, poolThreads(pool));
                        maxHttp = Math.max(maxHttp, threadsNamed("leaf-http-"));
                    }
                }
            }
            maxThreads = Math.max(maxThreads, poolThreads(pool));
            assertEquals(3 * tags, seen.size());
            PoolStats stats = pool.stats();
            assertEquals(tags, stats.tags().size());
            assertTrue(stats.tags().stream().allMatch(s -> s.leasesOk() >= 1 && s.idsServed() >= 3), "every tag served");
            System.out.printf("%d pooled tags: %d IDs, all unique per tag; at most %d threads named %s* "
                    + "(refillThreads %d + the scheduler)%n", tags, seen.size(), maxThreads, pool.threadNamePrefix(),
                    o.refillThreads());
            System.out.printf("the client's HTTP threads (leaf-http-*, all clients of this JVM): at most %d%n", maxHttp);
            // Leases are capped at 4 per lease thread in flight: 1,000 tags never make 1,000
            // requests at once (uncapped, the client's cached HTTP executor grew past 170 threads).
            assertTrue(maxHttp < 100, "HTTP threads: " + maxHttp);
            assertTrue(maxThreads >= 2, "the threads were counted: " + maxThreads);
            assertTrue(maxThreads <= o.refillThreads() + 1, "threads of a pool of " + tags + " tags: " + maxThreads);
            // Per tag, IDs ascend: segment IDs of one tag are unique and increasing within a lease.
            for (TagPool t : handles.subList(0, 10)) {
                long a = t.nextId();
                long b = t.nextId();
                assertTrue(b != a, t.name());
            }
        }
    }
}
