package io.leaf.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The internal JSON reader and writer. */
class JsonTest {
    @Test
    void integersAreExactLongsUpToTheMaximum() {
        Map<String, Object> m = Json.parseObject("{\"max\": 9223372036854775807, \"min\": -9223372036854775808, \"z\": 0}");
        assertEquals(Long.MAX_VALUE, m.get("max"));
        assertEquals(Long.MIN_VALUE, m.get("min"));
        assertEquals(0L, m.get("z"));
        // 2^53 + 1 is not representable as a double: it must survive exactly.
        assertEquals(9007199254740993L, Json.parse("9007199254740993"));
        assertThrows(IllegalArgumentException.class, () -> Json.parse("9223372036854775808"));
    }

    @Test
    void objectsArraysBooleansNullAndFractions() {
        Object v = Json.parse(" {\"a\":[1,true,false,null,{\"b\":\"c\"}],\"d\":{},\"e\":[], \"f\": 1.5e3} ");
        Map<?, ?> m = (Map<?, ?>) v;
        assertEquals(Arrays.asList(1L, true, false, null, Map.of("b", "c")), m.get("a"));
        assertEquals(Map.of(), m.get("d"));
        assertEquals(List.of(), m.get("e"));
        assertEquals(1500.0, m.get("f"));
    }

    @Test
    void stringEscapesRoundTrip() {
        String s = "quote\" backslash\\ slash/ \b\f\n\r\t ctrl\u0001 é 中 \uD83D\uDE00";
        String written = Json.write(Map.of("s", s));
        assertEquals(s, Json.parseObject(written).get("s"));
        assertEquals("a/b\u00e9\uD83D\uDE00", Json.parse("\"a\\/b\\u00E9\\ud83d\\ude00\""));
        assertTrue(written.contains("\\u0001"));
    }

    @Test
    void writesWhatTheApiSends() {
        assertEquals("{\"tag\":\"t\",\"step\":1000,\"gapless\":{\"reset\":\"year\"},\"flag\":true,\"list\":[1,\"x\",null]}",
                Json.write(Json.object("tag", "t", "step", 1000L, "max_id", null, "gapless",
                        Json.object("reset", "year"), "flag", true, "list", Arrays.asList(1L, "x", null))));
        assertEquals("9223372036854775807", Json.write(Long.MAX_VALUE));
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "{", "[1,]", "{\"a\" 1}", "{\"a\":1,}", "\"unterminated", "tru", "01", "1.", "-",
        "\"bad \\x escape\"", "\"\\u12\"", "{} x", "\"raw\u0001control\"", "[1 2]"})
    void rejectsMalformedText(String text) {
        assertThrows(IllegalArgumentException.class, () -> Json.parse(text));
    }

    @Test
    void boundsNesting() {
        String deep = "[".repeat(100) + "]".repeat(100);
        assertThrows(IllegalArgumentException.class, () -> Json.parse(deep));
        assertEquals(List.of(List.of()), Json.parse("[[]]"));
    }

    @Test
    void typedAccessorsNameTheWrongField() {
        Map<String, Object> m = Json.parseObject("{\"n\":\"x\",\"o\":null}");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Json.lng(m, "n"));
        assertTrue(e.getMessage().contains("'n'"));
        assertEquals(null, Json.optLng(m, "o"));
        assertEquals(null, Json.optStr(m, "absent"));
        assertThrows(IllegalArgumentException.class, () -> Json.str(m, "absent"));
    }
}
