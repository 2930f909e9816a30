package org.nettyrdma.channel.testsuite;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBufAllocator;
import io.netty.testsuite.transport.TestsuitePermutation;
import io.netty.testsuite.transport.socket.SocketSslSessionReuseTest;

import io.netty.handler.ssl.SslContextBuilder;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import java.util.List;

class RdmaSocketSslSessionReuseTest extends SocketSslSessionReuseTest {
    @Override
    protected List<TestsuitePermutation.BootstrapComboFactory<ServerBootstrap, Bootstrap>> newFactories() {
        return RdmaSocketTestPermutation.INSTANCE.socket();
    }

    @Override
    protected List<ByteBufAllocator> newAllocators() {
        return RdmaSocketTestPermutation.allocators();
    }

    /** JDK engines only (Netty's own jdkOnly()): the OpenSSL ones need netty-tcnative, which we don't ship. */
    @ParameterizedTest(name = "{index}: serverEngine = {0}, clientEngine = {1}")
    @MethodSource("jdkOnly")
    @Override
    public void testSslSessionTrustManagerResumption(SslContextBuilder serverCtx, SslContextBuilder clientCtx,
                                                     TestInfo testInfo) throws Throwable {
        super.testSslSessionTrustManagerResumption(serverCtx, clientCtx, testInfo);
    }
}
