package io.leaf.client;

import java.util.List;

/**
 * What {@code POST /admin/tags:batch} did, each list in the request's order.
 *
 * @param created the tags it created
 * @param existing the tags that existed already and were left as they were
 */
public record CreateTagsResult(List<String> created, List<String> existing) {
    static CreateTagsResult fromJson(java.util.Map<String, Object> m) {
        return new CreateTagsResult(Json.strList(m, "created"), Json.strList(m, "existing"));
    }
}
