package io.leaf.client;

import java.util.Map;

/**
 * What {@link LeafClient#createTag} creates ({@code POST /admin/tags}). Start with
 * {@link #of(String, long)} and add options with the {@code with...} methods.
 *
 * @param tag the tag, 1-128 characters of {@code [A-Za-z0-9_.:-]}
 * @param step the segment step (1 to 1,000,000,000)
 * @param maxId the first ID handed out ({@code null}: 1)
 * @param description free text ({@code null}: none)
 * @param profile how IDs are made ({@code null}: segment)
 * @param gapless options of a gapless tag ({@code null}: the defaults)
 * @param upperBound the largest ID the tag may hand out ({@code null}: unbounded)
 */
public record CreateTag(String tag, long step, Long maxId, String description, Profile profile,
        GaplessOptions gapless, Long upperBound) {

    /** A segment tag with this step. */
    public static CreateTag of(String tag, long step) {
        return new CreateTag(tag, step, null, null, null, null, null);
    }

    /** A gapless series (profile {@code gapless}, step 1) with these options ({@code null}: defaults). */
    public static CreateTag gaplessSeries(String tag, GaplessOptions options) {
        return new CreateTag(tag, 1, null, null, Profile.GAPLESS, options, null);
    }

    /** This request with the first ID {@code maxId}. */
    public CreateTag withMaxId(long maxId) {
        return new CreateTag(tag, step, maxId, description, profile, gapless, upperBound);
    }

    /** This request with a description. */
    public CreateTag withDescription(String description) {
        return new CreateTag(tag, step, maxId, description, profile, gapless, upperBound);
    }

    /** This request with a profile. */
    public CreateTag withProfile(Profile profile) {
        return new CreateTag(tag, step, maxId, description, profile, gapless, upperBound);
    }

    /** This request with an upper bound (inclusive). */
    public CreateTag withUpperBound(long upperBound) {
        return new CreateTag(tag, step, maxId, description, profile, gapless, upperBound);
    }

    Map<String, Object> toJson() {
        return Json.object("tag", tag, "step", step, "max_id", maxId, "description", description,
                "profile", profile == null ? null : profile.wire(),
                "gapless", gapless == null ? null : gapless.toJson(), "upper_bound", upperBound);
    }
}
