package io.leaf.client;

import java.util.Map;

/**
 * What the built-in {@code /ui} page shows, as the answering node sees it
 * ({@code GET /admin/dashboard}).
 *
 * @param nodeId the answering node
 * @param version its release
 * @param nowMs its clock when it answered, Unix ms
 * @param uptimeSecs seconds since it started
 * @param cluster its cluster status
 * @param tagsTotal tags in the replicated state (matching the prefix asked for)
 * @param json the whole answer (per-node views, per-tag views, totals, recent errors: the
 *     page's own, less stable shapes)
 */
public record Dashboard(long nodeId, String version, long nowMs, long uptimeSecs, ClusterStatus cluster,
        long tagsTotal, Map<String, Object> json) {
    static Dashboard fromJson(Map<String, Object> m) {
        return new Dashboard(Json.lng(m, "node_id"), Json.str(m, "version"), Json.lng(m, "now_ms"),
                Json.lng(m, "uptime_secs"), ClusterStatus.fromJson(Json.obj(m, "cluster")), Json.lng(m, "tags_total"),
                java.util.Collections.unmodifiableMap(m));
    }
}
