package io.leaf.client;

/** HTTP 409: the request conflicts with the state ({@code tag_exists}, {@code wrong_profile}, {@code number_conflict}...). */
public class ConflictException extends LeafApiException {
    private static final long serialVersionUID = 1L;

    ConflictException(String node, String wireCode, String message, Long leafCode) {
        super(node, 409, wireCode, message, leafCode, null);
    }
}
