package org.nettyrdma.channel.testsuite;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBufAllocator;
import io.netty.testsuite.transport.TestsuitePermutation;
import io.netty.testsuite.transport.socket.SocketDataReadInitialStateTest;
import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

import java.util.List;

class RdmaSocketDataReadInitialStateTest extends SocketDataReadInitialStateTest {
    @Override
    protected List<TestsuitePermutation.BootstrapComboFactory<ServerBootstrap, Bootstrap>> newFactories() {
        return RdmaSocketTestPermutation.INSTANCE.socket();
    }

    @Override
    protected List<ByteBufAllocator> newAllocators() {
        return RdmaSocketTestPermutation.allocators();
    }

    /**
     * The case needs TCP's kernel backlog: it connects and writes while the server channel has AUTO_READ off and has
     * accepted nothing. An RDMA connection is established only when the server accepts the request with a queue pair,
     * and the queue pair is created on the child channel's event loop, which exists once the server pipeline reads the
     * child. So with the server's AUTO_READ off the client's connect completes at the server's first read() (or times
     * out), and the test's connect().sync() waits for a read it only issues afterwards (docs/architecture.md,
     * "Accepting").
     */
    @Override
    @Test
    @Disabled("a connect completes only when the server channel reads (accepts) it; TCP's backlog completes it before")
    public void testAutoReadOffNoDataReadUntilReadCalled(TestInfo testInfo) {
    }
}
