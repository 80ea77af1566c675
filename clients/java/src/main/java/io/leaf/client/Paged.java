package io.leaf.client;

import java.util.List;

/**
 * A listing read page after page (every tag, a whole ledger): how to ask for a page, what it
 * holds, and which page comes next. Walked by {@link LeafClient} in a loop and by
 * {@link AsyncLeafClient} as a chain of futures.
 *
 * @param <Q> the query of one page
 * @param <P> one page as answered
 * @param <T> one item
 */
interface Paged<Q, P, T> {
    /** The call of the page {@code query} selects. */
    Op<P> page(Q query);

    /** The items of {@code page}. */
    List<T> items(P page);

    /**
     * The query of the page after {@code page} (answered to {@code query}), or {@code null} when
     * it was the last. Throws a {@link LeafDecodeException} when the page does not move forward
     * (a node answering the same page again would otherwise keep the walk going for ever).
     */
    Q next(Q query, P page);
}
