package io.leaf.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The CompletableFuture API: the same calls, failover, deadline and retries as the blocking one, and cancellation. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class AsyncTest {
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

    private static <T> T get(CompletableFuture<T> f) throws Exception {
        return f.get(60, TimeUnit.SECONDS);
    }

    @Test
    void everyDataCallAnswersAsTheBlockingOne() throws Exception {
        AsyncLeafClient a = client.async();
        long one = get(a.nextId(TAG));
        long[] batch = get(a.nextIds(TAG, 20));
        assertEquals(20, batch.length);
        assertTrue(batch[0] > one);
        List<IdRange> ranges = get(a.ranges(TAG, 3000));
        assertEquals(3000, ranges.stream().mapToLong(IdRange::count).sum());
        long flake = get(a.snowflakeId("async-key"));
        assertEquals(10, get(a.snowflakeIds("async-key", 10)).length);
        assertEquals(500, get(a.snowflakeRanges("async-key", 500)).stream().mapToLong(IdRange::count).sum());
        assertEquals(flake, get(a.decodeSnowflake(flake)).id());
        assertTrue(get(a.health()).ready());
        HealthReport seg = get(a.health(HealthMode.SEGMENT));
        assertTrue(seg.ready());
        assertEquals(HealthMode.SEGMENT, seg.mode());
        assertEquals("leader", get(a.clusterStatus()).state());
        assertTrue(get(a.metrics()).contains("leaf_"));
        assertTrue(get(a.db(ListQuery.prefix(TAG))).stream().anyMatch(t -> t.tag().equals(TAG)));
        assertTrue(get(a.cache(ListQuery.all())).stream().anyMatch(c -> c.tag().equals(TAG)));
        // A local refusal fails the future; nothing is thrown at the caller.
        CompletableFuture<Long> bad = a.nextId("bad tag");
        CompletionException e = assertThrows(CompletionException.class, bad::join);
        assertInstanceOf(InvalidRequestException.class, e.getCause());
        // A node's error is the same typed error as the blocking call's.
        e = assertThrows(CompletionException.class, () -> a.nextId("no-such-tag-async").join());
        assertEquals(ErrorCode.TAG_NOT_FOUND, ((LeafApiException) e.getCause()).code());
    }

    @Test
    void gaplessAndLedgerAsync() throws Exception {
        String tag = "async-gapless";
        client.admin().createTag(CreateTag.gaplessSeries(tag, GaplessOptions.defaults()));
        AsyncGapless g = client.async().gapless(tag);
        assertEquals(1, get(g.issue("k1")).number());
        IssuedNumber r = get(g.reserve("k2", 60));
        assertEquals(NumberState.RESERVED, r.state());
        assertEquals(NumberState.CONFIRMED, get(g.confirm("k2")).state());
        get(g.reserve("k3", 60));
        assertEquals(NumberState.VOIDED, get(g.voidNumber("k3", "test")).state());
        List<Ledger.Entry> all = get(g.ledger(null));
        assertEquals(List.of(1L, 2L, 3L), all.stream().map(Ledger.Entry::number).toList());
        assertEquals("test", all.get(2).reason());
        assertEquals(3, get(g.ledgerPage(Ledger.Query.all())).numbers());
    }

    @Test
    void aDeadNodeFirstIsSkippedAsync() throws Exception {
        String dead = "http://127.0.0.1:" + LeafNodes.freePort();
        try (LeafClient c = LeafClient.builder().nodes(dead, node.url(1)).token(LeafNodes.TOKEN)
                .backoff(Duration.ofMillis(5), Duration.ofMillis(20)).build()) {
            long id = get(c.async().nextId(TAG));
            assertTrue(id > 0);
            assertTrue(c.nextId(TAG) > id, "the blocking call after it");
        }
    }

    @Test
    void theCallerIsNeverBlockedAndTheDeadlineHolds() throws Exception {
        try (Stubs.Stalled hung = new Stubs.Stalled();
                LeafClient c = LeafClient.builder().nodes(hung.url()).timeout(Duration.ofMillis(400))
                        .deadline(Duration.ofMillis(1500)).retries(100).backoff(Duration.ofMillis(10), Duration.ofMillis(20))
                        .build()) {
            long started = System.nanoTime();
            CompletableFuture<Long> f = c.async().nextId(TAG);
            long returned = System.nanoTime() - started;
            assertFalse(f.isDone(), "the node never answers: nothing is known yet");
            assertTrue(returned < TimeUnit.MILLISECONDS.toNanos(300), "returned at once, took " + returned / 1_000_000 + " ms");
            CompletionException e = assertThrows(CompletionException.class, f::join);
            long took = System.nanoTime() - started;
            assertInstanceOf(AllNodesFailedException.class, e.getCause(), e.getCause().toString());
            assertInstanceOf(LeafTimeoutException.class, ((AllNodesFailedException) e.getCause()).last());
            assertTrue(took >= TimeUnit.MILLISECONDS.toNanos(1000), "every attempt timed out, then the deadline: " + took);
            assertTrue(took < TimeUnit.MILLISECONDS.toNanos(10_000), "the deadline holds: " + took / 1_000_000 + " ms");
            assertTrue(hung.accepted() >= 2, "retried on a new connection after each timeout: " + hung.accepted());
        }
    }

    /**
     * Finding: a call that timed out completed its future on the timer thread, so a dependent
     * stage that blocked there held up every other call's timeouts and retries.
     */
    @Test
    void aBlockingCallbackDelaysNoOtherCallsTimeoutOrRetry() throws Exception {
        CountDownLatch inCallback = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        try (Stubs.Stalled hung = new Stubs.Stalled();
                LeafClient c = LeafClient.builder().nodes(hung.url()).timeout(Duration.ofMillis(300))
                        .deadline(Duration.ofSeconds(20)).retries(1).backoff(Duration.ofMillis(10), Duration.ofMillis(20))
                        .build()) {
            try {
                CompletableFuture<Long> first = c.async().nextId(TAG);
                AtomicReference<String> callbackThread = new AtomicReference<>();
                first.handle((v, t) -> {
                    callbackThread.set(Thread.currentThread().getName());
                    inCallback.countDown();
                    try {
                        release.await(30, TimeUnit.SECONDS); // a caller's stage that blocks
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                    return null;
                });
                assertTrue(inCallback.await(30, TimeUnit.SECONDS), "the first call timed out");
                assertFalse(callbackThread.get().startsWith("leaf-timer-"), "ran on " + callbackThread.get());
                // Another call: two attempts timing out (300 ms each) with a retry between, all timer tasks.
                long started = System.nanoTime();
                CompletableFuture<Long> second = c.async().nextId(TAG);
                ExecutionException e = assertThrows(ExecutionException.class, () -> second.get(10, TimeUnit.SECONDS),
                        "the other call's timeouts and retry were held up by the blocked callback");
                long took = System.nanoTime() - started;
                assertInstanceOf(AllNodesFailedException.class, e.getCause(), e.getCause().toString());
                assertTrue(took < TimeUnit.SECONDS.toNanos(5), "took " + took / 1_000_000 + " ms");
                assertTrue(hung.accepted() >= 4, "both calls retried: " + hung.accepted());
            } finally {
                release.countDown();
            }
        }
    }

    @Test
    void cancellingStopsFurtherAttempts() throws Exception {
        try (Stubs.Unavailable down = new Stubs.Unavailable();
                LeafClient c = LeafClient.builder().nodes(down.url()).retries(10_000).deadline(Duration.ofSeconds(100))
                        .backoff(Duration.ofMillis(40), Duration.ofMillis(40)).build()) {
            String cancelled = "/api/segment/get/cancelled";
            String control = "/api/segment/get/control";
            CompletableFuture<Long> f = c.async().nextId("cancelled");
            LeafNodes.waitFor(Duration.ofSeconds(30), "two attempts", () -> down.hits(cancelled) >= 2);
            assertTrue(f.cancel(true));
            int atCancel = down.hits(cancelled);
            // The same retries of another call: once it made 6 more attempts (each after a 20-40 ms
            // backoff), the cancelled call would have made several too.
            CompletableFuture<Long> other = c.async().nextId("control");
            LeafNodes.waitFor(Duration.ofSeconds(30), "the control call's attempts", () -> down.hits(control) >= 6);
            other.cancel(true);
            assertTrue(down.hits(cancelled) <= atCancel + 1,
                    "no attempt after the cancel (one may have been leaving): " + atCancel + " then " + down.hits(cancelled));
            assertTrue(f.isCancelled());
        }
    }

    @Test
    void afterCloseAnAsyncCallFailsItsFuture() {
        LeafClient c = LeafClient.builder().nodes(node.url(1)).build();
        c.close();
        CompletionException e = assertThrows(CompletionException.class, () -> c.async().nextId(TAG).join());
        assertInstanceOf(LeafException.class, e.getCause());
    }

    /** Every public call of a blocking class has its async twin, by name and parameters. */
    @Test
    void everyBlockingCallHasAnAsyncTwin() {
        assertTwins(LeafClient.class, AsyncLeafClient.class,
                Set.of("builder", "nodes", "async", "admin", "close", "createTag", "tag", "archiveTag"));
        assertTwins(LeafAdmin.class, AsyncLeafAdmin.class, Set.of());
        assertTwins(Gapless.class, AsyncGapless.class, Set.of());
        // LeafClient's createTag, tag and archiveTag are LeafAdmin's, whose twins are checked above.
    }

    private static void assertTwins(Class<?> blocking, Class<?> async, Set<String> notCalls) {
        Set<String> want = signatures(blocking, notCalls);
        Set<String> have = signatures(async, Set.of("admin"));
        want.removeAll(have);
        assertEquals(Set.of(), want, "calls of " + blocking.getSimpleName() + " missing from " + async.getSimpleName());
        for (Method m : async.getDeclaredMethods()) {
            if (Modifier.isPublic(m.getModifiers()) && !Set.of("admin", "gapless", "tag", "toString").contains(m.getName())) {
                assertEquals(CompletableFuture.class, m.getReturnType(), m.toString());
            }
        }
    }

    private static Set<String> signatures(Class<?> c, Set<String> skip) {
        Set<String> out = new TreeSet<>();
        for (Method m : c.getDeclaredMethods()) {
            if (Modifier.isPublic(m.getModifiers()) && !Modifier.isStatic(m.getModifiers()) && !skip.contains(m.getName())
                    && !m.getName().equals("toString")) {
                out.add(m.getName() + List.of(m.getParameterTypes()));
            }
        }
        return out;
    }
}
