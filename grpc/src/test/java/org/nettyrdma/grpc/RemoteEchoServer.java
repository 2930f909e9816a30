package org.nettyrdma.grpc;

import java.net.InetSocketAddress;

/**
 * An Echo server ({@link EchoServerMain}) that already runs on another host, as vm/two-host starts it on host 1 for the
 * clients of host 2: the tests call it at the address under test and {@link GrpcTestSupport#REMOTE_PORT_PROPERTY}.
 * Its process is that host's: it cannot be asked for counts or shut down from here, and {@link #close} leaves it
 * running (for the next device and test class; its host ends it and checks its exit code and leaks).
 */
final class RemoteEchoServer implements EchoServerUnderTest {
    private final InetSocketAddress address;

    RemoteEchoServer(String host, int port) {
        this.address = new InetSocketAddress(host, port);
    }

    @Override
    public InetSocketAddress address() {
        return address;
    }

    @Override
    public ResourceCounts counts() {
        throw notHere("counts");
    }

    @Override
    public long shutdownNow() {
        throw notHere("shutdownNow");
    }

    @Override
    public void shutdown() {
        throw notHere("shutdown");
    }

    @Override
    public boolean awaitTermination(long millis) {
        throw notHere("awaitTermination");
    }

    @Override
    public void close() {
        // the other host's server: it goes on serving
    }

    private UnsupportedOperationException notHere(String what) {
        return new UnsupportedOperationException(what + ": the Echo server at " + address + " runs on another host ("
                + GrpcTestSupport.REMOTE_PORT_PROPERTY + "); a test that needs this starts its own server"
                + " (GrpcTestSupport.assumeOwnServer)");
    }
}
