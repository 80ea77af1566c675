package io.leaf.client;

import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * One API call and how its answer is read: defined once, run blocking by {@link LeafClient}
 * and asynchronously by {@link AsyncLeafClient}, both through {@link Failover}.
 *
 * @param call what is sent, and its retry safety
 * @param read turns the answer into the result (throws {@link LeafException}s, usually a
 *     {@link LeafDecodeException})
 */
record Op<T>(Call call, Function<Answer, T> read) {
    /** The answer's JSON object turned into {@code T} by {@code f}. */
    static <T> Op<T> json(Call call, Function<Map<String, Object>, T> f) {
        return new Op<>(call, a -> a.decode(f));
    }

    /** The answer's JSON array of objects, each turned into {@code T} by {@code f}. */
    static <T> Op<List<T>> list(Call call, Function<Map<String, Object>, T> f) {
        return new Op<>(call, a -> a.decodeList(f));
    }

    /** This call with {@code after} applied to its result (on the thread that read it). */
    <U> Op<U> then(Function<T, U> after) {
        return new Op<>(call, read.andThen(after));
    }
}
