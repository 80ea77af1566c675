package io.leaf.client;

import java.util.List;
import java.util.Map;

/**
 * {@code GET /cluster/status} of the answering node: membership, leader, term, log indexes,
 * replication (on the leader), its health and the snowflake workers.
 *
 * @param nodeId the answering node
 * @param leaderId the leader it knows, or {@code null}
 * @param state its Raft role: {@code leader}, {@code follower}, {@code candidate}, {@code learner}, {@code shutdown}
 * @param term its Raft term
 * @param lastLogIndex its last log index, or {@code null}
 * @param committedIndex the committed index, or {@code null}
 * @param lastAppliedIndex the last applied index, or {@code null}
 * @param members every member
 * @param replication each follower's replication (on the leader; empty elsewhere)
 * @param health its health report
 * @param workers the snowflake workers
 */
public record ClusterStatus(long nodeId, Long leaderId, String state, long term, Long lastLogIndex,
        Long committedIndex, Long lastAppliedIndex, List<Member> members, List<Replication> replication,
        Health health, List<Worker> workers) {

    /** A member: {@code role} is {@code voter} or {@code learner}. */
    public record Member(long nodeId, String addr, String role) {
    }

    /** A follower's replication: the index it matched ({@code null}: none yet) and its lag in entries. */
    public record Replication(long nodeId, Long matchedIndex, long lag) {
    }

    /** A snowflake worker ID's lease: the node holding it, its high-water time and lease expiry (Unix ms). */
    public record Worker(long workerId, long nodeId, long highWaterMs, long leaseExpiresMs) {
    }

    static ClusterStatus fromJson(Map<String, Object> m) {
        return new ClusterStatus(Json.lng(m, "node_id"), Json.optLng(m, "leader_id"), Json.str(m, "state"),
                Json.lng(m, "term"), Json.optLng(m, "last_log_index"), Json.optLng(m, "committed_index"),
                Json.optLng(m, "last_applied_index"),
                Json.objList(m, "members", x -> new Member(Json.lng(x, "node_id"), Json.str(x, "addr"), Json.str(x, "role"))),
                Json.objList(m, "replication",
                        x -> new Replication(Json.lng(x, "node_id"), Json.optLng(x, "matched_index"), Json.lng(x, "lag"))),
                HealthReport.health(Json.obj(m, "health")),
                Json.objList(m, "workers", x -> new Worker(Json.lng(x, "worker_id"), Json.lng(x, "node_id"),
                        Json.lng(x, "high_water_ms"), Json.lng(x, "lease_expires_ms"))));
    }
}
