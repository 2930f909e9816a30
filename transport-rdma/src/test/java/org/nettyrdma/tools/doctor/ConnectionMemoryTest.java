package org.nettyrdma.tools.doctor;

import org.junit.jupiter.api.Test;
import org.nettyrdma.channel.RdmaSocketChannel;
import org.nettyrdma.channel.RdmaSocketChannelConfig;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The measured registration of one connection, on the emulated provider, against what docs/deployment.md says a
 * connection registers: its receive buffers (count x size) when idle; its SENDs in flight take send staging (count + 4
 * slots of the receive size at most) from the event loop's pool.
 */
class ConnectionMemoryTest {

    static long defaultConnectionBytes() {
        RdmaSocketChannelConfig c = new RdmaSocketChannel().config();
        return documented(c.getRdmaReceiveBufferSize(), c.getRdmaReceiveBufferCount());
    }

    private static long documented(int size, int count) {
        return (long) count * size;
    }

    static long defaultStagingBytes() {
        RdmaSocketChannelConfig c = new RdmaSocketChannel().config();
        return (long) (c.getRdmaReceiveBufferCount() + 4) * c.getRdmaReceiveBufferSize();
    }

    @Test
    void anIdleDefaultConnectionRegistersTwoHundredFiftySixKibibytes() throws Exception {
        ConnectionMemory m = ConnectionMemory.measure(16384, 16);
        assertEquals(256 << 10, m.perConnectionBytes(), "no send staging when idle");
        assertEquals(256 << 10, defaultConnectionBytes(), "the defaults are 16 receives of 16 KiB");
        assertEquals(320 << 10, m.stagingBytes(), "20 SENDs of 16 KiB in flight at most");
        assertEquals(320 << 10, defaultStagingBytes());
        assertEquals(4 << 20, m.regionBytes(), "receive buffers of 16 KiB come from 4 MiB pool regions");
    }

    @Test
    void otherSizesAndCounts() throws Exception {
        assertEquals(documented(4096, 8), ConnectionMemory.measure(4096, 8).perConnectionBytes());
        ConnectionMemory large = ConnectionMemory.measure(65536, 64);
        assertEquals(documented(65536, 64), large.perConnectionBytes());
        assertEquals(68L * 65536, large.stagingBytes());
    }
}
