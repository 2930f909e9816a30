package org.nettyrdma.channel;

import io.netty.channel.Channel;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.nettyrdma.channel.RdmaTestSupport.ExceptionRecorder;
import org.nettyrdma.channel.RdmaTestSupport.Pattern;
import org.nettyrdma.channel.RdmaTestSupport.StreamReader;
import org.nettyrdma.channel.RdmaTestSupport.StreamWriter;
import org.nettyrdma.verbs.DeviceAttributes;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Protocol v2's WRITE ring (docs/protocol.md): negotiated in the handshake only when both sides offer it and the device
 * can confine a ring to one connection (memory windows) and tell what arrived (immediate data); every combination of
 * offers interoperates, byte-checked.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class RdmaTransportRingTest {
    private static final int MAX_WRITE = 256 << 10;

    private EventLoopGroup serverGroup;
    private EventLoopGroup clientGroup;

    @BeforeEach
    void setUp() {
        serverGroup = RdmaTestSupport.newGroup(1, "ring-server");
        clientGroup = RdmaTestSupport.newGroup(1, "ring-client");
    }

    @AfterEach
    void tearDown() throws InterruptedException {
        RdmaTestSupport.shutdown(clientGroup, serverGroup);
    }

    /** v1 and v2 peers in all four combinations: the ring is used only when both offer it, bytes arrive exact. */
    @ParameterizedTest(name = "client offers {0}, server offers {1}")
    @CsvSource({"false,false", "true,false", "false,true", "true,true"})
    void everyCombinationOfOffersInteroperates(boolean clientRing, boolean serverRing) throws Exception {
        long total = RdmaTestSupport.scaledBytes(16L << 20, 1);
        Pattern pattern = Pattern.standard();
        StreamReader reader = new StreamReader(total, pattern);
        ExceptionRecorder serverErrors = new ExceptionRecorder();
        AtomicReference<RdmaSocketChannel> child = new AtomicReference<>();
        Channel server = RdmaTestSupport.serverBootstrap(serverGroup, serverGroup)
                .childOption(RdmaChannelOption.WRITE_RING, serverRing)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        child.set((RdmaSocketChannel) ch);
                        ch.pipeline().addLast(reader, serverErrors);
                    }
                }).bind(RdmaTestSupport.anyPort()).sync().channel();
        StreamWriter writer = new StreamWriter(total, pattern, RdmaTestSupport.mixedPlan(MAX_WRITE), 11);
        RdmaSocketChannel client = (RdmaSocketChannel) RdmaTestSupport.clientBootstrap(clientGroup)
                .option(RdmaChannelOption.WRITE_RING, clientRing)
                .handler(writer)
                .connect(server.localAddress()).sync().channel();
        Supplier<String> state = () -> writer.state() + ", " + reader.state() + ", client " + client.counters()
                + ", server errors " + serverErrors.exceptions;
        try {
            RdmaTestSupport.await(writer.done, 100_000, "all writes succeeded", state);
            long received = RdmaTestSupport.await(reader.done, 100_000, "all bytes received", state);
            boolean expected = clientRing && serverRing && ringDevice(client);
            assertEquals(expected, RdmaTestSupport.onLoop(client, client::writeRingNegotiated),
                    "client: WRITE ring negotiated");
            assertEquals(expected, RdmaTestSupport.onLoop(child.get(), child.get()::writeRingNegotiated),
                    "server child: WRITE ring negotiated");
            assertEquals(total, received, "bytes received");
            if (expected) {
                // registered buffers of at least ZERO_COPY_THRESHOLD go by the ring (a fifth of the mixed plan's bytes)
                assertTrue(client.counters().ringBytesSent() > total / 20, () -> "few bytes went by the ring: "
                        + state.get());
            } else {
                assertEquals(0, client.counters().ringBytesSent(), "bytes by the ring without one negotiated");
            }
            assertEquals(client.counters().ringBytesSent(), child.get().counters().ringBytesReceived(),
                    "ring bytes sent vs received");
            assertEquals(writer.crc.getValue(), reader.crc.getValue(), "CRC32C of the stream, sender vs receiver");
            assertTrue(writer.exceptions.isEmpty(), () -> "client exceptions: " + writer.exceptions);
            assertTrue(reader.exceptions.isEmpty() && serverErrors.exceptions.isEmpty(),
                    () -> "server exceptions: " + reader.exceptions + serverErrors.exceptions);
        } finally {
            client.close().sync();
            server.close().sync();
        }
    }

    /** Whether the device can carry a WRITE ring: memory windows and immediate data (not iWARP, so not siw). */
    private static boolean ringDevice(RdmaSocketChannel ch) throws Exception {
        DeviceAttributes a = RdmaTestSupport.onLoop(ch, ch::deviceAttributes);
        return a.supportsMemoryWindows() && a.supportsImmediateData();
    }
}
