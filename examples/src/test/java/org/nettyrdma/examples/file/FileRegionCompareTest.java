package org.nettyrdma.examples.file;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The file benchmark of the VM (vm/used-by-compare --parts file) on the host: RDMA on the emulated provider, epoll and
 * plain TCP on 127.0.0.1, each transfer checked against the digest it is given.
 */
class FileRegionCompareTest {
    private static final int LENGTH = 3 << 20;

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void everyTransportDeliversTheFileAndIsMeasured(@TempDir Path dir) throws Exception {
        Path file = dir.resolve("file.bin");
        FileChunkServer.writeRandom(file, LENGTH);
        List<FileRegionCompare.Figures> figures = FileRegionCompare.run(args(file,
                HexFormat.of().formatHex(FileChunkServer.sha256(file))));
        assertEquals(List.of("epoll", "rdma lo", "tcp (plain)"),
                figures.stream().map(FileRegionCompare.Figures::name).toList());
        for (FileRegionCompare.Figures f : figures) {
            assertEquals(LENGTH, f.bytes(), f.name());
            assertTrue(f.elapsedNs() > 0 && f.clientCpuNs() > 0, f.name() + ": " + f);
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aFileThatDiffersFromItsDigestFails(@TempDir Path dir) throws Exception {
        Path file = dir.resolve("file.bin");
        FileChunkServer.writeRandom(file, LENGTH);
        byte[] sha = FileChunkServer.sha256(file);
        sha[31] ^= 1;
        for (String transport : List.of("rdma", "tcp")) {
            String[] args = args(file, HexFormat.of().formatHex(sha));
            args[args.length - 1] = transport;
            assertThrows(Exception.class, () -> FileRegionCompare.run(args), transport);
        }
    }

    private static String[] args(Path file, String sha256) {
        return new String[] {"--file", file.toString(), "--sha256", sha256, "--rdma", "127.0.0.1=lo", "--provider",
            "emulated", "--warmup-mib", "1", "--digest-mib", "1", "--timeout", "60", "--transports", "epoll,rdma,tcp"};
    }
}
