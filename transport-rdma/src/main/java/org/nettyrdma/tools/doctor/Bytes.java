package org.nettyrdma.tools.doctor;

import java.util.Locale;

/** Byte counts as people read them: "576 KiB", "1.5 MiB", "unlimited". */
final class Bytes {
    private static final String[] UNITS = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};

    private Bytes() {
    }

    static String format(long bytes) {
        if (bytes == Long.MAX_VALUE) {
            return "unlimited";
        }
        int unit = 0;
        double value = bytes;
        while (value >= 1024 && unit < UNITS.length - 1) {
            value /= 1024;
            unit++;
        }
        return value == Math.rint(value) ? String.format(Locale.ROOT, "%d %s", (long) value, UNITS[unit])
                : String.format(Locale.ROOT, "%.1f %s", value, UNITS[unit]);
    }
}
