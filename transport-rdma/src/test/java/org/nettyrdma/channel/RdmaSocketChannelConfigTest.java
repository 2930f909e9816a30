package org.nettyrdma.channel;

import io.netty.channel.ChannelConfig;
import io.netty.channel.ChannelOption;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Options out of range are refused when they are set, naming the option and the range, as a socket channel refuses a
 * non-positive {@code SO_RCVBUF} or {@code SO_SNDBUF} (an outside user's trial found those two accepted here); values
 * in range read back.
 */
class RdmaSocketChannelConfigTest {

    @Test
    void outOfRangeValuesAreRefusedNamingTheOption() {
        ChannelConfig config = new RdmaSocketChannel().config();
        assertRefused(config, ChannelOption.SO_RCVBUF, -1, "SO_RCVBUF: -1 (expected > 0)");
        assertRefused(config, ChannelOption.SO_RCVBUF, 0, "SO_RCVBUF: 0 (expected > 0)");
        assertRefused(config, ChannelOption.SO_SNDBUF, 0, "SO_SNDBUF: 0 (expected > 0)");
        assertRefused(config, RdmaChannelOption.RECEIVE_BUFFER_SIZE, 10, "RECEIVE_BUFFER_SIZE: 10 (expected 64 .. 16 MiB)");
        assertRefused(config, RdmaChannelOption.RECEIVE_BUFFER_COUNT, 2, "RECEIVE_BUFFER_COUNT: 2 (expected 4 .. 4096)");
        assertRefused(config, RdmaChannelOption.CLOSE_TIMEOUT_MILLIS, -5, "CLOSE_TIMEOUT_MILLIS: -5 (expected >= 0)");
    }

    @Test
    void valuesInRangeReadBack() {
        ChannelConfig config = new RdmaSocketChannel().config();
        assertTrue(config.setOption(ChannelOption.SO_RCVBUF, 1));
        assertTrue(config.setOption(ChannelOption.SO_SNDBUF, 1 << 20));
        assertEquals(1, config.getOption(ChannelOption.SO_RCVBUF));
        assertEquals(1 << 20, config.getOption(ChannelOption.SO_SNDBUF));
    }

    private static <T> void assertRefused(ChannelConfig config, ChannelOption<T> option, T value, String message) {
        T before = config.getOption(option);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> config.setOption(option, value),
                option + " = " + value);
        assertEquals(message, e.getMessage());
        assertEquals(before, config.getOption(option), option + " unchanged");
    }
}
