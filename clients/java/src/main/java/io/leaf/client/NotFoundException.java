package io.leaf.client;

/** HTTP 404: an unknown tag ({@code tag_not_found}), number, token, template, member or path. */
public class NotFoundException extends LeafApiException {
    private static final long serialVersionUID = 1L;

    NotFoundException(String node, String wireCode, String message, Long leafCode) {
        super(node, 404, wireCode, message, leafCode, null);
    }
}
