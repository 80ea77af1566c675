package io.leaf.client;

import java.util.Map;

/**
 * One tag's buffers on the answering node ({@code GET /cache}, Leaf's {@code /cache}).
 *
 * @param tag the tag
 * @param initialised whether the node has loaded a segment of it
 * @param nextReady whether the next segment is loaded
 * @param current the segment being handed out, or {@code null}
 * @param next the next segment, or {@code null}
 * @param dynamicStep the step the node now asks for
 * @param refillInFlight whether a refill is under way
 * @param lastError the last refill error, or {@code null}
 * @param idsLeft the forecast's IDs left before the tag is exhausted, or {@code null}
 */
public record CacheEntry(String tag, boolean initialised, boolean nextReady, Segment current, Segment next,
        long dynamicStep, boolean refillInFlight, String lastError, Long idsLeft) {

    /** A segment: IDs {@code start} to {@code end} (exclusive), {@code position} the next one. */
    public record Segment(long start, long position, long end, long step) {
        static Segment of(Map<String, Object> m) {
            return m == null ? null
                    : new Segment(Json.lng(m, "start"), Json.lng(m, "position"), Json.lng(m, "end"), Json.lng(m, "step"));
        }
    }

    static CacheEntry fromJson(Map<String, Object> m) {
        Map<String, Object> f = Json.optObj(m, "forecast");
        return new CacheEntry(Json.str(m, "tag"), Json.bool(m, "initialised"), Json.bool(m, "next_ready"),
                Segment.of(Json.optObj(m, "current")), Segment.of(Json.optObj(m, "next")), Json.lng(m, "dynamic_step"),
                Json.bool(m, "refill_in_flight"), Json.optStr(m, "last_error"), f == null ? null : Json.lng(f, "ids_left"));
    }
}
