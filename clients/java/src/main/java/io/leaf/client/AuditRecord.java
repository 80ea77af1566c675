package io.leaf.client;

import java.util.List;
import java.util.Map;

/**
 * One record of the audit trail ({@code GET /admin/audit}).
 *
 * @param seq its sequence number
 * @param atMs leader time of the change, Unix ms
 * @param actor who made it: {@code admin_token}, {@code loopback}, {@code unattributed},
 *     {@code client_cert:<name>}, {@code token:<id>:<name>} or {@code node:<id>}
 * @param action its kind ({@code tag_created}, {@code token_revoked}... the API's {@code AuditKind})
 * @param details the action's fields as JSON values (a tag, a token's ID...; never a secret)
 */
public record AuditRecord(long seq, long atMs, String actor, String action, Map<String, Object> details) {
    static AuditRecord fromJson(Map<String, Object> m) {
        Object a = m.get("action");
        String action;
        Map<String, Object> details;
        if (a instanceof String) {
            action = (String) a;
            details = Map.of();
        } else if (a instanceof Map && ((Map<?, ?>) a).size() == 1) {
            @SuppressWarnings("unchecked")
            Map<String, Object> am = (Map<String, Object>) a;
            action = am.keySet().iterator().next();
            Object d = am.get(action);
            @SuppressWarnings("unchecked")
            Map<String, Object> dm = d instanceof Map ? (Map<String, Object>) d : Map.of();
            details = dm;
        } else {
            throw new IllegalArgumentException("field 'action' is not an audit action");
        }
        return new AuditRecord(Json.lng(m, "seq"), Json.lng(m, "at_ms"), Actors.describe(m.get("actor")), action,
                details);
    }

    /**
     * Which records a page of the trail holds; every field optional ({@code null}).
     *
     * @param kind only this kind of change ({@code tag_created}...)
     * @param tag only changes of this tag
     * @param token only changes made by or to this token (its 16-hex-digit ID)
     * @param sinceMs leader time at or after, Unix ms
     * @param untilMs leader time before, Unix ms
     * @param afterSeq records after this one (the previous page's {@code nextAfterSeq})
     * @param limit most records (1 to 1,000; the node's default 100)
     */
    public record Query(String kind, String tag, String token, Long sinceMs, Long untilMs, Long afterSeq,
            Integer limit) {
        /** The first page of every record. */
        public static Query all() {
            return new Query(null, null, null, null, null, null, null);
        }

        String on(String path) {
            return Paths.query(path, "kind", kind, "tag", tag, "token", token, "since_ms", sinceMs, "until_ms", untilMs,
                    "after_seq", afterSeq, "limit", limit);
        }
    }

    /**
     * A page of the answering node's audit trail.
     *
     * @param records the records
     * @param nextAfterSeq the {@code afterSeq} of the next page, or {@code null} when this is the last
     * @param oldestSeq the oldest record the node keeps, or {@code null}
     * @param maxRecords the node's retention in records
     * @param maxAgeMs the node's retention in age
     */
    public record Page(List<AuditRecord> records, Long nextAfterSeq, Long oldestSeq, long maxRecords, long maxAgeMs) {
        static Page fromJson(Map<String, Object> m) {
            Map<String, Object> r = Json.obj(m, "retention");
            return new Page(Json.objList(m, "records", AuditRecord::fromJson), Json.optLng(m, "next_after_seq"),
                    Json.optLng(m, "oldest_seq"), Json.lng(r, "max_records"), Json.lng(r, "max_age_ms"));
        }
    }
}
