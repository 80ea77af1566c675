package io.leaf.client;

/**
 * One API call, before it is sent.
 *
 * @param method the HTTP method
 * @param path the path and query
 * @param body the JSON body, or {@code null}
 * @param safety whether it may be repeated after it may have reached a node
 * @param alsoOk a non-2xx status whose body is the endpoint's answer (0: none)
 * @param tag the tag the call is about: a {@code tag_not_found} for a tag this client just
 *     created is retried ({@link OwnCreates}); {@code null}: none
 */
record Call(String method, String path, String body, Safety safety, int alsoOk, String tag) {
    static Call get(String path) {
        return new Call("GET", path, null, Safety.IDEMPOTENT, 0, null);
    }

    /** A GET that takes IDs of, or reads, {@code tag}. */
    static Call about(String path, String tag) {
        return new Call("GET", path, null, Safety.IDEMPOTENT, 0, tag);
    }

    static Call post(String path, String body, Safety safety, String tag) {
        return new Call("POST", path, body, safety, 0, tag);
    }
}
