package io.leaf.client;

/**
 * No answer from a node: connection refused or reset, closed early, or (subclass
 * {@link LeafTimeoutException}) no answer in time.
 */
public class LeafTransportException extends LeafException {
    private static final long serialVersionUID = 1L;

    private final String node;
    private final boolean connect;

    LeafTransportException(String node, String message, boolean connect, Throwable cause) {
        super(node + ": " + message, cause);
        this.node = node;
        this.connect = connect;
    }

    /** The node that did not answer. */
    public String node() {
        return node;
    }

    /** Whether the request was never sent (the connection could not be opened). */
    public boolean isConnect() {
        return connect;
    }

    @Override
    public boolean isUnavailable() {
        return true;
    }
}
