package io.leaf.client;

/**
 * A node's answer is not what the endpoint returns (malformed JSON, the wrong number of IDs, a
 * non-JSON error body such as a proxy's page).
 */
public class LeafDecodeException extends LeafException {
    private static final long serialVersionUID = 1L;

    private final String node;
    private final int status;

    LeafDecodeException(String node, int status, String message) {
        super(node + ": HTTP " + status + ": unexpected answer: " + message);
        this.node = node;
        this.status = status;
    }

    /** The node that answered. */
    public String node() {
        return node;
    }

    /** The HTTP status of the answer. */
    public int status() {
        return status;
    }

    @Override
    public boolean isUnavailable() {
        return status == 503;
    }
}
