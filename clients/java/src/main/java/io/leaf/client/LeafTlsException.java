package io.leaf.client;

/**
 * The TLS handshake with a node failed: a certificate this client does not trust, a wrong
 * name, an expired certificate, a plaintext port. A setup problem, not an outage: the node
 * processed nothing, so the call moves on to another node, but gives up once every node
 * failed that way.
 */
public class LeafTlsException extends LeafException {
    private static final long serialVersionUID = 1L;

    private final String node;

    LeafTlsException(String node, String message, Throwable cause) {
        super(node + ": TLS handshake failed: " + message, cause);
        this.node = node;
    }

    /** The node whose handshake failed. */
    public String node() {
        return node;
    }
}
