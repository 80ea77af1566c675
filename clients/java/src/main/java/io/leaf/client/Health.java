package io.leaf.client;

/**
 * A node's {@code /health} report. A node that is not ready answers 503 with this report:
 * that is an answer ({@code ready == false}), not an error.
 *
 * @param ready segment-ready and snowflake-ready
 * @param segmentReady the node can commit new segments
 * @param nodeId the answering node
 * @param leaderId the leader it knows, or {@code null}
 * @param term its Raft term
 * @param reason why it is not ready, or {@code null}
 * @param snowflakeState {@code serving}, {@code starting}, {@code off} or {@code disabled}
 * @param snowflakeWorkerId its snowflake worker ID, or {@code null}
 */
public record Health(boolean ready, boolean segmentReady, long nodeId, Long leaderId, long term, String reason,
        String snowflakeState, Long snowflakeWorkerId) {
}
