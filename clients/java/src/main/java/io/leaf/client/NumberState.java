package io.leaf.client;

/** A gapless number's state in the ledger. */
public enum NumberState {
    /** Issued: final from the start. */
    ISSUED,
    /** Reserved until a deadline, for a confirm or a void. */
    RESERVED,
    /** A reservation made final. */
    CONFIRMED,
    /** Voided: keeps its place in the series with a reason, never issued again. */
    VOIDED,
    /** A state this client does not know (a newer server). */
    UNKNOWN;

    static NumberState fromWire(String wire) {
        for (NumberState s : values()) {
            if (s != UNKNOWN && s.name().toLowerCase(java.util.Locale.ROOT).equals(wire)) {
                return s;
            }
        }
        return UNKNOWN;
    }
}
