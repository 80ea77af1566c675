package io.leaf.client;

/**
 * A run of consecutive IDs: {@code start}, {@code start + 1}, ..., {@code end - 1} ({@code end}
 * exclusive).
 *
 * @param start the first ID (inclusive, {@code >= 0})
 * @param end one past the last ID (exclusive, {@code > start})
 */
public record IdRange(long start, long end) {
    /** Checks {@code 0 <= start < end}. */
    public IdRange {
        if (start < 0 || end <= start) {
            throw new IllegalArgumentException("not a range: [" + start + ", " + end + ")");
        }
    }

    /** How many IDs the range holds. */
    public long count() {
        return end - start;
    }
}
