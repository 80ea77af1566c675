package io.leaf.client;

import java.util.List;
import java.util.Map;

/**
 * A scoped token as the cluster stores it ({@code /admin/tokens}); its secret is never shown
 * again after it was issued.
 *
 * @param id its ID (16 hex digits)
 * @param name its name
 * @param rights {@code ids}, {@code tags}, {@code cluster}, {@code monitor}, {@code regions}
 * @param tags the tag patterns it may use
 * @param ratePerSec its request rate limit per node, or {@code null}: unlimited
 * @param burst that limit's burst, or {@code null}
 * @param idsPerSec its ID rate limit per node, or {@code null}: unlimited
 * @param burstIds that limit's burst, or {@code null}
 * @param maxTags the most tags it may create, or {@code null}: unlimited
 * @param tagsCreated tags it created
 * @param createdMs when it was created, Unix ms
 * @param createdBy who created it (see {@link AuditRecord#actor()})
 * @param rotatedMs when its secret last changed, or {@code null}
 * @param previousSecretUntilMs until when its previous secret works, or {@code null}
 */
public record TokenInfo(String id, String name, List<String> rights, List<String> tags, Long ratePerSec, Long burst,
        Long idsPerSec, Long burstIds, Long maxTags, long tagsCreated, long createdMs, String createdBy,
        Long rotatedMs, Long previousSecretUntilMs) {

    static TokenInfo fromJson(Map<String, Object> m) {
        Map<String, Object> q = Json.optObj(m, "quota");
        Map<String, Object> iq = Json.optObj(m, "id_quota");
        Long tagsCreated = Json.optLng(m, "tags_created");
        return new TokenInfo(Json.str(m, "id"), Json.str(m, "name"), Json.strList(m, "rights"), Json.strList(m, "tags"),
                q == null ? null : Json.lng(q, "rate_per_sec"), q == null ? null : Json.lng(q, "burst"),
                iq == null ? null : Json.lng(iq, "ids_per_sec"), iq == null ? null : Json.lng(iq, "burst_ids"),
                Json.optLng(m, "max_tags"), tagsCreated == null ? 0 : tagsCreated, Json.lng(m, "created_ms"),
                Actors.describe(m.get("created_by")), Json.optLng(m, "rotated_ms"),
                Json.optLng(m, "previous_secret_until_ms"));
    }
}
