package io.leaf.client;

import java.util.Map;

/**
 * A number of a gapless series, as issue, reserve, confirm and void answer it.
 *
 * @param tag the series
 * @param period 0 for a series that never resets, else {@code yyyy}, {@code yyyyMM} or {@code yyyyMMdd}
 * @param number the number within the period: 1, 2, 3... with no gap
 * @param display the number in the tag's display format, or {@code null}
 * @param key the caller's key (its idempotency key)
 * @param state the number's state now
 * @param issuedMs leader time of the issue or reservation, Unix ms
 * @param deadlineMs a reservation's deadline, or {@code null}
 * @param reason a voided number's reason, or {@code null}
 * @param replayed whether this answer repeats an earlier request of the same key and action
 */
public record IssuedNumber(String tag, long period, long number, String display, String key, NumberState state,
        long issuedMs, Long deadlineMs, String reason, boolean replayed) {

    static IssuedNumber fromJson(Map<String, Object> m) {
        return new IssuedNumber(Json.str(m, "tag"), Json.lng(m, "period"), Json.lng(m, "number"),
                Json.optStr(m, "display"), Json.str(m, "key"), NumberState.fromWire(Json.str(m, "state")),
                Json.lng(m, "issued_ms"), Json.optLng(m, "deadline_ms"), Json.optStr(m, "reason"),
                Json.bool(m, "replayed"));
    }
}
