package io.leaf.client;

/** Local checks of arguments, so an invalid request fails at once with a clear message. */
final class Validate {
    /** Most IDs one request takes as text. */
    static final int MAX_TEXT_BATCH = 100_000;
    /** Most IDs one request takes as ranges. */
    static final int MAX_RANGE_BATCH = 1_000_000;
    /** Longest gapless hold the server accepts (30 days). */
    static final int MAX_HOLD_SECONDS = 2_592_000;

    private Validate() {
    }

    /** A tag (or snowflake key): 1-128 characters of {@code [A-Za-z0-9_.:-]}. */
    static String tag(String what, String tag) {
        if (tag == null || tag.isEmpty() || tag.length() > 128) {
            throw InvalidRequestException.local(ErrorCode.INVALID_TAG,
                    what + " must be 1 to 128 characters, got " + (tag == null ? "null" : tag.length()));
        }
        for (int i = 0; i < tag.length(); i++) {
            char c = tag.charAt(i);
            boolean ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'
                    || c == '.' || c == ':' || c == '-';
            if (!ok) {
                throw InvalidRequestException.local(ErrorCode.INVALID_TAG,
                        what + " contains " + describe(c) + "; allowed are A-Z a-z 0-9 _ . : -");
            }
        }
        return tag;
    }

    /** A count from 1 to {@code max}. */
    static int count(int count, int max) {
        if (count < 1 || count > max) {
            throw InvalidRequestException.local(ErrorCode.INVALID_COUNT,
                    "count must be an integer from 1 to " + max + ", got " + count);
        }
        return count;
    }

    /** A gapless key: 1-128 characters of printable ASCII. */
    static String key(String key) {
        if (key == null || key.isEmpty() || key.length() > 128) {
            throw InvalidRequestException.local(ErrorCode.INVALID_REQUEST,
                    "a key must be 1 to 128 characters, got " + (key == null ? "null" : key.length()));
        }
        for (int i = 0; i < key.length(); i++) {
            char c = key.charAt(i);
            if (c < 0x20 || c > 0x7e) {
                throw InvalidRequestException.local(ErrorCode.INVALID_REQUEST,
                        "a key is printable ASCII; it contains " + describe(c));
            }
        }
        return key;
    }

    /** A void reason: 1-256 characters, no control character, not only spaces. */
    static String reason(String reason) {
        if (reason == null || reason.isEmpty() || reason.length() > 256 || reason.isBlank()) {
            throw InvalidRequestException.local(ErrorCode.INVALID_REQUEST,
                    "a reason must be 1 to 256 characters and not only spaces");
        }
        for (int i = 0; i < reason.length(); i++) {
            char c = reason.charAt(i);
            if (c < 0x20 || (c >= 0x7f && c <= 0x9f)) {
                throw InvalidRequestException.local(ErrorCode.INVALID_REQUEST,
                        "a reason contains the control character " + describe(c));
            }
        }
        return reason;
    }

    /** A hold from 1 s to 30 days, or {@code null} (the server's default). */
    static Integer holdSeconds(Integer hold) {
        if (hold != null && (hold < 1 || hold > MAX_HOLD_SECONDS)) {
            throw InvalidRequestException.local(ErrorCode.INVALID_REQUEST,
                    "hold_seconds must be from 1 to " + MAX_HOLD_SECONDS + ", got " + hold);
        }
        return hold;
    }

    private static String describe(char c) {
        return c >= 0x20 && c < 0x7f ? "'" + c + "'" : String.format("U+%04X", (int) c);
    }
}
