package io.leaf.client;

import java.util.List;
import java.util.Map;

/**
 * The answering node's journal of committed segments ({@code GET /admin/allocations}).
 *
 * @param nodeId the answering node
 * @param completeFromIndex the journal is complete from this log index...
 * @param completeThroughIndex ...through this one
 * @param allocations the segments
 */
public record AllocationJournal(long nodeId, long completeFromIndex, long completeThroughIndex,
        List<Allocation> allocations) {

    /**
     * One committed segment: IDs {@code start} to {@code end} (exclusive) of {@code tag} went to
     * node {@code nodeId} at log index {@code logIndex}.
     */
    public record Allocation(String tag, long nodeId, long start, long end, long logIndex, Long position, long atMs) {
    }

    static AllocationJournal fromJson(Map<String, Object> m) {
        return new AllocationJournal(Json.lng(m, "node_id"), Json.lng(m, "complete_from_index"),
                Json.lng(m, "complete_through_index"),
                Json.objList(m, "allocations", x -> new Allocation(Json.str(x, "tag"), Json.lng(x, "node_id"),
                        Json.lng(x, "start"), Json.lng(x, "end"), Json.lng(x, "log_index"), Json.optLng(x, "position"),
                        Json.lng(x, "at_ms"))));
    }
}
