package io.leaf.client;

import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * One gapless series of a {@link LeafClient} ({@link LeafClient#gapless(String)}): numbers 1,
 * 2, 3... with no gap, each for a caller's key.
 *
 * <p>Every call is idempotent by its key: the same key always gets the same number (a repeat
 * answers {@code replayed == true}), and a reservation is settled once, so a call whose answer
 * was lost is sent again, to any node, and never consumes a second number.
 * {@link AsyncGapless} has the same calls returning futures.
 */
public final class Gapless {
    private final LeafClient client;
    private final String tag;

    Gapless(LeafClient client, String tag) {
        this.client = client;
        this.tag = tag;
    }

    /** The series' tag. */
    public String tag() {
        return tag;
    }

    /** The series' number for {@code key}: the next one, or the one the key has ({@code replayed}). */
    public IssuedNumber issue(String key) {
        return client.run(issueOp(tag, key));
    }

    /**
     * The series' number for {@code key}, reserved for {@code holdSeconds} (1 s to 30 days;
     * {@code null}: the server's 900 s). Confirm or void it before its deadline, or the leader
     * voids it.
     */
    public IssuedNumber reserve(String key, Integer holdSeconds) {
        return client.run(reserveOp(tag, key, holdSeconds));
    }

    /** Makes the key's reserved number final; checked to answer confirmed (or issued). */
    public IssuedNumber confirm(String key) {
        return client.run(confirmOp(tag, key));
    }

    /** Voids the key's reserved number for {@code reason}; checked to answer voided. */
    public IssuedNumber voidNumber(String key, String reason) {
        return client.run(voidOp(tag, key, reason));
    }

    /** One page of the series' ledger ({@code GET /admin/tags/{tag}/ledger}; the {@code tags} right). */
    public Ledger.Page ledgerPage(Ledger.Query query) {
        return client.run(Ledger.paged(tag).page(query));
    }

    /**
     * The series' whole ledger (of {@code period} only, if not {@code null}), page after page,
     * checked to move forward: an export of every number with its key, state and hash.
     */
    public List<Ledger.Entry> ledger(Long period) {
        return client.all(Ledger.paged(tag), new Ledger.Query(period, null, null, null, null));
    }

    static Op<IssuedNumber> issueOp(String tag, String key) {
        return op(tag, Paths.GAPLESS_ISSUE, Json.object("key", Validate.key(key)), key, null);
    }

    static Op<IssuedNumber> reserveOp(String tag, String key, Integer holdSeconds) {
        Integer hold = Validate.holdSeconds(holdSeconds);
        Map<String, Object> body = Json.object("key", Validate.key(key), "hold_seconds", hold == null ? null : (long) hold);
        return op(tag, Paths.GAPLESS_RESERVE, body, key, null);
    }

    static Op<IssuedNumber> confirmOp(String tag, String key) {
        return op(tag, Paths.GAPLESS_CONFIRM, Json.object("key", Validate.key(key)), key,
                EnumSet.of(NumberState.CONFIRMED, NumberState.ISSUED));
    }

    static Op<IssuedNumber> voidOp(String tag, String key, String reason) {
        Map<String, Object> body = Json.object("key", Validate.key(key), "reason", Validate.reason(reason));
        return op(tag, Paths.GAPLESS_VOID, body, key, EnumSet.of(NumberState.VOIDED));
    }

    private static Op<IssuedNumber> op(String tag, String template, Map<String, Object> body, String key,
            Set<NumberState> states) {
        Call c = Call.post(Paths.fill(template, tag), Json.write(body), Safety.IDEMPOTENT, tag);
        return new Op<>(c, a -> {
            IssuedNumber n = a.decode(IssuedNumber::fromJson);
            if (!n.tag().equals(tag) || !n.key().equals(key) || n.number() == 0) {
                throw a.decodeError("asked for tag " + tag + " key " + key + ", answered number " + n.number()
                        + " of tag " + n.tag() + " key " + n.key());
            }
            if (states != null && !states.contains(n.state())) {
                throw a.decodeError("number " + n.number() + " of key " + key + " answered as " + n.state());
            }
            return n;
        });
    }

    @Override
    public String toString() {
        return "Gapless[" + tag + "]";
    }
}
