package io.leaf.client;

/**
 * A node's {@code /health?mode=} answer: whether the asked-for readiness holds (HTTP 200
 * rather than 503), and the node's report either way.
 *
 * @param mode the readiness asked for
 * @param ready whether it holds
 * @param health the report
 */
public record HealthReport(HealthMode mode, boolean ready, Health health) {
    static Health health(java.util.Map<String, Object> m) {
        java.util.Map<String, Object> sf = Json.obj(m, "snowflake");
        return new Health(Json.bool(m, "ready"), Json.optBool(m, "segment_ready", Json.bool(m, "ready")),
                Json.lng(m, "node_id"), Json.optLng(m, "leader_id"), Json.lng(m, "term"), Json.optStr(m, "reason"),
                Json.str(sf, "state"), Json.optLng(sf, "worker_id"));
    }
}
