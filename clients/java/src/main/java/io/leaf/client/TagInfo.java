package io.leaf.client;

import java.util.Map;

/**
 * A tag as the cluster stores it ({@code GET /admin/tags/{tag}}).
 *
 * @param tag its name
 * @param maxId the next unallocated ID
 * @param step the stored step
 * @param description its description ({@code ""} when none)
 * @param profile how its IDs are made ({@code segment}, {@code gapless}...)
 * @param createdMs when it was created, Unix ms
 * @param updatedMs when it was last changed, Unix ms
 * @param upperBound the largest ID it may hand out, or {@code null}
 * @param period a gapless tag's current period, or {@code null}
 * @param archivedMs when it was archived, or {@code null} if it serves
 */
public record TagInfo(String tag, long maxId, long step, String description, String profile, long createdMs,
        long updatedMs, Long upperBound, Long period, Long archivedMs) {

    /** Whether the tag is archived (it hands out no ID until restored). */
    public boolean archived() {
        return archivedMs != null;
    }

    static TagInfo fromJson(Map<String, Object> m) {
        String profile = Json.optStr(m, "profile");
        return new TagInfo(Json.str(m, "tag"), Json.lng(m, "max_id"), Json.lng(m, "step"), Json.str(m, "description"),
                profile == null ? "segment" : profile, Json.lng(m, "created_ms"), Json.lng(m, "updated_ms"),
                Json.optLng(m, "upper_bound"), Json.optLng(m, "period"), Json.optLng(m, "archived_ms"));
    }
}
