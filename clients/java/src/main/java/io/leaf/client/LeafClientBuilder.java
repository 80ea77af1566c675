package io.leaf.client;

import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

/**
 * Configures a {@link LeafClient}; made by {@link LeafClient#builder()}.
 *
 * <p>Defaults: no token, 5 s per attempt, 15 s per call in total, 3 retries, backoff from
 * 50 ms doubling to at most 1 s (with jitter); {@code https://} nodes are checked against the
 * JVM's default trust store unless a CA is given. Settings are checked by {@link #build()},
 * which throws {@link IllegalArgumentException} for a bad one (the message never quotes the
 * token or a URL's credentials).
 */
public final class LeafClientBuilder {
    private List<String> nodes = List.of();
    private Path caCert;
    private String token;
    private Duration timeout = Duration.ofSeconds(5);
    private Duration deadline = Duration.ofSeconds(15);
    private int retries = 3;
    private Duration backoffBase = Duration.ofMillis(50);
    private Duration backoffCap = Duration.ofSeconds(1);

    LeafClientBuilder() {
    }

    /** The nodes' base URLs ({@code http://host:port} or {@code https://host:port}); any serves every call. */
    public LeafClientBuilder nodes(List<String> nodes) {
        this.nodes = List.copyOf(nodes);
        return this;
    }

    /** The nodes' base URLs (see {@link #nodes(List)}). */
    public LeafClientBuilder nodes(String... nodes) {
        return nodes(List.of(nodes));
    }

    /** Trust only the CA certificate(s) in this PEM file for {@code https://} nodes. */
    public LeafClientBuilder caCert(Path pem) {
        this.caCert = pem;
        return this;
    }

    /** The bearer token sent with every request ({@code Authorization: Bearer <token>}). */
    public LeafClientBuilder token(String token) {
        this.token = token;
        return this;
    }

    /** The most one attempt may take (connect, request and answer). */
    public LeafClientBuilder timeout(Duration timeout) {
        this.timeout = Objects.requireNonNull(timeout);
        return this;
    }

    /** The most one call may take, all its attempts and backoffs included. */
    public LeafClientBuilder deadline(Duration deadline) {
        this.deadline = Objects.requireNonNull(deadline);
        return this;
    }

    /** How many times a call may be retried after its first attempt (0: never). */
    public LeafClientBuilder retries(int retries) {
        this.retries = retries;
        return this;
    }

    /** The backoff before retry {@code n}: a random time between half and all of {@code min(cap, base * 2^n)}. */
    public LeafClientBuilder backoff(Duration base, Duration cap) {
        this.backoffBase = Objects.requireNonNull(base);
        this.backoffCap = Objects.requireNonNull(cap);
        return this;
    }

    /** The client. */
    public LeafClient build() {
        if (nodes.isEmpty()) {
            throw new IllegalArgumentException("no node URLs given");
        }
        List<String> normalised = new ArrayList<>();
        for (String n : nodes) {
            normalised.add(normalise(n));
        }
        if (timeout.isZero() || timeout.isNegative() || deadline.isZero() || deadline.isNegative()) {
            throw new IllegalArgumentException("timeout and deadline must be above zero");
        }
        if (retries < 0) {
            throw new IllegalArgumentException("retries must not be negative");
        }
        if (token != null && (token.isEmpty() || token.chars().anyMatch(c -> c < 0x20 || c > 0x7e))) {
            throw new IllegalArgumentException("the token must be non-empty printable ASCII");
        }
        Backoff backoff = new Backoff(backoffBase, backoffCap);
        SSLContext ssl = caCert == null ? null : sslContext(caCert);
        Transport transport = new Transport(timeout, ssl, token, executor());
        return new LeafClient(normalised, transport, timeout, deadline, retries, backoff, token != null);
    }

    /** {@code url} without a trailing slash, checked: http(s), a host, no credentials, no query. */
    static String normalise(String url) {
        URI uri;
        try {
            uri = new URI(url.strip());
        } catch (URISyntaxException e) {
            throw new IllegalArgumentException("invalid node URL " + redact(url) + ": " + e.getReason());
        }
        if (uri.getRawUserInfo() != null) {
            throw new IllegalArgumentException("invalid node URL (redacted): credentials in a URL are not allowed");
        }
        String scheme = uri.getScheme();
        if (!"http".equals(scheme) && !"https".equals(scheme)) {
            throw new IllegalArgumentException("invalid node URL " + url + ": the scheme must be http or https");
        }
        if (uri.getHost() == null) {
            throw new IllegalArgumentException("invalid node URL " + url + ": no host");
        }
        if (uri.getRawQuery() != null || uri.getRawFragment() != null) {
            throw new IllegalArgumentException("invalid node URL " + url + ": no query or fragment allowed");
        }
        String s = uri.toString();
        while (s.endsWith("/")) {
            s = s.substring(0, s.length() - 1);
        }
        return s;
    }

    private static String redact(String url) {
        return url.contains("@") ? "(redacted)" : url;
    }

    /** A TLS context trusting only the certificates of the PEM file at {@code path}. */
    static SSLContext sslContext(Path path) {
        try (InputStream in = Files.newInputStream(path)) {
            Collection<? extends Certificate> certs = CertificateFactory.getInstance("X.509").generateCertificates(in);
            if (certs.isEmpty()) {
                throw new IllegalArgumentException("the CA certificate file " + path + " holds no certificate");
            }
            KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
            store.load(null, null);
            int i = 0;
            for (Certificate c : certs) {
                store.setCertificateEntry("leaf-ca-" + i++, c);
            }
            TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            tmf.init(store);
            SSLContext ctx = SSLContext.getInstance("TLS");
            ctx.init(null, tmf.getTrustManagers(), null);
            return ctx;
        } catch (IOException e) {
            throw new IllegalArgumentException("cannot read the CA certificate file " + path + ": " + e, e);
        } catch (GeneralSecurityException e) {
            throw new IllegalArgumentException("the CA certificate file " + path + " is not usable: " + e.getMessage(), e);
        }
    }

    /** Daemon threads for the HTTP client's callbacks, shut down by {@link LeafClient#close()}. */
    private static ExecutorService executor() {
        AtomicInteger n = new AtomicInteger();
        return Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "leaf-http-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        });
    }

    @Override
    public String toString() {
        return "LeafClientBuilder[nodes=" + nodes.size() + ", token=" + (token == null ? "(none)" : "(set)") + "]";
    }
}
