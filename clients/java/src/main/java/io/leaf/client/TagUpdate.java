package io.leaf.client;

import java.util.Map;

/**
 * A change of a tag's stored settings ({@code PATCH /admin/tags/{tag}}): absent ({@code null})
 * fields are left unchanged; at least one must be set.
 *
 * @param step the new segment step (1 to 1,000,000,000)
 * @param description the new description (at most 1,024 bytes of UTF-8)
 * @param maxNumbers a gapless series' cap of numbers (1 to 1,000,000)
 * @param issuesPerSec a gapless series' rate of new numbers per caller and node
 */
public record TagUpdate(Long step, String description, Long maxNumbers, Integer issuesPerSec) {
    /** Sets the step only. */
    public static TagUpdate step(long step) {
        return new TagUpdate(step, null, null, null);
    }

    /** Sets the description only. */
    public static TagUpdate description(String description) {
        return new TagUpdate(null, description, null, null);
    }

    Map<String, Object> toJson() {
        if (step == null && description == null && maxNumbers == null && issuesPerSec == null) {
            throw InvalidRequestException.local(ErrorCode.INVALID_REQUEST, "a tag update must change something");
        }
        return Json.object("step", step, "description", description, "max_numbers", maxNumbers, "issues_per_sec",
                issuesPerSec == null ? null : (long) issuesPerSec);
    }
}
