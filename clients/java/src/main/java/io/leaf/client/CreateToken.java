package io.leaf.client;

import java.util.List;
import java.util.Map;

/**
 * A token to create ({@code POST /admin/tokens}). Start with {@link #of} and add limits with
 * the {@code with...} methods; {@code null} fields are absent (unlimited).
 *
 * @param name a name for people, 1-64 characters of {@code [A-Za-z0-9_.:@-]}
 * @param rights 1-5 of {@code ids}, {@code tags}, {@code cluster}, {@code monitor}, {@code regions}
 * @param tags tag patterns ({@code orders-*}, {@code *}), needed with {@code ids} or {@code tags}
 * @param ratePerSec a request rate limit on each node
 * @param burst that limit's burst
 * @param idsPerSec a limit in IDs per second on each node
 * @param burstIds that limit's burst
 * @param maxTags the most tags the token may ever create
 */
public record CreateToken(String name, List<String> rights, List<String> tags, Long ratePerSec, Long burst,
        Long idsPerSec, Long burstIds, Integer maxTags) {

    /** A token named {@code name} with {@code rights} over the tags matching {@code tags}. */
    public static CreateToken of(String name, List<String> rights, List<String> tags) {
        return new CreateToken(name, List.copyOf(rights), List.copyOf(tags), null, null, null, null, null);
    }

    /** This request with a request rate limit. */
    public CreateToken withQuota(long ratePerSec, long burst) {
        return new CreateToken(name, rights, tags, ratePerSec, burst, idsPerSec, burstIds, maxTags);
    }

    /** This request with an ID rate limit. */
    public CreateToken withIdQuota(long idsPerSec, long burstIds) {
        return new CreateToken(name, rights, tags, ratePerSec, burst, idsPerSec, burstIds, maxTags);
    }

    /** This request with a cap on the tags it may create. */
    public CreateToken withMaxTags(int maxTags) {
        return new CreateToken(name, rights, tags, ratePerSec, burst, idsPerSec, burstIds, maxTags);
    }

    Map<String, Object> toJson() {
        return Json.object("name", name, "rights", List.copyOf(rights), "tags", tags == null ? null : List.copyOf(tags),
                "quota", ratePerSec == null ? null : Json.object("rate_per_sec", ratePerSec, "burst", burst),
                "id_quota", idsPerSec == null ? null : Json.object("ids_per_sec", idsPerSec, "burst_ids", burstIds),
                "max_tags", maxTags == null ? null : (long) maxTags);
    }
}
