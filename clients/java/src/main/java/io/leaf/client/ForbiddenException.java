package io.leaf.client;

/** HTTP 403 ({@code forbidden}): the credential lacks the right the call needs. */
public class ForbiddenException extends LeafApiException {
    private static final long serialVersionUID = 1L;

    ForbiddenException(String node, String wireCode, String message, Long leafCode) {
        super(node, 403, wireCode, message, leafCode, null);
    }
}
