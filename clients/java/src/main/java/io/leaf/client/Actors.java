package io.leaf.client;

import java.util.Map;

/** Who made a change (the API's {@code Actor}), as one line: {@code admin_token}, {@code token:<id>:<name>}... */
final class Actors {
    private Actors() {
    }

    /**
     * {@code admin_token}, {@code loopback}, {@code unattributed}, {@code client_cert:<name>},
     * {@code token:<id>:<name>}, {@code node:<id>}; a variant a newer server adds, as its JSON.
     */
    static String describe(Object actor) {
        if (actor instanceof String) {
            return (String) actor;
        }
        if (actor instanceof Map) {
            @SuppressWarnings("unchecked")
            Map<String, Object> m = (Map<String, Object>) actor;
            if (m.get("client_cert") instanceof Map) {
                return "client_cert:" + Json.str(Json.obj(m, "client_cert"), "name");
            }
            if (m.get("token") instanceof Map) {
                Map<String, Object> t = Json.obj(m, "token");
                return "token:" + Json.str(t, "id") + ":" + Json.str(t, "name");
            }
            if (m.get("node") instanceof Map) {
                return "node:" + Json.lng(Json.obj(m, "node"), "id");
            }
        }
        if (actor == null) {
            throw new IllegalArgumentException("no actor");
        }
        return Json.write(actor);
    }
}
