package io.leaf.client;

import java.util.Locale;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Every request the clients of this test run actually sent ({@code "get /api/segment/get/t"}:
 * lower-case method, path without its query), through {@link Transport}'s test hook. Installed
 * by {@link LeafNodes} (every test against real nodes loads it before building a client); read
 * by {@link ContractTest}, which runs last.
 */
public final class SentRequests {
    private static final Set<String> SENT = ConcurrentHashMap.newKeySet();

    static {
        Transport.onSend = (method, path) -> {
            int q = path.indexOf('?');
            SENT.add(method.toLowerCase(Locale.ROOT) + " " + (q < 0 ? path : path.substring(0, q)));
        };
    }

    private SentRequests() {
    }

    /** Installs the hook (loading the class does). */
    public static void install() {
        // the static initializer did it
    }

    /** The requests sent so far. */
    static Set<String> sent() {
        return Set.copyOf(SENT);
    }
}
