package org.nettyrdma.examples.echo;

import io.netty.channel.Channel;
import io.netty.channel.EventLoopGroup;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;
import org.nettyrdma.examples.Transport;

import java.net.InetSocketAddress;
import java.util.Arrays;

/** An RDMA echo server: {@code EchoServer host port [--emulated]}; every byte a client sends comes back. */
public final class EchoServer {
    private static final Logger logger = LogManager.getLogger(EchoServer.class);

    private EchoServer() {
    }

    public static void main(String[] args) throws InterruptedException {
        if (args.length < 2) {
            System.err.println("usage: EchoServer host port [--emulated]");
            System.exit(2);
        }
        Transport transport = Transport.rdma(Arrays.asList(args).contains("--emulated"));
        EventLoopGroup group = transport.newGroup(0);
        try {
            Channel server = start(transport, group, new InetSocketAddress(args[0], Integer.parseInt(args[1])));
            logger.info("echo server on {} over {}", server.localAddress(), transport);
            server.closeFuture().sync();
        } finally {
            group.shutdownGracefully();
        }
    }

    /** Binds an echo server to {@code address} on {@code group}; returns the listening channel. */
    public static Channel start(Transport transport, EventLoopGroup group, InetSocketAddress address)
            throws InterruptedException {
        return transport.serverBootstrap(group)
                .childHandler(EchoServerHandler.INSTANCE)
                .bind(address).sync().channel();
    }
}
