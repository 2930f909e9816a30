package org.nettyrdma.grpc;

import java.net.InetSocketAddress;

/**
 * The Echo server the tests call: in this JVM (emulated provider), in another one (native provider), or on another host
 * ({@link RemoteEchoServer}).
 */
interface EchoServerUnderTest extends AutoCloseable {
    InetSocketAddress address();

    /** What the server's process holds now: its RDMA queue pairs, registered memory, threads and file descriptors. */
    ResourceCounts counts() throws Exception;

    /**
     * gRPC's {@code shutdownNow()}, then waits for termination; returns how long that took, in ms, or -1 if the server
     * had not terminated within {@link GrpcTestSupport#promptMillis()}.
     */
    long shutdownNow() throws Exception;

    /** gRPC's {@code shutdown()}: no new calls, the open ones go on. */
    void shutdown() throws Exception;

    /** Whether the server has terminated, within {@code millis}. */
    boolean awaitTermination(long millis) throws Exception;

    /**
     * Starts the server the provider under test needs; with {@link GrpcTestSupport#remotePort()} set, returns the one
     * that already runs on another host.
     */
    static EchoServerUnderTest start() throws Exception {
        if (GrpcTestSupport.remotePort() > 0) {
            return new RemoteEchoServer(GrpcTestSupport.address(), GrpcTestSupport.remotePort());
        }
        return GrpcTestSupport.isNative() ? EchoServerProcess.start() : InProcessEchoServer.start();
    }
}
