package org.nettyrdma.examples.echo;

import io.netty.channel.Channel;
import io.netty.channel.EventLoopGroup;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;
import org.nettyrdma.channel.RdmaIoHandlerConfig;
import org.nettyrdma.examples.Transport;

import java.net.InetSocketAddress;

/** EchoServer and EchoClient in one JVM: {@code EchoDemo [address]}, native RDMA on that address, else emulated. */
public final class EchoDemo {
    private static final Logger logger = LogManager.getLogger(EchoDemo.class);

    private EchoDemo() {
    }

    public static void main(String[] args) {
        boolean nativeRdma = args.length > 0 && Transport.nativeRdmaOn(args[0]);
        String host = nativeRdma ? args[0] : "127.0.0.1";
        Transport transport = Transport.rdma(nativeRdma ? RdmaIoHandlerConfig.PROVIDER_NATIVE
                : RdmaIoHandlerConfig.PROVIDER_EMULATED);
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
