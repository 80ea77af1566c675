package io.leaf.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** One attempt against a stand-in server: answers are read up to a bound, never without one. */
class TransportTest {
    private static final int LIMIT = 1 << 20;
    private static HttpServer server;
    private static String url;

    @BeforeAll
    static void start() throws IOException {
        server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
        server.createContext("/small", x -> answer(x, 200, "42".getBytes(), false));
        // Three times the bound, with and without a Content-Length (chunked).
        server.createContext("/big", x -> answer(x, 200, new byte[3 * LIMIT], false));
        server.createContext("/big-chunked", x -> answer(x, 200, new byte[3 * LIMIT], true));
        server.createContext("/big-503", x -> answer(x, 503, new byte[3 * LIMIT], true));
        server.start();
        url = "http://127.0.0.1:" + server.getAddress().getPort();
    }

    private static void answer(com.sun.net.httpserver.HttpExchange x, int status, byte[] body, boolean chunked)
            throws IOException {
        x.sendResponseHeaders(status, chunked ? 0 : body.length);
        try (OutputStream out = x.getResponseBody()) {
            for (int at = 0; at < body.length; at += 64 << 10) {
                out.write(body, at, Math.min(64 << 10, body.length - at));
            }
        } catch (IOException e) {
            // The client hung up once it had read its bound: expected for the big answers.
        }
        x.close();
    }

    @AfterAll
    static void stop() {
        server.stop(0);
    }

    private static Transport transport(ExecutorService executor) {
        return new Transport(Duration.ofSeconds(5), null, null, executor, LIMIT);
    }

    @Test
    void anAnswerOverTheBoundIsADecodeErrorNotAnUnboundedBuffer() {
        ExecutorService executor = Executors.newCachedThreadPool();
        Transport t = transport(executor);
        try {
            assertEquals("42", t.send(url, "GET", "/small", null, Duration.ofSeconds(5)).text());
            for (String path : new String[] {"/big", "/big-chunked"}) {
                LeafException e = assertThrows(LeafException.class,
                        () -> t.send(url, "GET", path, null, Duration.ofSeconds(5)));
                assertTrue(e instanceof LeafDecodeException, path + ": " + e);
                assertEquals(200, ((LeafDecodeException) e).status());
                assertTrue(e.getMessage().contains("more than " + LIMIT + " bytes"), e.getMessage());
                assertFalse(Safety.IDEMPOTENT.retryable(e), "a 200 that is too long is the answer");
            }
            LeafException e = assertThrows(LeafException.class,
                    () -> t.send(url, "GET", "/big-503", null, Duration.ofSeconds(5)));
            assertTrue(Safety.IDEMPOTENT.retryable(e), "a 503 that is too long (a proxy's page) is retried: " + e);
        } finally {
            t.close();
        }
    }
}
