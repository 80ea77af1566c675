package io.leaf.client;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A minimal JSON reader and writer: exactly what the leaf API needs, and nothing else.
 *
 * <p>Values are {@code Map<String, Object>} (objects, insertion ordered), {@code List<Object>}
 * (arrays), {@code String}, {@code Long} (every integer: IDs go up to 2^63 - 1 and never pass
 * through a {@code double}), {@code Boolean} and {@code null}. A number with a fraction or an
 * exponent is read as a {@code Double} (the API has none; it is accepted so that an unknown
 * field of a newer server does not break an old client). Strings support every escape,
 * surrogate pairs included.
 */
final class Json {
    private final String text;
    private int pos;
    /** Nesting bound, so a hostile answer cannot overflow the stack. */
    private static final int MAX_DEPTH = 64;

    private Json(String text) {
        this.text = text;
    }

    /** Parses one JSON value spanning the whole text. */
    static Object parse(String text) {
        Json p = new Json(text);
        p.skipSpace();
        Object v = p.value(0);
        p.skipSpace();
        if (p.pos != text.length()) {
            throw p.error("trailing characters");
        }
        return v;
    }

    /** Parses a JSON object spanning the whole text. */
    @SuppressWarnings("unchecked")
    static Map<String, Object> parseObject(String text) {
        Object v = parse(text);
        if (!(v instanceof Map)) {
            throw new IllegalArgumentException("expected a JSON object");
        }
        return (Map<String, Object>) v;
    }

    private Object value(int depth) {
        if (depth > MAX_DEPTH) {
            throw error("nested too deeply");
        }
        if (pos >= text.length()) {
            throw error("unexpected end");
        }
        char c = text.charAt(pos);
        switch (c) {
            case '{':
                return object(depth);
            case '[':
                return array(depth);
            case '"':
                return string();
            case 't':
                return literal("true", Boolean.TRUE);
            case 'f':
                return literal("false", Boolean.FALSE);
            case 'n':
                return literal("null", null);
            default:
                if (c == '-' || (c >= '0' && c <= '9')) {
                    return number();
                }
                throw error("unexpected character");
        }
    }

    private Map<String, Object> object(int depth) {
        pos++;
        Map<String, Object> out = new LinkedHashMap<>();
        skipSpace();
        if (peek() == '}') {
            pos++;
            return out;
        }
        while (true) {
            skipSpace();
            if (peek() != '"') {
                throw error("expected a key");
            }
            String key = string();
            skipSpace();
            expect(':');
            skipSpace();
            out.put(key, value(depth + 1));
            skipSpace();
            char c = next();
            if (c == '}') {
                return out;
            }
            if (c != ',') {
                throw error("expected ',' or '}'");
            }
        }
    }

    private List<Object> array(int depth) {
        pos++;
        List<Object> out = new ArrayList<>();
        skipSpace();
        if (peek() == ']') {
            pos++;
            return out;
        }
        while (true) {
            skipSpace();
            out.add(value(depth + 1));
            skipSpace();
            char c = next();
            if (c == ']') {
                return out;
            }
            if (c != ',') {
                throw error("expected ',' or ']'");
            }
        }
    }

    private String string() {
        pos++;
        StringBuilder sb = new StringBuilder();
        while (true) {
            char c = next();
            if (c == '"') {
                return sb.toString();
            }
            if (c < 0x20) {
                throw error("control character in a string");
            }
            if (c != '\\') {
                sb.append(c);
                continue;
            }
            char e = next();
            switch (e) {
                case '"': sb.append('"'); break;
                case '\\': sb.append('\\'); break;
                case '/': sb.append('/'); break;
                case 'b': sb.append('\b'); break;
                case 'f': sb.append('\f'); break;
                case 'n': sb.append('\n'); break;
                case 'r': sb.append('\r'); break;
                case 't': sb.append('\t'); break;
                case 'u': sb.append(hex4()); break;
                default: throw error("bad escape");
            }
        }
    }

    private char hex4() {
        if (pos + 4 > text.length()) {
            throw error("short \\u escape");
        }
        int v = 0;
        for (int i = 0; i < 4; i++) {
            int d = Character.digit(text.charAt(pos++), 16);
            if (d < 0) {
                throw error("bad \\u escape");
            }
            v = v * 16 + d;
        }
        return (char) v;
    }

    private Object number() {
        int start = pos;
        if (peek() == '-') {
            pos++;
        }
        int digits = pos;
        while (pos < text.length() && Character.isDigit(text.charAt(pos))) {
            pos++;
        }
        if (pos == digits || (text.charAt(digits) == '0' && pos - digits > 1)) {
            throw error("bad number");
        }
        boolean fraction = false;
        if (pos < text.length() && text.charAt(pos) == '.') {
            fraction = true;
            pos++;
            int f = pos;
            while (pos < text.length() && Character.isDigit(text.charAt(pos))) {
                pos++;
            }
            if (pos == f) {
                throw error("bad fraction");
            }
        }
        if (pos < text.length() && (text.charAt(pos) == 'e' || text.charAt(pos) == 'E')) {
            fraction = true;
            pos++;
            if (pos < text.length() && (text.charAt(pos) == '+' || text.charAt(pos) == '-')) {
                pos++;
            }
            int f = pos;
            while (pos < text.length() && Character.isDigit(text.charAt(pos))) {
                pos++;
            }
            if (pos == f) {
                throw error("bad exponent");
            }
        }
        String s = text.substring(start, pos);
        if (fraction) {
            return Double.valueOf(s);
        }
        try {
            return Long.valueOf(s);
        } catch (NumberFormatException e) {
            throw error("integer out of the 64-bit range");
        }
    }

    private Object literal(String word, Object value) {
        if (!text.startsWith(word, pos)) {
            throw error("unexpected word");
        }
        pos += word.length();
        return value;
    }

    private void skipSpace() {
        while (pos < text.length()) {
            char c = text.charAt(pos);
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
                return;
            }
            pos++;
        }
    }

    private char peek() {
        if (pos >= text.length()) {
            throw error("unexpected end");
        }
        return text.charAt(pos);
    }

    private char next() {
        char c = peek();
        pos++;
        return c;
    }

    private void expect(char c) {
        if (next() != c) {
            throw error("expected '" + c + "'");
        }
    }

    private IllegalArgumentException error(String what) {
        return new IllegalArgumentException("invalid JSON at offset " + pos + ": " + what);
    }

    // ---- writing ----

    /** Writes {@code value} (a Map, List, String, Number, Boolean or null) as JSON. */
    static String write(Object value) {
        StringBuilder sb = new StringBuilder();
        write(sb, value);
        return sb.toString();
    }

    private static void write(StringBuilder sb, Object v) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof String) {
            quote(sb, (String) v);
        } else if (v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte) {
            sb.append(((Number) v).longValue());
        } else if (v instanceof Boolean) {
            sb.append(v);
        } else if (v instanceof Map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                quote(sb, String.valueOf(e.getKey()));
                sb.append(':');
                write(sb, e.getValue());
            }
            sb.append('}');
        } else if (v instanceof List) {
            sb.append('[');
            boolean first = true;
            for (Object o : (List<?>) v) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                write(sb, o);
            }
            sb.append(']');
        } else {
            throw new IllegalArgumentException("cannot write a " + v.getClass().getSimpleName() + " as JSON");
        }
    }

    private static void quote(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                default:
                    if (c < 0x20 || c == 0x7f) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        sb.append('"');
    }

    /** An unmodifiable object builder that skips null values (absent optional fields). */
    static Map<String, Object> object(Object... keyValues) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < keyValues.length; i += 2) {
            if (keyValues[i + 1] != null) {
                m.put((String) keyValues[i], keyValues[i + 1]);
            }
        }
        return Collections.unmodifiableMap(m);
    }

    // ---- typed field access (a wrong or missing field is an IllegalArgumentException) ----

    static String str(Map<String, Object> m, String key) {
        Object v = m.get(key);
        if (!(v instanceof String)) {
            throw new IllegalArgumentException("field '" + key + "' is not a string");
        }
        return (String) v;
    }

    static String optStr(Map<String, Object> m, String key) {
        Object v = m.get(key);
        return v == null ? null : str(m, key);
    }

    static long lng(Map<String, Object> m, String key) {
        Object v = m.get(key);
        if (!(v instanceof Long)) {
            throw new IllegalArgumentException("field '" + key + "' is not an integer");
        }
        return (Long) v;
    }

    static Long optLng(Map<String, Object> m, String key) {
        Object v = m.get(key);
        return v == null ? null : lng(m, key);
    }

    static boolean bool(Map<String, Object> m, String key) {
        Object v = m.get(key);
        if (!(v instanceof Boolean)) {
            throw new IllegalArgumentException("field '" + key + "' is not a boolean");
        }
        return (Boolean) v;
    }

    static boolean optBool(Map<String, Object> m, String key, boolean otherwise) {
        return m.get(key) == null ? otherwise : bool(m, key);
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> obj(Map<String, Object> m, String key) {
        Object v = m.get(key);
        if (!(v instanceof Map)) {
            throw new IllegalArgumentException("field '" + key + "' is not an object");
        }
        return (Map<String, Object>) v;
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> optObj(Map<String, Object> m, String key) {
        return m.get(key) == null ? null : obj(m, key);
    }

    static List<?> arr(Map<String, Object> m, String key) {
        Object v = m.get(key);
        if (!(v instanceof List)) {
            throw new IllegalArgumentException("field '" + key + "' is not an array");
        }
        return (List<?>) v;
    }

    /** {@code array} (a JSON array of objects) with each object turned into {@code T} by {@code f}. */
    @SuppressWarnings("unchecked")
    static <T> List<T> objects(Object array, java.util.function.Function<Map<String, Object>, T> f) {
        if (!(array instanceof List)) {
            throw new IllegalArgumentException("expected a JSON array");
        }
        List<T> out = new ArrayList<>();
        for (Object o : (List<?>) array) {
            if (!(o instanceof Map)) {
                throw new IllegalArgumentException("an array item is not an object");
            }
            out.add(f.apply((Map<String, Object>) o));
        }
        return Collections.unmodifiableList(out);
    }

    /** Field {@code key} (an array of objects; absent or null: empty) with each object turned into {@code T}. */
    static <T> List<T> objList(Map<String, Object> m, String key, java.util.function.Function<Map<String, Object>, T> f) {
        return m.get(key) == null ? List.of() : objects(m.get(key), f);
    }

    /** Field {@code key} as a list of strings (absent or null: empty). */
    static List<String> strList(Map<String, Object> m, String key) {
        List<String> out = new ArrayList<>();
        for (Object o : m.get(key) == null ? List.of() : arr(m, key)) {
            if (!(o instanceof String)) {
                throw new IllegalArgumentException("field '" + key + "' holds a non-string");
            }
            out.add((String) o);
        }
        return Collections.unmodifiableList(out);
    }

    /** Field {@code key} as a list of integers (absent or null: empty). */
    static List<Long> lngList(Map<String, Object> m, String key) {
        List<Long> out = new ArrayList<>();
        for (Object o : m.get(key) == null ? List.of() : arr(m, key)) {
            if (!(o instanceof Long)) {
                throw new IllegalArgumentException("field '" + key + "' holds a non-integer");
            }
            out.add((Long) o);
        }
        return Collections.unmodifiableList(out);
    }

    /** Field {@code key} as a number (an integer or a fraction), or {@code null}. */
    static Double optNum(Map<String, Object> m, String key) {
        Object v = m.get(key);
        if (v == null) {
            return null;
        }
        if (!(v instanceof Number)) {
            throw new IllegalArgumentException("field '" + key + "' is not a number");
        }
        return ((Number) v).doubleValue();
    }
}
