package org.nettyrdma.tools.doctor;

import org.junit.jupiter.api.Test;
import org.nettyrdma.channel.RdmaSocketChannel;
import org.nettyrdma.channel.RdmaSocketChannelConfig;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The measured registration of one connection, on the emulated provider, against what docs/deployment.md says a
 * connection registers: its receive buffers (count x size) and its send staging (count + 4 sends of the receive size).
 */
class ConnectionMemoryTest {

    static long defaultConnectionBytes() {
        RdmaSocketChannelConfig c = new RdmaSocketChannel().config();
        return documented(c.getRdmaReceiveBufferSize(), c.getRdmaReceiveBufferCount());
    }

    private static long documented(int size, int count) {
        return (long) count * size + (long) (count + 4) * size;
    }

    @Test
    void defaultConnectionRegistersFiveHundredSeventySixKibibytes() throws Exception {
        ConnectionMemory m = ConnectionMemory.measure(16384, 16);
        assertEquals(576 << 10, m.perConnectionBytes());
        assertEquals(576 << 10, defaultConnectionBytes(), "the defaults are 16 receives of 16 KiB");
        assertEquals(4 << 20, m.regionBytes(), "receive buffers of 16 KiB come from 4 MiB pool regions");
    }

    @Test
    void otherSizesAndCounts() throws Exception {
        assertEquals(documented(4096, 8), ConnectionMemory.measure(4096, 8).perConnectionBytes());
        assertEquals(documented(65536, 64), ConnectionMemory.measure(65536, 64).perConnectionBytes());
    }
}
