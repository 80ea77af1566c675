package io.leaf.client;

import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.function.Function;

/** The 2xx (or also-ok) answer of a call, and the node that gave it. */
record Answer(String node, int status, byte[] body) {
    String text() {
        return new String(body, StandardCharsets.UTF_8);
    }

    LeafDecodeException decodeError(String message) {
        return new LeafDecodeException(node, status, message);
    }

    /** The body as a JSON object turned into {@code T} by {@code f}; a wrong shape is a decode error. */
    <T> T decode(Function<Map<String, Object>, T> f) {
        try {
            return f.apply(Json.parseObject(text()));
        } catch (IllegalArgumentException | ClassCastException e) {
            throw decodeError(e.getMessage());
        }
    }

    /** The body as a JSON array of objects, each turned into {@code T} by {@code f}. */
    <T> java.util.List<T> decodeList(Function<Map<String, Object>, T> f) {
        try {
            return Json.objects(Json.parse(text()), f);
        } catch (IllegalArgumentException | ClassCastException e) {
            throw decodeError(e.getMessage());
        }
    }
}
