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
        assertTrue(Paths.CALLED.length >= 11);
        for (String[] call : Paths.CALLED) {
            Map<String, Object> item = Json.optObj(paths, call[1]);
            assertNotNull(item, "no path " + call[1] + " in docs/openapi.json");
            assertNotNull(item.get(call[0]), "no " + call[0].toUpperCase() + " " + call[1] + " in docs/openapi.json");
        }
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
