package io.leaf.client;

/** How a tag's IDs are made; set when the tag is created, never changed. */
public enum Profile {
    /** Leaf's segment mode (the default). */
    SEGMENT,
    /** Strictly increasing across the cluster. */
    MONOTONIC,
    /** Sequence numbers scrambled into non-guessable IDs. */
    OBFUSCATED,
    /** A counter per day, prefixed with the date. */
    DAILY,
    /** A gapless series of numbers ({@link Gapless}). */
    GAPLESS;

    /** The profile as the API writes it ({@code gapless}). */
    public String wire() {
        return name().toLowerCase(java.util.Locale.ROOT);
    }
}
