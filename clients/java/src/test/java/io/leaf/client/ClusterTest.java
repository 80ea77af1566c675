package io.leaf.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.leaf.client.pool.IdKind;
import io.leaf.client.pool.IdPool;
import io.leaf.client.pool.PoolOptions;
import io.leaf.client.pool.TagPool;
import io.leaf.client.pool.TagStats;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** A 3-node TLS cluster: HTTPS with the CA and without it, and the pool's failover over kill -9. */
class ClusterTest {

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void httpsWithTheClusterCaAndATlsErrorWithoutIt() throws Exception {
        try (LeafNodes cluster = LeafNodes.tlsCluster()) {
            try {
                List<String> urls = List.of(cluster.url(1), cluster.url(2), cluster.url(3));
                try (LeafClient c = LeafClient.builder().nodes(urls).caCert(cluster.ca()).token(LeafNodes.TOKEN).build()) {
                    c.createTag(CreateTag.of("java-tls", 100));
                    long[] ids = c.nextIds("java-tls", 10);
                    assertEquals(10, ids.length);
                    assertTrue(c.health().ready());
                }
                // No CA: the JVM's default trust store does not know the cluster's CA.
                try (LeafClient c = LeafClient.builder().nodes(urls).retries(10)
                        .backoff(Duration.ofMillis(5), Duration.ofMillis(10)).build()) {
                    long started = System.nanoTime();
                    AllNodesFailedException e = assertThrows(AllNodesFailedException.class, () -> c.nextId("java-tls"));
                    assertInstanceOf(LeafTlsException.class, e.last());
                    assertEquals(3, e.attempts(), "one handshake per node, then it gives up");
                    assertFalse(e.isUnavailable());
                    assertTrue(System.nanoTime() - started < TimeUnit.SECONDS.toNanos(10));
                }
                // One node, no CA: the TLS error itself.
                try (LeafClient c = LeafClient.builder().nodes(cluster.url(1)).build()) {
                    LeafTlsException e = assertThrows(LeafTlsException.class, () -> c.nextId("java-tls"));
                    assertTrue(e.getMessage().contains("CA"), e.getMessage());
                }
            } catch (Throwable t) {
                cluster.dumpLogs();
                throw t;
            }
        }
    }

    /** An application thread: nextId() 200 at a time, then 1 ms of sleep, until stopped. */
    private static Thread appThread(TagPool pool, AtomicBoolean stop, AtomicLong progress, List<long[]> out,
            ConcurrentLinkedQueue<String> errors) {
        Thread t = new Thread(() -> {
            long[] ids = new long[1 << 16];
            int n = 0;
            while (!stop.get()) {
                for (int i = 0; i < 200; i++) {
                    try {
                        long id = pool.nextId();
                        if (n == ids.length) {
                            ids = java.util.Arrays.copyOf(ids, n * 2);
                        }
                        ids[n++] = id;
                    } catch (LeafException e) {
                        errors.add(e.toString());
                    }
                }
                progress.addAndGet(200);
                try {
                    Thread.sleep(1);
                } catch (InterruptedException e) {
                    break;
                }
            }
            synchronized (out) {
                out.add(java.util.Arrays.copyOf(ids, n));
            }
        });
        t.start();
        return t;
    }

    private static void waitProgress(AtomicLong progress, long more, String what) throws InterruptedException {
        long from = progress.get();
        LeafNodes.waitFor(Duration.ofSeconds(60), more + " IDs " + what, () -> progress.get() >= from + more);
    }

    /**
     * Every ID in {@code ids} lies in a range {@code [start, end)} the cluster committed for
     * {@code tag}, as node {@code id} (never killed: its journal is complete) applied them.
     */
    private static void assertInsideCommittedAllocations(LeafNodes cluster, int id, String tag, long[] ids) {
        Map<String, Object> journal;
        try (LeafClient admin = cluster.client(id)) {
            Answer a = admin.execute(Call.get("/admin/allocations?tag=" + tag));
            journal = Json.parseObject(new String(a.body(), StandardCharsets.UTF_8));
        }
        assertEquals(0L, Json.lng(journal, "complete_from_index"), "node " + id + "'s journal is complete");
        List<long[]> ranges = new ArrayList<>();
        for (Object o : Json.arr(journal, "allocations")) {
            @SuppressWarnings("unchecked")
            Map<String, Object> r = (Map<String, Object>) o;
            ranges.add(new long[] {Json.lng(r, "start"), Json.lng(r, "end")});
        }
        ranges.sort((x, y) -> Long.compare(x[0], y[0]));
        long[] starts = ranges.stream().mapToLong(r -> r[0]).toArray();
        for (long v : ids) {
            int i = java.util.Arrays.binarySearch(starts, v);
            int at = i >= 0 ? i : -i - 2;
            assertTrue(at >= 0 && v < ranges.get(at)[1], "ID " + v + " is in no allocation the cluster committed");
        }
    }

    private static void assertDistinct(long[] ids, String what) {
        long[] sorted = ids.clone();
        java.util.Arrays.sort(sorted);
        for (int i = 1; i < sorted.length; i++) {
            assertTrue(sorted[i] != sorted[i - 1], "duplicate " + what + " ID " + sorted[i]);
        }
    }

    @Test
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void aPoolRidesOverKill9OfTheLeaderAndOfItsOwnNodeWithZeroErrors() throws Exception {
        try (LeafNodes cluster = LeafNodes.tlsCluster()) {
            try {
                int leader = cluster.waitLeader(List.of(1, 2, 3), Duration.ofSeconds(30));
                try (LeafClient admin = cluster.client(leader)) {
                    admin.createTag(CreateTag.of("java-pooled", 1000));
                }
                int follower = leader == 1 ? 2 : 1;
                int other = 6 - leader - follower;
                String dead = "https://127.0.0.1:" + LeafNodes.freePort();
                List<String> urls = List.of(dead, cluster.url(follower), cluster.url(leader), cluster.url(other));
                LeafClient client = LeafClient.builder().nodes(urls).caCert(cluster.ca())
                        .timeout(Duration.ofSeconds(2)).deadline(Duration.ofSeconds(8)).retries(10)
                        .backoff(Duration.ofMillis(20), Duration.ofMillis(300)).build();
                PoolOptions options = PoolOptions.builder().leasePeriod(Duration.ofMillis(300)).initialLease(500)
                        .maxLease(50_000).maxWait(Duration.ofSeconds(10)).build();
                AtomicBoolean stop = new AtomicBoolean();
                AtomicLong progress = new AtomicLong();
                List<long[]> taken = new ArrayList<>();
                ConcurrentLinkedQueue<String> errors = new ConcurrentLinkedQueue<>();
                List<Thread> threads = new ArrayList<>();
                try (client; IdPool pool = IdPool.create(client, options)) {
                    TagPool pooled = pool.segment("java-pooled");
                    for (int i = 0; i < 2; i++) {
                        threads.add(appThread(pooled, stop, progress, taken, errors));
                    }
                    List<long[]> flakes = new ArrayList<>();
                    threads.add(appThread(pool.snowflake("java-pooled-key"), stop, new AtomicLong(), flakes, errors));
                    try {
                        waitProgress(progress, 50_000, "before the kill");
                        cluster.kill9(leader);
                        int second = cluster.waitLeader(List.of(follower, other), Duration.ofSeconds(60));
                        waitProgress(progress, 100_000, "after the kill (new leader " + second + ")");
                        // Then the node the pool talks to: its client fails over to the others.
                        cluster.restart(leader);
                        cluster.waitLeader(List.of(1, 2, 3), Duration.ofSeconds(60));
                        waitProgress(progress, 50_000, "after the old leader's restart");
                        cluster.kill9(follower);
                        cluster.waitLeader(List.of(leader, other), Duration.ofSeconds(60));
                        waitProgress(progress, 100_000, "after the kill of the pool's node " + follower);
                    } finally {
                        stop.set(true);
                        for (Thread t : threads) {
                            t.join(30_000);
                        }
                    }
                    TagStats stats = pool.stats().get(IdKind.SEGMENT, "java-pooled").orElseThrow();
                    System.err.println("failover: " + stats);
                    assertTrue(errors.isEmpty(), "the application saw " + errors.size() + " errors, first: "
                            + errors.peek());
                    long total = taken.stream().mapToLong(a -> a.length).sum();
                    long[] all = new long[(int) total];
                    int at = 0;
                    for (long[] a : taken) {
                        System.arraycopy(a, 0, all, at, a.length);
                        at += a.length;
                    }
                    assertDistinct(all, "segment");
                    assertInsideCommittedAllocations(cluster, other, "java-pooled", all);
                    long[] flakeIds = flakes.get(0);
                    assertTrue(flakeIds.length > 0, "the snowflake thread took no ID");
                    assertDistinct(flakeIds, "snowflake");
                    assertTrue(total >= 300_000, "took " + total);
                    assertTrue(stats.leasesOk() >= 10, stats.toString());
                }
            } catch (Throwable t) {
                cluster.dumpLogs();
                throw t;
            }
        }
    }
}
