package io.leaf.client;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
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
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
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
    /** One daemon thread: attempt timeouts and the backoffs of async calls (never slept on). */
    private final ScheduledExecutorService scheduler;
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
        this.scheduler = timer();
        this.authorization = token == null ? null : "Bearer " + token;
    }

    /** Sends {@code method path} with an optional JSON body to {@code node}, within {@code timeout}; blocks. */
    Reply send(String node, String method, String path, String jsonBody, Duration timeout) {
        CompletableFuture<Reply> future = sendAsync(node, method, path, jsonBody, timeout);
        try {
            return future.get();
        } catch (InterruptedException e) {
            future.cancel(true);
            Thread.currentThread().interrupt();
            throw new LeafTransportException(node, "interrupted", false, e);
        } catch (ExecutionException e) {
            Throwable c = e.getCause();
            throw c instanceof LeafException ? (LeafException) c : classify(node, c == null ? e : c, timeout);
        }
    }

    /**
     * Sends {@code method path} with an optional JSON body to {@code node} without blocking: the
     * future completes with the reply, or exceptionally with a {@link LeafException}, within
     * {@code timeout} (headers and body). Cancelling it abandons the exchange.
     */
    CompletableFuture<Reply> sendAsync(String node, String method, String path, String jsonBody, Duration timeout) {
        if (timeout.isZero() || timeout.isNegative()) {
            return CompletableFuture.failedFuture(new LeafTimeoutException(node, Duration.ZERO));
        }
        CompletableFuture<HttpResponse<byte[]>> exchange;
        try {
            exchange = http.sendAsync(request(node, method, path, jsonBody, timeout), BoundedBody.handler(maxAnswerBytes));
        } catch (RuntimeException e) { // a closed client's executor refuses the task
            return CompletableFuture.failedFuture(classify(node, e, timeout));
        }
        CompletableFuture<Reply> out = new CompletableFuture<>();
        // The request's own timeout covers the headers; this one covers the body too.
        ScheduledFuture<?> timer;
        try {
            timer = scheduler.schedule(() -> {
                if (out.completeExceptionally(new LeafTimeoutException(node, timeout))) {
                    exchange.cancel(true);
                }
            }, timeout.toNanos(), TimeUnit.NANOSECONDS);
        } catch (RuntimeException e) { // closed
            exchange.cancel(true);
            return CompletableFuture.failedFuture(classify(node, e, timeout));
        }
        exchange.whenComplete((r, t) -> {
            timer.cancel(false);
            if (t == null) {
                out.complete(new Reply(r.statusCode(), r.body(), r.headers().firstValue("Retry-After").orElse(null)));
            } else {
                Throwable c = t instanceof CompletionException && t.getCause() != null ? t.getCause() : t;
                out.completeExceptionally(classify(node, c, timeout));
            }
        });
        out.whenComplete((r, t) -> {
            if (out.isCancelled()) {
                timer.cancel(false);
                exchange.cancel(true);
            }
        });
        return out;
    }

    /**
     * A test hook: told the method and path (with its query) of every request this client's
     * transports build, just before it is sent. {@code null} (nothing recorded) unless a test
     * of this package sets it; never given the token or the body.
     */
    static volatile java.util.function.BiConsumer<String, String> onSend;

    private HttpRequest request(String node, String method, String path, String jsonBody, Duration timeout) {
        java.util.function.BiConsumer<String, String> hook = onSend;
        if (hook != null) {
            hook.accept(method, path);
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
        return rb.build();
    }

    /**
     * Streams {@code GET path} of {@code node} into {@code out} (a backup: any size), the whole
     * download within {@code timeout}; completes with the bytes written. The copy runs on the
     * client's HTTP executor. A non-200 answer fails with its typed error, {@code out} untouched.
     */
    CompletableFuture<Long> download(String node, String path, OutputStream out, Duration timeout) {
        CompletableFuture<HttpResponse<InputStream>> exchange;
        try {
            exchange = http.sendAsync(request(node, "GET", path, null, timeout), HttpResponse.BodyHandlers.ofInputStream());
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(classify(node, e, timeout));
        }
        long started = System.nanoTime();
        return exchange.handle((r, t) -> {
            if (t != null) {
                throw classify(node, t instanceof CompletionException && t.getCause() != null ? t.getCause() : t, timeout);
            }
            return r;
        }).thenApplyAsync(r -> {
            InputStream in = r.body();
            try {
                if (r.statusCode() != 200) {
                    byte[] err = in.readNBytes(64 * 1024);
                    throw Answers.error(node, r.statusCode(), err, null);
                }
                Duration left = timeout.minusNanos(System.nanoTime() - started);
                ScheduledFuture<?> stop = scheduler.schedule(() -> closeQuietly(in), Math.max(0, left.toNanos()), TimeUnit.NANOSECONDS);
                try {
                    return in.transferTo(out);
                } catch (IOException e) {
                    if (stop.isDone()) {
                        throw new LeafTimeoutException(node, timeout);
                    }
                    throw classify(node, e, timeout);
                } finally {
                    stop.cancel(false);
                }
            } catch (IOException e) {
                throw classify(node, e, timeout);
            } finally {
                closeQuietly(in);
            }
        }, executor);
    }

    private static void closeQuietly(InputStream in) {
        try {
            in.close();
        } catch (IOException e) {
            // nothing more to read or release
        }
    }

    /** Runs {@code task} after {@code delay} on the client's timer thread (backoffs of async calls). */
    ScheduledFuture<?> schedule(Runnable task, Duration delay) {
        return scheduler.schedule(task, delay.toNanos(), TimeUnit.NANOSECONDS);
    }

    /** Runs {@code task} on the client's HTTP executor (never a caller's thread). */
    void execute(Runnable task) {
        executor.execute(task);
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

    private static final AtomicInteger TIMERS = new AtomicInteger();

    private static ScheduledExecutorService timer() {
        String name = "leaf-timer-" + TIMERS.incrementAndGet();
        ScheduledThreadPoolExecutor t = new ScheduledThreadPoolExecutor(1, r -> {
            Thread th = new Thread(r, name);
            th.setDaemon(true);
            return th;
        });
        t.setRemoveOnCancelPolicy(true);
        return Executors.unconfigurableScheduledExecutorService(t);
    }

    /** Stops the client's threads; calls in flight fail. */
    void close() {
        scheduler.shutdownNow();
        executor.shutdownNow();
    }
}
