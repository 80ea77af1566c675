package io.leaf.client;

import java.util.List;
import java.util.Locale;
import java.util.Map;

/** The ledger of a gapless series ({@code GET /admin/tags/{tag}/ledger}): its query, pages and entries. */
public final class Ledger {
    private Ledger() {
    }

    /**
     * Which numbers a page holds; every field optional ({@code null}).
     *
     * @param period only this period
     * @param afterPeriod with {@code afterNumber}: numbers after this one (the previous page's cursor)
     * @param afterNumber see {@code afterPeriod}
     * @param limit most numbers on the page
     * @param state only numbers in this state
     */
    public record Query(Long period, Long afterPeriod, Long afterNumber, Integer limit, NumberState state) {
        /** The first page of every period. */
        public static Query all() {
            return new Query(null, null, null, null, null);
        }

        String on(String path) {
            return Paths.query(path, "period", period, "after_period", afterPeriod, "after_number", afterNumber,
                    "limit", limit, "state", state == null ? null : state.name().toLowerCase(Locale.ROOT));
        }
    }

    /**
     * One number of the ledger, in issue order.
     *
     * @param period its period (0: never resets)
     * @param number its number
     * @param display its display form, or {@code null}
     * @param key the caller's key
     * @param state its state now
     * @param actor who issued it (see {@link AuditRecord#actor()})
     * @param atMs leader time of the issue, Unix ms
     * @param deadlineMs a reservation's deadline, or {@code null}
     * @param seq its place in the hash chain
     * @param hash its hash in the chain
     * @param voidCause a voided number's cause ({@code caller}, {@code expired}, {@code period_closed}, {@code lost}), or {@code null}
     * @param reason a voided number's reason, or {@code null}
     */
    public record Entry(long period, long number, String display, String key, NumberState state, String actor,
            long atMs, Long deadlineMs, long seq, String hash, String voidCause, String reason) {
        static Entry fromJson(Map<String, Object> m) {
            Map<String, Object> s = Json.optObj(m, "settled");
            return new Entry(Json.lng(m, "period"), Json.lng(m, "number"), Json.optStr(m, "display"), Json.str(m, "key"),
                    NumberState.fromWire(Json.str(m, "state")), Actors.describe(m.get("actor")), Json.lng(m, "at_ms"),
                    Json.optLng(m, "deadline_ms"), Json.lng(m, "seq"), Json.str(m, "hash"),
                    s == null ? null : Json.optStr(s, "cause"), s == null ? null : Json.optStr(s, "reason"));
        }
    }

    /**
     * One page of the ledger.
     *
     * @param tag the series
     * @param numbers numbers in the ledger
     * @param openReservations reservations not yet settled
     * @param prunedThrough the last period pruned away, or {@code null}
     * @param head the hash chain's head
     * @param entries the page's numbers
     * @param next the query of the next page, or {@code null} when this is the last
     */
    public record Page(String tag, long numbers, long openReservations, Long prunedThrough, String head,
            List<Entry> entries, Query next) {
        static Page fromJson(Map<String, Object> m, Query asked) {
            Map<String, Object> c = Json.optObj(m, "next");
            Query next = c == null ? null
                    : new Query(asked.period(), Json.lng(c, "after_period"), Json.lng(c, "after_number"), asked.limit(),
                            asked.state());
            return new Page(Json.str(m, "tag"), Json.lng(m, "numbers"), Json.lng(m, "open_reservations"),
                    Json.optLng(m, "pruned_through"), Json.str(m, "head"), Json.objList(m, "entries", Entry::fromJson),
                    next);
        }
    }

    /** The ledger of {@code tag} page after page, checked to move forward and to stay the tag's. */
    static Paged<Query, Page, Entry> paged(String tag) {
        return new Paged<>() {
            @Override
            public Op<Page> page(Query q) {
                Call call = Call.get(q.on(Paths.fill(Paths.ADMIN_TAG_LEDGER, tag)));
                return new Op<>(call, a -> {
                    Page p = a.decode(m -> Page.fromJson(m, q));
                    if (!p.tag().equals(tag)) {
                        throw a.decodeError("asked for the ledger of " + tag + ", answered " + p.tag());
                    }
                    return p;
                });
            }

            @Override
            public List<Entry> items(Page p) {
                return p.entries();
            }

            @Override
            public Query next(Query q, Page p) {
                if (p.next() == null) {
                    return null;
                }
                Entry last = p.entries().isEmpty() ? null : p.entries().get(p.entries().size() - 1);
                boolean forward = last != null && last.period() == p.next().afterPeriod()
                        && last.number() == p.next().afterNumber()
                        && (q.afterPeriod() == null || compare(last, q.afterPeriod(), q.afterNumber()) > 0);
                if (!forward) {
                    throw new LeafDecodeException("(pages)", 200, "the ledger of " + tag + " did not move forward between pages");
                }
                return p.next();
            }
        };
    }

    private static int compare(Entry e, long period, long number) {
        return e.period() != period ? Long.compare(e.period(), period) : Long.compare(e.number(), number);
    }
}
