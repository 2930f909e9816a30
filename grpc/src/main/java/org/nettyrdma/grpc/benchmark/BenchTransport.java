package org.nettyrdma.grpc.benchmark;

import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.netty.channel.Channel;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.util.concurrent.DefaultThreadFactory;
import org.nettyrdma.channel.RdmaIoHandler;
import org.nettyrdma.channel.RdmaIoHandlerConfig;
import org.nettyrdma.channel.RdmaServerSocketChannel;
import org.nettyrdma.channel.RdmaSocketChannel;
import org.nettyrdma.grpc.OnReadyThresholds;
import org.nettyrdma.grpc.RdmaGrpc;

/**
 * One row of the benchmark: how its event loops are made and how it configures gRPC's builders. {@code rdma} is
 * {@link RdmaGrpc}'s configuration (its event loops too); {@code rdma-plain} what a new user writes first (channel
 * types and event loops only: grpc-netty's own allocator, the transport's default receive buffers and event loops);
 * {@code rdma-4m} is {@code rdma} with a larger window, {@code rdma-32k} with gRPC's own on-ready threshold (the
 * alternatives measured before choosing); {@code nio} and {@code epoll} are Netty's TCP transports with gRPC's
 * defaults, {@code epoll-ready} epoll with RdmaGrpc's on-ready threshold.
 */
enum BenchTransport {
    RDMA("rdma") {
        @Override
        NettyServerBuilder configure(NettyServerBuilder b, EventLoopGroup g) {
            return RdmaGrpc.configure(b, g);
        }

        @Override
        NettyChannelBuilder configure(NettyChannelBuilder b, EventLoopGroup g) {
            return RdmaGrpc.configure(b, g);
        }
    },
    /** RdmaGrpc's configuration with a 4 MiB HTTP/2 flow-control window (gRPC's default: 1 MiB, auto-tuned). */
    RDMA_WINDOW("rdma-4m") {
        @Override
        NettyServerBuilder configure(NettyServerBuilder b, EventLoopGroup g) {
            return RdmaGrpc.configure(b, g).flowControlWindow(4 << 20);
        }

        @Override
        NettyChannelBuilder configure(NettyChannelBuilder b, EventLoopGroup g) {
            return RdmaGrpc.configure(b, g).flowControlWindow(4 << 20);
        }
    },
    /** RdmaGrpc's configuration with gRPC's default on-ready threshold (32 KiB) instead of RdmaGrpc's. */
    RDMA_32K("rdma-32k") {
        @Override
        NettyServerBuilder configure(NettyServerBuilder b, EventLoopGroup g) {
            return RdmaGrpc.configure(b, g, GRPC_ON_READY_THRESHOLD);
        }

        @Override
        NettyChannelBuilder configure(NettyChannelBuilder b, EventLoopGroup g) {
            return RdmaGrpc.configure(b, g, GRPC_ON_READY_THRESHOLD);
        }
    },
    RDMA_PLAIN("rdma-plain") {
        @Override
        NettyServerBuilder configure(NettyServerBuilder b, EventLoopGroup g) {
            return b.channelType(RdmaServerSocketChannel.class).bossEventLoopGroup(g).workerEventLoopGroup(g);
        }

        @Override
        NettyChannelBuilder configure(NettyChannelBuilder b, EventLoopGroup g) {
            return b.channelType(RdmaSocketChannel.class).eventLoopGroup(g);
        }
    },
    NIO("nio") {
        @Override
        NettyServerBuilder configure(NettyServerBuilder b, EventLoopGroup g) {
            return b.channelType(NioServerSocketChannel.class).bossEventLoopGroup(g).workerEventLoopGroup(g);
        }

        @Override
        NettyChannelBuilder configure(NettyChannelBuilder b, EventLoopGroup g) {
            return b.channelType(NioSocketChannel.class).eventLoopGroup(g);
        }
    },
    EPOLL("epoll") {
        @Override
        NettyServerBuilder configure(NettyServerBuilder b, EventLoopGroup g) {
            return b.channelType(EpollServerSocketChannel.class).bossEventLoopGroup(g).workerEventLoopGroup(g);
        }

        @Override
        NettyChannelBuilder configure(NettyChannelBuilder b, EventLoopGroup g) {
            return b.channelType(EpollSocketChannel.class).eventLoopGroup(g);
        }
    },
    /** epoll with RdmaGrpc's on-ready threshold: what that threshold alone does over TCP. */
    EPOLL_READY("epoll-ready") {
        @Override
        NettyServerBuilder configure(NettyServerBuilder b, EventLoopGroup g) {
            return EPOLL.configure(b, g).intercept(OnReadyThresholds.server(RdmaGrpc.ON_READY_THRESHOLD));
        }

        @Override
        NettyChannelBuilder configure(NettyChannelBuilder b, EventLoopGroup g) {
            return EPOLL.configure(b, g).intercept(OnReadyThresholds.client(RdmaGrpc.ON_READY_THRESHOLD));
        }
    };

    /** gRPC's own on-ready threshold (its {@code AbstractStream.DEFAULT_ONREADY_THRESHOLD}). */
    static final int GRPC_ON_READY_THRESHOLD = 32 << 10;

    final String label;

    BenchTransport(String label) {
        this.label = label;
    }

    boolean isRdma() {
        return this != NIO && !isEpoll();
    }

    private boolean isEpoll() {
        return this == EPOLL || this == EPOLL_READY;
    }

    /** One event loop, for a server or a client; RDMA loops on {@code provider}. */
    EventLoopGroup newGroup(String name, String provider) {
        return new MultiThreadIoEventLoopGroup(1, new DefaultThreadFactory(label + "-" + name, true),
                ioHandlerFactory(provider));
    }

    /** The {@code IoHandler}s of this row's event loops; RDMA on {@code provider}. */
    IoHandlerFactory ioHandlerFactory(String provider) {
        switch (this) {
            case NIO:
                return NioIoHandler.newFactory();
            case EPOLL:
            case EPOLL_READY:
                return EpollIoHandler.newFactory();
            case RDMA_PLAIN:
                return RdmaIoHandler.newFactory(new RdmaIoHandlerConfig().setProvider(provider));
            default:
                return RdmaIoHandler.newFactory(RdmaGrpc.newIoHandlerConfig().setProvider(provider));
        }
    }

    /** A new unconnected client channel of this row's type. */
    Channel newChannel() {
        switch (this) {
            case NIO:
                return new NioSocketChannel();
            case EPOLL:
            case EPOLL_READY:
                return new EpollSocketChannel();
            default:
                return new RdmaSocketChannel();
        }
    }

    /** A new server channel of this row's type. */
    ServerChannel newServerChannel() {
        switch (this) {
            case NIO:
                return new NioServerSocketChannel();
            case EPOLL:
            case EPOLL_READY:
                return new EpollServerSocketChannel();
            default:
                return new RdmaServerSocketChannel();
        }
    }

    abstract NettyServerBuilder configure(NettyServerBuilder b, EventLoopGroup g);

    abstract NettyChannelBuilder configure(NettyChannelBuilder b, EventLoopGroup g);

    static BenchTransport byLabel(String label) {
        for (BenchTransport t : values()) {
            if (t.label.equals(label)) {
                return t;
            }
        }
        throw new IllegalArgumentException("unknown transport " + label
                + " (rdma, rdma-plain, rdma-4m, rdma-32k, nio, epoll, epoll-ready)");
    }
}
