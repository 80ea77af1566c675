package io.leaf.client.pool;

/** Which IDs a {@link TagPool} hands out. */
public enum IdKind {
    /** Segment IDs of a tag ({@code LeafClient.ranges}). */
    SEGMENT,
    /** Snowflake IDs ({@code LeafClient.snowflakeRanges}), with a freshness bound. */
    SNOWFLAKE;

    @Override
    public String toString() {
        return this == SEGMENT ? "segment" : "snowflake";
    }
}
