package io.leaf.client;

import java.util.Map;

/**
 * A tag template ({@code /admin/templates}): a request for a tag matching {@code pattern}
 * creates it with these settings.
 *
 * @param name its name
 * @param pattern the tags it makes: a tag name with one {@code *}
 * @param step the step of each tag it makes
 * @param maxId the first ID of each, or {@code null}: 1
 * @param description given to each tag it makes
 * @param profile the profile of each ({@code segment}, {@code monotonic}...)
 * @param upperBound the upper bound of each, or {@code null}
 * @param createdMs when it was created, Unix ms
 * @param updatedMs when it was last replaced, Unix ms
 */
public record TemplateInfo(String name, String pattern, long step, Long maxId, String description, String profile,
        Long upperBound, long createdMs, long updatedMs) {

    static TemplateInfo fromJson(Map<String, Object> m) {
        return new TemplateInfo(Json.str(m, "name"), Json.str(m, "pattern"), Json.lng(m, "step"), Json.optLng(m, "max_id"),
                Json.str(m, "description"), Json.str(m, "profile"), Json.optLng(m, "upper_bound"),
                Json.lng(m, "created_ms"), Json.lng(m, "updated_ms"));
    }

    /**
     * A template to store ({@code PUT /admin/templates/{name}}); {@code null} fields are absent.
     *
     * @param pattern the tags it makes: a tag name with one {@code *} (at least one character)
     * @param step the step of each tag it makes
     * @param maxId the first ID of each
     * @param description given to each tag it makes
     * @param profile the profile of each ({@code null}: segment)
     * @param upperBound the upper bound of each
     */
    public record Spec(String pattern, long step, Long maxId, String description, Profile profile, Long upperBound) {
        /** A template of segment tags matching {@code pattern} with {@code step}. */
        public static Spec of(String pattern, long step) {
            return new Spec(pattern, step, null, null, null, null);
        }

        Map<String, Object> toJson() {
            return Json.object("pattern", pattern, "step", step, "max_id", maxId, "description", description,
                    "profile", profile == null ? null : profile.wire(), "upper_bound", upperBound);
        }
    }
}
