package io.leaf.client;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A client of one leaf cluster, over a list of its nodes. Thread-safe; share one per
 * application.
 *
 * <p><b>Over several nodes.</b> Any node serves every call (a follower forwards writes to the
 * leader). A call starts at the node that answered last; when an attempt fails in a way worth
 * retrying (no answer, a timeout, a TLS handshake, a transient 503) the next attempt goes to
 * the next node, after a capped exponential backoff with jitter, until the retry budget or the
 * call's deadline runs out: then an {@link AllNodesFailedException} carrying the last error
 * (a single failed attempt is thrown as itself). Retries happen only where safe (see
 * {@code Safety}): creating a tag is retried only when the connection could not be opened.
 *
 * <p><b>Errors</b> are unchecked {@link LeafException}s: {@link LeafApiException} (with its
 * {@link ErrorCode}) and its category subclasses, {@link LeafTransportException},
 * {@link LeafTlsException}, {@link LeafDecodeException}, {@link AllNodesFailedException}. No
 * message ever contains the token.
 *
 * <pre>{@code
 * try (LeafClient leaf = LeafClient.builder().nodes("http://10.0.0.1:8080", "http://10.0.0.2:8080").build()) {
 *     long id = leaf.nextId("orders");
 * }
 * }</pre>
 */
public final class LeafClient implements AutoCloseable {
    private final List<String> nodes;
    private final Transport transport;
    private final Duration timeout;
    private final Duration deadline;
    private final int retries;
    private final Backoff backoff;
    private final boolean hasToken;
    /** The node the next call starts with: the last one that answered. */
    private final AtomicInteger preferred = new AtomicInteger();
    private final OwnCreates ownCreates = new OwnCreates();

    LeafClient(List<String> nodes, Transport transport, Duration timeout, Duration deadline, int retries,
            Backoff backoff, boolean hasToken) {
        this.nodes = List.copyOf(nodes);
        this.transport = transport;
        this.timeout = timeout;
        this.deadline = deadline;
        this.retries = retries;
        this.backoff = backoff;
        this.hasToken = hasToken;
    }

    /** Starts configuring a client. */
    public static LeafClientBuilder builder() {
        return new LeafClientBuilder();
    }

    /** The nodes' base URLs, as normalised by the builder. */
    public List<String> nodes() {
        return nodes;
    }

    // ---- IDs ----

    /** One segment ID of {@code tag} ({@code GET /api/segment/get/{tag}}). */
    public long nextId(String tag) {
        Validate.tag("a tag", tag);
        Answer a = execute(Call.about(Paths.fill(Paths.SEGMENT_GET, tag), tag));
        return Answers.ids(a, 1)[0];
    }

    /** {@code count} (1 to 100,000) segment IDs of {@code tag}, in the order the node handed them out. */
    public long[] nextIds(String tag, int count) {
        Validate.tag("a tag", tag);
        Validate.count(count, Validate.MAX_TEXT_BATCH);
        return Answers.ids(execute(Call.about(Paths.fill(Paths.SEGMENT_GET, tag) + "?count=" + count, tag)), count);
    }

    /**
     * {@code count} (1 to 1,000,000) segment IDs of {@code tag} as a few ascending ranges
     * ({@code ?format=ranges}), checked to hold exactly {@code count} IDs.
     */
    public List<IdRange> ranges(String tag, int count) {
        Validate.tag("a tag", tag);
        Validate.count(count, Validate.MAX_RANGE_BATCH);
        String path = Paths.fill(Paths.SEGMENT_GET, tag) + "?count=" + count + "&format=ranges";
        return Answers.ranges(execute(Call.about(path, tag)), count);
    }

    /** One snowflake ID ({@code key} is only recorded for auditing; validated like a tag). */
    public long snowflakeId(String key) {
        Validate.tag("a snowflake key", key);
        return Answers.ids(execute(Call.get(Paths.fill(Paths.SNOWFLAKE_GET, key))), 1)[0];
    }

    /** {@code count} (1 to 100,000) snowflake IDs. */
    public long[] snowflakeIds(String key, int count) {
        Validate.tag("a snowflake key", key);
        Validate.count(count, Validate.MAX_TEXT_BATCH);
        return Answers.ids(execute(Call.get(Paths.fill(Paths.SNOWFLAKE_GET, key) + "?count=" + count)), count);
    }

    /** {@code count} (1 to 1,000,000) snowflake IDs as ranges (about one per millisecond the batch spans). */
    public List<IdRange> snowflakeRanges(String key, int count) {
        Validate.tag("a snowflake key", key);
        Validate.count(count, Validate.MAX_RANGE_BATCH);
        String path = Paths.fill(Paths.SNOWFLAKE_GET, key) + "?count=" + count + "&format=ranges";
        return Answers.ranges(execute(Call.get(path)), count);
    }

    /**
     * A snowflake ID's time, worker and sequence, as a node decodes it (the layout's epoch is
     * the cluster's: it cannot be decoded locally).
     */
    public SnowflakeId decodeSnowflake(long id) {
        if (id < 0) {
            throw InvalidRequestException.local(ErrorCode.INVALID_REQUEST, "a snowflake ID is not negative, got " + id);
        }
        Answer a = execute(Call.get(Paths.fill(Paths.SNOWFLAKE_DECODE, Long.toString(id))));
        return a.decode(m -> new SnowflakeId(Json.lng(m, "id"), Json.lng(m, "timestamp_ms"), Json.str(m, "timestamp"),
                (int) Json.lng(m, "worker_id"), (int) Json.lng(m, "sequence")));
    }

    // ---- health and admin ----

    /**
     * {@code GET /health} of whichever node answers: a node that is not ready answers 503 with
     * its report, returned as {@code ready == false}.
     */
    public Health health() {
        Answer a = execute(new Call("GET", Paths.HEALTH, null, Safety.IDEMPOTENT, 503, null));
        Map<String, Object> m;
        try {
            m = Json.parseObject(a.text());
        } catch (IllegalArgumentException e) {
            // A 503 with something else than a report: the node refused (over its limit, a proxy).
            throw a.status() == 503 ? Answers.error(a.node(), a.status(), a.body(), null) : a.decodeError(e.getMessage());
        }
        return a.decode(x -> {
            Map<String, Object> sf = Json.obj(m, "snowflake");
            return new Health(Json.bool(m, "ready"), Json.optBool(m, "segment_ready", Json.bool(m, "ready")),
                    Json.lng(m, "node_id"), Json.optLng(m, "leader_id"), Json.lng(m, "term"), Json.optStr(m, "reason"),
                    Json.str(sf, "state"), Json.optLng(sf, "worker_id"));
        });
    }

    /**
     * Creates a tag ({@code POST /admin/tags}, the token needs the admin right). At most once:
     * retried only when the connection could not be opened. For 3 s after, a
     * {@code tag_not_found} for this tag from a node not yet caught up is retried.
     */
    public TagInfo createTag(CreateTag spec) {
        Validate.tag("a tag", spec.tag());
        Answer a = execute(Call.post(Paths.ADMIN_TAGS, Json.write(spec.toJson()), Safety.AT_MOST_ONCE, null));
        TagInfo info = a.decode(TagInfo::fromJson);
        ownCreates.created(info.tag());
        return info;
    }

    /** The tag as the cluster stores it ({@code GET /admin/tags/{tag}}). */
    public TagInfo tag(String tag) {
        Validate.tag("a tag", tag);
        return execute(Call.about(Paths.fill(Paths.ADMIN_TAG, tag), tag)).decode(TagInfo::fromJson);
    }

    /** Archives the tag ({@code POST /admin/tags/{tag}/archive}, idempotent): it hands out no ID until restored. */
    public TagInfo archiveTag(String tag) {
        Validate.tag("a tag", tag);
        TagInfo info = execute(Call.post(Paths.fill(Paths.ADMIN_TAG_ARCHIVE, tag), null, Safety.IDEMPOTENT, null))
                .decode(TagInfo::fromJson);
        ownCreates.forget(tag);
        return info;
    }

    /** The gapless series {@code tag} (a tag of profile {@code gapless}). */
    public Gapless gapless(String tag) {
        return new Gapless(this, Validate.tag("a tag", tag));
    }

    // ---- the failover loop ----

    /**
     * Runs {@code call} over the nodes: starts at the node that last answered, moves to the
     * next one after an error worth retrying, backing off between attempts, within the retry
     * budget and the deadline.
     */
    Answer execute(Call call) {
        long deadlineAt = System.nanoTime() + deadline.toNanos();
        int n = nodes.size();
        int first = Math.floorMod(preferred.get(), n);
        int attempt = 0;
        int tlsFailures = 0;
        while (true) {
            int idx = (first + attempt) % n;
            String node = nodes.get(idx);
            Duration left = Duration.ofNanos(Math.max(0, deadlineAt - System.nanoTime()));
            LeafException err;
            try {
                Transport.Reply r = transport.send(node, call.method(), call.path(), call.body(), min(timeout, left));
                if ((r.status() >= 200 && r.status() < 300) || r.status() == call.alsoOk()) {
                    preferred.set(idx);
                    return new Answer(node, r.status(), r.body());
                }
                err = Answers.error(node, r.status(), r.body(), r.retryAfter());
            } catch (LeafException e) {
                err = e;
            }
            if (Thread.currentThread().isInterrupted()) {
                throw err;
            }
            boolean ownCreate = call.tag() != null && err instanceof LeafApiException
                    && ((LeafApiException) err).code() == ErrorCode.TAG_NOT_FOUND && ownCreates.withinGrace(call.tag());
            if (!ownCreate && !call.safety().retryable(err)) {
                throw err;
            }
            if (err instanceof LeafTlsException) {
                tlsFailures++;
            }
            // A TLS failure moves on to another node but never comes back round: it does not fix itself.
            if ((!ownCreate && attempt >= retries) || (err instanceof LeafTlsException && tlsFailures >= n)) {
                throw giveUp(attempt, err);
            }
            Duration wait = ownCreate ? OwnCreates.RETRY_EVERY : backoff.delay(attempt);
            if (System.nanoTime() + wait.toNanos() >= deadlineAt) {
                throw giveUp(attempt, err);
            }
            try {
                Thread.sleep(wait.toMillis(), (int) (wait.toNanos() % 1_000_000));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw giveUp(attempt, err);
            }
            attempt++;
        }
    }

    private static LeafException giveUp(int attempt, LeafException err) {
        return attempt == 0 ? err : new AllNodesFailedException(attempt + 1, err);
    }

    private static Duration min(Duration a, Duration b) {
        return a.compareTo(b) <= 0 ? a : b;
    }

    /** Stops the client's HTTP threads; calls made afterwards fail. */
    @Override
    public void close() {
        transport.close();
    }

    @Override
    public String toString() {
        return "LeafClient[nodes=" + nodes + ", token=" + (hasToken ? "(set)" : "(none)") + ", timeout=" + timeout
                + ", deadline=" + deadline + ", retries=" + retries + "]";
    }

    /** The 2xx (or also-ok) answer of a call, and the node that gave it. */
    record Answer(String node, int status, byte[] body) {
        String text() {
            return new String(body, java.nio.charset.StandardCharsets.UTF_8);
        }

        LeafDecodeException decodeError(String message) {
            return new LeafDecodeException(node, status, message);
        }

        /** The body as a JSON object turned into {@code T} by {@code f}; a wrong shape is a decode error. */
        <T> T decode(java.util.function.Function<Map<String, Object>, T> f) {
            try {
                return f.apply(Json.parseObject(text()));
            } catch (IllegalArgumentException e) {
                throw decodeError(e.getMessage());
            }
        }
    }

    /** Readers of answers, shared with {@link Gapless}. */
    static final class Answers {
        private Answers() {
        }

        /** The typed error of a non-2xx answer (a decode error when the body is not an error body). */
        static LeafException error(String node, int status, byte[] body, String retryAfter) {
            try {
                Map<String, Object> m = Json.parseObject(new String(body, java.nio.charset.StandardCharsets.UTF_8));
                return LeafApiException.of(node, status, Json.str(m, "code"), Json.str(m, "message"),
                        Json.optLng(m, "leaf_code"), parseRetryAfter(retryAfter));
            } catch (IllegalArgumentException e) {
                String text = new String(body, 0, Math.min(body.length, 200), java.nio.charset.StandardCharsets.UTF_8);
                return new LeafDecodeException(node, status, "not an error body: " + text);
            }
        }

        private static Duration parseRetryAfter(String v) {
            if (v == null) {
                return null;
            }
            try {
                long seconds = Long.parseLong(v.strip());
                return seconds >= 0 ? Duration.ofSeconds(seconds) : null; // a negative wait means nothing
            } catch (NumberFormatException e) {
                return null;
            }
        }

        /** The body as exactly {@code count} non-negative decimal IDs, one per line. */
        static long[] ids(Answer a, int count) {
            String text = a.text();
            long[] out = new long[count];
            int got = 0;
            int start = 0;
            while (start <= text.length()) {
                int nl = text.indexOf('\n', start);
                int end = nl < 0 ? text.length() : nl;
                String line = text.substring(start, end).strip();
                if (!(line.isEmpty() && nl < 0 && got > 0)) {
                    long id;
                    try {
                        id = Long.parseLong(line);
                    } catch (NumberFormatException e) {
                        throw a.decodeError("not an ID: \"" + line.substring(0, Math.min(40, line.length())) + "\"");
                    }
                    if (id < 0) {
                        throw a.decodeError("a negative ID: " + id);
                    }
                    if (got == count) {
                        throw a.decodeError("more than the " + count + " IDs asked for");
                    }
                    out[got++] = id;
                }
                if (nl < 0) {
                    break;
                }
                start = nl + 1;
            }
            if (got != count) {
                throw a.decodeError(got + " IDs, asked for " + count);
            }
            return out;
        }

        /** The body as ascending, non-overlapping ranges holding exactly {@code count} IDs. */
        static List<IdRange> ranges(Answer a, int count) {
            return a.decode(m -> {
                List<IdRange> out = new ArrayList<>();
                long total = 0;
                long previousEnd = Long.MIN_VALUE;
                for (Object o : Json.arr(m, "ranges")) {
                    if (!(o instanceof Map)) {
                        throw new IllegalArgumentException("a range is not an object");
                    }
                    @SuppressWarnings("unchecked")
                    Map<String, Object> r = (Map<String, Object>) o;
                    IdRange range = new IdRange(Json.lng(r, "start"), Json.lng(r, "end"));
                    if (range.start() < previousEnd) {
                        throw new IllegalArgumentException("ranges are not ascending at " + range);
                    }
                    previousEnd = range.end();
                    total += range.count();
                    out.add(range);
                }
                if (total != count) {
                    throw new IllegalArgumentException(total + " IDs in the ranges, asked for " + count);
                }
                return Collections.unmodifiableList(out);
            });
        }
    }
}
