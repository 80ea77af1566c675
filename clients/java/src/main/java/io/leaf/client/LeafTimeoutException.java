package io.leaf.client;

import java.time.Duration;

/** No complete answer within the per-attempt timeout (or what was left of the deadline). */
public class LeafTimeoutException extends LeafTransportException {
    private static final long serialVersionUID = 1L;

    LeafTimeoutException(String node, Duration timeout) {
        super(node, "no answer within " + timeout.toMillis() + " ms", false, null);
    }
}
