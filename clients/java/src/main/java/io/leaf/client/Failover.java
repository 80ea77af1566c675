package io.leaf.client;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The failover and retry rules of a call, shared by the blocking loop
 * ({@link LeafClient#execute}) and the asynchronous chain ({@link LeafClient#executeAsync}):
 * which node each attempt goes to, how long it may take, and, after it, whether the call is
 * answered, given up, or retried after which backoff. Neither path decides anything itself;
 * they only send, and wait (sleeping, or scheduling) for the {@link Step#backoff()} this says.
 */
final class Failover {
    /**
     * What follows an attempt: the answer, the error to give up with, or another attempt after
     * {@code backoff} (exactly one of the three is set, {@code error} too when retrying: the error
     * to throw if the wait is cut short).
     */
    record Step(Answer answer, LeafException error, Duration backoff) {
        boolean retry() {
            return backoff != null;
        }
    }

    private final List<String> nodes;
    private final Duration timeout;
    private final Duration deadline;
    private final int retries;
    private final Backoff backoff;
    private final OwnCreates ownCreates;
    /** The node the next call starts with: the last one that answered. */
    private final AtomicInteger preferred = new AtomicInteger();

    Failover(List<String> nodes, Duration timeout, Duration deadline, int retries, Backoff backoff,
            OwnCreates ownCreates) {
        this.nodes = List.copyOf(nodes);
        this.timeout = timeout;
        this.deadline = deadline;
        this.retries = retries;
        this.backoff = backoff;
        this.ownCreates = ownCreates;
    }

    /** The state of one call's attempts, starting now at the node that answered last. */
    Run start(Call call) {
        return new Run(call);
    }

    /** One call's attempts. Not thread-safe: used by one thread at a time (the async chain hands it on). */
    final class Run {
        private final Call call;
        private final long deadlineAt = System.nanoTime() + deadline.toNanos();
        private final int first = Math.floorMod(preferred.get(), nodes.size());
        private int attempt;
        private int tlsFailures;

        private Run(Call call) {
            this.call = call;
        }

        /** The call. */
        Call call() {
            return call;
        }

        /** The node of the current attempt. */
        String node() {
            return nodes.get(index());
        }

        private int index() {
            return (first + attempt) % nodes.size();
        }

        /** How long the current attempt may take: the per-attempt timeout, within the call's deadline. */
        Duration attemptTimeout() {
            Duration left = Duration.ofNanos(Math.max(0, deadlineAt - System.nanoTime()));
            return timeout.compareTo(left) <= 0 ? timeout : left;
        }

        /** Moves on to the next attempt (after the wait of a {@link Step#retry() retry}). */
        void next() {
            attempt++;
        }

        /** The error a call stopped during a wait (interrupted, cancelled) ends with. */
        LeafException stopped(LeafException err) {
            return giveUp(err);
        }

        /** What follows the current attempt, which answered {@code reply} or failed with {@code failure}. */
        Step after(Transport.Reply reply, LeafException failure) {
            String node = node();
            LeafException err = failure;
            if (err == null) {
                int s = reply.status();
                if ((s >= 200 && s < 300) || s == call.alsoOk()) {
                    preferred.set(index());
                    return new Step(new Answer(node, s, reply.body()), null, null);
                }
                err = Answers.error(node, s, reply.body(), reply.retryAfter());
            }
            boolean ownCreate = call.tag() != null && err instanceof LeafApiException
                    && ((LeafApiException) err).code() == ErrorCode.TAG_NOT_FOUND && ownCreates.withinGrace(call.tag());
            if (!ownCreate && !call.safety().retryable(err)) {
                return new Step(null, err, null);
            }
            if (err instanceof LeafTlsException) {
                tlsFailures++;
            }
            // A TLS failure moves on to another node but never comes back round: it does not fix itself.
            if ((!ownCreate && attempt >= retries) || (err instanceof LeafTlsException && tlsFailures >= nodes.size())) {
                return new Step(null, giveUp(err), null);
            }
            Duration wait = ownCreate ? OwnCreates.RETRY_EVERY : backoff.delay(attempt);
            if (System.nanoTime() + wait.toNanos() >= deadlineAt) {
                return new Step(null, giveUp(err), null);
            }
            return new Step(null, err, wait);
        }

        private LeafException giveUp(LeafException err) {
            return attempt == 0 ? err : new AllNodesFailedException(attempt + 1, err);
        }
    }
}
