package io.leaf.client;

import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * One gapless series, asynchronous ({@code client.async().gapless(tag)}): the calls of
 * {@link Gapless} (and their documentation), each returning a {@link CompletableFuture} at once.
 */
public final class AsyncGapless {
    private final LeafClient client;
    private final String tag;

    AsyncGapless(LeafClient client, String tag) {
        this.client = client;
        this.tag = tag;
    }

    /** The series' tag. */
    public String tag() {
        return tag;
    }

    /** See {@link Gapless#issue}. */
    public CompletableFuture<IssuedNumber> issue(String key) {
        return client.async().run(() -> Gapless.issueOp(tag, key));
    }

    /** See {@link Gapless#reserve}. */
    public CompletableFuture<IssuedNumber> reserve(String key, Integer holdSeconds) {
        return client.async().run(() -> Gapless.reserveOp(tag, key, holdSeconds));
    }

    /** See {@link Gapless#confirm}. */
    public CompletableFuture<IssuedNumber> confirm(String key) {
        return client.async().run(() -> Gapless.confirmOp(tag, key));
    }

    /** See {@link Gapless#voidNumber}. */
    public CompletableFuture<IssuedNumber> voidNumber(String key, String reason) {
        return client.async().run(() -> Gapless.voidOp(tag, key, reason));
    }

    /** See {@link Gapless#ledgerPage}. */
    public CompletableFuture<Ledger.Page> ledgerPage(Ledger.Query query) {
        return client.async().run(() -> Ledger.paged(tag).page(query));
    }

    /** See {@link Gapless#ledger}. */
    public CompletableFuture<List<Ledger.Entry>> ledger(Long period) {
        return client.async().all(Ledger.paged(tag), new Ledger.Query(period, null, null, null, null));
    }

    @Override
    public String toString() {
        return "AsyncGapless[" + tag + "]";
    }
}
