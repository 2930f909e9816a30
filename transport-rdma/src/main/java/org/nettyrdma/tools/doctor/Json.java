package org.nettyrdma.tools.doctor;

import java.util.Iterator;
import java.util.List;
import java.util.Map;

/** Writes maps, lists, strings, numbers, booleans and nulls as JSON, two spaces of indent per level. */
final class Json {
    private Json() {
    }

    static String write(Object value) {
        StringBuilder b = new StringBuilder();
        write(b, value, 0);
        return b.append('\n').toString();
    }

    private static void write(StringBuilder b, Object value, int depth) {
        if (value == null) {
            b.append("null");
        } else if (value instanceof String s) {
            string(b, s);
        } else if (value instanceof Number || value instanceof Boolean) {
            b.append(value);
        } else if (value instanceof Map<?, ?> map) {
            container(b, '{', '}', map.entrySet().iterator(), depth, (e, d) -> {
                Map.Entry<?, ?> entry = (Map.Entry<?, ?>) e;
                string(b, String.valueOf(entry.getKey()));
                b.append(": ");
                write(b, entry.getValue(), d);
            });
        } else if (value instanceof List<?> list) {
            container(b, '[', ']', list.iterator(), depth, (e, d) -> write(b, e, d));
        } else {
            string(b, value.toString());
        }
    }

    private interface Element {
        void write(Object element, int depth);
    }

    private static void container(StringBuilder b, char open, char close, Iterator<?> it, int depth, Element e) {
        b.append(open);
        if (!it.hasNext()) {
            b.append(close);
            return;
        }
        while (it.hasNext()) {
            b.append('\n').append("  ".repeat(depth + 1));
            e.write(it.next(), depth + 1);
            if (it.hasNext()) {
                b.append(',');
            }
        }
        b.append('\n').append("  ".repeat(depth)).append(close);
    }

    private static void string(StringBuilder b, String s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        b.append('"');
    }
}
