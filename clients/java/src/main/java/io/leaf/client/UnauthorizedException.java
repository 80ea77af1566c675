package io.leaf.client;

/** HTTP 401 ({@code unauthorized}): no credential, or one the cluster does not accept. */
public class UnauthorizedException extends LeafApiException {
    private static final long serialVersionUID = 1L;

    UnauthorizedException(String node, String wireCode, String message, Long leafCode) {
        super(node, 401, wireCode, message, leafCode, null);
    }
}
