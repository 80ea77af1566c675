package io.leaf.client;

import java.nio.charset.StandardCharsets;

/** The API's path templates (checked against docs/openapi.json by the contract test), filled in. */
final class Paths {
    static final String SEGMENT_GET = "/api/segment/get/{tag}";
    static final String SNOWFLAKE_GET = "/api/snowflake/get/{key}";
    static final String SNOWFLAKE_DECODE = "/api/snowflake/decode/{id}";
    static final String HEALTH = "/health";
    static final String CLUSTER_STATUS = "/cluster/status";
    static final String CACHE = "/cache";
    static final String DB = "/db";
    static final String METRICS = "/metrics";
    static final String GAPLESS_ISSUE = "/api/gapless/{tag}/issue";
    static final String GAPLESS_RESERVE = "/api/gapless/{tag}/reserve";
    static final String GAPLESS_CONFIRM = "/api/gapless/{tag}/confirm";
    static final String GAPLESS_VOID = "/api/gapless/{tag}/void";
    static final String ADMIN_TAGS = "/admin/tags";
    static final String ADMIN_TAGS_BATCH = "/admin/tags:batch";
    static final String ADMIN_TAG = "/admin/tags/{tag}";
    static final String ADMIN_TAG_ARCHIVE = "/admin/tags/{tag}/archive";
    static final String ADMIN_TAG_RESTORE = "/admin/tags/{tag}/restore";
    static final String ADMIN_TAG_DECODE = "/admin/tags/{tag}/decode/{id}";
    static final String ADMIN_TAG_LEDGER = "/admin/tags/{tag}/ledger";
    static final String ADMIN_ALLOCATIONS = "/admin/allocations";
    static final String ADMIN_AUDIT = "/admin/audit";
    static final String ADMIN_BACKUP = "/admin/backup";
    static final String ADMIN_DASHBOARD = "/admin/dashboard";
    static final String ADMIN_FAULT_CLOCK = "/admin/fault/clock";
    static final String CLUSTER_LEARNERS = "/admin/cluster/learners";
    static final String CLUSTER_NODE = "/admin/cluster/nodes/{id}";
    static final String CLUSTER_PROMOTE = "/admin/cluster/nodes/{id}/promote";
    static final String ADMIN_TOKENS = "/admin/tokens";
    static final String ADMIN_TOKEN = "/admin/tokens/{id}";
    static final String ADMIN_TOKEN_ROTATE = "/admin/tokens/{id}/rotate";
    static final String ADMIN_TEMPLATES = "/admin/templates";
    static final String ADMIN_TEMPLATE = "/admin/templates/{name}";
    static final String ADMIN_REGIONS = "/admin/regions";
    static final String ADMIN_REGION_RETIRE = "/admin/regions/{name}/retire";
    static final String ADMIN_REGION_BLOCKS = "/admin/regions/{name}/blocks/{tag}";
    static final String ADMIN_REGION_HOME = "/admin/regions/{name}/homes/{tag}";
    static final String ADMIN_REGION_HOME_RELEASE = "/admin/regions/{name}/homes/{tag}/release";
    static final String ADMIN_REGION_LEASE = "/admin/regions/{name}/lease";
    static final String ADMIN_HOMES = "/admin/homes";
    static final String ADMIN_HOME_MOVE = "/admin/homes/{tag}/move";

    /** Every (method, template) the client calls, for the contract test. */
    static final String[][] CALLED = {
        {"get", SEGMENT_GET}, {"get", SNOWFLAKE_GET}, {"get", SNOWFLAKE_DECODE}, {"get", HEALTH},
        {"get", CLUSTER_STATUS}, {"get", CACHE}, {"get", DB}, {"get", METRICS},
        {"post", GAPLESS_ISSUE}, {"post", GAPLESS_RESERVE}, {"post", GAPLESS_CONFIRM}, {"post", GAPLESS_VOID},
        {"get", ADMIN_TAGS}, {"post", ADMIN_TAGS}, {"post", ADMIN_TAGS_BATCH}, {"get", ADMIN_TAG},
        {"patch", ADMIN_TAG}, {"post", ADMIN_TAG_ARCHIVE}, {"post", ADMIN_TAG_RESTORE}, {"get", ADMIN_TAG_DECODE},
        {"get", ADMIN_TAG_LEDGER}, {"get", ADMIN_ALLOCATIONS}, {"get", ADMIN_AUDIT}, {"get", ADMIN_BACKUP},
        {"get", ADMIN_DASHBOARD}, {"post", ADMIN_FAULT_CLOCK}, {"post", CLUSTER_LEARNERS},
        {"delete", CLUSTER_NODE}, {"post", CLUSTER_PROMOTE}, {"get", ADMIN_TOKENS}, {"post", ADMIN_TOKENS},
        {"get", ADMIN_TOKEN}, {"delete", ADMIN_TOKEN}, {"post", ADMIN_TOKEN_ROTATE}, {"get", ADMIN_TEMPLATES},
        {"put", ADMIN_TEMPLATE}, {"delete", ADMIN_TEMPLATE}, {"get", ADMIN_REGIONS}, {"post", ADMIN_REGIONS},
        {"post", ADMIN_REGION_RETIRE}, {"post", ADMIN_REGION_BLOCKS}, {"post", ADMIN_REGION_HOME},
        {"post", ADMIN_REGION_HOME_RELEASE}, {"post", ADMIN_REGION_LEASE}, {"get", ADMIN_HOMES},
        {"post", ADMIN_HOME_MOVE},
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

    /** {@code path} with the query of the non-null values of {@code keyValues} (form-encoded), if any. */
    static String query(String path, Object... keyValues) {
        StringBuilder sb = new StringBuilder(path);
        char sep = path.indexOf('?') < 0 ? '?' : '&';
        for (int i = 0; i < keyValues.length; i += 2) {
            Object v = keyValues[i + 1];
            if (v != null) {
                sb.append(sep).append(keyValues[i]).append('=')
                        .append(java.net.URLEncoder.encode(String.valueOf(v), StandardCharsets.UTF_8));
                sep = '&';
            }
        }
        return sb.toString();
    }

    /** {@code template} with its two {@code {...}} parameters replaced by {@code a} and {@code b}. */
    static String fill(String template, String a, String b) {
        return fill(fill(template, a), b);
    }
}
