package org.nettyrdma.examples.file;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The file example's self-test on the emulated provider, then over epoll (TCP): a random file sent as one
 * {@code DefaultFileRegion} (as a TCP file server sends it), and in chunks; the client checks its SHA-256.
 */
class FileChunkServerTest {
    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aFileSentAsADefaultFileRegionArrivesIntact() {
        assertTrue(FileChunkServer.selfTest(24, null, true, true), "self-test with --region --compare (see the log)");
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aFileSentInChunksArrivesIntact() {
        assertTrue(FileChunkServer.selfTest(8, null, false, false), "self-test (see the log)");
    }
}
