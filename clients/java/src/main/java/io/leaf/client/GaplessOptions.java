package io.leaf.client;

import java.util.Map;

/**
 * Options of a gapless tag ({@code "gapless": {...}} when creating one); every field is
 * optional ({@code null}: the server's default).
 *
 * @param reset when the series restarts at 1: {@code never}, {@code day}, {@code month}, {@code year}
 * @param utcOffset the zone whose midnight starts a period, {@code +HH:MM}, {@code -HH:MM} or {@code Z}
 * @param format the display format, e.g. {@code INV-{yyyy}-{seq:06}}
 * @param onPeriodClose {@code wait} or {@code void}
 * @param retainPeriods how many periods the ledger keeps
 */
public record GaplessOptions(String reset, String utcOffset, String format, String onPeriodClose,
        Integer retainPeriods) {

    /** No option set: a series that never resets, without a display format. */
    public static GaplessOptions defaults() {
        return new GaplessOptions(null, null, null, null, null);
    }

    Map<String, Object> toJson() {
        return Json.object("reset", reset, "utc_offset", utcOffset, "format", format,
                "on_period_close", onPeriodClose, "retain_periods", retainPeriods == null ? null : (long) retainPeriods);
    }
}
