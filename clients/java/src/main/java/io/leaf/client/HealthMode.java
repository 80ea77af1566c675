package io.leaf.client;

/** Which readiness {@code GET /health?mode=} answers for (its status: 200 ready, 503 not). */
public enum HealthMode {
    /** Segment-ready and snowflake-ready (no {@code mode} parameter). */
    ALL,
    /** The node can commit new segments. */
    SEGMENT,
    /** The node issues snowflake IDs (or snowflake is disabled). */
    SNOWFLAKE;

    String path() {
        return this == ALL ? Paths.HEALTH : Paths.HEALTH + "?mode=" + name().toLowerCase(java.util.Locale.ROOT);
    }
}
