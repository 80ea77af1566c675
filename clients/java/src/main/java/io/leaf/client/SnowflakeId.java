package io.leaf.client;

/**
 * A snowflake ID decoded by a node ({@code GET /api/snowflake/decode/{id}}).
 *
 * @param id the ID
 * @param timestampMs its time, Unix milliseconds (a logical time: see the API docs)
 * @param timestamp the same instant in ISO-8601 (UTC)
 * @param workerId the worker that issued it
 * @param sequence its sequence within the millisecond
 */
public record SnowflakeId(long id, long timestampMs, String timestamp, int workerId, int sequence) {
}
