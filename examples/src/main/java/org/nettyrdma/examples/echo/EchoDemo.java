package org.nettyrdma.examples.echo;

import io.netty.channel.Channel;
import io.netty.channel.EventLoopGroup;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;
import org.nettyrdma.channel.RdmaIoHandlerConfig;
import org.nettyrdma.examples.Transport;

import java.net.InetSocketAddress;

/** {@code EchoServer} and {@code EchoClient} in one JVM over RDMA (native where available, else emulated): {@code EchoDemo [host]}. */
public final class EchoDemo {
    private static final Logger logger = LogManager.getLogger(EchoDemo.class);

    private EchoDemo() {
    }

    public static void main(String[] args) {
        String host = args.length > 0 ? args[0] : "127.0.0.1";
        Transport transport = Transport.rdma(RdmaIoHandlerConfig.PROVIDER_AUTO);
        EventLoopGroup serverGroup = transport.newGroup(1);
        EventLoopGroup clientGroup = transport.newGroup(1);
        int status = 0;
        try {
            Channel server = EchoServer.start(transport, serverGroup, new InetSocketAddress(host, 0));
            logger.info("echo server on {} over {}", server.localAddress(), transport);
            EchoClient.run(transport, clientGroup, (InetSocketAddress) server.localAddress());
            server.close().sync();
        } catch (Exception e) {
            logger.error("echo demo failed", e);
            status = 1;
        } finally {
            clientGroup.shutdownGracefully().syncUninterruptibly();
            serverGroup.shutdownGracefully().syncUninterruptibly();
        }
        System.exit(status);
    }
}
