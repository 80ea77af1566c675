package io.leaf.client;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.Supplier;

/**
 * The calls of a {@link LeafClient}, asynchronous ({@code client.async()}): each returns at
 * once a {@link CompletableFuture}, without blocking or sleeping on the caller's thread or any
 * other. Attempts are sent with {@code HttpClient.sendAsync}; the backoff before a retry is a
 * task scheduled on the client's timer thread. The failover, the retry safety, the retry
 * budget and the deadline are exactly the blocking calls' (one {@code Failover} decides for
 * both), and so is each call's documentation ({@link LeafClient}, {@link LeafAdmin}).
 *
 * <p>The future completes on one of the client's HTTP executor threads, never on its timer
 * thread (an attempt's timeout or a retry hands the completion over), so a dependent stage that
 * blocks holds up no other call's timeout or retry; still, do not block in a dependent stage
 * without {@code ...Async}. A failure is the call's {@link LeafException} (through
 * {@code join()}, wrapped in a {@link java.util.concurrent.CompletionException}); an invalid
 * argument fails the future, nothing sent. <b>Cancelling</b> the future cancels the attempt in
 * flight and starts no other.
 *
 * <pre>{@code
 * leaf.async().nextIds("orders", 100).thenAccept(ids -> ...);
 * }</pre>
 */
public final class AsyncLeafClient {
    private final LeafClient client;
    private final AsyncLeafAdmin admin;

    AsyncLeafClient(LeafClient client, AdminOps adminOps) {
        this.client = client;
        this.admin = new AsyncLeafAdmin(client, adminOps);
    }

    /** The admin calls, asynchronous. */
    public AsyncLeafAdmin admin() {
        return admin;
    }

    /** See {@link LeafClient#nextId}. */
    public CompletableFuture<Long> nextId(String tag) {
        return run(() -> Ops.nextId(tag));
    }

    /** See {@link LeafClient#nextIds}. */
    public CompletableFuture<long[]> nextIds(String tag, int count) {
        return run(() -> Ops.nextIds(tag, count));
    }

    /** See {@link LeafClient#ranges}. */
    public CompletableFuture<List<IdRange>> ranges(String tag, int count) {
        return run(() -> Ops.ranges(tag, count));
    }

    /** See {@link LeafClient#snowflakeId}. */
    public CompletableFuture<Long> snowflakeId(String key) {
        return run(() -> Ops.snowflakeId(key));
    }

    /** See {@link LeafClient#snowflakeIds}. */
    public CompletableFuture<long[]> snowflakeIds(String key, int count) {
        return run(() -> Ops.snowflakeIds(key, count));
    }

    /** See {@link LeafClient#snowflakeRanges}. */
    public CompletableFuture<List<IdRange>> snowflakeRanges(String key, int count) {
        return run(() -> Ops.snowflakeRanges(key, count));
    }

    /** See {@link LeafClient#decodeSnowflake}. */
    public CompletableFuture<SnowflakeId> decodeSnowflake(long id) {
        return run(() -> Ops.decodeSnowflake(id));
    }

    /** See {@link LeafClient#gapless}. */
    public AsyncGapless gapless(String tag) {
        return new AsyncGapless(client, Validate.tag("a tag", tag));
    }

    /** See {@link LeafClient#health()}. */
    public CompletableFuture<Health> health() {
        return LeafClient.map(run(() -> Ops.health(HealthMode.ALL)), HealthReport::health);
    }

    /** See {@link LeafClient#health(HealthMode)}. */
    public CompletableFuture<HealthReport> health(HealthMode mode) {
        return run(() -> Ops.health(mode));
    }

    /** See {@link LeafClient#clusterStatus}. */
    public CompletableFuture<ClusterStatus> clusterStatus() {
        return run(Ops::clusterStatus);
    }

    /** See {@link LeafClient#cache}. */
    public CompletableFuture<List<CacheEntry>> cache(ListQuery query) {
        return run(() -> Ops.cache(query));
    }

    /** See {@link LeafClient#db}. */
    public CompletableFuture<List<TagInfo>> db(ListQuery query) {
        return run(() -> Ops.db(query));
    }

    /** See {@link LeafClient#metrics}. */
    public CompletableFuture<String> metrics() {
        return run(Ops::metrics);
    }

    /** Runs the op {@code make} builds; a local refusal (an invalid argument) fails the future. */
    <T> CompletableFuture<T> run(Supplier<Op<T>> make) {
        Op<T> op;
        try {
            op = make.get();
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
        return client.runAsync(op);
    }

    /** Every item of a paged listing from {@code first} on: each page asked for once the one before answered. */
    <Q, P, T> CompletableFuture<List<T>> all(Paged<Q, P, T> paged, Q first) {
        CompletableFuture<List<T>> result = new CompletableFuture<>();
        page(paged, first, new ArrayList<>(), result);
        return result;
    }

    private <Q, P, T> void page(Paged<Q, P, T> paged, Q q, List<T> sofar, CompletableFuture<List<T>> result) {
        if (result.isDone()) {
            return;
        }
        CompletableFuture<P> f = run(() -> paged.page(q));
        result.whenComplete((x, t) -> {
            if (result.isCancelled()) {
                f.cancel(true);
            }
        });
        f.whenComplete((p, t) -> {
            if (t != null) {
                result.completeExceptionally(LeafClient.leafError(t));
                return;
            }
            Q next;
            try {
                sofar.addAll(paged.items(p));
                next = paged.next(q, p);
            } catch (RuntimeException e) {
                result.completeExceptionally(e);
                return;
            }
            if (next == null) {
                result.complete(List.copyOf(sofar));
            } else {
                page(paged, next, sofar, result);
            }
        });
    }

    @Override
    public String toString() {
        return "Async" + client;
    }
}
