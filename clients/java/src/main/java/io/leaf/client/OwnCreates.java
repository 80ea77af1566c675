package io.leaf.client;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Iterator;

/**
 * Reading one's own creates. A node caught up with its leader answers a request for a tag it
 * does not hold with 404 from its own state; a tag just created through another node may be
 * unknown there for a moment (at most two heartbeats). So the client remembers the tags it
 * created in the last {@link #GRACE} and retries a {@code tag_not_found} for one of them every
 * {@link #RETRY_EVERY} until the grace runs out, without spending its retry budget. Archiving a
 * tag forgets it (an archived tag is 404 for good).
 */
final class OwnCreates {
    /** How long after its create a tag's {@code tag_not_found} is retried. */
    static final Duration GRACE = Duration.ofSeconds(3);
    /** The wait between such retries. */
    static final Duration RETRY_EVERY = Duration.ofMillis(50);
    /** Tags remembered at most (the oldest are forgotten first). */
    static final int KEEP = 1024;

    private record Created(String tag, long atNanos) {
    }

    private final ArrayDeque<Created> recent = new ArrayDeque<>();

    /** Remembers that this client created {@code tag} just now. */
    synchronized void created(String tag) {
        long now = System.nanoTime();
        while (!recent.isEmpty() && now - recent.peekFirst().atNanos() > GRACE.toNanos()) {
            recent.pollFirst();
        }
        if (recent.size() >= KEEP) {
            recent.pollFirst();
        }
        recent.addLast(new Created(tag, now));
    }

    /** Forgets {@code tag} (archived: its 404 is the answer). */
    synchronized void forget(String tag) {
        recent.removeIf(c -> c.tag().equals(tag));
    }

    /** Whether this client created {@code tag} less than {@link #GRACE} ago. */
    synchronized boolean withinGrace(String tag) {
        long now = System.nanoTime();
        for (Iterator<Created> it = recent.descendingIterator(); it.hasNext();) {
            Created c = it.next();
            if (c.tag().equals(tag) && now - c.atNanos() < GRACE.toNanos()) {
                return true;
            }
        }
        return false;
    }
}
