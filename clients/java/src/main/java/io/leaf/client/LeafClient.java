package io.leaf.client;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;

/**
 * A client of one leaf cluster, over a list of its nodes. Thread-safe; share one per
 * application.
 *
 * <p><b>Over several nodes.</b> Any node serves every call (a follower forwards writes to the
 * leader). A call starts at the node that answered last; when an attempt fails in a way worth
 * retrying (no answer, a timeout, a TLS handshake, a transient 503) the next attempt goes to
 * the next node, after a capped exponential backoff with jitter, until the retry budget or the
 * call's deadline runs out: then an {@link AllNodesFailedException} carrying the last error
 * (a single failed attempt is thrown as itself). Retries happen only where safe (see
 * {@code Safety}): creating a tag is retried only when the connection could not be opened.
 *
 * <p><b>Errors</b> are unchecked {@link LeafException}s: {@link LeafApiException} (with its
 * {@link ErrorCode}) and its category subclasses, {@link LeafTransportException},
 * {@link LeafTlsException}, {@link LeafDecodeException}, {@link AllNodesFailedException}. No
 * message ever contains the token.
 *
 * <p><b>Blocking or not.</b> Every call is here, blocking the caller's thread, and on
 * {@link #async()}, returning a {@link CompletableFuture} at once; {@link #admin()} and
 * {@link AsyncLeafClient#admin()} hold the admin calls. Both run the same attempts, failover,
 * retries and deadline ({@code Failover}); the async one never blocks or sleeps on a thread.
 *
 * <pre>{@code
 * try (LeafClient leaf = LeafClient.builder().nodes("http://10.0.0.1:8080", "http://10.0.0.2:8080").build()) {
 *     long id = leaf.nextId("orders");
 * }
 * }</pre>
 */
public final class LeafClient implements AutoCloseable {
    private final List<String> nodes;
    private final Transport transport;
    private final Duration timeout;
    private final Duration deadline;
    private final int retries;
    private final boolean hasToken;
    private final OwnCreates ownCreates = new OwnCreates();
    private final Failover failover;
    private final AdminOps adminOps = new AdminOps(ownCreates);
    private final LeafAdmin admin = new LeafAdmin(this, adminOps);
    private final AsyncLeafClient async = new AsyncLeafClient(this, adminOps);

    LeafClient(List<String> nodes, Transport transport, Duration timeout, Duration deadline, int retries,
            Backoff backoff, boolean hasToken) {
        this.nodes = List.copyOf(nodes);
        this.transport = transport;
        this.timeout = timeout;
        this.deadline = deadline;
        this.retries = retries;
        this.hasToken = hasToken;
        this.failover = new Failover(nodes, timeout, deadline, retries, backoff, ownCreates);
    }

    /** Starts configuring a client. */
    public static LeafClientBuilder builder() {
        return new LeafClientBuilder();
    }

    /** The nodes' base URLs, as normalised by the builder. */
    public List<String> nodes() {
        return nodes;
    }

    /** The same calls returning {@link CompletableFuture}s, over this client's connections. */
    public AsyncLeafClient async() {
        return async;
    }

    /** The admin calls (tags, tokens, templates, membership, audit...), blocking. */
    public LeafAdmin admin() {
        return admin;
    }

    // ---- IDs ----

    /** One segment ID of {@code tag} ({@code GET /api/segment/get/{tag}}). */
    public long nextId(String tag) {
        return run(Ops.nextId(tag));
    }

    /** {@code count} (1 to 100,000) segment IDs of {@code tag}, in the order the node handed them out. */
    public long[] nextIds(String tag, int count) {
        return run(Ops.nextIds(tag, count));
    }

    /**
     * {@code count} (1 to 1,000,000) segment IDs of {@code tag} as a few ascending ranges
     * ({@code ?format=ranges}), checked to hold exactly {@code count} IDs.
     */
    public List<IdRange> ranges(String tag, int count) {
        return run(Ops.ranges(tag, count));
    }

    /** One snowflake ID ({@code key} is only recorded for auditing; validated like a tag). */
    public long snowflakeId(String key) {
        return run(Ops.snowflakeId(key));
    }

    /** {@code count} (1 to 100,000) snowflake IDs. */
    public long[] snowflakeIds(String key, int count) {
        return run(Ops.snowflakeIds(key, count));
    }

    /** {@code count} (1 to 1,000,000) snowflake IDs as ranges (about one per millisecond the batch spans). */
    public List<IdRange> snowflakeRanges(String key, int count) {
        return run(Ops.snowflakeRanges(key, count));
    }

    /**
     * A snowflake ID's time, worker and sequence, as a node decodes it (the layout's epoch is
     * the cluster's: it cannot be decoded locally).
     */
    public SnowflakeId decodeSnowflake(long id) {
        return run(Ops.decodeSnowflake(id));
    }

    /** The gapless series {@code tag} (a tag of profile {@code gapless}). */
    public Gapless gapless(String tag) {
        return new Gapless(this, Validate.tag("a tag", tag));
    }

    // ---- monitoring ----

    /**
     * {@code GET /health} of whichever node answers: a node that is not ready answers 503 with
     * its report, returned as {@code ready == false}.
     */
    public Health health() {
        return run(Ops.health(HealthMode.ALL)).health();
    }

    /**
     * {@code GET /health?mode=}: whether the node is ready in that {@code mode} (200 rather
     * than 503; not an error, and not retried on another node), with its report.
     */
    public HealthReport health(HealthMode mode) {
        return run(Ops.health(mode));
    }

    /** {@code GET /cluster/status} of whichever node answers. */
    public ClusterStatus clusterStatus() {
        return run(Ops.clusterStatus());
    }

    /** A page of the answering node's per-tag buffers ({@code GET /cache}). */
    public List<CacheEntry> cache(ListQuery query) {
        return run(Ops.cache(query));
    }

    /** A page of the tags as stored ({@code GET /db}, Leaf's {@code /db}). */
    public List<TagInfo> db(ListQuery query) {
        return run(Ops.db(query));
    }

    /** {@code GET /metrics}: the answering node's Prometheus text. */
    public String metrics() {
        return run(Ops.metrics());
    }

    // ---- the admin calls of earlier versions (see admin()) ----

    /** {@link LeafAdmin#createTag}. */
    public TagInfo createTag(CreateTag spec) {
        return admin.createTag(spec);
    }

    /** {@link LeafAdmin#tag}. */
    public TagInfo tag(String tag) {
        return admin.tag(tag);
    }

    /** {@link LeafAdmin#archiveTag}. */
    public TagInfo archiveTag(String tag) {
        return admin.archiveTag(tag);
    }

    // ---- running calls ----

    /** Runs {@code op} on the caller's thread. */
    <T> T run(Op<T> op) {
        return op.read().apply(execute(op.call()));
    }

    /** Every item of a paged listing from {@code first} on, page after page. */
    <Q, P, T> List<T> all(Paged<Q, P, T> paged, Q first) {
        List<T> out = new ArrayList<>();
        for (Q q = first; q != null;) {
            P page = run(paged.page(q));
            out.addAll(paged.items(page));
            q = paged.next(q, page);
        }
        return List.copyOf(out);
    }

    /**
     * Runs {@code call} over the nodes, blocking: the attempts {@link Failover} says, sleeping
     * its backoffs.
     */
    Answer execute(Call call) {
        Failover.Run run = failover.start(call);
        while (true) {
            Transport.Reply reply = null;
            LeafException err = null;
            try {
                reply = transport.send(run.node(), call.method(), call.path(), call.body(), run.attemptTimeout());
            } catch (LeafException e) {
                err = e;
            }
            Failover.Step step = run.after(reply, err);
            if (step.answer() != null) {
                return step.answer();
            }
            if (!step.retry() || Thread.currentThread().isInterrupted()) {
                throw step.error();
            }
            Duration wait = step.backoff();
            try {
                Thread.sleep(wait.toMillis(), (int) (wait.toNanos() % 1_000_000));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw run.stopped(step.error());
            }
            run.next();
        }
    }

    /** Runs {@code op} without blocking: the future completes on the client's HTTP executor (never its timer thread). */
    <T> CompletableFuture<T> runAsync(Op<T> op) {
        return map(executeAsync(op.call()), op.read());
    }

    /** {@code f} then {@code g}, where cancelling the result cancels {@code f} (a plain {@code thenApply} would not). */
    static <A, B> CompletableFuture<B> map(CompletableFuture<A> f, java.util.function.Function<A, B> g) {
        CompletableFuture<B> out = f.thenApply(g);
        out.whenComplete((v, t) -> {
            if (out.isCancelled()) {
                f.cancel(true);
            }
        });
        return out;
    }

    /**
     * Runs {@code call} over the nodes without blocking: the same attempts as {@link #execute},
     * each sent with {@code sendAsync}, each backoff a scheduled task. Cancelling the returned
     * future cancels the attempt in flight and starts no other.
     */
    CompletableFuture<Answer> executeAsync(Call call) {
        CompletableFuture<Answer> result = new CompletableFuture<>();
        attempt(failover.start(call), result);
        return result;
    }

    private void attempt(Failover.Run run, CompletableFuture<Answer> result) {
        if (result.isDone()) {
            return; // cancelled (or completed by the caller): no further attempt
        }
        Call call = run.call();
        CompletableFuture<Transport.Reply> sent =
                transport.sendAsync(run.node(), call.method(), call.path(), call.body(), run.attemptTimeout());
        result.whenComplete((a, t) -> {
            if (result.isCancelled()) {
                sent.cancel(true);
            }
        });
        sent.whenComplete((reply, t) -> {
            Failover.Step step;
            try {
                step = run.after(reply, t == null ? null : leafError(t));
            } catch (RuntimeException e) {
                settle(result, null, e);
                return;
            }
            if (step.answer() != null) {
                settle(result, step.answer(), null);
            } else if (!step.retry()) {
                settle(result, null, step.error());
            } else if (!result.isDone()) {
                try {
                    ScheduledFuture<?> next = transport.schedule(() -> {
                        run.next();
                        attempt(run, result);
                    }, step.backoff());
                    result.whenComplete((a, x) -> next.cancel(false));
                } catch (RejectedExecutionException e) { // the client was closed
                    settle(result, null, run.stopped(step.error()));
                }
            }
        });
    }

    /**
     * Completes the caller's future on the client's HTTP executor, never on the thread that
     * got here: that may be the timer thread (an attempt's timeout, a retry), where a caller's
     * dependent stage that blocks would hold up every other call's timeouts and retries. A
     * closed client's executor refuses the task: then the common pool completes it.
     */
    private void settle(CompletableFuture<Answer> result, Answer answer, Throwable error) {
        if (result.isDone()) {
            return;
        }
        Runnable complete = () -> {
            if (error == null) {
                result.complete(answer);
            } else {
                result.completeExceptionally(error);
            }
        };
        try {
            transport.execute(complete);
        } catch (RejectedExecutionException e) {
            ForkJoinPool.commonPool().execute(complete);
        }
    }

    /** The {@link LeafException} a failed future carries. */
    static LeafException leafError(Throwable t) {
        Throwable c = t instanceof CompletionException && t.getCause() != null ? t.getCause() : t;
        return c instanceof LeafException ? (LeafException) c : new LeafException("the call failed: " + c, c);
    }

    Transport transport() {
        return transport;
    }

    /** Stops the client's HTTP threads; calls made afterwards fail. */
    @Override
    public void close() {
        transport.close();
    }

    @Override
    public String toString() {
        return "LeafClient[nodes=" + nodes + ", token=" + (hasToken ? "(set)" : "(none)") + ", timeout=" + timeout
                + ", deadline=" + deadline + ", retries=" + retries + "]";
    }
}
