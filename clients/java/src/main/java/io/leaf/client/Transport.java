package io.leaf.client;

import java.io.IOException;
import java.net.ConnectException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLException;

/**
 * One attempt of one request to one node, over {@link HttpClient} (HTTP/1.1, kept-alive
 * connections), with failures sorted into {@link LeafTransportException} (and whether the
 * request was sent), {@link LeafTimeoutException} and {@link LeafTlsException}.
 */
final class Transport {
    /** A node's answer, any status. */
    record Reply(int status, byte[] body, String retryAfter) {
        String text() {
            return new String(body, StandardCharsets.UTF_8);
        }
    }

    private final HttpClient http;
    private final ExecutorService executor;
    /** {@code Bearer <token>}, or {@code null}. Never printed. */
    private final String authorization;
    private final int maxAnswerBytes;

    Transport(Duration connectTimeout, SSLContext ssl, String token, ExecutorService executor) {
        this(connectTimeout, ssl, token, executor, BoundedBody.MAX_BYTES);
    }

    /** With answers bounded to {@code maxAnswerBytes} (tests use a small bound). */
    Transport(Duration connectTimeout, SSLContext ssl, String token, ExecutorService executor, int maxAnswerBytes) {
        this.maxAnswerBytes = maxAnswerBytes;
        HttpClient.Builder b = HttpClient.newBuilder()
                .version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(connectTimeout)
                .followRedirects(HttpClient.Redirect.NEVER)
                .executor(executor);
        if (ssl != null) {
            b.sslContext(ssl);
        }
        this.http = b.build();
        this.executor = executor;
        this.authorization = token == null ? null : "Bearer " + token;
    }

    /** Sends {@code method path} with an optional JSON body to {@code node}, within {@code timeout}. */
    Reply send(String node, String method, String path, String jsonBody, Duration timeout) {
        if (timeout.isZero() || timeout.isNegative()) {
            throw new LeafTimeoutException(node, Duration.ZERO);
        }
        HttpRequest.Builder rb = HttpRequest.newBuilder(URI.create(node + path)).timeout(timeout);
        if (authorization != null) {
            rb.header("Authorization", authorization);
        }
        if (jsonBody != null) {
            rb.header("Content-Type", "application/json");
            rb.method(method, HttpRequest.BodyPublishers.ofString(jsonBody, StandardCharsets.UTF_8));
        } else {
            rb.method(method, HttpRequest.BodyPublishers.noBody());
        }
        CompletableFuture<HttpResponse<byte[]>> future =
                http.sendAsync(rb.build(), BoundedBody.handler(maxAnswerBytes));
        try {
            // The request's own timeout covers the headers; this one covers the body too.
            HttpResponse<byte[]> r = future.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
            return new Reply(r.statusCode(), r.body(), r.headers().firstValue("Retry-After").orElse(null));
        } catch (TimeoutException e) {
            future.cancel(true);
            throw new LeafTimeoutException(node, timeout);
        } catch (InterruptedException e) {
            future.cancel(true);
            Thread.currentThread().interrupt();
            throw new LeafTransportException(node, "interrupted", false, e);
        } catch (ExecutionException e) {
            throw classify(node, e.getCause() == null ? e : e.getCause(), timeout);
        }
    }

    /** The error of a failed exchange. */
    static LeafException classify(String node, Throwable t, Duration timeout) {
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (c instanceof BoundedBody.TooLarge) {
                // The node answered, with more than any endpoint sends (retried only as a 503).
                return new LeafDecodeException(node, ((BoundedBody.TooLarge) c).status, c.getMessage());
            }
        }
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (c instanceof SSLException) {
                return new LeafTlsException(node, tlsReason(c), t);
            }
        }
        if (t instanceof HttpConnectTimeoutException) {
            return new LeafTransportException(node, "could not connect within " + timeout.toMillis() + " ms", true, t);
        }
        if (t instanceof HttpTimeoutException) {
            return new LeafTimeoutException(node, timeout);
        }
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (c instanceof ConnectException) {
                String m = c.getMessage();
                return new LeafTransportException(node, "cannot connect: " + (m == null ? "connection refused" : m),
                        true, t);
            }
        }
        if (t instanceof IOException) {
            String m = t.getMessage();
            return new LeafTransportException(node, m == null ? t.getClass().getSimpleName() : m, false, t);
        }
        return new LeafTransportException(node, t.toString(), false, t);
    }

    /** What a handshake failure means, in plain words. */
    private static String tlsReason(Throwable c) {
        String m = String.valueOf(c.getMessage());
        if (m.contains("PKIX") || m.contains("unable to find valid certification path")) {
            return "the node's certificate is not signed by a CA this client trusts (pass the cluster CA): " + m;
        }
        if (m.contains("No subject alternative") || m.contains("doesn't match")) {
            return "the node's certificate does not name the host it was dialled at: " + m;
        }
        if (m.contains("Unsupported or unrecognized SSL message")) {
            return "the node answered in plaintext (use http://, or enable TLS on the node): " + m;
        }
        return m;
    }

    /** Stops the client's threads; calls in flight fail. */
    void close() {
        executor.shutdownNow();
    }
}
