package org.nettyrdma.grpc;

import io.grpc.ManagedChannel;
import io.grpc.netty.NettyChannelBuilder;
import io.netty.channel.EventLoopGroup;
import org.junit.jupiter.api.Assumptions;
import org.nettyrdma.channel.RdmaIoHandlerConfig;

import java.net.InetSocketAddress;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

/**
 * Where the gRPC tests run, from the system properties the transport's tests read too: {@value #PROVIDER_PROPERTY}
 * ({@code emulated}, the default: server and client in this JVM; {@code native}: the server in a JVM of its own,
 * {@link EchoServerProcess}), {@value #ADDRESS_PROPERTY} (the IP, default 127.0.0.1) and {@value #SCALE_PROPERTY}
 * (0 &lt; S &lt;= 1: message counts times S, for the VM's slow Java). With {@value #REMOTE_PORT_PROPERTY} set (vm/two-host),
 * the Echo server already runs on another host, at the address under test and that port ({@link RemoteEchoServer}).
 */
final class GrpcTestSupport {
    static final String PROVIDER_PROPERTY = "org.nettyrdma.test.provider";
    static final String ADDRESS_PROPERTY = "org.nettyrdma.test.address";
    static final String SCALE_PROPERTY = "org.nettyrdma.test.scale";
    static final String REMOTE_PORT_PROPERTY = "org.nettyrdma.test.remote.port";
    /** Largest message the tests' servers and channels take (gRPC's default is 4 MiB). */
    static final int MAX_MESSAGE = 16 << 20;

    private GrpcTestSupport() {
    }

    static String provider() {
        String p = System.getProperty(PROVIDER_PROPERTY, RdmaIoHandlerConfig.PROVIDER_EMULATED);
        if (!RdmaIoHandlerConfig.PROVIDER_EMULATED.equals(p) && !RdmaIoHandlerConfig.PROVIDER_NATIVE.equals(p)) {
            throw new IllegalArgumentException(PROVIDER_PROPERTY + "=" + p + " (expected emulated or native)");
        }
        return p;
    }

    static boolean isNative() {
        return RdmaIoHandlerConfig.PROVIDER_NATIVE.equals(provider());
    }

    static String address() {
        return System.getProperty(ADDRESS_PROPERTY, "127.0.0.1");
    }

    /** The port of an Echo server that already runs at {@link #address()} (another host), or -1: none, tests start one. */
    static int remotePort() {
        String p = System.getProperty(REMOTE_PORT_PROPERTY, "");
        if (p.isEmpty()) {
            return -1;
        }
        int port = Integer.parseInt(p);
        if (port < 1 || port > 65535) {
            throw new IllegalArgumentException(REMOTE_PORT_PROPERTY + "=" + p + " (expected a port, 1 to 65535)");
        }
        return port;
    }

    /** Skips the test, saying why, when the Echo server is another host's: {@code needs} is what it needs its own for. */
    static void assumeOwnServer(String needs) {
        Assumptions.assumeTrue(remotePort() < 0, () -> "needs a server of its own (" + needs + "), and the Echo server"
                + " runs on another host (" + REMOTE_PORT_PROPERTY + "=" + remotePort() + ")");
    }

    static double scale() {
        double s = Double.parseDouble(System.getProperty(SCALE_PROPERTY, "1"));
        if (!(s > 0 && s <= 1)) {
            throw new IllegalArgumentException(SCALE_PROPERTY + "=" + s + " (expected 0 < scale <= 1)");
        }
        return s;
    }

    static int scaled(int count) {
        return Math.max(1, (int) Math.round(count * scale()));
    }

    /** Bounds of waits: 10 s here, 60 s on the native provider (the VM's Java is 15-27 times slower). */
    static long promptMillis() {
        return isNative() ? 60_000 : 10_000;
    }

    /**
     * The RDMA event loops of the tests' clients and in-process servers: {@link RdmaGrpc}'s, on the provider under
     * test, with no busy polling.
     */
    static EventLoopGroup newGroup(int threads) {
        return RdmaGrpc.newEventLoopGroup(threads, RdmaGrpc.newIoHandlerConfig().setProvider(provider())
                .setBusyPollNanos(0));
    }

    /** A plaintext channel to {@code server} on {@code group}, configured by {@link RdmaGrpc}. */
    static ManagedChannel channel(EchoServerUnderTest server, EventLoopGroup group) {
        InetSocketAddress at = server.address();
        return RdmaGrpc.configure(NettyChannelBuilder.forAddress(at), group).maxInboundMessageSize(MAX_MESSAGE)
                .usePlaintext().build();
    }

    static void close(ManagedChannel channel) throws InterruptedException {
        if (channel != null && !channel.shutdownNow().awaitTermination(promptMillis(), TimeUnit.MILLISECONDS)) {
            throw new AssertionError("the channel did not terminate within " + promptMillis() + " ms of shutdownNow");
        }
    }

    static void shutdown(EventLoopGroup group) throws InterruptedException {
        if (group != null && !group.shutdownGracefully(0, 5, TimeUnit.SECONDS).await(30, TimeUnit.SECONDS)) {
            throw new AssertionError("event loop group did not terminate within 30 s");
        }
    }

    static void awaitCondition(String what, BooleanSupplier condition, long timeoutMillis, Supplier<String> state)
            throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMillis);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError(what + ": not within " + timeoutMillis + " ms; " + state.get());
            }
            Thread.sleep(10);
        }
    }
}
