package io.leaf.client;

/**
 * An obfuscated tag's ID decoded back to its sequence number ({@code GET /admin/tags/{tag}/decode/{id}}).
 *
 * @param tag the tag
 * @param id the ID as handed out
 * @param sequence the sequence number it was made from
 */
public record ObfuscatedId(String tag, long id, long sequence) {
    static ObfuscatedId fromJson(java.util.Map<String, Object> m) {
        return new ObfuscatedId(Json.str(m, "tag"), Json.lng(m, "id"), Json.lng(m, "sequence"));
    }
}
