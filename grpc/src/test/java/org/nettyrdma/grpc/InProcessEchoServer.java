package org.nettyrdma.grpc;

import io.grpc.Server;
import io.grpc.netty.NettyServerBuilder;
import io.netty.channel.EventLoopGroup;
import org.nettyrdma.grpc.sample.EchoService;

import java.net.InetSocketAddress;
import java.util.concurrent.TimeUnit;

/** The Echo server in this JVM, on event loops of its own; also what {@link EchoServerMain} runs. */
final class InProcessEchoServer implements EchoServerUnderTest {
    private final EventLoopGroup group;
    private final Server server;

    private InProcessEchoServer(EventLoopGroup group, Server server) {
        this.group = group;
        this.server = server;
    }

    static InProcessEchoServer start() throws Exception {
        return start(0);
    }

    /** On {@code port} of the address under test (0: any free port). */
    static InProcessEchoServer start(int port) throws Exception {
        EventLoopGroup group = GrpcTestSupport.newGroup(2);
        try {
            Server server = RdmaGrpc.configure(NettyServerBuilder.forAddress(
                            new InetSocketAddress(GrpcTestSupport.address(), port)), group)
                    .maxInboundMessageSize(GrpcTestSupport.MAX_MESSAGE)
                    .addService(EchoService.definition())
                    .build().start();
            return new InProcessEchoServer(group, server);
        } catch (Exception | Error e) {
            GrpcTestSupport.shutdown(group);
            throw e;
        }
    }

    @Override
    public InetSocketAddress address() {
        InetSocketAddress bound = (InetSocketAddress) server.getListenSockets().get(0);
        return new InetSocketAddress(GrpcTestSupport.address(), bound.getPort());
    }

    @Override
    public ResourceCounts counts() {
        return ResourceCounts.of(group);
    }

    @Override
    public long shutdownNow() throws InterruptedException {
        long start = System.nanoTime();
        if (!server.shutdownNow().awaitTermination(GrpcTestSupport.promptMillis(), TimeUnit.MILLISECONDS)) {
            return -1;
        }
        return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    }

    @Override
    public void shutdown() {
        server.shutdown();
    }

    @Override
    public boolean awaitTermination(long millis) throws InterruptedException {
        return server.awaitTermination(millis, TimeUnit.MILLISECONDS);
    }

    @Override
    public void close() throws InterruptedException {
        try {
            server.shutdownNow().awaitTermination(GrpcTestSupport.promptMillis(), TimeUnit.MILLISECONDS);
        } finally {
            GrpcTestSupport.shutdown(group);
        }
    }
}
