package org.nettyrdma.channel.testsuite;

import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBufAllocator;
import io.netty.testsuite.transport.TestsuitePermutation;
import io.netty.testsuite.transport.socket.SocketChannelNotYetConnectedTest;

import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import java.util.List;

class RdmaSocketChannelNotYetConnectedTest extends SocketChannelNotYetConnectedTest {
    @Override
    protected List<TestsuitePermutation.BootstrapFactory<Bootstrap>> newFactories() {
        return RdmaSocketTestPermutation.INSTANCE.clientSocket();
    }

    @Override
    protected List<ByteBufAllocator> newAllocators() {
        return RdmaSocketTestPermutation.allocators();
    }

    @Test
    @Disabled("connects to an NIO (TCP) server, which an RDMA channel cannot reach")
    @Override
    public void readMustBePendingUntilChannelIsActive(TestInfo info) {
    }
}
