package io.leaf.client;

import java.util.List;

/**
 * Every API call of the data plane and the monitor endpoints, defined once as an {@link Op}:
 * checked arguments, the request, its retry safety and how its answer is read.
 */
final class Ops {
    private Ops() {
    }

    static Op<Long> nextId(String tag) {
        Validate.tag("a tag", tag);
        return new Op<>(Call.about(Paths.fill(Paths.SEGMENT_GET, tag), tag), a -> Answers.ids(a, 1)[0]);
    }

    static Op<long[]> nextIds(String tag, int count) {
        Validate.tag("a tag", tag);
        Validate.count(count, Validate.MAX_TEXT_BATCH);
        return new Op<>(Call.about(Paths.fill(Paths.SEGMENT_GET, tag) + "?count=" + count, tag), a -> Answers.ids(a, count));
    }

    static Op<List<IdRange>> ranges(String tag, int count) {
        Validate.tag("a tag", tag);
        Validate.count(count, Validate.MAX_RANGE_BATCH);
        String path = Paths.fill(Paths.SEGMENT_GET, tag) + "?count=" + count + "&format=ranges";
        return new Op<>(Call.about(path, tag), a -> Answers.ranges(a, count));
    }

    static Op<Long> snowflakeId(String key) {
        Validate.tag("a snowflake key", key);
        return new Op<>(Call.get(Paths.fill(Paths.SNOWFLAKE_GET, key)), a -> Answers.ids(a, 1)[0]);
    }

    static Op<long[]> snowflakeIds(String key, int count) {
        Validate.tag("a snowflake key", key);
        Validate.count(count, Validate.MAX_TEXT_BATCH);
        return new Op<>(Call.get(Paths.fill(Paths.SNOWFLAKE_GET, key) + "?count=" + count), a -> Answers.ids(a, count));
    }

    static Op<List<IdRange>> snowflakeRanges(String key, int count) {
        Validate.tag("a snowflake key", key);
        Validate.count(count, Validate.MAX_RANGE_BATCH);
        String path = Paths.fill(Paths.SNOWFLAKE_GET, key) + "?count=" + count + "&format=ranges";
        return new Op<>(Call.get(path), a -> Answers.ranges(a, count));
    }

    static Op<SnowflakeId> decodeSnowflake(long id) {
        if (id < 0) {
            throw InvalidRequestException.local(ErrorCode.INVALID_REQUEST, "a snowflake ID is not negative, got " + id);
        }
        return Op.json(Call.get(Paths.fill(Paths.SNOWFLAKE_DECODE, Long.toString(id))),
                m -> new SnowflakeId(Json.lng(m, "id"), Json.lng(m, "timestamp_ms"), Json.str(m, "timestamp"),
                        (int) Json.lng(m, "worker_id"), (int) Json.lng(m, "sequence")));
    }

    /**
     * {@code GET /health?mode=}: a 503 with the report is an answer (not ready), not an error,
     * and is not retried on another node.
     */
    static Op<HealthReport> health(HealthMode mode) {
        Call call = new Call("GET", mode.path(), null, Safety.IDEMPOTENT, 503, null);
        return new Op<>(call, a -> {
            java.util.Map<String, Object> m;
            try {
                m = Json.parseObject(a.text());
            } catch (IllegalArgumentException e) {
                // A 503 with something else than a report: the node refused (over its limit, a proxy).
                throw a.status() == 503 ? Answers.error(a.node(), a.status(), a.body(), null) : a.decodeError(e.getMessage());
            }
            return new HealthReport(mode, a.status() == 200, a.decode(x -> HealthReport.health(m)));
        });
    }

    static Op<ClusterStatus> clusterStatus() {
        return Op.json(Call.get(Paths.CLUSTER_STATUS), ClusterStatus::fromJson);
    }

    static Op<List<CacheEntry>> cache(ListQuery q) {
        return Op.list(Call.get(q.on(Paths.CACHE)), CacheEntry::fromJson);
    }

    static Op<List<TagInfo>> db(ListQuery q) {
        return Op.list(Call.get(q.on(Paths.DB)), TagInfo::fromJson);
    }

    static Op<String> metrics() {
        return new Op<>(Call.get(Paths.METRICS), Answer::text);
    }
}
