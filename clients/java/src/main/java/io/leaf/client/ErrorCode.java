package io.leaf.client;

/**
 * The stable, machine-readable {@code code} of a leaf error body: every value of the API's
 * {@code ErrorCode} (docs/openapi.json), plus {@link #UNKNOWN} for a code a newer server may
 * add.
 */
public enum ErrorCode {
    INVALID_TAG("invalid_tag"),
    INVALID_COUNT("invalid_count"),
    INVALID_REQUEST("invalid_request"),
    PAYLOAD_TOO_LARGE("payload_too_large"),
    UNAUTHORIZED("unauthorized"),
    FORBIDDEN("forbidden"),
    TAG_NOT_FOUND("tag_not_found"),
    NOT_FOUND("not_found"),
    METHOD_NOT_ALLOWED("method_not_allowed"),
    TAG_EXISTS("tag_exists"),
    TAG_EXHAUSTED("tag_exhausted"),
    SEGMENTS_NOT_READY("segments_not_ready"),
    NOT_READY("not_ready"),
    UNAVAILABLE("unavailable"),
    SHUTTING_DOWN("shutting_down"),
    MEMBER_EXISTS("member_exists"),
    NODE_ID_RETIRED("node_id_retired"),
    MEMBER_NOT_FOUND("member_not_found"),
    SNOWFLAKE_UNAVAILABLE("snowflake_unavailable"),
    CLOCK_MOVED_BACKWARDS("clock_moved_backwards"),
    WORKER_IDS_EXHAUSTED("worker_ids_exhausted"),
    RATE_LIMITED("rate_limited"),
    TOKEN_NOT_FOUND("token_not_found"),
    TEMPLATE_NOT_FOUND("template_not_found"),
    TEMPLATE_CONFLICT("template_conflict"),
    WRONG_PROFILE("wrong_profile"),
    NUMBER_NOT_FOUND("number_not_found"),
    NUMBER_CONFLICT("number_conflict"),
    /** The request needs a cluster version the cluster has not activated yet (all nodes upgraded). */
    FEATURE_NOT_ACTIVE("feature_not_active"),
    /** The membership change does not fit the cluster as it stands (it would leave no voter, say). */
    MEMBERSHIP_CONFLICT("membership_conflict"),
    /** A token with this name exists already. */
    TOKEN_EXISTS("token_exists"),
    /** A region's request the regions as they stand refuse (a retired region, no worker IDs left). */
    REGION_CONFLICT("region_conflict"),
    /** A code this client does not know (a newer server); the wire text is kept on the error. */
    UNKNOWN(null);

    private final String wire;

    ErrorCode(String wire) {
        this.wire = wire;
    }

    /** The code as the server writes it ({@code tag_not_found}); {@code null} for UNKNOWN. */
    public String wire() {
        return wire;
    }

    /** The code of {@code wire}, or {@link #UNKNOWN}. */
    public static ErrorCode fromWire(String wire) {
        for (ErrorCode c : values()) {
            if (c.wire != null && c.wire.equals(wire)) {
                return c;
            }
        }
        return UNKNOWN;
    }

    /**
     * Whether a 503 with this code is transient: another node, or the same one a little later,
     * may answer (see the retry rules).
     */
    public boolean isTransient() {
        switch (this) {
            case UNAVAILABLE:
            case NOT_READY:
            case SEGMENTS_NOT_READY:
            case SHUTTING_DOWN:
            case SNOWFLAKE_UNAVAILABLE:
            case CLOCK_MOVED_BACKWARDS:
                return true;
            default:
                return false;
        }
    }
}
