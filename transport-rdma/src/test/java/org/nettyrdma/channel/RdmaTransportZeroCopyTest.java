package org.nettyrdma.channel;

import io.netty.channel.Channel;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;
import org.junit.jupiter.api.parallel.Isolated;
import org.nettyrdma.channel.RdmaTestSupport.ExceptionRecorder;
import org.nettyrdma.channel.RdmaTestSupport.Kind;
import org.nettyrdma.channel.RdmaTestSupport.Pattern;
import org.nettyrdma.channel.RdmaTestSupport.StreamReader;
import org.nettyrdma.channel.RdmaTestSupport.StreamWriter;
import org.nettyrdma.channel.RdmaTestSupport.WritePlan;

import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Buffers of {@link RdmaByteBufAllocator} (registered memory), and slices of them, go out with no copy; any other buffer is copied once
 * into registered staging memory, and the channel's counters say which happened to how many bytes. Default channel
 * options (16 KiB receive buffers, zero-copy threshold 1 KiB), default RecvByteBufAllocator.
 */
@Isolated("transport-level checks: global allocator counts, throughput, time bounds")
@Execution(ExecutionMode.SAME_THREAD)
class RdmaTransportZeroCopyTest {
    private static final long TOTAL = 16L << 20;

    private EventLoopGroup serverGroup;
    /** Whether the last {@link #transfer} used protocol v2's WRITE ring ({@code -Dorg.nettyrdma.writeRing=true}). */
    private boolean ringNegotiated;
    private EventLoopGroup clientGroup;

    @BeforeEach
    void setUp() {
        serverGroup = RdmaTestSupport.newGroup(1, "zc-server");
        clientGroup = RdmaTestSupport.newGroup(1, "zc-client");
    }

    @AfterEach
    void tearDown() throws InterruptedException {
        RdmaTestSupport.shutdown(clientGroup, serverGroup);
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void registeredFourKibibyteBuffersAreSentWithoutCopy() throws Exception {
        RdmaCounters c = transfer(RdmaTestSupport.fixedPlan(4096, Kind.REGISTERED));
        assertEquals(0, c.copies(), () -> "copies of registered 4 KiB buffers: " + c);
        assertEquals(0, c.copiedBytes(), () -> "copied bytes of registered 4 KiB buffers: " + c);
        assertEquals(TOTAL, c.zeroCopyBytes(), () -> "zero-copy bytes: " + c);
        assertEquals(TOTAL, c.bytesSent(), () -> "bytes sent: " + c);
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void registeredBuffersOfFourKibibytesAndMoreAreSentWithoutCopy() throws Exception {
        RdmaCounters c = transfer(sizesFrom4KiB(Kind.REGISTERED));
        assertEquals(0, c.copies(), () -> "copies of registered buffers >= 4 KiB: " + c);
        assertEquals(0, c.copiedBytes(), () -> "copied bytes of registered buffers >= 4 KiB: " + c);
        assertEquals(TOTAL, c.zeroCopyBytes(), () -> "zero-copy bytes: " + c);
        assertEquals(TOTAL, c.bytesSent(), () -> "bytes sent: " + c);
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void slicesOfRegisteredBuffersAreSentWithoutCopy() throws Exception {
        RdmaCounters c = transfer(sizesFrom4KiB(Kind.REGISTERED_SLICE));
        assertEquals(0, c.copiedBytes(), () -> "copied bytes of slices of registered buffers >= 4 KiB: " + c);
        assertEquals(TOTAL, c.zeroCopyBytes(), () -> "zero-copy bytes: " + c);
        assertEquals(TOTAL, c.bytesSent(), () -> "bytes sent: " + c);
    }

    /** HTTP/2's flow controller merges queued DATA into a composite: its registered components go without copy. */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void compositesOfRegisteredSlicesAreSentWithoutCopy() throws Exception {
        RdmaCounters c = transfer(sizesFrom4KiB(Kind.REGISTERED_SLICES_COMPOSITE));
        assertEquals(0, c.copiedBytes(), () -> "copied bytes of composites of registered 4 KiB slices: " + c);
        assertEquals(TOTAL, c.zeroCopyBytes(), () -> "zero-copy bytes: " + c);
        assertEquals(TOTAL, c.bytesSent(), () -> "bytes sent: " + c);
    }

    /**
     * HTTP/2's writes: a 9-byte frame header (copied), then the frame's data as a slice of a registered buffer (not
     * copied), again and again. The headers go into further staging SGEs between the slices', so the SENDs stay full
     * instead of ending at every header.
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void headersBetweenRegisteredSlicesShareTheirSends() throws Exception {
        int header = 9;
        int data = 16384;
        RdmaCounters c = transfer(new WritePlan() {
            private boolean headerNext;

            @Override
            public int nextSize(Random r) {
                headerNext = !headerNext;
                return headerNext ? header : data;
            }

            @Override
            public Kind nextKind(Random r) {
                return headerNext ? Kind.HEAP : Kind.REGISTERED_SLICE;
            }
        });
        long frames = TOTAL / (header + data);
        // the headers, and at most the stream's last write (cut short by the total, perhaps below the threshold)
        assertTrue(c.copiedBytes() <= (frames + 1) * header + data, () -> "copied bytes: " + c);
        assertTrue(c.zeroCopyBytes() >= TOTAL - (frames + 1) * header - data, () -> "zero-copy bytes: " + c);
        if (ringNegotiated) {
            // slices of at least a SEND's size go by WRITE_WITH_IMM into the ring, each header by a SEND
            assertTrue(c.messagesSent() <= 2 * (frames + 1), () -> "messages: " + c);
            return;
        }
        // a SEND's payload: 16 KiB less the 4-byte header. A flush's last SEND may be short (measured: 1.33 x the
        // full SENDs, as with whole registered 4 KiB buffers); ending a SEND at each header after a slice would take
        // two SENDs per frame (2 x)
        long fullSends = (TOTAL + 16379) / 16380;
        assertTrue(c.messagesSent() <= fullSends * 3 / 2, () -> "SENDs: " + c.messagesSent() + " for "
                + fullSends + " SENDs' worth of bytes; " + c);
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void heapBuffersAreCopiedOnce() throws Exception {
        RdmaCounters c = transfer(sizesFrom4KiB(Kind.HEAP));
        assertTrue(c.copies() > 0, () -> "no copies counted for heap buffers: " + c);
        assertEquals(TOTAL, c.copiedBytes(), () -> "copied bytes of heap buffers: " + c);
        assertEquals(0, c.zeroCopyBytes(), () -> "zero-copy bytes of heap buffers: " + c);
        assertEquals(TOTAL, c.bytesSent(), () -> "bytes sent: " + c);
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void unregisteredDirectBuffersAreCopiedOnce() throws Exception {
        RdmaCounters c = transfer(sizesFrom4KiB(Kind.DIRECT));
        assertTrue(c.copies() > 0, () -> "no copies counted for unregistered direct buffers: " + c);
        assertEquals(TOTAL, c.copiedBytes(), () -> "copied bytes of unregistered direct buffers: " + c);
        assertEquals(0, c.zeroCopyBytes(), () -> "zero-copy bytes of unregistered direct buffers: " + c);
        assertEquals(TOTAL, c.bytesSent(), () -> "bytes sent: " + c);
    }

    /** 4 KiB, 8 KiB, 16 KiB (a little more than a message's payload), 64 KiB, and random multiples of 4 KiB up to 256 KiB. */
    private static WritePlan sizesFrom4KiB(Kind kind) {
        return new WritePlan() {
            @Override
            public int nextSize(Random r) {
                switch (r.nextInt(5)) {
                    case 0:
                        return 4096;
                    case 1:
                        return 8192;
                    case 2:
                        return 16384;
                    case 3:
                        return 65536;
                    default:
                        return 4096 * (1 + r.nextInt(64)); // multiples of 4 KiB: TOTAL's last write stays >= 4 KiB
                }
            }

            @Override
            public Kind nextKind(Random r) {
                return kind;
            }
        };
    }

    /** Streams {@link #TOTAL} bytes client to server, checks them, and returns the client's counters. */
    private RdmaCounters transfer(WritePlan plan) throws Exception {
        Pattern pattern = Pattern.standard();
        StreamReader reader = new StreamReader(TOTAL, pattern);
        ExceptionRecorder serverErrors = new ExceptionRecorder();
        AtomicReference<RdmaSocketChannel> child = new AtomicReference<>();
        Channel server = RdmaTestSupport.serverBootstrap(serverGroup, serverGroup)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        child.set((RdmaSocketChannel) ch);
                        ch.pipeline().addLast(reader, serverErrors);
                    }
                }).bind(RdmaTestSupport.anyPort()).sync().channel();
        StreamWriter writer = new StreamWriter(TOTAL, pattern, plan, 3);
        RdmaSocketChannel client = (RdmaSocketChannel) RdmaTestSupport.clientBootstrap(clientGroup)
                .handler(writer).connect(server.localAddress()).sync().channel();
        Supplier<String> state = () -> writer.state() + ", " + reader.state() + ", client " + client.counters()
                + ", server child " + (child.get() == null ? null : child.get().counters());
        try {
            RdmaTestSupport.await(writer.done, 30_000, "all writes succeeded", state);
            RdmaTestSupport.await(reader.done, 30_000, "all bytes received", state);
            assertEquals(writer.crc.getValue(), reader.crc.getValue(), "CRC32C, sent vs received");
            RdmaCounters sc = child.get().counters();
            assertEquals(TOTAL, sc.bytesReceived(), () -> "server child bytesReceived: " + sc);
            // a SEND carries at most 16384 - 4 bytes; a write into protocol v2's ring a quarter of the ring
            ringNegotiated = RdmaTestSupport.onLoop(client, client::writeRingNegotiated);
            long largest = ringNegotiated ? child.get().config().getRingSize() / 4 : 16384 - 4;
            assertTrue(sc.messagesReceived() >= TOTAL / largest, () -> "server child messagesReceived: " + sc);
            assertTrue(writer.exceptions.isEmpty(), () -> "client exceptions: " + writer.exceptions);
            assertTrue(reader.exceptions.isEmpty() && serverErrors.exceptions.isEmpty(),
                    () -> "server exceptions: " + reader.exceptions + serverErrors.exceptions);
            System.out.println("[RdmaTransportZeroCopyTest] client " + client.counters() + "; server child " + sc);
            return client.counters();
        } finally {
            client.close().sync();
            server.close().sync();
        }
    }
}
