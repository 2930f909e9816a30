package org.nettyrdma.channel;

import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.ByteBufAllocatorTest;

/** Netty's allocator contract suite (from netty-buffer's test-jar): buffer kinds, capacities, composites. */
class RdmaByteBufAllocatorContractTest extends ByteBufAllocatorTest {

    @Override
    protected int defaultMaxCapacity() {
        return Integer.MAX_VALUE;
    }

    @Override
    protected int defaultMaxComponents() {
        return 16;
    }

    @Override
    protected ByteBufAllocator newAllocator(boolean preferDirect) {
        return new RdmaByteBufAllocator(preferDirect);
    }

    @Override
    protected boolean isDirectExpected(boolean preferDirect) {
        return preferDirect;
    }
}
