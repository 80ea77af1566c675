package io.leaf.client;

import java.util.List;
import java.util.Map;

/**
 * The multi-region protocol's records, as a global tier answers them
 * ({@code /admin/regions...}, {@code /admin/homes...}; the {@code regions} right): see the
 * book's Regions chapter.
 */
public final class Regions {
    private Regions() {
    }

    /**
     * A region the global tier registered.
     *
     * @param name its name
     * @param id its region ID (1, 2... in join order)
     * @param firstWorker the first snowflake worker ID of its run
     * @param lastWorker the last one
     * @param joinedMs when it joined, Unix ms
     * @param retiredMs when it was retired, or {@code null}
     */
    public record Region(String name, long id, long firstWorker, long lastWorker, long joinedMs, Long retiredMs) {
        static Region fromJson(Map<String, Object> m) {
            return new Region(Json.str(m, "name"), Json.lng(m, "id"), Json.lng(m, "first_worker"),
                    Json.lng(m, "last_worker"), Json.lng(m, "joined_ms"), Json.optLng(m, "retired_ms"));
        }
    }

    /**
     * Where a homed tag (monotonic, gapless, daily, obfuscated) is served.
     *
     * @param tag the tag
     * @param region its home region
     * @param epoch rises with each move
     * @param from the region it moved from, or {@code null}
     * @param sinceMs when this home began, Unix ms
     * @param readyMs from when the home may serve, Unix ms
     */
    public record Home(String tag, String region, long epoch, String from, long sinceMs, long readyMs) {
        static Home fromJson(Map<String, Object> m) {
            return new Home(Json.str(m, "tag"), Json.str(m, "region"), Json.lng(m, "epoch"), Json.optStr(m, "from"),
                    Json.lng(m, "since_ms"), Json.lng(m, "ready_ms"));
        }
    }

    /**
     * A region's lease of its homes.
     *
     * @param untilMs the lease runs until then, Unix ms (of the global tier's clock)
     * @param homes the region's homes
     */
    public record Lease(long untilMs, List<Home> homes) {
        static Lease fromJson(Map<String, Object> m) {
            return new Lease(Json.lng(m, "until_ms"), Json.objList(m, "homes", Home::fromJson));
        }
    }
}
