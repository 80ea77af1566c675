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
import org.junit.jupiter.api.Test;

/** The client against the API contract (docs/openapi.json) and the workspace version. */
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
