package io.leaf.client;

import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

/** Stand-in servers for the tests: one that never answers, one that is always unavailable. */
public final class Stubs {
    static {
        SentRequests.install(); // record every request the tests' clients send (ContractTest)
    }

    private Stubs() {
    }

    /** Accepts every connection, reads nothing and never answers: a hung node. */
    public static final class Stalled implements AutoCloseable {
        private final ServerSocket server;
        private final List<Socket> held = new CopyOnWriteArrayList<>();
        private final AtomicInteger accepted = new AtomicInteger();

        public Stalled() throws IOException {
            server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
            Thread t = new Thread(() -> {
                while (!server.isClosed()) {
                    try {
                        held.add(server.accept());
                        accepted.incrementAndGet();
                    } catch (IOException e) {
                        return; // closed
                    }
                }
            }, "stalled-server");
            t.setDaemon(true);
            t.start();
        }

        /** Its base URL. */
        public String url() {
            return "http://127.0.0.1:" + server.getLocalPort();
        }

        /** Connections accepted so far (each still held open). */
        public int accepted() {
            return accepted.get();
        }

        @Override
        public void close() throws IOException {
            server.close();
            for (Socket s : held) {
                s.close();
            }
        }
    }

    /** Answers every request 503 {@code unavailable} (a transient error: retried), counting requests per path. */
    public static final class Unavailable implements AutoCloseable {
        private final HttpServer server;
        private final Map<String, AtomicInteger> hits = new ConcurrentHashMap<>();

        public Unavailable() throws IOException {
            server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
            server.createContext("/", x -> {
                hits.computeIfAbsent(x.getRequestURI().getPath(), k -> new AtomicInteger()).incrementAndGet();
                byte[] body = "{\"code\":\"unavailable\",\"message\":\"stand-in\"}".getBytes(StandardCharsets.UTF_8);
                x.getResponseHeaders().add("Content-Type", "application/json");
                x.sendResponseHeaders(503, body.length);
                try (OutputStream out = x.getResponseBody()) {
                    out.write(body);
                }
            });
            server.start();
        }

        /** Its base URL. */
        public String url() {
            return "http://127.0.0.1:" + server.getAddress().getPort();
        }

        /** Requests of {@code path} so far. */
        public int hits(String path) {
            AtomicInteger n = hits.get(path);
            return n == null ? 0 : n.get();
        }

        @Override
        public void close() {
            server.stop(0);
        }
    }
}
