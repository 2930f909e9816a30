package org.nettyrdma.verbs.jni;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * Reads this process's {@code /proc/self/status} (effective capabilities) and {@code /proc/self/limits} (the memlock
 * limit), from the files a {@link HostRoot} names.
 */
public final class ProcSelf {
    /** CAP_IPC_LOCK, the bit in CapEff: lifts RLIMIT_MEMLOCK for memory registration (not on soft-iWARP). */
    public static final int CAP_IPC_LOCK = 14;
    /** A limit of "unlimited". */
    public static final long UNLIMITED = Long.MAX_VALUE;

    /** The soft and hard limits of one resource, in bytes ({@link #UNLIMITED}: none). */
    public record Limit(long soft, long hard) {
    }

    private ProcSelf() {
    }

    /** CapEff of {@code status} (a /proc/PID/status file), or -1 if it cannot be read. */
    public static long effectiveCapabilities(Path status) {
        try {
            for (String line : Files.readAllLines(status, StandardCharsets.US_ASCII)) {
                if (line.startsWith("CapEff:")) {
                    return Long.parseUnsignedLong(line.substring("CapEff:".length()).trim(), 16);
                }
            }
        } catch (IOException | RuntimeException e) {
            // no /proc, or not in the format the kernel writes: unknown
        }
        return -1;
    }

    /** Whether CapEff of {@code status} has CAP_IPC_LOCK; false when it cannot be read. */
    public static boolean hasCapIpcLock(Path status) {
        long caps = effectiveCapabilities(status);
        return caps != -1 && (caps & (1L << CAP_IPC_LOCK)) != 0;
    }

    /** The "Max locked memory" line of {@code limits} (a /proc/PID/limits file), or null if it cannot be read. */
    public static Limit memlock(Path limits) {
        try {
            List<String> lines = Files.readAllLines(limits, StandardCharsets.US_ASCII);
            for (String line : lines) {
                if (line.startsWith("Max locked memory")) {
                    String[] fields = line.substring("Max locked memory".length()).trim().split("\\s+");
                    return new Limit(parseLimit(fields[0]), parseLimit(fields[1]));
                }
            }
        } catch (IOException | RuntimeException e) {
            // no /proc, or not in the format the kernel writes: unknown
        }
        return null;
    }

    private static long parseLimit(String field) {
        return "unlimited".equals(field) ? UNLIMITED : Long.parseLong(field);
    }
}
