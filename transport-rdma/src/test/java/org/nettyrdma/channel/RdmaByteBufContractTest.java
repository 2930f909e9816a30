package org.nettyrdma.channel;

import io.netty.buffer.AbstractByteBufTest;
import io.netty.buffer.ByteBuf;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Netty's own ByteBuf contract suite (from netty-buffer's test-jar) on pool-owned buffers of the default sizes. */
class RdmaByteBufContractTest extends AbstractByteBufTest {
    private static final RdmaByteBufAllocator ALLOC = new RdmaByteBufAllocator();

    @Override
    protected ByteBuf newBuffer(int length, int maxCapacity) {
        ByteBuf buf = ALLOC.directBuffer(length, maxCapacity);
        assertNotNull(RdmaByteBuf.unwrap(buf));
        assertEquals(0, buf.writerIndex());
        return buf;
    }

    /**
     * Like Netty's pooled buffers, these can write up to the end of their slot with no reallocation: the suite's
     * version expects {@code writableBytes()} (an unpooled buffer's), Netty's pooled suite checks this instead.
     */
    @Test
    @Override
    public void testMaxFastWritableBytes() {
        checkMaxFastWritableBytes(newBuffer(150, 500));
    }

    static void checkMaxFastWritableBytes(ByteBuf buf) {
        try {
            buf.writerIndex(100);
            assertEquals(50, buf.writableBytes());
            assertEquals(150, buf.capacity());
            assertEquals(400, buf.maxWritableBytes());
            RdmaByteBuf rdma = RdmaByteBuf.unwrap(buf);
            int slot = 256; // 150 rounds up to the 256-byte class
            assertEquals(slot - 100, buf.maxFastWritableBytes());
            RegisteredRegion region = rdma.region();
            int offset = rdma.regionOffset();
            buf.writeBytes(new byte[buf.maxFastWritableBytes()]);
            assertSame(region, rdma.region());
            assertEquals(offset, rdma.regionOffset());
            assertEquals(0, buf.maxFastWritableBytes());
            buf.writeByte(7);
            assertTrue(region != rdma.region() || offset != rdma.regionOffset(), "moved to a larger slot");
            buf.capacity(500);
            assertEquals(500 - buf.writerIndex(), buf.maxFastWritableBytes());
        } finally {
            buf.release();
        }
    }
}
