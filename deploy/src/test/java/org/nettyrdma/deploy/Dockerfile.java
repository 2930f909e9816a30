package org.nettyrdma.deploy;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/** The instructions of a Dockerfile: comments and blank lines dropped, continued lines joined. */
record Dockerfile(List<Instruction> instructions) {

    /** One instruction: its keyword in upper case and the rest of the line. */
    record Instruction(String keyword, String arguments) {
        /** The exec (JSON array) form's elements. */
        List<String> execForm() {
            if (!arguments.startsWith("[")) {
                throw new AssertionError(keyword + " not in exec form: " + arguments);
            }
            List<String> list = new ArrayList<>();
            for (Object o : Manifests.fromJson(arguments, List.class)) {
                list.add((String) o);
            }
            return list;
        }
    }

    static Dockerfile parse(Path file) {
        List<String> lines;
        try {
            lines = Files.readAllLines(file);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        List<Instruction> instructions = new ArrayList<>();
        StringBuilder current = new StringBuilder();
        for (String line : lines) {
            String stripped = line.strip();
            if (stripped.startsWith("#") || stripped.isEmpty() && current.isEmpty()) {
                continue;
            }
            if (stripped.endsWith("\\")) {
                current.append(stripped, 0, stripped.length() - 1).append(' ');
                continue;
            }
            current.append(stripped);
            String text = current.toString().strip();
            current.setLength(0);
            if (text.isEmpty()) {
                continue;
            }
            int space = text.indexOf(' ');
            instructions.add(new Instruction(text.substring(0, space).toUpperCase(Locale.ROOT),
                    text.substring(space + 1).strip()));
        }
        return new Dockerfile(instructions);
    }

    List<Instruction> all(String keyword) {
        return instructions.stream().filter(i -> i.keyword().equals(keyword)).toList();
    }

    /** The last instruction of this keyword (the one that counts for ENTRYPOINT and CMD). */
    Instruction last(String keyword) {
        List<Instruction> all = all(keyword);
        if (all.isEmpty()) {
            throw new AssertionError("no " + keyword);
        }
        return all.get(all.size() - 1);
    }

    /** The source of the COPY whose destination is {@code destination}, or null. */
    String copySourceOf(String destination) {
        for (Instruction i : all("COPY")) {
            String[] parts = i.arguments().split("\\s+");
            if (parts.length == 2 && parts[1].equals(destination)) {
                return parts[0];
            }
        }
        return null;
    }
}
