package io.leaf.client;

/**
 * A page of a listing in name order ({@code GET /admin/tags}, {@code /cache}, {@code /db}):
 * names starting with {@code prefix}, after {@code after}, at most {@code limit} of them.
 * Every field is optional ({@code null}).
 *
 * @param prefix only names starting with this
 * @param after only names after this one (the previous page's last)
 * @param limit most names on the page (the server's default and bound when {@code null})
 */
public record ListQuery(String prefix, String after, Integer limit) {
    /** The first page of everything. */
    public static ListQuery all() {
        return new ListQuery(null, null, null);
    }

    /** The first page of the names starting with {@code prefix}. */
    public static ListQuery prefix(String prefix) {
        return new ListQuery(prefix, null, null);
    }

    String on(String path) {
        return Paths.query(path, "prefix", prefix, "after", after, "limit", limit);
    }
}
