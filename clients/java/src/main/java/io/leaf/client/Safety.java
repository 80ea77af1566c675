package io.leaf.client;

/**
 * Whether a call may be repeated after it may have reached a node, and which failed attempts
 * are worth another one.
 *
 * <ul>
 *   <li>{@link #IDEMPOTENT}: repeating it cannot change what the caller ends up with. Reads; ID
 *       requests (an ID range whose answer was lost is never handed out again: a retry makes a
 *       gap, never a duplicate); gapless calls (the key keeps a repeat to its number); archiving.
 *   <li>{@link #AT_MOST_ONCE}: creating a tag. If the first attempt committed and its answer was
 *       lost, a retry would answer {@code tag_exists}: retried only when the connection could
 *       not be opened.
 * </ul>
 *
 * <p>A TLS handshake failure means the node processed nothing: another node may be tried
 * whatever the safety. Errors worth retrying: no answer (refused, reset, timeout) and a 503
 * with a transient code or without a JSON body (a proxy's). 400, 401, 403, 404, 409, 429 and
 * {@code worker_ids_exhausted} are the answer.
 */
enum Safety {
    IDEMPOTENT,
    AT_MOST_ONCE;

    /** Whether one attempt's error {@code e} may be followed by another attempt. */
    boolean retryable(LeafException e) {
        if (e instanceof LeafTlsException) {
            return true;
        }
        if (e instanceof LeafTransportException) {
            return ((LeafTransportException) e).isConnect() || this == IDEMPOTENT;
        }
        if (this == AT_MOST_ONCE) {
            return false;
        }
        if (e instanceof LeafApiException) {
            LeafApiException a = (LeafApiException) e;
            return a.status() == 503 && a.code().isTransient();
        }
        if (e instanceof LeafDecodeException) {
            return ((LeafDecodeException) e).status() == 503;
        }
        return false;
    }
}
