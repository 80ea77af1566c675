package io.leaf.client;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BooleanSupplier;
import java.util.stream.Stream;

/**
 * Test harness: real {@code leaf} nodes in temp directories, a single node or a 3-node TLS
 * cluster started like deploy/local-cluster.sh. Every process is killed on {@link #close()}
 * (and by a shutdown hook); data directories are deleted.
 */
public final class LeafNodes implements AutoCloseable {
    /** The admin token of every node the harness starts (16+ visible characters). */
    public static final String TOKEN = "java-client-test-admin-token-0123";
    private static final String SECRET = "java-client-test-cluster-secret-456789";

    static {
        SentRequests.install(); // record every request the tests' clients send (ContractTest)
    }

    /** One node process. */
    public static final class Node {
        final int id;
        final int port;
        final List<String> command;
        final Path log;
        final String url;
        Process process;

        Node(int id, int port, List<String> command, Path log, String url) {
            this.id = id;
            this.port = port;
            this.command = command;
            this.log = log;
            this.url = url;
        }

        public String url() {
            return url;
        }

        public int id() {
            return id;
        }
    }

    private final Path dir;
    private final Path ca;
    private final Map<Integer, Node> nodes = new LinkedHashMap<>();

    private LeafNodes(Path dir, Path ca) {
        this.dir = dir;
        this.ca = ca;
        Runtime.getRuntime().addShutdownHook(new Thread(this::killAll));
    }

    /** The node binary: {@code $LEAF_BIN}, else {@code <repo>/target/debug/leaf}; fails the test when missing. */
    public static Path binary() {
        String env = System.getenv("LEAF_BIN");
        Path bin = env != null && !env.isEmpty() ? Path.of(env) : repoRoot().resolve("target/debug/leaf");
        if (!Files.isExecutable(bin)) {
            throw new IllegalStateException("the leaf node binary " + bin + " does not exist: build it with "
                    + "`cargo build -p leaf-node --bin leaf` at the repository root, or set LEAF_BIN");
        }
        return bin;
    }

    /** The repository root: {@code -Dleaf.root} (set by build.sh), else two levels above the working directory. */
    public static Path repoRoot() {
        String p = System.getProperty("leaf.root");
        return p != null ? Path.of(p) : Path.of("").toAbsolutePath().resolve("../..").normalize();
    }

    private static final java.util.Set<Integer> GIVEN = java.util.concurrent.ConcurrentHashMap.newKeySet();

    /**
     * A free TCP port on 127.0.0.1 (bound to port 0, then closed), never one this process handed
     * out before: the kernel may hand a port it just released to the next bind, and two nodes
     * given one port make a broken cluster.
     */
    public static int freePort() {
        while (true) {
            try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
                if (GIVEN.add(s.getLocalPort())) {
                    return s.getLocalPort();
                }
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }

    /** A single plaintext node (it creates the tag {@code leaf-segment-test}), ready. */
    public static LeafNodes single() throws Exception {
        Path bin = binary();
        LeafNodes h = new LeafNodes(Files.createTempDirectory("leaf-java-single"), null);
        int port = freePort();
        List<String> cmd = List.of(bin.toString(), "serve", "--data-dir", h.dir.resolve("data").toString(),
                "--http-addr", "127.0.0.1:" + port);
        h.add(new Node(1, port, cmd, h.dir.resolve("node1.log"), "http://127.0.0.1:" + port));
        h.startAll();
        return h;
    }

    /** A 3-node TLS cluster (certificates from {@code leaf certs bundle}), every node ready. */
    public static LeafNodes tlsCluster() throws Exception {
        Path bin = binary();
        Path dir = Files.createTempDirectory("leaf-java-cluster");
        Path tls = dir.resolve("tls");
        List<String> certs = new ArrayList<>(List.of(bin.toString(), "certs", "bundle", "--dir", tls.toString()));
        for (int i = 1; i <= 3; i++) {
            certs.add("--node");
            certs.add(i + "=127.0.0.1,localhost");
        }
        Process p = new ProcessBuilder(certs).redirectErrorStream(true).redirectOutput(dir.resolve("certs.log").toFile())
                .start();
        if (p.waitFor() != 0) {
            throw new IllegalStateException("leaf certs bundle failed: " + Files.readString(dir.resolve("certs.log")));
        }
        LeafNodes h = new LeafNodes(dir, tls.resolve("ca.pem"));
        int[] ports = {freePort(), freePort(), freePort()};
        StringBuilder peers = new StringBuilder();
        for (int i = 1; i <= 3; i++) {
            peers.append(i > 1 ? "," : "").append(i).append("=127.0.0.1:").append(ports[i - 1]);
        }
        for (int i = 1; i <= 3; i++) {
            List<String> cmd = List.of(bin.toString(), "serve", "--node-id", Integer.toString(i), "--http-addr",
                    "127.0.0.1:" + ports[i - 1], "--data-dir", dir.resolve("node" + i).toString(), "--peers",
                    peers.toString(), "--tls-cert", tls.resolve("node-" + i + ".pem").toString(), "--tls-key",
                    tls.resolve("node-" + i + "-key.pem").toString(), "--tls-ca", tls.resolve("ca.pem").toString());
            h.add(new Node(i, ports[i - 1], cmd, dir.resolve("node" + i + ".log"), "https://127.0.0.1:" + ports[i - 1]));
        }
        h.startAll();
        return h;
    }

    private void add(Node n) {
        nodes.put(n.id, n);
    }

    private void startAll() throws Exception {
        try {
            for (Node n : nodes.values()) {
                start(n);
            }
            waitFor(Duration.ofSeconds(60), "every node ready", () -> nodes.values().stream().allMatch(this::ready));
        } catch (Throwable t) {
            dumpLogs();
            close();
            throw t;
        }
    }

    private void start(Node n) throws IOException {
        ProcessBuilder pb = new ProcessBuilder(n.command).redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(n.log.toFile()));
        pb.environment().put("LEAF_ADMIN_TOKEN", TOKEN);
        pb.environment().put("LEAF_CLUSTER_SECRET", SECRET);
        pb.environment().put("RUST_LOG", "info,openraft=warn");
        n.process = pb.start();
    }

    /** The nodes, by ID. */
    public Map<Integer, Node> nodes() {
        return nodes;
    }

    /** The URL of node {@code id}. */
    public String url(int id) {
        return nodes.get(id).url;
    }

    /** The CA certificate of a TLS cluster ({@code null} for plaintext). */
    public Path ca() {
        return ca;
    }

    /** A client of node {@code id} alone, with the admin token and no retry. */
    public LeafClient client(int id) {
        LeafClientBuilder b = LeafClient.builder().nodes(url(id)).token(TOKEN).retries(0)
                .timeout(Duration.ofSeconds(5)).deadline(Duration.ofSeconds(10));
        return (ca == null ? b : b.caCert(ca)).build();
    }

    /** Whether node {@code n} answers {@code /health} ready. */
    private boolean ready(Node n) {
        try (LeafClient c = client(n.id)) {
            return c.health().ready();
        } catch (LeafException e) {
            return false;
        }
    }

    /** The leader as the given running nodes agree on it (every one of them ready and naming it), or -1. */
    public int leaderAmong(List<Integer> ids) {
        long leader = -1;
        for (int id : ids) {
            try (LeafClient c = client(id)) {
                Health h = c.health();
                if (!h.ready() || h.leaderId() == null || (leader >= 0 && leader != h.leaderId())) {
                    return -1;
                }
                leader = h.leaderId();
            } catch (LeafException e) {
                return -1;
            }
        }
        return ids.contains((int) leader) ? (int) leader : -1;
    }

    /** Waits for a leader among {@code ids}, returning it. */
    public int waitLeader(List<Integer> ids, Duration within) throws InterruptedException {
        int[] leader = {-1};
        waitFor(within, "a leader among " + ids, () -> (leader[0] = leaderAmong(ids)) > 0);
        return leader[0];
    }

    /** {@code kill -9} of node {@code id} (SIGKILL), waiting until it is gone. */
    public void kill9(int id) throws InterruptedException {
        Process p = nodes.get(id).process;
        p.destroyForcibly();
        p.waitFor();
    }

    /** Starts node {@code id} again on its data (after {@link #kill9}), waiting until it is ready. */
    public void restart(int id) throws Exception {
        Node n = nodes.get(id);
        start(n);
        waitFor(Duration.ofSeconds(60), "node " + id + " ready after its restart", () -> ready(n));
    }

    /** Polls {@code cond} every 50 ms until it holds, failing after {@code within}. */
    public static void waitFor(Duration within, String what, BooleanSupplier cond) throws InterruptedException {
        long end = System.nanoTime() + within.toNanos();
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > end) {
                throw new AssertionError("timed out after " + within.toSeconds() + " s waiting for " + what);
            }
            Thread.sleep(50);
        }
    }

    /** Prints every node's log (on a failure). */
    public void dumpLogs() {
        for (Node n : nodes.values()) {
            try {
                System.err.println("----- log of node " + n.id + " (" + n.url + ") -----");
                System.err.println(Files.exists(n.log) ? Files.readString(n.log) : "(none)");
            } catch (IOException e) {
                System.err.println("(cannot read " + n.log + ": " + e + ")");
            }
        }
    }

    private void killAll() {
        for (Node n : nodes.values()) {
            if (n.process != null && n.process.isAlive()) {
                n.process.destroyForcibly();
                try {
                    n.process.waitFor();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        }
    }

    /** Kills every node and deletes the data. */
    @Override
    public void close() {
        killAll();
        try (Stream<Path> walk = Files.walk(dir)) {
            walk.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException e) {
            System.err.println("cannot delete " + dir + ": " + e);
        }
    }
}
