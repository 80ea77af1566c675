package io.leaf.client.pool;

import java.util.List;
import java.util.Optional;

/**
 * A snapshot of every tag and key of an {@link IdPool}.
 *
 * @param tags one entry per tag or key, in the order they were first used
 */
public record PoolStats(List<TagStats> tags) {
    /** The snapshot of one tag or key. */
    public Optional<TagStats> get(IdKind kind, String name) {
        return tags.stream().filter(t -> t.kind() == kind && t.name().equals(name)).findFirst();
    }
}
