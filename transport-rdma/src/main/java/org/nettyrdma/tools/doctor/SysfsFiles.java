package org.nettyrdma.tools.doctor;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/** Reading sysfs: a file's first line, a directory's entries in a stable order; null or empty where they are not. */
final class SysfsFiles {
    private SysfsFiles() {
    }

    /** The file's content without trailing white space, or null if it cannot be read (absent, or EINVAL). */
    static String read(Path file) {
        try {
            return new String(Files.readAllBytes(file), StandardCharsets.UTF_8).strip();
        } catch (IOException | SecurityException e) {
            return null;
        }
    }

    /** The names in {@code dir}, numbers in numeric order and before other names; empty if it is not a directory. */
    static List<String> list(Path dir) {
        List<String> names = new ArrayList<>();
        if (!Files.isDirectory(dir)) {
            return names;
        }
        try (DirectoryStream<Path> stream = Files.newDirectoryStream(dir)) {
            for (Path p : stream) {
                names.add(p.getFileName().toString());
            }
        } catch (IOException | SecurityException e) {
            return names;
        }
        names.sort(SysfsFiles::compareNames);
        return names;
    }

    private static int compareNames(String a, String b) {
        boolean na = isNumber(a);
        boolean nb = isNumber(b);
        if (na && nb) {
            return Long.compare(Long.parseLong(a), Long.parseLong(b));
        }
        return na ? -1 : nb ? 1 : a.compareTo(b);
    }

    private static boolean isNumber(String s) {
        return !s.isEmpty() && s.length() < 18 && s.chars().allMatch(Character::isDigit);
    }
}
