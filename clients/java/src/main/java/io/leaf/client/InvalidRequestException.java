package io.leaf.client;

/**
 * The request is wrong (HTTP 400, 405 or 413: {@code invalid_tag}, {@code invalid_count},
 * {@code invalid_request}...), as a node answered or as the client found before sending it
 * ({@link #isLocal()}).
 */
public class InvalidRequestException extends LeafApiException {
    private static final long serialVersionUID = 1L;

    InvalidRequestException(String node, int status, String wireCode, String message, Long leafCode) {
        super(node, status, wireCode, message, leafCode, null);
    }

    /** A request the client refuses before sending it. */
    static InvalidRequestException local(ErrorCode code, String message) {
        return new InvalidRequestException(null, 400, code.wire(), message, null);
    }
}
