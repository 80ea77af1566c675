package io.leaf.client;

import java.nio.charset.StandardCharsets;

/** The API's path templates (checked against docs/openapi.json by the contract test), filled in. */
final class Paths {
    static final String SEGMENT_GET = "/api/segment/get/{tag}";
    static final String SNOWFLAKE_GET = "/api/snowflake/get/{key}";
    static final String SNOWFLAKE_DECODE = "/api/snowflake/decode/{id}";
    static final String HEALTH = "/health";
    static final String ADMIN_TAGS = "/admin/tags";
    static final String ADMIN_TAG = "/admin/tags/{tag}";
    static final String ADMIN_TAG_ARCHIVE = "/admin/tags/{tag}/archive";
    static final String GAPLESS_ISSUE = "/api/gapless/{tag}/issue";
    static final String GAPLESS_RESERVE = "/api/gapless/{tag}/reserve";
    static final String GAPLESS_CONFIRM = "/api/gapless/{tag}/confirm";
    static final String GAPLESS_VOID = "/api/gapless/{tag}/void";

    /** Every (method, template) the client calls, for the contract test. */
    static final String[][] CALLED = {
        {"get", SEGMENT_GET}, {"get", SNOWFLAKE_GET}, {"get", SNOWFLAKE_DECODE}, {"get", HEALTH},
        {"post", ADMIN_TAGS}, {"get", ADMIN_TAG}, {"post", ADMIN_TAG_ARCHIVE}, {"post", GAPLESS_ISSUE},
        {"post", GAPLESS_RESERVE}, {"post", GAPLESS_CONFIRM}, {"post", GAPLESS_VOID},
    };

    private Paths() {
    }

    /** {@code template} with its one {@code {...}} parameter replaced by {@code value}, percent-encoded. */
    static String fill(String template, String value) {
        int open = template.indexOf('{');
        int close = template.indexOf('}', open);
        return template.substring(0, open) + encode(value) + template.substring(close + 1);
    }

    /** {@code s} as one path segment: everything but unreserved characters and ':' percent-encoded. */
    static String encode(String s) {
        StringBuilder sb = new StringBuilder();
        for (byte b : s.getBytes(StandardCharsets.UTF_8)) {
            int c = b & 0xff;
            boolean plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-'
                    || c == '.' || c == '_' || c == '~' || c == ':';
            if (plain) {
                sb.append((char) c);
            } else {
                sb.append('%').append(Character.toUpperCase(Character.forDigit(c >> 4, 16)))
                        .append(Character.toUpperCase(Character.forDigit(c & 0xf, 16)));
            }
        }
        return sb.toString();
    }
}
