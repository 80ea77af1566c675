package io.leaf.client;

/** HTTP 503: the node or cluster cannot serve now ({@code unavailable}, {@code not_ready}...; retried by the client when transient) or for good ({@code worker_ids_exhausted}). */
public class UnavailableException extends LeafApiException {
    private static final long serialVersionUID = 1L;

    UnavailableException(String node, String wireCode, String message, Long leafCode) {
        super(node, 503, wireCode, message, leafCode, null);
    }
}
