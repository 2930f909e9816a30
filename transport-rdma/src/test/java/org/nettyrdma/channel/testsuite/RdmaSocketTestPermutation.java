package org.nettyrdma.channel.testsuite;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.AdaptiveByteBufAllocator;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapComboFactory;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapFactory;
import io.netty.testsuite.transport.socket.SocketTestPermutation;
import io.netty.util.concurrent.DefaultThreadFactory;
import org.nettyrdma.channel.RdmaByteBufAllocator;
import org.nettyrdma.channel.RdmaIoHandler;
import org.nettyrdma.channel.RdmaIoHandlerConfig;
import org.nettyrdma.channel.RdmaServerSocketChannel;
import org.nettyrdma.channel.RdmaSocketChannel;
import org.nettyrdma.verbs.emulated.EmulatedFabric;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;

/**
 * Netty's socket test permutations for the RDMA transport on the emulated provider: RDMA servers with RDMA clients
 * only (an RDMA channel cannot talk to a TCP one), and the allocators Netty uses plus the registered one.
 *
 * <p>Each connection has one end on each kind of loop: accepted channels run on loops with the default busy-poll
 * (they spin before they block, as users' loops do), listeners and clients on loops that never spin (they arm their
 * completion queues and block at once). So every test drives both paths of {@code RdmaIoHandler.run}, with no more
 * permutations than one.
 */
public class RdmaSocketTestPermutation extends SocketTestPermutation {
    public static final RdmaSocketTestPermutation INSTANCE = new RdmaSocketTestPermutation();

    /** Listeners and clients: busy-poll 0. */
    static final EventLoopGroup RDMA_GROUP = new MultiThreadIoEventLoopGroup(NUM_THREADS,
            new DefaultThreadFactory("testsuite-rdma", true),
            RdmaIoHandler.newFactory(new RdmaIoHandlerConfig().setProvider(RdmaIoHandlerConfig.PROVIDER_EMULATED)
                    .setBusyPollNanos(0)));

    /** Accepted channels: the default busy-poll (RdmaIoHandlerConfig's, unless a system property changes it). */
    static final EventLoopGroup RDMA_SPINNING_GROUP = new MultiThreadIoEventLoopGroup(NUM_THREADS,
            new DefaultThreadFactory("testsuite-rdma-spin", true),
            RdmaIoHandler.newFactory(new RdmaIoHandlerConfig().setProvider(RdmaIoHandlerConfig.PROVIDER_EMULATED)));

    static {
        // the suite's "bad host" must be a host that never answers (a timeout), not one with no route
        try {
            EmulatedFabric.defaultFabric().addBlackhole(InetAddress.getByName("198.51.100.254"));
        } catch (UnknownHostException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** The allocators of Netty's suite, and {@link RdmaByteBufAllocator} whose buffers are written with no copy. */
    public static List<ByteBufAllocator> allocators() {
        return Arrays.asList(PooledByteBufAllocator.DEFAULT, new AdaptiveByteBufAllocator(),
                RdmaByteBufAllocator.DEFAULT);
    }

    @Override
    public List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> socket() {
        return combo(serverSocket(), clientSocket());
    }

    @Override
    public List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> socketWithFastOpen() {
        return socket();
    }

    @Override
    public List<BootstrapFactory<ServerBootstrap>> serverSocket() {
        return Collections.singletonList(
                () -> new ServerBootstrap().group(RDMA_GROUP, RDMA_SPINNING_GROUP)
                        .channel(RdmaServerSocketChannel.class));
    }

    @Override
    public List<BootstrapFactory<Bootstrap>> clientSocket() {
        return Collections.singletonList(() -> new Bootstrap().group(RDMA_GROUP).channel(RdmaSocketChannel.class));
    }

    @Override
    public List<BootstrapFactory<Bootstrap>> clientSocketWithFastOpen() {
        return clientSocket();
    }
}
