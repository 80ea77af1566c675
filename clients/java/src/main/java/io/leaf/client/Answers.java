package io.leaf.client;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/** Readers of answers. */
final class Answers {
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
