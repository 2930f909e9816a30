package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.CompositeByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.util.IllegalReferenceCountException;
import io.netty.util.ResourceLeakDetector;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.api.parallel.ResourceLock;
import org.nettyrdma.testing.LeakRecorder;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.ReadOnlyBufferException;
import java.nio.channels.FileChannel;
import java.nio.channels.Pipe;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

import static java.nio.charset.StandardCharsets.US_ASCII;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** RdmaByteBuf beyond Netty's contract suite: the bytes in region memory, bulk paths, growth, fixed buffers. */
class RdmaByteBufTest {
    private final RdmaByteBufAllocator alloc = new RdmaByteBufAllocator();
    private final List<ByteBuf> toRelease = new ArrayList<>();

    private ByteBuf buffer(int capacity) {
        ByteBuf buf = alloc.directBuffer(capacity);
        toRelease.add(buf);
        return buf;
    }

    @AfterEach
    void releaseAll() {
        for (ByteBuf buf : toRelease) {
            if (buf.refCnt() > 0) {
                buf.release(buf.refCnt());
            }
        }
        assertEquals(0, alloc.buffersInUse(), "every buffer went back");
        assertEquals(0, alloc.bytesInUse());
    }

    /** The bytes as the device sees them: region memory from the buffer's region offset. */
    private static byte[] regionBytes(ByteBuf buf, int index, int length) {
        RdmaByteBuf rdma = RdmaByteBuf.unwrap(buf);
        byte[] bytes = new byte[length];
        rdma.region().memory().get(rdma.regionOffset() + index, bytes, 0, length);
        return bytes;
    }

    private static byte[] bytes(int... values) {
        byte[] b = new byte[values.length];
        for (int i = 0; i < values.length; i++) {
            b[i] = (byte) values[i];
        }
        return b;
    }

    @Test
    @SuppressWarnings("deprecation") // ByteBuf.order()
    void primitivesLandInRegionMemoryInBothByteOrders() {
        ByteBuf buf = buffer(64);
        assertEquals(ByteOrder.BIG_ENDIAN, buf.order());
        assertTrue(buf.isDirect());
        assertFalse(buf.hasArray());
        assertFalse(buf.hasMemoryAddress());
        assertThrows(UnsupportedOperationException.class, buf::array);
        assertThrows(UnsupportedOperationException.class, buf::memoryAddress);

        buf.setShort(0, 0x0102);
        assertArrayEquals(bytes(1, 2), regionBytes(buf, 0, 2));
        buf.setShortLE(0, 0x0102);
        assertArrayEquals(bytes(2, 1), regionBytes(buf, 0, 2));
        assertEquals(0x0201, buf.getShort(0));
        assertEquals(0x0102, buf.getShortLE(0));

        buf.setMedium(2, 0x010203);
        assertArrayEquals(bytes(1, 2, 3), regionBytes(buf, 2, 3));
        assertEquals(0x030201, buf.getMediumLE(2));
        buf.setMediumLE(2, 0x818283);
        assertArrayEquals(bytes(0x83, 0x82, 0x81), regionBytes(buf, 2, 3));
        assertEquals(0x838281, buf.getUnsignedMedium(2));
        assertEquals(0xff838281, buf.getMedium(2), "sign-extended");
        assertEquals(0x818283, buf.getUnsignedMediumLE(2));

        buf.setInt(8, 0x01020304);
        assertArrayEquals(bytes(1, 2, 3, 4), regionBytes(buf, 8, 4));
        assertEquals(0x04030201, buf.getIntLE(8));
        buf.setIntLE(8, 0x01020304);
        assertArrayEquals(bytes(4, 3, 2, 1), regionBytes(buf, 8, 4));
        assertEquals(0x01020304, buf.getIntLE(8));
        assertEquals(0x04030201L, buf.getUnsignedInt(8));

        buf.setLong(16, 0x0102030405060708L);
        assertArrayEquals(bytes(1, 2, 3, 4, 5, 6, 7, 8), regionBytes(buf, 16, 8));
        assertEquals(0x0807060504030201L, buf.getLongLE(16));
        buf.setLongLE(16, 0x0102030405060708L);
        assertArrayEquals(bytes(8, 7, 6, 5, 4, 3, 2, 1), regionBytes(buf, 16, 8));
        assertEquals(0x0102030405060708L, buf.getLongLE(16));

        buf.setByte(24, 0x1ff);
        assertEquals(-1, buf.getByte(24));
        assertEquals(0xff, buf.getUnsignedByte(24));
        buf.setChar(25, 'é');
        assertEquals('é', buf.getChar(25));
        buf.setFloat(28, 1.5f);
        assertEquals(Float.floatToIntBits(1.5f), buf.getInt(28));
        buf.setDoubleLE(32, 2.25);
        assertEquals(2.25, buf.getDoubleLE(32));
        assertEquals(Double.doubleToLongBits(2.25), buf.getLongLE(32));

        // and writes at the last valid index, with bounds checked against the buffer, not the region
        buf.setLong(56, -1L);
        assertThrows(IndexOutOfBoundsException.class, () -> buf.setLong(57, 0));
        assertThrows(IndexOutOfBoundsException.class, () -> buf.getInt(61));
    }

    @Test
    void bulkCopiesBetweenHeapDirectCompositeAndRegistered() {
        Random random = new Random(1);
        byte[] data = new byte[3000];
        random.nextBytes(data);

        ByteBuf ours = buffer(4096);
        ours.writeBytes(data);
        assertArrayEquals(data, regionBytes(ours, 0, data.length));

        ByteBuf heap = Unpooled.buffer(4096);
        ByteBuf direct = Unpooled.directBuffer(4096);
        ByteBuf other = buffer(4096);
        CompositeByteBuf composite = Unpooled.compositeBuffer();
        composite.addComponents(true, Unpooled.directBuffer(1000).writeZero(1000), Unpooled.buffer(1000).writeZero(1000),
                Unpooled.directBuffer(1000).writeZero(1000));
        try {
            for (ByteBuf dst : new ByteBuf[] {heap, direct, other, composite}) {
                ours.getBytes(0, dst, 0, data.length);
                byte[] copy = new byte[data.length];
                dst.getBytes(0, copy);
                assertArrayEquals(data, copy, "to " + dst);

                ByteBuf back = buffer(4096);
                back.setBytes(0, dst, 0, data.length);
                assertArrayEquals(data, regionBytes(back, 0, data.length), "from " + dst);
                // and the other direction of each, driven by the foreign buffer
                ByteBuf again = buffer(4096);
                dst.getBytes(0, again, 5, data.length);
                assertArrayEquals(data, regionBytes(again, 5, data.length), "from " + dst + " (its getBytes)");
            }
            // byte arrays and ByteBuffers, heap and direct, with offsets
            byte[] array = new byte[data.length + 10];
            ours.getBytes(0, array, 10, data.length);
            assertArrayEquals(data, Arrays.copyOfRange(array, 10, array.length));
            ByteBuffer nioHeap = ByteBuffer.allocate(data.length + 20).position(20);
            ours.getBytes(0, nioHeap);
            assertEquals(nioHeap.limit(), nioHeap.position());
            ByteBuffer nioDirect = ByteBuffer.allocateDirect(data.length);
            ours.getBytes(0, nioDirect);
            nioDirect.flip();
            ByteBuf fromNio = buffer(4096);
            fromNio.setBytes(7, nioDirect);
            assertFalse(nioDirect.hasRemaining());
            assertArrayEquals(data, regionBytes(fromNio, 7, data.length));
            assertThrows(ReadOnlyBufferException.class, () -> ours.getBytes(0, ByteBuffer.allocate(10).asReadOnlyBuffer()));
            assertThrows(IndexOutOfBoundsException.class, () -> ours.getBytes(4090, new byte[10]));
            assertThrows(IndexOutOfBoundsException.class, () -> ours.getBytes(0, other, 4090, 10));
        } finally {
            heap.release();
            direct.release();
            composite.release();
        }
    }

    @Test
    void overlappingCopyWithinOneBuffer() {
        ByteBuf buf = buffer(256);
        for (int i = 0; i < 256; i++) {
            buf.setByte(i, i);
        }
        buf.setBytes(10, buf, 0, 100); // forwards overlap: a memmove
        for (int i = 0; i < 100; i++) {
            assertEquals((byte) i, buf.getByte(10 + i));
        }
        buf.getBytes(5, buf, 0, 100); // backwards overlap
        for (int i = 0; i < 5; i++) {
            assertEquals((byte) (i + 5), buf.getByte(i));
        }
    }

    @Test
    void nioBufferViewsShareTheRegisteredMemory() {
        ByteBuf buf = buffer(1024);
        buf.writeLong(0x1122334455667788L).writeInt(7);
        assertEquals(1, buf.nioBufferCount());
        ByteBuffer view = buf.nioBuffer();
        assertTrue(view.isDirect());
        assertEquals(ByteOrder.BIG_ENDIAN, view.order());
        assertEquals(0, view.position());
        assertEquals(12, view.remaining());
        assertEquals(0x1122334455667788L, view.getLong(0));
        view.putInt(8, 99);
        assertEquals(99, buf.getInt(8), "a view writes through");

        ByteBuffer[] views = buf.nioBuffers(4, 8);
        assertEquals(1, views.length);
        assertEquals(8, views[0].remaining());
        assertEquals(0x55667788, views[0].getInt(0));

        ByteBuffer internal = buf.internalNioBuffer(4, 8);
        assertEquals(8, internal.remaining());
        assertEquals(0x55667788, internal.getInt(internal.position()));
        assertSame(internal, buf.internalNioBuffer(0, 4), "internal buffer is reused");
        assertThrows(IndexOutOfBoundsException.class, () -> buf.nioBuffer(1000, 100));
    }

    @Test
    void writeBytesFromStreamsAndChannels(@TempDir Path dir) throws IOException {
        byte[] data = new byte[20000];
        new Random(2).nextBytes(data);

        ByteBuf buf = buffer(64);
        assertEquals(20000, buf.writeBytes(new ByteArrayInputStream(data), 20000), "grows as it reads");
        assertArrayEquals(data, regionBytes(buf, 0, 20000));
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        buf.readBytes(out, 20000);
        assertArrayEquals(data, out.toByteArray());

        // a stream that has less than asked: what it has, then -1 at its end
        ByteBuf partial = buffer(100);
        InputStream in = new ByteArrayInputStream(data, 0, 30);
        assertEquals(30, partial.writeBytes(in, 100));
        assertEquals(-1, partial.writeBytes(in, 10));

        Path file = dir.resolve("data");
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.READ,
                StandardOpenOption.WRITE)) {
            ByteBuf src = buffer(20000).writeBytes(data);
            assertEquals(20000, src.readBytes(ch, 0, 20000));
            assertEquals(1000, src.getBytes(5, ch, 20000, 1000));
            ByteBuf dst = buffer(21000);
            assertEquals(20000, dst.writeBytes(ch, 0, 20000));
            assertEquals(1000, dst.writeBytes(ch, 20000, 1000));
            assertArrayEquals(data, regionBytes(dst, 0, 20000));
            assertArrayEquals(Arrays.copyOfRange(data, 5, 1005), regionBytes(dst, 20000, 1000));
        }

        Pipe pipe = Pipe.open();
        try {
            ByteBuf src = buffer(4096).writeBytes(data, 0, 4096);
            assertEquals(4096, src.readBytes(pipe.sink(), 4096));
            ByteBuf dst = buffer(4096);
            int n = 0;
            while (n < 4096) {
                n += dst.writeBytes(pipe.source(), 4096 - n);
            }
            assertArrayEquals(Arrays.copyOf(data, 4096), regionBytes(dst, 0, 4096));
            pipe.source().close();
            assertEquals(-1, dst.setBytes(0, pipe.source(), 10), "a closed channel reads as -1");
        } finally {
            pipe.sink().close();
            pipe.source().close();
        }
    }

    @Test
    void capacityGrowthKeepsContentsAndIndexes() {
        ByteBuf buf = buffer(100);
        RdmaByteBuf rdma = RdmaByteBuf.unwrap(buf);
        byte[] data = new byte[100];
        new Random(3).nextBytes(data);
        buf.writeBytes(data).readerIndex(10);
        buf.markReaderIndex();

        // within the slot (128 bytes): same memory
        RegisteredRegion region = rdma.region();
        int offset = rdma.regionOffset();
        buf.capacity(128);
        assertSame(region, rdma.region());
        assertEquals(offset, rdma.regionOffset());
        assertEquals(128, buf.capacity());

        // past it: another slot, same bytes and indexes
        buf.capacity(5000);
        assertEquals(5000, buf.capacity());
        assertEquals(10, buf.readerIndex());
        assertEquals(100, buf.writerIndex());
        assertArrayEquals(data, regionBytes(buf, 0, 100));
        assertEquals(8192, alloc.bytesInUse(), "only the new slot is in use");

        // past the largest class: a region of its own
        int regionsBefore = alloc.regionCount();
        buf.capacity(3 << 20);
        RegisteredRegion dedicated = rdma.region();
        assertEquals(3 << 20, dedicated.capacity());
        assertEquals(0, rdma.regionOffset());
        assertEquals(regionsBefore + 1, alloc.regionCount());
        assertArrayEquals(data, regionBytes(buf, 0, 100));
        buf.setByte((3 << 20) - 1, 1);

        // and back down: truncated, indexes trimmed, the dedicated region closed
        buf.capacity(50);
        assertEquals(50, buf.capacity());
        assertEquals(10, buf.readerIndex());
        assertEquals(50, buf.writerIndex());
        assertArrayEquals(Arrays.copyOf(data, 50), regionBytes(buf, 0, 50));
        assertTrue(dedicated.isClosed(), "the large buffer's region is freed when it moves out");
        assertEquals(1, alloc.buffersInUse());
        assertEquals(64, alloc.bytesInUse());
        buf.resetReaderIndex();
        assertEquals(10, buf.readerIndex());

        assertThrows(IllegalArgumentException.class, () -> buf.capacity(-1));
        ByteBuf bounded = alloc.directBuffer(10, 20);
        toRelease.add(bounded);
        assertThrows(IllegalArgumentException.class, () -> bounded.capacity(21));
        assertThrows(IndexOutOfBoundsException.class, () -> bounded.writeZero(21));
    }

    @Test
    void releaseReturnsTheMemory() {
        assertEquals(0, alloc.buffersInUse());
        ByteBuf a = alloc.directBuffer(100);
        ByteBuf b = alloc.directBuffer(2000);
        ByteBuf c = alloc.directBuffer(2 << 20);
        assertEquals(3, alloc.buffersInUse());
        assertEquals(128 + 2048 + (2 << 20), alloc.bytesInUse());
        long regionBytes = alloc.regionBytes();
        assertTrue(regionBytes >= alloc.bytesInUse());

        assertTrue(c.release());
        assertEquals(regionBytes - (2 << 20), alloc.regionBytes(), "a large buffer's region goes at once");
        b.retain();
        assertFalse(b.release());
        assertEquals(2, alloc.buffersInUse());
        assertTrue(b.release());
        assertTrue(a.release());
        assertEquals(0, alloc.buffersInUse());
        assertEquals(0, alloc.bytesInUse());
        assertThrows(IllegalReferenceCountException.class, () -> a.getByte(0));
        assertThrows(IllegalReferenceCountException.class, a::release);
    }

    @Test
    void copyIsARegisteredBuffer() {
        ByteBuf buf = buffer(64).writeInt(42).writeInt(43);
        ByteBuf copy = buf.copy(4, 4);
        toRelease.add(copy);
        assertNotNull(RdmaByteBuf.unwrap(copy));
        assertSame(alloc, copy.alloc());
        assertEquals(43, copy.readInt());
    }

    @Test
    void heapBuffersAreHeap() {
        ByteBuf heap = alloc.heapBuffer(100);
        try {
            assertTrue(heap.hasArray());
            assertFalse(heap.isDirect());
            assertSame(alloc, heap.alloc());
            assertNull(RdmaByteBuf.unwrap(heap));
        } finally {
            heap.release();
        }
        ByteBuf buf = alloc.buffer();
        ByteBuf io = alloc.ioBuffer();
        toRelease.add(buf);
        toRelease.add(io);
        assertNotNull(RdmaByteBuf.unwrap(buf), "buffer() is registered");
        assertNotNull(RdmaByteBuf.unwrap(io), "ioBuffer() is registered");
        assertTrue(alloc.isDirectBufferPooled());
    }

    @Test
    @ResourceLock(LeakRecorder.LEVEL_LOCK) // it sets the level and restores it
    void unwrapThroughLeakDetectionWrappersOnly() {
        withParanoidLeakDetection(() -> {
            ByteBuf tracked = buffer(64);
            RdmaByteBuf rdma = RdmaByteBuf.unwrap(tracked);
            assertNotNull(rdma);
            assertNotSame(tracked, rdma, "paranoid leak detection wraps it");
            assertSame(rdma, RdmaByteBuf.unwrap(rdma));
            assertSame(rdma, RdmaByteBuf.unwrap(Unpooled.unreleasableBuffer(tracked)));

            assertNull(RdmaByteBuf.unwrap(tracked.slice(1, 10)), "a slice is at other indexes");
            assertNull(RdmaByteBuf.unwrap(tracked.duplicate()));
            assertNull(RdmaByteBuf.unwrap(tracked.asReadOnly()));
            CompositeByteBuf composite = Unpooled.compositeBuffer().addComponent(true, tracked.retain());
            assertNull(RdmaByteBuf.unwrap(composite));
            composite.release();
            assertNull(RdmaByteBuf.unwrap(Unpooled.EMPTY_BUFFER));
            ByteBuf direct = Unpooled.directBuffer(8);
            assertNull(RdmaByteBuf.unwrap(direct));
            direct.release();
        });
    }

    /** Runs {@code body} with every buffer wrapped by paranoid leak detection; the level is restored after. */
    private static void withParanoidLeakDetection(Runnable body) {
        ResourceLeakDetector.Level level = ResourceLeakDetector.getLevel();
        ResourceLeakDetector.setLevel(ResourceLeakDetector.Level.PARANOID);
        try {
            body.run();
        } finally {
            ResourceLeakDetector.setLevel(level);
        }
    }

    // lent (receive) buffers

    private static final class Lender implements RdmaByteBuf.LendHook {
        final List<Integer> returned = new ArrayList<>();
        final List<RdmaByteBuf> reclaimed = new ArrayList<>();
        boolean reclaim;

        @Override
        public boolean reclaim(RdmaByteBuf buf) {
            if (reclaim) {
                reclaimed.add(buf);
            }
            return reclaim;
        }

        @Override
        public void returned(int bytes) {
            returned.add(bytes);
        }
    }

    /**
     * A buffer whose memory a SEND may still read (sent in place, itself or a slice of it) keeps the memory it grows
     * out of until it is released; one never sent in place gives it back at once.
     */
    @Test
    void memorySentInPlaceIsKeptUntilReleaseWhenTheBufferGrows() {
        RdmaByteBufAllocator pool = new RdmaByteBufAllocator();
        for (boolean sent : new boolean[] {false, true}) {
            RdmaByteBuf buf = pool.untrackedBuffer(1024, 1 << 20);
            buf.writeBytes(new byte[1024]);
            long small = pool.bytesInUse();
            if (sent) {
                buf.markSentInPlace();
            }
            buf.writeBytes(new byte[64 << 10]); // past its 1 KiB slot, into a larger one
            long grown = pool.bytesInUse();
            assertTrue(grown > small, "it moved to a larger slot");
            buf.writeBytes(new byte[256 << 10]); // and again
            if (sent) {
                assertEquals(3, pool.buffersInUse(), "the slots it grew out of are kept: " + pool);
            } else {
                assertEquals(1, pool.buffersInUse(), "the slots it grew out of are free: " + pool);
            }
            assertTrue(buf.release());
            assertEquals(0, pool.buffersInUse(), "all back at release (sent in place: " + sent + ")");
            assertEquals(0, pool.bytesInUse());
        }
    }

    /** A slice, a slice of a slice, a duplicate, through leak detection: the registered bytes behind them are found. */
    @Test
    @ResourceLock(LeakRecorder.LEVEL_LOCK) // it sets the level and restores it
    void registeredSourceLooksThroughSlicesAndDuplicates() {
        withParanoidLeakDetection(() -> {
            ByteBuf tracked = buffer(256);
            tracked.writeZero(256);
            RdmaByteBuf root = RdmaByteBuf.unwrap(tracked);
            RegisteredSource source = new RegisteredSource();
            assertTrue(source.locate(tracked));
            assertSame(root, source.root());
            assertEquals(root.regionOffset() + 7, source.regionOffset(7));
            ByteBuf slice = tracked.slice(10, 100);
            assertTrue(source.locate(slice));
            assertSame(root, source.root());
            assertEquals(root.regionOffset() + 10 + 5, source.regionOffset(5));
            assertTrue(source.locate(slice.slice(20, 30).duplicate()));
            assertEquals(root.regionOffset() + 30 + 1, source.regionOffset(1));
            ByteBuf retained = tracked.retainedSlice(40, 8);
            assertTrue(source.locate(retained));
            assertEquals(root.regionOffset() + 40, source.regionOffset(0));
            retained.release();
            // the bytes at the offsets found are the buffer's
            tracked.setByte(10 + 5, 42);
            assertTrue(source.locate(slice));
            assertEquals(42, root.getByte(source.regionOffset(5) - root.regionOffset()));

            CompositeByteBuf composite = Unpooled.compositeBuffer().addComponent(true, tracked.retain());
            assertFalse(source.locate(composite));
            composite.release();
            ByteBuf direct = Unpooled.directBuffer(8);
            assertFalse(source.locate(direct.slice(1, 2)));
            assertNull(source.root());
            direct.release();
        });
    }

    @Test
    void lentBufferTellsItsLenderOnceWhenReleased() {
        RdmaByteBufAllocator pool = new RdmaByteBufAllocator();
        Lender lender = new Lender();
        RdmaByteBuf buf = pool.untrackedBuffer(1024, 1024);
        assertEquals(1, pool.buffersInUse());
        // the device wrote a message into it; the transport lends it as [4, 15)
        buf.setBytes(4, "hello world".getBytes(US_ASCII));
        ByteBuf lent = RdmaByteBufAllocator.trackLeaks(buf.lend(lender, 1024, 4, 15));
        assertSame(buf, RdmaByteBuf.unwrap(lent));
        assertEquals("hello world", lent.toString(US_ASCII));
        lent.retain();
        assertFalse(lent.release());
        assertTrue(lender.returned.isEmpty());
        assertTrue(lent.release());
        assertEquals(List.of(1024), lender.returned);
        assertEquals(0, pool.buffersInUse(), "the memory went back to its pool");

        // a recycled object that is not lent tells nobody
        RdmaByteBuf again = pool.untrackedBuffer(1024, 1024);
        again.release();
        assertEquals(List.of(1024), lender.returned);
    }

    @Test
    void aReclaimedBufferStaysAliveWithItsMemoryForTheLender() {
        RdmaByteBufAllocator pool = new RdmaByteBufAllocator();
        Lender lender = new Lender();
        lender.reclaim = true;
        RdmaByteBuf buf = pool.untrackedBuffer(1024, 1024);
        RegisteredRegion region = buf.region();
        int offset = buf.regionOffset();
        assertTrue(RdmaByteBufAllocator.trackLeaks(buf.lend(lender, 1024, 0, 10)).release());
        assertEquals(List.of(buf), lender.reclaimed);
        assertEquals(List.of(1024), lender.returned, "the lent bytes came back");
        assertEquals(1, buf.refCnt(), "alive again, the lender's");
        assertEquals(1, pool.buffersInUse(), "its memory stayed with it");
        assertSame(region, buf.region());
        assertEquals(offset, buf.regionOffset());
        lender.reclaim = false;
        buf.lend(lender, 1024, 0, 0);
        assertTrue(buf.release());
        assertEquals(0, pool.buffersInUse());
    }

    @Test
    void lentBufferGrowsLikeAnyPooledBuffer() {
        RdmaByteBufAllocator pool = new RdmaByteBufAllocator();
        Lender lender = new Lender();
        RdmaByteBuf buf = pool.untrackedBuffer(100, Integer.MAX_VALUE);
        buf.lend(lender, 128, 0, 100);
        buf.writeZero(1000); // an application that appends to a received buffer (a cumulator) moves it to a larger slot
        assertTrue(buf.capacity() >= 1100);
        assertTrue(buf.release());
        assertEquals(List.of(128), lender.returned, "what was lent comes back, not what it grew to");
        assertEquals(0, pool.buffersInUse());
    }
}
