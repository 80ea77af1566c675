package io.leaf.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;

/**
 * The client against the API contract (docs/openapi.json) and the workspace version, and the
 * contract against the requests the other tests actually sent: so this class runs last
 * (build.sh orders classes by {@link Order}).
 */
@Order(Integer.MAX_VALUE)
class ContractTest {
    private static Map<String, Object> openapi() throws Exception {
        return Json.parseObject(Files.readString(LeafNodes.repoRoot().resolve("docs/openapi.json")));
    }

    @Test
    void errorCodesEqualTheOpenApiEnumBothWays() throws Exception {
        Map<String, Object> schemas = Json.obj(Json.obj(openapi(), "components"), "schemas");
        Set<String> api = new LinkedHashSet<>();
        for (Object o : Json.arr(Json.obj(schemas, "ErrorCode"), "enum")) {
            api.add((String) o);
        }
        Set<String> ours = new LinkedHashSet<>();
        for (ErrorCode c : ErrorCode.values()) {
            if (c != ErrorCode.UNKNOWN) {
                ours.add(c.wire());
            }
        }
        assertEquals(api, ours);
        for (String wire : api) {
            assertEquals(wire, ErrorCode.fromWire(wire).wire());
        }
    }

    @Test
    void everyCalledPathExistsInTheContract() throws Exception {
        Map<String, Object> paths = Json.obj(openapi(), "paths");
        assertTrue(Paths.CALLED.length >= 46);
        for (String[] call : Paths.CALLED) {
            Map<String, Object> item = Json.optObj(paths, call[1]);
            assertNotNull(item, "no path " + call[1] + " in docs/openapi.json");
            assertNotNull(item.get(call[0]), "no " + call[0].toUpperCase() + " " + call[1] + " in docs/openapi.json");
        }
    }

    /**
     * Operations of the contract the client deliberately does not call, each with its reason.
     * Anything else in docs/openapi.json without a client call fails the test below.
     */
    static final Map<String, String> NOT_CALLED = Map.ofEntries(
            Map.entry("get /decodeSnowflakeId", "Leaf's monitor alias of GET /api/snowflake/decode/{id}, which decodeSnowflake calls"),
            Map.entry("get /openapi.json", "this contract itself, not an operation of the service"),
            Map.entry("get /ui", "the dashboard's HTML page for browsers; its data is GET /admin/dashboard (dashboard())"),
            Map.entry("get /ui/{asset}", "the dashboard page's script and style sheet"));

    @Test
    void everyOperationOfTheContractIsCalledOrExcludedWithAReason() throws Exception {
        Map<String, Object> paths = Json.obj(openapi(), "paths");
        Set<String> called = new LinkedHashSet<>();
        for (String[] call : Paths.CALLED) {
            called.add(call[0] + " " + call[1]);
        }
        Set<String> missing = new java.util.TreeSet<>();
        for (Map.Entry<String, Object> p : paths.entrySet()) {
            @SuppressWarnings("unchecked")
            Map<String, Object> item = (Map<String, Object>) p.getValue();
            for (String method : item.keySet()) {
                if (!Set.of("get", "post", "put", "patch", "delete").contains(method)) {
                    continue;
                }
                String op = method + " " + p.getKey();
                if (!called.contains(op) && !NOT_CALLED.containsKey(op)) {
                    missing.add(op);
                }
                if (called.contains(op)) {
                    assertTrue(!NOT_CALLED.containsKey(op), op + " is called: drop it from NOT_CALLED");
                }
            }
        }
        assertEquals(Set.of(), missing, "operations of docs/openapi.json the client does not call");
        for (String op : NOT_CALLED.keySet()) {
            String[] mp = op.split(" ", 2);
            Map<String, Object> item = Json.optObj(paths, mp[1]);
            assertNotNull(item == null ? null : item.get(mp[0]), "an excluded operation no longer in the contract: " + op);
        }
        long admin = called.stream().filter(c -> c.contains(" /admin/")).count();
        assertTrue(admin >= 34, "admin operations called: " + admin);
        assertTrue(NOT_CALLED.keySet().stream().noneMatch(op -> op.contains(" /admin/")), "every admin operation is called");
    }

    /**
     * Ties {@link Paths#CALLED} to the wire: every (method, template) it lists was actually sent
     * by the tests that ran before this class (build.sh runs this class last and sets
     * {@code leaf.contract.coverage}), and every request actually sent is one of them.
     */
    @Test
    void everyCalledOperationWasActuallySentByTheTests() {
        Assumptions.assumeTrue(Boolean.getBoolean("leaf.contract.coverage"),
                "needs the whole suite run before this class: clients/java/build.sh test");
        Set<String> sent = SentRequests.sent();
        Map<String, Pattern> templates = new java.util.LinkedHashMap<>();
        for (String[] call : Paths.CALLED) {
            templates.put(call[0] + " " + call[1], template(call[0], call[1]));
        }
        Set<String> notSent = new java.util.TreeSet<>();
        for (Map.Entry<String, Pattern> t : templates.entrySet()) {
            if (sent.stream().noneMatch(r -> t.getValue().matcher(r).matches())) {
                notSent.add(t.getKey());
            }
        }
        assertEquals(Set.of(), notSent, "operations of Paths.CALLED no test sent (of " + sent.size() + " requests)");
        Set<String> unlisted = new java.util.TreeSet<>();
        for (String r : sent) {
            if (TRANSPORT_TEST_PATHS.contains(r)) {
                continue;
            }
            if (templates.values().stream().noneMatch(p -> p.matcher(r).matches())) {
                unlisted.add(r);
            }
        }
        assertEquals(Set.of(), unlisted, "requests sent that Paths.CALLED does not list");
    }

    /** What TransportTest sends on a bare Transport to its stand-in server: no operation of the API. */
    private static final Set<String> TRANSPORT_TEST_PATHS = Set.of("get /small", "get /big", "get /big-chunked",
            "get /big-503");

    /** {@code "method path"} of {@code template}, each {@code {...}} one path segment. */
    private static Pattern template(String method, String template) {
        StringBuilder re = new StringBuilder(Pattern.quote(method + " "));
        Matcher m = Pattern.compile("\\{[^}]+\\}").matcher(template);
        int at = 0;
        while (m.find()) {
            re.append(Pattern.quote(template.substring(at, m.start()))).append("[^/]+");
            at = m.end();
        }
        re.append(Pattern.quote(template.substring(at)));
        return Pattern.compile(re.toString());
    }

    @Test
    void theVersionIsTheWorkspaceVersion() throws Exception {
        String cargo = Files.readString(LeafNodes.repoRoot().resolve("Cargo.toml"));
        int section = cargo.indexOf("[workspace.package]");
        assertTrue(section >= 0, "no [workspace.package] in Cargo.toml");
        String rest = cargo.substring(section + 1);
        int next = rest.indexOf("\n[");
        Matcher m = Pattern.compile("(?m)^version\\s*=\\s*\"([^\"]+)\"").matcher(next < 0 ? rest : rest.substring(0, next));
        assertTrue(m.find(), "no version in [workspace.package]");
        String file = Files.readString(LeafNodes.repoRoot().resolve("clients/java/VERSION")).strip();
        assertEquals(m.group(1), file, "clients/java/VERSION");
        assertEquals(file, Version.get(), "the version built into the classes");
    }
}
