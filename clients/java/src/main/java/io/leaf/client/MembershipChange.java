package io.leaf.client;

import java.util.List;

/**
 * The membership after a change ({@code /admin/cluster/...}).
 *
 * @param logIndex the Raft log index of the committed membership entry
 * @param voters the voters' node IDs
 * @param learners the learners' node IDs
 */
public record MembershipChange(long logIndex, List<Long> voters, List<Long> learners) {
    static MembershipChange fromJson(java.util.Map<String, Object> m) {
        return new MembershipChange(Json.lng(m, "log_index"), Json.lngList(m, "voters"), Json.lngList(m, "learners"));
    }
}
