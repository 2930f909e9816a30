package org.nettyrdma.channel;

import io.netty.buffer.AbstractByteBufTest;
import io.netty.buffer.ByteBuf;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

/**
 * Netty's ByteBuf contract suite on an allocator that pools only up to 256 bytes in 1 KiB regions: most buffers get
 * a region of their own, and growing moves buffers between slots and regions.
 */
class RdmaByteBufDedicatedContractTest extends AbstractByteBufTest {
    private static final RdmaByteBufAllocator ALLOC = new RdmaByteBufAllocator(true, 256, 1024);

    @Override
    protected ByteBuf newBuffer(int length, int maxCapacity) {
        ByteBuf buf = ALLOC.directBuffer(length, maxCapacity);
        assertNotNull(RdmaByteBuf.unwrap(buf));
        assertEquals(0, buf.writerIndex());
        return buf;
    }

    @Test
    @Override
    public void testMaxFastWritableBytes() {
        RdmaByteBufContractTest.checkMaxFastWritableBytes(newBuffer(150, 500));
    }
}
